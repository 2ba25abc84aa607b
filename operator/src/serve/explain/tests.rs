use super::*;

#[test]
fn average_value_divides_the_total_by_the_target() {
    assert_eq!(
        hpa_replicas(MetricTargetType::AverageValue, 12.0, 5.0, 1),
        Some((3, "ceil(12 / 5) = 3".to_string()))
    );
}

#[test]
fn value_multiplies_the_ratio_by_the_current_count() {
    assert_eq!(
        hpa_replicas(MetricTargetType::Value, 30.0, 10.0, 2),
        Some((6, "ceil(2 x 30 / 10) = 6".to_string()))
    );
}

#[test]
fn a_ratio_within_ten_percent_keeps_the_count() {
    // 21 / (5 x 4) = 1.05: within the tolerance.
    let (n, why) = hpa_replicas(MetricTargetType::AverageValue, 21.0, 5.0, 4).expect("some");
    assert_eq!(n, 4);
    assert!(why.contains("tolerance"), "{why}");
    // 23 / 20 = 1.15: outside.
    assert_eq!(
        hpa_replicas(MetricTargetType::AverageValue, 23.0, 5.0, 4).map(|r| r.0),
        Some(5)
    );
}

#[test]
fn no_count_without_a_target_or_replicas() {
    assert_eq!(
        hpa_replicas(MetricTargetType::AverageValue, 1.0, 0.0, 1),
        None
    );
    assert_eq!(
        hpa_replicas(MetricTargetType::AverageValue, 1.0, 5.0, 0),
        None
    );
    assert_eq!(
        hpa_replicas(MetricTargetType::Value, f64::NAN, 5.0, 1),
        None
    );
}

#[test]
fn durations_read_as_kubectl_ages() {
    assert_eq!(human_duration(45), "45s");
    assert_eq!(human_duration(252), "4m12s");
    assert_eq!(human_duration(300), "5m");
    assert_eq!(human_duration(7500), "2h5m");
    assert_eq!(human_duration(-3), "0s");
}

#[test]
fn numbers_drop_needless_decimals() {
    assert_eq!(number(12.0), "12");
    assert_eq!(number(0.5), "0.5");
    assert_eq!(number(1.0 / 3.0), "0.333");
}

#[test]
fn activation_is_the_activation_metadata_key() {
    let so: ScaledObject = serde_yaml::from_str(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: { name: a, namespace: n }
spec:
  scaleTargetRef: { name: a }
  triggers:
    - type: redis
      metadata: { listName: l, listLength: "5", activationListLength: "2" }
    - type: cron
      metadata: { timezone: UTC, start: "0 * * * *", end: "1 * * * *", desiredReplicas: "2" }
"#,
    )
    .expect("yaml");
    assert_eq!(
        activation(&so, 0),
        Activation {
            parameter: Some("activationListLength".into()),
            value: "2".into()
        }
    );
    assert_eq!(activation(&so, 1).parameter, None);
    assert_eq!(activation(&so, 1).value, "0");
}
