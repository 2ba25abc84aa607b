//! `openstack-metric`: scales on the last measure of an OpenStack Metric (Gnocchi) metric, read
//! as KEDA's `openstack-metric` trigger reads it (`pkg/scalers/openstack_metrics_scaler.go`):
//! `GET <metricsURL>/<metricID>/measures?granularity=<granularity>&aggregation=<aggregationMethod>&start=<time>`
//! with a Keystone token as `X-Auth-Token`; the value is the third element of the last
//! `[timestamp, granularity, value]` triple.
//!
//! Every trigger with the same `authURL`, credentials and timeout shares one client and one
//! token ([`crate::openstack`]).

use http::Method;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{describe_url, parse_http_url};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::openstack::{
    self, APP_CREDENTIAL_ID, APP_CREDENTIAL_SECRET, AUTH_URL, Credentials, KeystoneClient,
    KeystoneKey, PASSWORD, PROJECT_ID, USER_ID,
};
use crate::pool::Lease;
use crate::pooled::{Pooled, PooledSource, ReadCtx};
use crate::scaler::MetricsAndActivity;

const METRICS_URL: Param = Param::required("metricsURL");
const METRIC_ID: Param = Param::required("metricID");
const AGGREGATION_METHOD: Param = Param::required("aggregationMethod");
const GRANULARITY: Param = Param::required("granularity");
const THRESHOLD: Param = Param::required("threshold");
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold").default("0");
const TIMEOUT: Param = Param::optional("timeout").default("30");

/// The parameters of `openstack-metric`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    METRICS_URL,
    METRIC_ID,
    AGGREGATION_METHOD,
    GRANULARITY,
    THRESHOLD,
    ACTIVATION_THRESHOLD,
    TIMEOUT,
    AUTH_URL,
    USER_ID,
    PASSWORD,
    PROJECT_ID,
    APP_CREDENTIAL_ID,
    APP_CREDENTIAL_SECRET,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct MetricConfig {
    /// `<metricsURL>/<metricID>/measures` with `granularity` and `aggregation`, or why
    /// `metricsURL` cannot be used (every read fails with it, as KEDA's read does).
    pub measures_url: Result<url::Url, MetadataError>,
    /// `metricID`.
    pub metric_id: String,
    /// `granularity`, seconds.
    pub granularity: i64,
    /// `threshold`.
    pub threshold: f64,
    /// `activationThreshold`.
    pub activation: f64,
    /// `s<index>-openstack-metric-<metricID>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The client's key.
    pub key: KeystoneKey,
}

impl MetricConfig {
    /// Parses the trigger as KEDA's `parseOpenstackMetricMetadata` and
    /// `parseOpenstackMetricAuthenticationMetadata`.
    ///
    /// # Errors
    /// A required parameter missing, a malformed number, `granularity` under 1 (KEDA fails
    /// every read then), `authURL` not an http(s) URL, incomplete credentials.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let metrics_url: String = p.get(&METRICS_URL)?;
            let metric_id: String = p.get(&METRIC_ID)?;
            let aggregation: String = p.get(&AGGREGATION_METHOD)?;
            let granularity: i64 = p.get(&GRANULARITY)?;
            let threshold: f64 = p.get(&THRESHOLD)?;
            let activation: f64 = p.get(&ACTIVATION_THRESHOLD)?;
            let timeout: i64 = p.get(&TIMEOUT)?;
            if granularity < 1 {
                return Err(p.rule(
                    "parameter \"granularity\" must be at least 1 (seconds, one of the metric's archive policy)",
                ));
            }
            let auth_url: String = p.get(&AUTH_URL)?;
            let credentials = Credentials::parse(p, false)?;
            let tokens_url = openstack::tokens_url(p, &auth_url)?;
            let measures_url = parse_http_url(p, &METRICS_URL, metrics_url.trim()).map(|mut url| {
                url.set_fragment(None);
                if let Ok(mut path) = url.path_segments_mut() {
                    path.pop_if_empty().extend([metric_id.as_str(), "measures"]);
                }
                url.query_pairs_mut()
                    .append_pair("granularity", &granularity.to_string())
                    .append_pair("aggregation", &aggregation);
                url
            });
            Ok(Self {
                measures_url,
                metric_name: ctx.metric_name(&format!("openstack-metric-{metric_id}")),
                metric_id,
                granularity,
                threshold,
                activation,
                metric_type,
                key: KeystoneKey {
                    tokens_url,
                    credentials,
                    timeout: openstack::timeout(ctx, timeout),
                },
            })
        })?)
    }

    /// The measures URL at `now`: `start` is KEDA's window, `granularity / 60 - 1` minutes
    /// back (none under two minutes), at the start of that minute, UTC, without a zone
    /// (`2026-01-01T11:56:00`).
    ///
    /// # Errors
    /// `metricsURL` cannot be used.
    pub fn url(&self, now: jiff::Timestamp) -> Result<url::Url, MetadataError> {
        let mut url = self.measures_url.clone()?;
        let minutes = (self.granularity / 60 - 1).max(0);
        let start = now
            .checked_sub(jiff::SignedDuration::from_mins(minutes))
            .unwrap_or(jiff::Timestamp::MIN);
        let start = start.strftime("%Y-%m-%dT%H:%M:00").to_string();
        url.query_pairs_mut().append_pair("start", &start);
        Ok(url)
    }
}

/// KEDA's reading of Gnocchi's measures (`[["2026-01-01T12:00:00+00:00", 300.0, 1.5], ...]`):
/// the value of the last triple; `0` when there are none.
///
/// # Errors
/// Not a list of lists, a last entry that is not a triple, a value that is not a finite
/// number. Messages never quote the answer.
pub fn last_measure(body: &[u8]) -> Result<f64, String> {
    let measures: Vec<Vec<serde_json::Value>> = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Gnocchi answer is not a list of measures: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let Some(last) = measures.last() else {
        return Ok(0.0);
    };
    let [_, _, value] = last.as_slice() else {
        return Err(
            "the last Gnocchi measure is not a [timestamp, granularity, value] triple".into(),
        );
    };
    value
        .as_f64()
        .filter(|v| v.is_finite())
        .ok_or_else(|| "the last Gnocchi measure's value is not a finite number".into())
}

/// An `openstack-metric` scaler.
pub type MetricScaler = Pooled<MetricConfig>;

#[async_trait::async_trait]
impl PooledSource for MetricConfig {
    type Key = KeystoneKey;
    type Client = KeystoneClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        MetricConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<KeystoneKey, MetadataError> {
        self.measures_url.as_ref().map_err(Clone::clone)?;
        Ok(self.key.clone())
    }

    async fn connect(
        ctx: &ScalerContext,
        key: KeystoneKey,
    ) -> Result<Lease<KeystoneKey, KeystoneClient>, ScalerError> {
        openstack::lease(ctx, key).await
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.threshold),
        )]
    }

    async fn read(
        &self,
        client: &KeystoneClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let url = self.url(read.now()).map_err(ScalerError::Metadata)?;
        let operation = format!(
            "Gnocchi measures of metric {} on {}",
            self.metric_id,
            describe_url(&url)
        );
        let answer = client
            .call(read, &operation, Method::GET, |_| Ok(url.clone()))
            .await?;
        let value = last_measure(&answer.body).map_err(|why| read.unexpected(why))?;
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

    const META: &[(&str, &str)] = &[
        ("metricsURL", "http://localhost:8041/v1/metric"),
        ("metricID", "003bb589-166d-439d-8c31-cbf098d863de"),
        ("aggregationMethod", "mean"),
        ("granularity", "300"),
        ("threshold", "1.250"),
        ("activationThreshold", "0.250"),
    ];
    const AUTH: &[(&str, &str)] = &[
        ("authURL", "http://localhost:5000"),
        ("userID", "u1"),
        ("password", "pw"),
    ];

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<MetricConfig, String> {
        MetricConfig::parse(&test_context("openstack-metric", 0, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    /// KEDA's `opentsackMetricMetadataTestData` and `openstackMetricAuthMetadataTestData`.
    #[test]
    fn parameters_follow_keda() {
        let c = parse(META, AUTH).unwrap();
        assert_eq!(
            c.metric_name,
            "s0-openstack-metric-003bb589-166d-439d-8c31-cbf098d863de"
        );
        assert_eq!(
            (c.threshold, c.activation, c.granularity),
            (1.25, 0.25, 300)
        );
        assert_eq!(
            c.key.tokens_url.as_str(),
            "http://localhost:5000/v3/auth/tokens"
        );
        for name in [
            "metricsURL",
            "metricID",
            "aggregationMethod",
            "granularity",
            "threshold",
        ] {
            let m: Vec<_> = META.iter().copied().filter(|(k, _)| *k != name).collect();
            let err = parse(&m, AUTH).unwrap_err();
            assert!(err.contains(&format!("\"{name}\"")), "{err}");
        }
        let mut m = META.to_vec();
        m[3] = ("granularity", "0");
        assert!(parse(&m, AUTH).unwrap_err().contains("\"granularity\""));
        assert!(parse(META, &AUTH[..1]).unwrap_err().contains("\"userID\""));
        assert!(
            parse(META, &AUTH[..2])
                .unwrap_err()
                .contains("\"password\"")
        );
        let mut m = META.to_vec();
        m[0] = ("metricsURL", "localhost:8041");
        let c = parse(&m, AUTH).unwrap();
        assert!(
            c.client_key()
                .unwrap_err()
                .to_string()
                .contains("\"metricsURL\"")
        );
    }

    #[test]
    fn the_request_is_keda_s() {
        let c = parse(META, AUTH).unwrap();
        let now: jiff::Timestamp = "2026-01-01T12:00:42Z".parse().unwrap();
        assert_eq!(
            c.url(now).unwrap().as_str(),
            "http://localhost:8041/v1/metric/003bb589-166d-439d-8c31-cbf098d863de/measures?granularity=300&aggregation=mean&start=2026-01-01T11%3A56%3A00"
        );
        let mut m = META.to_vec();
        m[3] = ("granularity", "60");
        let c = parse(&m, AUTH).unwrap();
        assert!(
            c.url(now)
                .unwrap()
                .as_str()
                .ends_with("start=2026-01-01T12%3A00%3A00")
        );
    }

    #[test]
    fn the_value_is_the_last_measure_s() {
        let body =
            br#"[["2026-01-01T11:55:00+00:00",300.0,1.0],["2026-01-01T12:00:00+00:00",300.0,2.5]]"#;
        assert_eq!(last_measure(body), Ok(2.5));
        assert_eq!(last_measure(b"[]"), Ok(0.0));
        assert!(last_measure(br#"[["t",300.0]]"#).is_err());
        assert!(last_measure(br#"[["t",300.0,"2"]]"#).is_err());
        for bad in ["", "{}", r#"[["SECRETSECRET"]]"#, "SECRETSECRET"] {
            let e = last_measure(bad.as_bytes()).unwrap_err();
            assert!(!e.contains("SECRETSECRET"), "{e}");
        }
    }
}
