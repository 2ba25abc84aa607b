//! The admission webhook registered with a real cluster: a ValidatingWebhookConfiguration sends
//! the cluster's ScaledObject admissions to a keda-webhook server running in this process, and a
//! second ScaledObject on the same Deployment is refused at create with KEDA's message.
//!
//! The cluster's kube-apiserver must reach this machine, as for the metrics-apiserver test: set
//! `KEDA_RS_E2E_HOST` to a DNS name or IP address it can connect to (kind on Linux: the Docker
//! bridge gateway, e.g. `172.18.0.1`; Docker Desktop: `host.docker.internal`), and open the port
//! in `KEDA_RS_E2E_WEBHOOK_PORT` (default 19443) to it.
//!
//! The webhook configuration points at a Service of type ExternalName naming that host: the API
//! server resolves a webhook's Service with the same resolver as an APIService's, which follows
//! ExternalName itself (a ClusterIP Service with an FQDN EndpointSlice would need kube-proxy,
//! which ignores FQDN slices). The API server verifies the serving certificate for
//! `<service>.<namespace>.svc`, so the test issues it for that name from a CA it puts into the
//! configuration's `caBundle`.
//!
//! The configuration is the suite's own (`keda-rs-e2e-webhook-<pid>`), limited to the test's
//! namespace by a namespace selector, with `failurePolicy: Fail` so that an unreachable webhook
//! fails the test instead of admitting silently; it is deleted at the end.

use std::net::TcpListener;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use keda_api::scaled_object::ScaledObject;
use keda_e2e::{FIELD_MANAGER, cluster_client};
use keda_tls::pki::CertificateAuthority;
use keda_tls::{CertStore, certified_key};
use keda_webhook::app::{AppState, SCALED_OBJECT_PATH};
use keda_webhook::cache::Caches;
use keda_webhook::metrics::Metrics;
use keda_webhook::start::{server_tls, webhook_server};
use kube::api::{DeleteParams, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const HOST_ENV: &str = "KEDA_RS_E2E_HOST";
const PORT_ENV: &str = "KEDA_RS_E2E_WEBHOOK_PORT";
const SERVICE: &str = "keda-rs-webhook";

/// Starts the webhook on `port` (all interfaces) with caches of the cluster, serving a
/// certificate for the Service's name; returns its CA (PEM).
async fn start_local(
    client: &Client,
    namespace: &str,
    port: u16,
    cancel: &CancellationToken,
) -> String {
    let caches = Arc::new(Caches::new());
    caches.follow(client, cancel);
    for _ in 0..600 {
        if caches.synced() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        caches.synced(),
        "the webhook's caches did not list the cluster within 60 s"
    );
    let ca = CertificateAuthority::new("e2e-webhook-ca").expect("CA");
    let name = format!("{SERVICE}.{namespace}.svc");
    let pair = ca.issue_server(SERVICE, &[&name]).expect("certificate");
    let store = Arc::new(CertStore::new(
        certified_key(pair.cert.as_bytes(), pair.key.as_bytes(), "serving").expect("loads"),
    ));
    let listener = TcpListener::bind(("0.0.0.0", port))
        .unwrap_or_else(|e| panic!("cannot listen on 0.0.0.0:{port} ({PORT_ENV}): {e}"));
    let state = AppState {
        caches,
        metrics: Arc::new(Metrics::new()),
        // The shipped defaults: no namespace borrows the operator's identity.
        identity: Default::default(),
        // No KEDAScalerInfo Events from this scenario (its objects draw no admission warning).
        events: None,
    };
    let server = webhook_server(state, listener, server_tls(store), 2).expect("server");
    let handle = server.handle();
    tokio::spawn(server);
    let stop = cancel.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        handle.stop(false).await;
    });
    ca.cert_pem()
}

fn scaled_object(namespace: &str, name: &str, min: i32, max: i32) -> ScaledObject {
    serde_json::from_value(json!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"name": "orders"},
            "minReplicaCount": min,
            "maxReplicaCount": max,
            "triggers": [{"type": "redis", "metadata": {"address": "redis:6379", "listName": "orders", "listLength": "5"}}],
        },
    }))
    .expect("a ScaledObject")
}

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn webhook_refuses_a_second_scaled_object_on_one_deployment() {
    let client = cluster_client().await.expect("a cluster to test against");
    let host = std::env::var(HOST_ENV).unwrap_or_else(|_| {
        panic!("{HOST_ENV} is not set: name this machine as the cluster's API server reaches it")
    });
    let port: u16 = std::env::var(PORT_ENV)
        .ok()
        .map(|p| {
            p.parse()
                .unwrap_or_else(|_| panic!("{PORT_ENV} is not a port"))
        })
        .unwrap_or(19443);
    let gvk = GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject");
    kube::discovery::pinned_kind(&client, &gvk)
        .await
        .expect("the keda.sh CRDs are installed (run the crds test or apply config/crd)");

    let namespace = format!("keda-rs-e2e-webhook-{}", std::process::id());
    let configuration = namespace.clone();
    let cancel = CancellationToken::new();
    let ca = start_local(&client, &namespace, port, &cancel).await;
    let result = AssertUnwindSafe(scenario(
        client.clone(),
        &namespace,
        &configuration,
        &host,
        port,
        &ca,
    ))
    .catch_unwind()
    .await;

    // Clean up whatever happened: the configuration first (the API server stops calling us),
    // then the namespace with the Service and the objects.
    let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete(&configuration, &DeleteParams::default())
        .await;
    let _ = Api::<Namespace>::all(client)
        .delete(&namespace, &DeleteParams::default())
        .await;
    cancel.cancel();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

async fn scenario(
    client: Client,
    namespace: &str,
    configuration: &str,
    host: &str,
    port: u16,
    ca: &str,
) {
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
    }))
    .expect("namespace");
    Api::<Namespace>::all(client.clone())
        .patch(namespace, &apply, &Patch::Apply(&ns))
        .await
        .expect("namespace created");
    let service: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": namespace},
        "spec": {"type": "ExternalName", "externalName": host}
    }))
    .expect("service");
    Api::<Service>::namespaced(client.clone(), namespace)
        .patch(SERVICE, &apply, &Patch::Apply(&service))
        .await
        .expect("Service created");
    let ca_bundle: Value =
        serde_json::to_value(ByteString(ca.as_bytes().to_vec())).expect("base64");
    let webhook: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": configuration},
        "webhooks": [{
            "name": "vscaledobject.e2e.keda-rs.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "clientConfig": {
                "service": {"name": SERVICE, "namespace": namespace, "path": SCALED_OBJECT_PATH, "port": port},
                "caBundle": ca_bundle,
            },
            "rules": [{"apiGroups": ["keda.sh"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"], "resources": ["scaledobjects"]}],
        }],
    }))
    .expect("a ValidatingWebhookConfiguration");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch(configuration, &apply, &Patch::Apply(&webhook))
        .await
        .expect("ValidatingWebhookConfiguration registered");

    let objects: Api<ScaledObject> = Api::namespaced(client.clone(), namespace);
    // The configuration takes effect within seconds: a dry-run create of an object with
    // min > max is refused once the API server calls us (and stored by nobody either way).
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut live = None;
    for _ in 0..60 {
        match objects
            .create(&dry_run, &scaled_object(namespace, "probe", 5, 2))
            .await
        {
            Err(kube::Error::Api(status))
                if status.message.contains("must not be greater than") =>
            {
                live = Some(status);
                break;
            }
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    assert!(
        live.is_some(),
        "the API server did not call the webhook within 60 s: can it reach {host}:{port}?"
    );

    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "orders", "namespace": namespace},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "orders"}},
            "template": {
                "metadata": {"labels": {"app": "orders"}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }))
    .expect("a Deployment");
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &deployment)
        .await
        .expect("Deployment created");

    objects
        .create(
            &PostParams::default(),
            &scaled_object(namespace, "orders", 0, 10),
        )
        .await
        .expect("the first ScaledObject is admitted");
    // The second is refused once the webhook's watch has seen the first.
    let mut refusal = None;
    for _ in 0..30 {
        match objects
            .create(
                &PostParams::default(),
                &scaled_object(namespace, "orders-2", 0, 10),
            )
            .await
        {
            Err(kube::Error::Api(status)) => {
                refusal = Some(status);
                break;
            }
            Err(other) => panic!("creating the second ScaledObject failed: {other}"),
            Ok(_) => {
                // Admitted before the watch delivered the first: undo and ask again.
                let _ = objects.delete("orders-2", &DeleteParams::default()).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    let status = refusal.expect("the second ScaledObject on one Deployment is refused");
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains(
            "the workload 'orders' of type 'apps/v1.Deployment' is already managed by the ScaledObject 'orders'"
        ),
        "{status:?}"
    );
}
