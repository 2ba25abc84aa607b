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

    /// Removes an object for good: emits DELETED, then collects garbage (dependents, a
    /// terminating namespace, foreground owners).
    fn remove(&mut self, gr: &GroupResource, mut obj: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        set_meta(&mut obj, "resourceVersion", Value::String(rv.to_string()));
        let namespace = meta_str(&obj, "namespace").unwrap_or_default().to_string();
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let uid = meta_str(&obj, "uid").unwrap_or_default().to_string();
        self.data(gr).objects.remove(&(namespace.clone(), name));
        self.uids.remove(&uid);
        let owners = owner_uids(&obj);
        for owner in &owners {
            if let Some(set) = self.dependents.get_mut(owner) {
                set.remove(&uid);
                if set.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
        if !namespace.is_empty()
            && let Some(count) = self.namespace_counts.get_mut(&namespace)
        {
            *count = count.saturating_sub(1);
        }
        let obj = Arc::new(obj);
        self.record(
            gr,
            Change {
                rv,
                kind: ChangeKind::Deleted,
                namespace: namespace.clone(),
                object: obj.clone(),
                old: None,
                line: OnceLock::new(),
            },
        );

        self.collect_dependents(&uid);
        for owner in owners {
            self.finish_foreground_owner(&owner);
        }
        if !namespace.is_empty() {
            self.finish_namespace(&namespace);
        }
        obj
    }

    /// Background garbage collection: a dependent whose owners are all gone is deleted; one that
    /// still has a live owner loses the dangling reference.
    fn collect_dependents(&mut self, owner_uid: &str) {
        let Some(dependents) = self.dependents.remove(owner_uid) else {
            return;
        };
        for dependent in dependents {
            let Some(key) = self.uids.get(&dependent).cloned() else {
                continue;
            };
            let Some(obj) = self.lookup(&key.gr, &key.namespace, &key.name) else {
                continue;
            };
            let live_owner = owner_uids(&obj)
                .iter()
                .any(|o| o != owner_uid && self.uids.contains_key(o));
            if live_owner {
                self.drop_owner_reference(&key.gr, &obj, owner_uid);
            } else {
                // Errors cannot happen for an object we just looked up; GC is best effort anyway.
                let _ = self.delete_object(&key.gr, &obj, Propagation::Background);
            }
        }
    }

    fn drop_owner_reference(&mut self, gr: &GroupResource, obj: &Arc<Value>, owner_uid: &str) {
        let mut new = (**obj).clone();
        if let Some(refs) = new
            .pointer_mut("/metadata/ownerReferences")
            .and_then(Value::as_array_mut)
        {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
        }
        self.put(gr, new, ChangeKind::Modified, Some(obj.clone()));
    }

    fn finish_foreground_owner(&mut self, owner_uid: &str) {
        if self
            .dependents
            .get(owner_uid)
            .is_some_and(|d| !d.is_empty())
        {
            return;
        }
        let Some(key) = self.uids.get(owner_uid).cloned() else {
            return;
        };
        let Some(owner) = self.lookup(&key.gr, &key.namespace, &key.name) else {
            return;
        };
        if meta_str(&owner, "deletionTimestamp").is_none()
            || !finalizers(&owner).iter().any(|f| f == FOREGROUND_FINALIZER)
        {
            return;
        }
        let mut new = (*owner).clone();
        let remaining: Vec<Value> = finalizers(&owner)
            .into_iter()
            .filter(|f| f != FOREGROUND_FINALIZER)
            .map(Value::String)
            .collect();
        let empty = remaining.is_empty();
        set_meta(&mut new, "finalizers", Value::Array(remaining));
        if empty {
            remove_meta(&mut new, "finalizers");
            self.remove(&key.gr, new);
        } else {
            self.put(&key.gr, new, ChangeKind::Modified, Some(owner));
        }
    }

    /// Removes a terminating namespace once it is empty and has no finalizers.
    fn finish_namespace(&mut self, namespace: &str) {
        if self
            .namespace_counts
            .get(namespace)
            .copied()
            .unwrap_or_default()
            > 0
        {
            return;
        }
        let ns_gr = gr(NAMESPACES);
        let Some(ns) = self.lookup(&ns_gr, "", namespace) else {
            return;
        };
        if meta_str(&ns, "deletionTimestamp").is_some() && finalizers(&ns).is_empty() {
            self.namespace_counts.remove(namespace);
            self.remove(&ns_gr, (*ns).clone());
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

    /// Lists matching objects; returns the items, the continue token and the list's resourceVersion.
    pub(crate) fn list(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> Result<ListPage, ApiError> {
        let gr = def.group_resource();
        let data = self.resources.get(&gr);
        let compacted = data.map_or(0, |d| d.compacted_rv);
        let (list_rv, start) = match &query.continue_token {
            Some(token) => {
                let (rv, ns, name) = decode_continue(token)?;
                if rv < compacted {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    ));
                }
                (rv, Some((ns, name)))
            }
            None => (self.rv, None),
        };
        let Some(data) = data else {
            return Ok((Vec::new(), None, list_rv));
        };
        let namespace = namespace.filter(|_| def.namespaced);
        let matches = |obj: &Value| query.labels.matches(obj) && query.fields.matches(obj);

        if let Some(name) = query.fields.pinned_name() {
            let items: Vec<Arc<Value>> = match namespace {
                Some(ns) => data
                    .objects
                    .get(&(ns.to_string(), name.to_string()))
                    .into_iter()
                    .cloned()
                    .collect(),
                None => data
                    .objects
                    .values()
                    .filter(|o| meta_str(o, "name") == Some(name))
                    .cloned()
                    .collect(),
            };
            let items: Vec<_> = items
                .into_iter()
                .filter(|o: &Arc<Value>| matches(o))
                .collect();
            return Ok((items, None, list_rv));
        }

        use std::ops::Bound;
        let lower = match (&start, namespace) {
            (Some(key), _) => Bound::Excluded(key.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let limit = query.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut token = None;
        for ((ns, name), obj) in data.objects.range((lower, Bound::Unbounded)) {
            if namespace.is_some_and(|want| want != ns) {
                break;
            }
            if !matches(obj) {
                continue;
            }
            if items.len() == limit {
                // One more match exists beyond the page: hand out a token for the last item.
                let (last_ns, last_name) = items
                    .last()
                    .map(|o: &Arc<Value>| {
                        (
                            meta_str(o, "namespace").unwrap_or_default().to_string(),
                            meta_str(o, "name").unwrap_or_default().to_string(),
                        )
                    })
                    .unwrap_or_else(|| (ns.clone(), name.clone()));
                token = Some(encode_continue(list_rv, &last_ns, &last_name));
                break;
            }
            items.push(obj.clone());
        }
        Ok((items, token, list_rv))
    }

    /// Creates an object. `keep_status` keeps a given `.status` and `metadata.creationTimestamp`
    /// (seeding, e.g. an object created long ago); API creates drop the status for resources
    /// with a status subresource and stamp the time, as the real server does.
    pub(crate) fn create(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        mut body: Value,
        keep_status: bool,
    ) -> Result<Arc<Value>, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        if let Some(kind) = body.get("kind").and_then(Value::as_str)
            && kind != def.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind {kind:?} in the body does not match the resource {} (kind {:?})",
                qualified(&def.group, &def.plural),
                def.kind
            )));
        }
        let namespace = Self::namespace_of(def, namespace);
        if def.namespaced {
            match meta_str(&body, "namespace") {
                Some(ns) if !ns.is_empty() && ns != namespace => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {}
            }
        }
        self.check_namespace(def, &namespace)?;
        let gr = def.group_resource();
        let name = match meta_str(&body, "name").filter(|n| !n.is_empty()) {
            Some(name) => name.to_string(),
            None => {
                let Some(prefix) = meta_str(&body, "generateName")
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                else {
                    return Err(ApiError::invalid(
                        &def.group,
                        &def.plural,
                        "",
                        format!(
                            "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                            def.kind
                        ),
                    ));
                };
                let mut candidate = format!("{prefix}{}", self.name_suffix());
                while self.lookup(&gr, &namespace, &candidate).is_some() {
                    candidate = format!("{prefix}{}", self.name_suffix());
                }
                candidate
            }
        };
        if self.lookup(&gr, &namespace, &name).is_some() {
            return Err(ApiError::already_exists(&def.group, &def.plural, &name));
        }
        let uid = self.new_uid();
        if let Some(map) = body.as_object_mut() {
            map.insert("apiVersion".to_string(), Value::String(def.api_version()));
            map.insert("kind".to_string(), Value::String(def.kind.clone()));
            if def.status && !keep_status {
                map.remove("status");
            }
        }
        set_meta(&mut body, "name", Value::String(name.clone()));
        if def.namespaced {
            set_meta(&mut body, "namespace", Value::String(namespace.clone()));
        } else {
            remove_meta(&mut body, "namespace");
        }
        set_meta(&mut body, "uid", Value::String(uid));
        let given_time = body
            .pointer("/metadata/creationTimestamp")
            .filter(|t| t.is_string())
            .cloned();
        match given_time {
            Some(time) if keep_status => set_meta(&mut body, "creationTimestamp", time),
            _ => set_meta(&mut body, "creationTimestamp", Value::String(now())),
        }
        set_meta(&mut body, "generation", json!(1));
        for field in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ] {
            remove_meta(&mut body, field);
        }
        apply_defaults(def, &mut body);
        match (def.group.as_str(), def.plural.as_str()) {
            NAMESPACES => {
                json_patch::merge(&mut body, &json!({ "status": { "phase": "Active" } }));
            }
            CRDS => self.register_crd(&mut body)?,
            _ => {}
        }
        Ok(self.put(&gr, body, ChangeKind::Added, None))
    }

    /// Validates a CRD, serves its resources and fills in the status a real server reports
    /// once the CRD is established.
    fn register_crd(&mut self, crd: &mut Value) -> Result<(), ApiError> {
        let defs = defs_from_crd(crd)?;
        let name = meta_str(crd, "name").unwrap_or_default().to_string();
        self.registry.remove_crd(&name);
        for def in defs {
            self.registry.insert(def);
        }
        let stored: Vec<Value> = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                    .filter_map(|v| v.get("name").cloned())
                    .collect()
            })
            .unwrap_or_default();
        let names = crd
            .pointer("/spec/names")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let time = now();
        let condition = |kind: &str, reason: &str| json!({ "type": kind, "status": "True", "lastTransitionTime": time, "reason": reason, "message": "" });
        if let Some(map) = crd.as_object_mut() {
            map.insert(
                "status".to_string(),
                json!({
                    "acceptedNames": names,
                    "storedVersions": stored,
                    "conditions": [condition("NamesAccepted", "NoConflicts"), condition("Established", "InitialNamesAccepted")],
                }),
            );
        }
        Ok(())
    }

    /// Replaces an object (PUT), or its status (PUT on `/status`).
    pub(crate) fn update(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        scope: WriteScope,
    ) -> Result<Arc<Value>, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        if let Some(body_name) = meta_str(&body, "name")
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let old = self.get(def, namespace, name)?;
        match meta_str(&body, "resourceVersion") {
            Some(rv) if !rv.is_empty() && Some(rv) != meta_str(&old, "resourceVersion") => {
                return Err(ApiError::stale(&def.group, &def.plural, name));
            }
            _ => {}
        }
        self.commit_write(def, &old, body, scope)
    }

    /// Applies the write rules to a proposed new state of an existing object and commits it.
    pub(crate) fn commit_write(
        &mut self,
        def: &ResourceDef,
        old: &Arc<Value>,
        proposed: Value,
        scope: WriteScope,
    ) -> Result<Arc<Value>, ApiError> {
        let name = meta_str(old, "name").unwrap_or_default().to_string();
        let mut new = match scope {
            WriteScope::Status => {
                let mut new = (**old).clone();
                if let Some(map) = new.as_object_mut() {
                    match proposed.get("status") {
                        Some(status) => map.insert("status".to_string(), status.clone()),
                        None => map.remove("status"),
                    };
                }
                new
            }
            WriteScope::Main => {
                let mut new = proposed;
                if let Some(map) = new.as_object_mut() {
                    if def.status {
                        match old.get("status") {
                            Some(status) => map.insert("status".to_string(), status.clone()),
                            None => map.remove("status"),
                        };
                    }
                    map.insert("apiVersion".to_string(), Value::String(def.api_version()));
                    map.insert("kind".to_string(), Value::String(def.kind.clone()));
                }
                let old_meta = old
                    .get("metadata")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                for field in [
                    "name",
                    "namespace",
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    match old_meta.get(field) {
                        Some(value) => set_meta(&mut new, field, value.clone()),
                        None => remove_meta(&mut new, field),
                    }
                }
                apply_defaults(def, &mut new);
                new
            }
        };
        let deleting = meta_str(old, "deletionTimestamp").is_some();
        if deleting {
            let before = finalizers(old);
            if let Some(added) = finalizers(&new).into_iter().find(|f| !before.contains(f)) {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.plural,
                    &name,
                    format!(
                        "{} \"{name}\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [\"{added}\"]",
                        def.kind
                    ),
                ));
            }
        }
        if spec_part(old, def.status) != spec_part(&new, def.status) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                + 1;
            set_meta(&mut new, "generation", json!(generation));
        }
        // A write that changes nothing is not a write: no new resourceVersion, no event.
        let mut comparable = new.clone();
        set_meta(
            &mut comparable,
            "resourceVersion",
            old.pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null),
        );
        if comparable == **old {
            return Ok(old.clone());
        }
        if finalizers(&new).is_empty() {
            remove_meta(&mut new, "finalizers");
        }
        let gr = def.group_resource();
        if deleting && finalizers(&new).is_empty() {
            return Ok(self.remove(&gr, new));
        }
        if (def.group.as_str(), def.plural.as_str()) == CRDS && scope == WriteScope::Main {
            self.register_crd(&mut new)?;
        }
        Ok(self.put(&gr, new, ChangeKind::Modified, Some(old.clone())))
    }

    /// Deletes an object as a DELETE request does. Returns the object when it lingers (finalizers,
    /// foreground deletion), `None` when it is gone.
    pub(crate) fn delete(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        propagation: Propagation,
        preconditions: (Option<String>, Option<String>),
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let obj = self.get(def, namespace, name)?;
        let (uid, rv) = preconditions;
        if uid.is_some_and(|u| Some(u.as_str()) != meta_str(&obj, "uid")) {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                "Precondition failed: UID in precondition does not match the UID in record",
            ));
        }
        if rv.is_some_and(|r| Some(r.as_str()) != meta_str(&obj, "resourceVersion")) {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                "Precondition failed: ResourceVersion in precondition does not match the ResourceVersion in record",
            ));
        }
        Ok(self.delete_object(&def.group_resource(), &obj, propagation))
    }

    /// The deletion rules. Returns the object's last state and whether it is gone.
    fn delete_object(
        &mut self,
        gr: &GroupResource,
        obj: &Arc<Value>,
        propagation: Propagation,
    ) -> (Arc<Value>, bool) {
        let uid = meta_str(obj, "uid").unwrap_or_default().to_string();
        let is_namespace = (gr.group.as_str(), gr.plural.as_str()) == NAMESPACES;
        let is_crd = (gr.group.as_str(), gr.plural.as_str()) == CRDS;
        let mut obj = obj.clone();
        if propagation == Propagation::Orphan {
            let dependents = self.dependents.remove(&uid).unwrap_or_default();
            for dependent in dependents {
                if let Some(key) = self.uids.get(&dependent).cloned()
                    && let Some(dep) = self.lookup(&key.gr, &key.namespace, &key.name)
                {
                    self.drop_owner_reference(&key.gr, &dep, &uid);
                }
            }
        }
        if meta_str(&obj, "deletionTimestamp").is_some() {
            return (obj, false);
        }
        if is_crd {
            self.drop_crd_objects(&obj);
        }
        let has_dependents = self.dependents.get(&uid).is_some_and(|d| !d.is_empty());
        let foreground = propagation == Propagation::Foreground && has_dependents;
        if !finalizers(&obj).is_empty() || foreground || is_namespace {
            let mut new = (*obj).clone();
            let generation = obj
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                + 1;
            set_meta(&mut new, "deletionTimestamp", Value::String(now()));
            set_meta(&mut new, "deletionGracePeriodSeconds", json!(0));
            set_meta(&mut new, "generation", json!(generation));
            if foreground {
                let mut list = finalizers(&obj);
                list.push(FOREGROUND_FINALIZER.to_string());
                set_meta(&mut new, "finalizers", json!(list));
            }
            if is_namespace {
                json_patch::merge(&mut new, &json!({ "status": { "phase": "Terminating" } }));
            }
            obj = self.put(gr, new, ChangeKind::Modified, Some(obj));
            if foreground {
                self.delete_dependents(&uid);
            }
            if is_namespace {
                let name = meta_str(&obj, "name").unwrap_or_default().to_string();
                self.delete_namespace_contents(&name);
                self.finish_namespace(&name);
                let gone = self.lookup(gr, "", &name).is_none();
                return (obj, gone);
            }
            return (obj, false);
        }
        let obj = self.remove(gr, (*obj).clone());
        (obj, true)
    }

    fn delete_dependents(&mut self, owner_uid: &str) {
        let dependents = self.dependents.get(owner_uid).cloned().unwrap_or_default();
        for dependent in dependents {
            if let Some(key) = self.uids.get(&dependent).cloned()
                && let Some(dep) = self.lookup(&key.gr, &key.namespace, &key.name)
            {
                self.delete_object(&key.gr, &dep, Propagation::Background);
            }
        }
    }

    fn delete_namespace_contents(&mut self, namespace: &str) {
        let mut victims = Vec::new();
        for (gr, data) in &self.resources {
            let lower = (namespace.to_string(), String::new());
            for ((ns, _), obj) in data.objects.range(lower..) {
                if ns != namespace {
                    break;
                }
                victims.push((gr.clone(), obj.clone()));
            }
        }
        for (gr, obj) in victims {
            // An earlier deletion may have collected this one already.
            let ns = meta_str(&obj, "namespace").unwrap_or_default();
            let name = meta_str(&obj, "name").unwrap_or_default();
            if let Some(current) = self.lookup(&gr, ns, name) {
                self.delete_object(&gr, &current, Propagation::Background);
            }
        }
    }

    /// Deleting a CRD removes its custom objects (finalizers on them are not waited for) and
    /// stops serving its resources.
    fn drop_crd_objects(&mut self, crd: &Value) {
        let Some(group) = crd.pointer("/spec/group").and_then(Value::as_str) else {
            return;
        };
        let Some(plural) = crd.pointer("/spec/names/plural").and_then(Value::as_str) else {
            return;
        };
        let gr = GroupResource {
            group: group.to_string(),
            plural: plural.to_string(),
        };
        let objects: Vec<Arc<Value>> = self
            .resources
            .get(&gr)
            .map(|d| d.objects.values().cloned().collect())
            .unwrap_or_default();
        for obj in objects {
            let mut last = (*obj).clone();
            remove_meta(&mut last, "finalizers");
            self.remove(&gr, last);
        }
        if let Some(name) = meta_str(crd, "name") {
            self.registry.remove_crd(name);
        }
    }

    /// Starts a watch: the initial state or the retained changes after `resource_version`, and
    /// a channel for what follows. Nothing can be missed between the two: both happen under
    /// the same lock.
    pub(crate) fn watch(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        resource_version: Option<&str>,
        send_initial_events: bool,
    ) -> Result<WatchStart, ApiError> {
        let gr = def.group_resource();
        let namespace = namespace.filter(|_| def.namespaced).map(str::to_string);
        let current = self.rv;
        let requested =
            match resource_version.filter(|rv| !rv.is_empty() && *rv != "0") {
                None => None,
                Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version: {rv:?}"))
                })?),
            };
        let data = self.data(&gr);
        let mut start = WatchStart {
            initial: Vec::new(),
            replay: Vec::new(),
            start_rv: current,
            rx: mpsc::unbounded_channel().1,
        };
        match requested {
            Some(rv) if !send_initial_events => {
                if rv < data.compacted_rv {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {rv} ({})",
                        data.compacted_rv
                    )));
                }
                start.replay = data
                    .history
                    .iter()
                    .filter(|c| c.rv > rv && namespace.as_ref().is_none_or(|ns| *ns == c.namespace))
                    .cloned()
                    .collect();
                start.start_rv = rv.max(data.compacted_rv);
            }
            _ => {
                start.initial = match &namespace {
                    Some(ns) => data
                        .objects
                        .range((ns.clone(), String::new())..)
                        .take_while(|((n, _), _)| n == ns)
                        .map(|(_, o)| o.clone())
                        .collect(),
                    None => data.objects.values().cloned().collect(),
                };
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        data.watchers.push(WatchSink { tx, namespace });
        start.rx = rx;
        Ok(start)
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

/// Defaults the real server fills in that our code reads back.
fn apply_defaults(def: &ResourceDef, obj: &mut Value) {
    if def.group == "apps"
        && matches!(
            def.plural.as_str(),
            "deployments" | "statefulsets" | "replicasets"
        )
        && obj.pointer("/spec/replicas").is_none_or(Value::is_null)
    {
        json_patch::merge(obj, &json!({ "spec": { "replicas": 1 } }));
    }
}

fn encode_continue(rv: u64, namespace: &str, name: &str) -> String {
    format!("{rv}.{}", hex(&format!("{namespace}/{name}")))
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || ApiError::bad_request(format!("invalid continue token: {token:?}"));
    let (rv, key) = token.split_once('.').ok_or_else(bad)?;
    let rv = rv.parse().map_err(|_| bad())?;
    if key.len() % 2 != 0 {
        return Err(bad());
    }
    let bytes: Result<Vec<u8>, _> = (0..key.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&key[i..i + 2], 16))
        .collect();
    let key = String::from_utf8(bytes.map_err(|_| bad())?).map_err(|_| bad())?;
    let (ns, name) = key.split_once('/').ok_or_else(bad)?;
    Ok((rv, ns.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let token = encode_continue(42, "ns", "a/b");
        assert_eq!(
            decode_continue(&token).expect("decodes"),
            (42, "ns".to_string(), "a/b".to_string())
        );
        assert_eq!(decode_continue("nonsense").expect_err("rejected").code, 400);
    }
}
