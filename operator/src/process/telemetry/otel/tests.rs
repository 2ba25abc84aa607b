use std::time::{Duration, UNIX_EPOCH};

use crate::process::telemetry::Metrics;

use super::exposition::*;
use super::instruments::*;
use super::proto::common::v1::{KeyValue, any_value};
use super::proto::metrics::v1::{
    AggregationTemporality, Metric, NumberDataPoint, Sum, metric, number_data_point,
};
use super::settings::*;
use crate::process::telemetry::{BuildInfo, ResourceKind, ScalerLabels};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: std::collections::HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    move |name: &str| map.get(name).cloned()
}

fn settings(pairs: &[(&str, &str)]) -> (OtlpSettings, Vec<String>) {
    let mut warnings = Vec::new();
    let s = OtlpSettings::from_env(&env(pairs), "keda-operator", &mut warnings);
    (s, warnings)
}

#[test]
fn defaults_are_the_go_exporters() {
    let (s, warnings) = settings(&[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(s.endpoint.as_str(), "https://localhost:4318/v1/metrics");
    assert_eq!(s.interval, Duration::from_secs(60));
    assert_eq!(s.timeout, Duration::from_secs(10));
    assert_eq!(s.export_timeout, Duration::from_secs(30));
    assert!(!s.gzip);
    assert_eq!(s.temporality, Temporality::Cumulative);
    assert!(s.resource.contains(&(
        "service.name".into(),
        "unknown_service:keda-operator".into()
    )));
    let (grpc, _) = settings(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
    assert_eq!(grpc.protocol, OtlpProtocol::Grpc);
    assert_eq!(grpc.endpoint.as_str(), "https://localhost:4317/");
}

#[test]
fn endpoints_follow_the_otlp_rules() {
    let (s, _) = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]);
    assert_eq!(s.endpoint.as_str(), "http://collector:4318/v1/metrics");
    let (s, _) = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/base/")]);
    assert_eq!(s.endpoint.as_str(), "http://collector:4318/base/v1/metrics");
    // The per-signal variable wins and is used as it is.
    let (s, _) = settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        (
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "https://other:9999/custom",
        ),
    ]);
    assert_eq!(s.endpoint.as_str(), "https://other:9999/custom");
    let (s, _) = settings(&[("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://other:9999")]);
    assert_eq!(s.endpoint.as_str(), "http://other:9999/");
    // INSECURE switches the scheme.
    let (s, _) = settings(&[("OTEL_EXPORTER_OTLP_INSECURE", "true")]);
    assert_eq!(s.endpoint.as_str(), "http://localhost:4318/v1/metrics");
    // gRPC: no path.
    let (s, _) = settings(&[
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317/x"),
    ]);
    assert_eq!(s.endpoint.as_str(), "http://collector:4317/");
    // Not a URL: ignored with a warning, the default kept.
    let (s, warnings) = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector")]);
    assert_eq!(s.endpoint.as_str(), "https://localhost:4318/v1/metrics");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}

#[test]
fn headers_timeouts_compression_and_resource() {
    let (s, warnings) = settings(&[
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "api-key=se%20cret, x-team = a ,broken",
        ),
        ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "2500"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "3000"),
        ("OTEL_METRIC_EXPORT_TIMEOUT", "nope"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "k8s.cluster.name=prod,service.name=ignored",
        ),
        ("OTEL_SERVICE_NAME", "keda"),
        (
            "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
            "LowMemory",
        ),
    ]);
    assert_eq!(
        s.headers,
        vec![
            ("api-key".to_string(), "se cret".to_string()),
            ("x-team".to_string(), "a".to_string())
        ]
    );
    assert_eq!(s.timeout, Duration::from_millis(2500));
    assert!(s.gzip);
    assert_eq!(s.interval, Duration::from_secs(3));
    assert_eq!(s.export_timeout, Duration::from_secs(30));
    assert_eq!(s.temporality, Temporality::Delta);
    assert!(s.resource.contains(&("service.name".into(), "keda".into())));
    assert!(
        s.resource
            .contains(&("k8s.cluster.name".into(), "prod".into()))
    );
    // The broken header entry and the bad timeout, never a header value.
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings.iter().all(|w| !w.contains("cret")));
}

#[test]
fn label_values_are_unescaped() {
    let sample = parse_sample(r#"x_total{a="q\"uo\\te",b="n\nl"} 3"#).expect("sample");
    assert_eq!(sample.name, "x_total");
    assert_eq!(
        sample.labels,
        vec![
            ("a".to_string(), "q\"uo\\te".to_string()),
            ("b".to_string(), "n\nl".to_string())
        ]
    );
    assert_eq!(sample.value, 3.0);
    assert_eq!(parse_sample("y 1.5").expect("plain").value, 1.5);
}

fn labels(kind: ResourceKind) -> ScalerLabels {
    ScalerLabels {
        namespace: "shop".into(),
        scaled_resource: "orders".into(),
        scaler: "redisScaler".into(),
        trigger_index: 2,
        metric: "s2-redis-orders".into(),
        kind,
    }
}

fn find<'a>(metrics: &'a [Metric], name: &str) -> &'a Metric {
    metrics
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

fn attrs(kv: &[KeyValue]) -> Vec<(String, String)> {
    kv.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                Some(any_value::Value::BoolValue(b)) => b.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

fn gauge_points(m: &Metric) -> &[NumberDataPoint] {
    match &m.data {
        Some(metric::Data::Gauge(g)) => &g.data_points,
        other => panic!("{}: not a gauge: {other:?}", m.name),
    }
}

fn sum(m: &Metric) -> &Sum {
    match &m.data {
        Some(metric::Data::Sum(s)) => s,
        other => panic!("{}: not a sum: {other:?}", m.name),
    }
}

#[test]
fn keda_series_become_kedas_instruments() {
    let metrics = Metrics::with_build_info(BuildInfo {
        version: "1.2.3".into(),
        git_commit: "abc".into(),
        goversion: "rustc".into(),
        goos: "linux".into(),
        goarch: "amd64".into(),
    });
    let so = labels(ResourceKind::ScaledObject);
    let sj = labels(ResourceKind::ScaledJob);
    metrics.scaler_value(&so, 42.5);
    metrics.scaler_active(&so, true);
    metrics.scaler_latency(&so, Duration::from_micros(12_700));
    metrics.scaler_value(&sj, 7.0);
    metrics.scaler_error(&so);
    metrics.scaler_error(&so);
    metrics.loop_latency(
        "shop",
        "orders",
        ResourceKind::ScaledObject,
        Duration::from_millis(1500),
    );
    metrics.paused("shop", "orders", false);
    metrics.trigger_registered("redis");
    metrics.resource_registered(
        crate::process::telemetry::CustomResourceKind::ScaledObject,
        "shop",
    );

    let mut translator = Translator::new(Temporality::Cumulative, UNIX_EPOCH);
    let now = UNIX_EPOCH + Duration::from_secs(100);
    let out = translator.translate(&metrics.encode(), now);

    let value = find(&out, "keda.scaler.metrics.value");
    let points = gauge_points(value);
    assert_eq!(points.len(), 2);
    let so_point = points
        .iter()
        .find(|p| {
            attrs(&p.attributes)
                .iter()
                .any(|(k, _)| k == "scaledObject")
        })
        .expect("scaledObject point");
    assert_eq!(
        attrs(&so_point.attributes),
        vec![
            ("metric".to_string(), "s2-redis-orders".to_string()),
            ("namespace".to_string(), "shop".to_string()),
            ("scaledObject".to_string(), "orders".to_string()),
            ("scaler".to_string(), "redisScaler".to_string()),
            ("scalerIndex".to_string(), "2".to_string()),
        ]
    );
    assert_eq!(
        so_point.value,
        Some(number_data_point::Value::AsDouble(42.5))
    );
    assert_eq!(so_point.time_unix_nano, 100_000_000_000);
    let sj_point = points
        .iter()
        .find(|p| attrs(&p.attributes).iter().any(|(k, _)| k == "scaledJob"))
        .expect("scaledJob point");
    assert!(attrs(&sj_point.attributes).contains(&("triggerIndex".into(), "2".into())));

    let active = gauge_points(find(&out, "keda.scaler.active"));
    assert_eq!(
        active[0].value,
        Some(number_data_point::Value::AsDouble(1.0))
    );
    let latency = find(&out, "keda.scaler.metrics.latency.seconds");
    assert_eq!(latency.unit, "s");
    assert_eq!(
        gauge_points(latency)[0].value,
        Some(number_data_point::Value::AsDouble(0.0127))
    );
    assert_eq!(
        gauge_points(find(&out, "keda.scaler.metrics.latency"))[0].value,
        Some(number_data_point::Value::AsDouble(12.0))
    );
    let errors = sum(find(&out, "keda.scaler.errors"));
    assert!(errors.is_monotonic);
    assert_eq!(
        errors.aggregation_temporality,
        AggregationTemporality::Cumulative as i32
    );
    assert_eq!(
        errors.data_points[0].value,
        Some(number_data_point::Value::AsInt(2))
    );
    let object_errors = sum(find(&out, "keda.scaledobject.errors"));
    assert_eq!(
        attrs(&object_errors.data_points[0].attributes),
        vec![
            ("namespace".to_string(), "shop".to_string()),
            ("scaledObject".to_string(), "orders".to_string())
        ]
    );
    let loop_latency = gauge_points(find(&out, "keda.internal.scale.loop.latency.seconds"));
    assert!(attrs(&loop_latency[0].attributes).contains(&("name".into(), "orders".into())));
    assert_eq!(
        gauge_points(find(&out, "keda.internal.scale.loop.latency"))[0].value,
        Some(number_data_point::Value::AsDouble(1500.0))
    );
    for name in ["keda.trigger.registered.count", "keda.trigger.totals"] {
        let s = sum(find(&out, name));
        assert!(!s.is_monotonic);
        assert_eq!(
            s.data_points[0].value,
            Some(number_data_point::Value::AsInt(1))
        );
    }
    assert!(
        attrs(&sum(find(&out, "keda.resource.registered.count")).data_points[0].attributes)
            .contains(&("type".into(), "scaled_object".into()))
    );
    let build = gauge_points(find(&out, "keda.build.info"));
    assert_eq!(build[0].value, Some(number_data_point::Value::AsInt(1)));
    assert!(attrs(&build[0].attributes).contains(&("version".into(), "1.2.3".into())));
    assert_eq!(
        gauge_points(find(&out, "keda.scaled.object.paused"))[0].value,
        Some(number_data_point::Value::AsDouble(0.0))
    );
    // No instrument of KEDA's OTel collector for the client's series.
    assert!(out.iter().all(|m| m.name.starts_with("keda.")));
}

#[test]
fn histograms_and_delta_temporality() {
    let metrics = Metrics::new();
    let read = keda_scalers::request_metrics::RequestLabels {
        namespace: "shop".into(),
        scaled_resource: "orders".into(),
        scaler: "prometheusScaler".into(),
        trigger_name: "t".into(),
        metric_name: "s0-prometheus".into(),
        resource_type: "ScaledObject".into(),
    };
    metrics.scaler_http_request(
        &read,
        keda_scalers::request_metrics::RequestOutcome::Status(200),
        Duration::from_millis(30),
    );
    metrics.scaler_http_request(
        &read,
        keda_scalers::request_metrics::RequestOutcome::Status(200),
        Duration::from_secs(20),
    );
    let so = labels(ResourceKind::ScaledObject);
    metrics.scaler_error(&so);

    let start = UNIX_EPOCH + Duration::from_secs(10);
    let mut translator = Translator::new(Temporality::Delta, start);
    let out = translator.translate(&metrics.encode(), start + Duration::from_secs(5));
    let histogram = match &find(&out, "keda.scaler.http.request.duration.seconds").data {
        Some(metric::Data::Histogram(h)) => h.clone(),
        other => panic!("not a histogram: {other:?}"),
    };
    let point = &histogram.data_points[0];
    assert_eq!(point.count, 2);
    assert_eq!(point.explicit_bounds.len(), 11);
    assert_eq!(point.bucket_counts.len(), 12);
    // 30 ms lands in (0.025, 0.05], 20 s above the last bound.
    assert_eq!(point.bucket_counts[3], 1);
    assert_eq!(point.bucket_counts[11], 1);
    assert_eq!(point.bucket_counts.iter().sum::<u64>(), 2);
    assert_eq!(
        attrs(&point.attributes),
        vec![
            ("scaler".to_string(), "prometheusScaler".to_string()),
            ("status_code".to_string(), "200".to_string())
        ]
    );
    let requests = sum(find(&out, "keda.scaler.http.requests.count"));
    assert_eq!(
        requests.data_points[0].value,
        Some(number_data_point::Value::AsInt(2))
    );
    assert_eq!(
        requests.aggregation_temporality,
        AggregationTemporality::Delta as i32
    );

    // The next export carries only what happened since.
    metrics.scaler_error(&so);
    let out = translator.translate(&metrics.encode(), start + Duration::from_secs(9));
    let errors = sum(find(&out, "keda.scaler.errors"));
    assert_eq!(
        errors.data_points[0].value,
        Some(number_data_point::Value::AsInt(1))
    );
    assert_eq!(errors.data_points[0].start_time_unix_nano, 15_000_000_000);
    let requests = sum(find(&out, "keda.scaler.http.requests.count"));
    assert_eq!(
        requests.data_points[0].value,
        Some(number_data_point::Value::AsInt(0))
    );
    let histogram = match &find(&out, "keda.scaler.http.request.duration.seconds").data {
        Some(metric::Data::Histogram(h)) => h.clone(),
        other => panic!("not a histogram: {other:?}"),
    };
    assert_eq!(histogram.data_points[0].count, 0);
}
