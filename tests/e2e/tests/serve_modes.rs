//! Issue 28 on a real API server (ignored: needs `KEDA_RS_E2E_KUBECONFIG`): the managed
//! Service's EndpointSlices flip proxy -> serve -> proxy before zero through server-side
//! apply, and the API server refuses the loopback and link-local addresses memkube accepts
//! (why the slice builder refuses them first).
//!
//! And the request stream of `activator/tests/scenarios/serve_stream.rs` through proxy ->
//! serve -> proxy -> zero -> back, every request answered exactly once: the activator's watch
//! and serve-mode task run in the test process against the real API server, the pod and the
//! activator's proxy listen on this machine's non-loopback address (which the API server takes
//! in EndpointSlices), and a stand-in for kube-proxy reads the managed slices before each
//! request; no traffic goes through the cluster.

#[path = "../../../activator/tests/scenarios/serve_stream.rs"]
mod serve_stream;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keda_activator::serve::{
    self, MODE_ANNOTATION, Managed, Mode, ModeState, SERVES_ANNOTATION, ServePolicy,
};
use keda_e2e::{cluster_client, scenario_namespace};
use keda_scalers::scalers::http::protocol::TargetKey;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

#[tokio::test]
#[ignore = "needs a real cluster: KEDA_RS_E2E_KUBECONFIG"]
async fn managed_slices_flip_on_a_real_api_server() {
    let client = cluster_client().await.expect("a cluster");
    let namespace = format!("keda-rs-e2e-serve-{}", std::process::id());
    let namespaces = scenario_namespace(&client, &namespace).await;

    let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
    let service: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "shop", "annotations": {SERVES_ANNOTATION: "shop"}},
        "spec": {"ports": [{"name": "http", "port": 80}]}
    }))
    .expect("a Service");
    services
        .create(&PostParams::default(), &service)
        .await
        .expect("Service created");

    let managed = Managed {
        namespace: namespace.clone(),
        service: "shop".into(),
        target: TargetKey {
            namespace: namespace.clone(),
            name: "shop".into(),
            trigger: 0,
        },
        ports: vec![(Some("http".into()), None)],
    };
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &namespace);
    let activators = [
        "10.200.0.1:8080".parse().unwrap(),
        "10.200.0.2:8080".parse().unwrap(),
    ];
    let pods = [
        "10.201.0.1:9000".parse().unwrap(),
        "10.201.0.2:9000".parse().unwrap(),
    ];
    let policy = ServePolicy {
        enter_ready: 2,
        leave_ready: 1,
        settle: Duration::from_secs(1),
    };
    let t0 = Instant::now();
    let mut state = ModeState::new();
    let mut seen = Vec::new();
    for (sec, ready, to_zero) in [
        (0, 0, false),
        (1, 2, false),
        (3, 2, false),
        (4, 2, true),
        (5, 0, true),
    ] {
        let mode = state.step(&policy, ready, to_zero, t0 + Duration::from_secs(sec));
        let addrs: &[std::net::SocketAddr] = if mode == Mode::Serve {
            &pods
        } else {
            &activators
        };
        let desired = serve::desired_slices(&managed, mode, addrs).expect("valid addresses");
        serve::write_slices(&client, &managed, &desired)
            .await
            .expect("slices written");
        let now = slices
            .list(&ListParams::default().labels("kubernetes.io/service-name=shop"))
            .await
            .expect("slices listed");
        assert_eq!(now.items.len(), 1, "second {sec}");
        let slice = &now.items[0];
        assert_eq!(
            slice.metadata.annotations.as_ref().expect("annotations")[MODE_ANNOTATION],
            mode.as_str()
        );
        let addresses: Vec<&str> = slice
            .endpoints
            .iter()
            .map(|e| e.addresses[0].as_str())
            .collect();
        let expected: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
        assert_eq!(addresses, expected, "second {sec}");
        seen.push(mode);
    }
    assert_eq!(
        seen,
        [
            Mode::Proxy,
            Mode::Proxy,
            Mode::Serve,
            Mode::Proxy,
            Mode::Proxy
        ]
    );

    // What memkube does not enforce: a real API server refuses loopback and link-local
    // endpoint addresses.
    for bad in ["127.0.0.1", "169.254.1.1"] {
        let raw = serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "raw", "labels": {"kubernetes.io/service-name": "shop"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [bad]}],
        });
        let refused = slices
            .patch(
                "raw",
                &PatchParams::apply("keda-rs-e2e").force(),
                &Patch::Apply(raw),
            )
            .await;
        assert!(
            matches!(refused, Err(kube::Error::Api(ref e)) if e.code == 422),
            "{bad}: {refused:?}"
        );
    }

    namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
        .expect("namespace deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster: KEDA_RS_E2E_KUBECONFIG"]
async fn a_request_stream_through_the_flips_on_a_real_api_server() {
    let client = cluster_client().await.expect("a cluster");
    let namespace = format!("keda-rs-e2e-serve-stream-{}", std::process::id());
    let namespaces = scenario_namespace(&client, &namespace).await;
    // The ScaledObject's target, at zero (an admission webhook or an operator in the cluster
    // finds it; nothing here scales it).
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), &namespace);
    let deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "shop"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "shop"}},
            "template": {"metadata": {"labels": {"app": "shop"}},
                         "spec": {"containers": [{"name": "shop", "image": "shop"}]}}
        }
    }))
    .expect("a Deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("Deployment created");
    serve_stream::flips_with_a_request_stream(client.clone(), &namespace, &namespace).await;
    namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
        .expect("namespace deleted");
}
