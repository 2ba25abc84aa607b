//! `etcd`: scales on a number stored in an etcd key (KEDA's `pkg/scalers/etcd_scaler.go`).
//!
//! A pull scaler that reads the key on every poll, and a push scaler that watches it: every
//! change of the key is sent to the scale loop at once (`true` iff the new value is above
//! `activationValue`), so a workload scales from zero the moment the key says so.
//!
//! Talks to etcd's v3 gRPC API with a client generated from `scalers/proto/etcd.proto` (tonic
//! and prost, as the `external` scaler). The `etcd-client` crate would need a system `protoc` to
//! build; the three calls the scaler makes do not justify that.

pub mod client;

/// The generated types and clients of `scalers/proto/etcd.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("etcdserverpb");
}

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::client::{EtcdClient, EtcdError, EtcdKey};
use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError, TriggerId};
use crate::metadata::{AUTH, AUTH_ENV, MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pool::Held;
use crate::remote::Classify;
use crate::scaler::{BuiltScaler, MetricsAndActivity, PushScaler, Scaler};
use crate::scalers::external::channel::ScalerAddress;
use crate::scalers::external::push::Backoff;
use crate::secret::Secret;
use crate::tls::{TlsError, TlsSettings};

const ENDPOINTS: Param = Param::required("endpoints");
const WATCH_KEY: Param = Param::required("watchKey");
const VALUE: Param = Param::required("value");
const ACTIVATION_VALUE: Param = Param::optional("activationValue").default("0");
const WATCH_PROGRESS_NOTIFY_INTERVAL: Param = Param::optional("watchProgressNotifyInterval")
    .default("600")
    .range(1.0, f64::MAX);
const USERNAME: Param = Param::optional("username").order(AUTH_ENV);
const PASSWORD: Param = Param::optional("password").order(AUTH_ENV).secret();
const TLS: Param = Param::optional("tls")
    .order(AUTH)
    .default("disable")
    .allowed(&["enable", "disable"]);
const CERT: Param = Param::optional("cert").order(AUTH).secret();
const KEY: Param = Param::optional("key").order(AUTH).secret();
const KEY_PASSWORD: Param = Param::optional("keyPassword").order(AUTH).secret();
const CA: Param = Param::optional("ca").order(AUTH).secret();

/// The parameters of `etcd`.
pub const PARAMS: &[Param] = &[
    ENDPOINTS,
    WATCH_KEY,
    VALUE,
    ACTIVATION_VALUE,
    WATCH_PROGRESS_NOTIFY_INTERVAL,
    USERNAME,
    PASSWORD,
    TLS,
    CERT,
    KEY,
    KEY_PASSWORD,
    CA,
];

/// The parsed trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct EtcdConfig {
    /// The shared client's key: endpoints, TLS, credentials.
    pub client: EtcdKey,
    /// The key read and watched.
    pub watch_key: String,
    /// Target per replica.
    pub value: f64,
    /// Active iff the key's value is above this.
    pub activation_value: f64,
    /// A watch that hears nothing (not even a progress notification) for twice this long is
    /// reopened.
    pub watch_progress_notify_interval: Duration,
    /// `s<i>-etcd-<watchKey>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// An endpoint as etcd's Go client takes it: `host:port`, or a URL `http(s)://host:port`
/// (the scheme is not what turns TLS on: the `tls` parameter is).
fn parse_endpoint(raw: &str) -> Option<ScalerAddress> {
    let bare = raw
        .strip_prefix("http://")
        .or_else(|| raw.strip_prefix("https://"))
        .unwrap_or(raw);
    ScalerAddress::parse(bare.trim_end_matches('/'))
}

fn tls_error(p: &MetadataParser<'_>, e: &TlsError) -> MetadataError {
    p.rule(match e {
        TlsError::Rustls(inner) => format!(
            "parameters \"cert\" and \"key\" do not make a valid TLS client identity: {inner}"
        ),
        other => other.to_string(),
    })
}

impl EtcdConfig {
    /// Parses the trigger. The TLS material is checked here too, so a bad one is a
    /// configuration error naming the parameter.
    ///
    /// # Errors
    /// Invalid or missing parameters.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let raw: Vec<String> = p.get(&ENDPOINTS)?;
            if raw.is_empty() {
                return Err(p.error(MetadataErrorKind::Missing {
                    param: ENDPOINTS.name.to_string(),
                }));
            }
            let endpoints = raw
                .iter()
                .map(|e| {
                    parse_endpoint(e).ok_or_else(|| {
                        p.rule(format!(
                            "parameter \"endpoints\": \"{e}\" is not a host:port address (or http(s)://host:port)"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;

            let username: Option<String> = p.get_opt(&USERNAME)?;
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let credentials = match (username, password) {
                (Some(u), Some(pw)) => Some((u, pw)),
                (None, None) => None,
                (None, Some(_)) => {
                    return Err(p.rule("parameter \"username\" must be provided with \"password\""));
                }
                (Some(_), None) => {
                    return Err(p.rule("parameter \"password\" must be provided with \"username\""));
                }
            };

            let tls = if p.get::<String>(&TLS)? == "enable" {
                if p.is_present(&KEY_PASSWORD) {
                    return Err(p.rule(
                        "parameter \"keyPassword\" is not supported: provide an unencrypted PEM key",
                    ));
                }
                let client = match (p.get_opt::<Secret>(&CERT)?, p.get_opt::<Secret>(&KEY)?) {
                    (Some(c), Some(k)) => Some((c, k)),
                    (None, None) => None,
                    (None, Some(_)) => {
                        return Err(p.rule("parameter \"cert\" must be provided with \"key\""));
                    }
                    (Some(_), None) => {
                        return Err(p.rule("parameter \"key\" must be provided with \"cert\""));
                    }
                };
                let settings = TlsSettings {
                    insecure: false,
                    ca: p.get_opt(&CA)?,
                    client,
                };
                settings.client_config().map_err(|e| tls_error(p, &e))?;
                for endpoint in &endpoints {
                    if rustls_pki_types::ServerName::try_from(endpoint.host.clone()).is_err() {
                        return Err(p.rule(format!(
                            "parameter \"endpoints\": host \"{}\" is not a valid TLS server name",
                            endpoint.host
                        )));
                    }
                }
                Some(settings)
            } else {
                None
            };

            let watch_key: String = p.get(&WATCH_KEY)?;
            let interval: u64 = p.get(&WATCH_PROGRESS_NOTIFY_INTERVAL)?;
            Ok(Self {
                client: EtcdKey {
                    endpoints,
                    tls,
                    credentials,
                },
                metric_name: ctx.metric_name(&format!("etcd-{watch_key}")),
                watch_key,
                value: p.get(&VALUE)?,
                activation_value: p.get(&ACTIVATION_VALUE)?,
                watch_progress_notify_interval: Duration::from_secs(interval),
                metric_type,
            })
        })?)
    }

    fn describe(&self) -> String {
        let endpoints: Vec<String> = self
            .client
            .endpoints
            .iter()
            .map(ScalerAddress::to_string)
            .collect();
        format!("etcd at {} (parameter \"endpoints\")", endpoints.join(","))
    }

    /// How long a watch may stay silent: twice the progress notification interval, as in
    /// KEDA.
    pub fn watch_deadline(&self) -> Duration {
        self.watch_progress_notify_interval.saturating_mul(2)
    }
}

/// A value as Go's `strconv.ParseFloat` reads it (the push side treats a value that is not a
/// number as 0, as KEDA does).
pub fn parse_value(raw: &[u8]) -> Option<f64> {
    std::str::from_utf8(raw).ok()?.parse::<f64>().ok()
}

/// An `etcd` scaler holding a shared client.
pub struct EtcdScaler {
    config: EtcdConfig,
    trigger: TriggerId,
    client: Held<EtcdKey, EtcdClient>,
}

/// How one watch ended.
enum WatchEnd {
    /// `cancel` fired or the loop is gone: stop for good.
    Stop,
    /// The watch delivered answers, then ended: reopen with the backoff started over.
    Worked(String),
    /// The watch could not be opened or ended before any answer: reopen with the backoff
    /// growing.
    Failed(String),
}

impl EtcdScaler {
    /// Parses the trigger and leases the shared client of its endpoints (connecting lazily:
    /// an unreachable etcd is reported by the first read).
    ///
    /// # Errors
    /// Invalid metadata.
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = EtcdConfig::parse(ctx)?;
        let key = config.client.clone();
        let lease = ctx
            .clients
            .pool::<EtcdKey, EtcdClient>()
            .get_or_connect(key.clone(), || async move { EtcdClient::new(&key) })
            .await
            .map_err(|e| {
                ScalerError::Metadata(MetadataError {
                    trigger: ctx.trigger_id(),
                    kind: MetadataErrorKind::Rule(e.to_string()),
                })
            })?;
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            client: Held::new(lease),
        })
    }

    /// The key's value.
    ///
    /// # Errors
    /// etcd cannot be reached or refuses; the key does not exist or does not hold a number.
    pub async fn value(&self) -> Result<f64, ScalerError> {
        let client = self.client.client().ok_or_else(|| ScalerError::Closed {
            trigger: self.trigger.clone(),
        })?;
        let key = &self.config.watch_key;
        let kv = client
            .get(key)
            .await
            .map_err(|e: EtcdError| ScalerError::Query {
                trigger: self.trigger.clone(),
                operation: format!("reading key \"{key}\" from {}", self.config.describe()),
                source: e.classify(),
            })?;
        let kv = kv.ok_or_else(|| ScalerError::Unexpected {
            trigger: self.trigger.clone(),
            message: format!("watchKey \"{key}\" doesn't exist"),
        })?;
        parse_value(&kv.value).ok_or_else(|| {
            // The value is etcd's text: its length is shown, never the value.
            ScalerError::Unexpected {
                trigger: self.trigger.clone(),
                message: format!(
                    "the value of watchKey \"{key}\" ({} bytes) is not a number",
                    kv.value.len()
                ),
            }
        })
    }

    /// Holds one watch open and sends the activity of every change.
    async fn watch_once(
        &self,
        client: &EtcdClient,
        cancel: &CancellationToken,
        activity: &mpsc::Sender<bool>,
    ) -> WatchEnd {
        let opened = tokio::select! {
            () = cancel.cancelled() => return WatchEnd::Stop,
            opened = client.watch(&self.config.watch_key) => opened,
        };
        let (index, endpoint, mut stream) = match opened {
            Ok(opened) => opened,
            Err((index, e)) => {
                client.skip(index);
                return WatchEnd::Failed(e.classify().to_string());
            }
        };
        let deadline = self.config.watch_deadline();
        let mut answered = false;
        loop {
            let message = tokio::select! {
                () = cancel.cancelled() => return WatchEnd::Stop,
                message = tokio::time::timeout(deadline, stream.message()) => message,
            };
            let end = match message {
                // Nothing at all, not even a progress notification: the member may be cut
                // off from the cluster. Watch again, on the next endpoint.
                Err(_) => format!(
                    "{endpoint}: no watch answer or progress notification in {} s (twice watchProgressNotifyInterval)",
                    deadline.as_secs()
                ),
                Ok(Ok(Some(answer))) => {
                    answered = true;
                    if answer.canceled || answer.compact_revision != 0 {
                        format!(
                            "{endpoint}: etcd ended the watch: {}",
                            if answer.cancel_reason.is_empty() {
                                "the revision was compacted"
                            } else {
                                answer.cancel_reason.as_str()
                            }
                        )
                    } else {
                        for event in &answer.events {
                            let value = event.kv.as_ref().map(|kv| kv.value.as_slice());
                            let value = value.and_then(parse_value).unwrap_or_else(|| {
                                tracing::debug!(trigger = %self.trigger, "etcd value is not a number; treated as 0");
                                0.0
                            });
                            let active = value > self.config.activation_value;
                            let sent = tokio::select! {
                                () = cancel.cancelled() => return WatchEnd::Stop,
                                sent = activity.send(active) => sent,
                            };
                            if sent.is_err() {
                                return WatchEnd::Stop;
                            }
                        }
                        continue;
                    }
                }
                Ok(Ok(None)) => format!("{endpoint}: the watch stream ended"),
                Ok(Err(status)) => {
                    if status.code() == tonic::Code::Unauthenticated {
                        client.forget_token().await;
                    }
                    format!(
                        "{endpoint}: {}",
                        crate::scalers::external::GrpcError { status }
                    )
                }
            };
            client.skip(index);
            return if answered {
                WatchEnd::Worked(end)
            } else {
                WatchEnd::Failed(end)
            };
        }
    }
}

#[async_trait]
impl Scaler for EtcdScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target_milli(self.config.metric_type, self.config.value),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let value = self.value().await?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.config.activation_value,
        ))
    }

    async fn close(&self) {
        self.client.release();
    }
}

#[async_trait]
impl PushScaler for EtcdScaler {
    /// Watches `watchKey` (with progress notifications) and sends, for every change, whether
    /// the new value is above `activationValue` (a deleted key or a value that is not a number
    /// counts as 0). A watch that ends, fails, or hears nothing for twice
    /// `watchProgressNotifyInterval` is reopened on the next endpoint after [`Backoff`]'s wait
    /// (2 s doubling to 1 min; started over after a watch that worked). Returns when `cancel`
    /// fires, the receiver is gone, or the scaler is closed.
    async fn run(&self, cancel: CancellationToken, activity: mpsc::Sender<bool>) {
        let mut backoff = Backoff::default();
        loop {
            let Some(client) = self.client.client() else {
                return;
            };
            match self.watch_once(&client, &cancel, &activity).await {
                WatchEnd::Stop => return,
                WatchEnd::Worked(reason) => {
                    backoff.reset();
                    tracing::info!(trigger = %self.trigger, reason, "etcd watch ended; watching again");
                }
                WatchEnd::Failed(reason) => {
                    tracing::warn!(trigger = %self.trigger, reason, "etcd watch failed; retrying with backoff");
                }
            }
            drop(client);
            let delay = backoff.next_delay();
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// Factory of `etcd`: a push scaler.
///
/// # Errors
/// See [`EtcdScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Push(Box::new(EtcdScaler::build(&ctx).await?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<EtcdConfig, String> {
        EtcdConfig::parse(&test_context("etcd", 0, metadata, &[], auth)).map_err(|e| e.to_string())
    }

    const BASE: [(&str, &str); 3] = [
        ("endpoints", "10.0.0.1:2379, https://etcd-1.db:2379"),
        ("watchKey", "/jobs/pending"),
        ("value", "2.5"),
    ];

    #[test]
    fn defaults_and_the_metric_name_follow_keda() {
        let c = parse(&BASE, &[]).unwrap();
        assert_eq!(c.metric_name, "s0-etcd--jobs-pending");
        assert_eq!(c.client.endpoints.len(), 2);
        assert_eq!(c.client.endpoints[1].to_string(), "etcd-1.db:2379");
        assert_eq!((c.value, c.activation_value), (2.5, 0.0));
        assert_eq!(c.watch_progress_notify_interval, Duration::from_secs(600));
        assert_eq!(c.watch_deadline(), Duration::from_secs(1200));
        assert_eq!(c.client.tls, None);
        assert_eq!(c.client.credentials, None);
    }

    #[test]
    fn credentials_come_from_the_trigger_authentication_or_the_environment() {
        let ctx = test_context(
            "etcd",
            0,
            &[
                BASE[0],
                BASE[1],
                BASE[2],
                ("usernameFromEnv", "U"),
                ("passwordFromEnv", "P"),
                // Not read from metadata, as in KEDA.
                ("username", "ignored"),
            ],
            &[("U", "env-user"), ("P", "env-pw")],
            &[("password", "auth-pw")],
        );
        let c = EtcdConfig::parse(&ctx).unwrap();
        let (user, password) = c.client.credentials.unwrap();
        assert_eq!((user.as_str(), password.expose()), ("env-user", "auth-pw"));
    }

    #[test]
    fn errors_name_the_trigger_and_the_parameter() {
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut m = BASE.to_vec();
            m.extend_from_slice(extra);
            m
        };
        for (metadata, auth, expected) in [
            (
                vec![BASE[1], BASE[2]],
                vec![],
                r#"trigger 0 (etcd): missing required parameter "endpoints""#,
            ),
            (
                vec![("endpoints", ","), BASE[1], BASE[2]],
                vec![],
                r#"trigger 0 (etcd): missing required parameter "endpoints""#,
            ),
            (
                vec![("endpoints", "etcd"), BASE[1], BASE[2]],
                vec![],
                r#"trigger 0 (etcd): parameter "endpoints": "etcd" is not a host:port address (or http(s)://host:port)"#,
            ),
            (
                vec![BASE[0], BASE[2]],
                vec![],
                r#"trigger 0 (etcd): missing required parameter "watchKey""#,
            ),
            (
                vec![BASE[0], BASE[1]],
                vec![],
                r#"trigger 0 (etcd): missing required parameter "value""#,
            ),
            (
                with(&[("watchProgressNotifyInterval", "0")]),
                vec![],
                r#"trigger 0 (etcd): parameter "watchProgressNotifyInterval": "0" is not at least 1"#,
            ),
            (
                BASE.to_vec(),
                vec![("password", "pw")],
                r#"trigger 0 (etcd): parameter "username" must be provided with "password""#,
            ),
            (
                BASE.to_vec(),
                vec![("username", "u")],
                r#"trigger 0 (etcd): parameter "password" must be provided with "username""#,
            ),
            (
                BASE.to_vec(),
                vec![("tls", "on")],
                r#"trigger 0 (etcd): parameter "tls": the value from TriggerAuthentication is not one of enable, disable"#,
            ),
            (
                BASE.to_vec(),
                vec![("tls", "enable"), ("key", "K")],
                r#"trigger 0 (etcd): parameter "cert" must be provided with "key""#,
            ),
            (
                BASE.to_vec(),
                vec![("tls", "enable"), ("ca", "not a certificate")],
                r#"trigger 0 (etcd): parameter "ca" is not a valid PEM certificate bundle"#,
            ),
            (
                BASE.to_vec(),
                vec![("tls", "enable"), ("keyPassword", "kp")],
                r#"trigger 0 (etcd): parameter "keyPassword" is not supported: provide an unencrypted PEM key"#,
            ),
        ] {
            assert_eq!(
                parse(&metadata, &auth).unwrap_err(),
                expected,
                "{metadata:?} {auth:?}"
            );
        }
        // TLS material is only looked at with tls=enable, as in KEDA.
        assert!(parse(&BASE, &[("cert", "C")]).is_ok());
    }

    #[test]
    fn values_parse_as_go_floats() {
        assert_eq!(parse_value(b"3"), Some(3.0));
        assert_eq!(parse_value(b"-1.5e2"), Some(-150.0));
        assert_eq!(parse_value(b""), None);
        assert_eq!(parse_value(b"ten"), None);
        assert_eq!(parse_value(&[0xff]), None);
    }
}
