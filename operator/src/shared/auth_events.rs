//! TriggerAuthentication and ClusterTriggerAuthentication Events, as KEDA's controllers of
//! these kinds emit them (`controllers/keda/triggerauthentication_controller.go`,
//! `clustertriggerauthentication_controller.go`, `controllers/keda/util/finalizer.go`, KEDA
//! 8b4f083):
//!
//! - when an object is first seen (at every start of the leader, as KEDA's reconcile of its
//!   initial list) and each time its `metadata.generation` changes (KEDA's
//!   `GenerationChangedPredicate`): a Normal `TriggerAuthenticationAdded` "New
//!   TriggerAuthentication configured" when the generation is 1, else an update, whose reason
//!   and note are KEDA's strings exactly: `ClusterTriggerAuthenticationUpdated`
//!   "ClusterTriggerAuthentication <name> is updated" for both kinds (KEDA's
//!   `eventreason.TriggerAuthenticationUpdated` and `message.TriggerAuthenticationUpdatedMsg`
//!   are those strings); `ClusterTriggerAuthenticationAdded` "New ClusterTriggerAuthentication
//!   configured" for the cluster kind;
//! - on deletion, a Normal `TriggerAuthenticationDeleted` "TriggerAuthentication was deleted"
//!   (`ClusterTriggerAuthenticationDeleted`, "ClusterTriggerAuthentication was deleted").
//!
//! KEDA puts its finalizer (`finalizer.keda.sh`) on every (Cluster)TriggerAuthentication to
//! see deletions; keda-rs adds none (an operator that is gone must not block deleting them)
//! and sees a deletion by its watch, confirmed by a read (an object that only stopped matching
//! `WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH` also leaves a filtered watch). An object that still
//! carries KEDA's finalizer, from a KEDA that ran before, has it removed when it is being
//! deleted, as KEDA would, so that switching from KEDA never leaves one stuck.
//!
//! Only objects in the watched namespaces (`WATCH_NAMESPACE`) and matching
//! `WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH` have Events, as in KEDA. The Events also go to the
//! CloudEventSources under KEDA's types.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;

use futures::StreamExt;
use keda_api::annotations::FINALIZER;
use keda_api::{ClusterTriggerAuthentication, TriggerAuthentication};
use kube::api::{Api, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::scaled_object::controller::ControllerConfig;
use crate::shared::events::Events;
use crate::shared::ownership::Shards;
use crate::shared::resolve::WatchScope;

/// KEDA's `eventreason.TriggerAuthenticationAdded`.
pub const TRIGGER_AUTHENTICATION_ADDED: &str = "TriggerAuthenticationAdded";
/// KEDA's `eventreason.TriggerAuthenticationUpdated`, whose value names the cluster kind.
pub const TRIGGER_AUTHENTICATION_UPDATED: &str = "ClusterTriggerAuthenticationUpdated";
/// KEDA's `eventreason.TriggerAuthenticationDeleted`.
pub const TRIGGER_AUTHENTICATION_DELETED: &str = "TriggerAuthenticationDeleted";
/// KEDA's `eventreason.ClusterTriggerAuthenticationAdded`.
pub const CLUSTER_TRIGGER_AUTHENTICATION_ADDED: &str = "ClusterTriggerAuthenticationAdded";
/// KEDA's `eventreason.ClusterTriggerAuthenticationUpdated`.
pub const CLUSTER_TRIGGER_AUTHENTICATION_UPDATED: &str = "ClusterTriggerAuthenticationUpdated";
/// KEDA's `eventreason.ClusterTriggerAuthenticationDeleted`.
pub const CLUSTER_TRIGGER_AUTHENTICATION_DELETED: &str = "ClusterTriggerAuthenticationDeleted";

/// The reasons and notes of one kind.
trait AuthKind:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    const ADDED: &'static str;
    const UPDATED: &'static str;
    const DELETED: &'static str;
    /// KEDA's `message.*CreatedMsg`.
    const ADDED_NOTE: &'static str;
    /// KEDA's `FinalizeAuthenticationResource` note.
    const DELETED_NOTE: &'static str;
    /// The objects of `namespace` (`""` for the cluster-scoped kind, or for all namespaces).
    fn api(client: &Client, namespace: &str) -> Api<Self>;
    /// [`api`](Self::api), metadata only.
    fn meta_api(client: &Client, namespace: &str) -> Api<PartialObjectMeta<Self>>;
}

impl AuthKind for TriggerAuthentication {
    const ADDED: &'static str = TRIGGER_AUTHENTICATION_ADDED;
    const UPDATED: &'static str = TRIGGER_AUTHENTICATION_UPDATED;
    const DELETED: &'static str = TRIGGER_AUTHENTICATION_DELETED;
    const ADDED_NOTE: &'static str = "New TriggerAuthentication configured";
    const DELETED_NOTE: &'static str = "TriggerAuthentication was deleted";
    fn api(client: &Client, namespace: &str) -> Api<Self> {
        if namespace.is_empty() {
            Api::all(client.clone())
        } else {
            Api::namespaced(client.clone(), namespace)
        }
    }
    fn meta_api(client: &Client, namespace: &str) -> Api<PartialObjectMeta<Self>> {
        if namespace.is_empty() {
            Api::all(client.clone())
        } else {
            Api::namespaced(client.clone(), namespace)
        }
    }
}

impl AuthKind for ClusterTriggerAuthentication {
    const ADDED: &'static str = CLUSTER_TRIGGER_AUTHENTICATION_ADDED;
    const UPDATED: &'static str = CLUSTER_TRIGGER_AUTHENTICATION_UPDATED;
    const DELETED: &'static str = CLUSTER_TRIGGER_AUTHENTICATION_DELETED;
    const ADDED_NOTE: &'static str = "New ClusterTriggerAuthentication configured";
    const DELETED_NOTE: &'static str = "ClusterTriggerAuthentication was deleted";
    fn api(client: &Client, _: &str) -> Api<Self> {
        Api::all(client.clone())
    }
    fn meta_api(client: &Client, _: &str) -> Api<PartialObjectMeta<Self>> {
        Api::all(client.clone())
    }
}

/// KEDA's update note (`message.TriggerAuthenticationUpdatedMsg` and
/// `ClusterTriggerAuthenticationUpdatedMsg` are both this text).
pub fn updated_note(name: &str) -> String {
    format!("ClusterTriggerAuthentication {name} is updated")
}

/// Publishes the Events of TriggerAuthentications (in `config.watch_scope`) and
/// ClusterTriggerAuthentications matching `config.resolver.auth_label_selector`, until
/// `cancel`. Events go through `config.events_client` when given, as `config.reporter`, and to
/// `config.cloud_events`.
pub async fn run(client: Client, config: ControllerConfig, cancel: CancellationToken) {
    let events = Events::with_client(config.events_client.as_ref(), &client, &config.reporter)
        .with_cloud_events(config.cloud_events.clone());
    let watch = config.resolver.auth_watch();
    let mut tasks = tokio::task::JoinSet::new();
    // One watch per watched namespace; `""`: all namespaces.
    let namespaces: Vec<String> = match &config.watch_scope {
        WatchScope::All => vec![String::new()],
        WatchScope::Namespaces(list) => list.clone(),
    };
    for namespace in namespaces {
        tasks.spawn(follow::<TriggerAuthentication>(
            namespace,
            client.clone(),
            watch.clone(),
            (events.clone(), config.shards.clone()),
            cancel.clone(),
        ));
    }
    tasks.spawn(follow::<ClusterTriggerAuthentication>(
        String::new(),
        client,
        watch,
        (events, config.shards.clone()),
        cancel.clone(),
    ));
    while tasks.join_next().await.is_some() {}
}

/// What was last seen of one object.
struct Seen {
    uid: Option<String>,
    generation: i64,
    /// Its deletion was announced (its `deletionTimestamp` was seen).
    deleting: bool,
}

type Key = (String, String);

fn key_of<K: Resource>(object: &PartialObjectMeta<K>) -> Key {
    (object.namespace().unwrap_or_default(), object.name_any())
}

async fn follow<K: AuthKind>(
    namespace: String,
    client: Client,
    watch: watcher::Config,
    (events, shards): (Events, Shards),
    cancel: CancellationToken,
) {
    let events = Owned {
        events: &events,
        shards: &shards,
    };
    let mut seen: HashMap<Key, Seen> = HashMap::new();
    let mut relisted: HashSet<Key> = HashSet::new();
    // Metadata only: the generation is all that is compared.
    let api = K::meta_api(&client, &namespace);
    let mut stream = std::pin::pin!(watcher::watcher(api, watch).default_backoff());
    loop {
        let event = tokio::select! {
            () = cancel.cancelled() => return,
            event = stream.next() => event,
        };
        match event {
            None => return,
            Some(Ok(Event::Init)) => relisted.clear(),
            Some(Ok(Event::InitApply(object))) => {
                relisted.insert(key_of(&object));
                applied(&client, events, &mut seen, object).await;
            }
            Some(Ok(Event::Apply(object))) => {
                applied(&client, events, &mut seen, object).await;
            }
            Some(Ok(Event::Delete(object))) => {
                let key = key_of(&object);
                gone::<K>(&client, events, &mut seen, &key, Some(&object)).await;
            }
            Some(Ok(Event::InitDone)) => {
                // Objects deleted while the watch was down are missing from the new list.
                let missing: Vec<Key> = seen
                    .keys()
                    .filter(|key| !relisted.contains(*key))
                    .cloned()
                    .collect();
                for key in missing {
                    gone::<K>(&client, events, &mut seen, &key, None).await;
                }
            }
            Some(Err(error)) => {
                warn!(kind = %K::kind(&()), %error, "watch failed, retrying with backoff");
            }
        }
    }
}

/// The Events of this replica, and what it owns: with shards, the Events of a
/// (Cluster)TriggerAuthentication are published (and KEDA's finalizer removed) by the replica
/// the ring gives its namespace/name, so each is published once.
#[derive(Clone, Copy)]
struct Owned<'a> {
    events: &'a Events,
    shards: &'a Shards,
}

impl Owned<'_> {
    fn mine(&self, key: &Key) -> bool {
        self.shards.owns(&key.0, &key.1)
    }
}

/// An object was listed or changed.
async fn applied<K: AuthKind>(
    client: &Client,
    owned: Owned<'_>,
    seen: &mut HashMap<Key, Seen>,
    object: PartialObjectMeta<K>,
) {
    let key = key_of(&object);
    let mine = owned.mine(&key);
    let events = owned.events;
    let uid = object.metadata.uid.clone();
    let generation = object.metadata.generation.unwrap_or(0);
    if object.metadata.deletion_timestamp.is_some() {
        let entry = seen.entry(key).or_insert(Seen {
            uid,
            generation,
            deleting: false,
        });
        if !mine {
            entry.deleting = true;
            return;
        }
        if !entry.deleting {
            entry.deleting = true;
            events
                .publish_on(&object, false, K::DELETED, K::DELETED_NOTE.to_string())
                .await;
        }
        remove_keda_finalizer(client, &object).await;
        return;
    }
    if let Some(previous) = seen.get(&key)
        && previous.uid == uid
        && previous.generation == generation
    {
        // A status, label or finalizer change, or the same object listed again.
        return;
    }
    seen.insert(
        key.clone(),
        Seen {
            uid,
            generation,
            deleting: false,
        },
    );
    if !mine {
        return;
    }
    if generation == 1 {
        events
            .publish_on(&object, false, K::ADDED, K::ADDED_NOTE.to_string())
            .await;
    } else {
        events
            .publish_on(&object, false, K::UPDATED, updated_note(&key.1))
            .await;
    }
}

/// An object left the watch: deleted, or no longer matching the label selector (then it
/// still exists and nothing is published).
async fn gone<K: AuthKind>(
    client: &Client,
    owned: Owned<'_>,
    seen: &mut HashMap<Key, Seen>,
    key: &Key,
    last: Option<&PartialObjectMeta<K>>,
) {
    let Some(entry) = seen.remove(key) else {
        return;
    };
    if entry.deleting || !owned.mine(key) {
        return;
    }
    let events = owned.events;
    match K::api(client, &key.0).get_metadata_opt(&key.1).await {
        Ok(Some(current)) if current.metadata.uid == entry.uid => {
            debug!(kind = %K::kind(&()), namespace = key.0, name = key.1, "left the label selector");
        }
        Ok(_) => {
            let object = match last {
                Some(last) => last.clone(),
                None => {
                    let mut meta = kube::api::ObjectMeta {
                        name: Some(key.1.clone()),
                        uid: entry.uid.clone(),
                        ..Default::default()
                    };
                    if !key.0.is_empty() {
                        meta.namespace = Some(key.0.clone());
                    }
                    kube::core::PartialObjectMetaExt::into_response_partial::<K>(meta)
                }
            };
            events
                .publish_on(&object, false, K::DELETED, K::DELETED_NOTE.to_string())
                .await;
        }
        Err(error) => {
            debug!(kind = %K::kind(&()), namespace = key.0, name = key.1, %error, "cannot tell a deletion from a relabelling");
        }
    }
}

/// Removes KEDA's finalizer from `object`, being deleted, if it carries it: nothing else would.
async fn remove_keda_finalizer<K: AuthKind>(client: &Client, object: &PartialObjectMeta<K>) {
    let Some(index) = object
        .metadata
        .finalizers
        .as_ref()
        .and_then(|f| f.iter().position(|f| f == FINALIZER))
    else {
        return;
    };
    let api = K::api(client, &object.namespace().unwrap_or_default());
    let path = format!("/metadata/finalizers/{index}");
    // The test makes the removal fail rather than remove another finalizer if the list moved.
    let patch: json_patch::Patch = match serde_json::from_value(serde_json::json!([
        {"op": "test", "path": path, "value": FINALIZER},
        {"op": "remove", "path": path},
    ])) {
        Ok(patch) => patch,
        Err(error) => {
            warn!(%error, "building the finalizer removal failed");
            return;
        }
    };
    if let Err(error) = api
        .patch(
            &object.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
    {
        // The next change of the object (or the next start) tries again.
        warn!(kind = %K::kind(&()), name = %object.name_any(), %error, "removing KEDA's finalizer failed");
    }
}
