//! `gcp-cloudtasks`: scales on a Cloud Tasks queue's depth
//! (`cloudtasks.googleapis.com/queue/depth`) read from Cloud Monitoring, as KEDA's
//! `gcp-cloudtasks` trigger does (`pkg/scalers/gcp_cloud_tasks_scaler.go`, through the
//! stackdriver client's `GetMetrics`).
//!
//! Every trigger with the same service account key and timeout shares one client (its token
//! and its connections to Cloud Monitoring).

use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::context::ScalerContext;
use crate::error::{ScalerError, Source};
use crate::gcp::monitoring::{self, ListRequest};
use crate::gcp::{self, GcpClient, GcpKey, KeySource};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{KeyedSource, Pooled, ReadCtx};
use crate::scaler::MetricsAndActivity;

const METADATA: &[Source] = &[Source::Metadata];

/// The metric KEDA reads.
pub const QUEUE_DEPTH: &str = "cloudtasks.googleapis.com/queue/depth";

const VALUE: Param = Param::optional("value").order(METADATA).default("100");
const ACTIVATION_VALUE: Param = Param::optional("activationValue")
    .order(METADATA)
    .default("0");
const FILTER_DURATION: Param = Param::optional("filterDuration").order(METADATA);
const QUEUE_NAME: Param = Param::required("queueName").order(METADATA);
const PROJECT_ID: Param = Param::required("projectID").order(METADATA);

/// The parameters of `gcp-cloudtasks`.
pub const PARAMS: &[Param] = &[
    VALUE,
    ACTIVATION_VALUE,
    FILTER_DURATION,
    QUEUE_NAME,
    PROJECT_ID,
    gcp::APPLICATION_CREDENTIALS,
    gcp::CREDENTIALS,
    gcp::CREDENTIALS_FROM_ENV_FILE,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct CloudTasksConfig {
    /// `queueName`.
    pub queue_name: String,
    /// `projectID`.
    pub project_id: String,
    /// `value`.
    pub value: f64,
    /// `activationValue`.
    pub activation: f64,
    /// `filterDuration`, minutes (0: KEDA's 2).
    pub filter_minutes: i64,
    /// KEDA's filter: the metric type and the queue id, quotes and backslashes escaped.
    pub filter: String,
    /// `s<index>-gcp-ct-<queueName>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub target_type: MetricTargetType,
    /// The client's key.
    pub key: GcpKey,
    /// Cloud Monitoring's base URL.
    pub base: url::Url,
}

/// KEDA's `escapeFilterValue`: `\` and `"` escaped with a backslash.
pub fn escape_filter_value(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"")
}

impl CloudTasksConfig {
    /// Parses the trigger as KEDA's `parseGcpCloudTasksMetadata`.
    ///
    /// # Errors
    /// `queueName` or `projectID` missing, a malformed number, no credentials.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let target_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let value: f64 = p.get(&VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_VALUE)?;
            let filter_minutes: i64 = p.get_opt(&FILTER_DURATION)?.unwrap_or(0);
            let queue_name: String = p.get(&QUEUE_NAME)?;
            let project_id: String = p.get(&PROJECT_ID)?;
            let key = KeySource::parse(p, ctx)?;
            let base =
                gcp::api_base(&ctx.vendor_endpoints, monitoring::HOST).map_err(|e| p.rule(e))?;
            Ok(Self {
                filter: format!(
                    "metric.type=\"{QUEUE_DEPTH}\" AND resource.labels.queue_id=\"{}\"",
                    escape_filter_value(&queue_name)
                ),
                metric_name: ctx.metric_name(&format!("gcp-ct-{queue_name}")),
                queue_name,
                project_id,
                value,
                activation,
                filter_minutes,
                target_type,
                key: GcpKey::new(ctx, &base, key, gcp::MONITORING_SCOPES),
                base,
            })
        })?)
    }
}

/// A `gcp-cloudtasks` scaler.
pub type CloudTasksScaler = Pooled<CloudTasksConfig>;

#[async_trait::async_trait]
impl KeyedSource for CloudTasksConfig {
    type Client = GcpClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        CloudTasksConfig::parse(ctx)
    }

    fn key(&self) -> &GcpKey {
        &self.key
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.target_type, self.value),
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
                aggregation: None,
                value_if_null: None,
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

    #[test]
    fn the_filter_escapes_the_queue_name_as_keda() {
        assert_eq!(escape_filter_value(r#"a"b\c"#), r#"a\"b\\c"#);
        let c = CloudTasksConfig::parse(&test_context(
            "gcp-cloudtasks",
            0,
            &[
                ("queueName", "my-queue"),
                ("projectID", "my-project"),
                ("credentialsFromEnv", "C"),
            ],
            &[("C", "{}")],
            &[],
        ))
        .unwrap();
        assert_eq!(
            c.filter,
            r#"metric.type="cloudtasks.googleapis.com/queue/depth" AND resource.labels.queue_id="my-queue""#
        );
        assert_eq!(c.metric_name, "s0-gcp-ct-my-queue");
        assert_eq!((c.value, c.activation), (100.0, 0.0));
        let err = CloudTasksConfig::parse(&test_context(
            "gcp-cloudtasks",
            0,
            &[("queueName", "q"), ("credentialsFromEnv", "C")],
            &[("C", "{}")],
            &[],
        ))
        .unwrap_err();
        assert!(err.to_string().contains("projectID"), "{err}");
    }
}
