//! Turns one HTTP request into store operations and a reply. Routing, query parameters,
//! verbs, fault injection and request counting all happen here, once, at the edge.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Uri, header};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::discovery;
use crate::error::ApiError;
use crate::faults::{RequestInfo, Verb};
use crate::patch::{self, PatchKind};
use crate::registry::{ResourceDef, ResourceKind};
use crate::scale;
use crate::selector::{FieldSelector, LabelSelector};
use crate::server::Inner;
use crate::store::{ListQuery, Propagation, State, WriteScope};
use crate::view::{Filter, View};
use crate::watch::{self, WatchParams};

/// What a request is answered with.
pub(crate) enum Reply {
    Json(u16, Value),
    /// A streaming watch body, one frame per batch of newline-delimited events.
    Watch(mpsc::Receiver<Bytes>),
}

impl From<ApiError> for Reply {
    fn from(error: ApiError) -> Self {
        Reply::Json(error.code, error.to_status())
    }
}

#[derive(Debug, PartialEq, Eq)]
struct ResourcePath {
    group: String,
    version: String,
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
    sub: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
enum Route {
    Version,
    CoreVersions,
    Groups,
    Group(String),
    GroupVersion(String, String),
    Resource(ResourcePath),
}

fn parse_resource(group: &str, version: &str, rest: &[&str]) -> Option<Route> {
    let owned = |s: &&str| s.to_string();
    let namespaced = rest.first() == Some(&"namespaces")
        && rest.len() >= 3
        && !(rest.len() == 3 && matches!(rest[2], "status" | "finalize"));
    let (namespace, rest) = if namespaced {
        (rest.get(1).map(owned), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.is_empty() || rest.len() > 3 || rest.iter().any(|s| s.is_empty()) {
        return None;
    }
    Some(Route::Resource(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        plural: rest[0].to_string(),
        name: rest.get(1).map(owned),
        sub: rest.get(2).map(owned),
    }))
}

fn parse_route(path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["version"] => Some(Route::Version),
        ["api"] => Some(Route::CoreVersions),
        ["api", version] => Some(Route::GroupVersion(String::new(), version.to_string())),
        ["api", version, rest @ ..] => parse_resource("", version, rest),
        ["apis"] => Some(Route::Groups),
        ["apis", group] => Some(Route::Group(group.to_string())),
        ["apis", group, version] => {
            Some(Route::GroupVersion(group.to_string(), version.to_string()))
        }
        ["apis", group, version, rest @ ..] => parse_resource(group, version, rest),
        _ => None,
    }
}

fn percent_decode(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = if bytes[i] == b'%' {
            bytes
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        } else {
            None
        };
        match (bytes[i], decoded) {
            (_, Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (byte, None) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(pair), String::new()),
        })
        .collect()
}

fn is_true(query: &HashMap<String, String>, key: &str) -> bool {
    query.get(key).is_some_and(|v| v == "true" || v == "1")
}

fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))
}

fn success_status(def: &ResourceDef, obj: &Value) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": obj.pointer("/metadata/name"),
            "group": def.group,
            "kind": def.plural,
            "uid": obj.pointer("/metadata/uid"),
        },
    })
}

/// Records `fieldManager` in `managedFields` for an apply patch. Only the manager is recorded,
/// not the set of fields it owns.
fn record_apply_manager(obj: &mut Value, manager: &str, api_version: &str) {
    let entry = json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        "fieldsType": "FieldsV1",
        "fieldsV1": {},
    });
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let fields = meta.entry("managedFields").or_insert_with(|| json!([]));
    if let Some(list) = fields.as_array_mut() {
        list.retain(|e| {
            !(e.get("manager").and_then(Value::as_str) == Some(manager)
                && e.get("operation").and_then(Value::as_str) == Some("Apply"))
        });
        list.push(entry);
    }
}

impl Inner {
    /// Answers one request. Only a watch keeps working after this returns (in its own task).
    pub(crate) fn handle(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Reply {
        let Some(route) = parse_route(uri.path()) else {
            return ApiError::path_not_found(uri.path()).into();
        };
        let query = parse_query(uri);
        let discovery_only = |reply: Option<Value>| match (method, reply) {
            (&Method::GET, Some(doc)) => Reply::Json(200, doc),
            (&Method::GET, None) => ApiError::path_not_found(uri.path()).into(),
            _ => ApiError::method_not_allowed(format!(
                "the server does not allow this method on {}",
                uri.path()
            ))
            .into(),
        };
        match route {
            Route::Version => discovery_only(Some(discovery::version())),
            Route::CoreVersions => discovery_only(Some(discovery::core_versions())),
            Route::Groups => discovery_only(Some(discovery::groups(&self.state().registry))),
            Route::Group(group) => discovery_only(discovery::group(&self.state().registry, &group)),
            Route::GroupVersion(group, version) => discovery_only(discovery::resources(
                &self.state().registry,
                &group,
                &version,
            )),
            Route::Resource(path) => match self.resource(method, &path, &query, headers, &body) {
                Ok(reply) => reply,
                Err(error) => error.into(),
            },
        }
    }

    fn resource(
        &self,
        method: &Method,
        path: &ResourcePath,
        query: &HashMap<String, String>,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<Reply, ApiError> {
        let not_found = || {
            ApiError::path_not_found(&format!("{}/{}/{}", path.group, path.version, path.plural))
        };
        let def = self
            .state()
            .registry
            .get(&path.group, &path.version, &path.plural)
            .ok_or_else(not_found)?;
        if path.namespace.is_some() && !def.namespaced {
            return Err(not_found());
        }
        match path.sub.as_deref() {
            None => {}
            Some("status") if def.status => {}
            Some("scale") if def.scale.is_some() => {}
            Some("token") if def.group.is_empty() && def.plural == "serviceaccounts" => {}
            Some(_) => return Err(not_found()),
        }
        let verb = match (method, path.name.is_some()) {
            (&Method::GET, true) => Verb::Get,
            (&Method::GET, false) if is_true(query, "watch") => Verb::Watch,
            (&Method::GET, false) => Verb::List,
            (&Method::POST, false) if path.sub.is_none() => Verb::Create,
            (&Method::POST, true) if path.sub.as_deref() == Some("token") => Verb::Create,
            (&Method::PUT, true) => Verb::Update,
            (&Method::PATCH, true) => Verb::Patch,
            (&Method::DELETE, true) if path.sub.is_none() => Verb::Delete,
            (&Method::DELETE, false) => Verb::DeleteCollection,
            _ => {
                return Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method on the requested resource ({method} {})",
                    def.plural
                )));
            }
        };
        if def.resource_kind == ResourceKind::AccessReview && verb != Verb::Create {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method} {})",
                def.plural
            )));
        }
        if def.namespaced && path.namespace.is_none() && !matches!(verb, Verb::List | Verb::Watch) {
            return Err(not_found());
        }
        let info = RequestInfo {
            verb,
            resource: match &path.sub {
                Some(sub) => format!("{}/{sub}", def.plural),
                None => def.plural.clone(),
            },
            namespace: path.namespace.clone(),
            name: path.name.clone(),
        };
        self.count(&info);
        self.log_write(&info, headers);
        if let Some(error) = self.inject(&info) {
            return Err(error);
        }
        if query.contains_key("dryRun") && !matches!(verb, Verb::Get | Verb::List | Verb::Watch) {
            return Err(ApiError::bad_request("dryRun is not supported by memkube"));
        }
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let is_read = matches!(verb, Verb::Get | Verb::List | Verb::Watch);
        let view = if is_read && path.sub.is_none() {
            View::for_read(&def, accept, query.get("includeObject").map(String::as_str))
        } else {
            View::new(&def, accept)
        };
        let ns = path.namespace.as_deref();
        let name = path.name.as_deref().unwrap_or_default();
        let scope = if path.sub.as_deref() == Some("status") {
            WriteScope::Status
        } else {
            WriteScope::Main
        };
        let render = |obj: &Value| view.render(obj).into_owned();
        let is_scale = path.sub.as_deref() == Some("scale");

        match verb {
            Verb::Get => {
                let obj = self.state().get(&def, ns, name)?;
                Ok(Reply::Json(
                    200,
                    if is_scale {
                        scale::scale_of(&def, &obj)
                    } else {
                        render(&obj)
                    },
                ))
            }
            Verb::List => {
                let list = ListQuery {
                    labels: LabelSelector::parse(
                        query.get("labelSelector").map_or("", String::as_str),
                    )?,
                    fields: FieldSelector::parse(
                        query.get("fieldSelector").map_or("", String::as_str),
                    )?,
                    limit: query.get("limit").and_then(|l| l.parse().ok()),
                    continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
                };
                let (items, token, rv) = self.state().list(&def, ns, &list)?;
                // A Table renders the objects themselves, not their JSON views.
                let items = if view.table.is_some() {
                    items.iter().map(|o| Value::clone(o)).collect()
                } else {
                    items.iter().map(|o| render(o)).collect()
                };
                Ok(Reply::Json(200, view.list(items, rv, token)))
            }
            Verb::Watch => self.watch(&def, ns, query, view),
            Verb::Create if def.resource_kind == ResourceKind::AccessReview => {
                if def.kind == "TokenReview" {
                    self.token_review(parse_json(body)?)
                } else {
                    self.review(parse_json(body)?)
                }
            }
            Verb::Create if path.sub.as_deref() == Some("token") => {
                // The ServiceAccount must exist: its 404 is the real server's answer too.
                let account = self.state().get(&def, ns, name)?;
                let uid = account
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let mut tokens = self.tokens();
                let sequence = tokens.len();
                let (reply, issued) = crate::token::issue(
                    ns.unwrap_or_default(),
                    name,
                    &uid,
                    parse_json(body)?,
                    sequence,
                )?;
                tokens.push(issued);
                Ok(Reply::Json(201, reply))
            }
            Verb::Create => {
                let obj = self.state().create(&def, ns, parse_json(body)?, false)?;
                Ok(Reply::Json(201, render(&obj)))
            }
            Verb::Update if is_scale => {
                let scale_body = parse_json(body)?;
                let mut state = self.state();
                let old = state.get(&def, ns, name)?;
                let expected = scale_body
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .filter(|rv| !rv.is_empty());
                if expected.is_some_and(|rv| {
                    Some(rv)
                        != old
                            .pointer("/metadata/resourceVersion")
                            .and_then(Value::as_str)
                }) {
                    return Err(ApiError::stale(&def.group, &def.plural, name));
                }
                let proposed = scale::with_replicas(&def, &old, &scale_body)?;
                let new = state.commit_write(&def, &old, proposed, WriteScope::Main)?;
                Ok(Reply::Json(200, scale::scale_of(&def, &new)))
            }
            Verb::Update => {
                let obj = self
                    .state()
                    .update(&def, ns, name, parse_json(body)?, scope)?;
                Ok(Reply::Json(200, render(&obj)))
            }
            Verb::Patch => self.patch(
                &def,
                ns,
                name,
                path.sub.as_deref(),
                query,
                headers,
                body,
                &view,
            ),
            Verb::Delete => {
                let options = parse_json(body)?;
                let policy = query
                    .get("propagationPolicy")
                    .map(String::as_str)
                    .or_else(|| options.get("propagationPolicy").and_then(Value::as_str));
                let propagation = match policy {
                    None | Some("Background") => Propagation::Background,
                    Some("Foreground") => Propagation::Foreground,
                    Some("Orphan") => Propagation::Orphan,
                    Some(other) => {
                        return Err(ApiError::bad_request(format!(
                            "unsupported propagationPolicy {other:?}"
                        )));
                    }
                };
                let precondition = |field: &str| {
                    options
                        .pointer(&format!("/preconditions/{field}"))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                let (obj, gone) = self.state().delete(
                    &def,
                    ns,
                    name,
                    propagation,
                    (precondition("uid"), precondition("resourceVersion")),
                )?;
                Ok(Reply::Json(
                    200,
                    if gone {
                        success_status(&def, &obj)
                    } else {
                        render(&obj)
                    },
                ))
            }
            Verb::DeleteCollection => {
                let list = ListQuery {
                    labels: LabelSelector::parse(
                        query.get("labelSelector").map_or("", String::as_str),
                    )?,
                    fields: FieldSelector::parse(
                        query.get("fieldSelector").map_or("", String::as_str),
                    )?,
                    ..ListQuery::default()
                };
                let mut state = self.state();
                let (items, _, _) = state.list(&def, ns, &list)?;
                let mut deleted = Vec::new();
                for item in items {
                    let item_ns = item.pointer("/metadata/namespace").and_then(Value::as_str);
                    let item_name = item
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if let Ok((obj, _)) = state.delete(
                        &def,
                        item_ns,
                        item_name,
                        Propagation::Background,
                        (None, None),
                    ) {
                        deleted.push(render(&obj));
                    }
                }
                let rv = state.resource_version();
                Ok(Reply::Json(200, view.list(deleted, rv, None)))
            }
        }
    }

    #[allow(clippy::too_many_arguments)] // one request's parts; bundling them would only rename them
    fn patch(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        query: &HashMap<String, String>,
        headers: &HeaderMap,
        body: &Bytes,
        view: &View,
    ) -> Result<Reply, ApiError> {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let kind = PatchKind::from_content_type(content_type)?;
        let manager = query.get("fieldManager").filter(|m| !m.is_empty());
        if kind == PatchKind::Apply && manager.is_none() {
            return Err(ApiError::bad_request(
                "PATCH requests with apply content type must supply fieldManager",
            ));
        }
        let patch_doc = patch::parse_body(kind, body)?;
        let mut state = self.state();
        let old = match state.get(def, ns, name) {
            Ok(old) => old,
            Err(error) if error.code == 404 && kind == PatchKind::Apply && sub.is_none() => {
                // Server-side apply creates what does not exist yet.
                let mut obj = patch_doc;
                if let Some(manager) = manager {
                    record_apply_manager(&mut obj, manager, &def.api_version());
                }
                let created = state.create(def, ns, obj, false)?;
                return Ok(Reply::Json(201, view.render(&created).into_owned()));
            }
            Err(error) => return Err(error),
        };
        if sub == Some("scale") {
            let current = scale::scale_of(def, &old);
            let patched = patch::apply(kind, &current, &patch_doc)?;
            let proposed = scale::with_replicas(def, &old, &patched)?;
            let new = state.commit_write(def, &old, proposed, WriteScope::Main)?;
            return Ok(Reply::Json(200, scale::scale_of(def, &new)));
        }
        let mut patched = patch::apply(kind, &old, &patch_doc)?;
        let old_rv = old
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        let new_rv = patched
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty());
        if new_rv.is_some() && new_rv != old_rv {
            return Err(ApiError::stale(&def.group, &def.plural, name));
        }
        let scope = if sub == Some("status") {
            WriteScope::Status
        } else {
            WriteScope::Main
        };
        if kind == PatchKind::Apply
            && scope == WriteScope::Main
            && let Some(manager) = manager
        {
            record_apply_manager(&mut patched, manager, &def.api_version());
        }
        let new = state.commit_write(def, &old, patched, scope)?;
        Ok(Reply::Json(200, view.render(&new).into_owned()))
    }

    fn watch(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        query: &HashMap<String, String>,
        view: View,
    ) -> Result<Reply, ApiError> {
        let filter = Filter {
            labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?,
            fields: FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str))?,
        };
        let send_initial_events = is_true(query, "sendInitialEvents");
        let bookmarks = is_true(query, "allowWatchBookmarks");
        let rv = query.get("resourceVersion").map(String::as_str);
        let start = match self.state().watch(def, ns, rv, send_initial_events) {
            Ok(start) => start,
            Err(error) if error.code == 410 => {
                return Ok(Reply::Watch(watch::error_stream(&error)));
            }
            Err(error) => return Err(error),
        };
        let timeout = query
            .get("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .filter(|t| *t > 0)
            .map(Duration::from_secs);
        let state_handle = self.self_ref();
        let params = WatchParams {
            view,
            filter,
            bookmarks,
            send_initial_events,
            timeout,
            bookmark_interval: self.bookmark_interval,
            current_rv: Arc::new(move || {
                state_handle
                    .upgrade()
                    .map_or(0, |inner| inner.state().resource_version())
            }),
            closer: self.closer.subscribe(),
        };
        Ok(Reply::Watch(watch::spawn(start, params)))
    }

    fn review(&self, body: Value) -> Result<Reply, ApiError> {
        let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
        let spec = serde_json::from_value(spec)
            .map_err(|e| ApiError::bad_request(format!("invalid SubjectAccessReview spec: {e}")))?;
        let status = (self.policy())(&spec);
        let mut reply = body;
        if let Some(map) = reply.as_object_mut() {
            map.insert("apiVersion".to_string(), json!("authorization.k8s.io/v1"));
            map.insert("kind".to_string(), json!("SubjectAccessReview"));
            map.insert(
                "status".to_string(),
                serde_json::to_value(status)
                    .map_err(|e| ApiError::from_code(500, e.to_string()))?,
            );
        }
        Ok(Reply::Json(201, reply))
    }
}

impl Inner {
    fn token_review(&self, body: Value) -> Result<Reply, ApiError> {
        let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
        let spec: k8s_openapi::api::authentication::v1::TokenReviewSpec =
            serde_json::from_value(spec)
                .map_err(|e| ApiError::bad_request(format!("invalid TokenReview spec: {e}")))?;
        // Tokens memkube issued are authenticated as the real server authenticates its own;
        // any other token is the test's policy's to judge.
        let own = spec.token.as_deref().and_then(|token| {
            crate::token::review(
                &self.tokens(),
                token,
                spec.audiences.as_deref().unwrap_or_default(),
            )
        });
        let status = match own {
            Some(status) => serde_json::from_value(status)
                .map_err(|e| ApiError::from_code(500, e.to_string()))?,
            None => (self.token_policy())(&spec),
        };
        let mut reply = body;
        if let Some(map) = reply.as_object_mut() {
            map.insert("apiVersion".to_string(), json!("authentication.k8s.io/v1"));
            map.insert("kind".to_string(), json!("TokenReview"));
            map.insert(
                "status".to_string(),
                serde_json::to_value(status)
                    .map_err(|e| ApiError::from_code(500, e.to_string()))?,
            );
        }
        Ok(Reply::Json(201, reply))
    }
}

/// Lock helper kept here so request handling reads as one flow.
impl Inner {
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_to_resources_and_discovery() {
        let rp =
            |group: &str, ns: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
                Some(Route::Resource(ResourcePath {
                    group: group.to_string(),
                    version: "v1".to_string(),
                    namespace: ns.map(str::to_string),
                    plural: plural.to_string(),
                    name: name.map(str::to_string),
                    sub: sub.map(str::to_string),
                }))
            };
        assert_eq!(
            parse_route("/api/v1/namespaces/a/pods"),
            rp("", Some("a"), "pods", None, None)
        );
        assert_eq!(
            parse_route("/api/v1/namespaces/a"),
            rp("", None, "namespaces", Some("a"), None)
        );
        assert_eq!(
            parse_route("/api/v1/namespaces/a/status"),
            rp("", None, "namespaces", Some("a"), Some("status"))
        );
        assert_eq!(
            parse_route("/apis/apps/v1/namespaces/a/deployments/d/scale"),
            rp("apps", Some("a"), "deployments", Some("d"), Some("scale"))
        );
        assert_eq!(
            parse_route("/apis/apps/v1/deployments"),
            rp("apps", None, "deployments", None, None)
        );
        assert_eq!(
            parse_route("/apis/apps"),
            Some(Route::Group("apps".to_string()))
        );
        assert_eq!(parse_route("/version"), Some(Route::Version));
        assert_eq!(parse_route("/nope"), None);
    }

    #[test]
    fn query_values_are_percent_decoded() {
        assert_eq!(
            percent_decode("app%3Dweb%2Ctier+in+%28a%29"),
            "app=web,tier in (a)"
        );
        assert_eq!(percent_decode("100%"), "100%");
    }
}
