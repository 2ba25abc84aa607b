//! `azure-monitor`: scales on an Azure Monitor platform metric of one resource, as KEDA's
//! `azure-monitor` trigger does (`pkg/scalers/azure_monitor_scaler.go`, through azquery's
//! `MetricsClient.QueryResource`): the Azure Resource Manager REST API
//! [Metrics - List](https://learn.microsoft.com/en-us/rest/api/monitor/metrics/list)
//! (`GET <ARM>/subscriptions/<s>/resourceGroups/<g>/providers/<namespace>/<type>/<name>/providers/Microsoft.Insights/metrics`,
//! api-version `2018-01-01`) with the metric's name, namespace, filter, aggregation and the
//! last `metricAggregationInterval` (5 minutes by default) as the timespan; the value is the
//! aggregation of the last data point of the first time series.
//!
//! Authentication is a service principal's client secret ([`crate::azure::aad`]); every
//! trigger with the same cloud, principal and timeout shares one client and its token.
//!
//! # Caveats
//! - KEDA answers an answer without exactly one metric with the value -1 and no error;
//!   keda-rs reports an error naming the count.
//! - KEDA's `cloud: Private` keeps Azure's public Resource Manager for the request;
//!   keda-rs sends it to `azureResourceManagerEndpoint`, with a token for that audience.
//! - KEDA asks the public cloud's authority for every token; keda-rs asks the cloud's own
//!   (`login.microsoftonline.us`, `login.chinacloudapi.cn`), or with `cloud: Private` the
//!   optional `activeDirectoryEndpoint`.

use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::azure::aad::{self, AadClient, AadKey, ClientSecret, CredentialParams};
use crate::context::ScalerContext;
use crate::error::{ScalerError, Source};
use crate::http_client::describe_url;
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{KeyedSource, ReadCtx};
use crate::scaler::MetricsAndActivity;

const METADATA: &[Source] = &[Source::Metadata];
const METADATA_ENV_AUTH: &[Source] = &[Source::Metadata, Source::Env, Source::Auth];

const TARGET_VALUE: Param = Param::required("targetValue").order(METADATA);
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue")
    .order(METADATA)
    .default("0");
const RESOURCE_URI: Param = Param::required("resourceURI").order(METADATA);
const TENANT_ID: Param = Param::required("tenantId").order(METADATA);
const SUBSCRIPTION_ID: Param = Param::required("subscriptionId").order(METADATA);
const RESOURCE_GROUP_NAME: Param = Param::required("resourceGroupName").order(METADATA);
const METRIC_NAME: Param = Param::required("metricName").order(METADATA);
const METRIC_NAMESPACE: Param = Param::optional("metricNamespace").order(METADATA);
const METRIC_FILTER: Param = Param::optional("metricFilter").order(METADATA);
const METRIC_AGGREGATION_INTERVAL: Param =
    Param::optional("metricAggregationInterval").order(METADATA);
const METRIC_AGGREGATION_TYPE: Param = Param::required("metricAggregationType").order(METADATA);
const CLIENT_ID: Param = Param::optional("activeDirectoryClientId").order(METADATA_ENV_AUTH);
const CLIENT_PASSWORD: Param = Param::optional("activeDirectoryClientPassword")
    .order(METADATA_ENV_AUTH)
    .secret();
const CLOUD: Param = Param::optional("cloud").order(METADATA);
const RESOURCE_MANAGER_ENDPOINT: Param =
    Param::optional("azureResourceManagerEndpoint").order(METADATA);
const ACTIVE_DIRECTORY_ENDPOINT: Param = Param::optional("activeDirectoryEndpoint").order(METADATA);

/// The parameters of `azure-monitor`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    TARGET_VALUE,
    ACTIVATION_TARGET_VALUE,
    RESOURCE_URI,
    TENANT_ID,
    SUBSCRIPTION_ID,
    RESOURCE_GROUP_NAME,
    METRIC_NAME,
    METRIC_NAMESPACE,
    METRIC_FILTER,
    METRIC_AGGREGATION_INTERVAL,
    METRIC_AGGREGATION_TYPE,
    CLIENT_ID,
    CLIENT_PASSWORD,
    CLOUD,
    RESOURCE_MANAGER_ENDPOINT,
    ACTIVE_DIRECTORY_ENDPOINT,
];

/// The API version azquery's `MetricsClient` sends.
pub const API_VERSION: &str = "2018-01-01";
/// The timespan without `metricAggregationInterval` (KEDA's `formatTimeSpan`).
pub const DEFAULT_TIMESPAN_SECONDS: i64 = 300;
/// azquery's `PossibleAggregationTypeValues` (compared exactly at parse time, as KEDA does).
pub const AGGREGATION_TYPES: &[&str] = &["Average", "Count", "Maximum", "Minimum", "None", "Total"];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct AzureMonitorConfig {
    /// `targetValue`.
    pub target_value: f64,
    /// `activationTargetValue`.
    pub activation: f64,
    /// `/subscriptions/<s>/resourceGroups/<g>/providers/<namespace>/<type>/<name>` as path
    /// segments.
    pub resource: Vec<String>,
    /// `metricName`.
    pub metric: String,
    /// `metricNamespace`.
    pub namespace: Option<String>,
    /// `metricFilter`.
    pub filter: Option<String>,
    /// From `metricAggregationInterval` (`hh:mm:ss`), seconds; why its numbers cannot be read
    /// (every read fails, as in KEDA).
    pub timespan_seconds: Result<i64, String>,
    /// `metricAggregationType`.
    pub aggregation: String,
    /// `s<index>-azure-monitor-<metricName>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub target_type: MetricTargetType,
    /// The client's key.
    pub key: AadKey,
}

impl AzureMonitorConfig {
    /// Parses the trigger as KEDA's `parseAzureMonitorMetadata`.
    ///
    /// # Errors
    /// A required parameter missing, `targetValue` 0 (unless the trigger is a metric source),
    /// `resourceURI` not `namespace/type/name`, an unknown `metricAggregationType`,
    /// `metricAggregationInterval` not `hh:mm:ss`, an unknown `cloud`, `cloud: Private`
    /// without `azureResourceManagerEndpoint`, no client id or secret.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let target_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let target_value: f64 = p.get(&TARGET_VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_TARGET_VALUE)?;
            let resource_uri: String = p.get(&RESOURCE_URI)?;
            let _tenant: String = p.get(&TENANT_ID)?;
            let subscription: String = p.get(&SUBSCRIPTION_ID)?;
            let group: String = p.get(&RESOURCE_GROUP_NAME)?;
            let metric: String = p.get(&METRIC_NAME)?;
            let namespace: Option<String> = p.get_opt(&METRIC_NAMESPACE)?;
            let filter: Option<String> = p.get_opt(&METRIC_FILTER)?;
            let interval: Option<String> = p.get_opt(&METRIC_AGGREGATION_INTERVAL)?;
            let aggregation: String = p.get(&METRIC_AGGREGATION_TYPE)?;
            let parts: Vec<&str> = resource_uri.split('/').collect();
            if parts.len() != 3 {
                return Err(p.rule(
                    "resourceURI not in the correct format. Should be \
                     namespace/resource_type/resource_name",
                ));
            }
            if !AGGREGATION_TYPES.contains(&aggregation.as_str()) {
                return Err(p.rule(format!(
                    "invalid metricAggregationType given: one of {}",
                    AGGREGATION_TYPES.join(", ")
                )));
            }
            let timespan_seconds = match interval {
                None => Ok(DEFAULT_TIMESPAN_SECONDS),
                Some(text) => {
                    let fields: Vec<&str> = text.split(':').collect();
                    if fields.len() != 3 {
                        return Err(p.rule(
                            "metricAggregationInterval not in the correct format. Should be \
                             hh:mm:ss",
                        ));
                    }
                    hh_mm_ss(&fields)
                }
            };
            let (api, authority) = aad::cloud_endpoints(
                p,
                &CLOUD,
                |cloud| cloud.resource_manager,
                &RESOURCE_MANAGER_ENDPOINT,
                &ACTIVE_DIRECTORY_ENDPOINT,
            )?;
            if target_value == 0.0 && !ctx.as_metric_source {
                return Err(p.rule("no targetValue given"));
            }
            let credentials = ClientSecret::parse(
                p,
                &CredentialParams {
                    tenant: TENANT_ID,
                    client_id: CLIENT_ID,
                    secret: CLIENT_PASSWORD,
                },
                &[&CLIENT_ID, &CLIENT_PASSWORD],
            )?;
            let scope = aad::scope_of(api.as_str());
            let api = ctx.vendor_endpoints.redirect(api);
            let mut resource = vec![
                "subscriptions".to_string(),
                subscription,
                "resourceGroups".into(),
                group,
                "providers".into(),
            ];
            resource.extend(parts.iter().map(|s| (*s).to_string()));
            if resource
                .iter()
                .any(|s| s.is_empty() || s == "." || s == "..")
            {
                return Err(p.rule(
                    "subscriptionId, resourceGroupName and the parts of resourceURI must not be \
                     empty, \".\" or \"..\"",
                ));
            }
            Ok(Self {
                metric_name: ctx.metric_name(&format!("azure-monitor-{metric}")),
                target_value,
                activation,
                resource,
                metric,
                namespace,
                filter,
                timespan_seconds,
                aggregation,
                target_type,
                key: AadKey {
                    api,
                    authority,
                    credentials,
                    scope,
                    insecure: false,
                    timeout: ctx.global_http_timeout,
                },
            })
        })?)
    }

    /// The Metrics - List request at `now` (Unix seconds).
    ///
    /// # Errors
    /// `metricAggregationInterval`'s numbers cannot be read (KEDA's "errors parsing
    /// metricAggregationInterval").
    pub fn request_url(&self, now: i64) -> Result<url::Url, String> {
        let seconds = self.timespan_seconds.clone()?;
        let mut url = self.key.api.clone();
        url.path_segments_mut()
            .map_err(|()| "the Resource Manager URL cannot have a path".to_string())?
            .pop_if_empty()
            .extend(&self.resource)
            .extend(["providers", "Microsoft.Insights", "metrics"]);
        let rfc3339 = |s: i64| {
            jiff::Timestamp::from_second(s)
                .map(|t| t.to_string())
                .map_err(|_| "metricAggregationInterval is out of range".to_string())
        };
        let timespan = format!(
            "{}/{}",
            rfc3339(now.saturating_sub(seconds))?,
            rfc3339(now)?
        );
        {
            // Sorted by name, as Go's url.Values.Encode sends them.
            let mut q = url.query_pairs_mut();
            if let Some(filter) = &self.filter {
                q.append_pair("$filter", filter);
            }
            q.append_pair("aggregation", &self.aggregation)
                .append_pair("api-version", API_VERSION)
                .append_pair("metricnames", &self.metric);
            if let Some(namespace) = &self.namespace {
                q.append_pair("metricnamespace", namespace);
            }
            q.append_pair("timespan", &timespan);
        }
        Ok(url)
    }
}

/// `hh`, `mm`, `ss` as seconds (Go's `strconv.Atoi` of each).
fn hh_mm_ss(fields: &[&str]) -> Result<i64, String> {
    let number = |s: &str| s.parse::<i64>().ok();
    match (number(fields[0]), number(fields[1]), number(fields[2])) {
        (Some(h), Some(m), Some(s)) => Ok(h
            .saturating_mul(3600)
            .saturating_add(m.saturating_mul(60))
            .saturating_add(s)),
        _ => Err(
            "errors parsing metricAggregationInterval: hours, minutes and seconds must be \
                  integers"
                .to_string(),
        ),
    }
}

/// The value of a Metrics - List answer (`Response`): the one metric's first time series, its
/// last data point's `aggregation` (`average`, `total`, `maximum`, `minimum`, `count`; matched
/// case-insensitively, as KEDA's `verifyAggregationTypeIsSupported`).
///
/// # Errors
/// Not the documented shape, not exactly one metric, no time series, no data, or no value of
/// the aggregation in the last point. Messages never quote the answer.
pub fn metric_value(body: &[u8], aggregation: &str) -> Result<f64, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        value: Option<Vec<Metric>>,
    }
    #[derive(serde::Deserialize)]
    struct Metric {
        #[serde(default)]
        timeseries: Option<Vec<Series>>,
    }
    #[derive(serde::Deserialize)]
    struct Series {
        #[serde(default)]
        data: Option<Vec<Point>>,
    }
    #[derive(serde::Deserialize)]
    struct Point {
        #[serde(default)]
        average: Option<f64>,
        #[serde(default)]
        total: Option<f64>,
        #[serde(default)]
        maximum: Option<f64>,
        #[serde(default)]
        minimum: Option<f64>,
        #[serde(default)]
        count: Option<f64>,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Azure Monitor answer is not a metrics Response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let metrics = answer.value.unwrap_or_default();
    if metrics.len() != 1 {
        return Err(format!(
            "the Azure Monitor answer holds {} metrics, expected 1",
            metrics.len()
        ));
    }
    let Some(series) = metrics
        .into_iter()
        .next()
        .and_then(|m| m.timeseries)
        .and_then(|t| t.into_iter().next())
    else {
        return Err("got metric result without timeseries".into());
    };
    let Some(last) = series.data.and_then(|mut d| d.pop()) else {
        return Err("got metric result without any metric values".into());
    };
    let value = match aggregation.to_ascii_lowercase().as_str() {
        "average" => last.average,
        "total" => last.total,
        "maximum" => last.maximum,
        "minimum" => last.minimum,
        "count" => last.count,
        _ => return Err(format!("unsupported aggregation type {aggregation}")),
    };
    let value = value.ok_or_else(|| {
        format!("the last data point has no {aggregation} value (unsupported aggregation type)")
    })?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err("the value is not a finite number".into())
    }
}

#[async_trait::async_trait]
impl KeyedSource for AzureMonitorConfig {
    type Client = AadClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        AzureMonitorConfig::parse(ctx)
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
        let url = self
            .request_url(read.now().as_second())
            .map_err(|why| read.unexpected(why))?;
        let operation = format!(
            "Azure Monitor metrics {} of {} on {}",
            self.metric,
            self.resource[5..].join("/"),
            describe_url(&self.key.api)
        );
        let body = client
            .call(read, &operation, url, None, &http::HeaderMap::new())
            .await?;
        let value = metric_value(&body, &self.aggregation).map_err(|why| read.unexpected(why))?;
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

    const BASE: &[(&str, &str)] = &[
        (
            "resourceURI",
            "Microsoft.ContainerService/managedClusters/aks",
        ),
        ("tenantId", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
        ("subscriptionId", "sub-1"),
        ("resourceGroupName", "rg"),
        ("metricName", "kube_pod_status_ready"),
        ("metricAggregationType", "Average"),
        ("targetValue", "5"),
        ("activeDirectoryClientId", "app"),
    ];

    fn parse(metadata: &[(&str, &str)]) -> Result<AzureMonitorConfig, ScalerError> {
        let mut all: Vec<(&str, &str)> = BASE
            .iter()
            .filter(|(k, _)| !metadata.iter().any(|(m, _)| m == k))
            .copied()
            .collect();
        all.extend(metadata.iter().filter(|(_, v)| !v.is_empty()));
        AzureMonitorConfig::parse(&test_context(
            "azure-monitor",
            2,
            &all,
            &[],
            &[("activeDirectoryClientPassword", "s3cret")],
        ))
    }

    fn err(metadata: &[(&str, &str)]) -> String {
        parse(metadata).expect_err("invalid").to_string()
    }

    #[test]
    fn parameters_follow_keda() {
        let c = parse(&[]).expect("valid");
        assert_eq!(c.metric_name, "s2-azure-monitor-kube_pod_status_ready");
        assert_eq!(c.key.scope, "https://management.azure.com/.default");
        assert_eq!(
            c.key.authority.as_str(),
            "https://login.microsoftonline.com/"
        );
        assert_eq!(
            c.key.token_url().expect("url").as_str(),
            "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/v2.0/token"
        );
        let url = c.request_url(1_700_000_000).expect("url");
        assert_eq!(
            url.path(),
            "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks/providers/Microsoft.Insights/metrics"
        );
        assert_eq!(
            url.query(),
            Some(
                "aggregation=Average&api-version=2018-01-01&metricnames=kube_pod_status_ready&timespan=2023-11-14T22%3A08%3A20Z%2F2023-11-14T22%3A13%3A20Z"
            )
        );
        let c = parse(&[
            ("metricAggregationInterval", "0:1:30"),
            ("metricFilter", "namespace eq 'default'"),
            ("metricNamespace", "insights.container/pods"),
            ("cloud", "azureChinaCloud"),
        ])
        .expect("valid");
        assert_eq!(c.key.scope, "https://management.chinacloudapi.cn/.default");
        assert_eq!(c.key.authority.as_str(), "https://login.chinacloudapi.cn/");
        let q: Vec<(String, String)> = c
            .request_url(1_700_000_000)
            .expect("url")
            .query_pairs()
            .into_owned()
            .collect();
        assert_eq!(q[0], ("$filter".into(), "namespace eq 'default'".into()));
        assert_eq!(
            q.last().expect("timespan").1,
            "2023-11-14T22:11:50Z/2023-11-14T22:13:20Z"
        );
        // Numbers KEDA only trips over when it reads.
        let c = parse(&[("metricAggregationInterval", "a:b:c")]).expect("built");
        assert!(
            c.request_url(1_700_000_000)
                .expect_err("unreadable")
                .contains("metricAggregationInterval")
        );
    }

    #[test]
    fn bad_input_names_the_parameter() {
        assert!(err(&[("resourceURI", "a/b")]).contains("resourceURI not in the correct format"));
        assert!(err(&[("metricAggregationType", "average")]).contains("metricAggregationType"));
        assert!(err(&[("metricAggregationType", "")]).contains("metricAggregationType"));
        assert!(err(&[("metricAggregationInterval", "1:00")]).contains("hh:mm:ss"));
        assert!(err(&[("targetValue", "0")]).contains("no targetValue given"));
        assert!(err(&[("targetValue", "")]).contains("targetValue"));
        assert!(err(&[("tenantId", "")]).contains("tenantId"));
        assert!(err(&[("tenantId", "x/../y")]).contains("tenantId"));
        assert!(err(&[("activeDirectoryClientId", "")]).contains("activeDirectoryClientId"));
        assert!(err(&[("cloud", "Mars")]).contains("cloud"));
        assert!(err(&[("cloud", "private")]).contains("azureResourceManagerEndpoint"));
        assert!(
            err(&[
                ("cloud", "Private"),
                ("azureResourceManagerEndpoint", "http://169.254.169.254")
            ])
            .contains("https://")
        );
        assert!(err(&[("resourceGroupName", "..")]).contains("\"..\""));
        let c = parse(&[
            ("cloud", "Private"),
            ("azureResourceManagerEndpoint", "https://management.local/"),
            ("activeDirectoryEndpoint", "https://login.local/"),
        ])
        .expect("valid");
        assert_eq!(c.key.scope, "https://management.local/.default");
        assert_eq!(c.key.authority.as_str(), "https://login.local/");
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn answers_give_the_last_point_of_the_aggregation() {
        let answer = br#"{"cost":0,"timespan":"t","interval":"PT1M","value":[{"id":"x","type":"Microsoft.Insights/metrics","name":{"value":"m"},"unit":"Count","timeseries":[{"metadatavalues":[],"data":[{"timeStamp":"2023-11-14T22:09:00Z","average":1.0},{"timeStamp":"2023-11-14T22:10:00Z","average":4.5,"total":9}]}],"errorCode":"Success"}],"namespace":"n","resourceregion":"westeurope"}"#;
        assert_eq!(metric_value(answer, "Average"), Ok(4.5));
        assert_eq!(metric_value(answer, "total"), Ok(9.0));
        assert!(
            metric_value(answer, "Maximum")
                .expect_err("none")
                .contains("Maximum")
        );
        assert!(
            metric_value(answer, "None")
                .expect_err("none")
                .contains("unsupported")
        );
        assert!(
            metric_value(br#"{"value":[]}"#, "Average")
                .expect_err("0")
                .contains("0 metrics")
        );
        assert!(
            metric_value(br#"{"value":[{"timeseries":[]}]}"#, "Average")
                .expect_err("no series")
                .contains("without timeseries")
        );
        assert!(
            metric_value(br#"{"value":[{"timeseries":[{"data":[]}]}]}"#, "Average")
                .expect_err("no data")
                .contains("without any metric values")
        );
        assert!(
            metric_value(b"s3cret", "Average")
                .expect_err("not JSON")
                .contains("not a metrics Response")
        );
    }
}
