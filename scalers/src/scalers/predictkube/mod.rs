//! `predictkube`: scales on a forecast by Dysnix's PredictKube ML engine from the history of a
//! Prometheus query. Compatible with KEDA's `predictkube` trigger
//! (`pkg/scalers/predictkube_scaler.go`).
//!
//! A poll asks Prometheus for the query's samples over `historyTimeWindow` at `queryStep`
//! (`/api/v1/query_range`), sends them to the engine's `GetPredictMetric` with the horizon in
//! steps and the trigger's API key ([`engine`]), and reports the larger of the forecast and the
//! last sample; the trigger is active when the last sample is above `activationThreshold`.
//!
//! The Prometheus side is the `prometheus` scaler's pooled HTTP client (same server, same
//! credentials: the same client); the engine side is one shared gRPC channel.

pub mod engine;
pub mod response;
#[cfg(test)]
mod tests;

/// The engine's gRPC API as keda-rs declares it (`scalers/proto/predictkube.proto`), generated
/// at build time: the messages, the client and the service trait a (test) engine implements.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("services");
}

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use self::engine::EngineKey;
use self::response::Sample;
use crate::authentication::{
    AUTH_MODES, BEARER_TOKEN, CA, CERT, CUSTOM_AUTH_HEADER, CUSTOM_AUTH_VALUE, HttpAuth, KEY,
    KEY_PARAM_NAME, METHOD, PASSWORD, USERNAME,
};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClient, HttpClientKey, HttpGetError, describe_url};
use crate::metadata::{AUTH, Param, ParamValue};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pool::Lease;
use crate::pooled::{PooledSource, ReadCtx};
use crate::remote::{Classify, Failure};
use crate::scaler::{MetricValue, MetricsAndActivity};
use crate::scalers::external::channel::ExternalChannel;
use crate::secret::Secret;

const PREDICT_HORIZON: Param = Param::required("predictHorizon");
const HISTORY_TIME_WINDOW: Param = Param::required("historyTimeWindow");
const PROMETHEUS_ADDRESS: Param = Param::required("prometheusAddress");
const QUERY: Param = Param::required("query");
const QUERY_STEP: Param = Param::required("queryStep");
const THRESHOLD: Param = Param::optional("threshold");
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold").default("0");
/// The engine's API key: TriggerAuthentication only. With `authModes: apiKey` the same key
/// also goes to Prometheus, as in KEDA (both read `apiKey`).
const API_KEY: Param = Param::required("apiKey").order(AUTH).secret();

/// The parameters of `predictkube`: KEDA's, and the Prometheus authentication block KEDA's
/// `authentication.Config` reads (its `apiKey` is the engine's, above).
pub const PARAMS: &[Param] = &[
    PREDICT_HORIZON,
    HISTORY_TIME_WINDOW,
    PROMETHEUS_ADDRESS,
    QUERY,
    QUERY_STEP,
    THRESHOLD,
    ACTIVATION_THRESHOLD,
    API_KEY,
    AUTH_MODES,
    USERNAME,
    PASSWORD,
    BEARER_TOKEN,
    CERT,
    KEY,
    CA,
    CUSTOM_AUTH_HEADER,
    CUSTOM_AUTH_VALUE,
    METHOD,
    KEY_PARAM_NAME,
];

/// KEDA's step when `queryStep` is zero: 5 minutes.
pub const DEFAULT_STEP: Duration = Duration::from_secs(300);

/// KEDA's metric name before the index: `predictkube-predictkube_metric`.
pub const METRIC_NAME: &str = "predictkube-predictkube_metric";

/// A duration as KEDA's `str2duration.ParseDuration` reads it: Go's `time.ParseDuration` (`90s`,
/// `1h30m`, `1.5h`, `500ms`, `0`) with days (`d`, 24 h) and weeks (`w`, 7 d) besides. A
/// negative duration is refused (KEDA would send a nonsense range or horizon).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KedaDuration(pub Duration);

impl ParamValue for KedaDuration {
    const EXPECTED: &'static str =
        "a duration of at least 0 with a unit (ns, us, ms, s, m, h, d, w), e.g. 2m, 2h or 7d";

    fn parse_param(raw: &str, _: &Param) -> Option<Self> {
        parse_duration(raw).map(KedaDuration)
    }
}

/// See [`KedaDuration`]; `None` for a malformed, negative or overlong (beyond Go's ~292 years)
/// duration.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.starts_with('-') {
        return None;
    }
    rest = rest.strip_prefix('+').unwrap_or(rest);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        if number.is_empty() || number == "." {
            return None;
        }
        let number: f64 = number.parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86_400e9,
            "w" => 604_800e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        nanos += number * unit;
    }
    // Go's durations are i64 nanoseconds.
    #[allow(clippy::cast_precision_loss)]
    let max = i64::MAX as f64;
    if !nanos.is_finite() || nanos > max {
        return None;
    }
    Duration::try_from_secs_f64(nanos / 1e9).ok()
}

/// The Prometheus server of a trigger.
#[derive(Clone, Debug)]
pub struct PrometheusTarget {
    /// `prometheusAddress/api/v1/query_range`.
    pub range_url: url::Url,
    /// The pooled client's key: server, authentication, timeout.
    pub client: HttpClientKey,
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct PredictKubeConfig {
    /// Where the history comes from.
    pub prometheus: PrometheusTarget,
    /// The PromQL query.
    pub query: String,
    /// `predictHorizon`.
    pub predict_horizon: Duration,
    /// `historyTimeWindow`.
    pub history_time_window: Duration,
    /// `queryStep` ([`DEFAULT_STEP`] when it is zero).
    pub step: Duration,
    /// The engine's API key.
    pub api_key: Secret,
    /// The target (`threshold`).
    pub threshold: f64,
    /// Active iff the last sample is above this.
    pub activation_threshold: f64,
    /// Where the engine is.
    pub engine: EngineKey,
    /// `s<index>-predictkube-predictkube_metric`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// Whether `key` has the form go-playground's `jwt` validator checks: three base64url parts
/// separated by dots, the last one possibly empty.
pub fn is_jwt(key: &str) -> bool {
    let part = |p: &str| {
        p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let mut parts = key.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(a), Some(b), Some(c), None) => {
            !a.is_empty() && !b.is_empty() && part(a) && part(b) && part(c)
        }
        _ => false,
    }
}

impl PredictKubeConfig {
    /// Parses the trigger. Never connects.
    ///
    /// # Errors
    /// A required parameter is missing; a duration, `threshold` or `activationThreshold` is
    /// malformed; `prometheusAddress` is not an http(s) URL; `apiKey` is not a JWT; `threshold`
    /// is absent or 0 (unless the object uses `scalingModifiers`); the authentication block is
    /// incomplete.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let address: String = p.get(&PROMETHEUS_ADDRESS)?;
            // KEDA validates it as a URL and pings the server when it builds the scaler: an
            // address that is not an http(s) URL never builds there either.
            let server = http_client::parse_http_url(p, &PROMETHEUS_ADDRESS, &address)?;
            let query: String = p.get(&QUERY)?;
            let KedaDuration(predict_horizon) = p.get(&PREDICT_HORIZON)?;
            let KedaDuration(step) = p.get(&QUERY_STEP)?;
            let KedaDuration(history_time_window) = p.get(&HISTORY_TIME_WINDOW)?;
            let api_key: Secret = p.get(&API_KEY)?;
            if !is_jwt(api_key.expose()) {
                return Err(p.rule(
                    "parameter \"apiKey\" (TriggerAuthentication) is not a JWT (three \
                     base64url parts separated by dots), the form of PredictKube's API keys",
                ));
            }
            let threshold: f64 = p.get_opt(&THRESHOLD)?.unwrap_or(0.0);
            if threshold == 0.0 && !ctx.as_metric_source {
                return Err(
                    p.rule("parameter \"threshold\" must be given and not 0 (it is the target)")
                );
            }
            let auth = HttpAuth::parse(p, false)?;
            let mut range_url = server.clone();
            range_url.set_path(&format!(
                "{}/api/v1/query_range",
                server.path().trim_end_matches('/')
            ));
            Ok(Self {
                prometheus: PrometheusTarget {
                    range_url,
                    client: HttpClientKey {
                        origin: http_client::origin(&server),
                        auth,
                        timeout: ctx.global_http_timeout,
                    },
                },
                query,
                predict_horizon,
                history_time_window,
                step: if step.is_zero() { DEFAULT_STEP } else { step },
                api_key,
                threshold,
                activation_threshold: p.get(&ACTIVATION_THRESHOLD)?,
                engine: EngineKey::resolve(&ctx.vendor_endpoints),
                metric_name: ctx.metric_name(METRIC_NAME),
                metric_type,
            })
        })?)
    }

    /// The engine's horizon in steps: `predictHorizon / queryStep`, whole steps (Go divides
    /// the two durations as integers).
    pub fn forecast_horizon(&self) -> u64 {
        let steps = self.predict_horizon.as_nanos() / self.step.as_nanos().max(1);
        u64::try_from(steps).unwrap_or(u64::MAX)
    }

    /// The range query's parameters at `now`: `query`, `start` (`now - historyTimeWindow`),
    /// `end` (`now`), `step`, times in seconds as client_golang writes them.
    ///
    /// # Errors
    /// `now - historyTimeWindow` is before the year -9999 (jiff's range).
    pub fn range_parameters(&self, now: jiff::Timestamp) -> Result<Vec<(String, String)>, String> {
        let window = jiff::SignedDuration::try_from(self.history_time_window)
            .map_err(|_| "parameter \"historyTimeWindow\" is too long".to_string())?;
        let start = now
            .checked_sub(window)
            .map_err(|_| "parameter \"historyTimeWindow\" reaches before the year -9999")?;
        Ok(vec![
            ("query".to_string(), self.query.clone()),
            ("start".to_string(), prometheus_time(start)),
            ("end".to_string(), prometheus_time(now)),
            ("step".to_string(), format!("{}", self.step.as_secs_f64())),
        ])
    }

    fn operation(&self) -> String {
        format!(
            "prometheus range query `{}` on prometheusAddress {}",
            self.query,
            describe_url(&self.prometheus.range_url)
        )
    }

    fn query_failure(&self, read: ReadCtx<'_>, e: &HttpGetError) -> ScalerError {
        let failure = match e {
            HttpGetError::Status { status, body, .. } => {
                crate::scalers::prometheus::response::api_error(body).map_or_else(
                    || e.classify(),
                    |error_type| {
                        Failure::new(
                            crate::remote::Kind::Server {
                                system: "Prometheus",
                                code: Some(format!("{error_type} (HTTP {})", status.as_u16())),
                            },
                            Some(String::from_utf8_lossy(body).into_owned()),
                        )
                    },
                )
            }
            _ => e.classify(),
        };
        ScalerError::Query {
            trigger: read.trigger.clone(),
            operation: self.operation(),
            source: failure,
        }
    }

    /// The history: the range query's samples, asked as client_golang asks (a form `POST`,
    /// a `GET` when the server does not take `POST`).
    async fn history(
        &self,
        client: &HttpClient,
        read: ReadCtx<'_>,
    ) -> Result<Vec<Sample>, ScalerError> {
        let parameters = self
            .range_parameters(read.now())
            .map_err(|message| read.unexpected(message))?;
        // Built in one expression: the serializer is not `Send` and must not live across an
        // await.
        let form = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&parameters)
            .finish();
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let answer = client
            .post(
                self.prometheus.range_url.clone(),
                &headers,
                Bytes::from(form),
            )
            .await;
        let answer = match answer {
            Err(HttpGetError::Status {
                status: StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_IMPLEMENTED,
                ..
            }) => {
                let mut url = self.prometheus.range_url.clone();
                url.query_pairs_mut().extend_pairs(&parameters);
                client.get(url, &HeaderMap::new()).await
            }
            other => other,
        };
        let body = answer.map_err(|e| self.query_failure(read, &e))?;
        response::samples(&body, &self.query).map_err(|message| read.unexpected(message))
    }

    /// What the engine is sent for `history`.
    pub fn engine_request(&self, history: &[Sample]) -> proto::ReqGetPredictMetric {
        proto::ReqGetPredictMetric {
            forecast_horizon: self.forecast_horizon(),
            observations: history
                .iter()
                .map(|s| {
                    let (seconds, nanos) = s.seconds_nanos();
                    proto::Item {
                        timestamp: Some(proto::Timestamp { seconds, nanos }),
                        value: s.value,
                        metric_name: self.metric_name.clone(),
                    }
                })
                .collect(),
        }
    }
}

/// A time as client_golang sends it: seconds since the epoch, with a fraction when there is one.
fn prometheus_time(t: jiff::Timestamp) -> String {
    #[allow(clippy::cast_precision_loss)]
    let seconds = t.as_second() as f64 + f64::from(t.subsec_nanosecond()) / 1e9;
    format!("{seconds}")
}

/// KEDA's value and activity from the forecast and the history: the value is the larger of
/// the forecast and the last sample (0 without history), and no value at all when that is 0;
/// active iff the last sample is above `activation_threshold`.
pub fn report(
    metric_name: &str,
    forecast: i64,
    history: &[Sample],
    activation_threshold: f64,
) -> MetricsAndActivity {
    let last = history.last().map_or(0.0, |s| s.value);
    // i64 -> f64 rounds beyond 2^53, as KEDA's float64(...) does.
    #[allow(clippy::cast_precision_loss)]
    let forecast = forecast as f64;
    let value = if forecast < last { last } else { forecast };
    if value == 0.0 {
        // KEDA answers an empty list and inactive for a zero value.
        return MetricsAndActivity {
            values: Vec::new(),
            active: false,
        };
    }
    MetricsAndActivity {
        values: vec![MetricValue::new(metric_name, value)],
        active: last > activation_threshold,
    }
}

/// What triggers share: the Prometheus client and the engine channel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PredictKubeKey {
    /// The Prometheus server, credentials and timeout.
    pub prometheus: HttpClientKey,
    /// The engine.
    pub engine: EngineKey,
}

/// The shared clients of a [`PredictKubeKey`]: leases on the pooled Prometheus client (the one
/// `prometheus` triggers on the same server and credentials use) and on the engine channel.
pub struct PredictKubeClients {
    prometheus: Lease<HttpClientKey, HttpClient>,
    engine: Lease<EngineKey, ExternalChannel>,
}

/// A `predictkube` scaler.
pub type PredictKubeScaler = crate::pooled::Pooled<PredictKubeConfig>;

/// No adaptive polling: every poll is also a call to the engine, a billed API with a quota per
/// key, so the operator keeps to `pollingInterval`.
#[async_trait]
impl PooledSource for PredictKubeConfig {
    type Key = PredictKubeKey;
    type Client = PredictKubeClients;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        PredictKubeConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<PredictKubeKey, MetadataError> {
        Ok(PredictKubeKey {
            prometheus: self.prometheus.client.clone(),
            engine: self.engine.clone(),
        })
    }

    async fn connect(
        ctx: &ScalerContext,
        key: PredictKubeKey,
    ) -> Result<Lease<PredictKubeKey, PredictKubeClients>, ScalerError> {
        ctx.clients
            .pool::<PredictKubeKey, PredictKubeClients>()
            .get_or_connect(key.clone(), || async move {
                Ok::<_, ScalerError>(PredictKubeClients {
                    prometheus: http_client::lease(ctx, key.prometheus).await?,
                    engine: engine::lease(ctx, key.engine).await?,
                })
            })
            .await
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.threshold),
        )]
    }

    async fn read(
        &self,
        client: &PredictKubeClients,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let history = self.history(&client.prometheus, read).await?;
        let request = self.engine_request(&history);
        let answer = engine::predict(&client.engine, &self.api_key, request)
            .await
            .map_err(|source| ScalerError::Query {
                trigger: read.trigger.clone(),
                operation: format!(
                    "GetPredictMetric on the PredictKube engine at {}",
                    self.engine.address()
                ),
                source,
            })?;
        Ok(report(
            metric_name,
            answer.result_metric,
            &history,
            self.activation_threshold,
        ))
    }
}
