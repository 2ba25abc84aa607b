//! `gcp-stackdriver`: scales on the first point of the first time series a Cloud Monitoring
//! filter selects, optionally aligned and reduced, as KEDA's `gcp-stackdriver` trigger does
//! (`pkg/scalers/gcp_stackdriver_scaler.go`, `pkg/scalers/gcp/gcp_stackdriver_client.go`
//! `GetMetrics`).
//!
//! Every trigger with the same service account key and timeout shares one client (its token
//! and its connections to Cloud Monitoring).

use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::context::ScalerContext;
use crate::error::{ScalerError, Source};
use crate::gcp::monitoring::{self, Aggregation, ListRequest};
use crate::gcp::{self, GcpClient, GcpKey, KeySource};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{KeyedSource, Pooled, ReadCtx};
use crate::scaler::MetricsAndActivity;

const METADATA: &[Source] = &[Source::Metadata];

const PROJECT_ID: Param = Param::required("projectId").order(METADATA);
const FILTER: Param = Param::required("filter").order(METADATA);
const TARGET_VALUE: Param = Param::optional("targetValue").order(METADATA).default("5");
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue")
    .order(METADATA)
    .default("0");
const VALUE_IF_NULL: Param = Param::optional("valueIfNull").order(METADATA);
const FILTER_DURATION: Param = Param::optional("filterDuration").order(METADATA);
const ALIGNMENT_PERIOD_SECONDS: Param = Param::optional("alignmentPeriodSeconds").order(METADATA);
const ALIGNMENT_ALIGNER: Param = Param::optional("alignmentAligner").order(METADATA);
const ALIGNMENT_REDUCER: Param = Param::optional("alignmentReducer").order(METADATA);

/// The parameters of `gcp-stackdriver`.
pub const PARAMS: &[Param] = &[
    PROJECT_ID,
    FILTER,
    TARGET_VALUE,
    ACTIVATION_TARGET_VALUE,
    VALUE_IF_NULL,
    FILTER_DURATION,
    ALIGNMENT_PERIOD_SECONDS,
    ALIGNMENT_ALIGNER,
    ALIGNMENT_REDUCER,
    gcp::APPLICATION_CREDENTIALS,
    gcp::CREDENTIALS,
    gcp::CREDENTIALS_FROM_ENV_FILE,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct StackdriverConfig {
    /// `projectId`.
    pub project_id: String,
    /// `filter`.
    pub filter: String,
    /// `targetValue`.
    pub target_value: f64,
    /// `activationTargetValue`.
    pub activation: f64,
    /// `valueIfNull`.
    pub value_if_null: Option<f64>,
    /// `filterDuration`, minutes (0: KEDA's 2).
    pub filter_minutes: i64,
    /// From `alignmentPeriodSeconds` (absent or 0: none), `alignmentAligner`,
    /// `alignmentReducer`.
    pub aggregation: Option<Aggregation>,
    /// `s<index>-gcp-stackdriver-<projectId>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub target_type: MetricTargetType,
    /// The client's key.
    pub key: GcpKey,
    /// Cloud Monitoring's base URL.
    pub base: url::Url,
}

impl StackdriverConfig {
    /// Parses the trigger as KEDA's `parseStackdriverMetadata`.
    ///
    /// # Errors
    /// `projectId` or `filter` missing, `alignmentPeriodSeconds` below 60, an unknown aligner
    /// or reducer, a malformed number, no credentials.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let target_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let project_id: String = p.get(&PROJECT_ID)?;
            let filter: String = p.get(&FILTER)?;
            let target_value: f64 = p.get(&TARGET_VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_TARGET_VALUE)?;
            let value_if_null: Option<f64> = p.get_opt(&VALUE_IF_NULL)?;
            let filter_minutes: i64 = p.get_opt(&FILTER_DURATION)?.unwrap_or(0);
            let period: i64 = p.get_opt(&ALIGNMENT_PERIOD_SECONDS)?.unwrap_or(0);
            if period != 0 && period < 60 {
                return Err(p.rule("alignmentPeriodSeconds must be at least 60"));
            }
            let aligner: String = p.get_opt(&ALIGNMENT_ALIGNER)?.unwrap_or_default();
            let reducer: String = p.get_opt(&ALIGNMENT_REDUCER)?.unwrap_or_default();
            let key = KeySource::parse(p, ctx)?;
            let aggregation = if period == 0 {
                None
            } else {
                Some(Aggregation::parse(p, period, &aligner, &reducer)?)
            };
            let base =
                gcp::api_base(&ctx.vendor_endpoints, monitoring::HOST).map_err(|e| p.rule(e))?;
            Ok(Self {
                metric_name: ctx.metric_name(&format!("gcp-stackdriver-{project_id}")),
                project_id,
                filter,
                target_value,
                activation,
                value_if_null,
                filter_minutes,
                aggregation,
                target_type,
                key: GcpKey::new(ctx, &base, key, gcp::MONITORING_SCOPES),
                base,
            })
        })?)
    }
}

/// A `gcp-stackdriver` scaler.
pub type StackdriverScaler = Pooled<StackdriverConfig>;

#[async_trait::async_trait]
impl KeyedSource for StackdriverConfig {
    type Client = GcpClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        StackdriverConfig::parse(ctx)
    }

    fn key(&self) -> &GcpKey {
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
        client: &GcpClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let value = monitoring::get_metrics(
            client,
            read,
            &self.base,
            &ListRequest {
                project: &self.project_id,
                filter: &self.filter,
                aggregation: self.aggregation.as_ref(),
                value_if_null: self.value_if_null,
                filter_minutes: self.filter_minutes,
            },
        )
        .await?;
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

    fn parse(metadata: &[(&str, &str)]) -> Result<StackdriverConfig, ScalerError> {
        let mut all = vec![
            ("projectId", "myProject"),
            (
                "filter",
                "metric.type=\"storage.googleapis.com/storage/object_count\"",
            ),
            ("credentialsFromEnv", "GOOGLE_CREDS"),
        ];
        all.extend_from_slice(metadata);
        StackdriverConfig::parse(&test_context(
            "gcp-stackdriver",
            1,
            &all,
            &[("GOOGLE_CREDS", "{}")],
            &[],
        ))
    }

    #[test]
    fn parameters_follow_keda() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.metric_name, "s1-gcp-stackdriver-myProject");
        assert_eq!((c.target_value, c.activation), (5.0, 0.0));
        assert_eq!(c.aggregation, None);
        let c = parse(&[
            ("alignmentPeriodSeconds", "120"),
            ("alignmentAligner", "Mean"),
            ("alignmentReducer", "sum"),
            ("valueIfNull", "0"),
        ])
        .unwrap();
        assert_eq!(
            c.aggregation,
            Some(Aggregation {
                period_seconds: 120,
                aligner: "ALIGN_MEAN",
                reducer: "REDUCE_SUM"
            })
        );
        assert_eq!(c.value_if_null, Some(0.0));
        let err = |m: &[(&str, &str)]| parse(m).unwrap_err().to_string();
        assert!(err(&[("alignmentPeriodSeconds", "30")]).contains("at least 60"));
        assert!(
            err(&[
                ("alignmentPeriodSeconds", "60"),
                ("alignmentAligner", "avg")
            ])
            .contains("unknown aligner: avg")
        );
        assert!(err(&[("targetValue", "x")]).contains("targetValue"));
    }
}
