//! The HPA of a ScaledObject (KEDA-CONTRACT 1.4, 1.6): built as a pure function of the object,
//! its target and its scalers' metric specs (`hpa/spec.rs`), written only when it differs from what
//! exists ([`ensure_hpa`]; the watch's trimmed copy, `hpa/cache.rs`, spares the reads).

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use crate::shared::error::Error;

mod cache;
mod ownership;
mod spec;

pub use cache::{CachedHpa, HpaCache, cached_matches, hpa_fingerprint};
pub use ownership::{Deletion, Ownership, Transfer, delete_hpa_of, delete_owned_hpa, ownership};
use ownership::{controller_uid, not_owned};
use spec::merged;
pub use spec::{
    HpaHealth, MANAGED_BY, MetricSpecs, desired_hpa, hpa_differs, hpa_health, metric_specs,
    scaling_active_health,
};

/// What [`ensure_hpa`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpaChange {
    /// The HPA did not exist and was created.
    Created,
    /// It existed and differed.
    Updated,
    /// It was already as desired: no write.
    Unchanged,
}

/// Creates or updates the HPA; deletes the previous one when the name changed (`old_name`),
/// if this object owns it.
///
/// Only an HPA this object owns ([`ownership`]: the controller owner reference of `desired`)
/// is ever updated or deleted, unless `transfer` is [`Transfer::Allowed`] (KEDA's ownership
/// transfer, which the administrator opted into): then the HPA is taken over, its spec and
/// owner reference replaced. An HPA of the same name that it may not write is left exactly as
/// it is: [`Error::HpaNotOwned`]. A previous HPA it does not own is left alone and forgotten.
///
/// `cached` is the HPA as the controller's watch last saw it ([`CachedHpa`]): when its
/// fingerprint matches `desired` (owner reference included, so it is owned) nothing is sent,
/// and when the watch has none it is created without a read first. Only a change reads the
/// HPA (for its current resourceVersion and owner) before replacing it; a create that finds
/// the HPA there after all (the watch was behind, or it is not keda-rs's) does the same.
///
/// # Errors
/// [`Error::HpaNotOwned`], or the API error, naming the HPA.
pub async fn ensure_hpa(
    api: &Api<HorizontalPodAutoscaler>,
    desired: &HorizontalPodAutoscaler,
    old_name: Option<&str>,
    cached: Option<&CachedHpa>,
    transfer: Transfer,
) -> Result<HpaChange, Error> {
    let name = desired.name_any();
    let owner_uid = controller_uid(desired);
    if let Some(old) = old_name.filter(|old| *old != name) {
        // Someone else's HPA under the old name (the status is not proof of ownership) is
        // not ours to delete: no transfer applies to it.
        delete_owned_hpa(api, old, owner_uid, Transfer::Refused).await?;
    }
    match cached {
        Some(cached) if cached_matches(cached, desired) => return Ok(HpaChange::Unchanged),
        Some(_) => {}
        None => match api.create(&PostParams::default(), desired).await {
            Ok(_) => return Ok(HpaChange::Created),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(Error::kube(format!("creating HPA {name}"), e)),
        },
    }
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading HPA {name}"), e))?;
    match existing {
        None => {
            api.create(&PostParams::default(), desired)
                .await
                .map_err(|e| Error::kube(format!("creating HPA {name}"), e))?;
            Ok(HpaChange::Created)
        }
        Some(existing) => {
            let owner = ownership(&existing, owner_uid);
            if !transfer.may_write(&owner)
                && let Ownership::NotOwned(why) = owner
            {
                return Err(not_owned(&name, transfer.explain(why)));
            }
            if !hpa_differs(&existing, desired) {
                return Ok(HpaChange::Unchanged);
            }
            let mut updated = existing.clone();
            updated.spec = desired.spec.clone();
            // Labels and annotations other tools added are kept (KEDA's update drops them,
            // and a policy controller would put them back: a fight).
            updated.metadata.labels = merged(
                existing.metadata.labels.as_ref(),
                desired.metadata.labels.as_ref(),
            );
            updated.metadata.annotations = merged(
                existing.metadata.annotations.as_ref(),
                desired.metadata.annotations.as_ref(),
            );
            updated.metadata.owner_references = desired.metadata.owner_references.clone();
            // `replace` sends the resourceVersion read above: had the HPA changed hands since,
            // the write fails with a conflict and the next reconcile looks again.
            api.replace(&name, &PostParams::default(), &updated)
                .await
                .map_err(|e| Error::kube(format!("updating HPA {name}"), e))?;
            Ok(HpaChange::Updated)
        }
    }
}
