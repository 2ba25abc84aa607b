//! The server handle tests hold: state, failure rules, counters, and typed conveniences.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::authorization::v1::{SubjectAccessReviewSpec, SubjectAccessReviewStatus};
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::faults::{FailureRule, Faults, RequestCounts, RequestInfo, Verb};
use crate::service::{Loopback, MemKubeService};
use crate::store::State;

/// Decides `SubjectAccessReview`s: gets the review's spec, returns its status.
pub type AccessPolicy =
    Arc<dyn Fn(&SubjectAccessReviewSpec) -> SubjectAccessReviewStatus + Send + Sync>;

/// Decides `TokenReview`s: gets the review's spec (the token), returns its status (who it is).
pub type TokenPolicy = Arc<dyn Fn(&TokenReviewSpec) -> TokenReviewStatus + Send + Sync>;

/// Errors of the typed helpers on [`MemKube`] (API requests answer with `Status` objects instead).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operation was refused the way the API would refuse it.
    #[error("the API server refused the operation: {0}")]
    Api(#[from] ApiError),
    /// The object could not be turned into JSON.
    #[error("cannot serialize the object: {0}")]
    Serialize(#[source] serde_json::Error),
    /// The object's `apiVersion`/`kind` is not served.
    #[error("no served resource has apiVersion {api_version:?} and kind {kind:?}")]
    UnknownKind { api_version: String, kind: String },
    /// A CRD file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    ReadCrds {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A CRD file is not valid YAML.
    #[error("cannot parse YAML in {path}: {source}")]
    ParseCrds {
        path: PathBuf,
        #[source]
        source: serde_yaml::Error,
    },
}

/// Configures a [`MemKube`].
#[derive(Debug, Clone)]
pub struct MemKubeBuilder {
    history_limit: usize,
    bookmark_interval: Duration,
}

impl Default for MemKubeBuilder {
    fn default() -> Self {
        Self {
            history_limit: 100_000,
            bookmark_interval: Duration::from_secs(1),
        }
    }
}

impl MemKubeBuilder {
    /// Watch events retained per resource for resuming watches (default 100,000). A watch from a
    /// resourceVersion older than the retained window gets `410 Gone`.
    pub fn history_limit(mut self, events: usize) -> Self {
        self.history_limit = events;
        self
    }

    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK (default 1 s; a real
    /// server sends them about once a minute).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    pub fn build(self) -> MemKube {
        // Any 64 bits of the clock make a seed: keep the low ones.
        let seed = u64::try_from(jiff::Timestamp::now().as_nanosecond() & i128::from(u64::MAX))
            .unwrap_or_default();
        let (closer, _) = tokio::sync::watch::channel(0);
        let inner = Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            state: Mutex::new(State::new(self.history_limit, seed)),
            faults: Mutex::new(Faults::default()),
            counts: Mutex::new(RequestCounts::default()),
            policy: RwLock::new(Arc::new(|_: &SubjectAccessReviewSpec| {
                SubjectAccessReviewStatus {
                    allowed: true,
                    ..Default::default()
                }
            })),
            token_policy: RwLock::new(Arc::new(|_: &TokenReviewSpec| TokenReviewStatus {
                authenticated: Some(false),
                error: Some("memkube: no token is known (set_token_policy)".to_string()),
                ..Default::default()
            })),
            tokens: Mutex::new(Vec::new()),
            writes: Mutex::new(None),
            closer,
            bookmark_interval: self.bookmark_interval,
        });
        MemKube { inner }
    }
}

pub(crate) struct Inner {
    me: Weak<Inner>,
    pub(crate) state: Mutex<State>,
    faults: Mutex<Faults>,
    counts: Mutex<RequestCounts>,
    policy: RwLock<AccessPolicy>,
    token_policy: RwLock<TokenPolicy>,
    /// Tokens issued through `serviceaccounts/{name}/token`, in order.
    tokens: Mutex<Vec<crate::token::IssuedToken>>,
    /// Every write with its writer, once [`MemKube::record_writes`] turned the log on.
    writes: Mutex<Option<Vec<crate::faults::WriteRecord>>>,
    pub(crate) closer: tokio::sync::watch::Sender<u64>,
    pub(crate) bookmark_interval: Duration,
}

impl Inner {
    pub(crate) fn self_ref(&self) -> Weak<Inner> {
        self.me.clone()
    }

    pub(crate) fn count(&self, info: &RequestInfo) {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(info);
    }

    /// Logs `info` with its writer when it is a write and the log is on.
    pub(crate) fn log_write(&self, info: &RequestInfo, headers: &http::HeaderMap) {
        if matches!(info.verb, Verb::Get | Verb::List | Verb::Watch) {
            return;
        }
        let mut writes = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(log) = writes.as_mut() else {
            return;
        };
        let header = |name: http::header::HeaderName| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let writer = header(http::header::AUTHORIZATION)
            .and_then(|v| v.strip_prefix("Bearer ").map(str::to_string))
            .or_else(|| header(http::header::USER_AGENT))
            .unwrap_or_default();
        log.push(crate::faults::WriteRecord {
            verb: info.verb,
            resource: info.resource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            writer,
            at: std::time::Instant::now(),
        });
    }

    pub(crate) fn inject(&self, info: &RequestInfo) -> Option<ApiError> {
        self.faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .check(info)
    }

    pub(crate) fn policy(&self) -> AccessPolicy {
        self.policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn tokens(&self) -> std::sync::MutexGuard<'_, Vec<crate::token::IssuedToken>> {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn token_policy(&self) -> TokenPolicy {
        self.token_policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// An in-memory Kubernetes API server. Cheap to clone; clones share one cluster.
#[derive(Clone)]
pub struct MemKube {
    pub(crate) inner: Arc<Inner>,
}

impl Default for MemKube {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MemKube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemKube")
            .field("resource_version", &self.resource_version())
            .finish()
    }
}

impl MemKube {
    /// A server with the built-in resources and the namespaces `default`, `kube-system` and
    /// `kube-public`.
    pub fn new() -> Self {
        MemKubeBuilder::default().build()
    }

    pub fn builder() -> MemKubeBuilder {
        MemKubeBuilder::default()
    }

    /// The in-process `tower::Service` speaking the API's HTTP protocol.
    pub fn service(&self) -> MemKubeService {
        MemKubeService::new(self.inner.clone())
    }

    /// A `kube::Client` served in process, default namespace `default`.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }

    /// Serves plain HTTP on `127.0.0.1` at a free port until the returned handle is dropped.
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn serve_loopback(&self) -> std::io::Result<Loopback> {
        Loopback::start(self.inner.clone()).await
    }

    /// The cluster's current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.state().resource_version()
    }

    /// How many objects are stored, of all resources.
    pub fn object_count(&self) -> usize {
        self.inner.state().object_count()
    }

    /// Creates a namespace.
    ///
    /// # Errors
    /// `AlreadyExists` when it exists.
    pub fn create_namespace(&self, name: &str) -> Result<Value, Error> {
        self.create_value(
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }),
            false,
        )
    }

    /// Stores an object as given, `.status` and `metadata.creationTimestamp` included (an API
    /// create drops `.status` for resources with a status subresource, and stamps the time). The
    /// resource is found from `apiVersion` and `kind`.
    ///
    /// # Errors
    /// As an API create would fail (missing namespace, already exists), or an unknown kind.
    pub fn seed<K: Serialize>(&self, object: &K) -> Result<Value, Error> {
        let value = serde_json::to_value(object).map_err(Error::Serialize)?;
        self.create_value(value, true)
    }

    fn create_value(&self, value: Value, keep_status: bool) -> Result<Value, Error> {
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let mut state = self.inner.state();
        let def = state
            .registry
            .all()
            .find(|d| d.api_version() == api_version && d.kind == kind)
            .cloned()
            .ok_or(Error::UnknownKind { api_version, kind })?;
        let namespace = value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        let namespace = namespace.or_else(|| def.namespaced.then(|| "default".to_string()));
        Ok((*state.create(&def, namespace.as_deref(), value, keep_status)?).clone())
    }

    /// Every stored object of `apiVersion`/`kind` (all namespaces), read from the store
    /// directly: no request is made, so nothing shows in [`request_counts`](Self::request_counts).
    /// For benchmarks and tests that watch the outcome of a client's work while counting only
    /// that client's requests.
    ///
    /// # Errors
    /// [`Error::UnknownKind`] when no served resource has that `apiVersion` and `kind`.
    pub fn objects(&self, api_version: &str, kind: &str) -> Result<Vec<Arc<Value>>, Error> {
        let state = self.inner.state();
        let def = state
            .registry
            .all()
            .find(|d| d.api_version() == api_version && d.kind == kind)
            .ok_or_else(|| Error::UnknownKind {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
            })?;
        Ok(state.objects(&def.group_resource()))
    }

    /// Installs a CustomResourceDefinition (for example `MyKind::crd()` from `kube::CustomResourceExt`),
    /// serving its resources at once.
    ///
    /// # Errors
    /// `Invalid` for a malformed CRD, `AlreadyExists` when installed already.
    pub fn install_crd<C: Serialize>(&self, crd: &C) -> Result<(), Error> {
        let value = serde_json::to_value(crd).map_err(Error::Serialize)?;
        self.create_value(value, false).map(|_| ())
    }

    /// Installs every CustomResourceDefinition in a YAML text (several documents allowed;
    /// documents of other kinds are ignored). Returns the installed CRD names.
    ///
    /// # Errors
    /// A YAML error, or a CRD the API would refuse.
    pub fn load_crd_yaml(&self, yaml: &str) -> Result<Vec<String>, Error> {
        self.load_yaml(yaml, Path::new("<string>"))
    }

    /// Installs the CustomResourceDefinitions of every `*.yaml`/`*.yml` file in `dir` (for
    /// example `config/crd/`), in file name order. Returns the installed CRD names.
    ///
    /// # Errors
    /// An unreadable directory or file, a YAML error, or a CRD the API would refuse.
    pub fn load_crds_from_dir(&self, dir: impl AsRef<Path>) -> Result<Vec<String>, Error> {
        let dir = dir.as_ref();
        let read_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::ReadCrds { path, source }
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(read_error(dir))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        let mut names = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).map_err(read_error(&file))?;
            names.extend(self.load_yaml(&text, &file)?);
        }
        Ok(names)
    }

    fn load_yaml(&self, yaml: &str, path: &Path) -> Result<Vec<String>, Error> {
        let mut names = Vec::new();
        for document in serde_yaml::Deserializer::from_str(yaml) {
            let value: Value =
                serde::Deserialize::deserialize(document).map_err(|source| Error::ParseCrds {
                    path: path.to_path_buf(),
                    source,
                })?;
            if value.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                continue;
            }
            let created = self.create_value(value, false)?;
            names.push(
                created
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        Ok(names)
    }

    /// Makes matching requests fail; see [`FailureRule`].
    pub fn inject_failure(&self, rule: FailureRule) {
        self.inner_faults(|faults| faults.add(rule));
    }

    /// Removes every failure rule.
    pub fn clear_failures(&self) {
        self.inner_faults(Faults::clear);
    }

    fn inner_faults(&self, f: impl FnOnce(&mut Faults)) {
        f(&mut self
            .inner
            .faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner));
    }

    /// Requests served since the start or the last [`reset_request_counts`](Self::reset_request_counts).
    pub fn request_counts(&self) -> RequestCounts {
        self.inner
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn reset_request_counts(&self) {
        *self
            .inner
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = RequestCounts::default();
    }

    /// Answers `SubjectAccessReview`s with `policy` (the default allows everything).
    pub fn set_access_policy(
        &self,
        policy: impl Fn(&SubjectAccessReviewSpec) -> SubjectAccessReviewStatus + Send + Sync + 'static,
    ) {
        *self
            .inner
            .policy
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
    }

    /// Answers `TokenReview`s with `policy` (the default authenticates no token).
    pub fn set_token_policy(
        &self,
        policy: impl Fn(&TokenReviewSpec) -> TokenReviewStatus + Send + Sync + 'static,
    ) {
        *self
            .inner
            .token_policy
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
    }

    /// Starts (or restarts, empty) the log of write requests (create, update, patch, delete,
    /// of any resource and subresource) with their writer: see [`writes`](Self::writes). Off
    /// by default, so long benchmarks keep no log.
    pub fn record_writes(&self) {
        *self
            .inner
            .writes
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Vec::new());
    }

    /// The writes logged since [`record_writes`](Self::record_writes), oldest first (empty when
    /// the log is off). Failed writes are included: a request counts as sent by its writer.
    pub fn writes(&self) -> Vec<crate::faults::WriteRecord> {
        self.inner
            .writes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default()
    }

    /// The tokens issued through `serviceaccounts/{name}/token` (TokenRequest), oldest first.
    pub fn issued_tokens(&self) -> Vec<crate::token::IssuedToken> {
        self.inner.tokens().clone()
    }

    /// Forgets the watch history, as etcd compaction does: watching from any resourceVersion
    /// before now gets `410 Gone`.
    pub fn compact_history(&self) {
        self.inner.state().compact();
    }

    /// Ends every open watch stream, as an API server restart would; clients resume from
    /// their last resourceVersion.
    pub fn close_watches(&self) {
        self.inner.state().close_watches();
        self.inner.closer.send_modify(|epoch| *epoch += 1);
    }
}
