//! Without `--requestheader-client-ca-file`, the request-header settings come from ConfigMap
//! kube-system/extension-apiserver-authentication (served by memkube) and follow its changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use k8s_openapi::api::core::v1::ConfigMap;
use keda_metrics_apiserver::authn::{Authenticator, AuthnError, follow_authentication_configmap};
use keda_tls::certificates;
use keda_tls::pki::CertificateAuthority;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use memkube::MemKube;
use tokio_util::sync::CancellationToken;

fn configmap(ca: &CertificateAuthority, allowed: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("extension-apiserver-authentication".into()),
            namespace: Some("kube-system".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("requestheader-client-ca-file".into(), ca.cert_pem()),
            (
                "requestheader-allowed-names".into(),
                format!("[\"{allowed}\"]"),
            ),
            (
                "requestheader-username-headers".into(),
                "[\"X-Remote-User\"]".into(),
            ),
            (
                "requestheader-group-headers".into(),
                "[\"X-Remote-Group\"]".into(),
            ),
            (
                "requestheader-extra-headers-prefix".into(),
                "[\"X-Remote-Extra-\"]".into(),
            ),
        ])),
        ..ConfigMap::default()
    }
}

fn headers(user: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_static("x-remote-user"),
        HeaderValue::from_str(user).expect("header"),
    );
    headers
}

async fn generation_reaches(authenticator: &Authenticator, target: u64) {
    let mut generation = authenticator.subscribe();
    tokio::time::timeout(
        Duration::from_secs(10),
        generation.wait_for(|g| *g >= target),
    )
    .await
    .unwrap_or_else(|_| panic!("settings #{target} not loaded within 10 s"))
    .expect("authenticator alive");
}

#[tokio::test]
async fn settings_follow_the_extension_apiserver_authentication_configmap() {
    let kube = MemKube::new();
    let first = CertificateAuthority::new("front-proxy-ca").expect("CA");
    let second = CertificateAuthority::new("rotated-front-proxy-ca").expect("CA");
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(kube.client(), "kube-system");
    api.create(
        &PostParams::default(),
        &configmap(&first, "front-proxy-client"),
    )
    .await
    .expect("ConfigMap created");

    let authenticator = Arc::new(Authenticator::new());
    let cancel = CancellationToken::new();
    tokio::spawn(follow_authentication_configmap(
        kube.client(),
        authenticator.clone(),
        cancel.clone(),
    ));
    generation_reaches(&authenticator, 1).await;

    let old_client = certificates(
        first
            .issue_client("front-proxy-client")
            .expect("cert")
            .cert
            .as_bytes(),
        "client",
    )
    .expect("PEM");
    let user = authenticator
        .authenticate(Some(&old_client), &headers("hpa"))
        .expect("authenticated by the ConfigMap's CA");
    assert_eq!(user.name, "hpa");

    // The kube-apiserver rotates its front-proxy CA and renames its client.
    let patch = configmap(&second, "aggregator");
    api.patch(
        "extension-apiserver-authentication",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .expect("ConfigMap updated");
    generation_reaches(&authenticator, 2).await;

    let new_client = certificates(
        second
            .issue_client("aggregator")
            .expect("cert")
            .cert
            .as_bytes(),
        "client",
    )
    .expect("PEM");
    assert!(
        authenticator
            .authenticate(Some(&new_client), &headers("hpa"))
            .is_ok()
    );
    assert!(matches!(
        authenticator.authenticate(Some(&old_client), &headers("hpa")),
        Err(AuthnError::UntrustedCertificate(_))
    ));
    cancel.cancel();
}

#[tokio::test]
async fn a_malformed_configmap_version_keeps_the_previous_settings() {
    let kube = MemKube::new();
    let ca = CertificateAuthority::new("front-proxy-ca").expect("CA");
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(kube.client(), "kube-system");
    api.create(
        &PostParams::default(),
        &configmap(&ca, "front-proxy-client"),
    )
    .await
    .expect("ConfigMap created");
    let authenticator = Arc::new(Authenticator::new());
    let cancel = CancellationToken::new();
    tokio::spawn(follow_authentication_configmap(
        kube.client(),
        authenticator.clone(),
        cancel.clone(),
    ));
    generation_reaches(&authenticator, 1).await;

    let broken = serde_json::json!({"data": {"requestheader-allowed-names": "not json"}});
    api.patch(
        "extension-apiserver-authentication",
        &PatchParams::default(),
        &Patch::Merge(&broken),
    )
    .await
    .expect("ConfigMap updated");
    // A later valid version proves the broken one was processed (events arrive in order).
    let mut fixed = configmap(&ca, "front-proxy-client");
    fixed.data.as_mut().expect("data").insert(
        "requestheader-username-headers".into(),
        "[\"X-Other-User\"]".into(),
    );
    api.patch(
        "extension-apiserver-authentication",
        &PatchParams::default(),
        &Patch::Merge(&fixed),
    )
    .await
    .expect("ConfigMap updated");
    generation_reaches(&authenticator, 2).await;
    let client = certificates(
        ca.issue_client("front-proxy-client")
            .expect("cert")
            .cert
            .as_bytes(),
        "client",
    )
    .expect("PEM");
    let mut other = HeaderMap::new();
    other.insert(
        HeaderName::from_static("x-other-user"),
        HeaderValue::from_static("hpa"),
    );
    assert_eq!(
        authenticator
            .authenticate(Some(&client), &other)
            .expect("authenticated")
            .name,
        "hpa"
    );
    assert_eq!(
        authenticator.subscribe().borrow().to_owned(),
        2,
        "the malformed version was not put in force"
    );
    cancel.cancel();
}
