//! `azure-monitor`, `azure-log-analytics`, `azure-app-insights` and `azure-data-explorer`
//! against fakes of Microsoft Entra ID's token endpoint and of the four REST APIs, on one
//! loopback server that the process's vendor endpoints put in place of
//! `login.microsoftonline.com`, `management.azure.com`, `api.loganalytics.io`,
//! `api.applicationinsights.io` and the documented Data Explorer cluster.
//!
//! - Token endpoint, following
//!   <https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-client-creds-grant-flow>:
//!   `POST /<tenant>/oauth2/v2.0/token` with a form `client_id`, `scope` (`<resource>/.default`),
//!   `client_secret`, `grant_type=client_credentials`; a good request is answered
//!   `{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":...}`, an
//!   unknown tenant 400 `invalid_request` (AADSTS90002), a wrong secret 401 `invalid_client`
//!   (AADSTS7000215), an unknown resource 400 `invalid_scope` (AADSTS500011), each with
//!   `error_description`, `error_codes`, `trace_id` and `correlation_id`. The token the fake
//!   issues is bound to its audience, as the `aud` claim of a real one.
//! - Azure Resource Manager's Metrics - List,
//!   <https://learn.microsoft.com/en-us/rest/api/monitor/metrics/list>: `GET
//!   /subscriptions/{s}/resourceGroups/{g}/providers/{resourceUri}/providers/Microsoft.Insights/metrics`
//!   with `api-version=2018-01-01`, `metricnames`, `timespan` (`<start>/<end>`), `aggregation`,
//!   `$filter`; answers `Response` (`value[].timeseries[].data[]`); a token for another
//!   audience is 401 `InvalidAuthenticationTokenAudience`, throttling 429 with `Retry-After`
//!   (<https://learn.microsoft.com/en-us/azure/azure-resource-manager/management/request-limits-and-throttling>).
//! - Log Analytics' Query - Execute,
//!   <https://learn.microsoft.com/en-us/rest/api/loganalytics/dataaccess/query/execute>: `POST
//!   /v1/workspaces/{workspaceId}/query` with `{"query"}`; answers `{"tables":[{"name",
//!   "columns":[{"name","type"}],"rows"}]}`; errors `{"error":{"code","message"}}`
//!   (`BadArgumentError`, `SemanticError`, `InvalidTokenError`).
//! - Application Insights' Metrics - Get,
//!   <https://learn.microsoft.com/en-us/rest/api/application-insights/metrics/get>: `GET
//!   /v1/apps/{appId}/metrics/{metricId}` with `timespan`, `aggregation`, `filter`; answers
//!   `{"value":{"start","end","<metricId>":{"<aggregation>":<number>}}}`.
//! - Kusto's query API, <https://learn.microsoft.com/en-us/kusto/api/rest/request>: `POST
//!   /v2/rest/query` with `{"db","csl","properties"}`; answers v2 frames
//!   (<https://learn.microsoft.com/en-us/kusto/api/rest/response-v2>); errors
//!   `{"error":{"code":"General_BadRequest",...}}`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use http::StatusCode;
use keda_scalers::Clock;
use keda_scalers::http_client::VendorEndpoints;

use crate::common::{Harness, Setup, conformance};
use crate::with_headers::{Answer, Fake, Request};

/// 2023-11-14T22:13:20Z.
const NOW: i64 = 1_700_000_000;
const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const DOMAIN_TENANT: &str = "contoso.onmicrosoft.com";
const CLIENT: &str = "3c2f7b5e-0000-4000-8000-000000000002";
const SECRET: &str = "pl4in-cl1ent-s3cret~";
const CLUSTER: &str = "mycluster.westeurope.kusto.windows.net";

/// The audiences the fake issues tokens for.
const AUDIENCES: &[&str] = &[
    "https://management.azure.com",
    "https://api.loganalytics.io",
    "https://api.applicationinsights.io",
    "https://mycluster.westeurope.kusto.windows.net",
];

/// What the fake answers, and what it counted.
#[derive(Default)]
struct State {
    /// The answer of each API, by a short name (`monitor`, `logs`, `insights`, `kusto`).
    answers: Vec<(&'static str, String)>,
    /// Replaces every API answer (errors, throttling).
    reply: Option<Answer>,
    tokens_issued: usize,
    expires_in: u64,
}

type Shared = Arc<Mutex<State>>;

fn json(status: StatusCode, body: serde_json::Value) -> Answer {
    (status, Vec::new(), body.to_string())
}

fn azure_error(status: StatusCode, code: &str, message: &str) -> Answer {
    json(
        status,
        serde_json::json!({"error": {"code": code, "message": message}}),
    )
}

fn entra_error(status: StatusCode, error: &str, number: u64, description: &str) -> Answer {
    json(
        status,
        serde_json::json!({
            "error": error,
            "error_description": format!("AADSTS{number}: {description} Trace ID: 0 Correlation ID: 0 Timestamp: 2023-11-14 22:13:20Z"),
            "error_codes": [number],
            "timestamp": "2023-11-14 22:13:20Z",
            "trace_id": "00000000-0000-0000-0000-000000000000",
            "correlation_id": "00000000-0000-0000-0000-000000000000",
        }),
    )
}

/// The token endpoint.
fn token(state: &Shared, r: &Request) -> Answer {
    assert_eq!(r.method, "POST");
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    let tenant = r.path().split('/').nth(1).unwrap_or_default();
    if tenant != TENANT && tenant != DOMAIN_TENANT {
        return entra_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            90002,
            "Tenant not found.",
        );
    }
    let form: Vec<(String, String)> = url::form_urlencoded::parse(r.body.as_bytes())
        .into_owned()
        .collect();
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    if field("grant_type") != "client_credentials" {
        return entra_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            70003,
            "The app requested an unsupported grant type.",
        );
    }
    if field("client_id") != CLIENT || field("client_secret") != SECRET {
        return entra_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            7_000_215,
            "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.",
        );
    }
    let Some(audience) = field("scope")
        .strip_suffix("/.default")
        .filter(|a| AUDIENCES.contains(a))
    else {
        return entra_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            500_011,
            "The resource principal was not found in the tenant.",
        );
    };
    let mut s = state.lock().expect("fake");
    s.tokens_issued += 1;
    json(
        StatusCode::OK,
        serde_json::json!({
            "token_type": "Bearer",
            "expires_in": s.expires_in,
            "ext_expires_in": s.expires_in,
            "access_token": format!("eyJ0eXAi.{}.{}", s.tokens_issued, audience),
        }),
    )
}

/// The fake: the token endpoint and the four APIs.
fn handler(state: Shared) -> impl Fn(&Request) -> Answer + Send + Sync + 'static {
    move |r: &Request| {
        let path = r.path().to_string();
        if path.ends_with("/oauth2/v2.0/token") {
            return token(&state, r);
        }
        let (audience, api) = if path.starts_with("/subscriptions/") {
            ("https://management.azure.com", "monitor")
        } else if path.starts_with("/v1/workspaces/") {
            ("https://api.loganalytics.io", "logs")
        } else if path.starts_with("/v1/apps/") {
            ("https://api.applicationinsights.io", "insights")
        } else if path == "/v2/rest/query" {
            ("https://mycluster.westeurope.kusto.windows.net", "kusto")
        } else {
            return azure_error(StatusCode::NOT_FOUND, "PathNotFoundError", "not found");
        };
        let bearer = r.header("authorization").unwrap_or_default();
        if !bearer.starts_with("Bearer eyJ0eXAi.") || !bearer.ends_with(&format!(".{audience}")) {
            return azure_error(
                StatusCode::UNAUTHORIZED,
                if api == "monitor" {
                    "InvalidAuthenticationTokenAudience"
                } else {
                    "InvalidTokenError"
                },
                "The access token has been obtained for the wrong audience or resource.",
            );
        }
        let s = state.lock().expect("fake");
        if let Some(reply) = &s.reply {
            return reply.clone();
        }
        let answer = || {
            s.answers
                .iter()
                .find(|(k, _)| *k == api)
                .map(|(_, a)| a.clone())
                .unwrap_or_default()
        };
        match api {
            "monitor" => {
                assert_eq!(r.method, "GET");
                if r.query("api-version").as_deref() != Some("2018-01-01") {
                    return azure_error(
                        StatusCode::BAD_REQUEST,
                        "InvalidApiVersionParameter",
                        "The api-version is invalid.",
                    );
                }
                let timespan = r.query("timespan").unwrap_or_default();
                if r.query("metricnames").is_none() || timespan.split('/').count() != 2 {
                    return json(
                        StatusCode::BAD_REQUEST,
                        serde_json::json!({"code": "BadRequest", "message": "Invalid timespan"}),
                    );
                }
                if !path.ends_with("/providers/Microsoft.Insights/metrics") {
                    return azure_error(
                        StatusCode::NOT_FOUND,
                        "ResourceNotFound",
                        "The Resource was not found.",
                    );
                }
            }
            "logs" | "kusto" => {
                assert_eq!(r.method, "POST");
                assert!(
                    r.header("content-type")
                        .is_some_and(|c| c.starts_with("application/json")),
                    "{r:?}"
                );
                let body: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
                let field = if api == "logs" { "query" } else { "csl" };
                if !body[field].is_string() {
                    return azure_error(
                        StatusCode::BAD_REQUEST,
                        if api == "logs" {
                            "BadArgumentError"
                        } else {
                            "General_BadRequest"
                        },
                        "The request had some invalid properties",
                    );
                }
            }
            _ => {
                assert_eq!(r.method, "GET");
                if r.query("timespan").is_none() {
                    return azure_error(
                        StatusCode::BAD_REQUEST,
                        "BadArgumentError",
                        "timespan is required",
                    );
                }
            }
        }
        (StatusCode::OK, Vec::new(), answer())
    }
}

struct Azure {
    fake: Fake,
    state: Shared,
    now: Arc<AtomicI64>,
}

async fn start() -> Azure {
    let state = Shared::default();
    state.lock().expect("fake").expires_in = 3599;
    Azure {
        fake: Fake::start(handler(state.clone())).await,
        state,
        now: Arc::new(AtomicI64::new(NOW)),
    }
}

impl Azure {
    fn endpoints(&self) -> VendorEndpoints {
        let fake = url::Url::parse(&self.fake.url()).expect("fake URL");
        [
            "login.microsoftonline.com",
            "management.azure.com",
            "api.loganalytics.io",
            "api.applicationinsights.io",
            CLUSTER,
        ]
        .into_iter()
        .fold(VendorEndpoints::default(), |e, host| {
            e.with(host, fake.clone())
        })
    }

    fn clock(&self) -> Clock {
        let now = self.now.clone();
        Clock::from_fn(move || {
            jiff::Timestamp::from_second(now.load(Ordering::SeqCst)).expect("time")
        })
    }

    fn advance(&self, seconds: i64) {
        self.now.fetch_add(seconds, Ordering::SeqCst);
    }

    async fn harness(
        &self,
        trigger_type: &str,
        metadata: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> Harness {
        conformance(
            trigger_type,
            Setup {
                metadata,
                auth,
                clock: Some(self.clock()),
                vendor_endpoints: self.endpoints(),
                ..Setup::default()
            },
        )
        .await
    }

    fn answer(&self, api: &'static str, body: &str) {
        let mut s = self.state.lock().expect("fake");
        s.answers.retain(|(k, _)| *k != api);
        s.answers.push((api, body.to_string()));
    }

    fn reply(&self, reply: Option<Answer>) {
        self.state.lock().expect("fake").reply = reply;
    }

    fn tokens(&self) -> usize {
        self.state.lock().expect("fake").tokens_issued
    }

    fn api_requests(&self) -> Vec<Request> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| !r.path().ends_with("/token"))
            .collect()
    }
}

const MONITOR_AUTH: &[(&str, &str)] = &[
    ("activeDirectoryClientId", CLIENT),
    ("activeDirectoryClientPassword", SECRET),
];

fn metrics_answer(points: &str) -> String {
    format!(
        r#"{{"cost":59,"timespan":"2023-11-14T22:12:20Z/2023-11-14T22:13:20Z","interval":"PT1M","value":[{{"id":"/subscriptions/2f8d1a4c-0000-4000-8000-000000000001/resourceGroups/my-rg/providers/Microsoft.ContainerService/managedClusters/my-aks/providers/Microsoft.Insights/metrics/kube_pod_status_ready","type":"Microsoft.Insights/metrics","name":{{"value":"kube_pod_status_ready","localizedValue":"Number of pods in Ready state"}},"displayDescription":"","unit":"Count","timeseries":[{{"metadatavalues":[{{"name":{{"value":"namespace"}},"value":"default"}}],"data":[{points}]}}],"errorCode":"Success"}}],"namespace":"Microsoft.ContainerService/managedClusters","resourceregion":"westeurope"}}"#
    )
}

#[tokio::test]
async fn monitor_reads_the_last_point_with_one_cached_token_per_principal_and_audience() {
    let az = start().await;
    az.answer(
        "monitor",
        &metrics_answer(
            r#"{"timeStamp":"2023-11-14T22:12:00Z","average":1.0},{"timeStamp":"2023-11-14T22:13:00Z","average":3.0}"#,
        ),
    );
    let h = az.harness("azure-monitor", &[], MONITOR_AUTH).await;
    assert_eq!(h.metric_name, "s0-azure-monitor-kube_pod_status_ready");
    h.expect(3.0, true).await;
    let r = az.api_requests().pop().expect("a metrics request");
    assert_eq!(
        r.path(),
        "/subscriptions/2f8d1a4c-0000-4000-8000-000000000001/resourceGroups/my-rg/providers/Microsoft.ContainerService/managedClusters/my-aks/providers/Microsoft.Insights/metrics"
    );
    assert_eq!(
        r.query("metricnames").as_deref(),
        Some("kube_pod_status_ready")
    );
    assert_eq!(r.query("aggregation").as_deref(), Some("Average"));
    assert_eq!(
        r.query("$filter").as_deref(),
        Some("namespace eq 'default'")
    );
    assert_eq!(
        r.query("timespan").as_deref(),
        Some("2023-11-14T22:12:20Z/2023-11-14T22:13:20Z")
    );
    let token_request = az
        .fake
        .requests()
        .into_iter()
        .find(|r| r.path().ends_with("/token"))
        .expect("a token request");
    assert_eq!(token_request.path(), format!("/{TENANT}/oauth2/v2.0/token"));
    assert!(
        token_request
            .body
            .contains("scope=https%3A%2F%2Fmanagement.azure.com%2F.default")
    );

    // The token is kept while it has more than five minutes left.
    h.expect(3.0, true).await;
    az.advance(3599 - 301);
    h.expect(3.0, true).await;
    assert_eq!(az.tokens(), 1);
    az.advance(2);
    h.expect(3.0, true).await;
    assert_eq!(az.tokens(), 2);

    // Two more triggers with the same principal, built from one context as the operator builds
    // them (one ClientPools), share one client and its token.
    let (trigger, index) = crate::common::documented_trigger("azure-monitor");
    let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
    ctx.auth_params = MONITOR_AUTH
        .iter()
        .map(|(k, v)| (k.to_string(), keda_scalers::Secret::new(*v)))
        .collect();
    ctx.clock = az.clock();
    ctx.vendor_endpoints = az.endpoints();
    let registry = keda_scalers::Registry::builtin();
    let first = registry.build(ctx.clone()).await.expect("built");
    ctx.metadata
        .insert("metricAggregationType".into(), "Maximum".into());
    let second = registry.build(ctx).await.expect("built");
    let name = "s0-azure-monitor-kube_pod_status_ready";
    let report = first
        .scaler()
        .metrics_and_activity(name)
        .await
        .expect("a value");
    assert_eq!(report.values[0].value, 3.0);
    let err = second
        .scaler()
        .metrics_and_activity(name)
        .await
        .expect_err("no maximum in the answer")
        .to_string();
    assert!(err.contains("no Maximum value"), "{err}");
    assert_eq!(az.tokens(), 3, "one token for the two triggers");
    first.scaler().close().await;
    second.scaler().close().await;

    // Throttled: 429 with Retry-After holds every request for that long.
    az.reply(Some((
        StatusCode::TOO_MANY_REQUESTS,
        vec![("retry-after", "30".into())],
        r#"{"error":{"code":"TooManyRequests","message":"s3cret throttling text"}}"#.into(),
    )));
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains("TooManyRequests") && !err.contains("s3cret"),
        "{err}"
    );
    az.reply(None);
    let sent = az.api_requests().len();
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains("throttled") && err.contains("2023-11-14T23:08:50Z"),
        "{err}"
    );
    assert_eq!(
        az.api_requests().len(),
        sent,
        "no request before Retry-After"
    );
    az.advance(31);
    h.expect(3.0, true).await;

    // 401 from the API drops the token; the next poll gets a new one.
    let issued = az.tokens();
    az.reply(Some(azure_error(
        StatusCode::UNAUTHORIZED,
        "ExpiredAuthenticationToken",
        "The access token expiry UTC time is earlier than current UTC time.",
    )));
    let err = h.expect_error().await.to_string();
    assert!(err.contains("ExpiredAuthenticationToken"), "{err}");
    az.reply(None);
    h.expect(3.0, true).await;
    assert_eq!(az.tokens(), issued + 1);

    // An unknown resource, in Azure's words only by its code.
    az.reply(Some(azure_error(
        StatusCode::NOT_FOUND,
        "ResourceNotFound",
        "The Resource 'Microsoft.ContainerService/managedClusters/s3cret' was not found",
    )));
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains("ResourceNotFound") && !err.contains("s3cret"),
        "{err}"
    );
    az.reply(None);
    // No time series, and no data: KEDA's messages.
    az.answer(
        "monitor",
        r#"{"value":[{"name":{"value":"m"},"timeseries":[],"errorCode":"Success"}]}"#,
    );
    let err = h.expect_error().await.to_string();
    assert!(err.contains("without timeseries"), "{err}");
    az.answer(
        "monitor",
        &metrics_answer(r#"{"timeStamp":"2023-11-14T22:13:00Z","average":0}"#),
    );
    h.expect(0.0, false).await;
    h.close().await;
}

#[tokio::test]
async fn refused_token_requests_name_the_oauth_code_and_number_never_the_description() {
    let az = start().await;
    az.answer("monitor", &metrics_answer(r#"{"average":1}"#));
    let wrong = [
        ("activeDirectoryClientId", CLIENT),
        ("activeDirectoryClientPassword", "not-the-secret"),
    ];
    let h = az.harness("azure-monitor", &[], &wrong).await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains("invalid_client (AADSTS7000215)") && err.contains(CLIENT),
        "{err}"
    );
    assert!(
        !err.contains("not-the-secret") && !err.contains("Invalid client secret"),
        "{err}"
    );
    h.close().await;
    let h = az
        .harness(
            "azure-monitor",
            &[("tenantId", "fabrikam.example")],
            MONITOR_AUTH,
        )
        .await;
    let err = h.expect_error().await.to_string();
    assert!(err.contains("invalid_request (AADSTS90002)"), "{err}");
    h.close().await;
    assert!(
        az.api_requests().is_empty(),
        "no API request without a token"
    );
    assert_eq!(az.tokens(), 0);
}

#[tokio::test]
async fn log_analytics_posts_the_query_and_reads_the_one_row() {
    let az = start().await;
    let table = |value: &str| {
        format!(
            r#"{{"tables":[{{"name":"PrimaryResult","columns":[{{"name":"count_","type":"long"}}],"rows":[[{value}]]}}]}}"#
        )
    };
    az.answer("logs", &table("120"));
    let auth = [
        ("tenantId", DOMAIN_TENANT),
        ("clientId", CLIENT),
        ("clientSecret", SECRET),
    ];
    let h = az.harness("azure-log-analytics", &[], &auth).await;
    assert_eq!(
        h.metric_name,
        "s0-azure-log-analytics-74b5bd3a-1c3e-4bf1-a4a4-1ee0e1a6e6b4"
    );
    h.expect(120.0, true).await;
    let r = az.api_requests().pop().expect("a query");
    assert_eq!(
        r.path(),
        "/v1/workspaces/74b5bd3a-1c3e-4bf1-a4a4-1ee0e1a6e6b4/query"
    );
    let body: serde_json::Value = serde_json::from_str(&r.body).expect("JSON");
    assert_eq!(
        body["query"],
        "AppRequests | where TimeGenerated > ago(5m) | summarize count()"
    );
    az.answer("logs", &table("5"));
    h.expect(5.0, false).await;
    az.answer("logs", &table("-1"));
    assert!(h.expect_error().await.to_string().contains(">=0"));
    az.answer(
        "logs",
        r#"{"tables":[{"name":"PrimaryResult","columns":[{"name":"c","type":"long"}],"rows":[[1],[2]]}]}"#,
    );
    assert!(h.expect_error().await.to_string().contains("too many rows"));
    az.reply(Some(azure_error(
        StatusCode::BAD_REQUEST,
        "SemanticError",
        "'s3cretTable' could not be resolved",
    )));
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains("SemanticError") && !err.contains("s3cret"),
        "{err}"
    );
    az.reply(None);
    h.close().await;
}

#[tokio::test]
async fn app_insights_gets_the_metric_with_its_timespan_and_aggregation() {
    let az = start().await;
    az.answer(
        "insights",
        r#"{"value":{"start":"2023-11-14T22:08:20Z","end":"2023-11-14T22:13:20Z","requests/count":{"sum":240}}}"#,
    );
    let auth = [
        (
            "applicationInsightsId",
            "0c5a5ea8-2e0a-4e4b-a0a5-3b2b3a1c0001",
        ),
        ("activeDirectoryClientId", CLIENT),
        ("activeDirectoryClientPassword", SECRET),
    ];
    let h = az.harness("azure-app-insights", &[], &auth).await;
    assert_eq!(h.metric_name, "s0-azure-app-insights-requests-count");
    h.expect(240.0, true).await;
    let r = az.api_requests().pop().expect("a metrics request");
    assert_eq!(
        r.path(),
        "/v1/apps/0c5a5ea8-2e0a-4e4b-a0a5-3b2b3a1c0001/metrics/requests/count"
    );
    assert_eq!(r.query("timespan").as_deref(), Some("PT00H05M"));
    assert_eq!(r.query("aggregation").as_deref(), Some("sum"));
    assert_eq!(
        r.query("filter").as_deref(),
        Some("cloud/roleName eq 'web'")
    );
    // No such aggregation: an error, or 0 with ignoreNullValues.
    az.answer("insights", r#"{"value":{"requests/count":{"avg":2}}}"#);
    assert!(
        h.expect_error()
            .await
            .to_string()
            .contains("did not contain aggregation type sum")
    );
    let lenient = az
        .harness("azure-app-insights", &[("ignoreNullValues", "true")], &auth)
        .await;
    lenient.expect(0.0, false).await;
    lenient.close().await;
    az.reply(Some(azure_error(
        StatusCode::NOT_FOUND,
        "PathNotFoundError",
        "The requested path does not exist",
    )));
    assert!(
        h.expect_error()
            .await
            .to_string()
            .contains("PathNotFoundError")
    );
    h.close().await;
}

fn kusto_frames(rows: &str, has_errors: bool) -> String {
    format!(
        r#"[{{"FrameType":"DataSetHeader","IsProgressive":false,"Version":"v2.0","IsFragmented":false,"ErrorReportingPlacement":"InData"}},{{"FrameType":"DataTable","TableId":0,"TableKind":"QueryProperties","TableName":"@ExtendedProperties","Columns":[{{"ColumnName":"TableId","ColumnType":"int"}},{{"ColumnName":"Key","ColumnType":"string"}},{{"ColumnName":"Value","ColumnType":"dynamic"}}],"Rows":[[1,"Visualization",{{"Visualization":null}}]]}},{{"FrameType":"DataTable","TableId":1,"TableKind":"PrimaryResult","TableName":"PrimaryResult","Columns":[{{"ColumnName":"Count","ColumnType":"long"}}],"Rows":{rows}}},{{"FrameType":"DataTable","TableId":2,"TableKind":"QueryCompletionInformation","TableName":"QueryCompletionInformation","Columns":[],"Rows":[]}},{{"FrameType":"DataSetCompletion","HasErrors":{has_errors},"Cancelled":false}}]"#
    )
}

#[tokio::test]
async fn data_explorer_posts_the_query_to_the_cluster_and_reads_the_primary_result() {
    let az = start().await;
    az.answer("kusto", &kusto_frames("[[17]]", false));
    let h = az
        .harness("azure-data-explorer", &[], &[("clientSecret", SECRET)])
        .await;
    assert_eq!(h.metric_name, "s0-azure-data-explorer-jobs");
    h.expect(17.0, true).await;
    let r = az.api_requests().pop().expect("a query");
    let body: serde_json::Value = serde_json::from_str(&r.body).expect("JSON");
    assert_eq!(body["db"], "jobs");
    assert_eq!(body["csl"], "Jobs | where State == 'queued' | count");
    assert_eq!(r.header("x-ms-app").as_deref(), Some("keda-rs"));
    let token_request = az
        .fake
        .requests()
        .into_iter()
        .find(|r| r.path().ends_with("/token"))
        .expect("a token request");
    assert_eq!(
        token_request.path(),
        format!("/{DOMAIN_TENANT}/oauth2/v2.0/token")
    );
    az.answer("kusto", &kusto_frames("[[3]]", true));
    assert!(h.expect_error().await.to_string().contains("HasErrors"));
    az.answer("kusto", &kusto_frames("[]", false));
    assert!(h.expect_error().await.to_string().contains("no results"));
    az.reply(Some(azure_error(
        StatusCode::BAD_REQUEST,
        "General_BadRequest",
        "Syntax error: s3cret",
    )));
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains("General_BadRequest") && !err.contains("s3cret"),
        "{err}"
    );
    az.reply(None);
    az.answer("kusto", &kusto_frames("[[0]]", false));
    h.expect(0.0, false).await;
    h.close().await;
}

#[test]
fn every_documented_example_parses_with_its_defaults_documented() {
    let registry = keda_scalers::Registry::builtin();
    for trigger_type in [
        "azure-app-insights",
        "azure-data-explorer",
        "azure-log-analytics",
        "azure-monitor",
    ] {
        crate::common::assert_defaults_documented(&registry, trigger_type);
        let examples = crate::common::documented_examples(trigger_type);
        assert!(!examples.is_empty(), "{trigger_type}");
        for (trigger, index, auth) in examples {
            let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
            for param in auth {
                ctx.auth_params
                    .insert(param, keda_scalers::Secret::new("s3cret"));
            }
            let checked = registry.check(&ctx).expect("a parse-only check");
            assert!(
                checked.is_ok(),
                "docs/scalers/{trigger_type}.md: {checked:?}"
            );
        }
    }
}
