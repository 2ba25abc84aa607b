//! `metrics-api`: scales on a number read from any HTTP endpoint's JSON, YAML, XML or Prometheus
//! text answer. Compatible with KEDA's `metrics-api` trigger
//! (`pkg/scalers/metrics_api_scaler.go`).
//!
//! Triggers asking the same server with the same credentials, TLS settings and timeout share one
//! pooled HTTP client.
//!
//! With `aggregateFromKubeServiceEndpoints`, the URL names a Service
//! (`http://<service>.<namespace>[.svc...]:<port>/<path>`); every ready endpoint of it, read from
//! the operator's shared EndpointSlice watch ([`crate::cluster::ClusterView`]), is asked, and
//! the answers are combined with `aggregationType`.

pub mod aggregate;
pub mod exposition;
pub mod format;
pub mod json_path;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::header::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use self::aggregate::{Aggregation, ServiceAggregate};
use self::format::{Format, ValueLocation};
use crate::authentication::{
    API_KEY, AUTH_MODES, BEARER_TOKEN, CA, CERT, CUSTOM_AUTH_HEADER, CUSTOM_AUTH_VALUE, HttpAuth,
    KEY, KEY_PARAM_NAME, METHOD, PASSWORD, USERNAME,
};
use crate::cluster::ClusterView;
use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{MAX_TIMEOUT_MS, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::remote::{Classify, Failure};
use crate::scaler::MetricsAndActivity;

const TARGET_VALUE: Param = Param::optional("targetValue");
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue").default("0");
const URL: Param = Param::required("url");
const FORMAT: Param =
    Param::optional("format")
        .default("json")
        .allowed(&["json", "yaml", "xml", "prometheus"]);
const VALUE_LOCATION: Param = Param::required("valueLocation");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const AGGREGATE_FROM_KUBE_SERVICE_ENDPOINTS: Param =
    Param::optional("aggregateFromKubeServiceEndpoints").default("false");
const AGGREGATION_TYPE: Param = Param::optional("aggregationType")
    .default("average")
    .allowed(&["average", "sum", "max", "min"]);
const TIMEOUT: Param = Param::optional("timeout").range(0.0, MAX_TIMEOUT_MS);

/// The parameters of `metrics-api`.
pub const PARAMS: &[Param] = &[
    TARGET_VALUE,
    ACTIVATION_TARGET_VALUE,
    URL,
    FORMAT,
    VALUE_LOCATION,
    UNSAFE_SSL,
    AGGREGATE_FROM_KUBE_SERVICE_ENDPOINTS,
    AGGREGATION_TYPE,
    TIMEOUT,
    AUTH_MODES,
    USERNAME,
    PASSWORD,
    BEARER_TOKEN,
    CERT,
    KEY,
    CA,
    CUSTOM_AUTH_HEADER,
    CUSTOM_AUTH_VALUE,
    API_KEY,
    METHOD,
    KEY_PARAM_NAME,
];

/// The parsed trigger.
///
/// KEDA refuses a trigger when it builds the scaler only for what its typed config checks
/// (`parseMetricsAPIMetadata`: required parameters, numbers, booleans, the `format` and
/// `aggregationType` lists, the authentication block); `url` and `valueLocation` are used as
/// written and fail only when it fetches. So here: a `url` that is not an absolute http(s) URL
/// with a host, a `valueLocation` the format cannot read, or a URL that does not name a Service
/// with `aggregateFromKubeServiceEndpoints` leaves the trigger built, and every read fails with
/// the error naming the parameter ([`MetricsApiConfig::endpoint`]); the object's other triggers
/// keep scaling it (issue 29, row 3).
#[derive(Clone, Debug)]
pub struct MetricsApiConfig {
    /// Where and how to ask, or why `url` or `valueLocation` cannot be used: each read fails
    /// with this error.
    pub endpoint: Result<Endpoint, MetadataError>,
    /// How the answer is read.
    pub format: Format,
    /// `valueLocation` as written, for messages.
    pub value_location_text: String,
    /// The target (0 when the trigger only feeds `scalingModifiers`).
    pub target_value: f64,
    /// Active iff the value is above this.
    pub activation_target_value: f64,
    /// `s<index>-metric-api-<valueLocation>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// A usable `url` and `valueLocation`.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The endpoint.
    pub url: url::Url,
    /// `valueLocation`, parsed for the format.
    pub value_location: ValueLocation,
    /// The pooled client's key: server, authentication, timeout.
    pub client: HttpClientKey,
    /// With `aggregateFromKubeServiceEndpoints`: the Service whose ready endpoints are asked,
    /// and how their values are combined.
    pub aggregate: Option<ServiceAggregate>,
}

impl MetricsApiConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A required parameter is missing (`targetValue` is optional only when the object uses
    /// `scalingModifiers`), a number, boolean or list value is malformed, or the
    /// authentication block is incomplete. A bad `url` or `valueLocation` is no error here: it
    /// is kept in [`MetricsApiConfig::endpoint`] for the reads.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let url_text: String = p.get(&URL)?;
            let url = parse_http_url(p, &URL, &url_text);
            let format_name: String = p.get(&FORMAT)?;
            let format = Format::parse(&format_name)
                .ok_or_else(|| p.rule(format!("format {format_name} not supported")))?;
            let value_location_text: String = p.get(&VALUE_LOCATION)?;
            let value_location =
                ValueLocation::parse(format, &value_location_text).map_err(|e| {
                    p.rule(format!(
                        "parameter \"valueLocation\": \"{value_location_text}\" is not valid for format {format_name}: {e}"
                    ))
                });
            let target_value = match p.find(&TARGET_VALUE)? {
                Some(found) => {
                    let value: f64 = p.parse(&TARGET_VALUE, found)?;
                    if value <= 0.0 && !ctx.as_metric_source {
                        return Err(p.invalid(&TARGET_VALUE, found, "a number above 0"));
                    }
                    value
                }
                None if ctx.as_metric_source => 0.0,
                None => {
                    return Err(p.error(MetadataErrorKind::Missing {
                        param: TARGET_VALUE.name.to_string(),
                    }));
                }
            };
            let aggregation_type: String = p.get(&AGGREGATION_TYPE)?;
            let aggregation = if p.get::<bool>(&AGGREGATE_FROM_KUBE_SERVICE_ENDPOINTS)? {
                Some(Aggregation::parse(&aggregation_type).ok_or_else(|| {
                    p.rule(format!("aggregationType {aggregation_type} not supported"))
                })?)
            } else {
                None
            };
            let timeout_ms: Option<u64> = p.get_opt(&TIMEOUT)?;
            let timeout = timeout_ms
                .filter(|ms| *ms > 0)
                .map_or(ctx.global_http_timeout, Duration::from_millis);
            let auth = HttpAuth::parse(p, p.get(&UNSAFE_SSL)?)?;
            let endpoint = url.and_then(|url| {
                let aggregate = aggregation
                    .map(|aggregation| {
                        ServiceAggregate::from_url(&url, aggregation).map_err(|e| {
                            p.rule(format!(
                                "parameter \"url\" with aggregateFromKubeServiceEndpoints: {e}"
                            ))
                        })
                    })
                    .transpose()?;
                Ok(Endpoint {
                    client: HttpClientKey {
                        origin: http_client::origin(&url),
                        auth,
                        timeout,
                    },
                    url,
                    value_location: value_location?,
                    aggregate,
                })
            });
            Ok(Self {
                endpoint,
                format,
                metric_name: ctx.metric_name(&format!("metric-api-{value_location_text}")),
                value_location_text,
                target_value,
                activation_target_value: p.get(&ACTIVATION_TARGET_VALUE)?,
                metric_type,
            })
        })?)
    }
}

/// The `metrics-api` source: the parsed trigger and, with `aggregateFromKubeServiceEndpoints`,
/// the operator's shared EndpointSlice view.
pub struct MetricsApi {
    config: MetricsApiConfig,
    /// The shared EndpointSlice view, with `aggregateFromKubeServiceEndpoints`.
    cluster: Option<Arc<dyn ClusterView>>,
}

/// A `metrics-api` scaler: the parsed trigger and its share of the server's client.
pub type MetricsApiScaler = Pooled<MetricsApi>;

impl MetricsApi {
    /// The parsed trigger.
    pub fn config(&self) -> &MetricsApiConfig {
        &self.config
    }

    /// The value at `valueLocation` in `body`.
    fn value_at(&self, endpoint: &Endpoint, body: &[u8]) -> Result<f64, String> {
        endpoint.value_location.value(body).map_err(|e| {
            format!(
                "valueLocation \"{}\" in the answer: {e}",
                self.config.value_location_text
            )
        })
    }

    /// GETs `url` and reads the value at `valueLocation`.
    async fn value_from(
        &self,
        call: &HttpCall<'_>,
        endpoint: &Endpoint,
        url: &url::Url,
    ) -> Result<f64, ScalerError> {
        let request = ApiRequest {
            url: url.clone(),
            headers: Cow::Owned(HeaderMap::new()),
            body: None,
        };
        let body = call.send(self, request).await?;
        self.value_at(endpoint, &body)
            .map_err(|reason| ScalerError::Query {
                trigger: call.read.trigger.clone(),
                operation: format!("GET url {}", describe_url(url)),
                // The reason is worded by keda-rs (types, positions, lengths); the body is at
                // debug level only.
                source: Failure::answer(reason, &body),
            })
    }
}

#[async_trait]
impl HttpApi for MetricsApi {
    /// The application's own endpoint: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        Ok(Self {
            config: MetricsApiConfig::parse(ctx)?,
            cluster: None,
        })
    }

    /// With `aggregateFromKubeServiceEndpoints`, the operator's EndpointSlice view.
    fn attach(&mut self, ctx: &ScalerContext) -> Result<(), ScalerError> {
        let Ok(Endpoint {
            aggregate: Some(aggregate),
            ..
        }) = &self.config.endpoint
        else {
            return Ok(());
        };
        let view = ctx.cluster.view().map_err(|e| ScalerError::Connect {
            trigger: ctx.trigger_id(),
            target: format!(
                "the EndpointSlices of Service {}/{}",
                aggregate.namespace, aggregate.service
            ),
            source: e.classify(),
        })?;
        self.cluster = Some(view.clone());
        Ok(())
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.config
            .endpoint
            .as_ref()
            .map(|e| e.client.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target_milli(self.config.metric_type, self.config.target_value),
        )]
    }

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let endpoint = self.config.endpoint.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest {
            url: endpoint.url.clone(),
            headers: Cow::Owned(HeaderMap::new()),
            body: None,
        })
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!("GET url {}", describe_url(&request.url))
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let endpoint = self.config.endpoint.as_ref().map_err(|e| e.to_string())?;
        let value = self.value_at(endpoint, body)?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.config.activation_target_value,
        ))
    }

    /// Asks the endpoint (or, with `aggregateFromKubeServiceEndpoints`, every ready endpoint
    /// of the Service) and reads the value. An answer that does not lead to a number fails as
    /// the query (naming `valueLocation`, the body at debug level only). A `url` or
    /// `valueLocation` that cannot be used fails here, at every read, naming the parameter.
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let endpoint = self
            .config
            .endpoint
            .as_ref()
            .map_err(|e| ScalerError::Metadata(e.clone()))?;
        let value = match (&endpoint.aggregate, &self.cluster) {
            (Some(aggregate), Some(cluster)) => {
                aggregate::value(self, call, endpoint, aggregate, cluster.as_ref()).await?
            }
            _ => self.value_from(call, endpoint, &endpoint.url).await?,
        };
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.config.activation_target_value,
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::scaler::Scaler;

    fn ctx(metadata: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("metrics-api", 1)
        }
    }

    #[test]
    fn metric_name_and_target_follow_keda() {
        let config = MetricsApiConfig::parse(&ctx(&[
            ("url", "http://dummy:1230/api/v1/"),
            ("valueLocation", "metric.test"),
            ("targetValue", "8.8"),
            ("activationTargetValue", "3.8"),
        ]))
        .unwrap();
        assert_eq!(config.metric_name, "s1-metric-api-metric-test");
        assert_eq!(config.format, Format::Json);
        assert_eq!(config.activation_target_value, 3.8);
        let target = metric_target_milli(config.metric_type, config.target_value);
        assert_eq!(target.average_value.map(|q| q.0), Some("8800m".into()));
        assert_eq!(
            config.endpoint.expect("a usable url").client.origin,
            "http://dummy:1230"
        );
    }

    #[test]
    fn target_value_is_optional_only_for_scaling_modifiers() {
        let metadata = [("url", "http://d/"), ("valueLocation", "v")];
        let err = MetricsApiConfig::parse(&ctx(&metadata)).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"trigger 1 (metrics-api): missing required parameter "targetValue""#
        );
        let source = ScalerContext {
            as_metric_source: true,
            ..ctx(&metadata)
        };
        assert_eq!(MetricsApiConfig::parse(&source).unwrap().target_value, 0.0);
    }

    #[test]
    fn errors_name_the_parameter() {
        let base = [
            ("url", "http://dummy:1230/api/v1/"),
            ("valueLocation", "components.0.tasks"),
            ("targetValue", "42"),
        ];
        // (metadata replacing the base entries, error)
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[("url", "")],
                r#"trigger 1 (metrics-api): missing required parameter "url""#,
            ),
            (
                &[("valueLocation", "")],
                r#"trigger 1 (metrics-api): missing required parameter "valueLocation""#,
            ),
            (
                &[("targetValue", "aa")],
                r#"trigger 1 (metrics-api): parameter "targetValue": "aa" is not a valid number"#,
            ),
            (
                &[("targetValue", "0")],
                r#"trigger 1 (metrics-api): parameter "targetValue": "0" is not a number above 0"#,
            ),
            (
                &[("activationTargetValue", "aa")],
                r#"trigger 1 (metrics-api): parameter "activationTargetValue": "aa" is not a valid number"#,
            ),
            (
                &[("format", "csv")],
                r#"trigger 1 (metrics-api): parameter "format": "csv" is not one of json, yaml, xml, prometheus"#,
            ),
            (
                &[("aggregationType", "median")],
                r#"trigger 1 (metrics-api): parameter "aggregationType": "median" is not one of average, sum, max, min"#,
            ),
            (
                &[("unsafeSsl", "yes")],
                r#"trigger 1 (metrics-api): parameter "unsafeSsl": "yes" is not a valid boolean"#,
            ),
            (
                &[("authMode", "bearer")],
                r#"trigger 1 (metrics-api): missing required parameter "bearerToken" (TriggerAuthentication) for authModes bearer"#,
            ),
        ];
        for (i, (changes, expected)) in rows.iter().enumerate() {
            let mut metadata: BTreeMap<&str, &str> = base.iter().copied().collect();
            metadata.extend(changes.iter().copied());
            let pairs: Vec<(&str, &str)> = metadata.into_iter().collect();
            let err = MetricsApiConfig::parse(&ctx(&pairs)).expect_err("invalid");
            assert_eq!(err.to_string(), *expected, "row {i}");
        }
    }

    /// KEDA's `parseMetricsAPIMetadata` takes `url` and `valueLocation` as written; they fail
    /// when it fetches. So the trigger builds and every read fails, naming the parameter (issue
    /// 29, row 3).
    #[tokio::test]
    async fn a_bad_url_or_value_location_builds_and_fails_at_every_read_naming_it() {
        let base = [
            ("url", "http://dummy:1230/api/v1/"),
            ("valueLocation", "components.0.tasks"),
            ("targetValue", "42"),
        ];
        // (metadata replacing the base entries, error of every read)
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[("url", "not a url")],
                r#"trigger 1 (metrics-api): parameter "url" is not a valid URL (relative URL without a base); write it as http://host:port/path"#,
            ),
            (
                &[("url", "/api/v1/stats")],
                r#"trigger 1 (metrics-api): parameter "url" is not a valid URL (relative URL without a base); write it as http://host:port/path"#,
            ),
            (
                &[("url", "ftp://h/x")],
                r#"trigger 1 (metrics-api): parameter "url" must be an http:// or https:// URL, not ftp:"#,
            ),
            (
                &[
                    ("url", "http://web:8080/m"),
                    ("aggregateFromKubeServiceEndpoints", "true"),
                ],
                r#"trigger 1 (metrics-api): parameter "url" with aggregateFromKubeServiceEndpoints: the host must be <service>.<namespace> (optionally followed by .svc.cluster.local), not "web""#,
            ),
            (
                &[("valueLocation", "components.*.tasks")],
                "trigger 1 (metrics-api): parameter \"valueLocation\": \"components.*.tasks\" is not valid for format json: wildcards (`*`) are not supported; escape it as `\\*` if it is part of a key",
            ),
            (
                &[
                    ("format", "prometheus"),
                    ("valueLocation", "queue{name=~\"a\"}"),
                ],
                "trigger 1 (metrics-api): parameter \"valueLocation\": \"queue{name=~\"a\"}\" is not valid for format prometheus: regex matchers (=~, !~) are not supported; match label \"name\" with = or !=",
            ),
        ];
        for (i, (changes, expected)) in rows.iter().enumerate() {
            let mut metadata: BTreeMap<&str, &str> = base.iter().copied().collect();
            metadata.extend(changes.iter().copied());
            let pairs: Vec<(&str, &str)> = metadata.into_iter().collect();
            let config = MetricsApiConfig::parse(&ctx(&pairs)).expect("builds, as in KEDA");
            assert_eq!(
                config.endpoint.as_ref().expect_err("unusable").to_string(),
                *expected,
                "row {i}"
            );
            let scaler = MetricsApiScaler::build(&ctx(&pairs))
                .await
                .expect("builds, as in KEDA");
            assert_eq!(
                scaler.metric_specs()[0]
                    .external
                    .as_ref()
                    .map(|e| e.metric.name.as_str()),
                Some(config.metric_name.as_str()),
                "row {i}: the HPA gets the metric"
            );
            for _ in 0..2 {
                let err = scaler
                    .metrics_and_activity(&config.metric_name)
                    .await
                    .expect_err("every read fails");
                assert_eq!(err.to_string(), *expected, "row {i}");
            }
            scaler.close().await;
        }
        // What KEDA's typed config refuses still refuses the build.
        let err = MetricsApiConfig::parse(&ctx(&[("url", "not a url"), ("valueLocation", "v")]))
            .expect_err("no targetValue");
        assert_eq!(
            err.to_string(),
            r#"trigger 1 (metrics-api): missing required parameter "targetValue""#
        );
    }
}
