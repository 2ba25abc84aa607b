//! `azure-data-explorer`: scales on the number a Kusto query returns from an Azure Data
//! Explorer cluster, as KEDA's `azure-data-explorer` trigger does
//! (`pkg/scalers/azure_data_explorer_scaler.go`, `pkg/scalers/azure/azure_data_explorer.go`,
//! through `azkustodata.Client.Query`): the Kusto
//! [query REST API](https://learn.microsoft.com/en-us/kusto/api/rest/request)
//! (`POST <endpoint>/v2/rest/query` with `{"db", "csl", "properties"}`), its
//! [v2 answer](https://learn.microsoft.com/en-us/kusto/api/rest/response-v2) (a JSON array of
//! frames; the `PrimaryResult` tables, whole `DataTable` frames or `TableHeader` /
//! `TableFragment` / `TableCompletion` frames) or a
//! [v1 answer](https://learn.microsoft.com/en-us/kusto/api/rest/response) (`{"Tables":[...]}`,
//! the first table).
//!
//! KEDA's reading: the first table has exactly one row; its first column is `real`, `int` or
//! `long`; the value is at or above 0.
//!
//! Authentication is a service principal's client secret ([`crate::azure::aad`]) for the scope
//! `<endpoint>/.default`, from the cloud's authority or `activeDirectoryEndpoint`, as KEDA
//! gives the Kusto client; every trigger on the same cluster with the same principal and timeout
//! shares one client and its token.
//!
//! # Caveats
//! The Kusto SDK asks the cluster for its resource id (`/v1/rest/auth/metadata`) before its
//! first token; keda-rs asks a token for the cluster's URL, which Microsoft Entra ID accepts
//! as the same resource.

use http::header::{HeaderMap, HeaderName, HeaderValue};
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
const METADATA_AUTH_ENV: &[Source] = &[Source::Metadata, Source::Auth, Source::Env];
const AUTH: &[Source] = &[Source::Auth];

const DATABASE_NAME: Param = Param::required("databaseName").order(METADATA);
const ENDPOINT: Param = Param::required("endpoint").order(METADATA);
const QUERY: Param = Param::required("query").order(METADATA);
const THRESHOLD: Param = Param::required("threshold").order(METADATA);
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold")
    .order(METADATA)
    .default("0");
const TENANT_ID: Param = Param::optional("tenantId").order(METADATA_AUTH_ENV);
const CLIENT_ID: Param = Param::optional("clientId").order(METADATA_AUTH_ENV);
const CLIENT_SECRET: Param = Param::optional("clientSecret").order(AUTH).secret();
const CLOUD: Param = Param::optional("cloud").order(METADATA);
const ACTIVE_DIRECTORY_ENDPOINT: Param = Param::optional("activeDirectoryEndpoint").order(METADATA);

/// The parameters of `azure-data-explorer`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    DATABASE_NAME,
    ENDPOINT,
    QUERY,
    THRESHOLD,
    ACTIVATION_THRESHOLD,
    TENANT_ID,
    CLIENT_ID,
    CLIENT_SECRET,
    CLOUD,
    ACTIVE_DIRECTORY_ENDPOINT,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct DataExplorerConfig {
    /// `databaseName`.
    pub database: String,
    /// `query`.
    pub query: String,
    /// `threshold`.
    pub threshold: f64,
    /// `activationThreshold`.
    pub activation: f64,
    /// `<endpoint>/v2/rest/query`.
    pub url: url::Url,
    /// `s<index>-azure-data-explorer-<databaseName>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub target_type: MetricTargetType,
    /// The client's key.
    pub key: AadKey,
    headers: HeaderMap,
}

impl DataExplorerConfig {
    /// Parses the trigger as KEDA's `parseAzureDataExplorerMetadata`.
    ///
    /// # Errors
    /// A required parameter missing or malformed; `endpoint` not an https URL (the Kusto
    /// client's rule); an unknown `cloud`; `cloud: Private` without `activeDirectoryEndpoint`;
    /// `tenantId`, `clientId` or `clientSecret` missing.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let target_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let database: String = p.get(&DATABASE_NAME)?;
            let endpoint: String = p.get(&ENDPOINT)?;
            let query: String = p.get(&QUERY)?;
            let threshold: f64 = p.get(&THRESHOLD)?;
            let activation: f64 = p.get(&ACTIVATION_THRESHOLD)?;
            let authority = aad::active_directory_endpoint(p, &CLOUD, &ACTIVE_DIRECTORY_ENDPOINT)?;
            let credentials = ClientSecret::parse(
                p,
                &CredentialParams {
                    tenant: TENANT_ID,
                    client_id: CLIENT_ID,
                    secret: CLIENT_SECRET,
                },
                &[&TENANT_ID, &CLIENT_ID, &CLIENT_SECRET],
            )?;
            let cluster = aad::https_param(p, &ENDPOINT, &endpoint)?;
            let scope = aad::scope_of(cluster.as_str());
            let api = ctx.vendor_endpoints.redirect(cluster);
            let mut url = api.clone();
            url.path_segments_mut()
                .map_err(|()| p.rule("endpoint cannot have a path"))?
                .pop_if_empty()
                .extend(["v2", "rest", "query"]);
            let mut headers = HeaderMap::new();
            headers.insert(
                HeaderName::from_static("x-ms-app"),
                HeaderValue::from_static("keda-rs"),
            );
            headers.insert(
                HeaderName::from_static("x-ms-client-version"),
                HeaderValue::from_static(concat!("Kusto.keda-rs:", env!("CARGO_PKG_VERSION"))),
            );
            Ok(Self {
                metric_name: ctx.metric_name(&format!("azure-data-explorer-{database}")),
                database,
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
                    insecure: false,
                    timeout: ctx.global_http_timeout,
                },
                headers,
            })
        })?)
    }

    /// The body of the query request.
    pub fn request_body(&self) -> String {
        serde_json::json!({
            "db": self.database,
            "csl": self.query,
            "properties": {"Options": {}, "Parameters": {}},
        })
        .to_string()
    }
}

/// One table of an answer: its columns' types and its rows.
struct Table {
    column_types: Vec<String>,
    rows: Vec<serde_json::Value>,
}

/// The value of a Kusto query answer (v2 frames or v1 tables), read as KEDA's
/// `GetAzureDataExplorerMetricValue` does.
///
/// # Errors
/// Not a documented shape; the query failed (`HasErrors`, an error row); no table or no row
/// ("query has no results"); more than one row; a first column that is not `real`, `int` or
/// `long`; a value that is not a number or is below 0. Messages never quote the answer's
/// values.
pub fn query_value(body: &[u8]) -> Result<f64, String> {
    let answer: serde_json::Value = crate::remote::from_json(body)
        .map_err(|e| format!("the Kusto answer is {}", crate::remote::json_error(&e)))?;
    let table = match &answer {
        serde_json::Value::Array(frames) => v2_primary_table(frames)?,
        serde_json::Value::Object(o) => match o.get("Tables").and_then(|t| t.as_array()) {
            Some(tables) => tables.first().map(v1_table).transpose()?,
            None => return Err("the Kusto answer has neither frames nor \"Tables\"".into()),
        },
        other => {
            return Err(format!(
                "the Kusto answer is a JSON {}, not frames or tables",
                crate::remote::json_type(other)
            ));
        }
    };
    let Some(table) = table.filter(|t| !t.rows.is_empty()) else {
        return Err("query has no results".into());
    };
    if table.rows.len() != 1 {
        return Err("query result had more than a single result row".into());
    }
    let row = &table.rows[0];
    let Some(cells) = row.as_array() else {
        // An object in the rows is an error of the query (`OneApiErrors`).
        return Err("the query failed: its result holds an error row".into());
    };
    let (Some(value), Some(column_type)) = (cells.first(), table.column_types.first()) else {
        return Err("query has no results".into());
    };
    if !matches!(column_type.as_str(), "real" | "int" | "long") {
        let shown = match column_type.as_str() {
            "bool" | "datetime" | "dynamic" | "guid" | "string" | "timespan" | "decimal" => {
                column_type.as_str()
            }
            _ => "another type",
        };
        return Err(format!("data type {shown} is not valid"));
    }
    let number = match value {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.parse::<f64>().ok(),
        _ => None,
    }
    .ok_or_else(|| {
        format!(
            "failed to convert result of type {} to a number",
            crate::remote::json_type(value)
        )
    })?;
    if !number.is_finite() {
        return Err("the value is not a finite number".into());
    }
    if number < 0.0 {
        return Err(format!("query result must be >= 0 but received: {number}"));
    }
    Ok(number)
}

/// The first `PrimaryResult` table of v2 frames.
fn v2_primary_table(frames: &[serde_json::Value]) -> Result<Option<Table>, String> {
    fn text<'a>(f: &'a serde_json::Value, k: &str) -> &'a str {
        f.get(k).and_then(|v| v.as_str()).unwrap_or("")
    }
    let columns = |f: &serde_json::Value| -> Vec<String> {
        f.get("Columns")
            .and_then(|c| c.as_array())
            .map(|c| {
                c.iter()
                    .map(|c| text(c, "ColumnType").to_ascii_lowercase())
                    .collect()
            })
            .unwrap_or_default()
    };
    let rows = |f: &serde_json::Value| -> Vec<serde_json::Value> {
        f.get("Rows")
            .and_then(|r| r.as_array())
            .cloned()
            .unwrap_or_default()
    };
    let mut primary: Option<Table> = None;
    // A fragmented primary table: its header's id, then its fragments.
    let mut open: Option<(serde_json::Value, Table)> = None;
    for frame in frames {
        match text(frame, "FrameType") {
            "DataTable" if text(frame, "TableKind") == "PrimaryResult" && primary.is_none() => {
                primary = Some(Table {
                    column_types: columns(frame),
                    rows: rows(frame),
                });
            }
            "TableHeader" if text(frame, "TableKind") == "PrimaryResult" && primary.is_none() => {
                let id = frame.get("TableId").cloned().unwrap_or_default();
                open = Some((
                    id,
                    Table {
                        column_types: columns(frame),
                        rows: Vec::new(),
                    },
                ));
            }
            "TableFragment" => {
                if let Some((id, table)) = open.as_mut()
                    && frame.get("TableId") == Some(id)
                {
                    if text(frame, "TableFragmentType") == "DataReplace" {
                        table.rows.clear();
                    }
                    table.rows.extend(rows(frame));
                }
            }
            "TableCompletion" => {
                if let Some((id, _)) = &open
                    && frame.get("TableId") == Some(id)
                    && let Some((_, table)) = open.take()
                {
                    primary = Some(table);
                }
            }
            "DataSetCompletion"
                if frame.get("HasErrors").and_then(serde_json::Value::as_bool) == Some(true)
                    || frame.get("Cancelled").and_then(serde_json::Value::as_bool)
                        == Some(true) =>
            {
                return Err("the query failed or was cancelled (HasErrors)".into());
            }
            _ => {}
        }
    }
    Ok(primary)
}

/// A v1 table: `{"TableName","Columns":[{"ColumnName","DataType","ColumnType"}],"Rows"}`.
fn v1_table(table: &serde_json::Value) -> Result<Table, String> {
    let columns = table
        .get("Columns")
        .and_then(|c| c.as_array())
        .ok_or("the first table of the Kusto answer has no \"Columns\"")?;
    let column_types = columns
        .iter()
        .map(|c| {
            let kind = c.get("ColumnType").and_then(|t| t.as_str());
            // Older answers give the .NET type only.
            let kind = kind.or_else(|| {
                c.get("DataType").and_then(|t| t.as_str()).map(|t| match t {
                    "Double" | "System.Double" => "real",
                    "Int32" | "System.Int32" => "int",
                    "Int64" | "System.Int64" => "long",
                    _ => "",
                })
            });
            kind.unwrap_or("").to_ascii_lowercase()
        })
        .collect();
    let rows = table
        .get("Rows")
        .and_then(|r| r.as_array())
        .cloned()
        .unwrap_or_default();
    Ok(Table { column_types, rows })
}

#[async_trait::async_trait]
impl KeyedSource for DataExplorerConfig {
    type Client = AadClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        DataExplorerConfig::parse(ctx)
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
            "Kusto query of database {} on {}",
            self.database,
            describe_url(&self.key.api)
        );
        let answer = client
            .call(
                read,
                &operation,
                self.url.clone(),
                Some(self.request_body().into()),
                &self.headers,
            )
            .await?;
        let value = query_value(&answer).map_err(|why| read.unexpected(why))?;
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

    fn parse(metadata: &[(&str, &str)]) -> Result<DataExplorerConfig, ScalerError> {
        let mut all = vec![
            ("databaseName", "jobs"),
            ("endpoint", "https://keda.westeurope.kusto.windows.net"),
            ("query", "Jobs | where State == 'queued' | count"),
            ("threshold", "4"),
            ("tenantId", "contoso.onmicrosoft.com"),
            ("clientId", "app"),
        ];
        all.retain(|(k, _)| !metadata.iter().any(|(m, _)| m == k));
        all.extend(metadata.iter().filter(|(_, v)| !v.is_empty()));
        DataExplorerConfig::parse(&test_context(
            "azure-data-explorer",
            0,
            &all,
            &[],
            &[("clientSecret", "s3cret")],
        ))
    }

    #[test]
    fn parameters_follow_keda() {
        let c = parse(&[]).expect("valid");
        assert_eq!(c.metric_name, "s0-azure-data-explorer-jobs");
        assert_eq!(
            c.url.as_str(),
            "https://keda.westeurope.kusto.windows.net/v2/rest/query"
        );
        assert_eq!(
            c.key.scope,
            "https://keda.westeurope.kusto.windows.net/.default"
        );
        assert_eq!(
            c.key.authority.as_str(),
            "https://login.microsoftonline.com/"
        );
        let body: serde_json::Value = serde_json::from_str(&c.request_body()).expect("JSON");
        assert_eq!(body["db"], "jobs");
        assert_eq!(body["csl"], "Jobs | where State == 'queued' | count");
        let c = parse(&[("cloud", "AzureUSGovernment")]).expect("valid");
        assert_eq!(
            c.key.authority.as_str(),
            "https://login.microsoftonline.us/"
        );
    }

    #[test]
    fn bad_input_names_the_parameter() {
        let err = |m: &[(&str, &str)]| parse(m).expect_err("invalid").to_string();
        assert!(err(&[("endpoint", "http://10.0.0.1:8080")]).contains("\"endpoint\""));
        assert!(err(&[("tenantId", "")]).contains("tenantId"));
        assert!(err(&[("clientId", "")]).contains("clientId"));
        assert!(err(&[("databaseName", "")]).contains("databaseName"));
        assert!(err(&[("cloud", "Private")]).contains("activeDirectoryEndpoint must be provided"));
        assert!(err(&[("cloud", "Venus")]).contains("cloud"));
    }

    #[test]
    fn v2_and_v1_answers_are_read_as_keda_reads_them() {
        let v2 = |columns: &str, rows: &str, errors: bool| {
            format!(
                r#"[{{"FrameType":"DataSetHeader","IsProgressive":false,"Version":"v2.0"}},{{"FrameType":"DataTable","TableId":0,"TableKind":"QueryProperties","TableName":"@ExtendedProperties","Columns":[{{"ColumnName":"Value","ColumnType":"dynamic"}}],"Rows":[[{{"Visualization":null}}]]}},{{"FrameType":"DataTable","TableId":1,"TableKind":"PrimaryResult","TableName":"PrimaryResult","Columns":{columns},"Rows":{rows}}},{{"FrameType":"DataSetCompletion","HasErrors":{errors},"Cancelled":false}}]"#
            )
        };
        let long = r#"[{"ColumnName":"Count","ColumnType":"long"}]"#;
        assert_eq!(query_value(v2(long, "[[12]]", false).as_bytes()), Ok(12.0));
        let real = r#"[{"ColumnName":"avg_","ColumnType":"real"},{"ColumnName":"s","ColumnType":"string"}]"#;
        assert_eq!(
            query_value(v2(real, r#"[[2.5,"x"]]"#, false).as_bytes()),
            Ok(2.5)
        );
        assert!(
            query_value(v2(long, "[]", false).as_bytes())
                .expect_err("")
                .contains("no results")
        );
        assert!(
            query_value(v2(long, "[[1],[2]]", false).as_bytes())
                .expect_err("")
                .contains("single result row")
        );
        assert!(
            query_value(v2(long, "[[1]]", true).as_bytes())
                .expect_err("")
                .contains("HasErrors")
        );
        assert!(
            query_value(v2(long, "[[-3]]", false).as_bytes())
                .expect_err("")
                .contains(">= 0")
        );
        assert!(
            query_value(v2(long, r#"[{"OneApiErrors":[{"error":{"code":"LimitsExceeded","message":"s3cret"}}]}]"#, false).as_bytes())
                .expect_err("")
                .contains("error row")
        );
        let text = query_value(
            v2(
                r#"[{"ColumnName":"s","ColumnType":"string"}]"#,
                r#"[["s3cret"]]"#,
                false,
            )
            .as_bytes(),
        )
        .expect_err("");
        assert!(
            text.contains("string") && !text.contains("s3cret"),
            "{text}"
        );
        // Fragmented primary table.
        let fragmented = r#"[{"FrameType":"DataSetHeader","IsFragmented":true},{"FrameType":"TableHeader","TableId":1,"TableKind":"PrimaryResult","TableName":"PrimaryResult","Columns":[{"ColumnName":"c","ColumnType":"int"}]},{"FrameType":"TableFragment","TableFragmentType":"DataAppend","TableId":1,"Rows":[[9]]},{"FrameType":"TableCompletion","TableId":1,"RowCount":1},{"FrameType":"DataSetCompletion","HasErrors":false,"Cancelled":false}]"#;
        assert_eq!(query_value(fragmented.as_bytes()), Ok(9.0));
        // v1: the first table.
        let v1 = r#"{"Tables":[{"TableName":"Table_0","Columns":[{"ColumnName":"Count","DataType":"Int64","ColumnType":"long"}],"Rows":[[5]]},{"TableName":"Table_1","Columns":[],"Rows":[]}]}"#;
        assert_eq!(query_value(v1.as_bytes()), Ok(5.0));
        let old = r#"{"Tables":[{"TableName":"Table_0","Columns":[{"ColumnName":"Count","DataType":"Int64"}],"Rows":[[6]]}]}"#;
        assert_eq!(query_value(old.as_bytes()), Ok(6.0));
        assert!(query_value(b"{}").is_err());
        assert!(query_value(b"7").is_err());
    }
}
