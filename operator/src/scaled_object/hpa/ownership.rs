//! Which HPAs a ScaledObject may change or delete: only those whose controller owner reference
//! is the object itself (same UID). keda-rs sets that reference on every HPA it creates, and
//! KEDA sets the same one (`controllerutil.SetControllerReference`), so an HPA KEDA left for
//! the same object counts as owned. Anything else under the object's HPA name (no owner, another
//! owner, another workload's HPA named by `spec.advanced.horizontalPodAutoscalerConfig.name`)
//! is never updated or deleted: the object is `Ready=False` with [`Error::HpaNotOwned`].
//!
//! KEDA lets a ScaledObject take over such an HPA when it carries
//! `scaledobject.keda.sh/transfer-hpa-ownership: "true"` and names the HPA in
//! `spec.advanced.horizontalPodAutoscalerConfig.name`. Both are the tenant's to write, so
//! keda-rs honours them only when the administrator started the operator with
//! `--allow-hpa-ownership-transfer` ([`Transfer`]).

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::ScaledObject;
use keda_api::annotations::TRANSFER_HPA_OWNERSHIP;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Preconditions};

use crate::shared::error::{Error, is_not_found};

/// Whose an existing HPA is, as far as a ScaledObject is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// Its controller owner reference is the ScaledObject itself (same UID): keda-rs made it,
    /// or KEDA did for this very object (KEDA sets the same reference).
    Owned,
    /// Anything else, described for the message: `it has no controller owner reference`, `its
    /// controller is Deployment shop`, `its controller is ScaledObject other (another object)`.
    NotOwned(String),
}

/// Whether `existing` belongs to the ScaledObject with UID `owner_uid`: only its controller
/// owner reference counts, never its name, labels or `scaleTargetRef`.
///
/// This is the one place that decides ownership, so adopting other HPAs (KEDA's, on
/// migration) changes only here.
pub fn ownership(existing: &HorizontalPodAutoscaler, owner_uid: Option<&str>) -> Ownership {
    let controller = existing
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    match (controller, owner_uid) {
        (Some(c), Some(uid)) if c.uid == uid => Ownership::Owned,
        (Some(c), _) if c.kind == "ScaledObject" && c.api_version.starts_with("keda.sh/") => {
            Ownership::NotOwned(format!(
                "its controller is ScaledObject {} (another object)",
                c.name
            ))
        }
        (Some(c), _) => Ownership::NotOwned(format!("its controller is {} {}", c.kind, c.name)),
        (None, _) => Ownership::NotOwned("it has no controller owner reference".to_string()),
    }
}

/// Whether a ScaledObject may take over an HPA it does not own (KEDA's ownership transfer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// Never (the default).
    Refused,
    /// The object asks for it, but the operator was not started with
    /// `--allow-hpa-ownership-transfer`: refused, and the message says so.
    NotAllowed,
    /// Allowed: the administrator opted in and the object asks for it.
    Allowed,
}

impl Transfer {
    /// `so`'s case: it asks with `scaledobject.keda.sh/transfer-hpa-ownership: "true"` and the
    /// HPA named in `spec.advanced.horizontalPodAutoscalerConfig.name` (KEDA's two
    /// conditions); `allowed` is `--allow-hpa-ownership-transfer`.
    pub fn of(so: &ScaledObject, allowed: bool) -> Transfer {
        let asks = so
            .annotations()
            .get(TRANSFER_HPA_OWNERSHIP)
            .is_some_and(|v| v == "true")
            && so
                .spec
                .advanced
                .as_ref()
                .and_then(|a| a.horizontal_pod_autoscaler_config.as_ref())
                .and_then(|h| h.name.as_deref())
                .is_some_and(|name| !name.is_empty());
        match (asks, allowed) {
            (false, _) => Transfer::Refused,
            (true, false) => Transfer::NotAllowed,
            (true, true) => Transfer::Allowed,
        }
    }

    /// What `ownership` means for writing: owned, or taken over when allowed.
    pub(super) fn may_write(self, ownership: &Ownership) -> bool {
        matches!(ownership, Ownership::Owned) || self == Transfer::Allowed
    }

    /// `why`, with what the object would need.
    pub(super) fn explain(self, why: String) -> String {
        match self {
            Transfer::NotAllowed => format!(
                "{why}; its {TRANSFER_HPA_OWNERSHIP} annotation takes effect only when the operator runs with --allow-hpa-ownership-transfer"
            ),
            _ => why,
        }
    }
}

/// The UID of `hpa`'s controller owner reference, as [`desired_hpa`] sets it.
pub(super) fn controller_uid(hpa: &HorizontalPodAutoscaler) -> Option<&str> {
    hpa.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// The error for an HPA under the object's HPA name that it does not own.
pub(super) fn not_owned(name: &str, why: String) -> Error {
    Error::HpaNotOwned {
        hpa: name.to_string(),
        why,
    }
}

/// What [`delete_owned_hpa`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// The HPA was this object's and is deleted.
    Deleted,
    /// There is no HPA of that name.
    Absent,
    /// There is one, and it is not this object's ([`Ownership::NotOwned`]): left as it is.
    NotOwned(String),
}

/// Deletes the HPA `name` if the object with UID `owner_uid` owns it ([`ownership`]) or may
/// take it over (`transfer`); a missing HPA is fine. The delete carries the HPA's UID and resourceVersion as
/// preconditions, so an HPA replaced by someone else's since it was read is never deleted.
///
/// # Errors
/// The API error, naming the HPA.
pub async fn delete_owned_hpa(
    api: &Api<HorizontalPodAutoscaler>,
    name: &str,
    owner_uid: Option<&str>,
    transfer: Transfer,
) -> Result<Deletion, Error> {
    let Some(existing) = api
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading HPA {name}"), e))?
    else {
        return Ok(Deletion::Absent);
    };
    let owner = ownership(&existing, owner_uid);
    if !transfer.may_write(&owner)
        && let Ownership::NotOwned(why) = owner
    {
        return Ok(Deletion::NotOwned(transfer.explain(why)));
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: existing.metadata.uid.clone(),
            resource_version: existing.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(Deletion::Deleted),
        Err(e) if is_not_found(&e) => Ok(Deletion::Absent),
        Err(e) => Err(Error::kube(format!("deleting HPA {name}"), e)),
    }
}

/// Deletes the HPA of a paused object, if it owns it (or may take it over: `transfer`).
///
/// # Errors
/// [`Error::HpaNotOwned`] when an HPA of that name exists and is not this object's: it is
/// left as it is. Else the API error, naming the HPA.
pub async fn delete_hpa_of(
    api: &Api<HorizontalPodAutoscaler>,
    so: &ScaledObject,
    transfer: Transfer,
) -> Result<Deletion, Error> {
    let name = so.hpa_name();
    match delete_owned_hpa(api, &name, so.metadata.uid.as_deref(), transfer).await? {
        Deletion::NotOwned(why) => Err(not_owned(&name, why)),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa_owned_by(owners: serde_json::Value) -> HorizontalPodAutoscaler {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "shop", "namespace": "team", "ownerReferences": owners },
        }))
        .expect("hpa")
    }

    fn owner(kind: &str, name: &str, uid: &str, controller: bool) -> serde_json::Value {
        let api_version = if kind == "ScaledObject" {
            "keda.sh/v1alpha1"
        } else {
            "apps/v1"
        };
        serde_json::json!({
            "apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
            "controller": controller
        })
    }

    #[test]
    fn only_a_controller_reference_to_the_same_object_makes_an_hpa_owned() {
        let not_owned = |why: &str| Ownership::NotOwned(why.to_string());
        let cases = [
            // keda-rs's own, or KEDA's for the same object: the same UID.
            (
                serde_json::json!([owner("ScaledObject", "worker", "u1", true)]),
                Ownership::Owned,
            ),
            // Made by hand.
            (
                serde_json::json!([]),
                not_owned("it has no controller owner reference"),
            ),
            // Another ScaledObject's, even of the same name (deleted and recreated).
            (
                serde_json::json!([owner("ScaledObject", "worker", "u0", true)]),
                not_owned("its controller is ScaledObject worker (another object)"),
            ),
            // Another workload's controller.
            (
                serde_json::json!([owner("Deployment", "shop", "u9", true)]),
                not_owned("its controller is Deployment shop"),
            ),
            // A plain (non-controller) reference to this object is not ownership.
            (
                serde_json::json!([owner("ScaledObject", "worker", "u1", false)]),
                not_owned("it has no controller owner reference"),
            ),
        ];
        for (owners, expected) in cases {
            assert_eq!(
                ownership(&hpa_owned_by(owners.clone()), Some("u1")),
                expected,
                "{owners}"
            );
        }
        // An object without a UID owns nothing.
        assert_eq!(
            ownership(
                &hpa_owned_by(serde_json::json!([owner("ScaledObject", "w", "", true)])),
                None
            ),
            not_owned("its controller is ScaledObject w (another object)")
        );
    }

    #[test]
    fn a_transfer_needs_the_annotation_the_named_hpa_and_the_operator_s_opt_in() {
        let so = |annotation: bool, named: bool| -> ScaledObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "metadata": { "name": "worker", "annotations": if annotation {
                    serde_json::json!({ TRANSFER_HPA_OWNERSHIP: "true" })
                } else { serde_json::json!({}) } },
                "spec": {
                    "scaleTargetRef": { "name": "worker" },
                    "advanced": if named {
                        serde_json::json!({ "horizontalPodAutoscalerConfig": { "name": "shop" } })
                    } else { serde_json::json!({}) },
                    "triggers": []
                }
            }))
            .expect("ScaledObject")
        };
        assert_eq!(Transfer::of(&so(true, true), true), Transfer::Allowed);
        assert_eq!(Transfer::of(&so(true, true), false), Transfer::NotAllowed);
        assert_eq!(Transfer::of(&so(true, false), true), Transfer::Refused);
        assert_eq!(Transfer::of(&so(false, true), true), Transfer::Refused);
        let foreign = Ownership::NotOwned("it has no controller owner reference".into());
        assert!(Transfer::Allowed.may_write(&foreign));
        assert!(!Transfer::NotAllowed.may_write(&foreign));
        assert!(Transfer::Refused.may_write(&Ownership::Owned));
        assert!(Transfer::NotAllowed.explain("x".into()).ends_with(
            "takes effect only when the operator runs with --allow-hpa-ownership-transfer"
        ));
    }

    #[test]
    fn the_refusal_names_the_field_and_the_hpa() {
        let error = not_owned("shop", "it has no controller owner reference".to_string());
        let message = error.to_string();
        assert!(
            message.starts_with(
                "spec.advanced.horizontalPodAutoscalerConfig.name: HorizontalPodAutoscaler shop exists and is not owned by this ScaledObject (it has no controller owner reference)"
            ),
            "{message}"
        );
    }
}
