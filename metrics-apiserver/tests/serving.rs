//! The secure port end to end over TLS: authentication as an aggregated API server, the
//! SubjectAccessReview (served by memkube), the metric answer and every error status.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{DENIED_USER, FRONT_PROXY_CN, HPA_USER, NOW, Table, as_hpa, get, metric_path, start};
use keda_scalers::MetricValue;
use pretty_assertions::assert_eq;

async fn stack_with_one_object() -> (common::Stack, Arc<Table>) {
    let table = Arc::new(Table::default());
    table.set(
        "apps",
        "worker",
        vec![MetricValue::new("s0-redis-Jobs", 1.5)],
    );
    let stack = start(table.clone()).await;
    (stack, table)
}

#[tokio::test]
async fn an_allowed_front_proxy_request_gets_the_exact_external_metric_value_list() {
    let (stack, _) = stack_with_one_object().await;
    let answer = get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        Some(&stack.pki.front_proxy),
        &as_hpa(),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.body,
        format!(
            r#"{{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{{}},"items":[{{"metricName":"s0-redis-Jobs","metricLabels":{{}},"timestamp":"{NOW}","value":"1500m"}}]}}"#
        )
    );
}

#[tokio::test]
async fn a_request_without_a_client_certificate_is_401() {
    let (stack, _) = stack_with_one_object().await;
    let answer = get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        None,
        &as_hpa(),
    )
    .await;
    assert_eq!(answer.status, 401, "{}", answer.body);
    let status = answer.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Unauthorized");
    assert_eq!(status["code"], 401);
}

#[tokio::test]
async fn a_client_certificate_from_another_ca_is_401() {
    let (stack, _) = stack_with_one_object().await;
    let impostor = stack
        .pki
        .other_ca
        .issue_client(FRONT_PROXY_CN)
        .expect("certificate");
    let answer = get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        Some(&impostor),
        &as_hpa(),
    )
    .await;
    assert_eq!(answer.status, 401, "{}", answer.body);
    assert!(
        answer.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("not signed by the request-header CA")),
        "{}",
        answer.body
    );
}

#[tokio::test]
async fn a_front_proxy_certificate_with_a_common_name_not_allowed_is_401() {
    let (stack, _) = stack_with_one_object().await;
    let other = stack
        .pki
        .front_proxy_ca
        .issue_client("some-other-client")
        .expect("certificate");
    let answer = get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        Some(&other),
        &as_hpa(),
    )
    .await;
    assert_eq!(answer.status, 401, "{}", answer.body);
    assert!(answer.body.contains("some-other-client"), "{}", answer.body);
}

#[tokio::test]
async fn a_front_proxy_request_without_a_user_header_is_401() {
    let (stack, _) = stack_with_one_object().await;
    let answer = get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        Some(&stack.pki.front_proxy),
        &[],
    )
    .await;
    assert_eq!(answer.status, 401, "{}", answer.body);
}

#[tokio::test]
async fn a_user_the_subject_access_review_denies_is_403() {
    let (stack, _) = stack_with_one_object().await;
    let answer = get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        Some(&stack.pki.front_proxy),
        &[("X-Remote-User", DENIED_USER)],
    )
    .await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    let status = answer.json();
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "external.metrics.k8s.io \"s0-redis-jobs\" is forbidden: User \"mallory\" cannot list \
         resource \"s0-redis-jobs\" in API group \"external.metrics.k8s.io\" in the namespace \
         \"apps\": test policy"
    );
}

/// The aggregator and KEDA authorize a metric read as `list`: a caller granted only `list` on
/// `external.metrics.k8s.io` (as the HPA controller's ClusterRole is) reads the metric.
#[tokio::test]
async fn a_caller_granted_only_list_reads_the_metric() {
    let (stack, _) = stack_with_one_object().await;
    stack.kube.set_access_policy(|spec| {
        let attrs = spec.resource_attributes.clone().unwrap_or_default();
        k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus {
            allowed: attrs.verb.as_deref() == Some("list")
                && attrs.group.as_deref() == Some("external.metrics.k8s.io"),
            ..Default::default()
        }
    });
    let answer = get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        Some(&stack.pki.front_proxy),
        &[("X-Remote-User", HPA_USER)],
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
}

#[tokio::test]
async fn the_review_names_the_user_groups_verb_metric_and_namespace() {
    let (stack, _) = stack_with_one_object().await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    stack.kube.set_access_policy(move |spec| {
        record.lock().expect("lock").push(spec.clone());
        k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus {
            allowed: true,
            ..Default::default()
        }
    });
    let answer = get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        Some(&stack.pki.front_proxy),
        &[
            ("X-Remote-User", HPA_USER),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Extra-Scopes", "a"),
        ],
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 1);
    let spec = &seen[0];
    assert_eq!(spec.user.as_deref(), Some(HPA_USER));
    assert_eq!(spec.groups, Some(vec!["system:authenticated".to_string()]));
    assert_eq!(
        spec.extra.as_ref().and_then(|e| e.get("scopes")).cloned(),
        Some(vec!["a".to_string()])
    );
    let attrs = spec
        .resource_attributes
        .as_ref()
        .expect("resource attributes");
    assert_eq!(attrs.verb.as_deref(), Some("list"));
    assert_eq!(attrs.group.as_deref(), Some("external.metrics.k8s.io"));
    assert_eq!(attrs.resource.as_deref(), Some("s0-redis-jobs"));
    assert_eq!(attrs.namespace.as_deref(), Some("apps"));
}

#[tokio::test]
async fn a_selector_without_the_scaled_object_name_is_400_saying_so() {
    let (stack, _) = stack_with_one_object().await;
    let answer = get(
        &stack,
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/apps/s0-redis-jobs?labelSelector=app%3Dworker",
        Some(&stack.pki.front_proxy),
        &as_hpa(),
    )
    .await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let status = answer.json();
    assert_eq!(status["reason"], "BadRequest");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("scaledobject.keda.sh/name")),
        "{status}"
    );
}

#[tokio::test]
async fn an_unknown_scaled_object_or_metric_is_404() {
    let (stack, _) = stack_with_one_object().await;
    for (metric, so, mentions) in [
        ("s0-redis-jobs", "nobody", "apps/nobody"),
        ("s1-redis-other", "worker", "s1-redis-other"),
    ] {
        let answer = get(
            &stack,
            &metric_path("apps", metric, so),
            Some(&stack.pki.front_proxy),
            &as_hpa(),
        )
        .await;
        assert_eq!(answer.status, 404, "{}", answer.body);
        let status = answer.json();
        assert_eq!(status["reason"], "NotFound");
        assert!(
            status["message"]
                .as_str()
                .is_some_and(|m| m.contains(mentions)),
            "{status}"
        );
    }
}

#[tokio::test]
async fn an_operator_that_cannot_answer_is_503() {
    let (stack, table) = stack_with_one_object().await;
    table.unavailable.store(true, Ordering::SeqCst);
    let answer = get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        Some(&stack.pki.front_proxy),
        &as_hpa(),
    )
    .await;
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert_eq!(answer.json()["reason"], "ServiceUnavailable");
}

#[tokio::test]
async fn an_unreachable_operator_is_503_and_the_next_request_after_it_returns_succeeds() {
    // An operator address nothing listens on: bind a port, then free it.
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = free.local_addr().expect("address");
    drop(free);
    let pki = common::Pki::new();
    let cancel = tokio_util::sync::CancellationToken::new();
    let stack = common::start_with(pki, address, cancel.clone()).await;
    let path = metric_path("apps", "s0-redis-jobs", "worker");
    let answer = get(&stack, &path, Some(&stack.pki.front_proxy), &as_hpa()).await;
    assert_eq!(answer.status, 503, "{}", answer.body);

    // The operator comes up on that address: the error was not cached.
    let table = Arc::new(Table::default());
    table.set(
        "apps",
        "worker",
        vec![MetricValue::new("s0-redis-jobs", 2.0)],
    );
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .expect("rebind");
    let server = stack
        .pki
        .operator_ca
        .issue_server("keda-operator", &["localhost", "127.0.0.1"])
        .expect("certificate");
    let tls = keda_operator::metrics_service::server_config(
        server.cert.as_bytes(),
        server.key.as_bytes(),
        stack.pki.operator_ca.cert_pem().as_bytes(),
    )
    .expect("TLS");
    tokio::spawn(
        keda_operator::metrics_service::MetricsService::new(table, Default::default()).serve(
            listener,
            Arc::new(tls),
            cancel.clone(),
        ),
    );
    let answer = get(&stack, &path, Some(&stack.pki.front_proxy), &as_hpa()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["items"][0]["value"], "2");
}

#[tokio::test]
async fn health_endpoints_answer_without_a_client_certificate() {
    let (stack, _) = stack_with_one_object().await;
    for path in ["/healthz", "/livez", "/readyz"] {
        let answer = get(&stack, path, None, &[]).await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "ok"), "{path}");
    }
}

#[tokio::test]
async fn discovery_and_openapi_are_served_to_the_front_proxy_only() {
    let (stack, _) = stack_with_one_object().await;
    for (path, kind) in [
        ("/apis", Some("APIGroupList")),
        ("/apis/external.metrics.k8s.io", Some("APIGroup")),
        (
            "/apis/external.metrics.k8s.io/v1beta1",
            Some("APIResourceList"),
        ),
        ("/openapi/v2", None),
        ("/openapi/v3", None),
        ("/openapi/v3/apis/external.metrics.k8s.io/v1beta1", None),
    ] {
        let answer = get(&stack, path, Some(&stack.pki.front_proxy), &as_hpa()).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        if let Some(kind) = kind {
            assert_eq!(answer.json()["kind"], kind, "{path}");
        }
        let anonymous = get(&stack, path, None, &[]).await;
        assert_eq!(anonymous.status, 401, "{path}");
    }
    let answer = get(
        &stack,
        "/apis/other",
        Some(&stack.pki.front_proxy),
        &as_hpa(),
    )
    .await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.json()["kind"], "Status");
}

#[tokio::test]
async fn a_replaced_request_header_ca_takes_effect_for_the_next_request() {
    let (stack, _) = stack_with_one_object().await;
    let rotated = keda_tls::pki::CertificateAuthority::new("rotated-front-proxy-ca").expect("CA");
    let new_client = rotated.issue_client(FRONT_PROXY_CN).expect("certificate");
    let path = metric_path("apps", "s0-redis-jobs", "worker");
    assert_eq!(
        get(&stack, &path, Some(&new_client), &as_hpa())
            .await
            .status,
        401
    );
    stack.authenticator.set(
        keda_metrics_apiserver::authn::RequestHeaderConfig::new(
            rotated.cert_pem().as_bytes(),
            "rotated CA",
            vec![FRONT_PROXY_CN.into()],
            vec![],
            vec![],
            vec![],
        )
        .expect("settings"),
    );
    assert_eq!(
        get(&stack, &path, Some(&new_client), &as_hpa())
            .await
            .status,
        200
    );
    assert_eq!(
        get(&stack, &path, Some(&stack.pki.front_proxy), &as_hpa())
            .await
            .status,
        401,
        "the old CA is no longer trusted"
    );
}

#[tokio::test]
async fn served_requests_are_counted_in_the_prometheus_metrics() {
    let (stack, _) = stack_with_one_object().await;
    get(
        &stack,
        &metric_path("apps", "s0-redis-jobs", "worker"),
        Some(&stack.pki.front_proxy),
        &as_hpa(),
    )
    .await;
    let text = stack.metrics.encode();
    assert!(
        text.contains(r#"keda_metrics_apiserver_requests_total{kind="metric",code="200"} 1"#),
        "{text}"
    );
}
