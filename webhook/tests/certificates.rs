//! Without certificate files the webhook issues its own CA and certificate into Secret
//! `keda-rs-webhook-certs`, serves it, and writes the CA into the `caBundle` of its
//! ValidatingWebhookConfiguration: against memkube, and then over TLS as the API server
//! verifies it (the Service's DNS name, the bundle as the only root).
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use keda_tls::secrets::{CA_CERT, TLS_CERT};
use keda_webhook::app::{AppState, SCALED_OBJECT_PATH};
use keda_webhook::cache::Caches;
use keda_webhook::certs::{SECRET_NAME, SecretCertificate, issue, renewal_reason};
use keda_webhook::metrics::Metrics;
use keda_webhook::start::{server_tls, webhook_server};
use kube::Api;
use memkube::MemKube;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::json;

fn configuration() -> serde_json::Value {
    let webhook = |name: &str, path: &str| {
        json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"service": {"name": "keda-admission-webhooks", "namespace": "keda", "path": path}},
            "rules": [{"apiGroups": ["keda.sh"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"], "resources": ["scaledobjects"]}],
        })
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "keda-admission"},
        "webhooks": [
            webhook("vscaledobject.kb.io", SCALED_OBJECT_PATH),
            webhook("vscaledjob.kb.io", "/validate-keda-sh-v1alpha1-scaledjob"),
        ],
    })
}

fn data(secret: &Secret, key: &str) -> Vec<u8> {
    secret.data.as_ref().unwrap()[key].0.clone()
}

#[tokio::test]
async fn the_webhook_issues_its_secret_serves_it_and_sets_the_ca_bundle() {
    let kube = MemKube::new();
    kube.create_namespace("keda").unwrap();
    kube.seed(&configuration()).unwrap();
    let secrets: Api<Secret> = Api::namespaced(kube.client(), "keda");
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(kube.client());

    let certificate = SecretCertificate::start(kube.client(), "keda", "keda-admission")
        .await
        .unwrap();
    let secret = secrets.get(SECRET_NAME).await.unwrap();
    let ca = data(&secret, CA_CERT);
    let config = configurations.get("keda-admission").await.unwrap();
    let bundles: Vec<_> = config
        .webhooks
        .unwrap()
        .into_iter()
        .map(|w| w.client_config.ca_bundle.unwrap().0)
        .collect();
    assert_eq!(bundles, [ca.clone(), ca.clone()]);

    // A second replica (or a restart) uses the Secret as it is.
    SecretCertificate::start(kube.client(), "keda", "keda-admission")
        .await
        .unwrap();
    let again = secrets.get(SECRET_NAME).await.unwrap();
    assert_eq!(data(&again, TLS_CERT), data(&secret, TLS_CERT));

    // The API server's view: the Service's name, the bundle as the only root.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let caches = Arc::new(Caches::new());
    caches.mark_listed();
    let state = AppState {
        caches,
        metrics: Arc::new(Metrics::new()),
        identity: Default::default(),
        events: None,
    };
    let server = webhook_server(state, listener, server_tls(certificate.store), 1).unwrap();
    tokio::spawn(server);
    let mut config = kube::Config::new(url.parse().unwrap());
    config.root_cert = Some(vec![CertificateDer::from_pem_slice(&ca).unwrap().to_vec()]);
    config.tls_server_name = Some("keda-admission-webhooks.keda.svc".to_string());
    let client = kube::Client::try_from(config).unwrap();
    let request = http::Request::get("/readyz").body(Vec::new()).unwrap();
    assert_eq!(client.request_text(request).await.unwrap(), "ok");
}

#[test]
fn a_certificate_is_renewed_ninety_days_before_its_end_and_the_bundle_keeps_the_old_ca() {
    let now = jiff::Timestamp::now();
    let fresh = issue(None, "keda", now).unwrap();
    assert_eq!(renewal_reason(Some(&fresh), "keda", now.as_second()), None);
    assert_eq!(
        renewal_reason(None, "keda", now.as_second()).as_deref(),
        Some("it does not exist")
    );
    assert_eq!(
        renewal_reason(Some(&fresh), "other", now.as_second())
            .map(|r| r.starts_with("its certificate names")),
        Some(true)
    );
    // 300 days later, 65 remain of the one-year certificate.
    let later = now + jiff::SignedDuration::from_hours(300 * 24);
    assert_eq!(
        renewal_reason(Some(&fresh), "keda", later.as_second()).as_deref(),
        Some("its certificate ends within 90 days")
    );
    let renewed = issue(Some(&fresh), "keda", later).unwrap();
    let bundle = String::from_utf8(data(&renewed, CA_CERT)).unwrap();
    assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 2, "{bundle}");
    assert!(bundle.contains(String::from_utf8(data(&fresh, CA_CERT)).unwrap().trim()));
    assert_eq!(
        renewal_reason(Some(&renewed), "keda", later.as_second()),
        None
    );
}
