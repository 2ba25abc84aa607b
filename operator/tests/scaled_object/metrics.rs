//! What a ScaledObject's polls and reconciles record under KEDA's metric names.

use super::*;

#[tokio::test]
async fn a_poll_records_the_scaler_value_and_activity_under_keda_s_names_and_labels() {
    let Some((_server, w)) = world("recording").await else {
        return;
    };
    let list = list("recording");
    w.deployment("recorded", 0).await;
    w.push(&list, 7).await;
    let op = w.start_operator();
    let so = w
        .create(&scenarios::redis_object(
            "recorded", "recorded", &list, "", "",
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    let text = w.metrics.encode();
    let labels = format!(
        r#"{{namespace="team",metric="s0-redis-{list}",scaledObject="recorded",scaler="redisScaler",triggerIndex="0",type="scaledobject"}}"#
    );
    let sample = |name: &str| {
        let prefix = format!("{name}{labels} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name}{labels} in\n{text}"))
    };
    assert_eq!(sample("keda_scaler_metrics_value"), 7.0);
    assert_eq!(sample("keda_scaler_active"), 1.0);
    assert!(
        text.contains(r#"keda_trigger_registered_total{type="redis"} 1"#),
        "{text}"
    );
    op.stop().await;
}

/// Issue 16, as KEDA's controllers' `updatePromMetrics`: `keda_resource_registered_total`
/// counts ScaledObjects at reconcile, a paused one included (with its triggers in
/// `keda_trigger_registered_total`), and every TriggerAuthentication (per namespace) and
/// ClusterTriggerAuthentication (under `default`) that exists; deletions count down.
#[tokio::test]
async fn custom_resources_are_counted_at_reconcile_paused_objects_and_authentications_included() {
    let Some((_server, w)) = world("registered").await else {
        return;
    };
    let list = list("registered");
    create_yaml::<keda_api::TriggerAuthentication>(
        &w,
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata: { name: counted-auth }\nspec: {}\n",
    )
    .await;
    create_cluster_yaml::<keda_api::ClusterTriggerAuthentication>(
        &w,
        "apiVersion: keda.sh/v1alpha1\nkind: ClusterTriggerAuthentication\nmetadata: { name: counted-cluster-auth }\nspec: {}\n",
    )
    .await;
    w.deployment("counted", 0).await;
    let op = w.start_operator();
    w.create(&scenarios::redis_object(
        "counted",
        "counted",
        &list,
        "",
        r#""autoscaling.keda.sh/paused": "true""#,
    ))
    .await;
    let objects = r#"type="scaled_object",namespace="team""#;
    series_reaches(&w, "keda_resource_registered_total", objects, 1.0).await;
    series_reaches(&w, "keda_trigger_registered_total", r#"type="redis""#, 1.0).await;
    series_reaches(
        &w,
        "keda_resource_registered_total",
        r#"type="trigger_authentication",namespace="team""#,
        1.0,
    )
    .await;
    series_reaches(
        &w,
        "keda_resource_registered_total",
        r#"type="cluster_trigger_authentication",namespace="default""#,
        1.0,
    )
    .await;
    assert!(
        !op.loops.is_running("team", "counted").await,
        "paused: no loop, yet counted"
    );

    w.delete("counted").await;
    series_reaches(&w, "keda_resource_registered_total", objects, 0.0).await;
    series_reaches(&w, "keda_trigger_registered_total", r#"type="redis""#, 0.0).await;
    let auths: kube::Api<keda_api::TriggerAuthentication> =
        kube::Api::namespaced(w.client.clone(), &w.namespace);
    auths
        .delete("counted-auth", &Default::default())
        .await
        .expect("delete TriggerAuthentication");
    series_reaches(
        &w,
        "keda_resource_registered_total",
        r#"type="trigger_authentication",namespace="team""#,
        0.0,
    )
    .await;
    op.stop().await;
}

/// Issue 16, as KEDA's getScalerState, which skips every metric spec that is not External: a
/// `cpu` trigger gets no per-scaler series at all (no value, no activity, no latency, no error
/// counter), while the External trigger beside it does.
#[tokio::test]
async fn a_cpu_trigger_records_only_keda_scaler_active_as_in_keda() {
    let Some((_server, w)) = world("cpu-series").await else {
        return;
    };
    let list = list("cpu-series");
    w.deployment("mixed-cpu", 0).await;
    w.push(&list, 7).await;
    let op = w.start_operator();
    let so = w
        .create(&format!(
            r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: mixed-cpu
spec:
  scaleTargetRef:
    name: mixed-cpu
  pollingInterval: 10
  minReplicaCount: 1
  maxReplicaCount: 3
  triggers:
    - type: cpu
      metricType: Utilization
      metadata:
        value: "60"
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: {list}
        listLength: "5"
"#
        ))
        .await;
    w.polls_reach(&op, &so, 1).await;
    let text = w.metrics.encode();
    let per_scaler = |line: &&str| {
        line.starts_with("keda_scaler_") && line.contains(r#"scaledObject="mixed-cpu""#)
    };
    let series: Vec<&str> = text.lines().filter(per_scaler).collect();
    assert!(
        series
            .iter()
            .any(|l| l.starts_with("keda_scaler_active{") && l.contains(r#"triggerIndex="1""#)),
        "the redis trigger is recorded: {text}"
    );
    // KEDA's getScalerState records only `keda_scaler_active` 1 for a cpu trigger (issue 29,
    // row 7), no value, latency or error series.
    let cpu: Vec<&&str> = series
        .iter()
        .filter(|l| l.contains(r#"triggerIndex="0""#) || l.contains("cpuMemoryScaler"))
        .collect();
    assert_eq!(
        cpu,
        [
            &"keda_scaler_active{namespace=\"team\",metric=\"cpu\",scaledObject=\"mixed-cpu\",scaler=\"cpuMemoryScaler\",triggerIndex=\"0\",type=\"scaledobject\"} 1.0"
        ],
        "the cpu trigger is only active: {series:#?}"
    );
    op.stop().await;
}

/// Issue 29, row 7: KEDA's getScalerState sets `keda_scaler_active` to 1 for every cpu and
/// memory trigger at each poll (they are Resource metrics the HPA reads itself), with the
/// resource as `metric` and the trigger's name (else `cpuMemoryScaler`) as `scaler`.
#[tokio::test]
async fn cpu_and_memory_triggers_are_active_in_keda_scaler_active() {
    let Some((_server, w)) = world("cpu-active").await else {
        return;
    };
    let list = list("cpu-active");
    w.deployment("busy", 1).await;
    let op = w.start_operator();
    let so = w
        .create(&format!(
            r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: busy
spec:
  scaleTargetRef:
    name: busy
  minReplicaCount: 1
  triggers:
    - type: redis
      metadata:
        address: 127.0.0.1:6379
        listName: {list}
        listLength: "5"
    - type: cpu
      metricType: Utilization
      metadata:
        value: "60"
    - type: memory
      name: mem
      metricType: Utilization
      metadata:
        value: "70"
"#
        ))
        .await;
    scenarios::hpa_exists(&w, "keda-hpa-busy").await;
    w.polls_reach(&op, &so, 1).await;
    let text = w.metrics.encode();
    let active = |metric: &str, scaler: &str| {
        text.lines().any(|l| {
            l.starts_with("keda_scaler_active{")
                && l.contains(&format!("metric=\"{metric}\""))
                && l.contains(&format!("scaler=\"{scaler}\""))
                && l.contains("scaledObject=\"busy\"")
                && l.ends_with(" 1.0")
        })
    };
    assert!(active("cpu", "cpuMemoryScaler"), "{text}");
    assert!(active("memory", "mem"), "{text}");
    op.stop().await;
}
