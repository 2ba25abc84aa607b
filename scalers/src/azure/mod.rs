//! What the azure-queue and azure-blob scalers share: their storage-account parameters
//! (`connection`, `accountName`, `endpointSuffix`, `cloud`), the storage connection string as
//! Microsoft's SDKs read it (KEDA builds its clients with `NewClientFromConnectionString`), and a
//! small pooled Azure Storage client of our own ([`client`]) signing requests with the account
//! key ([`shared_key`]) over the shared reqwest stack.
//!
//! Only connection strings are supported as credentials (with `AccountKey`, or with
//! `SharedAccessSignature`); KEDA's other way, `podIdentity` provider `azure-workload`, is
//! refused by the operator before a scaler is built, with a message saying it is not supported
//! yet. `accountName`, `endpointSuffix` and `cloud` only choose the endpoint of workload
//! identity in KEDA; they are parsed and checked as KEDA does so that the same YAML gives the
//! same errors.

pub mod aad;
pub mod client;
pub mod sas;
pub mod shared_key;

use crate::error::{MetadataError, Source};
use crate::metadata::{MetadataParser, Param};
use crate::secret::Secret;

pub use client::{Credential, StorageClient, StorageClientKey, StorageError};

/// Azurite's (and the Storage Emulator's) account, for `UseDevelopmentStorage=true`.
pub const DEV_ACCOUNT: &str = "devstoreaccount1";
/// The well-known key of [`DEV_ACCOUNT`], published by Microsoft.
pub const DEV_ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// `connection` of azure-queue: TriggerAuthentication, then metadata, then `connectionFromEnv`
/// (KEDA's `order=authParams;triggerMetadata;resolvedEnv`).
pub const CONNECTION_QUEUE: Param = Param::optional("connection")
    .order(&[Source::Auth, Source::Metadata, Source::Env])
    .secret();
/// `connection` of azure-blob: TriggerAuthentication, then `connectionFromEnv`, then metadata
/// (KEDA's `order=authParams;resolvedEnv;triggerMetadata`).
pub const CONNECTION_BLOB: Param = Param::optional("connection")
    .order(&[Source::Auth, Source::Env, Source::Metadata])
    .secret();
/// `accountName`: used by KEDA with workload identity only.
pub const ACCOUNT_NAME: Param = Param::optional("accountName");
/// `endpointSuffix`: required with `cloud: Private`, ignored otherwise (as in KEDA).
pub const ENDPOINT_SUFFIX: Param = Param::optional("endpointSuffix");
/// `cloud`: `AzurePublicCloud` (default), `AzureUSGovernmentCloud`, `AzureChinaCloud`,
/// `AzureGermanCloud`, or `Private` with `endpointSuffix`.
pub const CLOUD: Param = Param::optional("cloud");

/// The Azure Storage services the scalers use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    /// Blob storage.
    Blob,
    /// Queue storage.
    Queue,
}

impl Service {
    /// `blob`, `queue`: the label of the service's host (`<account>.queue.core.windows.net`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Blob => "blob",
            Self::Queue => "queue",
        }
    }

    /// The connection string key of an explicit endpoint: `BlobEndpoint`, `QueueEndpoint`.
    pub fn endpoint_key(self) -> &'static str {
        match self {
            Self::Blob => "BlobEndpoint",
            Self::Queue => "QueueEndpoint",
        }
    }

    /// Azurite's port for the service.
    fn dev_port(self) -> u16 {
        match self {
            Self::Blob => 10000,
            Self::Queue => 10001,
        }
    }
}

/// The storage-account settings of one trigger.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StorageSettings {
    /// The service root, ending in `/` (`https://acct.queue.core.windows.net/`,
    /// `http://127.0.0.1:10001/devstoreaccount1/`).
    pub endpoint: url::Url,
    /// How requests are authorized.
    pub credential: Credential,
    /// `accountName`, as given.
    pub account_name: Option<String>,
    /// KEDA's endpoint suffix for workload identity (`queue.core.windows.net`), from `cloud`
    /// and `endpointSuffix`.
    pub endpoint_suffix: String,
}

impl StorageSettings {
    /// Parses `connection` (looked up as `connection_param` declares), `accountName`,
    /// `endpointSuffix` and `cloud` for `service`.
    ///
    /// # Errors
    /// No connection string, one that cannot be used (the message names what is wrong in it,
    /// never its secrets), an unknown `cloud`, or `cloud: Private` without `endpointSuffix`.
    pub fn parse(
        p: &MetadataParser<'_>,
        service: Service,
        connection_param: &Param,
    ) -> Result<Self, MetadataError> {
        let endpoint_suffix = endpoint_suffix(p, service)?;
        let account_name: Option<String> = p.get_opt(&ACCOUNT_NAME)?;
        let Some(connection) = p.get_opt::<Secret>(connection_param)? else {
            return Err(p.rule(
                "missing required parameter \"connection\": give the storage account's \
                 connection string as the TriggerAuthentication parameter \"connection\", or name \
                 a variable of the target's container holding it with \"connectionFromEnv\" \
                 (podIdentity azure-workload is not supported by keda-rs yet)",
            ));
        };
        let (endpoint, credential) = parse_connection_string(connection.expose(), service)
            .map_err(|why| {
                p.rule(format!(
                    "parameter \"connection\": the storage connection string cannot be used: {why}"
                ))
            })?;
        Ok(Self {
            endpoint,
            credential,
            account_name,
            endpoint_suffix,
        })
    }
}

/// KEDA's `ParseAzureStorageEndpointSuffix`: without `cloud` the public cloud's
/// `<service>.core.windows.net`; `cloud: Private` needs `endpointSuffix`; any other `cloud`
/// must name a known Azure cloud (case-insensitive).
fn endpoint_suffix(p: &MetadataParser<'_>, service: Service) -> Result<String, MetadataError> {
    let Some(cloud) = p.find(&CLOUD)? else {
        return Ok(format!("{}.core.windows.net", service.name()));
    };
    if cloud.value.eq_ignore_ascii_case("Private") {
        return match p.get_opt::<String>(&ENDPOINT_SUFFIX)? {
            Some(suffix) => Ok(suffix),
            None => Err(p.rule("endpointSuffix must be provided for Private cloud type")),
        };
    }
    let storage_suffix = match cloud.value.to_ascii_uppercase().as_str() {
        "AZURECLOUD" | "AZUREPUBLICCLOUD" => "core.windows.net",
        "AZUREUSGOVERNMENT" | "AZUREUSGOVERNMENTCLOUD" => "core.usgovcloudapi.net",
        "AZURECHINACLOUD" => "core.chinacloudapi.cn",
        "AZUREGERMANCLOUD" => "core.cloudapi.de",
        _ => {
            return Err(p.invalid(
                &CLOUD,
                cloud,
                "a known cloud: AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud, \
                 AzureGermanCloud or Private (AzureStackCloud is not supported by keda-rs)",
            ));
        }
    };
    Ok(format!("{}.{storage_suffix}", service.name()))
}

/// Reads a storage connection string as Microsoft's SDKs do (`DefaultEndpointsProtocol`
/// default `https`, `EndpointSuffix` default `core.windows.net`, `BlobEndpoint` /
/// `QueueEndpoint` overriding `<protocol>://<AccountName>.<service>.<suffix>`; `AccountName` +
/// `AccountKey` sign with Shared Key, else `SharedAccessSignature` is appended to every request).
/// `UseDevelopmentStorage=true` is Azurite's account on 127.0.0.1 (blob 10000, queue 10001).
///
/// # Errors
/// What is wrong, naming keys of the string but never a value.
pub fn parse_connection_string(
    raw: &str,
    service: Service,
) -> Result<(url::Url, Credential), String> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for part in raw.trim().split(';').map(str::trim) {
        if part.is_empty() {
            continue;
        }
        let Some((key, value)) = part.split_once('=') else {
            return Err("it must be a list of key=value settings separated by ';'".into());
        };
        pairs.push((key.trim(), value.trim()));
    }
    let get = |key: &str| {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| *v)
            .filter(|v| !v.is_empty())
    };
    if get("UseDevelopmentStorage").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        if get("DevelopmentStorageProxyUri").is_some() {
            return Err("DevelopmentStorageProxyUri is not supported by keda-rs".into());
        }
        let endpoint = url::Url::parse(&format!(
            "http://127.0.0.1:{}/{DEV_ACCOUNT}/",
            service.dev_port()
        ))
        .map_err(|e| e.to_string())?;
        let key = shared_key::decode_key(DEV_ACCOUNT_KEY).unwrap_or_default();
        return Ok((
            endpoint,
            Credential::SharedKey {
                account: DEV_ACCOUNT.into(),
                key: Secret::new(DEV_ACCOUNT_KEY),
                decoded: key,
            },
        ));
    }
    let account = get("AccountName");
    let endpoint = match (get(service.endpoint_key()), account) {
        (Some(endpoint), _) => endpoint.to_string(),
        (None, Some(account)) => format!(
            "{}://{account}.{}.{}",
            get("DefaultEndpointsProtocol").unwrap_or("https"),
            service.name(),
            get("EndpointSuffix").unwrap_or("core.windows.net")
        ),
        (None, None) => {
            return Err(format!(
                "it needs either AccountName or {}",
                service.endpoint_key()
            ));
        }
    };
    let mut endpoint = url::Url::parse(&endpoint)
        .map_err(|e| format!("the {} endpoint is not a valid URL ({e})", service.name()))?;
    if !matches!(endpoint.scheme(), "http" | "https") || endpoint.host_str().is_none() {
        return Err(format!(
            "the {} endpoint must be an http:// or https:// URL with a host",
            service.name()
        ));
    }
    endpoint.set_query(None);
    endpoint.set_fragment(None);
    if !endpoint.path().ends_with('/') {
        let path = format!("{}/", endpoint.path());
        endpoint.set_path(&path);
    }
    let credential = match (account, get("AccountKey"), get("SharedAccessSignature")) {
        (Some(account), Some(key), _) => {
            let decoded = shared_key::decode_key(key)
                .ok_or_else(|| "AccountKey is not a base64 account key".to_string())?;
            Credential::SharedKey {
                account: account.to_string(),
                key: Secret::new(key),
                decoded,
            }
        }
        (_, _, Some(sas)) => Credential::Sas(Secret::new(sas.trim_start_matches('?'))),
        _ => {
            return Err(
                "it needs either AccountName and AccountKey, or SharedAccessSignature".into(),
            );
        }
    };
    Ok((endpoint, credential))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn settings(
        service: Service,
        metadata: &[(&str, &str)],
        env: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> Result<StorageSettings, MetadataError> {
        let param = match service {
            Service::Blob => CONNECTION_BLOB,
            Service::Queue => CONNECTION_QUEUE,
        };
        test_context("azure-queue", 0, metadata, env, auth)
            .parse(|p| StorageSettings::parse(p, service, &param))
    }

    const KEY: &str = "c2VjcmV0LWtleS1ieXRlcw==";

    #[test]
    fn connection_strings_give_the_endpoint_and_credential_as_the_sdks_read_them() {
        // (connection string, service, endpoint)
        let rows = [
            (
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0LWtleS1ieXRlcw==;EndpointSuffix=core.windows.net",
                Service::Queue,
                "https://acct.queue.core.windows.net/",
            ),
            // defaults: https and core.windows.net
            (
                "AccountName=acct;AccountKey=c2VjcmV0LWtleS1ieXRlcw==",
                Service::Blob,
                "https://acct.blob.core.windows.net/",
            ),
            // an explicit endpoint wins; a trailing ';' and spaces are fine
            (
                "AccountName=devstoreaccount1; AccountKey=c2VjcmV0LWtleS1ieXRlcw==; QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
                Service::Queue,
                "http://127.0.0.1:10001/devstoreaccount1/",
            ),
            (
                "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=c2VjcmV0LWtleS1ieXRlcw==;EndpointSuffix=core.chinacloudapi.cn",
                Service::Blob,
                "http://a.blob.core.chinacloudapi.cn/",
            ),
            (
                "UseDevelopmentStorage=true",
                Service::Blob,
                "http://127.0.0.1:10000/devstoreaccount1/",
            ),
            (
                "UseDevelopmentStorage=true",
                Service::Queue,
                "http://127.0.0.1:10001/devstoreaccount1/",
            ),
        ];
        for (raw, service, endpoint) in rows {
            let (url, credential) = parse_connection_string(raw, service).unwrap();
            assert_eq!(url.as_str(), endpoint, "{raw}");
            assert!(matches!(credential, Credential::SharedKey { .. }), "{raw}");
        }
        let (url, credential) = parse_connection_string(
            "BlobEndpoint=https://acct.blob.core.windows.net;SharedAccessSignature=sv=2021-12-02&sig=abc%2B",
            Service::Blob,
        )
        .unwrap();
        assert_eq!(url.as_str(), "https://acct.blob.core.windows.net/");
        assert_eq!(
            credential,
            Credential::Sas(Secret::new("sv=2021-12-02&sig=abc%2B"))
        );
    }

    #[test]
    fn unusable_connection_strings_say_why_without_their_secrets() {
        let rows = [
            (
                "just-a-key",
                "it must be a list of key=value settings separated by ';'",
            ),
            (
                "AccountKey=c2VjcmV0LWtleS1ieXRlcw==",
                "it needs either AccountName or QueueEndpoint",
            ),
            (
                "AccountName=acct",
                "it needs either AccountName and AccountKey, or SharedAccessSignature",
            ),
            (
                "AccountName=acct;AccountKey=not base64 s3cret!",
                "AccountKey is not a base64 account key",
            ),
            (
                "AccountName=acct;AccountKey=c2VjcmV0LWtleS1ieXRlcw==;QueueEndpoint=ftp://x",
                "the queue endpoint must be an http:// or https:// URL with a host",
            ),
        ];
        for (raw, why) in rows {
            let err = settings(Service::Queue, &[], &[], &[("connection", raw)])
                .expect_err(raw)
                .to_string();
            assert_eq!(
                err,
                format!(
                    "trigger 0 (azure-queue): parameter \"connection\": the storage connection string cannot be used: {why}"
                )
            );
            assert!(!err.contains("s3cret") && !err.contains(KEY), "{err}");
        }
        let err = settings(Service::Queue, &[], &[], &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("trigger 0 (azure-queue): missing required parameter \"connection\""),
            "{err}"
        );
    }

    #[test]
    fn the_connection_is_looked_up_in_keda_order_for_each_type() {
        let conn = |account: &str| format!("AccountName={account};AccountKey={KEY}");
        let (auth, meta, env) = (conn("auth"), conn("meta"), conn("env"));
        let account = |s: StorageSettings| match s.credential {
            Credential::SharedKey { account, .. } => account,
            Credential::Sas(_) => String::new(),
        };
        let metadata = [("connection", meta.as_str()), ("connectionFromEnv", "CONN")];
        let environment = [("CONN", env.as_str())];
        // Queue: auth, metadata, env. Blob: auth, env, metadata.
        let all = [("connection", auth.as_str())];
        assert_eq!(
            account(settings(Service::Queue, &metadata, &environment, &all).unwrap()),
            "auth"
        );
        assert_eq!(
            account(settings(Service::Blob, &metadata, &environment, &all).unwrap()),
            "auth"
        );
        assert_eq!(
            account(settings(Service::Queue, &metadata, &environment, &[]).unwrap()),
            "meta"
        );
        assert_eq!(
            account(settings(Service::Blob, &metadata, &environment, &[]).unwrap()),
            "env"
        );
    }

    #[test]
    fn cloud_and_endpoint_suffix_follow_keda() {
        let auth = [("connection", "UseDevelopmentStorage=true")];
        let suffix = |metadata: &[(&str, &str)]| {
            settings(Service::Queue, metadata, &[], &auth).map(|s| s.endpoint_suffix)
        };
        assert_eq!(suffix(&[]).unwrap(), "queue.core.windows.net");
        // endpointSuffix alone is ignored, as in KEDA
        assert_eq!(
            suffix(&[("endpointSuffix", "x.y")]).unwrap(),
            "queue.core.windows.net"
        );
        assert_eq!(
            suffix(&[("cloud", "azureChinaCloud")]).unwrap(),
            "queue.core.chinacloudapi.cn"
        );
        assert_eq!(
            suffix(&[("cloud", "Private"), ("endpointSuffix", "queue.local")]).unwrap(),
            "queue.local"
        );
        assert_eq!(
            suffix(&[("cloud", "private")]).unwrap_err().to_string(),
            "trigger 0 (azure-queue): endpointSuffix must be provided for Private cloud type"
        );
        assert!(
            suffix(&[("cloud", "Mars")])
                .unwrap_err()
                .to_string()
                .starts_with(
                    "trigger 0 (azure-queue): parameter \"cloud\": \"Mars\" is not a known cloud"
                ),
        );
    }
}
