//! A deleted ScaledObject: stop its loop, delete the HPA it owns, put the target back to its
//! original replica count, and let the finalizer go even when that fails.

use super::*;

pub(super) async fn cleanup(so: &ScaledObject, ctx: &Context) -> Result<Action, Error> {
    let ns = so.namespace().unwrap_or_default();
    let name = so.name_any();
    ctx.loops.forget(so).await;
    ctx.resolver.forget(&ScalableRef::new(
        keda_scalers::ScalableKind::ScaledObject,
        &ns,
        &name,
    ));
    // The HPA is not deleted here: its controller owner reference to this object lets the
    // garbage collector remove it, so `kubectl delete --cascade=orphan` keeps it, as in KEDA.
    let original = so.status.as_ref().and_then(|s| s.original_replica_count);
    if so.spec.restore_to_original_replica_count()
        && let Some(n) = original
    {
        restore_original_replicas(so, ctx, n).await;
    }
    recording::scaled_object_paused(&ctx.metrics, &ns, &name, false);
    recording::scaled_object_deleted(&ctx.metrics, &ns, &name);
    ctx.events
        .publish(
            so,
            true,
            events::SCALED_OBJECT_DELETED,
            "ScaledObject was deleted".to_string(),
        )
        .await;
    Ok(Action::await_change())
}

/// How long the restore of a deleted object's target may take before the finalizer is removed
/// anyway.
pub(super) const RESTORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Scales a deleted object's target back to `replicas` (`restoreToOriginalReplicaCount`). As in
/// KEDA's `finalizeScaledObject`, a failure does not keep the finalizer (a delete that retries a
/// refused `/scale` write forever never completes): it is logged and reported as a Warning
/// Event naming the target and the count, with the API server's status code, not its words.
pub(super) async fn restore_original_replicas(so: &ScaledObject, ctx: &Context, replicas: i32) {
    let ns = so.namespace().unwrap_or_default();
    let name = so.name_any();
    let target = match resolve_target(&ctx.client, so).await {
        Ok(target) => target,
        Err(e) => {
            warn!(namespace = ns, name, error = %e, "cannot restore replicas");
            let message = format!(
                "Failed to restore the scale target to its original {replicas} replicas: the target cannot be resolved"
            );
            ctx.events
                .publish(so, true, events::SCALE_TARGET_RESTORE_FAILED, message)
                .await;
            return;
        }
    };
    let outcome =
        tokio::time::timeout(RESTORE_TIMEOUT, target.set_replicas(&ctx.client, replicas)).await;
    let why = match outcome {
        Ok(Ok(())) => {
            info!(namespace = ns, name, replicas, "restored original replicas");
            return;
        }
        Ok(Err(Error::Kube { source, .. })) if crate::shared::error::is_not_found(&source) => {
            return;
        }
        Ok(Err(e)) => {
            warn!(namespace = ns, name, replicas, error = %e,
                "restoring the original replicas failed; removing the finalizer anyway");
            match &e {
                Error::Kube {
                    source: kube::Error::Api(s),
                    ..
                } => format!("the API server answered {}", s.code),
                _ => "the API server could not be reached".to_string(),
            }
        }
        Err(_) => {
            warn!(
                namespace = ns,
                name,
                replicas,
                "restoring the original replicas timed out; removing the finalizer anyway"
            );
            format!("no answer within {} s", RESTORE_TIMEOUT.as_secs())
        }
    };
    let message = format!(
        "Failed to restore {} to its original {replicas} replicas: {why}",
        target.describe()
    );
    ctx.events
        .publish(so, true, events::SCALE_TARGET_RESTORE_FAILED, message)
        .await;
}
