//! Proxy and serve modes (issue 28) on memkube: the managed Service's EndpointSlices follow the
//! mode flips, stale address families are removed, and the activator never takes its own
//! managed slices for a target's pods (no loop through itself).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use keda_activator::serve::{
    self, HttpTarget, MODE_ANNOTATION, Managed, Mode, ModeState, ServePolicy,
};
use keda_activator::watch::{EndpointSources, ready_endpoints};
use keda_scalers::scalers::http::PortRef;
use keda_scalers::scalers::http::protocol::TargetKey;
use kube::Api;
use kube::api::ListParams;

fn managed() -> Managed {
    Managed {
        namespace: "shop".into(),
        service: "shop".into(),
        target: HttpTarget {
            key: TargetKey {
                namespace: "shop".into(),
                name: "shop".into(),
                trigger: 0,
            },
            backing_service: "shop-pods".into(),
        }
        .key,
        ports: vec![(Some("http".into()), None)],
    }
}

async fn slices(api: &Api<EndpointSlice>) -> Vec<EndpointSlice> {
    let mut list = api
        .list(&ListParams::default())
        .await
        .expect("list EndpointSlices")
        .items;
    list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    list
}

async fn namespace(client: &kube::Client) {
    let ns: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
    )
    .expect("a Namespace");
    Api::all(client.clone())
        .create(&kube::api::PostParams::default(), &ns)
        .await
        .expect("create the namespace");
}

fn addresses(slice: &EndpointSlice) -> Vec<String> {
    slice
        .endpoints
        .iter()
        .flat_map(|e| e.addresses.clone())
        .collect()
}

fn mode_of(slice: &EndpointSlice) -> &str {
    slice
        .metadata
        .annotations
        .as_ref()
        .expect("managed slices are annotated")[MODE_ANNOTATION]
        .as_str()
}

#[tokio::test]
async fn slices_follow_the_flips_proxy_serve_proxy() {
    let kube = memkube::MemKube::new();
    let client = kube.client();
    namespace(&client).await;
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), "shop");
    let m = managed();
    let policy = ServePolicy {
        enter_ready: 2,
        leave_ready: 1,
        settle: Duration::from_secs(5),
    }
    .validated()
    .unwrap();
    let activators = [
        "10.0.0.1:8080".parse().unwrap(),
        "10.0.0.2:8080".parse().unwrap(),
    ];
    let pods = [
        "10.1.0.1:9000".parse().unwrap(),
        "10.1.0.2:9000".parse().unwrap(),
        "[fd00::3]:9000".parse().unwrap(),
    ];
    let t0 = Instant::now();
    let mut state = ModeState::new();
    let mut written = Vec::new();
    // ready pods per second: cold start, settle, a dip within the band, scale to zero.
    let timeline: [(u64, usize, bool); 7] = [
        (0, 0, false),
        (1, 3, false),
        (6, 3, false),
        (7, 1, false),
        (8, 3, true),
        (9, 3, true),
        (10, 0, true),
    ];
    for (sec, ready, to_zero) in timeline {
        let mode = state.step(&policy, ready, to_zero, t0 + Duration::from_secs(sec));
        let addrs: &[std::net::SocketAddr] = match mode {
            Mode::Proxy => &activators,
            Mode::Serve => &pods[..ready.min(pods.len())],
        };
        let desired = serve::desired_slices(&m, mode, addrs).unwrap();
        serve::write_slices(&client, &m, &desired).await.unwrap();
        let now = slices(&api).await;
        written.push((sec, mode, now.clone()));
        for slice in &now {
            assert_eq!(mode_of(slice), mode.as_str(), "second {sec}");
        }
    }
    let modes: Vec<Mode> = written.iter().map(|(_, m, _)| *m).collect();
    use Mode::{Proxy, Serve};
    assert_eq!(modes, [Proxy, Proxy, Serve, Serve, Proxy, Proxy, Proxy]);

    // Serve at 6 s: both families of the pods; the dip at 7 s keeps serving with one pod and
    // removes the IPv6 slice that no longer has an address.
    let (_, _, at6) = &written[2];
    assert_eq!(at6.len(), 2);
    assert_eq!(addresses(&at6[0]), ["10.1.0.1", "10.1.0.2"]);
    assert_eq!(addresses(&at6[1]), ["fd00::3"]);
    let (_, _, at7) = &written[3];
    assert_eq!(at7.len(), 1, "the IPv6 slice is deleted");
    assert_eq!(addresses(&at7[0]), ["10.1.0.1"]);
    // Back to proxy before zero: the activators again.
    let (_, _, at10) = &written[6];
    assert_eq!(addresses(&at10[0]), ["10.0.0.1", "10.0.0.2"]);
    assert_eq!(at10[0].ports.as_ref().unwrap()[0].port, Some(8080));

    // The activator never routes to its own managed slices (strict sources), and they are not
    // mistaken for the backing Service's pods either way.
    let arcs: Vec<Arc<EndpointSlice>> = slices(&api).await.into_iter().map(Arc::new).collect();
    assert!(
        ready_endpoints(
            &arcs,
            "shop",
            "shop",
            &PortRef::Only,
            EndpointSources::ControllerManaged
        )
        .is_empty()
    );
    assert!(
        ready_endpoints(
            &arcs,
            "shop",
            "shop-pods",
            &PortRef::Only,
            EndpointSources::Any
        )
        .is_empty()
    );
}

#[tokio::test]
async fn a_refused_address_writes_nothing() {
    let kube = memkube::MemKube::new();
    let client = kube.client();
    namespace(&client).await;
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), "shop");
    let m = managed();
    let ok = serve::desired_slices(&m, Mode::Proxy, &["10.0.0.1:8080".parse().unwrap()]).unwrap();
    serve::write_slices(&client, &m, &ok).await.unwrap();
    let bad = serve::desired_slices(
        &m,
        Mode::Serve,
        &[
            "10.1.0.1:9000".parse().unwrap(),
            "169.254.1.1:9000".parse().unwrap(),
        ],
    );
    assert!(bad.is_err());
    let now = slices(&api).await;
    assert_eq!(now.len(), 1);
    assert_eq!(mode_of(&now[0]), "proxy");
    assert_eq!(addresses(&now[0]), ["10.0.0.1"]);
}
