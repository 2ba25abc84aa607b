//! `elastic-forecast`: scales on the value an Elasticsearch machine learning anomaly detection
//! job forecasts for `lookAhead` from now. Compatible with KEDA's `elastic-forecast` trigger
//! (`pkg/scalers/elastic_forecast_scaler.go`).
//!
//! Two Elasticsearch APIs: the forecast API
//! (<https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-ml-forecast>,
//! `POST /_ml/anomaly_detectors/<job_id>/_forecast` with `duration` and `expires_in`) creates a
//! forecast of twice `lookAhead`, renewed once less than `lookAhead` of it remains; the search
//! API (<https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-search>) reads
//! the forecast's results from the job's results indices (`.ml-anomalies-<index>`, documents of
//! `result_type` `model_forecast`,
//! <https://www.elastic.co/docs/explore-analyze/machine-learning/anomaly-detection/ml-ad-forecast>):
//! the `forecast_prediction` of the latest bucket at or before now + `lookAhead`.
//!
//! KEDA creates and renews the forecast in a goroutine of its own; keda-rs does it in the poll
//! that finds it missing or due, by the scaler's clock, so tests control it.

pub mod response;

use std::borrow::Cow;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, HttpGetError, describe_url, parse_http_url};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::remote::Failure;
use crate::scaler::MetricsAndActivity;
use crate::scalers::elasticsearch::{api_key_auth, cloud_address};
use crate::scalers::rabbitmq::config::KedaDuration;
use crate::secret::Secret;
use crate::tls::TlsSettings;

// The connection parameters are elasticsearch's (KEDA's elastic-forecast reads them alike).
use crate::scalers::elasticsearch::{ADDRESSES, API_KEY, CLOUD_ID, PASSWORD, UNSAFE_SSL, USERNAME};

const JOB_ID: Param = Param::required("jobID");
const LOOK_AHEAD: Param = Param::optional("lookAhead").default("10m");
const TARGET_VALUE: Param = Param::required("targetValue");
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue").default("0");
const INDEX: Param = Param::optional("index").default("*");
const PARTITION_FIELD_VALUE: Param = Param::optional("partitionFieldValue");
const BY_FIELD_VALUE: Param = Param::optional("byFieldValue");

/// The parameters of `elastic-forecast`.
pub const PARAMS: &[Param] = &[
    ADDRESSES,
    UNSAFE_SSL,
    USERNAME,
    PASSWORD,
    CLOUD_ID,
    API_KEY,
    JOB_ID,
    LOOK_AHEAD,
    TARGET_VALUE,
    ACTIVATION_TARGET_VALUE,
    INDEX,
    PARTITION_FIELD_VALUE,
    BY_FIELD_VALUE,
];

/// The forecasts a trigger has created: the current one and the one before it (read while
/// the new one is not yet indexed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Forecasts {
    /// The current forecast's id and when it was created.
    pub current: Option<(String, jiff::Timestamp)>,
    /// The forecast before the last renewal.
    pub previous: Option<String>,
}

/// The parsed trigger.
#[derive(Debug)]
pub struct ElasticForecastConfig {
    /// The cluster's address (the first of `addresses`, or the Cloud ID's) and the client key.
    pub server: (url::Url, HttpClientKey),
    /// `jobID`.
    pub job_id: String,
    /// `lookAhead`: how far ahead the forecast is read.
    pub look_ahead: Duration,
    /// `index`: the results indices are `.ml-anomalies-<index>`.
    pub index: String,
    /// `partitionFieldValue`.
    pub partition_field_value: Option<String>,
    /// `byFieldValue`.
    pub by_field_value: Option<String>,
    /// The target.
    pub target: f64,
    /// Active iff the forecast value is above this.
    pub activation: f64,
    /// `s<index>-elastic-forecast-<jobID>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The forecasts created so far (by this scaler).
    forecasts: tokio::sync::Mutex<Forecasts>,
    headers: HeaderMap,
}

impl ElasticForecastConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// KEDA's rules between `addresses`, `username`, `password`, `cloudID` and `apiKey`; a
    /// missing `jobID` or `targetValue`; `lookAhead` not positive; `targetValue` not above 0;
    /// an address that is not an http(s) URL, a Cloud ID that does not decode.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let addresses: Vec<String> = p.get_opt(&ADDRESSES)?.unwrap_or_default();
            let unsafe_ssl: bool = p.get(&UNSAFE_SSL)?;
            let username: Option<String> = p.get_opt(&USERNAME)?;
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let cloud_id: Option<String> = p.get_opt(&CLOUD_ID)?;
            let api_key: Option<Secret> = p.get_opt(&API_KEY)?;
            let job_id: String = p.get(&JOB_ID)?;
            let look_ahead: KedaDuration = p.get(&LOOK_AHEAD)?;
            let target: f64 = p.get(&TARGET_VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_TARGET_VALUE)?;
            let index: String = p.get(&INDEX)?;
            let partition_field_value: Option<String> = p.get_opt(&PARTITION_FIELD_VALUE)?;
            let by_field_value: Option<String> = p.get_opt(&BY_FIELD_VALUE)?;
            // KEDA's Validate, in its order and words.
            let cloud = cloud_id.is_some() || api_key.is_some();
            let endpoint = !addresses.is_empty();
            if cloud && endpoint {
                return Err(p.rule(
                    "cannot provide both cloud config (cloudID/apiKey) and endpoint addresses",
                ));
            }
            if cloud_id.is_some() != api_key.is_some() {
                return Err(p.rule("cloudID and apiKey must both be provided together"));
            }
            if !endpoint && (username.is_some() || password.is_some()) {
                return Err(p.rule("username and password provided but no addresses specified"));
            }
            if !cloud && !endpoint {
                return Err(p.rule(
                    "must provide either cloud config (cloudID + apiKey) or endpoint addresses",
                ));
            }
            if look_ahead.0.is_zero() {
                return Err(p.rule("parameter \"lookAhead\": lookAhead must be positive"));
            }
            if target <= 0.0 {
                return Err(p.rule("parameter \"targetValue\": targetValue must be greater than 0"));
            }
            let tls = TlsSettings {
                insecure: unsafe_ssl,
                ..TlsSettings::default()
            };
            let (url, auth) = match (cloud_id, api_key, username, password) {
                (Some(cloud_id), Some(api_key), _, _) => {
                    let url = cloud_address(&cloud_id).map_err(|why| p.rule(why))?;
                    (url, api_key_auth(p, &api_key, tls)?)
                }
                (_, _, Some(username), Some(password)) => {
                    // The Go client tries the addresses in turn; keda-rs asks the first.
                    let url = parse_http_url(p, &ADDRESSES, &addresses[0])?;
                    let auth = HttpAuth {
                        modes: vec![AuthMode::Basic],
                        basic: Some((username, password)),
                        tls,
                        ..HttpAuth::default()
                    };
                    (url, auth)
                }
                _ => {
                    return Err(p.rule(
                        "username and password must both be provided when addresses is used",
                    ));
                }
            };
            let key = HttpClientKey {
                origin: http_client::origin(&url),
                auth,
                timeout: ctx.global_http_timeout,
            };
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            Ok(Self {
                server: (url, key),
                metric_name: ctx.metric_name(&format!("elastic-forecast-{job_id}")),
                job_id,
                look_ahead: look_ahead.0,
                index,
                partition_field_value,
                by_field_value,
                target,
                activation,
                metric_type,
                forecasts: tokio::sync::Mutex::new(Forecasts::default()),
                headers,
            })
        })?)
    }

    /// The forecast's `duration` and `expires_in`: twice `lookAhead`.
    pub fn forecast_duration(&self) -> Duration {
        self.look_ahead.saturating_mul(2)
    }

    /// `<base>/<segments...>`.
    fn url(&self, segments: &[&str]) -> url::Url {
        let mut url = self.server.0.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    /// `POST /_ml/anomaly_detectors/<job_id>/_forecast` with
    /// `{"duration":"<s>s","expires_in":"<s>s"}` (whole seconds, rounded up, as KEDA sends).
    pub fn forecast_request(&self) -> ApiRequest<'_> {
        let seconds = self.forecast_duration().as_secs()
            + u64::from(self.forecast_duration().subsec_nanos() > 0);
        let duration = format!("{seconds}s");
        let body = serde_json::json!({"duration": duration, "expires_in": duration});
        ApiRequest::post(
            self.url(&["_ml", "anomaly_detectors", &self.job_id, "_forecast"]),
            Cow::Borrowed(&self.headers),
            Bytes::from(body.to_string()),
        )
    }

    /// `POST /.ml-anomalies-<index>/_search`: the latest `model_forecast` bucket of
    /// `forecast_id` at or before `now` + `lookAhead`, its `forecast_prediction` only.
    pub fn bucket_request(&self, forecast_id: &str, now: jiff::Timestamp) -> ApiRequest<'_> {
        let target = now
            .checked_add(
                jiff::SignedDuration::try_from(self.look_ahead)
                    .unwrap_or(jiff::SignedDuration::MAX),
            )
            .unwrap_or(jiff::Timestamp::MAX);
        let mut filters = vec![
            serde_json::json!({"term": {"job_id": self.job_id}}),
            serde_json::json!({"term": {"forecast_id": forecast_id}}),
            serde_json::json!({"term": {"result_type": "model_forecast"}}),
        ];
        if let Some(value) = &self.partition_field_value {
            filters.push(serde_json::json!({"term": {"partition_field_value": value}}));
        }
        if let Some(value) = &self.by_field_value {
            filters.push(serde_json::json!({"term": {"by_field_value": value}}));
        }
        filters.push(serde_json::json!({"range": {"timestamp": {"lte": target.as_millisecond()}}}));
        let body = serde_json::json!({
            "size": 1,
            "query": {"bool": {"filter": filters}},
            "sort": [{"timestamp": {"order": "desc"}}],
            "_source": ["forecast_prediction", "timestamp"],
        });
        ApiRequest::post(
            self.url(&[&format!(".ml-anomalies-{}", self.index), "_search"]),
            Cow::Borrowed(&self.headers),
            Bytes::from(body.to_string()),
        )
    }

    /// Whether a forecast created at `created` is due for renewal at `now`: less than half of
    /// its window (`lookAhead`) remains, KEDA's `forecastRenewThreshold`.
    pub fn due(&self, created: jiff::Timestamp, now: jiff::Timestamp) -> bool {
        let age = now.duration_since(created);
        age.is_negative() || age.unsigned_abs() >= self.look_ahead
    }

    /// The forecast to read at `now`, creating (or renewing) it first when it is missing or
    /// due. A failed renewal keeps the current forecast, as in KEDA.
    ///
    /// # Errors
    /// No forecast exists and creating one failed.
    async fn forecast(&self, call: &HttpCall<'_>) -> Result<Forecasts, ScalerError> {
        let mut forecasts = self.forecasts.lock().await;
        let now = call.read.now();
        let needed = match &forecasts.current {
            None => true,
            Some((_, created)) => self.due(*created, now),
        };
        if needed {
            match self.create(call).await {
                Ok(id) => {
                    if let Some((old, _)) = forecasts.current.take() {
                        forecasts.previous = Some(old);
                    }
                    forecasts.current = Some((id, now));
                }
                Err(e) if forecasts.current.is_none() => return Err(e),
                Err(e) => {
                    tracing::warn!(trigger = %call.read.trigger, error = %e, "elastic-forecast: renewing the forecast failed; reading the current one");
                }
            }
        }
        Ok(forecasts.clone())
    }

    async fn create(&self, call: &HttpCall<'_>) -> Result<String, ScalerError> {
        let request = self.forecast_request();
        let answer = call.send(self, request).await?;
        response::forecast_id(&answer).map_err(|why| call.read.unexpected(why))
    }

    /// The bucket's prediction of `forecast_id`, `None` when no bucket matched.
    async fn bucket(
        &self,
        call: &HttpCall<'_>,
        forecast_id: &str,
    ) -> Result<Option<f64>, ScalerError> {
        let request = self.bucket_request(forecast_id, call.read.now());
        let answer = call.send(self, request).await?;
        response::prediction(&answer).map_err(|why| call.read.unexpected(why))
    }
}

/// An `elastic-forecast` scaler.
pub type ElasticForecastScaler = Pooled<ElasticForecastConfig>;

#[async_trait]
impl HttpApi for ElasticForecastConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        ElasticForecastConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        Ok(self.server.1.clone())
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.target),
        )]
    }

    /// The search of the current forecast (for [`HttpApi::operation`] and the fuzzers); a read
    /// is [`HttpApi::fetch`].
    fn request(&self, now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        Ok(self.bucket_request("", now))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        let what = if request.url.path().ends_with("/_forecast") {
            "creating a forecast of ML job"
        } else {
            "reading the forecast of ML job"
        };
        format!(
            "elastic-forecast: {what} {} on {}",
            self.job_id,
            describe_url(&request.url)
        )
    }

    fn error_answer(&self, status: StatusCode, body: &[u8]) -> Option<Failure> {
        Some(crate::scalers::search::error_answer(
            "elasticsearch",
            &HttpGetError::Status {
                status,
                content_type: None,
                body: Bytes::copy_from_slice(body),
            },
        ))
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let value = response::prediction(body)?.unwrap_or(0.0);
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation,
        ))
    }

    /// Creates or renews the forecast when needed, then reads the bucket of now + `lookAhead`
    /// from the current forecast, else from the previous one (the new one may not be indexed
    /// yet), else 0, as KEDA reads it.
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let forecasts = self.forecast(call).await?;
        let mut value = None;
        for id in forecasts
            .current
            .iter()
            .map(|(id, _)| id)
            .chain(forecasts.previous.iter())
        {
            value = self.bucket(call, id).await?;
            if value.is_some() {
                break;
            }
        }
        Ok(MetricsAndActivity::single(
            metric_name,
            value.unwrap_or(0.0),
            self.activation,
        ))
    }
}

#[cfg(test)]
mod tests;
