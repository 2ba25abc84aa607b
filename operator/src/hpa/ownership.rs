//! Which HPAs a ScaledObject may change or delete: only those whose controller owner reference
//! is the object itself (same UID). keda-rs sets that reference on every HPA it creates, and
//! KEDA sets the same one (`controllerutil.SetControllerReference`), so an HPA KEDA left for
//! the same object counts as owned. Anything else under the object's HPA name (no owner, another
//! owner, another workload's HPA named by `spec.advanced.horizontalPodAutoscalerConfig.name`)
//! is never updated or deleted: the object is `Ready=False` with [`Error::HpaNotOwned`].

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use keda_api::ScaledObject;
use kube::api::{Api, DeleteParams, Preconditions};

use crate::error::{Error, is_not_found};

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

/// Deletes the HPA `name` if the object with UID `owner_uid` owns it ([`ownership`]); a
/// missing HPA is fine. The delete carries the HPA's UID and resourceVersion as
/// preconditions, so an HPA replaced by someone else's since it was read is never deleted.
///
/// # Errors
/// The API error, naming the HPA.
pub async fn delete_owned_hpa(
    api: &Api<HorizontalPodAutoscaler>,
    name: &str,
    owner_uid: Option<&str>,
) -> Result<Deletion, Error> {
    let Some(existing) = api
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading HPA {name}"), e))?
    else {
        return Ok(Deletion::Absent);
    };
    if let Ownership::NotOwned(why) = ownership(&existing, owner_uid) {
        return Ok(Deletion::NotOwned(why));
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

/// Deletes the HPA of a paused object, if it owns it.
///
/// # Errors
/// [`Error::HpaNotOwned`] when an HPA of that name exists and is not this object's: it is
/// left as it is. Else the API error, naming the HPA.
pub async fn delete_hpa_of(
    api: &Api<HorizontalPodAutoscaler>,
    so: &ScaledObject,
) -> Result<Deletion, Error> {
    let name = so.hpa_name();
    match delete_owned_hpa(api, &name, so.metadata.uid.as_deref()).await? {
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
