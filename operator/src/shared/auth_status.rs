//! `status.scaledobjects` / `status.scaledjobs` of TriggerAuthentications and
//! ClusterTriggerAuthentications: the names of the ScaledObjects and ScaledJobs whose triggers
//! use them, comma separated, kept by the reconcilers of those objects as KEDA's are
//! (`pkg/status/status.go` `UpdateTriggerAuthenticationStatusFromTriggers`, the controllers'
//! `updateTriggerAuthenticationStatus` and `updateTriggerAuthenticationStatusOnDelete`).
//!
//! KEDA's format and life cycle: a reconcile of a live object appends its name at the end of
//! the list of every (Cluster)TriggerAuthentication its triggers reference, when it is not
//! there yet (no sorting: the order is the order of first use); the deletion of the object
//! removes it; an empty list is no field at all. Only the name is written, without the
//! namespace, also on a ClusterTriggerAuthentication used from several namespaces. A name stays
//! on an authentication the object stopped referencing until it is deleted, as in KEDA.
//!
//! Unlike KEDA, which patches at every reconcile, keda-rs writes only when the list changes:
//! it compares with the resolver's watch cache, and writes with the cached `resourceVersion` as
//! a precondition, so that two objects added at once cannot lose each other's name (on a
//! conflict it reads the object once and tries again). A failure is logged and never fails the
//! reconcile, as in KEDA.

use keda_api::{
    AuthenticationKind, ClusterTriggerAuthentication, ScaleTrigger, TriggerAuthentication,
};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;
use tracing::{debug, warn};

use crate::process::telemetry::ResourceKind;
use crate::shared::resolve::{AuthUsers, Resolver};

/// KEDA's separator of the names.
const SEPARATOR: char = ',';

/// Whether a reconcile adds its object to the lists, or a deletion removes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Users {
    /// A reconcile of a live object.
    Add,
    /// The object's deletion.
    Remove,
}

/// `list` with `name` appended when missing (KEDA's `AppendIntoString`).
pub(crate) fn appended(list: Option<&str>, name: &str) -> Option<String> {
    let mut names: Vec<&str> = split(list);
    if !names.contains(&name) {
        names.push(name);
    }
    joined(&names)
}

/// `list` without `name` (KEDA's `RemoveFromString`); `None` once empty.
pub(crate) fn removed(list: Option<&str>, name: &str) -> Option<String> {
    let names: Vec<&str> = split(list).into_iter().filter(|n| *n != name).collect();
    joined(&names)
}

fn split(list: Option<&str>) -> Vec<&str> {
    match list {
        None | Some("") => Vec::new(),
        Some(list) => list.split(SEPARATOR).collect(),
    }
}

fn joined(names: &[&str]) -> Option<String> {
    (!names.is_empty()).then(|| names.join(&SEPARATOR.to_string()))
}

/// Keeps the user lists of every (Cluster)TriggerAuthentication referenced by `triggers` of the
/// `kind` object `namespace/name`.
pub(crate) async fn update(
    client: &Client,
    resolver: &Resolver,
    kind: ResourceKind,
    (namespace, name): (&str, &str),
    triggers: &[ScaleTrigger],
    users: Users,
) {
    let mut references: Vec<(AuthenticationKind, &str)> = Vec::new();
    for r in triggers
        .iter()
        .filter_map(|t| t.authentication_ref.as_ref())
    {
        // An unknown kind is the resolver's error to report, on the object's Ready.
        if let Ok(auth) = r.auth_kind()
            && !r.name.is_empty()
            && !references.contains(&(auth, r.name.as_str()))
        {
            references.push((auth, r.name.as_str()));
        }
    }
    for (auth, auth_name) in references {
        let Some(cached) = resolver.auth_users(auth, namespace, auth_name) else {
            // KEDA logs "TriggerAuthentication Not Found" and carries on; the object's own
            // Ready says why its trigger does not resolve.
            debug!(
                namespace,
                auth_name, "no such authentication to list a user on"
            );
            continue;
        };
        let api = auth_api(client, auth, namespace);
        let result = write_if_changed(&api, auth_name, (kind, name), users, &cached).await;
        let result = match result {
            Err(kube::Error::Api(status)) if status.code == 409 => {
                // The cache was behind: read the object once and try again.
                match api.get_status(auth_name).await {
                    Ok(fresh) => {
                        let fresh = users_of(&fresh);
                        write_if_changed(&api, auth_name, (kind, name), users, &fresh).await
                    }
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        if let Err(error) = result {
            warn!(
                namespace,
                name,
                auth_name,
                %error,
                "updating the users in the status of the authentication failed"
            );
        }
    }
}

/// The users `object`'s status lists.
fn users_of(object: &DynamicObject) -> AuthUsers {
    let field = |field: &str| {
        object
            .data
            .get("status")
            .and_then(|s| s.get(field))
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    AuthUsers {
        scaled_objects: field(SCALED_OBJECTS),
        scaled_jobs: field(SCALED_JOBS),
        resource_version: object.metadata.resource_version.clone(),
    }
}

const SCALED_OBJECTS: &str = "scaledobjects";
const SCALED_JOBS: &str = "scaledjobs";

/// Writes the list of `kind` users of `auth_name` when adding or removing `name` changes what
/// `current` holds; nothing otherwise.
async fn write_if_changed(
    api: &Api<DynamicObject>,
    auth_name: &str,
    (kind, name): (ResourceKind, &str),
    users: Users,
    current: &AuthUsers,
) -> Result<(), kube::Error> {
    let (field, list) = match kind {
        ResourceKind::ScaledObject => (SCALED_OBJECTS, current.scaled_objects.as_deref()),
        ResourceKind::ScaledJob => (SCALED_JOBS, current.scaled_jobs.as_deref()),
    };
    let wanted = match users {
        Users::Add => appended(list, name),
        Users::Remove => removed(list, name),
    };
    if wanted.as_deref() == list.filter(|l| !l.is_empty()) {
        return Ok(());
    }
    // `null` removes the field: KEDA's empty list is omitted.
    let patch = json!({
        "metadata": { "resourceVersion": current.resource_version },
        "status": { field: wanted },
    });
    api.patch_status(auth_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    debug!(auth_name, field, ?wanted, "authentication users written");
    Ok(())
}

fn auth_api(client: &Client, auth: AuthenticationKind, namespace: &str) -> Api<DynamicObject> {
    match auth {
        AuthenticationKind::TriggerAuthentication => Api::namespaced_with(
            client.clone(),
            namespace,
            &ApiResource::erase::<TriggerAuthentication>(&()),
        ),
        AuthenticationKind::ClusterTriggerAuthentication => Api::all_with(
            client.clone(),
            &ApiResource::erase::<ClusterTriggerAuthentication>(&()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_appended_once_in_order_and_removed_as_keda_does() {
        assert_eq!(appended(None, "a"), Some("a".into()));
        assert_eq!(appended(Some(""), "a"), Some("a".into()));
        assert_eq!(appended(Some("b"), "a"), Some("b,a".into()), "not sorted");
        assert_eq!(appended(Some("b,a"), "a"), Some("b,a".into()));
        assert_eq!(removed(Some("b,a,c"), "a"), Some("b,c".into()));
        assert_eq!(removed(Some("a"), "a"), None, "an empty list is no field");
        assert_eq!(removed(None, "a"), None);
        assert_eq!(removed(Some("b"), "a"), Some("b".into()));
    }
}
