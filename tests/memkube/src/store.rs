//! The object store: one map of JSON objects per resource, one cluster-wide resourceVersion,
//! a bounded event history per resource for watch resume, and the write rules (conflicts,
//! generation, finalizers, garbage collection, namespaces).
//!
//! Everything here is synchronous and runs under the server's state lock; no `.await` happens
//! while the lock is held.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::error::{ApiError, qualified};
use crate::registry::{GroupResource, Registry, ResourceDef, defs_from_crd};
use crate::selector::{FieldSelector, LabelSelector};

mod delete;
mod read;
mod write;

/// The namespaces that exist from the start, as on a fresh cluster.
pub(crate) const INITIAL_NAMESPACES: [&str; 3] = ["default", "kube-public", "kube-system"];

const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
const NAMESPACES: (&str, &str) = ("", "namespaces");
const CRDS: (&str, &str) = ("apiextensions.k8s.io", "customresourcedefinitions");

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change, kept in the resource's history and sent to its watchers.
#[derive(Debug)]
pub(crate) struct Change {
    pub rv: u64,
    pub kind: ChangeKind,
    pub namespace: String,
    pub object: Arc<Value>,
    /// The object before a modification, so selector watches can tell entering from leaving.
    pub old: Option<Arc<Value>>,
    line: OnceLock<Bytes>,
}

impl Change {
    /// The watch line for this change as stored, serialized once however many watchers see it.
    pub(crate) fn line(&self) -> Bytes {
        self.line
            .get_or_init(|| event_line(self.kind.as_str(), &self.object))
            .clone()
    }
}

/// Serializes one watch event as a newline-terminated JSON line.
pub(crate) fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line =
        serde_json::to_vec(&json!({ "type": kind, "object": object })).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// A live watcher's channel; the store pre-filters by namespace, the watch task does the rest.
#[derive(Debug)]
pub(crate) struct WatchSink {
    pub tx: mpsc::UnboundedSender<Arc<Change>>,
    pub namespace: Option<String>,
}

#[derive(Debug, Default)]
struct ResourceData {
    /// Objects by (namespace, name); cluster-scoped objects use the empty namespace.
    objects: BTreeMap<(String, String), Arc<Value>>,
    history: VecDeque<Arc<Change>>,
    /// Watches from a resourceVersion older than this get `410 Gone`.
    compacted_rv: u64,
    watchers: Vec<WatchSink>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ObjKey {
    gr: GroupResource,
    namespace: String,
    name: String,
}

/// How a deletion treats dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteScope {
    /// The main resource: everything but `.status` when the resource has a status subresource.
    Main,
    /// The `/status` subresource: only `.status`.
    Status,
}

/// Parameters of a list request.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListQuery {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

/// One page of a list: the items, the continue token and the list's resourceVersion.
pub(crate) type ListPage = (Vec<Arc<Value>>, Option<String>, u64);

/// What a new watch starts with.
#[derive(Debug)]
pub(crate) struct WatchStart {
    /// Synthetic ADDED objects (a watch from "0" or "", or `sendInitialEvents`).
    pub initial: Vec<Arc<Value>>,
    /// Retained changes after the requested resourceVersion.
    pub replay: Vec<Arc<Change>>,
    /// The resourceVersion the initial state corresponds to.
    pub start_rv: u64,
    pub rx: mpsc::UnboundedReceiver<Arc<Change>>,
}

/// The whole cluster state.
#[derive(Debug)]
pub(crate) struct State {
    rv: u64,
    pub registry: Registry,
    resources: HashMap<GroupResource, ResourceData>,
    uids: HashMap<String, ObjKey>,
    /// Owner uid -> dependent uids, from `metadata.ownerReferences`.
    dependents: HashMap<String, BTreeSet<String>>,
    /// Number of objects per namespace, to finish namespace deletion.
    namespace_counts: HashMap<String, usize>,
    history_limit: usize,
    rng: u64,
}

fn gr(pair: (&str, &str)) -> GroupResource {
    GroupResource {
        group: pair.0.to_string(),
        plural: pair.1.to_string(),
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
}

fn meta_map(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let meta = obj
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut()
}

/// Sets `metadata.<field>`; a no-op on non-objects, which callers reject before writing.
fn set_meta(obj: &mut Value, field: &str, value: Value) {
    if let Some(meta) = meta_map(obj) {
        meta.insert(field.to_string(), value);
    }
}

fn remove_meta(obj: &mut Value, field: &str) {
    if let Some(meta) = meta_map(obj) {
        meta.remove(field);
    }
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Everything except `metadata` and (for resources with a status subresource) `status`:
/// a change here bumps `metadata.generation`.
fn spec_part(obj: &Value, has_status: bool) -> Map<String, Value> {
    let mut map = obj.as_object().cloned().unwrap_or_default();
    for key in ["metadata", "apiVersion", "kind"] {
        map.remove(key);
    }
    if has_status {
        map.remove("status");
    }
    map
}

impl State {
    pub(crate) fn new(history_limit: usize, seed: u64) -> Self {
        let mut state = Self {
            rv: 0,
            registry: Registry::with_builtins(),
            resources: HashMap::new(),
            uids: HashMap::new(),
            dependents: HashMap::new(),
            namespace_counts: HashMap::new(),
            history_limit: history_limit.max(1),
            rng: seed,
        };
        if let Some(def) = state.registry.any_version(&gr(NAMESPACES)) {
            for ns in INITIAL_NAMESPACES {
                // Creating a namespace in an empty store cannot fail.
                let _ = state.create(&def, None, json!({ "metadata": { "name": ns } }), false);
            }
        }
        state
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.rv
    }

    fn next_random(&mut self) -> u64 {
        // splitmix64: good enough for names and uids in tests, no dependency.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn new_uid(&mut self) -> String {
        let a = self.next_random();
        let b = self.next_random();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0x0fff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    fn name_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut n = self.next_random();
        (0..5)
            .map(|_| {
                // The remainder is below the alphabet's length.
                let c = ALPHABET[usize::try_from(n % ALPHABET.len() as u64).unwrap_or(0)] as char;
                n /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }

    fn data(&mut self, gr: &GroupResource) -> &mut ResourceData {
        self.resources.entry(gr.clone()).or_default()
    }

    pub(crate) fn lookup(
        &self,
        gr: &GroupResource,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<Value>> {
        self.resources
            .get(gr)?
            .objects
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    fn namespace_of(def: &ResourceDef, namespace: Option<&str>) -> String {
        if def.namespaced {
            namespace.unwrap_or_default().to_string()
        } else {
            String::new()
        }
    }

    /// Commits `obj` as the new state of an object: assigns the next resourceVersion, updates
    /// the indexes, records the change and tells the watchers.
    fn put(
        &mut self,
        gr: &GroupResource,
        mut obj: Value,
        kind: ChangeKind,
        old: Option<Arc<Value>>,
    ) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        set_meta(&mut obj, "resourceVersion", Value::String(rv.to_string()));
        let namespace = meta_str(&obj, "namespace").unwrap_or_default().to_string();
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let uid = meta_str(&obj, "uid").unwrap_or_default().to_string();
        if let Some(old) = &old {
            for owner in owner_uids(old) {
                if let Some(set) = self.dependents.get_mut(&owner) {
                    set.remove(&uid);
                }
            }
        } else {
            self.uids.insert(
                uid.clone(),
                ObjKey {
                    gr: gr.clone(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                },
            );
            if !namespace.is_empty() {
                *self.namespace_counts.entry(namespace.clone()).or_default() += 1;
            }
        }
        for owner in owner_uids(&obj) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert(uid.clone());
        }
        let obj = Arc::new(obj);
        self.data(gr)
            .objects
            .insert((namespace.clone(), name), obj.clone());
        self.record(
            gr,
            Change {
                rv,
                kind,
                namespace,
                object: obj.clone(),
                old,
                line: OnceLock::new(),
            },
        );
        obj
    }

    fn record(&mut self, gr: &GroupResource, change: Change) {
        let limit = self.history_limit;
        let change = Arc::new(change);
        let data = self.data(gr);
        data.watchers.retain(|w| {
            if w.namespace
                .as_deref()
                .is_some_and(|ns| ns != change.namespace)
            {
                return !w.tx.is_closed();
            }
            w.tx.send(change.clone()).is_ok()
        });
        data.history.push_back(change);
        while data.history.len() > limit {
            if let Some(dropped) = data.history.pop_front() {
                data.compacted_rv = dropped.rv;
            }
        }
    }

    fn check_namespace(&self, def: &ResourceDef, namespace: &str) -> Result<(), ApiError> {
        if !def.namespaced {
            return Ok(());
        }
        match self.lookup(&gr(NAMESPACES), "", namespace) {
            None => Err(ApiError::not_found("", "namespaces", namespace)),
            Some(ns) if meta_str(&ns, "deletionTimestamp").is_some() => {
                Err(ApiError::forbidden(format!(
                    "{} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                    qualified(&def.group, &def.plural)
                )))
            }
            Some(_) => Ok(()),
        }
    }

    pub(crate) fn get(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        let namespace = Self::namespace_of(def, namespace);
        self.lookup(&def.group_resource(), &namespace, name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))
    }

    /// Makes every resourceVersion up to now too old to watch from, as etcd compaction does.
    pub(crate) fn compact(&mut self) {
        let rv = self.rv;
        for data in self.resources.values_mut() {
            data.history.clear();
            data.compacted_rv = rv;
        }
    }

    /// Drops every watcher channel, which ends every open watch stream.
    pub(crate) fn close_watches(&mut self) {
        for data in self.resources.values_mut() {
            data.watchers.clear();
        }
    }

    /// Every object of one resource, in (namespace, name) order.
    pub(crate) fn objects(&self, gr: &GroupResource) -> Vec<Arc<Value>> {
        self.resources
            .get(gr)
            .map(|d| d.objects.values().cloned().collect())
            .unwrap_or_default()
    }

    pub(crate) fn object_count(&self) -> usize {
        self.resources.values().map(|d| d.objects.len()).sum()
    }
}
