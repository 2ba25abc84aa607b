//! The aws-* trigger types on the one pooled-scaler shape ([`crate::pooled`]).
//!
//! An AWS trigger type is its parsed configuration implementing [`AwsApi`]: the service it
//! reads, its [`AwsSettings`], its metric specs and one read through an [`AwsCall`].
//! [`AwsSource`] makes any of them a [`PooledSource`]: when the trigger is built it resolves the
//! client key (the endpoint and the credentials, the operator's own ones from its environment
//! only as [`super::check_operator_identity`] allows), then leases the pooled [`AwsClient`] of
//! that key. The parse-only check never looks at the operator's environment.

use async_trait::async_trait;
use bytes::Bytes;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use super::AwsSettings;
use super::client::{self, AwsClient, AwsClientKey, Input, Service};
use crate::context::{Clock, ScalerContext};
use crate::error::{MetadataError, MetadataErrorKind, ScalerError, TriggerId};
use crate::http_client::describe_url;
use crate::pool::Lease;
use crate::pooled::{PooledSource, ReadCtx};
use crate::remote::Classify;
use crate::scaler::MetricsAndActivity;

/// An AWS trigger type: its parsed configuration is `Self`. Wrap it in [`AwsSource`] to
/// register it (`pooled::declare::<AwsSource<MyConfig>>(PARAMS)`).
#[async_trait]
pub trait AwsApi: Send + Sync + Sized + 'static {
    /// The service the reads call.
    const SERVICE: Service;

    /// See [`PooledSource::parse`].
    ///
    /// # Errors
    /// See [`PooledSource::parse`].
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError>;

    /// The trigger's region, endpoint and credentials.
    fn settings(&self) -> &AwsSettings;

    /// What the source resolves once when the trigger is built, before the lease (KEDA's
    /// `aws-dynamodb-streams` finds the table's stream then). Nothing by default.
    ///
    /// # Errors
    /// What the source cannot resolve, named by parameter: the trigger is not built.
    async fn prepare(&mut self, _ctx: &ScalerContext) -> Result<(), ScalerError> {
        Ok(())
    }

    /// See [`PooledSource::metric_specs`].
    fn metric_specs(&self) -> Vec<MetricSpec>;

    /// One read through `call`.
    ///
    /// # Errors
    /// See [`PooledSource::read`].
    async fn read(
        &self,
        call: &AwsCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError>;
}

/// An [`AwsApi`] as a [`PooledSource`]: the parsed trigger and the key of its client.
pub struct AwsSource<C> {
    config: C,
    /// Resolved by [`PooledSource::attach`]; until then why there is none.
    key: Result<AwsClientKey, MetadataError>,
}

impl<C> AwsSource<C> {
    /// The parsed trigger.
    pub fn config(&self) -> &C {
        &self.config
    }
}

#[async_trait]
impl<C: AwsApi> PooledSource for AwsSource<C> {
    type Key = AwsClientKey;
    type Client = AwsClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        Ok(Self {
            config: C::parse(ctx)?,
            key: Err(MetadataError {
                trigger: ctx.trigger_id(),
                kind: MetadataErrorKind::Rule(
                    "the AWS client of this trigger is chosen when the trigger is built".into(),
                ),
            }),
        })
    }

    /// The client key (errors refuse the operator's own credentials, naming the parameter),
    /// then what the source resolves at build.
    async fn attach(&mut self, ctx: &ScalerContext) -> Result<(), ScalerError> {
        self.key = Ok(client::client_key(ctx, C::SERVICE, self.config.settings())?);
        self.config.prepare(ctx).await
    }

    fn client_key(&self) -> Result<AwsClientKey, MetadataError> {
        self.key.clone()
    }

    async fn connect(
        ctx: &ScalerContext,
        key: AwsClientKey,
    ) -> Result<Lease<AwsClientKey, AwsClient>, ScalerError> {
        client::lease(ctx, key).await
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        self.config.metric_specs()
    }

    async fn read(
        &self,
        client: &AwsClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let call = AwsCall {
            client,
            read,
            settings: self.config.settings(),
        };
        self.config.read(&call, metric_name).await
    }
}

/// A read in progress of an [`AwsApi`]: the leased client, the read's context and the
/// trigger's settings (for messages).
pub struct AwsCall<'a> {
    /// The pooled client.
    pub client: &'a AwsClient,
    /// The trigger and the clock.
    pub read: ReadCtx<'a>,
    settings: &'a AwsSettings,
}

impl AwsCall<'_> {
    /// Calls `action` with `input` and returns the body of a 2xx answer.
    ///
    /// # Errors
    /// See [`call`].
    pub async fn call(
        &self,
        action: &str,
        input: &Input<'_>,
        what: &str,
    ) -> Result<Bytes, ScalerError> {
        call(
            self.client,
            self.settings,
            self.read.trigger,
            self.read.clock,
            action,
            input,
            what,
        )
        .await
    }
}

/// Calls `action` with `input` through `client` and returns the body of a 2xx answer.
///
/// # Errors
/// [`ScalerError::Query`] whose operation reads `<action> of <what> on <service> at <endpoint>
/// (<parameter that chose it>)`: unreachable, timed out, an AWS error (by its code, never its
/// message), the role not assumed.
pub async fn call(
    client: &AwsClient,
    settings: &AwsSettings,
    trigger: &TriggerId,
    clock: &Clock,
    action: &str,
    input: &Input<'_>,
    what: &str,
) -> Result<Bytes, ScalerError> {
    client
        .call(action, input, clock)
        .await
        .map_err(|e| ScalerError::Query {
            trigger: trigger.clone(),
            operation: format!(
                "{action} of {what} on {} at {} ({})",
                client.key().service.display,
                describe_url(&client.key().endpoint),
                settings.endpoint_parameter()
            ),
            source: e.classify(),
        })
}

/// A count read as KEDA's AWS scalers report it: the value, active iff it is above
/// `activation` (integers compared, as KEDA does).
pub fn count_report(metric_name: &str, count: i64, activation: i64) -> MetricsAndActivity {
    MetricsAndActivity {
        values: vec![crate::scaler::MetricValue::new(metric_name, count as f64)],
        active: count > activation,
    }
}
