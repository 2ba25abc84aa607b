//! `external` and `external-push`: a scaler implemented by someone else's gRPC server that
//! speaks KEDA's `externalscaler.proto` (the community external scalers, KEDA's HTTP add-on).
//! Compatible with KEDA's `pkg/scalers/external_scaler.go`.
//!
//! - The trigger's whole metadata (with `<name>FromEnv` values resolved) is sent to the server
//!   in `ScaledObjectRef.scalerMetadata`, with the object's name and namespace.
//! - `GetMetricSpec` is asked once, when the scaler is built: its metrics become the HPA's
//!   External metrics `s<index>-<metricName>` (the name as the server returns it, not
//!   normalized), with `targetSizeFloat` as a milli target when it is above 0, else
//!   `targetSize`.
//! - A poll asks `GetMetrics` (with the metric name stripped of `s<index>-`) and then
//!   `IsActive`: the value is `metricValueFloat` when it is above 0, else `metricValue`; the
//!   activity is the server's answer.
//! - `external-push` also holds `StreamIsActive` open ([`push`]); each `true` wakes the scale
//!   loop at once.
//!
//! Every trigger on the same address with the same TLS settings shares one channel (one
//! HTTP/2 connection, [`channel`]).

pub mod channel;
pub mod push;

/// KEDA's `externalscaler.proto`, generated at build time (`scalers/build.rs`): the messages,
/// the client (`external_scaler_client::ExternalScalerClient`) and the service trait a server
/// implements (`external_scaler_server::ExternalScaler`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("externalscaler");
}

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use self::channel::{ChannelKey, ExternalChannel, ScalerAddress};
use self::proto::external_scaler_client::ExternalScalerClient;
use crate::context::ScalerContext;
use crate::error::{ScalerError, TriggerId};
use crate::metadata::{AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target, metric_target_milli};
use crate::pool::Held;
use crate::remote::{Classify, Failure};
use crate::scaler::{BuiltScaler, MetricValue, MetricsAndActivity, Scaler};
use crate::secret::Secret;
use crate::tls::TlsSettings;

const SCALER_ADDRESS: Param = Param::required("scalerAddress");
const ENABLE_TLS: Param = Param::optional("enableTLS").default("false");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const TLS_CERT_FILE: Param = Param::optional("tlsCertFile");
const CA_CERT: Param = Param::optional("caCert").order(AUTH).secret();
const TLS_CLIENT_CERT: Param = Param::optional("tlsClientCert").order(AUTH).secret();
const TLS_CLIENT_KEY: Param = Param::optional("tlsClientKey").order(AUTH).secret();

/// The parameters of `external` and `external-push`. Every other metadata key is passed to
/// the server as it is.
pub const PARAMS: &[Param] = &[
    SCALER_ADDRESS,
    ENABLE_TLS,
    UNSAFE_SSL,
    TLS_CERT_FILE,
    CA_CERT,
    TLS_CLIENT_CERT,
    TLS_CLIENT_KEY,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct ExternalConfig {
    /// The channel's address and TLS settings (without the `tlsCertFile` contents, which are
    /// read when the scaler is built).
    pub channel: ChannelKey,
    /// `tlsCertFile`: a PEM CA file on the operator's file system (KEDA <= 2.12; deprecated).
    pub tls_cert_file: Option<String>,
    /// What every call sends: the object's name and namespace and the trigger's metadata.
    pub object: proto::ScaledObjectRef,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The object uses `scalingModifiers`: a metric without a positive target is accepted.
    pub as_metric_source: bool,
}

impl ExternalConfig {
    /// Parses the trigger. Does not read `tlsCertFile`.
    ///
    /// # Errors
    /// `scalerAddress` missing or not `host:port`; a boolean that is not one; only one of
    /// `tlsClientCert` and `tlsClientKey`; a bad `metricType`.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let raw: String = p.get(&SCALER_ADDRESS)?;
            let address = ScalerAddress::parse(&raw).ok_or_else(|| {
                p.rule(format!(
                    "parameter \"scalerAddress\": \"{raw}\" is not host:port"
                ))
            })?;
            let enable_tls: bool = p.get(&ENABLE_TLS)?;
            let insecure: bool = p.get(&UNSAFE_SSL)?;
            let ca: Option<Secret> = p.get_opt(&CA_CERT)?;
            let cert: Option<Secret> = p.get_opt(&TLS_CLIENT_CERT)?;
            let key: Option<Secret> = p.get_opt(&TLS_CLIENT_KEY)?;
            let tls_cert_file: Option<String> = p.get_opt(&TLS_CERT_FILE)?;
            let client = match (cert, key) {
                (Some(cert), Some(key)) => Some((cert, key)),
                (None, None) => None,
                _ => {
                    return Err(p.rule(
                        "parameters \"tlsClientCert\" and \"tlsClientKey\" must be given \
                         together",
                    ));
                }
            };
            // KEDA turns TLS on with `enableTLS`, a client certificate or a CA; its older
            // versions with `tlsCertFile`.
            let tls_on = enable_tls || client.is_some() || ca.is_some() || tls_cert_file.is_some();
            let tls = tls_on.then_some(TlsSettings {
                insecure,
                ca,
                client,
            });
            Ok(Self {
                channel: ChannelKey { address, tls },
                tls_cert_file,
                object: proto::ScaledObjectRef {
                    name: ctx.scalable_name.clone(),
                    namespace: ctx.scalable_namespace.clone(),
                    scaler_metadata: scaler_metadata(ctx),
                },
                metric_type,
                as_metric_source: ctx.as_metric_source,
            })
        })?)
    }

    /// The channel key with the `tlsCertFile` contents added to the CA bundle.
    ///
    /// # Errors
    /// The file is not under the trigger file root, not a regular file, too large, or cannot
    /// be read ([`crate::files::TriggerFiles::read`]: off the runtime, bounded).
    async fn channel_key(&self, ctx: &ScalerContext) -> Result<ChannelKey, ScalerError> {
        let mut key = self.channel.clone();
        if let (Some(path), Some(tls)) = (&self.tls_cert_file, key.tls.as_mut()) {
            let pem =
                ctx.trigger_files
                    .read(path)
                    .await
                    .map_err(|e| crate::error::MetadataError {
                        trigger: ctx.trigger_id(),
                        kind: crate::error::MetadataErrorKind::Rule(format!(
                            "parameter \"tlsCertFile\": {e}"
                        )),
                    })?;
            let bundle = match &tls.ca {
                Some(ca) => format!("{}\n{pem}", ca.expose()),
                None => pem,
            };
            tls.ca = Some(Secret::new(bundle));
        }
        Ok(key)
    }
}

/// KEDA's `originalMetadata`: every metadata entry as written, except that a `<name>FromEnv`
/// entry carries the value of the environment variable it names (and is left out when that
/// variable is unset or empty).
pub fn scaler_metadata(ctx: &ScalerContext) -> HashMap<String, String> {
    ctx.metadata
        .iter()
        .filter_map(|(key, value)| {
            if key.ends_with("FromEnv") {
                ctx.resolved_env
                    .get(value)
                    .filter(|v| !v.is_empty())
                    .map(|v| (key.clone(), v.clone()))
            } else {
                Some((key.clone(), value.clone()))
            }
        })
        .collect()
}

/// A gRPC call that failed: its status code. The server's (or transport's) message is the
/// server's text: it is kept for debug-level logs ([`crate::remote`]) and never shown.
#[derive(Debug, thiserror::Error)]
#[error("gRPC status {}", code_name(status.code()))]
pub struct GrpcError {
    /// The status.
    pub status: tonic::Status,
}

impl Classify for GrpcError {
    fn classify(&self) -> Failure {
        Failure::new(
            crate::remote::Kind::Local(self.to_string()),
            Some(self.status.message().to_string()),
        )
    }
}

fn code_name(code: tonic::Code) -> String {
    format!("{code:?}")
}

/// A built `external` scaler: its metric specs, read from the server at build time, and its
/// share of the channel.
pub struct ExternalScaler {
    config: ExternalConfig,
    trigger: TriggerId,
    trigger_index: usize,
    specs: Vec<MetricSpec>,
    channel: Held<ChannelKey, ExternalChannel>,
    timeout: Duration,
}

impl ExternalScaler {
    /// Parses the trigger, leases the shared channel of its address and TLS settings, and asks
    /// the server for its metric specs (`GetMetricSpec`).
    ///
    /// # Errors
    /// Invalid metadata or TLS material (naming the parameter); the server cannot be reached
    /// or fails `GetMetricSpec`; it returns no metric, a metric without a name, or (unless the
    /// object uses `scalingModifiers`) one without a positive target.
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = ExternalConfig::parse(ctx)?;
        let key = config.channel_key(ctx).await?;
        let lease = channel::lease(ctx, key).await?;
        let mut scaler = Self {
            trigger: ctx.trigger_id(),
            trigger_index: ctx.trigger_index,
            specs: Vec::new(),
            channel: Held::new(lease),
            timeout: ctx.global_http_timeout,
            config,
        };
        scaler.specs = scaler.read_metric_specs().await?;
        Ok(scaler)
    }

    /// The parsed trigger.
    pub fn config(&self) -> &ExternalConfig {
        &self.config
    }

    fn target(&self) -> String {
        format!("external scaler at {}", self.config.channel.address)
    }

    fn client(&self) -> Result<ExternalScalerClient<tonic::transport::Channel>, ScalerError> {
        let channel = self.channel.client().ok_or_else(|| ScalerError::Closed {
            trigger: self.trigger.clone(),
        })?;
        Ok(ExternalScalerClient::new(channel.channel()))
    }

    /// One unary call bounded by the timeout, its error naming the call and the server.
    async fn call<T>(
        &self,
        method: &str,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, ScalerError> {
        let status = match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(response)) => return Ok(response.into_inner()),
            Ok(Err(status)) => status,
            Err(_) => tonic::Status::deadline_exceeded(format!(
                "no answer within {}ms",
                self.timeout.as_millis()
            )),
        };
        Err(ScalerError::Query {
            trigger: self.trigger.clone(),
            operation: format!("{method} on the {}", self.target()),
            source: GrpcError { status }.classify(),
        })
    }

    async fn read_metric_specs(&self) -> Result<Vec<MetricSpec>, ScalerError> {
        let mut client = self.client()?;
        let response = self
            .call(
                "GetMetricSpec",
                client.get_metric_spec(self.config.object.clone()),
            )
            .await
            .map_err(|e| match e {
                // Built but not reached: report it as a connection failure.
                ScalerError::Query {
                    trigger, source, ..
                } => ScalerError::Connect {
                    trigger,
                    target: format!("{} (GetMetricSpec)", self.target()),
                    source,
                },
                other => other,
            })?;
        metric_specs(
            self.trigger_index,
            self.config.metric_type,
            self.config.as_metric_source,
            &response.metric_specs,
        )
        .map_err(|message| ScalerError::Unexpected {
            trigger: self.trigger.clone(),
            message: format!(
                "the {} answered GetMetricSpec with {message}",
                self.target()
            ),
        })
    }

    /// Asks the server for `metric_name`'s values and whether it is active.
    ///
    /// # Errors
    /// `metric_name` is not `s<index>-...`; the server fails either call; the scaler is closed.
    pub async fn read(&self, metric_name: &str) -> Result<MetricsAndActivity, ScalerError> {
        let prefix = format!("s{}-", self.trigger_index);
        let Some(bare) = metric_name.strip_prefix(&prefix) else {
            return Err(ScalerError::UnknownMetric {
                trigger: self.trigger.clone(),
                metric_name: metric_name.to_string(),
            });
        };
        let mut client = self.client()?;
        let request = proto::GetMetricsRequest {
            scaled_object_ref: Some(self.config.object.clone()),
            metric_name: bare.to_string(),
        };
        let metrics = self.call("GetMetrics", client.get_metrics(request)).await?;
        let active = self
            .call("IsActive", client.is_active(self.config.object.clone()))
            .await?;
        Ok(MetricsAndActivity {
            values: metrics
                .metric_values
                .iter()
                .map(|v| MetricValue::new(metric_name, metric_value(v)))
                .collect(),
            active: active.result,
        })
    }

    /// A `StreamIsActive` stream on the shared channel.
    pub(crate) async fn stream_is_active(
        &self,
    ) -> Result<tonic::Streaming<proto::IsActiveResponse>, ScalerError> {
        let mut client = self.client()?;
        // Opening is bounded; the stream itself lives as long as the server keeps it.
        self.call(
            "StreamIsActive",
            client.stream_is_active(self.config.object.clone()),
        )
        .await
    }

    pub(crate) fn trigger(&self) -> &TriggerId {
        &self.trigger
    }
}

/// The value of one `MetricValue`: `metricValueFloat` when it is above 0, else `metricValue`.
pub fn metric_value(v: &proto::MetricValue) -> f64 {
    if v.metric_value_float > 0.0 {
        v.metric_value_float
    } else {
        // i64 -> f64 rounds beyond 2^53, as KEDA's float64(...) does.
        v.metric_value as f64
    }
}

/// The HPA metric specs of `GetMetricSpec`'s answer: `s<index>-<metricName>` (as returned,
/// not normalized), `targetSizeFloat` as a milli target when above 0, else `targetSize`.
///
/// # Errors
/// No metric; a metric without a name; a metric without a positive target (unless
/// `as_metric_source`: a `scalingModifiers` formula has its own target).
pub fn metric_specs(
    trigger_index: usize,
    metric_type: MetricTargetType,
    as_metric_source: bool,
    specs: &[proto::MetricSpec],
) -> Result<Vec<MetricSpec>, String> {
    if specs.is_empty() {
        return Err("no metric".to_string());
    }
    specs
        .iter()
        .map(|spec| {
            if spec.metric_name.is_empty() {
                return Err("a metric without a metricName".to_string());
            }
            let positive = spec.target_size_float > 0.0 || spec.target_size > 0;
            if !positive && !as_metric_source {
                // The metric's name is the server's text: not shown.
                return Err("a metric without a positive targetSizeFloat or targetSize".to_string());
            }
            let target = if spec.target_size_float > 0.0 {
                metric_target_milli(metric_type, spec.target_size_float)
            } else {
                metric_target(metric_type, spec.target_size)
            };
            let name = keda_api::metric_name::ScalerMetric::External {
                metric_name: &spec.metric_name,
            }
            .name(trigger_index);
            Ok(external_metric_spec(name, target))
        })
        .collect()
}

#[async_trait]
impl Scaler for ExternalScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        self.specs.clone()
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        self.read(metric_name).await
    }

    async fn close(&self) {
        self.channel.release();
    }
}

/// Builds an `external` trigger.
///
/// # Errors
/// See [`ExternalScaler::build`].
pub async fn build_external(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        ExternalScaler::build(&ctx).await?,
    )))
}

/// Builds an `external-push` trigger.
///
/// # Errors
/// See [`ExternalScaler::build`].
pub async fn build_external_push(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    let scaler = ExternalScaler::build(&ctx).await?;
    Ok(BuiltScaler::Push(Box::new(push::ExternalPushScaler::new(
        scaler,
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    /// Key-value pairs of a table row.
    type Pairs = &'static [(&'static str, &'static str)];

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<ExternalConfig, String> {
        ExternalConfig::parse(&test_context("external", 1, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn tls_is_on_with_enable_tls_a_ca_a_client_certificate_or_a_cert_file() {
        // (metadata, auth, TLS on)
        let rows: [(Pairs, Pairs, bool); 6] = [
            (&[], &[], false),
            // unsafeSsl alone does not turn TLS on (as in KEDA).
            (&[("unsafeSsl", "true")], &[], false),
            (&[("enableTLS", "true")], &[], true),
            (&[], &[("caCert", "PEM")], true),
            (&[], &[("tlsClientCert", "C"), ("tlsClientKey", "K")], true),
            (&[("tlsCertFile", "/etc/ca.pem")], &[], true),
        ];
        for (metadata, auth, on) in rows {
            let mut m = vec![("scalerAddress", "scaler:9090")];
            m.extend_from_slice(metadata);
            let config = parse(&m, auth).expect("parses");
            assert_eq!(config.channel.tls.is_some(), on, "{metadata:?} {auth:?}");
        }
        let insecure = parse(
            &[
                ("scalerAddress", "scaler:9090"),
                ("enableTLS", "true"),
                ("unsafeSsl", "true"),
            ],
            &[],
        )
        .expect("parses");
        assert!(insecure.channel.tls.expect("TLS").insecure);
    }

    #[test]
    fn bad_metadata_names_the_trigger_and_the_parameter() {
        // (metadata, auth, expected message)
        let rows: [(Pairs, Pairs, &str); 5] = [
            (
                &[],
                &[],
                "trigger 1 (external): missing required parameter \"scalerAddress\"",
            ),
            (
                &[("scalerAddress", "scaler")],
                &[],
                "trigger 1 (external): parameter \"scalerAddress\": \"scaler\" is not host:port",
            ),
            (
                &[("scalerAddress", "scaler:1"), ("enableTLS", "yes")],
                &[],
                "trigger 1 (external): parameter \"enableTLS\": \"yes\" is not a valid boolean",
            ),
            (
                &[("scalerAddress", "scaler:1")],
                &[("tlsClientCert", "C")],
                "trigger 1 (external): parameters \"tlsClientCert\" and \"tlsClientKey\" must be given together",
            ),
            (
                &[("scalerAddress", "scaler:1"), ("unsafeSsl", "maybe")],
                &[],
                "trigger 1 (external): parameter \"unsafeSsl\": \"maybe\" is not a valid boolean",
            ),
        ];
        for (metadata, auth, expected) in rows {
            assert_eq!(parse(metadata, auth).unwrap_err(), expected);
        }
    }

    #[test]
    fn the_whole_metadata_goes_to_the_server_with_from_env_values_resolved() {
        let ctx = ScalerContext {
            scalable_name: "worker".into(),
            scalable_namespace: "team".into(),
            ..test_context(
                "external",
                0,
                &[
                    ("scalerAddress", "scaler:9090"),
                    ("queue", "jobs"),
                    ("connectionFromEnv", "CONN"),
                    ("passwordFromEnv", "UNSET"),
                ],
                &[("CONN", "amqp://q")],
                &[("caCert", "PEM")],
            )
        };
        let config = ExternalConfig::parse(&ctx).expect("parses");
        let sent: std::collections::BTreeMap<_, _> =
            config.object.scaler_metadata.clone().into_iter().collect();
        assert_eq!(
            sent,
            [
                ("connectionFromEnv", "amqp://q"),
                ("queue", "jobs"),
                ("scalerAddress", "scaler:9090"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        );
        assert_eq!(
            (
                config.object.name.as_str(),
                config.object.namespace.as_str()
            ),
            ("worker", "team")
        );
    }

    #[tokio::test]
    async fn a_tls_cert_file_that_cannot_be_read_names_the_parameter() {
        let ctx = test_context(
            "external",
            0,
            &[
                ("scalerAddress", "scaler:9090"),
                ("tlsCertFile", "/nonexistent/ca.pem"),
            ],
            &[],
            &[],
        );
        let config = ExternalConfig::parse(&ctx).expect("parses");
        let err = config
            .channel_key(&ctx)
            .await
            .expect_err("no file")
            .to_string();
        assert!(
            err.starts_with(
                "trigger 0 (external): parameter \"tlsCertFile\": \"/nonexistent/ca.pem\" is not under the trigger file root /etc/keda-rs/trigger-files"
            ),
            "{err}"
        );
    }

    fn spec(name: &str, size: i64, float: f64) -> proto::MetricSpec {
        proto::MetricSpec {
            metric_name: name.into(),
            target_size: size,
            target_size_float: float,
        }
    }

    #[test]
    fn metric_specs_prefer_the_float_target_and_keep_the_name() {
        let specs = metric_specs(
            2,
            MetricTargetType::AverageValue,
            false,
            &[spec("Queue.Depth", 10, 0.0), spec("lag", 10, 2.5)],
        )
        .expect("valid");
        let external: Vec<_> = specs
            .iter()
            .map(|s| s.external.as_ref().expect("External"))
            .collect();
        assert_eq!(external[0].metric.name, "s2-Queue.Depth", "not normalized");
        assert_eq!(
            external[0]
                .target
                .average_value
                .as_ref()
                .map(|q| q.0.as_str()),
            Some("10")
        );
        assert_eq!(
            external[1]
                .target
                .average_value
                .as_ref()
                .map(|q| q.0.as_str()),
            Some("2500m")
        );
        let value =
            metric_specs(0, MetricTargetType::Value, false, &[spec("m", 3, 0.0)]).expect("valid");
        let t = &value[0].external.as_ref().expect("External").target;
        assert_eq!(
            (t.type_.as_str(), t.value.as_ref().map(|q| q.0.as_str())),
            ("Value", Some("3"))
        );
    }

    #[test]
    fn unusable_metric_specs_are_refused_with_a_reason() {
        // (specs, scalingModifiers, error)
        let rows: [(&[proto::MetricSpec], bool, Option<&str>); 5] = [
            (&[], false, Some("no metric")),
            (
                &[spec("", 1, 0.0)],
                false,
                Some("a metric without a metricName"),
            ),
            (
                &[spec("m", 0, 0.0)],
                false,
                Some("a metric without a positive targetSizeFloat or targetSize"),
            ),
            (
                &[spec("m", -5, -1.0)],
                false,
                Some("a metric without a positive targetSizeFloat or targetSize"),
            ),
            // A formula has its own target.
            (&[spec("m", 0, 0.0)], true, None),
        ];
        for (specs, modifiers, expected) in rows {
            let got = metric_specs(0, MetricTargetType::AverageValue, modifiers, specs);
            assert_eq!(got.err().as_deref(), expected, "{specs:?}");
        }
    }

    #[test]
    fn metric_values_prefer_the_float_when_above_zero() {
        let v = |int: i64, float: f64| {
            metric_value(&proto::MetricValue {
                metric_name: "m".into(),
                metric_value: int,
                metric_value_float: float,
            })
        };
        assert_eq!(v(7, 0.0), 7.0);
        assert_eq!(v(7, 2.5), 2.5);
        assert_eq!(v(7, -1.0), 7.0);
        assert_eq!(v(-3, 0.0), -3.0);
        assert_eq!(v(i64::MAX, f64::NAN), 9.223_372_036_854_776e18);
    }
}
