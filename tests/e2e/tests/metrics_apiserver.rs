//! The metrics-apiserver registered with a real cluster's aggregator: the cluster reads an
//! external metric through `kubectl get --raw`'s path, served by a metrics-apiserver running in
//! this process with the operator's metric service (over an in-memory table) behind it.
//!
//! The cluster's kube-apiserver must reach this machine: set `KEDA_RS_E2E_HOST` to a DNS name or
//! IP address it can connect to (for kind on Linux, the Docker bridge gateway, e.g.
//! `172.18.0.1`; on Docker Desktop, `host.docker.internal`), and open the port in
//! `KEDA_RS_E2E_METRICS_PORT` (default 16443) to it.
//!
//! The APIService is pointed at a Service of type ExternalName naming that host: the aggregator
//! resolves ExternalName Services itself, whereas a ClusterIP Service with an FQDN EndpointSlice
//! would need kube-proxy, which ignores FQDN slices.
//!
//! It replaces the cluster's `v1beta1.external.metrics.k8s.io` (only one can exist): when one
//! exists that this suite did not create (KEDA, prometheus-adapter), it stops unless
//! `KEDA_RS_E2E_REPLACE_APISERVICE=true`, and then restores it at the end.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use keda_e2e::{FIELD_MANAGER, cluster_client};
use keda_metrics_apiserver::app::AppState;
use keda_metrics_apiserver::authn::{Authenticator, follow_authentication_configmap};
use keda_metrics_apiserver::authz::{CacheTtl, CachedAuthorizer, SubjectAccessReviewer};
use keda_metrics_apiserver::metrics::Metrics;
use keda_metrics_apiserver::operator_client::{
    OperatorClient, OperatorClientConfig, client_tls_config,
};
use keda_metrics_apiserver::start::secure_server;
use keda_metrics_apiserver::tls;
use keda_operator::metrics_service::{
    MetricValues, MetricsError, MetricsService, MetricsServiceOptions, server_config,
};
use keda_scalers::MetricValue;
use keda_tls::pki::CertificateAuthority;
use keda_tls::{CertStore, ServerCaVerifier, certified_key};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client, ResourceExt};
use rustls_pki_types::ServerName;
use tokio_util::sync::CancellationToken;

const APISERVICE: &str = "v1beta1.external.metrics.k8s.io";
const HOST_ENV: &str = "KEDA_RS_E2E_HOST";
const PORT_ENV: &str = "KEDA_RS_E2E_METRICS_PORT";
const REPLACE_ENV: &str = "KEDA_RS_E2E_REPLACE_APISERVICE";

/// `apps/worker` has `s0-redis-jobs` = 7.
struct OneValue;

#[async_trait]
impl MetricValues for OneValue {
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric_name: &str,
    ) -> Result<Vec<MetricValue>, MetricsError> {
        if scaled_object != "worker" {
            return Err(MetricsError::ScaledObjectNotFound {
                namespace: namespace.into(),
                name: scaled_object.into(),
            });
        }
        if !keda_api::external_metrics::metric_names_match(metric_name, "s0-redis-jobs") {
            return Err(MetricsError::MetricNotFound {
                namespace: namespace.into(),
                name: scaled_object.into(),
                metric: metric_name.into(),
            });
        }
        Ok(vec![MetricValue::new("s0-redis-jobs", 7.0)])
    }
}

/// Starts the operator service and the metrics-apiserver on `port` (all interfaces), using the
/// cluster for the front-proxy settings and SubjectAccessReviews.
async fn start_local(client: Client, port: u16, cancel: CancellationToken) {
    let ca = CertificateAuthority::new("e2e-operator-ca").expect("CA");
    let operator_cert = ca
        .issue_server("keda-operator", &["localhost"])
        .expect("certificate");
    let tls = server_config(
        operator_cert.cert.as_bytes(),
        operator_cert.key.as_bytes(),
        ca.cert_pem().as_bytes(),
    )
    .expect("operator TLS");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let operator = listener.local_addr().expect("address");
    tokio::spawn(
        MetricsService::new(Arc::new(OneValue), MetricsServiceOptions::default()).serve(
            listener,
            Arc::new(tls),
            cancel.clone(),
        ),
    );

    let client_cert = ca
        .issue_client("keda-metrics-apiserver")
        .expect("certificate");
    let store = Arc::new(CertStore::new(
        certified_key(
            client_cert.cert.as_bytes(),
            client_cert.key.as_bytes(),
            "client",
        )
        .expect("loads"),
    ));
    let operator_client = Arc::new(OperatorClient::new(OperatorClientConfig {
        address: operator.to_string(),
        server_name: ServerName::try_from("localhost").expect("name"),
        tls: Arc::new(
            client_tls_config(
                Arc::new(
                    ServerCaVerifier::from_pem(ca.cert_pem().as_bytes(), "e2e CA").expect("CA"),
                ),
                store,
            )
            .expect("client TLS"),
        ),
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(3),
    }));
    operator_client.keep_warm(cancel.clone());

    let authenticator = Arc::new(Authenticator::new());
    tokio::spawn(follow_authentication_configmap(
        client.clone(),
        authenticator.clone(),
        cancel.clone(),
    ));
    let mut loaded = authenticator.subscribe();
    tokio::time::timeout(Duration::from_secs(30), loaded.wait_for(|g| *g > 0))
        .await
        .expect("kube-system/extension-apiserver-authentication read within 30 s")
        .expect("authenticator alive");

    let (cert, key) = tls::self_signed(&["localhost".into()]).expect("self-signed");
    let serving = Arc::new(CertStore::new(
        certified_key(cert.as_bytes(), key.as_bytes(), "self-signed").expect("loads"),
    ));
    let state = AppState {
        authenticator,
        authorizer: Arc::new(CachedAuthorizer::new(
            Arc::new(SubjectAccessReviewer::new(client)),
            CacheTtl::default(),
        )),
        source: operator_client,
        metrics: Arc::new(Metrics::new()),
    };
    let listener = std::net::TcpListener::bind(("0.0.0.0", port))
        .unwrap_or_else(|e| panic!("cannot listen on 0.0.0.0:{port} ({PORT_ENV}): {e}"));
    let server = secure_server(
        state,
        listener,
        tls::secure_port_config(serving, &Default::default()).expect("TLS"),
        2,
    )
    .expect("server");
    let handle = server.handle();
    tokio::spawn(server);
    tokio::spawn(async move {
        cancel.cancelled().await;
        handle.stop(false).await;
    });
}

fn ours(api_service: &APIService) -> bool {
    api_service
        .managed_fields()
        .iter()
        .any(|m| m.manager.as_deref() == Some(FIELD_MANAGER))
}

#[tokio::test]
#[ignore = "end-to-end: needs a real cluster named by KEDA_RS_E2E_KUBECONFIG"]
async fn the_cluster_reads_an_external_metric_through_the_aggregator() {
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
        .unwrap_or(16443);

    let api_services: Api<APIService> = Api::all(client.clone());
    let previous = api_services
        .get_opt(APISERVICE)
        .await
        .expect("APIServices readable");
    let replace = std::env::var(REPLACE_ENV).is_ok_and(|v| v == "true");
    let previous = previous.filter(|p| !ours(p));
    assert!(
        previous.is_none() || replace,
        "the cluster already has APIService {APISERVICE} (KEDA? prometheus-adapter?); use a \
         throwaway cluster or set {REPLACE_ENV}=true (it is restored afterwards)"
    );

    let cancel = CancellationToken::new();
    start_local(client.clone(), port, cancel.clone()).await;
    let namespace = format!("keda-rs-e2e-metrics-{}", std::process::id());
    let result = AssertUnwindSafe(scenario(client.clone(), &namespace, &host, port))
        .catch_unwind()
        .await;

    // Clean up whatever happened: the APIService first (the aggregator stops calling us),
    // restoring the previous one, then the namespace with the Service.
    match &previous {
        Some(original) => {
            let mut restored = original.clone();
            restored.metadata.managed_fields = None;
            restored.metadata.resource_version = None;
            restored.metadata.uid = None;
            restored.metadata.creation_timestamp = None;
            restored.status = None;
            let _ = api_services
                .patch(
                    APISERVICE,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&restored),
                )
                .await;
        }
        None => {
            let _ = api_services
                .delete(APISERVICE, &DeleteParams::default())
                .await;
        }
    }
    let namespaces: Api<Namespace> = Api::all(client);
    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
    cancel.cancel();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

async fn scenario(client: Client, namespace: &str, host: &str, port: u16) {
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
    }))
    .expect("namespace");
    namespaces
        .patch(namespace, &apply, &Patch::Apply(&ns))
        .await
        .expect("namespace created");
    let service: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "keda-rs-metrics-apiserver", "namespace": namespace},
        "spec": {"type": "ExternalName", "externalName": host}
    }))
    .expect("service");
    Api::<Service>::namespaced(client.clone(), namespace)
        .patch("keda-rs-metrics-apiserver", &apply, &Patch::Apply(&service))
        .await
        .expect("Service created");
    let api_service: APIService = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": APISERVICE},
        "spec": {
            "service": {"name": "keda-rs-metrics-apiserver", "namespace": namespace, "port": port},
            "group": "external.metrics.k8s.io", "version": "v1beta1",
            "insecureSkipTLSVerify": true, "groupPriorityMinimum": 100, "versionPriority": 100
        }
    }))
    .expect("APIService");
    let api_services: Api<APIService> = Api::all(client.clone());
    api_services
        .patch(APISERVICE, &apply, &Patch::Apply(&api_service))
        .await
        .expect("APIService registered");

    let available = |a: Option<&APIService>| {
        a.and_then(|a| a.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Available" && c.status == "True")
            })
    };
    tokio::time::timeout(
        Duration::from_secs(90),
        await_condition(api_services.clone(), APISERVICE, available),
    )
    .await
    .unwrap_or_else(|_| {
        panic!("APIService {APISERVICE} not Available within 90 s: can the API server reach {host}:{port}?")
    })
    .expect("watching the APIService works");

    let path = format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/s0-redis-jobs?labelSelector=scaledobject.keda.sh%2Fname%3Dworker"
    );
    let request = http::Request::get(&path).body(Vec::new()).expect("request");
    let list: serde_json::Value = client
        .request(request)
        .await
        .unwrap_or_else(|e| panic!("GET {path} through the aggregator failed: {e}"));
    assert_eq!(list["kind"], "ExternalMetricValueList", "{list}");
    assert_eq!(list["items"][0]["metricName"], "s0-redis-jobs", "{list}");
    assert_eq!(list["items"][0]["value"], "7", "{list}");
    let labels: BTreeMap<String, String> =
        serde_json::from_value(list["items"][0]["metricLabels"].clone()).unwrap_or_default();
    assert!(labels.is_empty());

    // Errors travel back as Status objects with their codes.
    let missing = http::Request::get(format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/s0-redis-jobs?labelSelector=app%3Dworker"
    ))
    .body(Vec::new())
    .expect("request");
    match client.request::<serde_json::Value>(missing).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 400, "{status:?}"),
        other => panic!("expected 400 for a selector without the ScaledObject name: {other:?}"),
    }
}
