//! `azure-app-insights`: scales on an Application Insights metric, as KEDA's
//! `azure-app-insights` trigger does (`pkg/scalers/azure_app_insights_scaler.go`,
//! `pkg/scalers/azure/azure_app_insights.go`): the Application Insights REST API
//! [Metrics - Get](https://learn.microsoft.com/en-us/rest/api/application-insights/metrics/get)
//! (`GET <endpoint>/v1/apps/<applicationInsightsId>/metrics/<metricId>?aggregation=..&filter=..&timespan=PT<hh>H<mm>M`),
//! the value of `value.<metricId>.<metricAggregationType>` in the answer.
//!
//! Authentication is a service principal's client secret ([`crate::azure::aad`]) with the
//! scope `<endpoint>/.default`; every trigger with the same cloud, principal and timeout shares
//! one client and its token.
//!
//! # Caveats
//! KEDA asks the public cloud's authority for every token although it parses
//! `activeDirectoryEndpoint`; keda-rs asks the authority that parameter (or the cloud) names.

use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::azure::aad::{self, AadClient, AadKey, ClientSecret, Cloud, CredentialParams};
use crate::context::ScalerContext;
use crate::error::{ScalerError, Source};
use crate::http_client::describe_url;
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{KeyedSource, ReadCtx};
use crate::scaler::MetricsAndActivity;

const METADATA: &[Source] = &[Source::Metadata];
const METADATA_AUTH_ENV: &[Source] = &[Source::Metadata, Source::Auth, Source::Env];
const AUTH_ENV: &[Source] = &[Source::Auth, Source::Env];

const TARGET_VALUE: Param = Param::optional("targetValue").order(METADATA);
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue")
    .order(METADATA)
    .default("0");
const METRIC_ID: Param = Param::required("metricId").order(METADATA);
const METRIC_AGGREGATION_TIMESPAN: Param =
    Param::required("metricAggregationTimespan").order(METADATA);
const METRIC_AGGREGATION_TYPE: Param = Param::required("metricAggregationType").order(METADATA);
const METRIC_FILTER: Param = Param::optional("metricFilter").order(METADATA);
const IGNORE_NULL_VALUES: Param = Param::optional("ignoreNullValues")
    .order(METADATA)
    .default("false");
const CLOUD: Param = Param::optional("cloud").order(METADATA);
const APP_INSIGHTS_RESOURCE_URL: Param = Param::optional("appInsightsResourceURL").order(METADATA);
const APPLICATION_INSIGHTS_ID: Param =
    Param::required("applicationInsightsId").order(METADATA_AUTH_ENV);
const TENANT_ID: Param = Param::required("tenantId").order(METADATA_AUTH_ENV);
const CLIENT_ID: Param = Param::optional("activeDirectoryClientId").order(METADATA_AUTH_ENV);
const CLIENT_PASSWORD: Param = Param::optional("activeDirectoryClientPassword")
    .order(AUTH_ENV)
    .secret();
const ACTIVE_DIRECTORY_ENDPOINT: Param = Param::optional("activeDirectoryEndpoint").order(METADATA);

/// The parameters of `azure-app-insights`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    TARGET_VALUE,
    ACTIVATION_TARGET_VALUE,
    METRIC_ID,
    METRIC_AGGREGATION_TIMESPAN,
    METRIC_AGGREGATION_TYPE,
    METRIC_FILTER,
    IGNORE_NULL_VALUES,
    CLOUD,
    APP_INSIGHTS_RESOURCE_URL,
    APPLICATION_INSIGHTS_ID,
    TENANT_ID,
    CLIENT_ID,
    CLIENT_PASSWORD,
    ACTIVE_DIRECTORY_ENDPOINT,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct AppInsightsConfig {
    /// `targetValue`.
    pub target_value: f64,
    /// `activationTargetValue`.
    pub activation: f64,
    /// `metricId` (`requests/count`, `customMetrics/queueLength`).
    pub metric_id: String,
    /// `metricAggregationType` (`avg`, `sum`, `min`, `max`, `count`).
    pub aggregation: String,
    /// `metricAggregationTimespan`'s `hh` and `mm`.
    pub timespan: (String, String),
    /// `metricFilter`.
    pub filter: Option<String>,
    /// `ignoreNullValues`: a metric or aggregation missing from the answer is 0.
    pub ignore_null_values: bool,
    /// `applicationInsightsId`.
    pub application_id: String,
    /// `s<index>-azure-app-insights-<metricId>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub target_type: MetricTargetType,
    /// The client's key.
    pub key: AadKey,
}

impl AppInsightsConfig {
    /// Parses the trigger as KEDA's `parseAzureAppInsightsMetadata`.
    ///
    /// # Errors
    /// A required parameter missing, `metricAggregationTimespan` not `hh:mm`, `targetValue` 0
    /// (unless the trigger is a metric source), an unknown `cloud`, `cloud: Private` without
    /// `appInsightsResourceURL` or `activeDirectoryEndpoint`, no client id or secret.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let target_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let target_value: f64 = p.get_opt(&TARGET_VALUE)?.unwrap_or(0.0);
            let activation: f64 = p.get(&ACTIVATION_TARGET_VALUE)?;
            let metric_id: String = p.get(&METRIC_ID)?;
            let timespan: String = p.get(&METRIC_AGGREGATION_TIMESPAN)?;
            let aggregation: String = p.get(&METRIC_AGGREGATION_TYPE)?;
            let filter: Option<String> = p.get_opt(&METRIC_FILTER)?;
            let ignore_null_values: bool = p.get(&IGNORE_NULL_VALUES)?;
            let application_id: String = p.get(&APPLICATION_INSIGHTS_ID)?;
            let _tenant: String = p.get(&TENANT_ID)?;
            let Some((hours, minutes)) = timespan.split_once(':').filter(|(_, m)| !m.contains(':'))
            else {
                return Err(
                    p.rule("metricAggregationTimespan not in the correct format. Should be hh:mm")
                );
            };
            if target_value == 0.0 && !ctx.as_metric_source {
                return Err(p.rule("no targetValue given"));
            }
            let resource = match aad::parse_cloud(p, &CLOUD)? {
                Cloud::Known(cloud) => aad::https_param(p, &CLOUD, cloud.app_insights)?,
                Cloud::Private => {
                    let Some(text) = p.get_opt::<String>(&APP_INSIGHTS_RESOURCE_URL)? else {
                        return Err(p.rule(
                            "appInsightsResourceURL must be provided for Private cloud type",
                        ));
                    };
                    aad::https_param(p, &APP_INSIGHTS_RESOURCE_URL, &text)?
                }
            };
            let authority = aad::active_directory_endpoint(p, &CLOUD, &ACTIVE_DIRECTORY_ENDPOINT)?;
            let credentials = ClientSecret::parse(
                p,
                &CredentialParams {
                    tenant: TENANT_ID,
                    client_id: CLIENT_ID,
                    secret: CLIENT_PASSWORD,
                },
                &[&CLIENT_ID, &CLIENT_PASSWORD],
            )?;
            let segments = application_id.split('/').chain(metric_id.split('/'));
            if segments
                .clone()
                .any(|s| s.is_empty() || s == "." || s == "..")
            {
                return Err(p.rule(
                    "applicationInsightsId and the parts of metricId must not be empty, \".\" or \
                     \"..\"",
                ));
            }
            Ok(Self {
                metric_name: ctx.metric_name(&format!("azure-app-insights-{metric_id}")),
                target_value,
                activation,
                aggregation,
                timespan: (hours.to_string(), minutes.to_string()),
                filter,
                ignore_null_values,
                application_id,
                target_type,
                key: AadKey {
                    scope: aad::scope_of(resource.as_str()),
                    api: ctx.vendor_endpoints.redirect(resource),
                    authority,
                    credentials,
                    insecure: false,
                    timeout: ctx.global_http_timeout,
                },
                metric_id,
            })
        })?)
    }

    /// The Metrics - Get request.
    ///
    /// # Errors
    /// `metricAggregationTimespan`'s numbers cannot be read (KEDA's "errors parsing time").
    pub fn request_url(&self) -> Result<url::Url, String> {
        let number = |s: &str| s.parse::<i64>().ok();
        let (Some(hours), Some(minutes)) = (number(&self.timespan.0), number(&self.timespan.1))
        else {
            return Err(
                "errors parsing time: metricAggregationTimespan's hours and minutes must be \
                 integers"
                    .into(),
            );
        };
        let mut url = self.key.api.clone();
        url.path_segments_mut()
            .map_err(|()| "the Application Insights URL cannot have a path".to_string())?
            .pop_if_empty()
            .extend(["v1", "apps"])
            .extend(self.application_id.split('/'))
            .push("metrics")
            .extend(self.metric_id.split('/'));
        {
            // Sorted by name, as Go's url.Values.Encode sends them.
            let mut q = url.query_pairs_mut();
            q.append_pair("aggregation", &self.aggregation);
            if let Some(filter) = &self.filter {
                q.append_pair("filter", filter);
            }
            q.append_pair("timespan", &format!("PT{hours:02}H{minutes:02}M"));
        }
        Ok(url)
    }
}

/// The value of a Metrics - Get answer (`{"value":{"start","end","<metricId>":{"<aggregation>":<number>}}}`),
/// as KEDA's `extractAppInsightValue` reads it.
///
/// # Errors
/// Not JSON with a `value` object (always an error); the metric or the aggregation absent, null
/// or not a number (`Ok(None)`-like errors: the caller maps them to 0 with
/// `ignoreNullValues`), returned as `Err(Missing)`.
pub fn metric_value(body: &[u8], metric_id: &str, aggregation: &str) -> Result<f64, AnswerError> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        value: serde_json::Map<String, serde_json::Value>,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        AnswerError::Shape(format!(
            "the Application Insights answer is not a metrics result: {}",
            crate::remote::json_error(&e)
        ))
    })?;
    let Some(metric) = answer.value.get(metric_id) else {
        return Err(AnswerError::Missing(format!(
            "metric named {metric_id} not found in app insights response"
        )));
    };
    match metric.get(aggregation) {
        None => Err(AnswerError::Missing(format!(
            "metric {metric_id} did not contain aggregation type {aggregation}"
        ))),
        Some(serde_json::Value::Null) => Err(AnswerError::Missing(format!(
            "metric {metric_id} was nil for aggregation type {aggregation}"
        ))),
        Some(serde_json::Value::Number(n)) => n
            .as_f64()
            .filter(|v| v.is_finite())
            .ok_or_else(|| AnswerError::Missing("the value is not a finite number".into())),
        Some(other) => Err(AnswerError::Missing(format!(
            "metric {metric_id}'s {aggregation} is a {}, not a number",
            crate::remote::json_type(other)
        ))),
    }
}

/// Why an answer gave no value.
#[derive(Debug, PartialEq, Eq)]
pub enum AnswerError {
    /// Not the documented shape.
    Shape(String),
    /// The metric or its aggregation has no number (0 with `ignoreNullValues`).
    Missing(String),
}

#[async_trait::async_trait]
impl KeyedSource for AppInsightsConfig {
    type Client = AadClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        AppInsightsConfig::parse(ctx)
    }

    fn key(&self) -> &AadKey {
        &self.key
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.target_type, self.target_value),
        )]
    }

    async fn read(
        &self,
        client: &AadClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let url = self.request_url().map_err(|why| read.unexpected(why))?;
        let operation = format!(
            "Application Insights metric {} of app {} on {}",
            self.metric_id,
            self.application_id,
            describe_url(&self.key.api)
        );
        let body = client
            .call(read, &operation, url, None, &http::HeaderMap::new())
            .await?;
        let value = match metric_value(&body, &self.metric_id, &self.aggregation) {
            Ok(value) => value,
            Err(AnswerError::Missing(_)) if self.ignore_null_values => 0.0,
            Err(AnswerError::Missing(why) | AnswerError::Shape(why)) => {
                return Err(read.unexpected(why));
            }
        };
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)]) -> Result<AppInsightsConfig, ScalerError> {
        let mut all = vec![
            ("metricId", "customMetrics/queueLength"),
            ("metricAggregationTimespan", "0:5"),
            ("metricAggregationType", "avg"),
            ("targetValue", "10"),
            ("applicationInsightsIdFromEnv", "APP"),
            ("tenantId", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
        ];
        all.retain(|(k, _)| !metadata.iter().any(|(m, _)| m == k));
        all.extend(metadata.iter().filter(|(_, v)| !v.is_empty()));
        AppInsightsConfig::parse(&test_context(
            "azure-app-insights",
            1,
            &all,
            &[("APP", "0c5a5ea8-2e0a-4e4b-a0a5-3b2b3a1c0001")],
            &[
                ("activeDirectoryClientId", "app"),
                ("activeDirectoryClientPassword", "s3cret"),
            ],
        ))
    }

    #[test]
    fn parameters_follow_keda() {
        let c = parse(&[]).expect("valid");
        assert_eq!(
            c.metric_name,
            "s1-azure-app-insights-customMetrics-queueLength"
        );
        assert_eq!(c.key.scope, "https://api.applicationinsights.io/.default");
        let url = c.request_url().expect("url");
        assert_eq!(
            url.as_str(),
            "https://api.applicationinsights.io/v1/apps/0c5a5ea8-2e0a-4e4b-a0a5-3b2b3a1c0001/metrics/customMetrics/queueLength?aggregation=avg&timespan=PT00H05M"
        );
        let c = parse(&[
            ("cloud", "Private"),
            ("appInsightsResourceURL", "https://ai.local"),
            ("activeDirectoryEndpoint", "https://login.local/"),
            ("metricFilter", "cloud/roleName eq 'worker'"),
        ])
        .expect("valid");
        assert_eq!(c.key.authority.as_str(), "https://login.local/");
        assert_eq!(
            c.request_url().expect("url").query(),
            Some("aggregation=avg&filter=cloud%2FroleName+eq+%27worker%27&timespan=PT00H05M")
        );
        let c = parse(&[("metricAggregationTimespan", "x:5")]).expect("built");
        assert!(
            c.request_url()
                .expect_err("x")
                .contains("errors parsing time")
        );
    }

    #[test]
    fn bad_input_names_the_parameter() {
        let err = |m: &[(&str, &str)]| parse(m).expect_err("invalid").to_string();
        assert!(err(&[("metricAggregationTimespan", "00:05:00")]).contains("hh:mm"));
        assert!(err(&[("targetValue", "")]).contains("no targetValue given"));
        assert!(err(&[("metricId", "")]).contains("metricId"));
        assert!(err(&[("cloud", "AzureGermanCloud")]).contains("cloud"));
        assert!(err(&[("cloud", "Private")]).contains("appInsightsResourceURL"));
        assert!(
            err(&[
                ("cloud", "Private"),
                ("appInsightsResourceURL", "https://ai.local")
            ])
            .contains("activeDirectoryEndpoint must be provided")
        );
        assert!(err(&[("metricId", "a/../b")]).contains("metricId"));
        // The client secret never goes to a plain-text authority.
        assert!(
            err(&[
                ("cloud", "Private"),
                ("appInsightsResourceURL", "https://ai.local"),
                ("activeDirectoryEndpoint", "http://login.local/")
            ])
            .contains("parameter \"activeDirectoryEndpoint\" must be an https:// URL")
        );
    }

    #[test]
    fn answers_are_read_as_keda_reads_them() {
        let body = br#"{"value":{"start":"2023-11-14T22:08:20Z","end":"2023-11-14T22:13:20Z","customMetrics/queueLength":{"avg":7.5}}}"#;
        assert_eq!(
            metric_value(body, "customMetrics/queueLength", "avg"),
            Ok(7.5)
        );
        assert!(matches!(
            metric_value(body, "customMetrics/queueLength", "sum"),
            Err(AnswerError::Missing(m)) if m.contains("did not contain aggregation type sum")
        ));
        assert!(matches!(
            metric_value(body, "requests/count", "sum"),
            Err(AnswerError::Missing(m)) if m.contains("not found")
        ));
        let null = br#"{"value":{"m":{"avg":null}}}"#;
        assert!(
            matches!(metric_value(null, "m", "avg"), Err(AnswerError::Missing(m)) if m.contains("nil"))
        );
        let text = br#"{"value":{"m":{"avg":"s3cret"}}}"#;
        assert!(
            matches!(metric_value(text, "m", "avg"), Err(AnswerError::Missing(m)) if !m.contains("s3cret"))
        );
        assert!(matches!(
            metric_value(b"<html>", "m", "avg"),
            Err(AnswerError::Shape(_))
        ));
    }
}
