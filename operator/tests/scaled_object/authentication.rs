//! A ScaledObject's TriggerAuthentications: parameters, rotation, what is missing or not supported.

use super::*;

#[tokio::test]
async fn a_password_from_a_trigger_authentication_scales_and_its_rotation_is_picked_up() {
    let Some((_server, w)) = world("auth-rotation").await else {
        return;
    };
    let list = list("auth-rotation");
    let user = AclUser::create(&w.redis, "right-password").await;
    write_secret(
        &w,
        "redis-auth",
        &[("user", &user.name), ("password", "right-password")],
    )
    .await;
    create_yaml::<keda_api::TriggerAuthentication>(
        &w,
        r#"
apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: { name: redis-auth }
spec:
  secretTargetRef:
    - { parameter: username, name: redis-auth, key: user }
    - { parameter: password, name: redis-auth, key: password }
"#,
    )
    .await;
    w.deployment("authed", 0).await;
    w.push(&list, 10).await;
    let op = w.start_operator();
    w.create(&authenticated_object("authed", &list, "redis-auth"))
        .await;
    scenarios::eventually("the Deployment scaled 0 -> 1", || async {
        (w.replicas("authed").await == 1).then_some(())
    })
    .await;
    let ready = scenarios::ready(&w.get("authed").await);
    assert_eq!(ready.map(|r| r.0), Some("True".to_string()));

    // Rotate the Secret to a password Redis does not accept: the scalers are rebuilt with it
    // and the object reports the failure.
    write_secret(
        &w,
        "redis-auth",
        &[("user", &user.name), ("password", "wrong-password")],
    )
    .await;
    let (status, reason, message) =
        scenarios::eventually("Ready=False after the rotation", || async {
            scenarios::ready(&w.get("authed").await).filter(|r| r.0 == "False")
        })
        .await;
    assert_eq!(status, "False");
    assert!(
        message.contains("the server refused the credentials"),
        "{reason}: {message}"
    );
    // Only the kind of failure: never the server's own words (issue 30, finding 5).
    assert!(
        !message.contains("Password authentication failed"),
        "{reason}: {message}"
    );
    op.stop().await;
    user.delete().await;
}

/// Issue 29, row 4: as in KEDA, a trigger naming a TriggerAuthentication that does not exist is
/// built from its metadata alone (this Redis needs no password): the object is ready, and a
/// Warning `KEDAAuthRefMissing` names the TriggerAuthentication (before issue 29 the object was
/// `Ready=False` with the resolver's message).
#[tokio::test]
async fn a_missing_trigger_authentication_leaves_the_object_ready_with_a_warning_naming_it() {
    let Some((_server, w)) = world("auth-missing").await else {
        return;
    };
    w.deployment("unauthed", 0).await;
    let op = w.start_operator();
    w.create(&authenticated_object(
        "unauthed",
        &list("auth-missing"),
        "nowhere",
    ))
    .await;
    scenarios::eventually("Ready=True", || async {
        scenarios::ready(&w.get("unauthed").await).filter(|r| r.0 == "True")
    })
    .await;
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(w.client.clone(), &w.namespace);
    let note = scenarios::eventually("a KEDAAuthRefMissing Event", || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("KEDAAuthRefMissing")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("unauthed")
            })
            .and_then(|e| e.note)
    })
    .await;
    assert!(
        note.contains("TriggerAuthentication team/nowhere not found"),
        "{note}"
    );
    op.stop().await;
}

/// Cloud pod identities are out of scope for now: an object whose TriggerAuthentication asks for
/// one is not ready, and the message says so (never a silently missing credential).
#[tokio::test]
async fn a_cloud_pod_identity_makes_the_object_not_ready_saying_it_is_not_supported_yet() {
    let Some((_server, w)) = world("pod-identity").await else {
        return;
    };
    let op = w.start_operator();
    for provider in ["azure-workload", "gcp", "aws", "aws-eks"] {
        let name = format!("identity-{provider}");
        create_yaml::<keda_api::TriggerAuthentication>(
            &w,
            &format!(
                "apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata: {{ name: {name} }}
spec:
  podIdentity: {{ provider: {provider} }}
"
            ),
        )
        .await;
        w.deployment(&name, 0).await;
        w.create(&authenticated_object(&name, &list("pod-identity"), &name))
            .await;
        let (_, reason, message) = scenarios::eventually("Ready=False", || async {
            scenarios::ready(&w.get(&name).await).filter(|r| r.0 == "False")
        })
        .await;
        assert_eq!(reason, "ScaledObjectCheckFailed");
        let want = format!(
            "TriggerAuthentication team/{name}: podIdentity provider \"{provider}\" is not supported by keda-rs yet: cloud pod identities (azure-workload, gcp, aws, aws-eks) are out of scope for now"
        );
        assert!(message.contains(&want), "{message}");
    }
    op.stop().await;
}

/// Issue 16, as KEDA's `updateTriggerAuthenticationStatus`: a (Cluster)TriggerAuthentication's
/// `status.scaledobjects` lists the ScaledObjects that use it, comma separated, in the order
/// they first used it (not sorted); a deleted object leaves the list, and an empty list is no
/// field. keda-rs writes only when the list changes.
#[tokio::test]
async fn trigger_authentications_list_the_scaled_objects_that_use_them() {
    let Some((server, w)) = world("auth-users").await else {
        return;
    };
    let list = list("auth-users");
    create_yaml::<keda_api::TriggerAuthentication>(
        &w,
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata: { name: used-auth }\nspec: {}\n",
    )
    .await;
    create_cluster_yaml::<keda_api::ClusterTriggerAuthentication>(
        &w,
        "apiVersion: keda.sh/v1alpha1\nkind: ClusterTriggerAuthentication\nmetadata: { name: used-cluster-auth }\nspec: {}\n",
    )
    .await;
    for name in ["user-b", "user-a", "user-c"] {
        w.deployment(name, 0).await;
    }
    let op = w.start_operator();
    w.create(&object_using(
        "user-b",
        &list,
        "used-auth",
        "TriggerAuthentication",
    ))
    .await;
    scenarios::eventually("user-b listed", || async {
        (trigger_auth_users(&w, "used-auth").await.as_deref() == Some("user-b")).then_some(())
    })
    .await;
    w.create(&object_using(
        "user-a",
        &list,
        "used-auth",
        "TriggerAuthentication",
    ))
    .await;
    w.create(&object_using(
        "user-c",
        &list,
        "used-cluster-auth",
        "ClusterTriggerAuthentication",
    ))
    .await;
    scenarios::eventually("user-b,user-a listed", || async {
        (trigger_auth_users(&w, "used-auth").await.as_deref() == Some("user-b,user-a"))
            .then_some(())
    })
    .await;
    scenarios::eventually("user-c listed on the cluster authentication", || async {
        (cluster_trigger_auth_users(&w, "used-cluster-auth")
            .await
            .as_deref()
            == Some("user-c"))
        .then_some(())
    })
    .await;

    // Another reconcile of a listed object writes nothing.
    let writes = || {
        server
            .request_counts()
            .get(Verb::Patch, "triggerauthentications/status")
    };
    // Two reconciles of user-a that show on its status; the second starts after the first
    // (and its authentication update) finished.
    let before = writes();
    let paused = |status: &'static str| {
        let w = &w;
        async move {
            scenarios::eventually(&format!("Paused={status} on user-a"), || async {
                scenarios::condition(&w.get("user-a").await, "Paused")
                    .filter(|(s, _)| s == status)
                    .map(|_| ())
            })
            .await;
        }
    };
    w.annotate(
        "user-a",
        "autoscaling.keda.sh/paused-scale-in",
        Some("true"),
    )
    .await;
    paused("True").await;
    w.annotate("user-a", "autoscaling.keda.sh/paused-scale-in", None)
        .await;
    paused("False").await;
    assert_eq!(writes(), before, "an unchanged list is not written again");

    w.delete("user-b").await;
    scenarios::eventually("user-b unlisted", || async {
        (trigger_auth_users(&w, "used-auth").await.as_deref() == Some("user-a")).then_some(())
    })
    .await;
    w.delete("user-a").await;
    w.delete("user-c").await;
    scenarios::eventually("the lists emptied", || async {
        (trigger_auth_users(&w, "used-auth").await.is_none()
            && cluster_trigger_auth_users(&w, "used-cluster-auth")
                .await
                .is_none())
        .then_some(())
    })
    .await;
    op.stop().await;
}
