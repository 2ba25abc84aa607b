use super::*;

fn labels(index: usize) -> ScalerLabels {
    ScalerLabels {
        namespace: "shop".into(),
        scaled_resource: "orders".into(),
        scaler: "redisScaler".into(),
        trigger_index: index,
        metric: format!("s{index}-redis-orders").into(),
        kind: ResourceKind::ScaledObject,
    }
}

fn build() -> BuildInfo {
    BuildInfo {
        version: "0.1.0".into(),
        git_commit: "abc123".into(),
        goversion: "rustc 1.95.0".into(),
        goos: "linux".into(),
        goarch: "amd64".into(),
    }
}

fn line_value(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .map(str::to_string)
}

const SCALER_LABELS_0: &str = r#"{namespace="shop",metric="s0-redis-orders",scaledObject="orders",scaler="redisScaler",triggerIndex="0",type="scaledobject"}"#;

#[test]
fn a_fresh_registry_reports_only_the_build_info() {
    let text = Metrics::with_build_info(build()).encode();
    assert!(
        text.contains(
            r#"keda_build_info{version="0.1.0",git_commit="abc123",goversion="rustc 1.95.0",goos="linux",goarch="amd64"} 1"#
        ),
        "{text}"
    );
    assert!(text.contains("# TYPE keda_build_info gauge"), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn every_keda_metric_is_declared_with_keda_s_type_and_help() {
    // Families without series are not exposed (as in KEDA): record one of each first.
    let metrics = Metrics::with_build_info(build());
    metrics.scaler_value(&labels(0), 1.0);
    metrics.scaler_latency(&labels(0), Duration::from_millis(1));
    metrics.scaler_active(&labels(0), true);
    metrics.scaler_error(&labels(0));
    metrics.paused("shop", "orders", false);
    metrics.trigger_registered("redis");
    metrics.resource_registered(CustomResourceKind::ScaledObject, "shop");
    metrics.loop_latency("shop", "orders", ResourceKind::ScaledObject, Duration::ZERO);
    metrics.scaled_job_error("shop", "batch");
    metrics.scaler_empty_upstream_response(&RequestLabels::default(), true);
    let text = metrics.encode();
    for (name, kind, help) in [
        (
            "keda_scaler_metrics_value",
            "gauge",
            "The current value for each scaler's metric that would be used by the HPA in computing the target average.",
        ),
        (
            "keda_scaler_metrics_latency_seconds",
            "gauge",
            "The latency of retrieving current metric from each scaler, in seconds.",
        ),
        (
            "keda_scaler_active",
            "gauge",
            "Indicates whether a scaler is active (1), or not (0).",
        ),
        (
            "keda_scaled_object_paused",
            "gauge",
            "Indicates whether a ScaledObject is paused (1), or not (0).",
        ),
        (
            "keda_scaler_detail_errors",
            "counter",
            "The total number of errors encountered for each scaler.",
        ),
        (
            "keda_scaled_object_errors",
            "counter",
            "The number of errors that have occurred for each ScaledObject.",
        ),
        (
            "keda_trigger_registered_total",
            "gauge",
            "Total number of triggers per trigger type registered.",
        ),
        (
            "keda_resource_registered_total",
            "gauge",
            "Total number of KEDA custom resources per namespace for each custom resource type (CRD) registered.",
        ),
        (
            "keda_internal_scale_loop_latency_seconds",
            "gauge",
            "Total deviation (in seconds) between the expected execution time and the actual execution time for the scaling loop.",
        ),
        // KEDA's text has no final period; prometheus-client always adds one.
        (
            "keda_scaled_job_errors",
            "counter",
            "Number of scaled job errors.",
        ),
        (
            "keda_scaler_empty_upstream_responses",
            "counter",
            "Number of times a query returns an empty result.",
        ),
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "{name}: {text}"
        );
        assert!(
            text.contains(&format!("# HELP {name} {help}\n")),
            "{name}: {text}"
        );
    }
}

#[test]
fn empty_upstream_responses_carry_keda_s_labels_in_its_order() {
    let metrics = Metrics::with_build_info(build());
    let read = |resource_type: &str| RequestLabels {
        namespace: "shop".into(),
        scaled_resource: "orders".into(),
        scaler: "prometheus".into(),
        trigger_name: "rps".into(),
        metric_name: "s0-prometheus".into(),
        resource_type: resource_type.into(),
    };
    metrics.empty_upstream_response(&read("ScaledObject"), false);
    metrics.empty_upstream_response(&read("ScaledObject"), false);
    metrics.empty_upstream_response(&read("ScaledJob"), true);
    let text = metrics.encode();
    let series = |resource_type: &str, ignore: &str| {
        format!(
            r#"keda_scaler_empty_upstream_responses_total{{namespace="shop",scaledResource="orders",triggerName="rps",metricName="s0-prometheus",resourceType="{resource_type}",ignoreNullValues="{ignore}"}} "#
        )
    };
    assert!(
        text.contains(&format!("{}2\n", series("ScaledObject", "false"))),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}1\n", series("ScaledJob", "true"))),
        "{text}"
    );
    // The resource type is no label of the HTTP request families.
    metrics.scaler_http_request(
        &read("ScaledJob"),
        RequestOutcome::Status(200),
        Duration::from_millis(1),
    );
    metrics.scaler_http_request(
        &read("ScaledObject"),
        RequestOutcome::Status(200),
        Duration::from_millis(1),
    );
    let text = metrics.encode();
    let http: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("keda_scaler_http_requests_total{"))
        .collect();
    assert_eq!(http.len(), 1, "{http:?}");
    assert!(http[0].ends_with(" 2"), "{http:?}");
}

#[test]
fn scaler_http_requests_carry_keda_s_labels_and_the_histogram_only_with_the_flag() {
    let read = RequestLabels {
        namespace: "shop".into(),
        scaled_resource: "orders".into(),
        scaler: "prometheus".into(),
        trigger_name: "rps".into(),
        metric_name: "s0-prometheus".into(),
        resource_type: "ScaledObject".into(),
    };
    let full = r#"{namespace="shop",scaled_resource="orders",scaler="prometheus",trigger_name="rps",metric_name="s0-prometheus",status_code="#;
    let metrics = Metrics::with_build_info(build());
    metrics.scaler_http_request(&read, RequestOutcome::Status(200), Duration::from_millis(3));
    metrics.scaler_http_request(&read, RequestOutcome::Status(200), Duration::from_millis(3));
    metrics.scaler_http_request(&read, RequestOutcome::Error, Duration::from_secs(3));
    let text = metrics.encode();
    assert!(
        text.contains("# TYPE keda_scaler_http_requests counter\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE keda_scaler_http_request_duration_seconds histogram\n"),
        "{text}"
    );
    let counter = |code: &str| format!("keda_scaler_http_requests_total{full}\"{code}\"}} ");
    assert_eq!(
        line_value(&text, &counter("200")).as_deref(),
        Some("2"),
        "{text}"
    );
    assert_eq!(
        line_value(&text, &counter("error")).as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        line_value(
            &text,
            r#"keda_scaler_http_request_duration_seconds_count{scaler="prometheus",status_code="200"} "#
        )
        .as_deref(),
        Some("2"),
        "{text}"
    );
    assert!(
        !text.contains(&format!(
            "keda_scaler_http_request_duration_seconds_count{full}"
        )),
        "{text}"
    );

    let metrics = Metrics::with_build_info(build());
    metrics.enable_high_cardinality_labels();
    metrics.scaler_http_request(&read, RequestOutcome::Status(503), Duration::from_millis(3));
    let text = metrics.encode();
    assert_eq!(
        line_value(
            &text,
            &format!("keda_scaler_http_request_duration_seconds_count{full}\"503\"}} ")
        )
        .as_deref(),
        Some("1"),
        "{text}"
    );
}

#[test]
fn rate_limiter_waits_are_a_client_go_histogram_and_only_real_waits_count_as_throttled() {
    let metrics = Metrics::with_build_info(build());
    metrics.rate_limiter_wait("GET", Duration::ZERO);
    metrics.rate_limiter_wait("PATCH", Duration::ZERO);
    metrics.rate_limiter_wait("PATCH", Duration::from_millis(300));
    let text = metrics.encode();
    assert!(
        text.contains("# TYPE rest_client_rate_limiter_duration_seconds histogram\n"),
        "{text}"
    );
    assert_eq!(
        line_value(
            &text,
            r#"rest_client_rate_limiter_duration_seconds_count{verb="PATCH"}"#
        ),
        Some("2".into())
    );
    assert_eq!(
        line_value(
            &text,
            r#"rest_client_rate_limiter_duration_seconds_bucket{le="0.25",verb="PATCH"}"#
        ),
        Some("1".into())
    );
    assert_eq!(
        line_value(
            &text,
            r#"rest_client_rate_limiter_throttled_requests_total{verb="PATCH"}"#
        ),
        Some("1".into())
    );
    assert_eq!(
        line_value(
            &text,
            r#"rest_client_rate_limiter_throttled_requests_total{verb="GET"}"#
        ),
        None,
        "a request that found a token was not throttled"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
}

#[test]
fn scaler_readings_appear_with_keda_s_labels() {
    let metrics = Metrics::with_build_info(build());
    metrics.scaler_value(&labels(0), 12.5);
    metrics.scaler_active(&labels(0), true);
    metrics.scaler_latency(&labels(0), Duration::from_millis(250));
    metrics.scaler_ok(&labels(0));
    let text = metrics.encode();
    assert_eq!(
        line_value(
            &text,
            &format!("keda_scaler_metrics_value{SCALER_LABELS_0}")
        ),
        Some("12.5".into())
    );
    assert_eq!(
        line_value(&text, &format!("keda_scaler_active{SCALER_LABELS_0}")),
        Some("1.0".into())
    );
    assert_eq!(
        line_value(
            &text,
            &format!("keda_scaler_metrics_latency_seconds{SCALER_LABELS_0}")
        ),
        Some("0.25".into())
    );
    assert_eq!(
        line_value(
            &text,
            &format!("keda_scaler_detail_errors_total{SCALER_LABELS_0}")
        ),
        Some("0".into())
    );
    assert_eq!(
        line_value(
            &text,
            r#"keda_scaled_object_errors_total{namespace="shop",scaledObject="orders"}"#
        ),
        Some("0".into())
    );
}

#[test]
fn a_scaler_error_counts_for_the_scaler_and_for_its_scaled_object() {
    let metrics = Metrics::with_build_info(build());
    metrics.scaler_error(&labels(0));
    metrics.scaler_error(&labels(0));
    metrics.scaler_error(&labels(1));
    let text = metrics.encode();
    assert_eq!(
        line_value(
            &text,
            &format!("keda_scaler_detail_errors_total{SCALER_LABELS_0}")
        ),
        Some("2".into())
    );
    assert_eq!(
        line_value(
            &text,
            r#"keda_scaled_object_errors_total{namespace="shop",scaledObject="orders"}"#
        ),
        Some("3".into())
    );
}

#[test]
fn scaled_job_scalers_are_labelled_scaledjob_and_count_scaled_job_errors() {
    let metrics = Metrics::with_build_info(build());
    let job = ScalerLabels {
        kind: ResourceKind::ScaledJob,
        scaled_resource: "batch".into(),
        ..labels(0)
    };
    metrics.scaler_error(&job);
    let text = metrics.encode();
    assert!(
        text.contains(
            r#"scaledObject="batch",scaler="redisScaler",triggerIndex="0",type="scaledjob"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"keda_scaled_job_errors_total{namespace="shop",scaledJob="batch"} 1"#),
        "{text}"
    );
}

#[test]
fn caught_panics_count_by_component_and_object() {
    let metrics = Metrics::with_build_info(build());
    metrics.internal_panic("scaler", ResourceKind::ScaledObject, "shop", "orders");
    metrics.internal_panic("scaler", ResourceKind::ScaledObject, "shop", "orders");
    metrics.internal_panic("reconcile", ResourceKind::ScaledJob, "shop", "batch");
    let text = metrics.encode();
    assert!(
        text.contains("# TYPE keda_internal_panics counter\n"),
        "{text}"
    );
    assert_eq!(
        line_value(
            &text,
            r#"keda_internal_panics_total{component="scaler",namespace="shop",type="scaledobject",resource="orders"}"#
        ),
        Some("2".into())
    );
    assert_eq!(
        line_value(
            &text,
            r#"keda_internal_panics_total{component="reconcile",namespace="shop",type="scaledjob",resource="batch"}"#
        ),
        Some("1".into())
    );
}

#[test]
fn paused_and_loop_latency_use_their_own_labels() {
    let metrics = Metrics::with_build_info(build());
    metrics.paused("shop", "orders", true);
    metrics.loop_latency(
        "shop",
        "orders",
        ResourceKind::ScaledObject,
        Duration::from_millis(1500),
    );
    let text = metrics.encode();
    assert!(
        text.contains(r#"keda_scaled_object_paused{namespace="shop",scaledObject="orders"} 1.0"#),
        "{text}"
    );
    assert!(
        text.contains(r#"keda_internal_scale_loop_latency_seconds{namespace="shop",type="scaledobject",resource="orders"} 1.5"#),
        "{text}"
    );
    metrics.paused("shop", "orders", false);
    assert!(
        metrics
            .encode()
            .contains(r#"keda_scaled_object_paused{namespace="shop",scaledObject="orders"} 0.0"#)
    );
}

#[test]
fn registered_totals_go_up_and_down_as_objects_come_and_go() {
    let metrics = Metrics::with_build_info(build());
    metrics.resource_registered(CustomResourceKind::ScaledObject, "shop");
    metrics.resource_registered(CustomResourceKind::ScaledObject, "shop");
    metrics.resource_registered(CustomResourceKind::ClusterTriggerAuthentication, "");
    metrics.trigger_registered("redis");
    metrics.trigger_registered("redis");
    metrics.trigger_registered("");
    metrics.resource_unregistered(CustomResourceKind::ScaledObject, "shop");
    metrics.trigger_unregistered("redis");
    let text = metrics.encode();
    assert!(
        text.contains(r#"keda_resource_registered_total{type="scaled_object",namespace="shop"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"keda_resource_registered_total{type="cluster_trigger_authentication",namespace="default"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"keda_trigger_registered_total{type="redis"} 1"#),
        "{text}"
    );
    assert!(!text.contains(r#"type="""#), "{text}");
}

#[test]
fn metric_service_calls_have_keda_s_grpc_server_names_labels_and_buckets() {
    let metrics = Metrics::with_build_info(build());
    metrics.metric_service_call_started();
    metrics.metric_service_call_handled(true, Duration::from_millis(50));
    metrics.metric_service_call_started();
    metrics.metric_service_call_handled(false, Duration::from_secs(2));
    let text = metrics.encode();
    let method = r#"grpc_type="unary",grpc_service="api.MetricsService",grpc_method="GetMetrics""#;
    for (series, value) in [
        (
            "keda_internal_metricsservice_grpc_server_started_total",
            "2",
        ),
        (
            "keda_internal_metricsservice_grpc_server_msg_received_total",
            "2",
        ),
        (
            "keda_internal_metricsservice_grpc_server_msg_sent_total",
            "2",
        ),
        (
            "keda_internal_metricsservice_grpc_server_handling_seconds_count",
            "2",
        ),
    ] {
        assert_eq!(
            line_value(&text, &format!("{series}{{{method}}}")),
            Some(value.into()),
            "{series}: {text}"
        );
    }
    for (code, value) in [("OK", "1"), ("Unknown", "1")] {
        assert_eq!(
            line_value(
                &text,
                &format!(
                    r#"keda_internal_metricsservice_grpc_server_handled_total{{{method},grpc_code="{code}"}}"#
                )
            ),
            Some(value.into()),
            "{text}"
        );
    }
    assert_eq!(
        line_value(
            &text,
            &format!(
                r#"keda_internal_metricsservice_grpc_server_handling_seconds_bucket{{le="0.1",{method}}}"#
            )
        ),
        Some("1".into()),
        "{text}"
    );
    assert!(text.contains(r#"le="120.0""#), "KEDA's last bucket: {text}");
    assert!(
        text.contains("# HELP keda_internal_metricsservice_grpc_server_handled Total number of RPCs completed on the server, regardless of success or failure.\n"),
        "{text}"
    );
}

#[test]
fn registering_a_resource_again_replaces_what_it_counted() {
    let metrics = Metrics::with_build_info(build());
    let so = CustomResourceKind::ScaledObject;
    metrics.register_resource(so, ("shop", "orders"), Some("u1"), &["redis", "cpu"]);
    // Counted again (another reconcile, another observer): no change.
    metrics.register_resource(so, ("shop", "orders"), Some("u1"), &["redis", "cpu"]);
    metrics.register_resource(so, ("shop", "payments"), Some("u2"), &["redis"]);
    let text = metrics.encode();
    assert_eq!(
        line_value(
            &text,
            r#"keda_resource_registered_total{type="scaled_object",namespace="shop"}"#
        ),
        Some("2".into()),
        "{text}"
    );
    assert_eq!(
        line_value(&text, r#"keda_trigger_registered_total{type="redis"}"#),
        Some("2".into())
    );
    // A trigger changed: the old one is no longer counted.
    metrics.register_resource(so, ("shop", "orders"), Some("u1"), &["kafka"]);
    // Another incarnation's deletion leaves this one counted.
    metrics.unregister_resource(so, ("shop", "payments"), Some("old-uid"));
    let text = metrics.encode();
    assert_eq!(
        line_value(&text, r#"keda_trigger_registered_total{type="cpu"}"#),
        Some("0".into())
    );
    assert_eq!(
        line_value(&text, r#"keda_trigger_registered_total{type="kafka"}"#),
        Some("1".into())
    );
    assert_eq!(
        line_value(
            &text,
            r#"keda_resource_registered_total{type="scaled_object",namespace="shop"}"#
        ),
        Some("2".into())
    );
    metrics.unregister_resource(so, ("shop", "payments"), Some("u2"));
    metrics.unregister_resource(so, ("shop", "payments"), None);
    metrics.unregister_resource(so, ("shop", "orders"), None);
    let text = metrics.encode();
    assert_eq!(
        line_value(
            &text,
            r#"keda_resource_registered_total{type="scaled_object",namespace="shop"}"#
        ),
        Some("0".into())
    );
    assert_eq!(
        line_value(&text, r#"keda_trigger_registered_total{type="redis"}"#),
        Some("0".into())
    );
}

#[test]
fn forgetting_an_object_removes_its_scaler_series_and_keeps_others() {
    let metrics = Metrics::with_build_info(build());
    metrics.scaler_value(&labels(0), 1.0);
    metrics.scaler_active(&labels(1), false);
    metrics.paused("shop", "orders", false);
    let other = ScalerLabels {
        scaled_resource: "payments".into(),
        ..labels(0)
    };
    metrics.scaler_value(&other, 7.0);
    metrics.forget_scalers("shop", "orders", ResourceKind::ScaledObject);
    let text = metrics.encode();
    assert!(!text.contains(r#"scaledObject="orders""#), "{text}");
    assert!(text.contains(r#"scaledObject="payments""#), "{text}");
}

#[test]
fn label_values_are_escaped_in_the_exposition() {
    let metrics = Metrics::with_build_info(build());
    let odd = ScalerLabels {
        metric: "s0-\"quoted\"".into(),
        ..labels(0)
    };
    metrics.scaler_value(&odd, 1.0);
    assert!(metrics.encode().contains(r#"metric="s0-\"quoted\"""#));
}

#[test]
fn extra_metrics_share_the_registry_and_the_prefix() {
    let metrics = Metrics::with_build_info(build());
    let counter: Counter = Counter::default();
    metrics.register("internal_extra", "An extra counter.", counter.clone());
    counter.inc();
    let text = metrics.encode();
    assert!(text.contains("keda_internal_extra_total 1"), "{text}");
    assert!(text.contains("# HELP keda_internal_extra An extra counter.\n"));
}

#[test]
fn forgetting_keeps_the_object_s_error_count_and_a_later_recording_starts_fresh_series() {
    let metrics = Metrics::with_build_info(build());
    metrics.scaler_error(&labels(0));
    metrics.scaler_error(&labels(0));
    metrics.scaler_value(&labels(0), 3.0);
    metrics.loop_latency(
        "shop",
        "orders",
        ResourceKind::ScaledObject,
        Duration::from_millis(5),
    );
    metrics.forget_scalers("shop", "orders", ResourceKind::ScaledObject);
    let text = metrics.encode();
    assert_eq!(
        line_value(
            &text,
            r#"keda_scaled_object_errors_total{namespace="shop",scaledObject="orders"}"#
        )
        .as_deref(),
        Some("2"),
        "{text}"
    );
    // Families left without a series are not exposed at all, as an empty `Family` is not.
    for gone in [
        "keda_scaler_detail_errors",
        "keda_scaler_metrics_value",
        "keda_internal_scale_loop_latency_seconds",
    ] {
        assert!(!text.contains(&format!("# TYPE {gone} ")), "{gone}: {text}");
    }
    metrics.scaler_error(&labels(0));
    let text = metrics.encode();
    assert_eq!(
        line_value(
            &text,
            &format!("keda_scaler_detail_errors_total{SCALER_LABELS_0}")
        )
        .as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        line_value(
            &text,
            r#"keda_scaled_object_errors_total{namespace="shop",scaledObject="orders"}"#
        )
        .as_deref(),
        Some("3"),
        "{text}"
    );
}

#[test]
fn a_scaled_job_and_a_scaled_object_of_one_name_keep_their_own_series() {
    let metrics = Metrics::with_build_info(build());
    let job = ScalerLabels {
        kind: ResourceKind::ScaledJob,
        ..labels(0)
    };
    metrics.scaler_value(&labels(0), 1.0);
    metrics.scaler_value(&job, 2.0);
    metrics.loop_latency(
        "shop",
        "orders",
        ResourceKind::ScaledJob,
        Duration::from_millis(250),
    );
    metrics.forget_scalers("shop", "orders", ResourceKind::ScaledObject);
    let text = metrics.encode();
    assert_eq!(
        line_value(
            &text,
            r#"keda_scaler_metrics_value{namespace="shop",metric="s0-redis-orders",scaledObject="orders",scaler="redisScaler",triggerIndex="0",type="scaledjob"}"#
        )
        .as_deref(),
        Some("2.0"),
        "{text}"
    );
    assert!(!text.contains(r#"type="scaledobject""#), "{text}");
    assert_eq!(
        line_value(
            &text,
            r#"keda_internal_scale_loop_latency_seconds{namespace="shop",type="scaledjob",resource="orders"}"#
        )
        .as_deref(),
        Some("0.25"),
        "{text}"
    );
}

#[test]
fn a_trigger_s_scaler_name_is_its_label_without_making_it() {
    for (trigger_type, name) in [
        ("redis", ""),
        ("kafka", ""),
        ("aws-sqs-queue", ""),
        ("metrics-api", ""),
        ("kafka", "orders"),
    ] {
        let scaler = ScalerName::Trigger { trigger_type, name };
        let label = scaler_label(trigger_type, name);
        assert!(scaler.is(&label), "{trigger_type}/{name}: {label}");
        assert_eq!(&*scaler.to_arc(), label);
        // Neither a prefix nor a longer text.
        assert!(!scaler.is(&label[..label.len() - 1]), "{label}");
        assert!(!scaler.is(&format!("{label}s")), "{label}");
    }
    assert_eq!(scaler_label("aws-sqs-queue", ""), "awsSqsQueueScaler");
    assert!(
        !ScalerName::Trigger {
            trigger_type: "kafka",
            name: ""
        }
        .is("")
    );
    assert!(ScalerName::Label("x").is("x"));
    assert!(!ScalerName::Label("x").is("y"));
}

/// A loop records by trigger type (no label made) and a caller by the label itself: both are
/// the same series, exposed once.
#[test]
fn recordings_by_trigger_and_by_label_reach_one_series() {
    let metrics = Metrics::new();
    let owned = ScalerLabels {
        scaler: "kafkaScaler".into(),
        metric: "s0-kafka-orders".into(),
        ..labels(0)
    };
    metrics.scaler_value(&owned, 3.0);
    metrics.scaler_error(TriggerKey {
        kind: ResourceKind::ScaledObject,
        namespace: "shop",
        scaled_resource: "orders",
        scaler: ScalerName::Trigger {
            trigger_type: "kafka",
            name: "",
        },
        trigger_index: 0,
        metric: "s0-kafka-orders",
    });
    let text = metrics.encode();
    let series = r#"{namespace="shop",metric="s0-kafka-orders",scaledObject="orders",scaler="kafkaScaler",triggerIndex="0",type="scaledobject"}"#;
    assert_eq!(
        line_value(&text, &format!("keda_scaler_metrics_value{series}")).as_deref(),
        Some("3.0"),
        "{text}"
    );
    assert_eq!(
        line_value(&text, &format!("keda_scaler_detail_errors_total{series}")).as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        text.matches("keda_scaler_metrics_value{").count(),
        1,
        "{text}"
    );
}

#[test]
fn the_scaler_label_is_the_trigger_name_or_keda_s_go_type_name() {
    assert_eq!(scaler_label("redis", ""), "redisScaler");
    assert_eq!(scaler_label("redis-cluster", ""), "redisScaler");
    assert_eq!(scaler_label("redis-streams", ""), "redisStreamsScaler");
    assert_eq!(scaler_label("memory", ""), "cpuMemoryScaler");
    assert_eq!(scaler_label("rabbitmq", ""), "rabbitMQScaler");
    assert_eq!(scaler_label("kafka", ""), "kafkaScaler");
    assert_eq!(scaler_label("metrics-api", ""), "metricsAPIScaler");
    assert_eq!(scaler_label("prometheus", ""), "prometheusScaler");
    assert_eq!(scaler_label("cron", ""), "cronScaler");
    assert_eq!(scaler_label("activemq", ""), "activeMQScaler");
    assert_eq!(scaler_label("beanstalkd", ""), "BeanstalkdScaler");
    assert_eq!(scaler_label("predictkube", ""), "PredictKubeScaler");
    assert_eq!(scaler_label("etcd", ""), "etcdScaler");
    assert_eq!(scaler_label("redis", "orders"), "orders");
}
