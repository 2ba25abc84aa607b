//! Deletion: finalizers, graceful removal, the garbage collector's owner references
//! (background and foreground), namespaces and the objects of a removed CRD.

use super::*;

impl State {
    /// Removes an object for good: emits DELETED, then collects garbage (dependents, a
    /// terminating namespace, foreground owners).
    pub(super) fn remove(&mut self, gr: &GroupResource, mut obj: Value) -> Arc<Value> {
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
    pub(super) fn collect_dependents(&mut self, owner_uid: &str) {
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

    pub(super) fn drop_owner_reference(
        &mut self,
        gr: &GroupResource,
        obj: &Arc<Value>,
        owner_uid: &str,
    ) {
        let mut new = (**obj).clone();
        if let Some(refs) = new
            .pointer_mut("/metadata/ownerReferences")
            .and_then(Value::as_array_mut)
        {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
        }
        self.put(gr, new, ChangeKind::Modified, Some(obj.clone()));
    }

    pub(super) fn finish_foreground_owner(&mut self, owner_uid: &str) {
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
    pub(super) fn finish_namespace(&mut self, namespace: &str) {
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
    pub(super) fn delete_object(
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

    pub(super) fn delete_dependents(&mut self, owner_uid: &str) {
        let dependents = self.dependents.get(owner_uid).cloned().unwrap_or_default();
        for dependent in dependents {
            if let Some(key) = self.uids.get(&dependent).cloned()
                && let Some(dep) = self.lookup(&key.gr, &key.namespace, &key.name)
            {
                self.delete_object(&key.gr, &dep, Propagation::Background);
            }
        }
    }

    pub(super) fn delete_namespace_contents(&mut self, namespace: &str) {
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
    pub(super) fn drop_crd_objects(&mut self, crd: &Value) {
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
}
