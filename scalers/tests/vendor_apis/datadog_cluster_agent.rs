//! `datadog` with `useClusterAgentProxy: true` against a fake of the Datadog Cluster Agent's
//! external metrics API, following
//! <https://docs.datadoghq.com/containers/cluster_agent/external_metrics/> and the Kubernetes
//! `external.metrics.k8s.io/v1beta1` API it serves (`GET
//! /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/datadogmetric@{ns}:{name}`, answered an
//! `ExternalMetricValueList` whose `value` is a quantity; `422` while the `DatadogMetric` has no
//! value yet; `401` without the bearer token).

use std::sync::{Arc, Mutex};

use http::StatusCode;

use crate::common::Harness;
use crate::http_server::{Recorded, TestServer, handler};

const HOST: &str = "datadog-cluster-agent-metrics-api.datadog";
const PATH: &str =
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/datadogmetric@default:nginx-hits";

fn agent(value: Arc<Mutex<Option<&'static str>>>) -> crate::http_server::Handler {
    handler(move |r: &Recorded| {
        if r.header("authorization").as_deref() != Some("Bearer dca-t0ken") {
            return (
                StatusCode::UNAUTHORIZED,
                "application/json",
                r#"{"kind":"Status","status":"Failure","message":"Unauthorized SECRET-TEXT","code":401}"#.into(),
            );
        }
        if r.method != "GET" || r.uri != PATH {
            return (
                StatusCode::NOT_FOUND,
                "application/json",
                r#"{"kind":"Status","status":"Failure","message":"not found SECRET-TEXT","code":404}"#.into(),
            );
        }
        match *value.lock().expect("value") {
            None => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "application/json",
                r#"{"kind":"Status","status":"Failure","message":"DatadogMetric is invalid, err: Global error (all queries) from backend SECRET-TEXT","code":422}"#.into(),
            ),
            Some(v) => (
                StatusCode::OK,
                "application/json",
                format!(
                    r#"{{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{{}},"items":[{{"metricName":"datadogmetric@default:nginx-hits","metricLabels":null,"timestamp":"2026-01-01T00:00:00Z","value":"{v}"}}]}}"#
                ),
            ),
        }
    })
}

/// The documented example with the Cluster Agent mode's parameters, built through the
/// registry. Not through `conformance`: this mode's metric name is KEDA's
/// `datadogmetric@<ns>:<name>`, without the `s<index>-` prefix the helper checks.
async fn harness(server: &TestServer, metadata: &[(&str, &str)], token: &str) -> Harness {
    let fake = url::Url::parse(&server.url("")).expect("url");
    let (trigger, index) = crate::common::documented_trigger("datadog");
    let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
    ctx.metadata.remove("query");
    ctx.metadata.remove("metricUnavailableValue");
    for (k, v) in [
        ("useClusterAgentProxy", "true"),
        ("datadogMetricName", "nginx-hits"),
        ("datadogMetricNamespace", "default"),
        ("activationTargetValue", "1"),
    ]
    .iter()
    .chain(metadata)
    {
        ctx.metadata.insert(k.to_string(), v.to_string());
    }
    for (k, v) in [
        ("datadogNamespace", "datadog"),
        ("datadogMetricsService", "datadog-cluster-agent-metrics-api"),
        ("authMode", "bearer"),
        ("token", token),
    ] {
        ctx.auth_params
            .insert(k.to_string(), keda_scalers::Secret::new(v));
    }
    ctx.vendor_endpoints = keda_scalers::http_client::VendorEndpoints::default().with(HOST, fake);
    let built = keda_scalers::Registry::builtin()
        .build(ctx)
        .await
        .expect("the Cluster Agent trigger builds");
    let specs = built.scaler().metric_specs();
    let metric_name = specs[0]
        .external
        .as_ref()
        .map(|e| e.metric.name.clone())
        .expect("an External metric");
    Harness { built, metric_name }
}

#[tokio::test]
async fn the_cluster_agent_s_datadog_metric_is_read_and_422_is_the_fill_value() {
    let value = Arc::new(Mutex::new(Some("1")));
    let server = TestServer::start(agent(value.clone())).await;
    let h = harness(&server, &[], "dca-t0ken").await;
    assert_eq!(h.metric_name, "datadogmetric@default:nginx-hits");
    h.expect(1.0, false).await; // not above activationTargetValue 1
    *value.lock().unwrap() = Some("2500m");
    h.expect(2.5, true).await;
    *value.lock().unwrap() = None;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("422") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    h.close().await;

    let filled = harness(&server, &[("metricUnavailableValue", "0")], "dca-t0ken").await;
    filled.expect(0.0, false).await;
    filled.close().await;

    let wrong = harness(&server, &[], "wr0ng-t0ken").await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("401") && !text.contains("wr0ng-t0ken"),
        "{text}"
    );
    assert!(!text.contains("SECRET-TEXT"), "{text}");
    wrong.close().await;
}
