//! One reconcile of a ScaledObject: validate, resolve the target, build or reuse the scalers and
//! the scale loop, write the HPA and the status; and how a failed one is reported.

use super::*;

/// The one JSON patch that gives a live ScaledObject KEDA's finalizer and its
/// `scaledobject.keda.sh/name` label, when either is missing; `None` when both are there or the
/// object is being deleted.
///
/// kube's finalizer helper would add the finalizer alone and reconcile again for the label: two
/// writes per new object where one does (at the default 20 QPS, 10,000 new ScaledObjects wait
/// minutes for each write per object). The `test` of the finalizer list makes a concurrent
/// change fail the patch rather than be overwritten; the reconcile then runs again.
pub(super) fn claim_patch(so: &ScaledObject) -> Option<json_patch::Patch> {
    if so.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let name = so.name_any();
    let has_finalizer = so.finalizers().iter().any(|f| f == FINALIZER);
    let has_label = crate::scaled_object::name_label::has_own(so);
    if has_finalizer && has_label {
        return None;
    }
    let mut ops = Vec::new();
    if !has_finalizer {
        match &so.metadata.finalizers {
            None => ops.push(serde_json::json!(
                { "op": "add", "path": "/metadata/finalizers", "value": [FINALIZER] }
            )),
            Some(current) => {
                ops.push(serde_json::json!(
                    { "op": "test", "path": "/metadata/finalizers", "value": current }
                ));
                ops.push(serde_json::json!(
                    { "op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER }
                ));
            }
        }
    }
    if !has_label {
        ops.push(match &so.metadata.labels {
            None => serde_json::json!({
                "op": "add",
                "path": "/metadata/labels",
                "value": { SCALED_OBJECT_NAME_LABEL: name },
            }),
            // JSON Pointer writes the key's '/' as "~1".
            Some(_) => serde_json::json!({
                "op": "add",
                "path": format!("/metadata/labels/{}", SCALED_OBJECT_NAME_LABEL.replace('~', "~0").replace('/', "~1")),
                "value": name,
            }),
        });
    }
    serde_json::from_value(serde_json::Value::Array(ops)).ok()
}

/// Reasons of Ready that the scale loop sets and the reconciler must leave alone. A loop's
/// next good poll clears them; `InternalError` set by a reconcile that panicked is cleared the
/// same way once the reconcile succeeds and the loop polls.
pub(super) const LOOP_OWNED_READY: [&str; 4] = [
    keda_reason::TRIGGER_ERROR,
    keda_reason::PARTIAL_TRIGGER_ERROR,
    keda_reason::ERROR_GETTING_CURRENT_REPLICAS,
    keda_reason::INTERNAL_ERROR,
];

pub(super) async fn apply_inner(so: &ScaledObject, ctx: &Context) -> Result<Action, Error> {
    let ns = so.namespace().unwrap_or_default();
    let name = so.name_any();
    let api: Api<ScaledObject> = Api::namespaced(ctx.client.clone(), &ns);
    let hpa_api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), &ns);

    // The Paused condition follows the annotations before any check that can fail (KEDA's
    // reconcileScaledObject does this first): report_failure applies the same step.
    validate_scaled_object_reconcile(so)?;
    if let Some(refusal) = ctx.routes.refusal(so) {
        // The activator does not route it: no loop may report it ready, or scale on traffic
        // that never comes. The HPA, if any, is left as it is (as for any failed check).
        ctx.loops.stop(so).await;
        return Err(Error::Route(Box::new(refusal)));
    }
    let annotations = ScaleAnnotations::from_annotations(so.annotations())?;
    let transfer = Transfer::of(so, ctx.allow_hpa_ownership_transfer);
    let target = resolve_target(&ctx.client, so).await?;
    // A Deployment or StatefulSet in the loops' target cache exists and has /scale: no GET.
    // Any other kind, or one the cache does not hold (yet), is checked through /scale, which
    // tells a missing target from one without /scale.
    let current = match ctx.loops.targets().cached_apps_replicas(&target).await {
        Some(replicas) => replicas,
        None => {
            let scale = target.get_scale(&ctx.client).await?;
            scale.spec.and_then(|s| s.replicas).unwrap_or(0)
        }
    };

    let current_status = so.status.clone().unwrap_or_default();
    let mut desired = current_status.clone();
    let mut conditions = conditions_or_initial(so.status.as_ref());
    let was_paused = find_condition(&conditions, CONDITION_PAUSED).is_some_and(|c| c.is_true());
    unpause_step(so, &mut conditions);
    paused_direction_event(so, was_paused, ctx).await;
    desired.scale_target_kind = Some(target.kind_string());
    desired.scale_target_gvkr = Some(target.gvkr().clone());
    desired.original_replica_count = current_status.original_replica_count.or(Some(current));
    desired.triggers_types = join_unique(so.spec.triggers.iter().map(|t| t.type_.as_str()));
    desired.authentications_types = join_unique(
        so.spec
            .triggers
            .iter()
            .filter_map(|t| t.authentication_ref.as_ref().map(|a| a.name.as_str())),
    );

    if annotations.pause != Pause::No {
        // Paused: no loop, no HPA (if it is this object's: another's is left as it is, and
        // the object is not ready); with paused-replicas the target is held at that count.
        ctx.loops.stop(so).await;
        delete_hpa_of(&hpa_api, so, transfer).await?;
        let settings = scaling_settings(so, &target)?;
        let now = ctx.clock.now();
        let decision = decide(
            &settings,
            &Observed {
                current_replicas: current,
                last_active_time: None,
                created_at: now,
                operator_started_at: ctx.started_at,
                now,
            },
            &TriggerSummary::default(),
        );
        if let Some(write) = &decision.scale {
            target.set_replicas(&ctx.client, write.to).await?;
            info!(
                namespace = ns,
                name,
                replicas = write.to,
                "target held at paused replicas"
            );
        }
        apply_updates(&mut conditions, &decision.conditions);
        desired.conditions = Some(conditions);
        desired.paused_replica_count = match annotations.pause {
            Pause::AtReplicas(n) => Some(n),
            _ => None,
        };
        if let Some(written) = patch_status(&api, &name, &current_status, &desired).await? {
            ctx.loops.wrote(written);
        }
        recording::scaled_object_paused(&ctx.metrics, &ns, &name, true);
        if !was_paused {
            ctx.events
                .publish(
                    so,
                    false,
                    events::SCALED_OBJECT_PAUSED,
                    message::SCALED_OBJECT_PAUSED.to_string(),
                )
                .await;
        }
        return Ok(Action::await_change());
    }

    let (scalers, started) = ctx.loops.ensure(so, &target).await?;
    if started {
        for t in &scalers.triggers {
            ctx.events
                .publish(
                    so,
                    false,
                    events::KEDA_SCALERS_STARTED,
                    format!("Scaler {} is built", t.trigger_type),
                )
                .await;
        }
    }
    let metrics = metric_specs(&name, &scalers)?;
    let hpa = desired_hpa(so, &target, &metrics);
    let cached = ctx.hpas.get(&ns, &so.hpa_name());
    if let Err(e) = ensure_hpa(
        &hpa_api,
        &hpa,
        current_status.hpa_name.as_deref(),
        cached.as_deref(),
        transfer,
    )
    .await
    {
        if matches!(e, Error::HpaNotOwned { .. }) {
            // The name is someone else's HPA: no loop may scale beside it. The loop started
            // above has not polled yet (its first poll waits for the end of this reconcile).
            ctx.loops.stop(so).await;
        }
        return Err(e);
    }

    desired.hpa_name = Some(so.hpa_name());
    desired.external_metric_names =
        (!metrics.external_names.is_empty()).then(|| metrics.external_names.clone());
    desired.resource_metric_names =
        (!metrics.resource_names.is_empty()).then(|| metrics.resource_names.clone());
    desired.composite_scaler_name = metrics.composite.clone();
    desired.paused_replica_count = None;
    let paused_direction = annotations.paused_scale_in || annotations.paused_scale_out;
    let ready = find_condition(&conditions, CONDITION_READY).cloned();
    let loop_owned = ready.as_ref().is_some_and(|c| {
        c.reason
            .as_deref()
            .is_some_and(|r| LOOP_OWNED_READY.contains(&r))
    });
    let became_ready = !ready.as_ref().is_some_and(|c| c.is_true()) && !loop_owned;
    if became_ready {
        set_condition(
            &mut conditions,
            CONDITION_READY,
            STATUS_TRUE,
            keda_reason::SCALED_OBJECT_READY,
            message::SCALED_OBJECT_READY,
        );
    }
    desired.conditions = Some(conditions);
    if let Some(written) = patch_status(&api, &name, &current_status, &desired).await? {
        ctx.loops.wrote(written);
    }
    recording::scaled_object_paused(&ctx.metrics, &ns, &name, paused_direction);
    if was_paused && !paused_direction {
        ctx.events
            .publish(
                so,
                false,
                events::SCALED_OBJECT_UNPAUSED,
                message::SCALED_OBJECT_UNPAUSED.to_string(),
            )
            .await;
    }
    if became_ready {
        ctx.events
            .publish(
                so,
                false,
                events::SCALED_OBJECT_READY,
                events::SCALED_OBJECT_READY_NOTE.to_string(),
            )
            .await;
    }
    Ok(Action::await_change())
}

/// KEDA's first step of every reconcile, before any check that can fail: `paused-scale-in` or
/// `paused-scale-out` set `Paused=True`; an object that was paused and whose pause annotations
/// are all gone goes back to `Paused=False` / `ScaledObjectUnpaused`. A `paused` or
/// `paused-replicas` object is left to the pause branch (KEDA's `needsToPause` case).
pub(super) fn unpause_step(so: &ScaledObject, conditions: &mut Vec<Condition>) {
    if so.is_paused() {
        return;
    }
    if so.is_paused_scale_in() || so.is_paused_scale_out() {
        set_condition(
            conditions,
            CONDITION_PAUSED,
            STATUS_TRUE,
            keda_reason::SCALED_OBJECT_PAUSED,
            message::SCALED_OBJECT_PAUSED,
        );
    } else if find_condition(conditions, CONDITION_PAUSED).is_some_and(|c| c.is_true()) {
        set_condition(
            conditions,
            CONDITION_PAUSED,
            STATUS_FALSE,
            keda_reason::SCALED_OBJECT_UNPAUSED,
            message::SCALED_OBJECT_UNPAUSED,
        );
    }
}

/// KEDA's `ScaledObjectPaused` Event when `paused-scale-in` or `paused-scale-out` pauses an
/// object that was not paused (the full pause publishes its own in the pause branch).
pub(super) async fn paused_direction_event(so: &ScaledObject, was_paused: bool, ctx: &Context) {
    if !was_paused && !so.is_paused() && (so.is_paused_scale_in() || so.is_paused_scale_out()) {
        ctx.events
            .publish(
                so,
                false,
                events::SCALED_OBJECT_PAUSED,
                message::SCALED_OBJECT_PAUSED.to_string(),
            )
            .await;
    }
}

pub(super) async fn report_failure(so: &ScaledObject, e: &Error, ctx: &Context) {
    let ns = so.namespace().unwrap_or_default();
    let name = so.name_any();
    match e.internal() {
        Some(internal) => recording::internal_panic(
            &ctx.metrics,
            ResourceKind::ScaledObject,
            (&ns, &name),
            internal,
        ),
        None => warn!(namespace = ns, name, error = %e, "ScaledObject check failed"),
    }
    recording::scaled_object_error(&ctx.metrics, &ns, &name);
    let api: Api<ScaledObject> = Api::namespaced(ctx.client.clone(), &ns);
    let current: ScaledObjectStatus = so.status.clone().unwrap_or_default();
    let mut desired = current.clone();
    let mut conditions = conditions_or_initial(so.status.as_ref());
    let was_paused = find_condition(&conditions, CONDITION_PAUSED).is_some_and(|c| c.is_true());
    unpause_step(so, &mut conditions);
    paused_direction_event(so, was_paused, ctx).await;
    let message = e.keda_message();
    set_condition(
        &mut conditions,
        CONDITION_READY,
        STATUS_FALSE,
        e.condition_reason(keda_reason::SCALED_OBJECT_CHECK_FAILED),
        &message,
    );
    // As KEDA: what the triggers say is unknown while the object cannot be checked.
    set_condition(
        &mut conditions,
        CONDITION_ACTIVE,
        STATUS_UNKNOWN,
        keda_reason::UNKNOWN_STATE,
        message::SCALED_OBJECT_CHECK_FAILED,
    );
    desired.conditions = Some(conditions);
    match patch_status(&api, &name, &current, &desired).await {
        Ok(Some(written)) => ctx.loops.wrote(written),
        Ok(None) => {}
        Err(e) => {
            warn!(namespace = ns, name, error = %e, "writing the failure to the status failed")
        }
    }
    if let Some(note) = e.scaler_build_failure() {
        ctx.events
            .publish(so, true, events::KEDA_SCALER_FAILED, note)
            .await;
    }
    if let Some(note) = e.keda_target_note() {
        ctx.events
            .publish_action(
                so,
                true,
                events::SCALED_OBJECT_CHECK_FAILED,
                events::CHECK_SCALE_TARGET,
                note.to_string(),
            )
            .await;
    }
    let event_reason = e
        .route_refusal()
        .map_or(events::SCALED_OBJECT_CHECK_FAILED, Refusal::reason);
    ctx.events.publish(so, true, event_reason, message).await;
}
