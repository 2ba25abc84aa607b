//! A webhook server over TLS on a loopback port, its caches fed by memkube, and a `kube`
//! client that sends it AdmissionReview v1 requests as the API server does.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use keda_tls::CertStore;
use keda_tls::pki::CertificateAuthority;
use keda_webhook::app::AppState;
use keda_webhook::cache::Caches;
use keda_webhook::metrics::Metrics;
use keda_webhook::start::{server_tls, webhook_server};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionResponse, AdmissionReview};
use memkube::MemKube;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The repository root.
pub fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// memkube with keda-rs' CRDs and namespace `team`.
pub fn cluster() -> MemKube {
    let kube = MemKube::new();
    kube.load_crds_from_dir(root().join("config/crd")).unwrap();
    kube.create_namespace("team").unwrap();
    kube
}

/// A running webhook.
pub struct Webhook {
    /// What the handlers share (caches, metrics).
    pub state: AppState,
    /// A client of the webhook's HTTPS port that trusts its CA.
    pub client: kube::Client,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    cancel: CancellationToken,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// The CA of the test certificates, and a serving certificate for loopback.
pub fn serving_material() -> (String, Arc<CertStore>) {
    let ca = CertificateAuthority::new("webhook-test-ca").unwrap();
    let pair = ca
        .issue_server("keda-admission-webhooks", &["localhost", "127.0.0.1"])
        .unwrap();
    let key = keda_tls::certified_key(pair.cert.as_bytes(), pair.key.as_bytes(), "test").unwrap();
    (ca.cert_pem(), Arc::new(CertStore::new(key)))
}

/// A kube client of `url` trusting `ca_pem`.
pub fn client_of(url: &str, ca_pem: &str) -> kube::Client {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.root_cert = Some(vec![
        CertificateDer::from_pem_slice(ca_pem.as_bytes())
            .unwrap()
            .to_vec(),
    ]);
    config.read_timeout = Some(Duration::from_secs(10));
    // The API server does not retry a webhook; neither may the test client (kube retries 503).
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// KEDA's examples are valid with KEDA's reach; the refusals are tested apart.
fn keda_identity() -> keda_api::identity::IdentityPolicy {
    keda_api::identity::IdentityPolicy {
        allow_namespace_vault_operator_identity: true,
        allow_namespace_aws_operator_identity: false,
        bound_token_service_accounts: keda_api::identity::ServiceAccountAllowList::any(),
    }
}

impl Webhook {
    /// A webhook whose caches follow `kube`, serving once they have listed.
    pub async fn start(kube: &MemKube) -> Self {
        let caches = Arc::new(Caches::new());
        let cancel = CancellationToken::new();
        caches.follow(&kube.client(), &cancel);
        // Its Events go to `kube`, as KEDA's webhook's (reporter `keda-admission`).
        let events = kube::runtime::events::Recorder::new(
            kube.client(),
            kube::runtime::events::Reporter::from("keda-admission"),
        );
        let webhook = Self::serve_publishing(caches, cancel, keda_identity(), Some(events)).await;
        webhook.wait_synced().await;
        webhook
    }

    /// A webhook over `caches` as they are.
    pub async fn serve(caches: Arc<Caches>, cancel: CancellationToken) -> Self {
        Self::serve_with(caches, cancel, keda_identity()).await
    }

    /// A webhook over `caches` with the identity rules of `identity`.
    pub async fn serve_with(
        caches: Arc<Caches>,
        cancel: CancellationToken,
        identity: keda_api::identity::IdentityPolicy,
    ) -> Self {
        Self::serve_publishing(caches, cancel, identity, None).await
    }

    /// [`serve_with`](Self::serve_with), publishing Events through `events`.
    pub async fn serve_publishing(
        caches: Arc<Caches>,
        cancel: CancellationToken,
        identity: keda_api::identity::IdentityPolicy,
        events: Option<kube::runtime::events::Recorder>,
    ) -> Self {
        let state = AppState {
            caches,
            metrics: Arc::new(Metrics::new()),
            identity,
            events,
        };
        let (ca, store) = serving_material();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "https://127.0.0.1:{}",
            listener.local_addr().unwrap().port()
        );
        let server = webhook_server(state.clone(), listener, server_tls(store), 1).unwrap();
        let handle = server.handle();
        tokio::spawn(server);
        let stop = cancel.clone();
        tokio::spawn(async move {
            stop.cancelled().await;
            handle.stop(false).await;
        });
        Self {
            state,
            client: client_of(&url, &ca),
            url,
            cancel,
        }
    }

    /// Waits (up to 10 s) until every cache has listed.
    pub async fn wait_synced(&self) {
        for _ in 0..1000 {
            if self.state.caches.synced() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the caches did not list within 10 s");
    }

    /// POSTs `review` to `path`; the HTTP error when the answer is not 200.
    pub async fn post(&self, path: &str, review: &Value) -> Result<AdmissionResponse, kube::Error> {
        let request = http::Request::post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(review).unwrap())
            .unwrap();
        let answer: AdmissionReview<DynamicObject> = self.client.request(request).await?;
        Ok(answer.response.expect("a response"))
    }

    /// POSTs `review` to `path`, expecting an AdmissionReview answer.
    pub async fn answer(&self, path: &str, review: &Value) -> AdmissionResponse {
        self.post(path, review).await.unwrap()
    }
}

/// The plural resource of a keda.sh kind.
fn resource_of(kind: &str) -> &'static str {
    match kind {
        "ScaledObject" => "scaledobjects",
        "ScaledJob" => "scaledjobs",
        "TriggerAuthentication" => "triggerauthentications",
        _ => "clustertriggerauthentications",
    }
}

/// An AdmissionReview v1 as the API server sends it for `operation` (`CREATE`, `UPDATE`) of
/// `object`.
pub fn review(operation: &str, object: &Value, old: Option<&Value>, dry_run: bool) -> Value {
    let kind = object["kind"].as_str().unwrap_or("ScaledObject");
    let gvk = json!({"group": "keda.sh", "version": "v1alpha1", "kind": kind});
    let gvr = json!({"group": "keda.sh", "version": "v1alpha1", "resource": resource_of(kind)});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": object["metadata"]["name"],
            "namespace": object["metadata"]["namespace"],
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": if operation == "CREATE" { "CreateOptions" } else { "UpdateOptions" }},
        }
    })
}

/// A ScaledObject in `team` scaling Deployment `target` with `triggers`.
pub fn scaled_object(name: &str, target: &str, triggers: Value) -> Value {
    json!({
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"scaleTargetRef": {"name": target}, "triggers": triggers},
    })
}

/// A redis trigger.
pub fn redis() -> Value {
    json!([{"type": "redis", "metadata": {"address": "redis:6379", "listName": "jobs", "listLength": "5"}}])
}

/// A Deployment `name` in `namespace` with containers `(name, cpu request, memory request)`.
pub fn deployment(
    namespace: &str,
    name: &str,
    containers: &[(&str, Option<&str>, Option<&str>)],
) -> Value {
    let containers: Vec<Value> = containers
        .iter()
        .map(|(c, cpu, memory)| {
            let mut requests = serde_json::Map::new();
            if let Some(cpu) = cpu {
                requests.insert("cpu".into(), json!(cpu));
            }
            if let Some(memory) = memory {
                requests.insert("memory".into(), json!(memory));
            }
            json!({"name": c, "image": "app", "resources": {"requests": requests}})
        })
        .collect();
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}},
        },
    })
}
