//! Why a trigger's environment or authentication could not be resolved.
//!
//! Every message names the trigger and what the user must fix: the TriggerAuthentication, the
//! parameter, the Secret or ConfigMap and key, the container and the variable. Values never
//! appear in them: the resolver never formats a value it read.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use keda_scalers::TriggerId;

/// A (Cluster)TriggerAuthentication, for messages: `TriggerAuthentication team/redis-auth`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthName {
    /// `TriggerAuthentication` or `ClusterTriggerAuthentication`.
    pub kind: &'static str,
    /// Its namespace, empty for a ClusterTriggerAuthentication.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl fmt::Display for AuthName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// Who asked for an environment variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvUse {
    /// `metadata["<parameter>FromEnv"]` of the trigger.
    Metadata {
        /// The metadata key, e.g. `passwordFromEnv`.
        key: String,
    },
    /// An `env` entry of a (Cluster)TriggerAuthentication.
    Auth {
        /// The TriggerAuthentication.
        auth: AuthName,
        /// The entry's `parameter`.
        parameter: String,
    },
}

impl fmt::Display for EnvUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Metadata { key } => write!(f, "metadata \"{key}\""),
            Self::Auth { auth, parameter } => {
                write!(f, "{auth}: env parameter \"{parameter}\"")
            }
        }
    }
}

/// What went wrong reading a variable of the target's container.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvProblem {
    /// The container defines no such variable.
    #[error(
        "variable \"{variable}\" is not defined in container \"{container}\" of {target}{hint}"
    )]
    Missing {
        /// The variable.
        variable: String,
        /// The container.
        container: String,
        /// The scale target.
        target: String,
        /// Why it may be missing (an `envFrom` source that could not be read), or empty.
        hint: String,
    },
    /// The container defines it, but its value could not be read.
    #[error("variable \"{variable}\" of container \"{container}\" of {target}: {reason}")]
    Unresolvable {
        /// The variable.
        variable: String,
        /// The container.
        container: String,
        /// The scale target.
        target: String,
        /// What failed, e.g. `Secret team/db not found`.
        reason: String,
    },
    /// No container has the requested name.
    #[error("container \"{container}\" not found in {target} (containers: {available})")]
    ContainerNotFound {
        /// The requested container.
        container: String,
        /// The scale target.
        target: String,
        /// The containers it has, comma-separated.
        available: String,
    },
    /// The pod template has no containers.
    #[error("{target} has no containers in its pod template")]
    NoContainers {
        /// The scale target.
        target: String,
    },
    /// The scale target does not exist.
    #[error("scale target {target} not found")]
    TargetNotFound {
        /// The scale target.
        target: String,
    },
    /// The scale target's type cannot be watched.
    #[error("scale target {target}: {reason}")]
    TargetType {
        /// The scale target.
        target: String,
        /// Why (invalid apiVersion, unknown kind).
        reason: String,
    },
}

/// What went wrong reading one TriggerAuthentication parameter from a Secret, a ConfigMap or a
/// file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RefProblem {
    /// The Secret or ConfigMap does not exist.
    #[error("{kind} {namespace}/{name} not found")]
    NotFound {
        /// `Secret` or `ConfigMap`.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// It exists but has no such key.
    #[error("key \"{key}\" not found in {kind} {namespace}/{name}")]
    KeyNotFound {
        /// `Secret` or `ConfigMap`.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The key.
        key: String,
    },
    /// The key's bytes are not UTF-8 text.
    #[error("key \"{key}\" of {kind} {namespace}/{name} is not UTF-8 text")]
    NotUtf8 {
        /// `Secret` or `ConfigMap`.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The key.
        key: String,
    },
    /// `name` or `key` is empty.
    #[error("{kind} reference needs both name and key")]
    Incomplete {
        /// `secretTargetRef` or `configMapTargetRef`.
        kind: &'static str,
    },
    /// The namespace is outside the resolver's watch scope.
    #[error("namespace \"{namespace}\" is not watched by keda-rs (WATCH_NAMESPACE)")]
    NamespaceNotWatched {
        /// The namespace.
        namespace: String,
    },
    /// `KEDA_RESTRICT_SECRET_ACCESS` keeps Secrets outside the cluster object namespace
    /// unread.
    #[error("{}", restricted_secret(namespace, name, allowed))]
    SecretAccessRestricted {
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The only namespace whose Secrets are read (`KEDA_CLUSTER_OBJECT_NAMESPACE`).
        allowed: String,
    },
}

/// Why the Secret `namespace/name` is not read under `KEDA_RESTRICT_SECRET_ACCESS`, and what to
/// use instead (KEDA's hint).
pub(crate) fn restricted_secret(namespace: &str, name: &str, allowed: &str) -> String {
    format!(
        "Secret {namespace}/{name} is not read: secret access is restricted to the cluster object \
         namespace \"{allowed}\" (KEDA_RESTRICT_SECRET_ACCESS=true); use a \
         ClusterTriggerAuthentication, whose Secrets are read there, instead of a \
         TriggerAuthentication"
    )
}

/// Why a `boundServiceAccountToken` token could not be had. Never contains a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenProblem {
    /// The entry names no ServiceAccount.
    #[error("serviceAccountName is empty")]
    NoServiceAccountName,
    /// The ServiceAccount does not exist.
    #[error("ServiceAccount {account} not found")]
    NotFound {
        /// `namespace/name`.
        account: String,
    },
    /// The operator may not request tokens.
    #[error(
        "the operator may not request a token of ServiceAccount {account}: grant it create on serviceaccounts/token (config/rbac/operator.yaml)"
    )]
    Forbidden {
        /// `namespace/name`.
        account: String,
    },
    /// The API server refused the request.
    #[error("the token request for ServiceAccount {account} was refused: {message}")]
    Refused {
        /// `namespace/name`.
        account: String,
        /// The API server's message.
        message: String,
    },
    /// The request did not reach the API server or its answer was unreadable.
    #[error("the token request for ServiceAccount {account} failed: {message}")]
    Request {
        /// `namespace/name`.
        account: String,
        /// What failed.
        message: String,
    },
    /// The API server did not answer in time.
    #[error("the token request for ServiceAccount {account} got no answer within {waited:?}")]
    Timeout {
        /// `namespace/name`.
        account: String,
        /// How long it waited.
        waited: Duration,
    },
    /// The answer held no token.
    #[error("the API server returned no token for ServiceAccount {account}")]
    Empty {
        /// `namespace/name`.
        account: String,
    },
}

/// Why `hashiCorpVault` parameters could not be read. Never contains a token or a value read
/// from Vault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VaultProblem {
    /// `address` is not a URL.
    #[error("address \"{address}\" is not an http:// or https:// URL")]
    Address {
        /// As written.
        address: String,
    },
    /// `authentication` is neither `token` nor `kubernetes`.
    #[error("authentication \"{authentication}\" is not supported: use token or kubernetes")]
    Authentication {
        /// As written.
        authentication: String,
    },
    /// A field the authentication needs is empty.
    #[error("{0} is required")]
    Missing(&'static str),
    /// A `secrets` entry without `path` or `key`.
    #[error("secret for parameter \"{parameter}\" needs both path and key")]
    Incomplete {
        /// The entry's `parameter`.
        parameter: String,
    },
    /// A `secrets` entry with an unknown `type`.
    #[error(
        "secret for parameter \"{parameter}\": type \"{type_}\" is not supported: use secret, secretV2 or pki (or leave it unset)"
    )]
    UnknownType {
        /// The entry's `parameter`.
        parameter: String,
        /// As written.
        type_: String,
    },
    /// The service account token for the `kubernetes` login could not be had.
    #[error("the kubernetes login's token: {0}")]
    LoginToken(TokenProblem),
    /// The `credential.serviceAccount` file could not be read.
    #[error("cannot read the service account token file {path}")]
    TokenFile {
        /// The file.
        path: String,
    },
    /// The HTTP client could not be built.
    #[error("the HTTP client: {0}")]
    Client(String),
    /// A request did not get an answer.
    #[error("{path}: {reason}")]
    Request {
        /// The Vault path (after `/v1/`).
        path: String,
        /// What failed.
        reason: String,
    },
    /// Vault answered with an error status.
    #[error("{path}: HTTP {status}{}{}", if errors.is_empty() { "" } else { ": " }, errors)]
    Status {
        /// The Vault path.
        path: String,
        /// The status.
        status: u16,
        /// Vault's `errors`, joined.
        errors: String,
    },
    /// Vault's answer is not what the API documents.
    #[error("{path}: {reason}")]
    Answer {
        /// The Vault path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The secret has no such key.
    #[error("parameter \"{parameter}\": key \"{key}\" not found at {path}")]
    KeyNotFound {
        /// The entry's `parameter`.
        parameter: String,
        /// The path.
        path: String,
        /// The key.
        key: String,
    },
    /// The key's value is not text.
    #[error("parameter \"{parameter}\": the value of key \"{key}\" is not a string")]
    NotText {
        /// The entry's `parameter`.
        parameter: String,
        /// The key.
        key: String,
    },
}

/// Why a trigger's environment or authentication could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// `authenticationRef.kind` is neither TriggerAuthentication nor
    /// ClusterTriggerAuthentication.
    #[error(
        "{trigger}: authenticationRef.kind \"{kind}\" is unknown: use TriggerAuthentication or ClusterTriggerAuthentication"
    )]
    UnknownAuthKind {
        /// The trigger.
        trigger: TriggerId,
        /// The kind as written.
        kind: String,
    },
    /// `authenticationRef.name` is empty.
    #[error("{trigger}: authenticationRef.name is empty")]
    EmptyAuthName {
        /// The trigger.
        trigger: TriggerId,
    },
    /// The referenced (Cluster)TriggerAuthentication does not exist.
    #[error("{trigger}: authenticationRef: {auth} not found")]
    AuthNotFound {
        /// The trigger.
        trigger: TriggerId,
        /// The missing object.
        auth: AuthName,
    },
    /// Its spec does not deserialize.
    #[error("{trigger}: {auth}: invalid spec: {reason}")]
    AuthInvalid {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// The deserialization error.
        reason: String,
    },
    /// `podIdentity.provider` other than `none`: cloud pod identities are out of scope for now.
    #[error(
        "{trigger}: {auth}: podIdentity provider \"{provider}\" is not supported by keda-rs yet: cloud pod identities (azure-workload, gcp, aws, aws-eks) are out of scope for now; give the credentials through secretTargetRef, configMapTargetRef or env"
    )]
    PodIdentityUnsupported {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// The provider as written.
        provider: String,
    },
    /// A secret store keda-rs does not read yet.
    #[error("{trigger}: {auth}: spec.{field} is not supported by keda-rs yet")]
    SourceUnsupported {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// The spec field, e.g. `hashiCorpVault`.
        field: &'static str,
    },
    /// A namespaced TriggerAuthentication asks for the operator's identity: its own token or
    /// files, or a token of a ServiceAccount the administrator did not opt in
    /// ([`keda_api::identity`]). Checked before any request.
    #[error("{trigger}: {auth}: {refusal}")]
    IdentityRefused {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// The field and why.
        refusal: keda_api::identity::IdentityRefusal,
    },
    /// A `secretTargetRef` / `configMapTargetRef` entry could not be read.
    #[error("{trigger}: {auth}: parameter \"{parameter}\": {problem}")]
    AuthRef {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// The entry's `parameter`.
        parameter: String,
        /// What failed.
        problem: RefProblem,
    },
    /// A `boundServiceAccountToken` entry could not get its token.
    #[error("{trigger}: {auth}: boundServiceAccountToken parameter \"{parameter}\": {problem}")]
    BoundToken {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// The entry's `parameter`.
        parameter: String,
        /// What failed.
        problem: TokenProblem,
    },
    /// `hashiCorpVault` could not be read.
    #[error("{trigger}: {auth}: hashiCorpVault: {problem}")]
    Vault {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// What failed.
        problem: VaultProblem,
    },
    /// `filePath` on a namespaced TriggerAuthentication.
    #[error("{trigger}: {auth}: spec.filePath is only allowed on a ClusterTriggerAuthentication")]
    FilePathNotClusterScoped {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
    },
    /// `filePath` without a configured root.
    #[error(
        "{trigger}: {auth}: spec.filePath needs the operator flag --filepath-auth-root-path, which is not set"
    )]
    FilePathRootNotConfigured {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
    },
    /// A `filePath` that is absolute or leaves the root.
    #[error(
        "{trigger}: {auth}: spec.filePath \"{path}\" must be relative and must not contain \"..\""
    )]
    FilePathOutsideRoot {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// The path as written.
        path: String,
    },
    /// The `filePath` file could not be read.
    #[error("{trigger}: {auth}: spec.filePath: cannot read {}", path.display())]
    FileRead {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// The full path.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The `filePath` file is not a JSON object of strings. Neither the message nor a source
    /// quotes the file's content (it holds credentials): only where reading stopped.
    #[error(
        "{trigger}: {auth}: spec.filePath: {} is not a JSON object of parameter names to string values (line {line}, column {column})",
        path.display()
    )]
    FileParse {
        /// The trigger.
        trigger: TriggerId,
        /// The object.
        auth: AuthName,
        /// The full path.
        path: PathBuf,
        /// Line where the JSON reader stopped.
        line: usize,
        /// Column where the JSON reader stopped.
        column: usize,
    },
    /// A variable of the target's container could not be read.
    #[error("{trigger}: {used_by}: {problem}")]
    Env {
        /// The trigger.
        trigger: TriggerId,
        /// Who asked for it.
        used_by: EnvUse,
        /// What failed.
        problem: EnvProblem,
    },
    /// The caches did not finish their first list in time.
    #[error(
        "the caches of {caches} were not ready after {waited:?}: check the operator's access to the API server"
    )]
    CachesNotReady {
        /// Which caches.
        caches: String,
        /// How long the resolution waited.
        waited: Duration,
    },
    /// The resolver was shut down.
    #[error("the resolver has been shut down")]
    Shutdown,
}

impl ResolveError {
    /// A short, stable label for metrics and condition reasons.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::UnknownAuthKind { .. } | Self::EmptyAuthName { .. } => {
                "invalid-authentication-ref"
            }
            Self::AuthNotFound { .. } => "authentication-not-found",
            Self::AuthInvalid { .. } => "authentication-invalid",
            Self::PodIdentityUnsupported { .. } | Self::SourceUnsupported { .. } => {
                "authentication-unsupported"
            }
            Self::AuthRef { .. } => "authentication-reference",
            Self::IdentityRefused { .. } => "authentication-identity-refused",
            Self::BoundToken { .. } => "authentication-token",
            Self::Vault { .. } => "authentication-vault",
            Self::FilePathNotClusterScoped { .. }
            | Self::FilePathRootNotConfigured { .. }
            | Self::FilePathOutsideRoot { .. }
            | Self::FileRead { .. }
            | Self::FileParse { .. } => "authentication-file",
            Self::Env { .. } => "environment",
            Self::CachesNotReady { .. } => "caches-not-ready",
            Self::Shutdown => "shutdown",
        }
    }
}
