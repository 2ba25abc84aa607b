//! Writes: create (generated names, defaults, CRDs registering their kinds), update and the
//! shared commit rules (conflicts, generation, status subresource).

use super::*;

impl State {
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
    pub(super) fn register_crd(&mut self, crd: &mut Value) -> Result<(), ApiError> {
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
}

/// Defaults the real server fills in that our code reads back.
pub(super) fn apply_defaults(def: &ResourceDef, obj: &mut Value) {
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
