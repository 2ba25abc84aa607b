//! Route ownership end to end, on the in-memory API server: the operator's ScaledObject
//! controller and the activator's watches and proxy see the same ScaledObjects and apply the
//! same rule (`keda_scalers::scalers::http::claims`). A ScaledObject of a second namespace
//! claiming a path under a host another namespace routes is refused: the operator says so in
//! its status (`Ready=False HTTPRouteConflict`) and a Warning Event, and the activator keeps
//! sending that host's traffic to the first namespace's Service. When the owner is deleted, the
//! route passes to the next-oldest claim. A host policy refuses a host outside a namespace's
//! patterns the same way. Objects that exist before the operator and the activator start are
//! judged as when they came one by one. A host the policy lists for a namespace stays that
//! namespace's while its owner is deleted and created again.
//!
//! Real here: memkube's REST/watch API, the operator's controller (finalizer, status, events,
//! the `http` push scaler), the activator's watches and proxy over TCP, real HTTP backends.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{backend, get};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::events::v1::Event;
use keda_activator::metrics::Metrics;
use keda_activator::proxy::Proxy;
use keda_activator::server::{self, Readiness};
use keda_activator::targets::Targets;
use keda_activator::watch::{self, EndpointSources, WatchConfig};
use keda_api::ScaledObject;
use keda_operator::{ControllerConfig, ScaledObjectController};
use keda_scalers::scalers::http::claims::HostPolicy;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A cluster with an operator and an activator running under `policy`.
struct Cluster {
    kube: memkube::MemKube,
    client: Client,
    activator: SocketAddr,
    stop: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Cluster {
    async fn start(namespaces: &[&str], policy: HostPolicy) -> Cluster {
        let mut cluster = Cluster::stopped(namespaces);
        cluster.run(policy).await;
        cluster
    }

    /// The API server alone: objects made now exist before the operator and the activator
    /// start ([`Cluster::run`]), as after a restart.
    fn stopped(namespaces: &[&str]) -> Cluster {
        let kube = memkube::MemKube::new();
        let crd_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/crd");
        kube.load_crds_from_dir(crd_dir).expect("CRDs");
        for ns in namespaces {
            kube.create_namespace(ns).expect("namespace");
        }
        let client = kube.client();
        Cluster {
            kube,
            client,
            activator: SocketAddr::from(([127, 0, 0, 1], 0)),
            stop: CancellationToken::new(),
        }
    }

    /// Starts the operator and the activator under `policy`.
    async fn run(&mut self, policy: HostPolicy) {
        let (client, stop) = (self.client.clone(), self.stop.clone());
        let controller = ScaledObjectController::new(
            client.clone(),
            ControllerConfig {
                // Longer than any wait below: a refused object must be reconciled when its
                // verdict changes, not by a retry.
                retry_after_error: Duration::from_secs(60),
                http_host_policy: policy.clone(),
                ..ControllerConfig::default()
            },
        );
        tokio::spawn({
            let stop = stop.clone();
            async move {
                let _ = controller.run(stop).await;
            }
        });

        let metrics = Arc::new(Metrics::new());
        let (wake_tx, mut wake_rx) = mpsc::channel(1024);
        // Nobody reports wake-ups here: drain them.
        tokio::spawn(async move { while wake_rx.recv().await.is_some() {} });
        let targets = Targets::new(wake_tx, Arc::clone(&metrics));
        let ready = Readiness::default();
        // The binary's default: endpoints only from the EndpointSlice controller's slices.
        tokio::spawn(watch::run_with_endpoints(
            client.clone(),
            WatchConfig {
                host_policy: policy,
                ..WatchConfig::default()
            },
            EndpointSources::ControllerManaged,
            Arc::clone(&targets),
            ready.clone(),
            stop.clone(),
        ));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let activator = listener.local_addr().expect("addr");
        let proxy = Arc::new(Proxy::new(targets.routes(), metrics));
        tokio::spawn(server::serve_proxy(
            listener,
            proxy,
            stop.clone(),
            Duration::from_secs(5),
        ));
        common::eventually("the activator's watches to sync", || ready.get()).await;
        self.activator = activator;
    }

    /// A Deployment `name` at 1 replica and its Service's ready EndpointSlice pointing at `pod`.
    async fn workload(&self, ns: &str, name: &str, pod: SocketAddr) {
        let deployment: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                             "spec": {"containers": [{"name": name, "image": name}]}}
            }
        }))
        .expect("deployment");
        Api::<Deployment>::namespaced(self.client.clone(), ns)
            .create(&PostParams::default(), &deployment)
            .await
            .expect("create deployment");
        // As the EndpointSlice controller writes it.
        self.slice(
            ns,
            &format!("{name}-1"),
            name,
            pod,
            Some("endpointslice-controller.k8s.io"),
            Some(json!({"kind": "Pod", "namespace": ns, "name": format!("{name}-0")})),
        )
        .await;
    }

    /// EndpointSlice `ns/slice` of Service `service`, one ready endpoint at `pod`, labelled
    /// as managed by `managed_by`, the endpoint's `targetRef` `target`.
    async fn slice(
        &self,
        ns: &str,
        slice: &str,
        service: &str,
        pod: SocketAddr,
        managed_by: Option<&str>,
        target: Option<serde_json::Value>,
    ) {
        let mut labels = json!({"kubernetes.io/service-name": service});
        if let Some(manager) = managed_by {
            labels["endpointslice.kubernetes.io/managed-by"] = json!(manager);
        }
        let mut endpoint =
            json!({"addresses": [pod.ip().to_string()], "conditions": {"ready": true}});
        if let Some(target) = target {
            endpoint["targetRef"] = target;
        }
        let slice: EndpointSlice = serde_json::from_value(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": slice, "namespace": ns, "labels": labels},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": pod.port(), "protocol": "TCP"}],
            "endpoints": [endpoint]
        }))
        .expect("slice");
        Api::<EndpointSlice>::namespaced(self.client.clone(), ns)
            .create(&PostParams::default(), &slice)
            .await
            .expect("create slice");
    }

    /// ScaledObject `ns/name` routing `hosts` + `prefixes` to Service `name`; `created` seeds
    /// its creation time (an object made long ago), else the API stamps it now.
    async fn scaled_object(
        &self,
        ns: &str,
        name: &str,
        hosts: &str,
        prefixes: &str,
        created: Option<&str>,
    ) {
        let mut so = json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "scaleTargetRef": {"name": name},
                "minReplicaCount": 1,
                "triggers": [{"type": "http", "metadata": {
                    "hosts": hosts, "pathPrefixes": prefixes, "service": name, "port": "http"
                }}]
            }
        });
        match created {
            Some(time) => {
                so["metadata"]["creationTimestamp"] = json!(time);
                self.kube.seed(&so).expect("seed scaledobject");
            }
            None => {
                let so: ScaledObject = serde_json::from_value(so).expect("scaledobject");
                Api::<ScaledObject>::namespaced(self.client.clone(), ns)
                    .create(&PostParams::default(), &so)
                    .await
                    .expect("create scaledobject");
            }
        }
    }

    /// The Ready condition of `ns/name` once `accept` takes it: (status, reason, message).
    async fn ready_when(
        &self,
        ns: &str,
        name: &str,
        accept: impl Fn(&str, &str) -> bool,
    ) -> (String, String, String) {
        let api = Api::<ScaledObject>::namespaced(self.client.clone(), ns);
        let mut last = None;
        for _ in 0..1000 {
            let so = api.get(name).await.expect("get scaledobject");
            let ready = so
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| {
                    (
                        c.status,
                        c.reason.unwrap_or_default(),
                        c.message.unwrap_or_default(),
                    )
                });
            if let Some((status, reason, message)) = &ready
                && accept(status, reason)
            {
                return (status.clone(), reason.clone(), message.clone());
            }
            last = ready;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("Ready of {ns}/{name} never matched; last {last:?}");
    }

    /// The Warning Events on `ns/name` with `reason`.
    async fn warnings(&self, ns: &str, name: &str, reason: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            })
            .collect()
    }

    /// GET through the activator until it answers `expected` (routes follow the watch).
    async fn answers(&self, host: &str, path: &str, expected: (u16, &str)) {
        let client = common::client();
        let mut last = (0, String::new());
        for _ in 0..1000 {
            last = get(&client, self.activator, host, path).await;
            if last.0 == expected.0 && last.1.contains(expected.1) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{host}{path}: expected {expected:?}, last {last:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_namespace_claiming_a_path_of_anothers_host_is_refused_until_the_owner_goes() {
    let cluster = Cluster::start(&["shop", "attacker"], HostPolicy::allow_all()).await;
    let (shop_pod, _) = backend("shop").await;
    let (attacker_pod, attacker_seen) = backend("attacker").await;
    cluster.workload("shop", "shop", shop_pod).await;
    cluster.workload("attacker", "steal", attacker_pod).await;
    // The shop's object is the older one; "attacker" sorts first, so a rule that ignored the
    // creation time (namespace order alone) would hand it the route.
    cluster
        .scaled_object(
            "shop",
            "shop",
            "shop.example.com",
            "/",
            Some("2026-01-01T00:00:00Z"),
        )
        .await;
    cluster
        .answers("shop.example.com", "/login", (200, "hello from shop"))
        .await;
    cluster
        .scaled_object("attacker", "steal", "shop.example.com", "/login", None)
        .await;

    // The operator refuses it, naming the conflict and the owner, with a Warning Event.
    let (_, reason, message) = cluster
        .ready_when("attacker", "steal", |status, _| status == "False")
        .await;
    assert_eq!(reason, "HTTPRouteConflict");
    assert!(
        message.contains("route shop.example.com/login overlaps route shop.example.com/ of ScaledObject shop/shop"),
        "{message}"
    );
    common::within(10, "the Warning Event", async {
        while cluster
            .warnings("attacker", "steal", "HTTPRouteConflict")
            .await
            .is_empty()
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    // The owner stays ready, and the activator keeps its traffic, /login included.
    let (status, _, _) = cluster.ready_when("shop", "shop", |s, _| s == "True").await;
    assert_eq!(status, "True");
    let client = common::client();
    for path in ["/login", "/login/submit", "/"] {
        assert_eq!(
            get(&client, cluster.activator, "shop.example.com", path).await,
            (200, "hello from shop".to_string()),
            "{path}"
        );
    }
    assert_eq!(
        attacker_seen
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the refused namespace got none of the shop's requests"
    );

    // The owner goes: the next-oldest claim takes the route and its condition clears.
    Api::<ScaledObject>::namespaced(cluster.client.clone(), "shop")
        .delete("shop", &DeleteParams::default())
        .await
        .expect("delete the owner");
    let (_, reason, _) = cluster
        .ready_when("attacker", "steal", |status, _| status == "True")
        .await;
    assert_eq!(reason, "ScaledObjectReady");
    cluster
        .answers("shop.example.com", "/login", (200, "hello from attacker"))
        .await;
    cluster
        .answers("shop.example.com", "/", (404, "no_route"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_policy_refuses_a_host_outside_the_namespaces_patterns() {
    let policy = HostPolicy::from_yaml(
        "shop: [shop.example.com, \"*.shop.example.com\"]\nteam: [\"*.team.example.com\"]\n",
    )
    .expect("policy");
    let cluster = Cluster::start(&["shop", "team"], policy).await;
    let (shop_pod, _) = backend("shop").await;
    let (team_pod, team_seen) = backend("team").await;
    cluster.workload("shop", "shop", shop_pod).await;
    cluster.workload("team", "web", team_pod).await;
    // The team claims a host of the shop's (it would be the first claim, so only the policy
    // refuses it), and the shop claims its own.
    cluster
        .scaled_object(
            "team",
            "web",
            "api.shop.example.com",
            "/",
            Some("2025-01-01T00:00:00Z"),
        )
        .await;
    cluster
        .scaled_object("shop", "shop", "api.shop.example.com", "/", None)
        .await;
    let (_, reason, message) = cluster
        .ready_when("team", "web", |status, _| status == "False")
        .await;
    assert_eq!(reason, "HTTPHostNotAllowed");
    assert!(
        message.contains("host \"api.shop.example.com\" is not allowed for namespace \"team\""),
        "{message}"
    );
    common::within(10, "the Warning Event", async {
        while cluster
            .warnings("team", "web", "HTTPHostNotAllowed")
            .await
            .is_empty()
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    cluster.ready_when("shop", "shop", |s, _| s == "True").await;
    cluster
        .answers("api.shop.example.com", "/", (200, "hello from shop"))
        .await;
    assert_eq!(
        team_seen.requests.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

/// Finding 8 of issue 30, the start-up bug: both ScaledObjects exist as the operator starts (a
/// restart, a leader change), so they arrive in the watch's initial list. The operator used to
/// keep verdicts computed before its cache held that list, and left the later claim
/// `Ready=True` while the activator refused it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_that_exist_before_the_operator_starts_are_judged_as_when_made_one_by_one() {
    let mut cluster = Cluster::stopped(&["shop", "attacker"]);
    let (shop_pod, _) = backend("shop").await;
    let (attacker_pod, attacker_seen) = backend("attacker").await;
    cluster.workload("shop", "shop", shop_pod).await;
    cluster.workload("attacker", "steal", attacker_pod).await;
    // Two seconds apart, as on the real API server where this was seen.
    cluster
        .scaled_object(
            "shop",
            "shop",
            "shop.example.com",
            "/",
            Some("2026-01-01T00:00:00Z"),
        )
        .await;
    cluster
        .scaled_object(
            "attacker",
            "steal",
            "shop.example.com",
            "/login",
            Some("2026-01-01T00:00:02Z"),
        )
        .await;
    cluster.run(HostPolicy::allow_all()).await;

    let (_, reason, message) = cluster
        .ready_when("attacker", "steal", |status, _| status == "False")
        .await;
    assert_eq!(reason, "HTTPRouteConflict", "{message}");
    assert!(message.contains("ScaledObject shop/shop"), "{message}");
    cluster.ready_when("shop", "shop", |s, _| s == "True").await;
    // The activator agrees: the shop keeps its logins.
    cluster
        .answers("shop.example.com", "/login", (200, "hello from shop"))
        .await;
    assert_eq!(
        attacker_seen
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}
/// Finding 8 of issue 30: an owner deleted and recreated (a redeploy, a `kubectl replace`)
/// used to lose its host to an older claim of another namespace that the owner had refused
/// until then, in the operator's verdicts and the activator's routes alike. A host the policy
/// lists for a namespace by name is that namespace's, whatever the creation times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_deleted_and_recreated_keeps_its_host_from_an_older_squatter() {
    // Every namespace may use its own subdomains of apps.example.com; the shop's is listed.
    let policy =
        HostPolicy::from_yaml("shop: [shop.apps.example.com]\n\"*\": [\"*.apps.example.com\"]\n")
            .expect("policy");
    let cluster = Cluster::start(&["shop", "attacker"], policy).await;
    let (shop_pod, _) = backend("shop").await;
    let (attacker_pod, attacker_seen) = backend("attacker").await;
    cluster.workload("shop", "shop", shop_pod).await;
    cluster.workload("attacker", "steal", attacker_pod).await;
    cluster
        .scaled_object(
            "shop",
            "shop",
            "shop.apps.example.com",
            "/",
            Some("2026-01-01T00:00:00Z"),
        )
        .await;
    cluster
        .answers("shop.apps.example.com", "/login", (200, "hello from shop"))
        .await;
    // The squatter: refused, and from now on older than any new object of the shop's.
    cluster
        .scaled_object("attacker", "steal", "shop.apps.example.com", "/login", None)
        .await;
    cluster
        .ready_when("attacker", "steal", |status, _| status == "False")
        .await;

    // The owner is deleted: in the window before it is back, nobody gets the host.
    let shop = Api::<ScaledObject>::namespaced(cluster.client.clone(), "shop");
    shop.delete("shop", &DeleteParams::default())
        .await
        .expect("delete the owner");
    cluster
        .answers("shop.apps.example.com", "/", (404, "no_route"))
        .await;
    let client = common::client();
    assert_eq!(
        get(
            &client,
            cluster.activator,
            "shop.apps.example.com",
            "/login"
        )
        .await
        .0,
        404,
        "the squatter is not routed while the owner is away"
    );

    // Recreated (now younger than the squatter), the owner gets its host back at once.
    cluster
        .scaled_object("shop", "shop", "shop.apps.example.com", "/", None)
        .await;
    let (_, reason, message) = cluster.ready_when("shop", "shop", |s, _| s == "True").await;
    assert_eq!(reason, "ScaledObjectReady", "{message}");
    let (_, reason, message) = cluster
        .ready_when("attacker", "steal", |status, _| status == "False")
        .await;
    assert_eq!(reason, "HTTPHostReserved", "{message}");
    assert!(
        message.contains("\"shop.apps.example.com\"") && message.contains("namespace \"shop\""),
        "{message}"
    );
    for path in ["/login", "/"] {
        cluster
            .answers("shop.apps.example.com", path, (200, "hello from shop"))
            .await;
    }
    assert_eq!(
        attacker_seen
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the squatter got none of the shop's requests"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_written_endpoint_slice_does_not_point_the_activator_anywhere() {
    let cluster = Cluster::start(&["shop"], HostPolicy::allow_all()).await;
    let (web_pod, _) = backend("web").await;
    // What a tenant wants to reach through the activator's network position (an internal
    // service, the cloud's metadata server, another namespace's pod): here a backend.
    let (secret, secret_seen) = backend("secret").await;
    cluster
        .scaled_object("shop", "web", "web.example.com", "/", None)
        .await;
    // Slices for the ScaledObject's Service that the EndpointSlice controller did not write:
    // no manager and no targetRef; the controller's label but no targetRef; the controller's
    // label and a Pod of another namespace; the controller's label and a Service.
    let forged = [
        (None, None),
        (Some("endpointslice-controller.k8s.io"), None),
        (
            Some("endpointslice-controller.k8s.io"),
            Some(json!({"kind": "Pod", "namespace": "bank", "name": "vault-0"})),
        ),
        (
            Some("endpointslice-controller.k8s.io"),
            Some(json!({"kind": "Service", "namespace": "shop", "name": "web"})),
        ),
        (
            Some("my-own-controller"),
            Some(json!({"kind": "Pod", "namespace": "shop", "name": "web-9"})),
        ),
    ];
    for (i, (managed_by, target)) in forged.into_iter().enumerate() {
        cluster
            .slice(
                "shop",
                &format!("forged-{i}"),
                "web",
                secret,
                managed_by,
                target,
            )
            .await;
    }
    // The Service's real pod, as the controller writes it.
    cluster.workload("shop", "web", web_pod).await;
    cluster
        .answers("web.example.com", "/", (200, "hello from web"))
        .await;
    let client = common::client();
    for _ in 0..20 {
        assert_eq!(
            get(&client, cluster.activator, "web.example.com", "/").await,
            (200, "hello from web".to_owned())
        );
    }
    assert_eq!(
        secret_seen
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a forged slice led the activator to another address"
    );
}
