//! `TriggerAuthentication` (namespaced, short names `ta`, `triggerauth`) and
//! `ClusterTriggerAuthentication` (cluster-scoped, `cta`, `clustertriggerauth`): where a trigger's
//! secret parameters come from.
//!
//! Both kinds share one spec, [`TriggerAuthenticationSpec`], typed after KEDA's
//! `triggerauthentication_types.go`. `ClusterTriggerAuthentication` wraps it in
//! [`ClusterTriggerAuthenticationSpec`], which dereferences to the shared spec and is identical
//! on the wire.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `podIdentity.provider: none`.
pub const POD_IDENTITY_NONE: &str = "none";
/// `podIdentity.provider: azure-workload`.
pub const POD_IDENTITY_AZURE_WORKLOAD: &str = "azure-workload";
/// `podIdentity.provider: gcp`.
pub const POD_IDENTITY_GCP: &str = "gcp";
/// `podIdentity.provider: aws`.
pub const POD_IDENTITY_AWS: &str = "aws";
/// `podIdentity.provider: aws-eks` (deprecated by KEDA).
pub const POD_IDENTITY_AWS_EKS: &str = "aws-eks";
/// `podIdentity.identityOwner: keda`.
pub const IDENTITY_OWNER_KEDA: &str = "keda";
/// `podIdentity.identityOwner: workload`.
pub const IDENTITY_OWNER_WORKLOAD: &str = "workload";
/// The only `oauth2.type` KEDA accepts.
pub const OAUTH2_CLIENT_CREDENTIALS: &str = "clientCredentials";

/// Spec of a [`TriggerAuthentication`]; also the content of a [`ClusterTriggerAuthentication`].
#[derive(CustomResource, JsonSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "keda.sh",
    version = "v1alpha1",
    kind = "TriggerAuthentication",
    plural = "triggerauthentications",
    namespaced,
    shortname = "ta",
    shortname = "triggerauth",
    status = "TriggerAuthenticationStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "TriggerAuthentication tells triggers in its namespace where to find credentials",
    printcolumn = r#"{"name":"PodIdentity","type":"string","jsonPath":".spec.podIdentity.provider"}"#,
    printcolumn = r#"{"name":"Secret","type":"string","jsonPath":".spec.secretTargetRef[*].name"}"#,
    printcolumn = r#"{"name":"Env","type":"string","jsonPath":".spec.env[*].name"}"#,
    printcolumn = r#"{"name":"VaultAddress","type":"string","jsonPath":".spec.hashiCorpVault.address"}"#,
    printcolumn = r#"{"name":"ScaledObjects","type":"string","jsonPath":".status.scaledobjects","priority":1}"#,
    printcolumn = r#"{"name":"ScaledJobs","type":"string","jsonPath":".status.scaledjobs","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TriggerAuthenticationSpec {
    /// Platform identity of the operator or the workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_identity: Option<AuthPodIdentity>,
    /// Parameters read from Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_target_ref: Option<Vec<AuthTargetRef>>,
    /// Parameters read from ConfigMaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_target_ref: Option<Vec<AuthTargetRef>>,
    /// Parameters read from the scale target's container environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<AuthEnvironment>>,
    /// Parameters read from HashiCorp Vault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashi_corp_vault: Option<HashiCorpVault>,
    /// Parameters read from Azure Key Vault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure_key_vault: Option<AzureKeyVault>,
    /// Parameters read from GCP Secret Manager.
    #[serde(
        default,
        rename = "gcpSecretManager",
        skip_serializing_if = "Option::is_none"
    )]
    pub gcp_secret_manager: Option<GcpSecretManager>,
    /// Parameters read from AWS Secrets Manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_secret_manager: Option<AwsSecretManager>,
    /// Parameters filled with bound service account tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_service_account_token: Option<Vec<BoundServiceAccountToken>>,
    /// Path, relative to the operator's `--filepath-auth-root-path`, of a JSON file holding a
    /// map of parameter name to value (ClusterTriggerAuthentication only). When set, the file's
    /// parameters replace every other source, as in KEDA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
    /// An OAuth2 client-credentials token.
    #[serde(default, rename = "oauth2", skip_serializing_if = "Option::is_none")]
    pub oauth2: Option<OAuth2>,
}

/// `spec.podIdentity`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuthPodIdentity {
    /// `none`, `azure-workload`, `gcp`, `aws` or `aws-eks`.
    #[schemars(extend("enum" = ["azure-workload", "gcp", "aws", "aws-eks", "none"]))]
    pub provider: String,
    /// Azure: client id of the identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_id: Option<String>,
    /// Azure: tenant overriding the default; requires `identityId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_tenant_id: Option<String>,
    /// Azure: authority host overriding the default; requires `identityTenantId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_authority_host: Option<String>,
    /// AWS: role to assume; exclusive with `identityOwner: workload`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
    /// AWS: external id used when assuming `roleArn`.
    #[serde(
        default,
        rename = "externalID",
        skip_serializing_if = "Option::is_none"
    )]
    pub external_id: Option<String>,
    /// AWS: whose identity to use, `keda` or `workload`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["keda", "workload"]))]
    pub identity_owner: Option<String>,
}

/// One entry of `secretTargetRef` or `configMapTargetRef`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct AuthTargetRef {
    /// The trigger parameter to fill.
    pub parameter: String,
    /// Secret or ConfigMap name.
    pub name: String,
    /// Key inside it.
    pub key: String,
}

/// One entry of `env`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuthEnvironment {
    /// The trigger parameter to fill.
    pub parameter: String,
    /// Environment variable name.
    pub name: String,
    /// Container to read from (default: `envSourceContainerName` or the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
}

/// `spec.hashiCorpVault`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HashiCorpVault {
    /// Vault address.
    pub address: String,
    /// `token` or `kubernetes`.
    #[schemars(extend("enum" = ["token", "kubernetes"]))]
    pub authentication: String,
    /// Secrets to read (at least one).
    #[schemars(length(min = 1))]
    pub secrets: Vec<VaultSecret>,
    /// Vault namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Credentials for the chosen authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<VaultCredential>,
    /// Role for `kubernetes` authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Auth mount path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount: Option<String>,
}

/// `hashiCorpVault.credential`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VaultCredential {
    /// Vault token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Path of a service account token file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// Service account whose bound token is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// One entry of `hashiCorpVault.secrets`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VaultSecret {
    /// The trigger parameter to fill.
    pub parameter: String,
    /// Secret path.
    pub path: String,
    /// Key in the secret.
    pub key: String,
    /// Secret engine: empty (generic), `secretV2`, `secret` or `pki`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["", "secretV2", "secret", "pki"]))]
    pub type_: Option<String>,
    /// Certificate request for `pki`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pki_data: Option<VaultPkiData>,
}

/// `hashiCorpVault.secrets[].pkiData`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VaultPkiData {
    /// Common name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_name: Option<String>,
    /// Subject alternative names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt_names: Option<String>,
    /// IP SANs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_sans: Option<String>,
    /// URI SANs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri_sans: Option<String>,
    /// Other SANs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_sans: Option<String>,
    /// Certificate TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// Output format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// `spec.azureKeyVault`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AzureKeyVault {
    /// Vault URI.
    pub vault_uri: String,
    /// Secrets to read (at least one).
    #[schemars(length(min = 1))]
    pub secrets: Vec<AzureKeyVaultSecret>,
    /// Service principal credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<AzureKeyVaultCredentials>,
    /// Identity used instead of credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_identity: Option<AuthPodIdentity>,
    /// Non-public Azure cloud.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud: Option<AzureKeyVaultCloudInfo>,
}

/// `azureKeyVault.credentials`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AzureKeyVaultCredentials {
    /// Application (client) id.
    pub client_id: String,
    /// Tenant id.
    pub tenant_id: String,
    /// Client secret reference.
    pub client_secret: ValueFromSecretHolder,
}

/// `{valueFrom: {secretKeyRef: {name, key}}}`, KEDA's way to point at a Secret key.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ValueFromSecretHolder {
    /// The source.
    pub value_from: ValueFromSecret,
}

/// `valueFrom`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ValueFromSecret {
    /// The Secret key.
    pub secret_key_ref: SecretKeyRef,
}

/// `secretKeyRef`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct SecretKeyRef {
    /// Secret name.
    pub name: String,
    /// Key in the Secret.
    pub key: String,
}

/// One entry of `azureKeyVault.secrets`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct AzureKeyVaultSecret {
    /// The trigger parameter to fill.
    pub parameter: String,
    /// Secret name in the vault.
    pub name: String,
    /// Secret version (default latest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `azureKeyVault.cloud`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AzureKeyVaultCloudInfo {
    /// Cloud name, or `Private` with the two URLs below.
    #[serde(rename = "type")]
    pub type_: String,
    /// Key Vault resource URL (private clouds).
    #[serde(
        default,
        rename = "keyVaultResourceURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub key_vault_resource_url: Option<String>,
    /// Active Directory endpoint (private clouds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_directory_endpoint: Option<String>,
}

/// `spec.gcpSecretManager`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GcpSecretManager {
    /// Secrets to read (at least one).
    #[schemars(length(min = 1))]
    pub secrets: Vec<GcpSecretManagerSecret>,
    /// Service account key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<GcpCredentials>,
    /// Identity used instead of credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_identity: Option<AuthPodIdentity>,
}

/// `gcpSecretManager.credentials`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GcpCredentials {
    /// Service account key reference.
    pub client_secret: ValueFromSecretHolder,
}

/// One entry of `gcpSecretManager.secrets`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct GcpSecretManagerSecret {
    /// The trigger parameter to fill.
    pub parameter: String,
    /// Secret id.
    pub id: String,
    /// Secret version (default `latest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `spec.awsSecretManager`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AwsSecretManager {
    /// Secrets to read (at least one).
    #[schemars(length(min = 1))]
    pub secrets: Vec<AwsSecretManagerSecret>,
    /// Static credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<AwsSecretManagerCredentials>,
    /// Identity used instead of credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_identity: Option<AuthPodIdentity>,
    /// AWS region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// `awsSecretManager.credentials`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AwsSecretManagerCredentials {
    /// Access key id reference.
    pub access_key: ValueFromSecretHolder,
    /// Secret access key reference.
    pub access_secret_key: ValueFromSecretHolder,
    /// Session token reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<ValueFromSecretHolder>,
}

/// One entry of `awsSecretManager.secrets`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AwsSecretManagerSecret {
    /// The trigger parameter to fill.
    pub parameter: String,
    /// Secret name.
    pub name: String,
    /// Version id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    /// Version stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_stage: Option<String>,
    /// Key inside a JSON secret value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<String>,
}

/// One entry of `boundServiceAccountToken`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BoundServiceAccountToken {
    /// The trigger parameter to fill.
    pub parameter: String,
    /// Service account whose token is requested.
    pub service_account_name: String,
}

/// `spec.oauth2`: client-credentials flow producing `oauthTokenURI`, `clientID`, `clientSecret`, ...
///
/// The schema is KEDA's: `type`, `clientId` and `tokenUrl` required, `type` defaulted to
/// `clientCredentials` by the API server (`crate::crd` marks the three required). Reading stays lenient (a missing value reads as empty,
/// or as `clientCredentials` for `type`) so that validation, not deserialization, names what is
/// missing.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2 {
    /// Grant type; only `clientCredentials`, the default. See [`OAuth2::grant_type`].
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = OAUTH2_CLIENT_CREDENTIALS, "enum" = [OAUTH2_CLIENT_CREDENTIALS]))]
    pub type_: Option<String>,
    /// Client id.
    #[serde(default)]
    pub client_id: String,
    /// Client secret reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<ValueFromSecretHolder>,
    /// Token endpoint, http or https.
    #[serde(default)]
    pub token_url: String,
    /// Requested scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// Extra form parameters of the token request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url_params: Option<BTreeMap<String, String>>,
}

impl OAuth2 {
    /// `type`, or `clientCredentials` when it is not set (KEDA's CRD default).
    pub fn grant_type(&self) -> &str {
        self.type_.as_deref().unwrap_or(OAUTH2_CLIENT_CREDENTIALS)
    }
}

/// Observed state of a (Cluster)TriggerAuthentication.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct TriggerAuthenticationStatus {
    /// Comma-separated ScaledObjects using it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaledobjects: Option<String>,
    /// Comma-separated ScaledJobs using it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaledjobs: Option<String>,
}

/// Spec of a [`ClusterTriggerAuthentication`]: the same fields as [`TriggerAuthenticationSpec`],
/// identical on the wire; dereferences to it.
#[derive(CustomResource, JsonSchema, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "keda.sh",
    version = "v1alpha1",
    kind = "ClusterTriggerAuthentication",
    plural = "clustertriggerauthentications",
    shortname = "cta",
    shortname = "clustertriggerauth",
    status = "TriggerAuthenticationStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ClusterTriggerAuthentication tells triggers in any namespace where to find credentials",
    printcolumn = r#"{"name":"PodIdentity","type":"string","jsonPath":".spec.podIdentity.provider"}"#,
    printcolumn = r#"{"name":"Secret","type":"string","jsonPath":".spec.secretTargetRef[*].name"}"#,
    printcolumn = r#"{"name":"Env","type":"string","jsonPath":".spec.env[*].name"}"#,
    printcolumn = r#"{"name":"FilePath","type":"string","jsonPath":".spec.filePath"}"#,
    printcolumn = r#"{"name":"VaultAddress","type":"string","jsonPath":".spec.hashiCorpVault.address"}"#,
    printcolumn = r#"{"name":"ScaledObjects","type":"string","jsonPath":".status.scaledobjects","priority":1}"#,
    printcolumn = r#"{"name":"ScaledJobs","type":"string","jsonPath":".status.scaledjobs","priority":1}"#
)]
pub struct ClusterTriggerAuthenticationSpec {
    /// The shared spec.
    #[serde(flatten)]
    pub spec: TriggerAuthenticationSpec,
}

impl Deref for ClusterTriggerAuthenticationSpec {
    type Target = TriggerAuthenticationSpec;

    fn deref(&self) -> &TriggerAuthenticationSpec {
        &self.spec
    }
}

impl DerefMut for ClusterTriggerAuthenticationSpec {
    fn deref_mut(&mut self) -> &mut TriggerAuthenticationSpec {
        &mut self.spec
    }
}

impl From<TriggerAuthenticationSpec> for ClusterTriggerAuthenticationSpec {
    fn from(spec: TriggerAuthenticationSpec) -> Self {
        Self { spec }
    }
}

impl AuthPodIdentity {
    /// Whether `identityOwner` is `workload`.
    pub fn is_workload_identity_owner(&self) -> bool {
        self.identity_owner.as_deref() == Some(IDENTITY_OWNER_WORKLOAD)
    }
}
