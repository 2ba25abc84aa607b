//! `azure-log-analytics`: scales on the number a Kusto query over a Log Analytics workspace
//! returns, as KEDA's `azure-log-analytics` trigger does
//! (`pkg/scalers/azure_log_analytics_scaler.go`, through azquery's `LogsClient.QueryWorkspace`):
//! the Log Analytics query API
//! [Query - Execute](https://learn.microsoft.com/en-us/rest/api/loganalytics/dataaccess/query/execute)
//! (`POST <endpoint>/v1/workspaces/<workspaceId>/query` with `{"query": ...}`).
//!
//! KEDA's reading of the answer: exactly one table with at least one column and exactly one
//! row; the first column's type is `real`, `int` or `long`, its value in the row a number at or
//! above 0.
//!
//! Authentication is a service principal's client secret ([`crate::azure::aad`]); every
//! trigger with the same cloud, principal, TLS setting and timeout shares one client and its
//! token.
//!
//! # Caveats
//! - Older KEDA versions read a second column as the threshold; the pinned KEDA reads only the
//!   first column, and so does keda-rs.
//! - KEDA asks the public cloud's authority for every token; keda-rs asks the cloud's own, or
//!   with `cloud: Private` the optional `activeDirectoryEndpoint`.

use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::azure::aad::{self, AadClient, AadKey, ClientSecret, CredentialParams};
use crate::context::ScalerContext;
use crate::error::{ScalerError, Source};
use crate::http_client::describe_url;
use crate::metadata::{MAX_TIMEOUT_MS, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{KeyedSource, ReadCtx};
use crate::scaler::MetricsAndActivity;

const METADATA: &[Source] = &[Source::Metadata];
const AUTH_METADATA_ENV: &[Source] = &[Source::Auth, Source::Metadata, Source::Env];

const TENANT_ID: Param = Param::optional("tenantId").order(AUTH_METADATA_ENV);
const CLIENT_ID: Param = Param::optional("clientId").order(AUTH_METADATA_ENV);
const CLIENT_SECRET: Param = Param::optional("clientSecret")
    .order(AUTH_METADATA_ENV)
    .secret();
const WORKSPACE_ID: Param = Param::required("workspaceId").order(AUTH_METADATA_ENV);
const QUERY: Param = Param::required("query").order(METADATA);
const THRESHOLD: Param = Param::required("threshold").order(METADATA);
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold")
    .order(METADATA)
    .default("0");
const LOG_ANALYTICS_RESOURCE_URL: Param =
    Param::optional("logAnalyticsResourceURL").order(METADATA);
const CLOUD: Param = Param::optional("cloud")
    .order(METADATA)
    .default("azurePublicCloud");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl")
    .order(METADATA)
    .default("false");
const TIMEOUT: Param = Param::optional("timeout")
    .order(METADATA)
    .range(0.0, MAX_TIMEOUT_MS);
const ACTIVE_DIRECTORY_ENDPOINT: Param = Param::optional("activeDirectoryEndpoint").order(METADATA);

/// The parameters of `azure-log-analytics`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    TENANT_ID,
    CLIENT_ID,
    CLIENT_SECRET,
    WORKSPACE_ID,
    QUERY,
    THRESHOLD,
    ACTIVATION_THRESHOLD,
    LOG_ANALYTICS_RESOURCE_URL,
    CLOUD,
    UNSAFE_SSL,
    TIMEOUT,
    ACTIVE_DIRECTORY_ENDPOINT,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct LogAnalyticsConfig {
    /// `workspaceId`.
    pub workspace_id: String,
    /// `query`.
    pub query: String,
    /// `threshold`.
    pub threshold: f64,
    /// `activationThreshold`.
    pub activation: f64,
    /// The query URL, `<endpoint>/v1/workspaces/<workspaceId>/query`.
    pub url: url::Url,
    /// `s<index>-azure-log-analytics-<workspaceId>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub target_type: MetricTargetType,
    /// The client's key.
    pub key: AadKey,
}

impl LogAnalyticsConfig {
    /// Parses the trigger as KEDA's `parseAzureLogAnalyticsMetadata` and `Validate`.
    ///
    /// # Errors
    /// `workspaceId`, `query` or `threshold` missing or malformed; an unknown `cloud`;
    /// `cloud: Private` without `logAnalyticsResourceURL`; a missing credential (KEDA names
    /// the last one missing of `tenantId`, `clientId`, `clientSecret`).
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let target_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let workspace_id: String = p.get(&WORKSPACE_ID)?;
            let query: String = p.get(&QUERY)?;
            let threshold: f64 = p.get(&THRESHOLD)?;
            let activation: f64 = p.get(&ACTIVATION_THRESHOLD)?;
            let insecure: bool = p.get(&UNSAFE_SSL)?;
            let timeout_ms: Option<u64> = p.get_opt(&TIMEOUT)?;
            let timeout = timeout_ms
                .filter(|ms| *ms > 0)
                .map_or(ctx.global_http_timeout, Duration::from_millis);
            let (audience, authority) = aad::cloud_endpoints(
                p,
                &CLOUD,
                |cloud| cloud.log_analytics,
                &LOG_ANALYTICS_RESOURCE_URL,
                &ACTIVE_DIRECTORY_ENDPOINT,
            )?;
            // KEDA reports the last one missing.
            let credentials = ClientSecret::parse(
                p,
                &CredentialParams {
                    tenant: TENANT_ID,
                    client_id: CLIENT_ID,
                    secret: CLIENT_SECRET,
                },
                &[&CLIENT_SECRET, &CLIENT_ID, &TENANT_ID],
            )?;
            let scope = aad::scope_of(audience.as_str());
            let api = ctx.vendor_endpoints.redirect(audience);
            let mut url = api.clone();
            url.path_segments_mut()
                .map_err(|()| p.rule("logAnalyticsResourceURL cannot have a path"))?
                .pop_if_empty()
                .extend(["v1", "workspaces", workspace_id.as_str(), "query"]);
            Ok(Self {
                metric_name: ctx.metric_name(&format!("azure-log-analytics-{workspace_id}")),
                workspace_id,
                query,
                threshold,
                activation,
                url,
                target_type,
                key: AadKey {
                    api,
                    authority,
                    credentials,
                    scope,
                    insecure,
                    timeout,
                },
            })
        })?)
    }
}

/// The value of a Query - Execute answer (`{"tables":[{"name","columns":[{"name","type"}],"rows":[[...]]}]}`),
/// read as KEDA's `getMetricData` and `parseTableValueToFloat64` do.
///
/// # Errors
/// Not the documented shape; no table, column or row ("there is no results after running your
/// query"); more than one table or row; a first column that is not `real`, `int` or `long`; a
/// value that is not a number or is below 0. Messages never quote the answer's values.
pub fn table_value(body: &[u8]) -> Result<f64, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        tables: Option<Vec<Table>>,
    }
    #[derive(serde::Deserialize)]
    struct Table {
        #[serde(default)]
        columns: Option<Vec<Column>>,
        #[serde(default)]
        rows: Option<Vec<Vec<serde_json::Value>>>,
    }
    #[derive(serde::Deserialize)]
    struct Column {
        #[serde(default, rename = "type")]
        type_: Option<String>,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Log Analytics answer is not a query Response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let tables = answer.tables.unwrap_or_default();
    let empty = || "there is no results after running your query".to_string();
    let Some(first) = tables.first() else {
        return Err(empty());
    };
    let columns = first.columns.as_deref().unwrap_or_default();
    let rows = first.rows.as_deref().unwrap_or_default();
    if columns.is_empty() || rows.is_empty() {
        return Err(empty());
    }
    if tables.len() > 1 {
        return Err(format!(
            "too many tables in query result: {}, expected: 1",
            tables.len()
        ));
    }
    if rows.len() > 1 {
        return Err(format!(
            "too many rows in query result: {}, expected: 1",
            rows.len()
        ));
    }
    let (Some(value), Some(column_type)) = (rows[0].first(), columns[0].type_.as_deref()) else {
        return Err("the first row or column is empty".into());
    };
    kusto_number(value, column_type)
}

/// A cell of a `real`, `int` or `long` column as KEDA takes it: a JSON number at or above 0.
///
/// # Errors
/// Another column type (named: it is one of Kusto's scalar type names or not shown), a value
/// that is not a number, or a negative one.
pub fn kusto_number(value: &serde_json::Value, column_type: &str) -> Result<f64, String> {
    if !matches!(column_type, "real" | "int" | "long") {
        let shown = match column_type {
            "bool" | "datetime" | "dynamic" | "guid" | "string" | "timespan" | "decimal" => {
                column_type
            }
            _ => "another type",
        };
        return Err(format!(
            "value data type should be real, int or long, but received {shown}"
        ));
    }
    let number = match value {
        serde_json::Value::Null => return Err("value is empty, check your query".into()),
        serde_json::Value::Number(n) => n.as_f64(),
        _ => None,
    };
    let number = number.ok_or_else(|| {
        format!(
            "cannot convert result of type {} to float64",
            crate::remote::json_type(value)
        )
    })?;
    if !number.is_finite() {
        return Err("the value is not a finite number".into());
    }
    if number < 0.0 {
        return Err(format!("value should be >=0, but received {number}"));
    }
    Ok(number)
}

#[async_trait::async_trait]
impl KeyedSource for LogAnalyticsConfig {
    type Client = AadClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        LogAnalyticsConfig::parse(ctx)
    }

    fn key(&self) -> &AadKey {
        &self.key
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.target_type, self.threshold),
        )]
    }

    async fn read(
        &self,
        client: &AadClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let operation = format!(
            "Log Analytics query of workspace {} on {}",
            self.workspace_id,
            describe_url(&self.key.api)
        );
        let body = serde_json::json!({ "query": self.query }).to_string();
        let answer = client
            .call(
                read,
                &operation,
                self.url.clone(),
                Some(body.into()),
                &http::HeaderMap::new(),
            )
            .await?;
        let value = table_value(&answer).map_err(|why| {
            read.unexpected(format!("error validating Log Analytics request: {why}"))
        })?;
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

    fn parse(
        metadata: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> Result<LogAnalyticsConfig, ScalerError> {
        let mut all = vec![
            ("query", "Heartbeat | count"),
            ("threshold", "10"),
            ("workspaceId", "74b5bd3a-1c3e-4bf1-a4a4-1ee0e1a6e6b4"),
            ("clientIdFromEnv", "CLIENT"),
        ];
        all.extend_from_slice(metadata);
        LogAnalyticsConfig::parse(&test_context(
            "azure-log-analytics",
            0,
            &all,
            &[("CLIENT", "app")],
            auth,
        ))
    }

    const AUTH: &[(&str, &str)] = &[
        ("tenantId", "contoso.onmicrosoft.com"),
        ("clientSecret", "s3cret"),
    ];

    #[test]
    fn parameters_follow_keda() {
        let c = parse(&[], AUTH).expect("valid");
        assert_eq!(
            c.metric_name,
            "s0-azure-log-analytics-74b5bd3a-1c3e-4bf1-a4a4-1ee0e1a6e6b4"
        );
        assert_eq!(
            c.url.as_str(),
            "https://api.loganalytics.io/v1/workspaces/74b5bd3a-1c3e-4bf1-a4a4-1ee0e1a6e6b4/query"
        );
        assert_eq!(c.key.scope, "https://api.loganalytics.io/.default");
        assert_eq!(c.key.credentials.client_id, "app");
        let c = parse(
            &[("cloud", "AzureUSGovernmentCloud"), ("timeout", "2500")],
            AUTH,
        )
        .expect("valid");
        assert_eq!(c.key.scope, "https://api.loganalytics.us/.default");
        assert_eq!(
            c.key.authority.as_str(),
            "https://login.microsoftonline.us/"
        );
        assert_eq!(c.key.timeout, Duration::from_millis(2500));
        let c = parse(
            &[
                ("cloud", "Private"),
                ("logAnalyticsResourceURL", "https://api.loganalytics.local"),
            ],
            AUTH,
        )
        .expect("valid");
        assert_eq!(
            c.url.as_str(),
            "https://api.loganalytics.local/v1/workspaces/74b5bd3a-1c3e-4bf1-a4a4-1ee0e1a6e6b4/query"
        );
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn bad_input_names_the_parameter() {
        let err =
            |m: &[(&str, &str)], a: &[(&str, &str)]| parse(m, a).expect_err("invalid").to_string();
        // KEDA names the last one missing.
        assert!(err(&[], &[]).contains("\"clientSecret\""));
        assert!(err(&[], &[("clientSecret", "s")]).contains("\"tenantId\""));
        assert!(err(&[("cloud", "private")], AUTH).contains("logAnalyticsResourceURL"));
        assert!(err(&[("cloud", "moon")], AUTH).contains("cloud"));
        assert!(err(&[("threshold", "x")], AUTH).contains("threshold"));
        assert!(err(&[("unsafeSsl", "maybe")], AUTH).contains("unsafeSsl"));
        assert!(
            err(
                &[
                    ("cloud", "Private"),
                    ("logAnalyticsResourceURL", "http://10.0.0.1")
                ],
                AUTH
            )
            .contains("https://")
        );
    }

    #[test]
    fn tables_are_read_as_keda_reads_them() {
        let one = |columns: &str, rows: &str| {
            format!(
                r#"{{"tables":[{{"name":"PrimaryResult","columns":{columns},"rows":{rows}}}]}}"#
            )
        };
        let long = r#"[{"name":"count_","type":"long"}]"#;
        assert_eq!(table_value(one(long, "[[42]]").as_bytes()), Ok(42.0));
        assert_eq!(
            table_value(
                one(
                    r#"[{"name":"a","type":"real"},{"name":"b","type":"long"}]"#,
                    "[[2.5,7]]"
                )
                .as_bytes()
            ),
            Ok(2.5)
        );
        assert!(
            table_value(one(long, "[]").as_bytes())
                .expect_err("")
                .contains("no results")
        );
        assert!(
            table_value(br#"{"tables":[]}"#)
                .expect_err("")
                .contains("no results")
        );
        assert!(
            table_value(one(long, "[[1],[2]]").as_bytes())
                .expect_err("")
                .contains("too many rows")
        );
        assert!(
            table_value(
                format!(
                    r#"{{"tables":[{0},{0}]}}"#,
                    r#"{"columns":[{"type":"long"}],"rows":[[1]]}"#
                )
                .as_bytes()
            )
            .expect_err("")
            .contains("too many tables")
        );
        assert!(
            table_value(one(long, "[[-1]]").as_bytes())
                .expect_err("")
                .contains(">=0")
        );
        let text =
            table_value(one(r#"[{"name":"s","type":"string"}]"#, r#"[["s3cret"]]"#).as_bytes())
                .expect_err("");
        assert!(
            text.contains("string") && !text.contains("s3cret"),
            "{text}"
        );
        let text = table_value(one(long, r#"[["s3cret"]]"#).as_bytes()).expect_err("");
        assert!(
            text.contains("cannot convert") && !text.contains("s3cret"),
            "{text}"
        );
        assert!(
            table_value(one(long, "[[null]]").as_bytes())
                .expect_err("")
                .contains("empty")
        );
        assert!(
            table_value(one(long, "[[]]").as_bytes())
                .expect_err("")
                .contains("empty")
        );
    }
}
