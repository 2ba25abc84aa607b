//! The `rabbitmq` trigger's parameters, parsed and validated with KEDA's rules
//! (`pkg/scalers/rabbitmq_scaler.go`: `rabbitMQMetadata.Validate` and `validateTrigger`).

use std::time::Duration;

use crate::context::ScalerContext;
use crate::error::ScalerError;
use crate::metadata::{
    AUTH, AUTH_ENV, MAX_TIMEOUT_MS, METADATA_AUTH, METADATA_AUTH_ENV, MetadataParser, Param,
    ParamValue,
};
use crate::metric::MetricTargetType;
use crate::secret::Secret;
use crate::tls::TlsSettings;

use super::url::query_escape;
use crate::oauth2::ClientCredentials;

pub(super) const HOST: Param = Param::optional("host").order(METADATA_AUTH_ENV).secret();
pub(super) const QUEUE_NAME: Param = Param::required("queueName");
pub(super) const MODE: Param = Param::optional("mode");
pub(super) const VALUE: Param = Param::optional("value");
pub(super) const QUEUE_LENGTH: Param = Param::optional("queueLength");
pub(super) const ACTIVATION_VALUE: Param = Param::optional("activationValue").default("0");
pub(super) const PROTOCOL: Param = Param::optional("protocol")
    .order(METADATA_AUTH)
    .default("auto")
    .allowed(&["auto", "amqp", "http"]);
pub(super) const VHOST_NAME: Param = Param::optional("vhostName").order(METADATA_AUTH);
pub(super) const USE_REGEX: Param = Param::optional("useRegex").default("false");
pub(super) const EXCLUDE_UNACKNOWLEDGED: Param =
    Param::optional("excludeUnacknowledged").default("false");
pub(super) const PAGE_SIZE: Param = Param::optional("pageSize").default("100");
pub(super) const OPERATION: Param = Param::optional("operation")
    .default("sum")
    .allowed(&["sum", "avg", "max"]);
/// A Go duration (`5s`) or a number of milliseconds (`1500`), at most an hour.
pub(super) const TIMEOUT: Param = Param::optional("timeout").range(0.0, MAX_TIMEOUT_MS);

/// KEDA's reading of a `time.Duration` parameter (`typed_config.go`): Go's `ParseDuration`
/// first (`5s`, `1m30s`, `500ms`), else a whole number of milliseconds; negative is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KedaDuration(pub Duration);

impl KedaDuration {
    /// `None` when `raw` is neither a Go duration nor whole milliseconds, or is negative.
    pub(crate) fn parse(raw: &str) -> Option<Self> {
        if let Ok(ms) = raw.parse::<i64>() {
            return u64::try_from(ms)
                .ok()
                .map(|ms| Self(Duration::from_millis(ms)));
        }
        // Go accepts a leading sign; a negative duration is an error in KEDA.
        let unsigned = raw.strip_prefix('+').unwrap_or(raw);
        // A bare number that is not whole milliseconds ("1.5") has no unit: Go refuses it.
        if unsigned.starts_with('-') || unsigned.parse::<f64>().is_ok() {
            return None;
        }
        crate::scalers::http::GoDuration::parse(unsigned).map(|d| Self(d.0))
    }
}

impl ParamValue for KedaDuration {
    const EXPECTED: &'static str =
        "a duration such as 5s or 1m30s, or a whole number of milliseconds";
    fn parse_param(raw: &str, _: &Param) -> Option<Self> {
        Self::parse(raw)
    }
    /// Milliseconds, for the parameter's range.
    fn as_number(&self) -> Option<f64> {
        Some(self.0.as_secs_f64() * 1000.0)
    }
    fn describe_bound(bound: f64) -> String {
        crate::scalers::http::format_seconds(bound / 1000.0)
    }
}
pub(super) const USERNAME: Param = Param::optional("username").order(AUTH_ENV);
pub(super) const PASSWORD: Param = Param::optional("password").order(AUTH_ENV).secret();
pub(super) const TLS: Param = Param::optional("tls")
    .order(AUTH)
    .default("disable")
    .allowed(&["enable", "disable"]);
pub(super) const CA: Param = Param::optional("ca").order(AUTH).secret();
pub(super) const CERT: Param = Param::optional("cert").order(AUTH).secret();
pub(super) const KEY: Param = Param::optional("key").order(AUTH).secret();
pub(super) const KEY_PASSWORD: Param = Param::optional("keyPassword").order(AUTH).secret();
pub(super) const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
pub(super) const WORKLOAD_IDENTITY_RESOURCE: Param =
    Param::optional("workloadIdentityResource").order(AUTH);
pub(super) const OAUTH_TOKEN_URI: Param = Param::optional("oauthTokenURI").order(AUTH);
pub(super) const CLIENT_ID: Param = Param::optional("clientID").order(AUTH);
pub(super) const CLIENT_SECRET: Param = Param::optional("clientSecret").order(AUTH).secret();
/// Comma-separated, from `spec.oauth2.scopes`.
pub(super) const SCOPES: Param = Param::optional("scopes").order(AUTH);
/// Form-encoded, from `spec.oauth2.tokenUrlParams`; may hold secrets, never shown.
pub(super) const ENDPOINT_PARAMS: Param = Param::optional("endpointParams").order(AUTH).secret();

/// Every parameter of the `rabbitmq` trigger.
pub const PARAMS: &[Param] = &[
    HOST,
    QUEUE_NAME,
    MODE,
    VALUE,
    QUEUE_LENGTH,
    ACTIVATION_VALUE,
    PROTOCOL,
    VHOST_NAME,
    USE_REGEX,
    EXCLUDE_UNACKNOWLEDGED,
    PAGE_SIZE,
    OPERATION,
    TIMEOUT,
    USERNAME,
    PASSWORD,
    TLS,
    CA,
    CERT,
    KEY,
    KEY_PASSWORD,
    UNSAFE_SSL,
    WORKLOAD_IDENTITY_RESOURCE,
    OAUTH_TOKEN_URI,
    CLIENT_ID,
    CLIENT_SECRET,
    SCOPES,
    ENDPOINT_PARAMS,
];

/// KEDA's default target when none of `mode`, `value`, `queueLength` is given.
pub const DEFAULT_QUEUE_LENGTH: f64 = 20.0;

/// How the broker is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// AMQP 0-9-1: a passive queue declare, which reports ready messages.
    Amqp,
    /// The management plugin's HTTP API.
    Http,
}

/// What the metric measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Messages in the queue.
    QueueLength,
    /// Publish rate (messages per second).
    MessageRate,
    /// Deliver + get rate (messages per second).
    DeliverGetRate,
    /// Publish rate divided by deliver + get rate.
    PublishedToDeliveredRatio,
    /// Seconds until the queue is drained at the current rates.
    ExpectedQueueConsumptionTime,
}

impl Mode {
    const ALL: [(&'static str, Self); 5] = [
        ("QueueLength", Self::QueueLength),
        ("MessageRate", Self::MessageRate),
        ("DeliverGetRate", Self::DeliverGetRate),
        ("PublishedToDeliveredRatio", Self::PublishedToDeliveredRatio),
        (
            "ExpectedQueueConsumptionTime",
            Self::ExpectedQueueConsumptionTime,
        ),
    ];

    /// The name users write in `mode`.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("QueueLength", |(name, _)| name)
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }
}

/// How several queues matched by a regex are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Sum of every counter and rate.
    Sum,
    /// Average (message counts by integer division, as KEDA).
    Avg,
    /// Maximum of each counter and rate, taken separately.
    Max,
}

/// The parsed trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct RabbitMqConfig {
    /// The broker URL as given (credentials included); never shown.
    pub host: Secret,
    /// AMQP or HTTP (after `auto` detection).
    pub protocol: Protocol,
    /// The queue, or a regex over queue names with `useRegex`.
    pub queue_name: String,
    /// What is measured.
    pub mode: Mode,
    /// The target.
    pub value: f64,
    /// Active iff the value is above this (with the mode-specific extra rules).
    pub activation_value: f64,
    /// Overrides the vhost of `host`.
    pub vhost_name: Option<String>,
    /// `queueName` is a regex (HTTP only).
    pub use_regex: bool,
    /// Count ready messages only (HTTP only).
    pub exclude_unacknowledged: bool,
    /// Page size of the regex query.
    pub page_size: i64,
    /// How regex matches are combined.
    pub operation: Operation,
    /// HTTP timeout: `timeout` or the operator's default.
    pub timeout: Duration,
    /// Credentials replacing those of the URL (both or neither).
    pub credentials: Option<(String, Secret)>,
    /// TLS settings; used for `amqps://` and `https://` URLs (and the OAuth2 token endpoint).
    pub tls: TlsSettings,
    /// OAuth2 client credentials for the management API (from `TriggerAuthentication.oauth2`).
    pub oauth2: Option<ClientCredentials>,
    /// `s<index>-rabbitmq-<escaped queue name>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl RabbitMqConfig {
    /// Parses and validates the trigger.
    ///
    /// # Errors
    /// A parameter is missing, malformed, or combined with one it cannot be combined with.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let host: Secret = p.get(&HOST.require())?;
            let queue_name: String = p.get(&QUEUE_NAME)?;
            let protocol_name: String = p.get(&PROTOCOL)?;
            let tls_enabled = p.get::<String>(&TLS)? == "enable";
            let client = crate::tls::client_identity(
                p.get_opt(&CERT)?,
                p.get_opt(&KEY)?,
                // As in KEDA, the key is decrypted only when TLS is enabled.
                if tls_enabled {
                    p.get_opt(&KEY_PASSWORD)?
                } else {
                    None
                },
            )
            .map_err(|e| p.rule(e.to_string()))?;
            let page_size: i64 = p.get(&PAGE_SIZE)?;
            if page_size < 1 {
                return Err(p.rule("parameter \"pageSize\" should be 1 or greater"));
            }
            let username: Option<String> = p.get_opt(&USERNAME)?;
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let credentials = match (username, password) {
                (Some(u), Some(pw)) => Some((u, pw)),
                (None, None) => None,
                _ => return Err(p.rule("username and password must be given together")),
            };
            let protocol = match protocol_name.as_str() {
                "amqp" => Protocol::Amqp,
                "http" => Protocol::Http,
                _ => detect_protocol(p, host.expose())?,
            };
            if p.is_present(&WORKLOAD_IDENTITY_RESOURCE) {
                return Err(p.rule(format!(
                    "parameter \"{}\" is not supported by keda-rs's rabbitmq scaler yet: Azure workload identity is out of scope for now; use username and password, or OAuth2 (TriggerAuthentication spec.oauth2)",
                    WORKLOAD_IDENTITY_RESOURCE.name
                )));
            }
            let oauth2 = oauth2_settings(p, protocol, credentials.is_some())?;
            let use_regex: bool = p.get(&USE_REGEX)?;
            if use_regex && protocol != Protocol::Http {
                return Err(p.rule("configure useRegex=true only with HTTP protocol"));
            }
            let exclude_unacknowledged: bool = p.get(&EXCLUDE_UNACKNOWLEDGED)?;
            if exclude_unacknowledged && protocol != Protocol::Http {
                return Err(p.rule("configure excludeUnacknowledged=true only with HTTP protocol"));
            }
            let (mode, value) = trigger_mode(p, protocol)?;
            let timeout = p
                .get_opt::<KedaDuration>(&TIMEOUT)?
                .map(|t| t.0)
                .filter(|t| !t.is_zero());
            if let (Protocol::Amqp, Some(t)) = (protocol, timeout) {
                return Err(p.rule(format!(
                    "AMQP protocol doesn't support custom timeouts: {t:?}; remove \"timeout\" or use the HTTP protocol"
                )));
            }
            Ok(Self {
                host,
                protocol,
                metric_name: ctx.metric_name(&format!("rabbitmq-{}", query_escape(&queue_name))),
                queue_name,
                mode,
                value,
                activation_value: p.get(&ACTIVATION_VALUE)?,
                vhost_name: p.get_opt(&VHOST_NAME)?,
                use_regex,
                exclude_unacknowledged,
                page_size,
                operation: match p.get::<String>(&OPERATION)?.as_str() {
                    "avg" => Operation::Avg,
                    "max" => Operation::Max,
                    _ => Operation::Sum,
                },
                timeout: timeout.unwrap_or(ctx.global_http_timeout),
                credentials,
                tls: TlsSettings {
                    insecure: p.get(&UNSAFE_SSL)?,
                    ca: if tls_enabled { p.get_opt(&CA)? } else { None },
                    client: if tls_enabled { client } else { None },
                },
                oauth2,
                metric_type,
            })
        })?)
    }
}

/// KEDA's `validateOAuth2`: any of `oauthTokenURI`, `clientID`, `clientSecret` needs all three
/// (TriggerAuthentication `spec.oauth2` gives them), the HTTP protocol, and no `username` /
/// `password`. `oauthTokenURI` must be an http(s) URL; `endpointParams` may not set `scope`
/// when `scopes` does (Go's `clientcredentials` refuses it at every request).
fn oauth2_settings(
    p: &MetadataParser<'_>,
    protocol: Protocol,
    basic_auth: bool,
) -> Result<Option<ClientCredentials>, crate::MetadataError> {
    let trio = [&OAUTH_TOKEN_URI, &CLIENT_ID, &CLIENT_SECRET];
    if !trio.iter().any(|param| p.is_present(param)) {
        return Ok(None);
    }
    let missing: Vec<String> = trio
        .iter()
        .filter(|param| !p.is_present(param))
        .map(|param| format!("\"{}\"", param.name))
        .collect();
    if !missing.is_empty() {
        return Err(p.rule(format!(
            "OAuth2 requires tokenUrl clientId and clientSecret to be configured in TriggerAuthentication (spec.oauth2); missing parameter{} {}",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(" and ")
        )));
    }
    if protocol == Protocol::Amqp {
        return Err(p.rule(
            "parameter \"oauthTokenURI\": OAuth2 authentication is only supported with HTTP protocol, not AMQP; use the management API (an http:// or https:// \"host\", or \"protocol: http\")",
        ));
    }
    if basic_auth {
        return Err(p.rule(
            "OAuth2 authentication cannot be combined with username/password authentication or Azure Workload Identity; remove parameters \"username\" and \"password\" or spec.oauth2",
        ));
    }
    let found = p
        .find(&OAUTH_TOKEN_URI)?
        .ok_or_else(|| p.rule("missing parameter \"oauthTokenURI\""))?;
    let token_url = url::Url::parse(found.value)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
        .ok_or_else(|| p.invalid(&OAUTH_TOKEN_URI, found, "an http or https URL"))?;
    let scopes: Vec<String> = p
        .get_opt::<String>(&SCOPES)?
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let endpoint_params: Vec<(String, Secret)> = p
        .get_opt::<Secret>(&ENDPOINT_PARAMS)?
        .map(|encoded| {
            url::form_urlencoded::parse(encoded.expose().as_bytes())
                .map(|(k, v)| (k.into_owned(), Secret::new(v.into_owned())))
                .collect()
        })
        .unwrap_or_default();
    if !scopes.is_empty() && endpoint_params.iter().any(|(k, _)| k == "scope") {
        return Err(p.rule(
            "parameter \"endpointParams\" cannot set \"scope\" when \"scopes\" is given (spec.oauth2.tokenUrlParams and spec.oauth2.scopes)",
        ));
    }
    Ok(Some(ClientCredentials {
        token_url,
        client_id: p.get(&CLIENT_ID)?,
        client_secret: p.get(&CLIENT_SECRET)?,
        scopes,
        endpoint_params,
    }))
}

/// `protocol: auto`: the scheme of `host` decides. Only the scheme is shown in errors: the URL
/// may hold credentials.
fn detect_protocol(p: &MetadataParser<'_>, host: &str) -> Result<Protocol, crate::MetadataError> {
    let scheme = host
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase())
        .unwrap_or_default();
    match scheme.as_str() {
        "amqp" | "amqps" => Ok(Protocol::Amqp),
        "http" | "https" => Ok(Protocol::Http),
        other => Err(p.rule(format!(
            "unknown host URL scheme: `{other}`; \"host\" must start with amqp://, amqps://, http:// or https://, or set \"protocol\""
        ))),
    }
}

/// KEDA's `validateTrigger`: zero counts as absent for `queueLength` and `value`.
fn trigger_mode(
    p: &MetadataParser<'_>,
    protocol: Protocol,
) -> Result<(Mode, f64), crate::MetadataError> {
    let mode_name: Option<String> = p.get_opt(&MODE)?;
    let value = p.get_opt::<f64>(&VALUE)?.filter(|v| *v != 0.0);
    let queue_length = p.get_opt::<f64>(&QUEUE_LENGTH)?.filter(|v| *v != 0.0);
    match (queue_length, mode_name.as_deref(), value) {
        (None, None, None) => return Ok((Mode::QueueLength, DEFAULT_QUEUE_LENGTH)),
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(p.rule("queueLength is deprecated; use mode and value"));
        }
        (Some(length), None, None) => return Ok((Mode::QueueLength, length)),
        (None, None, Some(_)) => return Err(p.rule("mode must be specified")),
        (None, Some(_), None) => return Err(p.rule("value must be specified")),
        (None, Some(_), Some(_)) => {}
    }
    let (Some(name), Some(value)) = (mode_name, value) else {
        return Err(p.rule("mode must be specified"));
    };
    let mode = Mode::parse(&name).ok_or_else(|| {
        p.rule(format!(
            "trigger mode {name} must be one of QueueLength, MessageRate, DeliverGetRate, PublishedToDeliveredRatio or ExpectedQueueConsumptionTime"
        ))
    })?;
    if mode != Mode::QueueLength && protocol != Protocol::Http {
        return Err(p.rule(format!(
            "protocol amqp not supported; must be HTTP to use trigger mode {name}"
        )));
    }
    Ok((mode, value))
}

#[cfg(test)]
mod tests;
