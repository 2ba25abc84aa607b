//! The part of a cluster's controllers and kubelets `dev` needs: a Deployment's or
//! StatefulSet's status follows its `spec.replicas` (the count its `/scale` wrote), as if every
//! pod started and became ready at once. No pods run.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// How often the workloads are checked.
const PERIOD: Duration = Duration::from_millis(200);

/// Makes every workload's status follow its spec until `cancel`.
pub async fn follow_replicas(client: Client, cancel: CancellationToken) {
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = ticks.tick() => {}
        }
        sync::<Deployment>(&client, |d| {
            (
                d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                d.status.as_ref().and_then(|s| s.replicas),
                d.status.as_ref().and_then(|s| s.ready_replicas),
            )
        })
        .await;
        sync::<StatefulSet>(&client, |s| {
            (
                s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                s.status.as_ref().map(|s| s.replicas),
                s.status.as_ref().and_then(|s| s.ready_replicas),
            )
        })
        .await;
    }
}

/// `(spec replicas, status replicas, status ready replicas)` of a workload.
type Counts = (i32, Option<i32>, Option<i32>);

async fn sync<K>(client: &Client, counts: impl Fn(&K) -> Counts)
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let all: Api<K> = Api::all(client.clone());
    let list = match all.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(error) => {
            warn!(%error, "cannot list workloads");
            return;
        }
    };
    for workload in list {
        let (spec, status, ready) = counts(&workload);
        if status == Some(spec) && ready == Some(spec) {
            continue;
        }
        let namespace = workload.namespace().unwrap_or_default();
        let api: Api<K> = Api::namespaced(client.clone(), &namespace);
        let patch = serde_json::json!({
            "status": {
                "observedGeneration": workload.meta().generation,
                "replicas": spec,
                "readyReplicas": spec,
                "availableReplicas": spec,
                "updatedReplicas": spec,
                "currentReplicas": spec,
            }
        });
        if let Err(error) = api
            .patch_status(
                &workload.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            warn!(%error, workload = %workload.name_any(), "cannot update the workload's status");
        }
    }
}
