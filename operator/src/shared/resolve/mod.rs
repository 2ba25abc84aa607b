//! Trigger resolution: the target container's environment (for `<name>FromEnv` parameters) and
//! the parameters of a trigger's TriggerAuthentication or ClusterTriggerAuthentication, read
//! from watch caches, plus "rebuild your scalers" signals when what a trigger used changes.
//!
//! # Use
//!
//! ```ignore
//! let resolver = Resolver::new(client, ResolverConfig::from_env_with(|k| std::env::var(k).ok()));
//! let signals = resolver.subscribe(); // feed to Controller::reconcile_on
//!
//! // when (re)building the scalers of a ScaledObject:
//! let mut session = resolver.session(ScaleTargetPodSource::for_scaled_object(&so));
//! for (index, trigger) in so.spec.triggers.iter().enumerate() {
//!     let mut ctx = ScalerContext::from_trigger(trigger, index);
//!     session.resolve(trigger, index).await?.apply(&mut ctx);
//!     // registry.build(ctx) ...
//! }
//! drop(session); // records what was read, for rotation
//! ```
//!
//! # Lookup order
//!
//! The resolver fills [`keda_scalers::ScalerContext::resolved_env`] and
//! [`keda_scalers::ScalerContext::auth_params`]; each scaler's parameter declaration then says
//! in which order trigger metadata, `<name>FromEnv` and auth params are tried (KEDA's typed
//! config, implemented by [`keda_scalers::MetadataParser`]). Within auth params, later sources
//! override earlier ones for the same parameter, as in KEDA: `env`, then `configMapTargetRef`,
//! then `secretTargetRef`, then `hashiCorpVault`, then `boundServiceAccountToken`; `filePath`
//! (ClusterTriggerAuthentication only) replaces them all.
//!
//! # Rotation
//!
//! Each session records, for its scalable object, every Secret, ConfigMap,
//! (Cluster)TriggerAuthentication and scale target it read, including ones it found missing.
//! When one of them changes in content (not on resyncs, status or scale updates), the object is
//! sent on every [`RebuildSignals`] stream. KEDA freezes auth params until the scaler cache is
//! rebuilt for another reason (kedacore/keda#563). A resolution that requested bound service
//! account tokens also signals its object after four fifths of the tokens' lifetime, so the
//! scalers are rebuilt with fresh tokens before the old ones expire.
//!
//! # Missing references
//!
//! A (Cluster)TriggerAuthentication, Secret, ConfigMap or key that does not exist is resolved
//! as KEDA resolves it: the trigger without the TriggerAuthentication's parameters, or the
//! parameter empty. The resolution says what was missing ([`ResolvedTrigger::missing`],
//! [`Resolver::take_missing`]) and the loops publish it as a Warning Event; see [`Missing`].
//!
//! # Secrets
//!
//! Auth params are [`keda_scalers::Secret`]s. No error, log line or `Debug` output of this
//! module contains a value read from a Secret, ConfigMap, file or container environment.

mod cache;
mod config;
mod env;
mod error;
mod expand;
mod keys;
mod missing;
mod notify;
mod projection;
mod session;
mod signal;
mod target;
mod token;
mod vault;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{ConfigMap, Secret as KubeSecret};
use keda_api::trigger_authentication::{AuthPodIdentity, POD_IDENTITY_NONE};
use keda_api::{ClusterTriggerAuthentication, TriggerAuthentication};
use keda_scalers::{ScalerContext, Secret};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::process::telemetry::{CustomResourceKind, Metrics};

pub use config::{
    BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY_BOUNDS, BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY_ENV,
    CLUSTER_OBJECT_NAMESPACE_ENV, DEFAULT_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY,
    DEFAULT_CACHE_SYNC_TIMEOUT, DEFAULT_CLUSTER_OBJECT_NAMESPACE, DEFAULT_SECRET_FIELD_SELECTOR,
    POD_NAMESPACE_ENV, RESTRICT_SECRET_ACCESS_ENV, ResolverConfig, WATCH_NAMESPACE_ENV, WatchScope,
    restrict_secret_access,
};
pub use error::{
    AuthName, EnvProblem, EnvUse, RefProblem, ResolveError, TokenProblem, VaultProblem,
};
pub use keys::{PodSource, ScalableRef, ScaleTargetPodSource};
pub use missing::{Missing, MissingRef};
pub use session::ResolveSession;
pub use signal::RebuildSignals;

use cache::{Cache, ChangeFn};
use keys::{DepKey, ObjKey};
use notify::Notifier;
pub use projection::AuthUsers;
use projection::{AuthEntry, ConfigMapData, SecretData};
use target::Targets;

/// Resolves triggers from watch caches and signals when their inputs change. Cheap to clone;
/// the watches stop when the last clone (and the last [`ResolveSession`]) is dropped.
#[derive(Clone)]
pub struct Resolver {
    inner: Arc<Inner>,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: ResolverConfig,
    /// For `boundServiceAccountToken` TokenRequests.
    client: Client,
    secrets: Arc<Cache<SecretData>>,
    config_maps: Arc<Cache<ConfigMapData>>,
    auths: Arc<Cache<AuthEntry>>,
    cluster_auths: Arc<Cache<AuthEntry>>,
    targets: Targets,
    notifier: Arc<Notifier>,
    /// What each object's last resolution found missing, until [`Resolver::take_missing`].
    missing: Mutex<HashMap<ScalableRef, Vec<Missing>>>,
    _stop: DropGuard,
}

impl Resolver {
    /// Starts the watches of Secrets and ConfigMaps (watch scope plus the cluster-object
    /// namespace), TriggerAuthentications (watch scope) and ClusterTriggerAuthentications.
    /// Scale targets are watched per type on first use.
    ///
    /// # Panics
    /// Outside a tokio runtime (it spawns the watch tasks).
    pub fn new(client: Client, config: ResolverConfig) -> Self {
        Self::start(client, config, None)
    }

    /// As [`new`](Self::new), and counts the TriggerAuthentications and
    /// ClusterTriggerAuthentications its caches hold in `keda_resource_registered_total`
    /// (`trigger_authentication` per namespace, `cluster_trigger_authentication` under
    /// `default`), as KEDA's controllers of those kinds do: counted while they exist, whatever
    /// uses them. Counting is idempotent, so two resolvers over the same objects (the
    /// ScaledObject and ScaledJob controllers') count each once.
    ///
    /// # Panics
    /// Outside a tokio runtime (it spawns the watch tasks).
    pub fn recording(client: Client, config: ResolverConfig, metrics: Metrics) -> Self {
        Self::start(client, config, Some(metrics))
    }

    fn start(client: Client, config: ResolverConfig, metrics: Option<Metrics>) -> Self {
        let cancel = CancellationToken::new();
        let notifier = Arc::new(Notifier::default());
        let reference_scope = config.reference_scope();

        let secret_scope = config.secret_scope();
        let secrets = Arc::new(Cache::new(
            "secrets",
            secret_scope.clone(),
            cache::watch_count(&secret_scope),
        ));
        let mut secret_watch = watcher::Config::default();
        if let Some(selector) = &config.secret_field_selector {
            secret_watch = secret_watch.fields(selector);
        }
        cache::spawn_watches(
            &secrets,
            namespaced::<KubeSecret>(&client),
            &secret_watch,
            projection::secret,
            on_change(&notifier, DepKey::Secret),
            &cancel,
        );

        let config_maps = Arc::new(Cache::new(
            "configmaps",
            reference_scope.clone(),
            cache::watch_count(&reference_scope),
        ));
        cache::spawn_watches(
            &config_maps,
            namespaced::<ConfigMap>(&client),
            &watcher::Config::default(),
            projection::config_map,
            on_change(&notifier, DepKey::ConfigMap),
            &cancel,
        );

        let scope = config.watch_scope.clone();
        let auths = Arc::new(counted(
            Cache::new(
                "triggerauthentications",
                scope.clone(),
                cache::watch_count(&scope),
            ),
            metrics.as_ref(),
            CustomResourceKind::TriggerAuthentication,
        ));
        // WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH: a (Cluster)TriggerAuthentication that does not
        // match is never in the caches, so it resolves as a missing one (KEDA's cache filter).
        let auth_watch = config.auth_watch();
        let ta = ApiResource::erase::<TriggerAuthentication>(&());
        let ta_client = client.clone();
        cache::spawn_watches(
            &auths,
            move |ns| match ns {
                Some(ns) => Api::<DynamicObject>::namespaced_with(ta_client.clone(), ns, &ta),
                None => Api::<DynamicObject>::all_with(ta_client.clone(), &ta),
            },
            &auth_watch,
            projection::auth_spec,
            on_change(&notifier, DepKey::TriggerAuthentication),
            &cancel,
        );

        let cluster_auths = Arc::new(counted(
            Cache::new("clustertriggerauthentications", WatchScope::All, 1),
            metrics.as_ref(),
            CustomResourceKind::ClusterTriggerAuthentication,
        ));
        let cta = ApiResource::erase::<ClusterTriggerAuthentication>(&());
        let cta_client = client.clone();
        cache::spawn_watches(
            &cluster_auths,
            move |_| Api::<DynamicObject>::all_with(cta_client.clone(), &cta),
            &auth_watch,
            projection::auth_spec,
            on_change(&notifier, DepKey::ClusterTriggerAuthentication),
            &cancel,
        );

        tokio::spawn({
            let notifier = Arc::clone(&notifier);
            let cancel = cancel.clone();
            async move { notifier.run_refreshes(cancel).await }
        });
        let targets = Targets::new(client.clone(), scope, Arc::clone(&notifier), cancel.clone());
        Self {
            inner: Arc::new(Inner {
                config,
                client,
                secrets,
                config_maps,
                auths,
                cluster_auths,
                targets,
                notifier,
                missing: Mutex::default(),
                _stop: cancel.drop_guard(),
            }),
        }
    }

    /// Starts resolving the triggers of one scalable object. Resolve every trigger of the
    /// object through the same session, then drop it: dropping records what the triggers read
    /// (replacing the object's previous record), also after an error, so that fixing a missing
    /// Secret or TriggerAuthentication signals a rebuild.
    pub fn session(&self, source: ScaleTargetPodSource) -> ResolveSession {
        ResolveSession::new(Arc::clone(&self.inner), source)
    }

    /// A new stream of rebuild signals. Each subscriber gets every signal.
    pub fn subscribe(&self) -> RebuildSignals {
        self.inner.notifier.subscribe()
    }

    /// The objects of `kind` whose trigger inputs (a Secret, ConfigMap, TriggerAuthentication or
    /// target env) changed, for a controller's `reconcile_on`: `rebuild` runs first (it marks
    /// the object's loop for a rebuild), so the reconcile that follows uses the new values.
    pub fn rebuilds_of<K, F, Fut>(
        &self,
        kind: keda_scalers::ScalableKind,
        rebuild: F,
    ) -> impl futures::Stream<Item = kube::runtime::reflector::ObjectRef<K>> + Send + 'static
    where
        K: kube::Resource<DynamicType = ()> + 'static,
        F: Fn(ScalableRef) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        use futures::StreamExt;
        self.subscribe()
            .filter(move |r| std::future::ready(r.kind == kind))
            .then(move |r: ScalableRef| {
                tracing::info!(
                    namespace = r.namespace,
                    name = r.name,
                    "trigger inputs changed: rebuilding scalers"
                );
                let rebuilt = rebuild(r.clone());
                async move {
                    rebuilt.await;
                    r.object_ref::<K>()
                }
            })
    }

    /// The users a (Cluster)TriggerAuthentication's status lists, as its watch last saw them;
    /// `None` when the cache does not hold it. `namespace` is ignored for a
    /// ClusterTriggerAuthentication.
    pub fn auth_users(
        &self,
        kind: keda_api::AuthenticationKind,
        namespace: &str,
        name: &str,
    ) -> Option<AuthUsers> {
        let entry = match kind {
            keda_api::AuthenticationKind::TriggerAuthentication => {
                self.inner.auths.get(&ObjKey::new(namespace, name))
            }
            keda_api::AuthenticationKind::ClusterTriggerAuthentication => {
                self.inner.cluster_auths.get(&ObjKey::new("", name))
            }
        };
        entry.map(|e| e.users.clone())
    }

    /// Forgets what `scalable` used (call when it is deleted); it will get no more signals.
    pub fn forget(&self, scalable: &ScalableRef) {
        self.inner.notifier.forget(scalable);
        self.inner.lock_missing().remove(scalable);
    }

    /// What the last finished resolution of `scalable` found missing (see [`Missing`]), once:
    /// the caller publishes it, and the next resolution records afresh.
    pub fn take_missing(&self, scalable: &ScalableRef) -> Vec<Missing> {
        self.inner
            .lock_missing()
            .remove(scalable)
            .unwrap_or_default()
    }

    /// What `scalable`'s last resolution read, e.g. `Secret team/redis`, sorted.
    pub fn dependencies(&self, scalable: &ScalableRef) -> Vec<String> {
        let mut deps: Vec<String> = self
            .inner
            .notifier
            .deps(scalable)
            .iter()
            .map(ToString::to_string)
            .collect();
        deps.sort();
        deps
    }

    /// Waits until the Secret, ConfigMap and (Cluster)TriggerAuthentication caches have listed
    /// once, at most the configured `cache_sync_timeout`.
    ///
    /// # Errors
    /// [`ResolveError::CachesNotReady`] naming the caches that are not ready.
    pub async fn wait_ready(&self) -> Result<(), ResolveError> {
        self.inner.wait_ready().await
    }
}

impl Inner {
    fn lock_missing(&self) -> std::sync::MutexGuard<'_, HashMap<ScalableRef, Vec<Missing>>> {
        // Every write is one insert or remove: a poisoned map is still consistent.
        self.missing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records what a resolution of `scalable` found missing, replacing the previous record.
    fn record_missing(&self, scalable: &ScalableRef, missing: Vec<Missing>) {
        let mut map = self.lock_missing();
        if missing.is_empty() {
            map.remove(scalable);
        } else {
            map.insert(scalable.clone(), missing);
        }
    }

    async fn wait_ready(&self) -> Result<(), ResolveError> {
        let timeout = self.config.cache_sync_timeout;
        let (s, c, a, ca) = tokio::join!(
            self.secrets.wait_ready(timeout),
            self.config_maps.wait_ready(timeout),
            self.auths.wait_ready(timeout),
            self.cluster_auths.wait_ready(timeout),
        );
        let names = [
            (s, &self.secrets.resource),
            (c, &self.config_maps.resource),
            (a, &self.auths.resource),
            (ca, &self.cluster_auths.resource),
        ];
        let not_ready: Vec<&str> = names
            .iter()
            .filter(|(ready, _)| !ready)
            .map(|(_, name)| name.as_str())
            .collect();
        if not_ready.is_empty() {
            Ok(())
        } else {
            Err(ResolveError::CachesNotReady {
                caches: not_ready.join(", "),
                waited: timeout,
            })
        }
    }
}

fn namespaced<K>(client: &Client) -> impl Fn(Option<&str>) -> Api<K> + use<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    let client = client.clone();
    move |ns| match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// `cache`, counting its objects as `kind` in `keda_resource_registered_total` when there are
/// `metrics`.
fn counted(
    cache: Cache<AuthEntry>,
    metrics: Option<&Metrics>,
    kind: CustomResourceKind,
) -> Cache<AuthEntry> {
    let Some(metrics) = metrics.cloned() else {
        return cache;
    };
    cache.with_presence(Arc::new(move |key: &ObjKey, present| {
        let names = (key.namespace.as_str(), key.name.as_str());
        if present {
            crate::shared::recording::resource_registered(&metrics, kind, names, None, &[]);
        } else {
            crate::shared::recording::resource_unregistered(&metrics, kind, names, None);
        }
    }))
}

fn on_change(notifier: &Arc<Notifier>, dep: fn(ObjKey) -> DepKey) -> ChangeFn {
    let notifier = Arc::clone(notifier);
    Arc::new(move |key: &ObjKey| notifier.changed(dep(key.clone())))
}

impl fmt::Display for DepKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(k) => write!(f, "Secret {k}"),
            Self::ConfigMap(k) => write!(f, "ConfigMap {k}"),
            Self::TriggerAuthentication(k) => write!(f, "TriggerAuthentication {k}"),
            Self::ClusterTriggerAuthentication(k) => write!(f, "ClusterTriggerAuthentication {k}"),
            Self::Target(resource, k) => write!(f, "{resource} {k}"),
        }
    }
}

/// What one trigger resolved to: the input of its scaler besides the trigger itself.
#[derive(Clone, PartialEq)]
pub struct ResolvedTrigger {
    /// The target container's variables named by the trigger's `<name>FromEnv` metadata, keyed
    /// by variable name (KEDA's `resolvedEnv`). Only those variables, so that values of
    /// unrelated variables (often secrets) never reach a scaler.
    pub resolved_env: BTreeMap<String, String>,
    /// Parameters from the trigger's (Cluster)TriggerAuthentication (KEDA's `authParams`).
    pub auth_params: BTreeMap<String, Secret>,
    /// The TriggerAuthentication's `podIdentity`; provider `none` when absent. keda-rs accepts
    /// only `none`.
    pub pod_identity: AuthPodIdentity,
    /// What the trigger's authentication names but does not exist: resolved as KEDA resolves
    /// it (no parameters for a missing (Cluster)TriggerAuthentication, an empty parameter for a
    /// missing Secret, ConfigMap or key).
    pub missing: Vec<Missing>,
    /// What the trigger may do with the operator's own identity: whether its parameters came
    /// from a ClusterTriggerAuthentication, and the administrator's
    /// `--allow-namespace-aws-operator-identity`.
    pub operator_identity: keda_scalers::OperatorIdentityGrant,
}

impl ResolvedTrigger {
    /// Stores the resolved environment, auth params and identity grant in `ctx`.
    pub fn apply(self, ctx: &mut ScalerContext) {
        ctx.resolved_env = self.resolved_env;
        ctx.auth_params = self.auth_params;
        ctx.operator_identity = self.operator_identity;
    }
}

impl Default for ResolvedTrigger {
    fn default() -> Self {
        Self {
            resolved_env: BTreeMap::new(),
            auth_params: BTreeMap::new(),
            pod_identity: AuthPodIdentity {
                provider: POD_IDENTITY_NONE.to_string(),
                ..Default::default()
            },
            missing: Vec::new(),
            operator_identity: keda_scalers::OperatorIdentityGrant::default(),
        }
    }
}

impl fmt::Debug for ResolvedTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Environment values may come from Secrets: show the names only.
        f.debug_struct("ResolvedTrigger")
            .field(
                "resolved_env",
                &self.resolved_env.keys().collect::<Vec<_>>(),
            )
            .field("auth_params", &self.auth_params)
            .field("pod_identity", &self.pod_identity.provider)
            .field("missing", &self.missing)
            .field("operator_identity", &self.operator_identity)
            .finish()
    }
}
