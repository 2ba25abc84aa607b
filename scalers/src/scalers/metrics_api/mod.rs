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
use crate::error::{MetadataErrorKind, ScalerError, TriggerId};
use crate::http_client::{self, HttpClient, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{MAX_TIMEOUT_MS, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pool::Held;
use crate::remote::{Classify, Failure};
use crate::scaler::{BuiltScaler, MetricsAndActivity, Scaler};

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
#[derive(Clone, Debug)]
pub struct MetricsApiConfig {
    /// The endpoint.
    pub url: url::Url,
    /// How the answer is read.
    pub format: Format,
    /// `valueLocation` as written, for messages.
    pub value_location_text: String,
    /// `valueLocation`, parsed for the format.
    pub value_location: ValueLocation,
    /// The target (0 when the trigger only feeds `scalingModifiers`).
    pub target_value: f64,
    /// Active iff the value is above this.
    pub activation_target_value: f64,
    /// The pooled client's key: server, authentication, timeout.
    pub client: HttpClientKey,
    /// `s<index>-metric-api-<valueLocation>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// With `aggregateFromKubeServiceEndpoints`: the Service whose ready endpoints are asked,
    /// and how their values are combined.
    pub aggregate: Option<ServiceAggregate>,
}

impl MetricsApiConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A required parameter is missing (`targetValue` is optional only when the object uses
    /// `scalingModifiers`), a value is malformed (`url` not an http(s) URL, `valueLocation` not
    /// valid for the format), or the authentication block is incomplete.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let url: String = p.get(&URL)?;
            let url = parse_http_url(p, &URL, &url)?;
            let format_name: String = p.get(&FORMAT)?;
            let format = Format::parse(&format_name)
                .ok_or_else(|| p.rule(format!("format {format_name} not supported")))?;
            let value_location_text: String = p.get(&VALUE_LOCATION)?;
            let value_location =
                ValueLocation::parse(format, &value_location_text).map_err(|e| {
                    p.rule(format!(
                        "parameter \"valueLocation\": \"{value_location_text}\" is not valid for format {format_name}: {e}"
                    ))
                })?;
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
            let aggregate = if p.get::<bool>(&AGGREGATE_FROM_KUBE_SERVICE_ENDPOINTS)? {
                let aggregation = Aggregation::parse(&aggregation_type)
                    .ok_or_else(|| p.rule(format!("aggregationType {aggregation_type} not supported")))?;
                Some(ServiceAggregate::from_url(&url, aggregation).map_err(|e| {
                    p.rule(format!(
                        "parameter \"url\" with aggregateFromKubeServiceEndpoints: {e}"
                    ))
                })?)
            } else {
                None
            };
            let timeout_ms: Option<u64> = p.get_opt(&TIMEOUT)?;
            let timeout = timeout_ms
                .filter(|ms| *ms > 0)
                .map_or(ctx.global_http_timeout, Duration::from_millis);
            let auth = HttpAuth::parse(p, p.get(&UNSAFE_SSL)?)?;
            Ok(Self {
                client: HttpClientKey {
                    origin: http_client::origin(&url),
                    auth,
                    timeout,
                },
                url,
                format,
                metric_name: ctx.metric_name(&format!("metric-api-{value_location_text}")),
                value_location_text,
                value_location,
                target_value,
                activation_target_value: p.get(&ACTIVATION_TARGET_VALUE)?,
                metric_type,
                aggregate,
            })
        })?)
    }
}

/// A `metrics-api` scaler holding its share of the server's client.
pub struct MetricsApiScaler {
    config: MetricsApiConfig,
    trigger: TriggerId,
    client: Held<HttpClientKey, HttpClient>,
    /// The shared EndpointSlice view, with `aggregateFromKubeServiceEndpoints`.
    cluster: Option<Arc<dyn ClusterView>>,
}

impl MetricsApiScaler {
    /// Parses the trigger and leases the client of its server. Does not connect.
    ///
    /// # Errors
    /// Invalid metadata, TLS material that does not parse, or
    /// `aggregateFromKubeServiceEndpoints` without a cluster view in the context.
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = MetricsApiConfig::parse(ctx)?;
        let cluster = match &config.aggregate {
            Some(aggregate) => Some(
                ctx.cluster
                    .view()
                    .map_err(|e| ScalerError::Connect {
                        trigger: ctx.trigger_id(),
                        target: format!(
                            "the EndpointSlices of Service {}/{}",
                            aggregate.namespace, aggregate.service
                        ),
                        source: e.classify(),
                    })?
                    .clone(),
            ),
            None => None,
        };
        let lease = http_client::lease(ctx, config.client.clone()).await?;
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            client: Held::new(lease),
            cluster,
        })
    }

    /// The parsed trigger.
    pub fn config(&self) -> &MetricsApiConfig {
        &self.config
    }

    /// Asks the endpoint (or, with `aggregateFromKubeServiceEndpoints`, every ready endpoint
    /// of the Service) now and reads the value.
    ///
    /// # Errors
    /// The endpoint cannot be reached or answers an error, the answer does not parse, or
    /// `valueLocation` does not lead to a number; the scaler is closed. Messages name the URL
    /// (without credentials or query) and `valueLocation`. When aggregating: the Service has
    /// no ready endpoint, or none of them answered a value.
    pub async fn value(&self) -> Result<f64, ScalerError> {
        let client = self.client.client().ok_or_else(|| ScalerError::Closed {
            trigger: self.trigger.clone(),
        })?;
        match (&self.config.aggregate, &self.cluster) {
            (Some(aggregate), Some(cluster)) => {
                aggregate::value(self, &client, aggregate, cluster.as_ref()).await
            }
            _ => self.value_from(&client, &self.config.url).await,
        }
    }

    /// GETs `url` and reads the value at `valueLocation`.
    async fn value_from(&self, client: &HttpClient, url: &url::Url) -> Result<f64, ScalerError> {
        let body = client
            .get(url.clone(), &HeaderMap::new())
            .await
            .map_err(|e| ScalerError::Query {
                trigger: self.trigger.clone(),
                operation: format!("GET url {}", describe_url(url)),
                source: e.classify(),
            })?;
        self.config
            .value_location
            .value(&body)
            .map_err(|e| ScalerError::Query {
                trigger: self.trigger.clone(),
                operation: format!("GET url {}", describe_url(url)),
                // The reason is worded by keda-rs (types, positions, lengths); the body is at
                // debug level only.
                source: Failure::answer(
                    format!(
                        "valueLocation \"{}\" in the answer: {e}",
                        self.config.value_location_text
                    ),
                    &body,
                ),
            })
    }
}

#[async_trait]
impl Scaler for MetricsApiScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target_milli(self.config.metric_type, self.config.target_value),
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
            self.config.activation_target_value,
        ))
    }

    async fn close(&self) {
        self.client.release();
    }
}

/// Factory of `metrics-api`.
///
/// # Errors
/// See [`MetricsApiScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        MetricsApiScaler::build(&ctx).await?,
    )))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

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
        assert_eq!(config.client.origin, "http://dummy:1230");
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
            (
                &[("url", "ftp://h/x")],
                r#"trigger 1 (metrics-api): parameter "url" must be an http:// or https:// URL, not ftp:"#,
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
}
