//! A ScaledJob's TriggerAuthentications.

use super::*;

#[tokio::test]
async fn a_trigger_authentication_supplies_a_scaled_job_trigger_parameter() {
    let Some((w, mut redis, list)) = redis_world("scaled job trigger authentication").await else {
        return;
    };
    // The Redis address is not in the trigger: it comes from a Secret through a
    // TriggerAuthentication, as KEDA users commonly write it.
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "redis-conn", "namespace": NS},
        "stringData": {"address": "127.0.0.1:6379"}
    }))
    .expect("a Secret");
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(w.client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create Secret");
    let auth: keda_api::TriggerAuthentication = serde_yaml::from_str(&format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{ name: redis-auth, namespace: {NS} }}
spec:
  secretTargetRef:
    - {{ parameter: address, name: redis-conn, key: address }}
"#
    ))
    .expect("a TriggerAuthentication");
    Api::<keda_api::TriggerAuthentication>::namespaced(w.client.clone(), NS)
        .create(&PostParams::default(), &auth)
        .await
        .expect("create TriggerAuthentication");
    push(&mut redis, &list, 3).await;
    let yaml = redis_job("authed", &list, "", "")
        .replace("        address: 127.0.0.1:6379\n", "")
        .replace(
            "        listLength: \"1\"\n",
            "        listLength: \"1\"\n      authenticationRef:\n        name: redis-auth\n",
        );
    assert!(
        !yaml.contains("address:"),
        "the trigger names no address itself"
    );
    let sj = w.create(&yaml).await;
    w.polls_reach(&sj, 1).await;
    assert_eq!(w.job_names("authed").await.len(), 3, "one Job per item");

    // Rotating the Secret rebuilds the loop's scalers with the new address, where nothing
    // listens: the rebuild fails and the ScaledJob says so (without the rotation signal the
    // running loop would keep its old, working client and stay Ready).
    let rotated: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "redis-conn", "namespace": NS},
        "stringData": {"address": "127.0.0.1:1"}
    }))
    .expect("a Secret");
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(w.client.clone(), NS)
        .patch(
            "redis-conn",
            &kube::api::PatchParams::apply("keda-rs-test").force(),
            &kube::api::Patch::Apply(&rotated),
        )
        .await
        .expect("rotate the Secret");
    let message = eventually("Ready=False after the rotation", || async {
        let c = w
            .get("authed")
            .await
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready" && c.status == "False")?;
        c.message
    })
    .await;
    assert!(
        message.contains("trigger 0 (redis)") && message.contains("127.0.0.1:1"),
        "{message}"
    );
    drop_key(&mut redis, &list).await;
}

/// The value of the one series of `family` whose labels contain every one of `labels`.
/// Issue 16, as KEDA's ScaledJob controller: a TriggerAuthentication's `status.scaledjobs`
/// lists the ScaledJobs that use it (not `status.scaledobjects`), and a deleted ScaledJob
/// leaves it; an empty list is no field.
#[tokio::test]
async fn a_trigger_authentication_lists_the_scaled_jobs_that_use_it() {
    let dials = dial::Dials::new();
    let w = World::start_with(dials.registry());
    let auths: Api<keda_api::TriggerAuthentication> = Api::namespaced(w.client.clone(), NS);
    let auth: keda_api::TriggerAuthentication = serde_yaml::from_str(
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata: { name: job-auth }\nspec: {}\n",
    )
    .expect("YAML");
    auths
        .create(&PostParams::default(), &auth)
        .await
        .expect("create TriggerAuthentication");
    let users = || async {
        let status = auths.get("job-auth").await.expect("get").status;
        (
            status.as_ref().and_then(|s| s.scaledjobs.clone()),
            status.and_then(|s| s.scaledobjects),
        )
    };
    let yaml = dial_job("authed-job").replace(
        "        dial: authed-job\n",
        "        dial: authed-job\n      authenticationRef: { name: job-auth }\n",
    );
    assert!(yaml.contains("authenticationRef"), "{yaml}");
    w.create(&yaml).await;
    eventually("authed-job listed", || async {
        (users().await == (Some("authed-job".to_string()), None)).then_some(())
    })
    .await;
    w.scaled_jobs()
        .delete("authed-job", &kube::api::DeleteParams::default())
        .await
        .expect("delete ScaledJob");
    eventually("authed-job unlisted", || async {
        (users().await == (None, None)).then_some(())
    })
    .await;
}
