//! Configuration of the [`super::Resolver`]: which namespaces it watches, where
//! ClusterTriggerAuthentications read their Secrets, and the `filePath` root.

use std::path::PathBuf;
use std::time::Duration;

/// `WATCH_NAMESPACE`: comma-separated namespaces to watch; empty means all.
pub const WATCH_NAMESPACE_ENV: &str = "WATCH_NAMESPACE";
/// `KEDA_CLUSTER_OBJECT_NAMESPACE`: where ClusterTriggerAuthentications read Secrets and
/// ConfigMaps.
pub const CLUSTER_OBJECT_NAMESPACE_ENV: &str = "KEDA_CLUSTER_OBJECT_NAMESPACE";
/// `POD_NAMESPACE`: the operator's own namespace (downward API), the default cluster-object
/// namespace.
pub const POD_NAMESPACE_ENV: &str = "POD_NAMESPACE";
/// The cluster-object namespace when neither variable above is set (KEDA's install namespace).
pub const DEFAULT_CLUSTER_OBJECT_NAMESPACE: &str = "keda";
/// Secrets of this type (Helm release history, often large) are not cached by default.
pub const DEFAULT_SECRET_FIELD_SELECTOR: &str = "type!=helm.sh/release.v1";
/// How long a resolution waits for the caches' first list before it fails.
pub const DEFAULT_CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// `KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY`: the lifetime asked for `boundServiceAccountToken`
/// tokens, a Go duration between 1h and 6h.
pub const BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY_ENV: &str = "KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY";
/// KEDA's default token lifetime: one hour.
pub const DEFAULT_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY: Duration = Duration::from_secs(3600);
/// KEDA's bounds of `KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY`: 1h to 6h.
pub const BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY_BOUNDS: (Duration, Duration) =
    (Duration::from_secs(3600), Duration::from_secs(6 * 3600));

/// Which namespaces the resolver's caches cover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchScope {
    /// Every namespace (one cluster-wide watch per resource).
    All,
    /// Only these namespaces (one watch per namespace and resource). The cluster-object
    /// namespace is always added for Secrets and ConfigMaps.
    Namespaces(Vec<String>),
}

impl WatchScope {
    /// Parses `WATCH_NAMESPACE`: a comma-separated list, empty (or only commas and spaces)
    /// meaning all namespaces, as in KEDA.
    pub fn parse(value: &str) -> Self {
        let mut namespaces: Vec<String> = value
            .split(',')
            .map(str::trim)
            .filter(|ns| !ns.is_empty())
            .map(str::to_string)
            .collect();
        namespaces.sort();
        namespaces.dedup();
        if namespaces.is_empty() {
            Self::All
        } else {
            Self::Namespaces(namespaces)
        }
    }

    /// Whether `namespace` is covered.
    pub fn covers(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Namespaces(list) => list.iter().any(|ns| ns == namespace),
        }
    }

    /// This scope plus `namespace`.
    pub(crate) fn with(&self, namespace: &str) -> Self {
        match self {
            Self::All => Self::All,
            Self::Namespaces(list) => {
                let mut list = list.clone();
                if !list.iter().any(|ns| ns == namespace) {
                    list.push(namespace.to_string());
                    list.sort();
                }
                Self::Namespaces(list)
            }
        }
    }
}

/// Settings of a [`super::Resolver`].
#[derive(Clone, Debug)]
pub struct ResolverConfig {
    /// Namespaces whose Secrets, ConfigMaps, TriggerAuthentications and scale targets are
    /// cached.
    pub watch_scope: WatchScope,
    /// Where ClusterTriggerAuthentications read `secretTargetRef` / `configMapTargetRef`.
    pub cluster_object_namespace: String,
    /// Root of `filePath` entries of ClusterTriggerAuthentications (KEDA's
    /// `--filepath-auth-root-path`); `None` refuses `filePath`.
    pub file_path_auth_root: Option<PathBuf>,
    /// Field selector of the Secret watch; `None` caches every Secret in scope.
    pub secret_field_selector: Option<String>,
    /// Label selector of the TriggerAuthentication and ClusterTriggerAuthentication watches
    /// (`WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH`); `None` caches every one in scope. As in KEDA,
    /// whose manager cache filters these kinds by the selector, one that does not match is
    /// resolved as if it did not exist.
    pub auth_label_selector: Option<String>,
    /// How long the first resolution waits for the caches' initial list.
    pub cache_sync_timeout: Duration,
    /// `KEDA_RESTRICT_SECRET_ACCESS`: Secrets are watched and read only in
    /// `cluster_object_namespace`, so the operator needs no access to Secrets elsewhere; a
    /// trigger that needs one from another namespace (a TriggerAuthentication's
    /// `secretTargetRef`, a container variable from a Secret) fails, naming it.
    pub restrict_secret_access: bool,
    /// The lifetime asked for `boundServiceAccountToken` tokens
    /// (`KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY`, default 1h). The object's scalers are rebuilt
    /// with fresh tokens after four fifths of the lifetime the API server granted.
    pub bound_service_account_token_expiry: Duration,
    /// What a namespaced TriggerAuthentication may make the operator do with its own identity
    /// (`--allow-namespace-vault-operator-identity`, `--bound-token-service-accounts`); the
    /// default allows neither ([`keda_api::identity`]).
    pub identity: keda_api::identity::IdentityPolicy,
}

impl ResolverConfig {
    /// All namespaces, cluster objects in `cluster_object_namespace`, no `filePath` root,
    /// Helm release Secrets skipped, a 30 s sync timeout.
    pub fn new(cluster_object_namespace: impl Into<String>) -> Self {
        Self {
            watch_scope: WatchScope::All,
            cluster_object_namespace: cluster_object_namespace.into(),
            file_path_auth_root: None,
            secret_field_selector: Some(DEFAULT_SECRET_FIELD_SELECTOR.to_string()),
            auth_label_selector: None,
            cache_sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            restrict_secret_access: false,
            bound_service_account_token_expiry: DEFAULT_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY,
            identity: keda_api::identity::IdentityPolicy::default(),
        }
    }

    /// Reads KEDA's variables through `get` (pass `|k| std::env::var(k).ok()` in the binary):
    /// `WATCH_NAMESPACE`, then `KEDA_CLUSTER_OBJECT_NAMESPACE`, falling back to `POD_NAMESPACE`
    /// and then `keda`. Empty values count as unset.
    pub fn from_env_with(get: impl Fn(&str) -> Option<String>) -> Self {
        let non_empty = |key: &str| get(key).filter(|v| !v.trim().is_empty());
        let cluster_object_namespace = non_empty(CLUSTER_OBJECT_NAMESPACE_ENV)
            .or_else(|| non_empty(POD_NAMESPACE_ENV))
            .unwrap_or_else(|| DEFAULT_CLUSTER_OBJECT_NAMESPACE.to_string());
        Self {
            watch_scope: WatchScope::parse(&get(WATCH_NAMESPACE_ENV).unwrap_or_default()),
            restrict_secret_access: restrict_secret_access(get(RESTRICT_SECRET_ACCESS_ENV)),
            ..Self::new(cluster_object_namespace.trim())
        }
    }

    /// The watch of TriggerAuthentications and ClusterTriggerAuthentications: with
    /// [`auth_label_selector`](Self::auth_label_selector) when one is set.
    pub fn auth_watch(&self) -> kube::runtime::watcher::Config {
        let config = kube::runtime::watcher::Config::default();
        match &self.auth_label_selector {
            Some(selector) => config.labels(selector),
            None => config,
        }
    }

    /// The scope of the Secret and ConfigMap caches: the watch scope plus the cluster-object
    /// namespace.
    pub(crate) fn reference_scope(&self) -> WatchScope {
        self.watch_scope.with(&self.cluster_object_namespace)
    }

    /// The namespaces whose Secrets are watched: those of [`reference_scope`], or only the
    /// cluster object namespace under `KEDA_RESTRICT_SECRET_ACCESS`.
    ///
    /// [`reference_scope`]: Self::reference_scope
    pub(crate) fn secret_scope(&self) -> WatchScope {
        if self.restrict_secret_access {
            WatchScope::Namespaces(vec![self.cluster_object_namespace.clone()])
        } else {
            self.reference_scope()
        }
    }
}

/// `KEDA_RESTRICT_SECRET_ACCESS`.
pub const RESTRICT_SECRET_ACCESS_ENV: &str = "KEDA_RESTRICT_SECRET_ACCESS";

/// KEDA's reading of `KEDA_RESTRICT_SECRET_ACCESS`: restricted when the value is `true` in
/// any case; any other value, or none, is not.
pub fn restrict_secret_access(value: Option<String>) -> bool {
    value.is_some_and(|v| v.to_lowercase() == "true")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_namespace_is_a_comma_list_and_empty_means_all() {
        assert_eq!(WatchScope::parse(""), WatchScope::All);
        assert_eq!(WatchScope::parse(" , "), WatchScope::All);
        assert_eq!(
            WatchScope::parse("b, a,,b"),
            WatchScope::Namespaces(vec!["a".into(), "b".into()])
        );
        assert!(WatchScope::parse("a").covers("a"));
        assert!(!WatchScope::parse("a").covers("b"));
        assert!(WatchScope::All.covers("anything"));
    }

    #[test]
    fn cluster_object_namespace_falls_back_to_the_pod_namespace_then_keda() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| v.to_string())
            }
        };
        let config = ResolverConfig::from_env_with(env(&[
            (CLUSTER_OBJECT_NAMESPACE_ENV, "shared"),
            (POD_NAMESPACE_ENV, "ops"),
            (WATCH_NAMESPACE_ENV, "team-a,team-b"),
        ]));
        assert_eq!(config.cluster_object_namespace, "shared");
        assert_eq!(
            config.reference_scope(),
            WatchScope::Namespaces(vec!["shared".into(), "team-a".into(), "team-b".into()])
        );
        let config = ResolverConfig::from_env_with(env(&[
            (CLUSTER_OBJECT_NAMESPACE_ENV, " "),
            (POD_NAMESPACE_ENV, "ops"),
        ]));
        assert_eq!(config.cluster_object_namespace, "ops");
        assert_eq!(config.watch_scope, WatchScope::All);
        let config = ResolverConfig::from_env_with(env(&[]));
        assert_eq!(config.cluster_object_namespace, "keda");
        assert!(!config.restrict_secret_access);
    }

    #[test]
    fn restricted_secret_access_is_keda_s_case_insensitive_true_and_watches_one_namespace() {
        assert!(restrict_secret_access(Some("true".into())));
        assert!(restrict_secret_access(Some("TRUE".into())));
        assert!(!restrict_secret_access(Some("1".into())));
        assert!(!restrict_secret_access(Some(" true".into())));
        assert!(!restrict_secret_access(None));
        let pairs = [
            (WATCH_NAMESPACE_ENV, "team-a,team-b"),
            (CLUSTER_OBJECT_NAMESPACE_ENV, "keda"),
            (RESTRICT_SECRET_ACCESS_ENV, "True"),
        ];
        let config = ResolverConfig::from_env_with(|key: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_string())
        });
        assert!(config.restrict_secret_access);
        assert_eq!(
            config.secret_scope(),
            WatchScope::Namespaces(vec!["keda".into()])
        );
        assert_eq!(
            config.reference_scope(),
            WatchScope::Namespaces(vec!["keda".into(), "team-a".into(), "team-b".into()]),
            "ConfigMaps are read as before"
        );
    }
}
