//! The monitoring-API scalers of issue 24 (`loki`, ...), built from their documented examples
//! through the registry and driven against fake servers on loopback that follow each vendor's
//! published API reference: the fake checks the request as the real service would (path, query,
//! headers, authentication) and answers with the documented shapes, errors and throttling.
//! Each fake cites the reference it follows.

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

use base64::Engine as _;
use common::{Setup, conformance};
use http::StatusCode;
use http_server::{Recorded, TestServer, handler};
use keda_scalers::Registry;

/// The answer a Loki instant query gives for a one-element vector of `value`.
fn loki_vector(value: &str) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1700000000.123,"{value}"]}}],"stats":{{"summary":{{"bytesProcessedPerSecond":0}}}}}}}}"#
    )
}

/// A fake Loki following
/// <https://grafana.com/docs/loki/latest/reference/loki-http-api/#query-logs-at-a-single-point-in-time>:
/// `GET /loki/api/v1/query?query=<LogQL>`, the tenant in `X-Scope-OrgID` (required when
/// multi-tenancy is on: without it Loki answers `401 no org id`), basic authentication at the
/// gateway. The query decides the answer:
/// - `sum(count_over_time({app="api"}[1m]))`: a one-element vector of 7;
/// - `sum(rate({app="none"}[1m]))`: an empty vector;
/// - `{app="api"}`: log streams (a log query);
/// - `by-level`: two series;
/// - `throttled`: `429 Too Many Requests` with Loki's plain-text reason (per-tenant query
///   limits, <https://grafana.com/docs/loki/latest/operations/request-validation-rate-limits/>);
/// - anything else: `400 Bad Request` with Loki's plain-text parse error.
fn fake_loki(
    tenant: &'static str,
    user: &'static str,
    password: &'static str,
) -> http_server::Handler {
    let expected_auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    );
    handler(move |r: &Recorded| {
        if r.method != "GET" || !r.uri.starts_with("/loki/api/v1/query?") {
            return (
                StatusCode::NOT_FOUND,
                "text/plain",
                "404 page not found\n".into(),
            );
        }
        if r.header("authorization").as_deref() != Some(expected_auth.as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                "text/plain",
                "Unauthorized\n".into(),
            );
        }
        if r.header("x-scope-orgid").as_deref() != Some(tenant) {
            return (StatusCode::UNAUTHORIZED, "text/plain", "no org id\n".into());
        }
        let query = r.query("query").unwrap_or_default();
        match query.as_str() {
            r#"sum(count_over_time({app="api"}[1m]))"# => {
                (StatusCode::OK, "application/json", loki_vector("7"))
            }
            r#"sum(rate({app="none"}[1m]))"# => (
                StatusCode::OK,
                "application/json",
                r#"{"status":"success","data":{"resultType":"vector","result":[],"stats":{}}}"#.into(),
            ),
            r#"{app="api"}"# => (
                StatusCode::OK,
                "application/json",
                r#"{"status":"success","data":{"resultType":"streams","result":[{"stream":{"app":"api"},"values":[["1700000000000000000","GET /x SECRET-LINE"]]}],"stats":{}}}"#.into(),
            ),
            "by-level" => (
                StatusCode::OK,
                "application/json",
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"level":"info"},"value":[1,"1"]},{"metric":{"level":"error"},"value":[1,"2"]}]}}"#.into(),
            ),
            "throttled" => (
                StatusCode::TOO_MANY_REQUESTS,
                "text/plain; charset=utf-8",
                "too many outstanding requests\n".into(),
            ),
            _ => (
                StatusCode::BAD_REQUEST,
                "text/plain; charset=utf-8",
                "parse error at line 1, col 1: syntax error: unexpected IDENTIFIER\n".into(),
            ),
        }
    })
}

#[tokio::test]
async fn loki_reads_a_metric_query_with_tenant_and_basic_auth_as_the_api_reference_shows() {
    let server = TestServer::start(fake_loki("team-a", "loki-user", "l0ki-pass")).await;
    let address = server.url("/");
    let auth = [("username", "loki-user"), ("password", "l0ki-pass")];
    let setup = |query: &'static str, ignore: &'static str| -> Vec<(&'static str, String)> {
        vec![
            ("query", query.to_string()),
            ("ignoreNullValues", ignore.to_string()),
        ]
    };
    let build = |changes: Vec<(&'static str, String)>| {
        let address = address.clone();
        async move {
            let mut metadata: Vec<(&str, &str)> = vec![("serverAddress", address.as_str())];
            metadata.extend(changes.iter().map(|(k, v)| (*k, v.as_str())));
            conformance(
                "loki",
                Setup {
                    metadata: &metadata,
                    auth: &auth,
                    ..Setup::default()
                },
            )
            .await
        }
    };

    // The documented example's tenant and auth, a query answering 7 (activation 0.1).
    let h = build(setup(r#"sum(count_over_time({app="api"}[1m]))"#, "false")).await;
    h.expect(7.0, true).await;
    let seen = server.last_request();
    assert_eq!(seen.method, "GET");
    assert!(
        seen.uri.starts_with("/loki/api/v1/query?query="),
        "{}",
        seen.uri
    );
    assert_eq!(seen.header("x-scope-orgid").as_deref(), Some("team-a"));
    h.close().await;

    // An empty vector: 0 with ignoreNullValues, an error naming the query without.
    build(setup(r#"sum(rate({app="none"}[1m]))"#, "true"))
        .await
        .expect(0.0, false)
        .await;
    let err = build(setup(r#"sum(rate({app="none"}[1m]))"#, "false"))
        .await
        .expect_error()
        .await
        .to_string();
    assert_eq!(
        err,
        r#"trigger 0 (loki): loki query `sum(rate({app="none"}[1m]))`: the result is empty, the metrics may be lost (with ignoreNullValues "false" this is an error)"#
    );

    // A log query and a query by level: errors saying what to write, never the log lines.
    let err = build(setup(r#"{app="api"}"#, "true"))
        .await
        .expect_error()
        .await
        .to_string();
    assert!(
        err.contains("returned log streams; it must be a metric query"),
        "{err}"
    );
    assert!(!err.contains("SECRET-LINE"), "{err}");
    let err = build(setup("by-level", "true"))
        .await
        .expect_error()
        .await
        .to_string();
    assert!(err.contains("returned multiple elements (2)"), "{err}");

    // Loki's own error text (a parse error, a throttled tenant) stays out of the message.
    let err = build(setup("sum(", "true"))
        .await
        .expect_error()
        .await
        .to_string();
    assert!(
        err.starts_with(&format!(
            "trigger 0 (loki): loki query `sum(` on serverAddress http://{}/loki/api/v1/query failed: answered HTTP 400 Bad Request",
            server.addr
        )),
        "{err}"
    );
    assert!(!err.contains("syntax error"), "{err}");
    let err = build(setup("throttled", "true"))
        .await
        .expect_error()
        .await
        .to_string();
    assert!(err.contains("answered HTTP 429 Too Many Requests"), "{err}");
    assert!(!err.contains("outstanding"), "{err}");
}

#[tokio::test]
async fn loki_refused_credentials_or_tenant_fail_with_a_hint_and_never_show_the_password() {
    let server = TestServer::start(fake_loki("team-a", "loki-user", "l0ki-pass")).await;
    let h = conformance(
        "loki",
        Setup {
            metadata: &[("serverAddress", &server.url("/loki"))],
            auth: &[("username", "loki-user"), ("password", "wr0ng-pass")],
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.ends_with("; check the trigger's authModes and its credentials"),
        "{err}"
    );
    assert!(!err.contains("wr0ng-pass"), "{err}");
    // The path prefix /loki became the query path.
    assert!(server.last_request().uri.starts_with("/loki/api/v1/query?"));
}

#[test]
fn every_documented_example_of_the_monitoring_triggers_parses_with_its_defaults_documented() {
    let registry = Registry::builtin();
    // Values a Secret would hold for the parameters the examples' TriggerAuthentications name.
    let cloud_id = format!(
        "my-deployment:{}",
        base64::engine::general_purpose::STANDARD.encode("us-east-1.aws.found.io$es-id$kb-id")
    );
    let sample = |param: &str| match param {
        "cloudID" => cloud_id.clone(),
        _ => "s3cret".to_string(),
    };
    for trigger_type in ["elasticsearch", "influxdb", "loki", "opensearch"] {
        common::assert_parameters_documented(&registry, trigger_type);
        common::assert_defaults_documented(&registry, trigger_type);
        let examples = common::documented_examples(trigger_type);
        assert!(!examples.is_empty(), "{trigger_type}");
        for (trigger, index, auth) in examples {
            let mut ctx = keda_scalers::ScalerContext::from_trigger(&trigger, index);
            for param in auth {
                let value = keda_scalers::Secret::new(sample(&param));
                ctx.auth_params.insert(param, value);
            }
            let checked = registry.check(&ctx).expect("a parse-only check");
            assert!(
                checked.is_ok(),
                "docs/scalers/{trigger_type}.md: {checked:?}"
            );
        }
    }
}

/// Annotated CSV of one table whose first record's `_value` is `value` of `datatype`.
fn influx_csv(datatype: &str, value: &str) -> String {
    format!(
        "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,{datatype},string,string\r\n\
         #group,false,false,true,true,false,false,true,true\r\n\
         #default,_result,,,,,,,\r\n\
         ,result,table,_start,_stop,_time,_value,_field,_measurement\r\n\
         ,,0,2024-01-01T00:00:00Z,2024-01-01T01:00:00Z,2024-01-01T00:59:00Z,{value},depth,queue\r\n\
         ,,0,2024-01-01T00:00:00Z,2024-01-01T01:00:00Z,2024-01-01T00:59:30Z,99,depth,queue\r\n\r\n"
    )
}

/// A fake InfluxDB 2 following the query API reference,
/// <https://docs.influxdata.com/influxdb/v2/api/#operation/PostQuery>: `POST /api/v2/query?org=`,
/// `Authorization: Token <token>` (else `401 {"code":"unauthorized"}`), an organization it
/// knows (else `404 {"code":"not found"}`), a JSON body with `query`, `type: flux` and the
/// annotations dialect; the answer is annotated CSV
/// (<https://docs.influxdata.com/influxdb/v2/reference/syntax/annotated-csv/>), or an error
/// object `{"code","message"}`. The Flux query decides:
/// - containing `depth`: a table whose first `_value` is the `long` 7;
/// - containing `load`: a `double` 2.5;
/// - containing `nothing`: an empty answer (no table);
/// - containing `late-failure`: the `error`/`reference` table of a query failing mid-stream;
/// - containing `throttled`: `429 {"code":"too many requests"}` with `Retry-After`, the
///   answer of InfluxDB Cloud's query rate limits
///   (<https://docs.influxdata.com/influxdb/cloud/account-management/limits/>);
/// - anything else: `400 {"code":"invalid","message":"compilation failed: ..."}`.
fn fake_influxdb(token: &'static str, org: &'static str) -> http_server::Handler {
    let json = "application/json; charset=utf-8";
    handler(move |r: &Recorded| {
        if r.method != "POST" || !r.uri.starts_with("/api/v2/query?") {
            return (
                StatusCode::NOT_FOUND,
                json,
                r#"{"code":"not found","message":"path not found"}"#.into(),
            );
        }
        if r.header("authorization").as_deref() != Some(&format!("Token {token}")) {
            return (
                StatusCode::UNAUTHORIZED,
                json,
                r#"{"code":"unauthorized","message":"unauthorized access"}"#.into(),
            );
        }
        if r.query("org").as_deref() != Some(org) {
            return (
                StatusCode::NOT_FOUND,
                json,
                r#"{"code":"not found","message":"organization name \"x\" not found"}"#.into(),
            );
        }
        if !r
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json"))
        {
            return (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                json,
                r#"{"code":"unsupported media type","message":"unsupported"}"#.into(),
            );
        }
        let Ok(body) = serde_json::from_str::<serde_json::Value>(&r.body) else {
            return (
                StatusCode::BAD_REQUEST,
                json,
                r#"{"code":"invalid","message":"failed to decode request body"}"#.into(),
            );
        };
        let annotations = &body["dialect"]["annotations"];
        if body["type"] != "flux"
            || !annotations
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == "datatype"))
        {
            return (
                StatusCode::BAD_REQUEST,
                json,
                r#"{"code":"invalid","message":"bad dialect"}"#.into(),
            );
        }
        let query = body["query"].as_str().unwrap_or_default();
        let csv = "text/csv; charset=utf-8";
        if query.contains("depth") {
            (StatusCode::OK, csv, influx_csv("long", "7"))
        } else if query.contains("load") {
            (StatusCode::OK, csv, influx_csv("double", "2.5"))
        } else if query.contains("nothing") {
            (StatusCode::OK, csv, "\r\n".into())
        } else if query.contains("late-failure") {
            (
                StatusCode::OK,
                csv,
                "#datatype,string,string\r\n#group,true,true\r\n#default,,\r\n,error,reference\r\n,\"runtime error: SECRET-DETAIL\",\r\n\r\n".into(),
            )
        } else if query.contains("throttled") {
            (
                StatusCode::TOO_MANY_REQUESTS,
                json,
                r#"{"code":"too many requests","message":"org 0123 has exceeded limited_query plan limit SECRET-DETAIL"}"#.into(),
            )
        } else {
            (
                StatusCode::BAD_REQUEST,
                json,
                r#"{"code":"invalid","message":"compilation failed: error @1:1-1:4: undefined identifier SECRET-DETAIL"}"#.into(),
            )
        }
    })
}

#[tokio::test]
async fn influxdb_posts_the_flux_query_with_its_token_and_reads_the_first_value() {
    let server = TestServer::start(fake_influxdb("influx-t0ken", "keda")).await;
    let address = server.url("");
    let build = |query: &'static str| {
        let address = address.clone();
        async move {
            conformance(
                "influxdb",
                Setup {
                    metadata: &[("serverURL", address.as_str()), ("query", query)],
                    auth: &[("authToken", "influx-t0ken")],
                    ..Setup::default()
                },
            )
            .await
        }
    };
    // The documented query reads the queue depth (7, activation 1).
    let h = build(r#"from(bucket: "jobs") |> range(start: -1h) |> filter(fn: (r) => r._field == "depth") |> last()"#).await;
    assert_eq!(h.metric_name, "s0-influxdb-keda");
    h.expect(7.0, true).await;
    let seen = server.last_request();
    assert_eq!(seen.uri, "/api/v2/query?org=keda");
    assert_eq!(seen.header("accept").as_deref(), Some("application/csv"));
    let body: serde_json::Value = serde_json::from_str(&seen.body).expect("a JSON body");
    assert_eq!(body["type"], "flux");
    assert!(body["query"].as_str().unwrap().contains("depth"));
    h.close().await;
    build("load").await.expect(2.5, true).await;

    // No record, a failure in the stream, a compilation error, throttling: errors naming the
    // organization and the server, InfluxDB's code when it is a documented one, never its text.
    let operation = format!(
        "trigger 0 (influxdb): influxdb query of organizationName keda on serverURL http://{}/api/v2/query failed: ",
        server.addr
    );
    for (query, expected) in [
        ("nothing", "no results found from query"),
        (
            "late-failure",
            "InfluxDB reported an error in the query's result (its text is logged at debug level)",
        ),
        ("bad(", "InfluxDB answered error \"invalid\" (HTTP 400)"),
        (
            "throttled",
            "InfluxDB answered error \"too many requests\" (HTTP 429)",
        ),
    ] {
        let err = build(query).await.expect_error().await.to_string();
        assert_eq!(err, format!("{operation}{expected}"), "{query}");
        assert!(!err.contains("SECRET"), "{err}");
    }
}

#[tokio::test]
async fn influxdb_wrong_token_or_organization_fail_without_showing_the_token() {
    let server = TestServer::start(fake_influxdb("influx-t0ken", "keda")).await;
    let address = server.url("/");
    let h = conformance(
        "influxdb",
        Setup {
            metadata: &[("serverURL", &address)],
            auth: &[("authToken", "wr0ng-t0ken")],
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(err.contains("answered HTTP 401 Unauthorized"), "{err}");
    assert!(!err.contains("wr0ng-t0ken"), "{err}");
    // The token from the container's environment; an organization the server does not know.
    let h = conformance(
        "influxdb",
        Setup {
            metadata: &[
                ("serverURL", &address),
                ("organizationName", "other"),
                ("authTokenFromEnv", "INFLUX_TOKEN"),
            ],
            env: &[("INFLUX_TOKEN", "influx-t0ken")],
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.ends_with("InfluxDB answered error \"not found\" (HTTP 404)"),
        "{err}"
    );
}

/// A search answer with `total` hits.
fn es_hits(total: u64) -> String {
    format!(
        r#"{{"took":3,"timed_out":false,"_shards":{{"total":1,"successful":1,"skipped":0,"failed":0}},"hits":{{"total":{{"value":{total},"relation":"eq"}},"max_score":null,"hits":[]}},"aggregations":{{"oldest":{{"value":null}}}}}}"#
    )
}

/// An Elasticsearch error answer of `error_type` (the shape of every error of the REST API:
/// <https://www.elastic.co/docs/api/doc/elasticsearch/#topic-error-responses>).
fn es_error(status: StatusCode, error_type: &str) -> http_server::Answer {
    (
        status,
        "application/json",
        format!(
            r#"{{"error":{{"root_cause":[{{"type":"{error_type}","reason":"SECRET-REASON"}}],"type":"{error_type}","reason":"SECRET-REASON"}},"status":{}}}"#,
            status.as_u16()
        ),
    )
}

/// A fake Elasticsearch following the search template API
/// (<https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-search-template>) and
/// the search API (<https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-search>):
/// basic authentication (else `401 security_exception`), `POST /<indices>/_search/template`
/// with a JSON body `{"id", "params"}` and `POST /<indices>/_search` with a query DSL body.
/// Index `jobs` holds 7 pending documents for template `pending-jobs` with params
/// `queue: orders`; the query `{"query":{"match_all":{}}}` matches 12 in `jobs,archive`; an
/// unknown index is `404 index_not_found_exception`, an unknown template
/// `404 resource_not_found_exception`, a body that is not JSON `400 parsing_exception`, index
/// `busy` is `429 es_rejected_execution_exception` (the search thread pool's queue is full).
fn fake_elasticsearch(user: &'static str, password: &'static str) -> http_server::Handler {
    fake_search(Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )))
}

/// [`fake_elasticsearch`] checking the `Authorization` header only when `expected` is given
/// (OpenSearch's security plugin authenticates a client certificate in the TLS handshake
/// instead: <https://docs.opensearch.org/latest/security/authentication-backends/client-auth/>).
/// OpenSearch's search and search template APIs answer the same shapes
/// (<https://docs.opensearch.org/latest/api-reference/search-apis/search/>).
fn fake_search(expected: Option<String>) -> http_server::Handler {
    handler(move |r: &Recorded| {
        if expected.is_some() && r.header("authorization") != expected {
            return es_error(StatusCode::UNAUTHORIZED, "security_exception");
        }
        if r.method != "POST" && r.method != "GET" {
            return es_error(StatusCode::METHOD_NOT_ALLOWED, "illegal_argument_exception");
        }
        if !r
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json"))
        {
            return es_error(StatusCode::NOT_ACCEPTABLE, "illegal_argument_exception");
        }
        let Ok(body) = serde_json::from_str::<serde_json::Value>(&r.body) else {
            return es_error(StatusCode::BAD_REQUEST, "parsing_exception");
        };
        let path = r.uri.split('?').next().unwrap_or_default();
        let mut parts = path.trim_start_matches('/').split('/');
        let (indices, api) = (
            parts.next().unwrap_or_default(),
            parts.collect::<Vec<_>>().join("/"),
        );
        if indices.split(',').any(|i| i == "busy") {
            return es_error(
                StatusCode::TOO_MANY_REQUESTS,
                "es_rejected_execution_exception",
            );
        }
        if indices.split(',').any(|i| i != "jobs" && i != "archive") {
            return es_error(StatusCode::NOT_FOUND, "index_not_found_exception");
        }
        match api.as_str() {
            "_search/template" => {
                if body["id"] != "pending-jobs" {
                    return es_error(StatusCode::NOT_FOUND, "resource_not_found_exception");
                }
                let total = if body["params"]["queue"] == "orders" {
                    7
                } else {
                    0
                };
                (StatusCode::OK, "application/json", es_hits(total))
            }
            "_search" if body == serde_json::json!({"query": {"match_all": {}}}) => {
                (StatusCode::OK, "application/json", es_hits(12))
            }
            "_search" => (StatusCode::OK, "application/json", es_hits(0)),
            _ => es_error(StatusCode::BAD_REQUEST, "illegal_argument_exception"),
        }
    })
}

#[tokio::test]
async fn elasticsearch_runs_the_documented_search_template_and_query_with_basic_auth() {
    let server = TestServer::start(fake_elasticsearch("elastic", "e1astic-pass")).await;
    let address = server.url("");
    let auth = [("username", "elastic"), ("password", "e1astic-pass")];
    let build = |changes: Vec<(&'static str, String)>| {
        let address = address.clone();
        async move {
            let mut metadata: Vec<(&str, &str)> = vec![("addresses", address.as_str())];
            metadata.extend(changes.iter().map(|(k, v)| (*k, v.as_str())));
            conformance(
                "elasticsearch",
                Setup {
                    metadata: &metadata,
                    auth: &auth,
                    ..Setup::default()
                },
            )
            .await
        }
    };
    // The documented template: 7 pending orders (activation 1).
    let h = build(vec![]).await;
    assert_eq!(h.metric_name, "s0-elasticsearch-pending-jobs");
    h.expect(7.0, true).await;
    let seen = server.last_request();
    assert_eq!(
        (seen.method.as_str(), seen.uri.as_str()),
        ("POST", "/jobs/_search/template")
    );
    let body: serde_json::Value = serde_json::from_str(&seen.body).expect("JSON");
    assert_eq!(
        body,
        serde_json::json!({"id": "pending-jobs", "params": {"queue": "orders", "state": "pending"}})
    );
    h.close().await;

    // A query on two indices.
    let query = vec![
        ("searchTemplateName", String::new()),
        ("parameters", String::new()),
        ("index", "jobs;archive".to_string()),
        ("query", r#"{"query":{"match_all":{}}}"#.to_string()),
    ];
    let h = build(query.clone()).await;
    assert_eq!(h.metric_name, "s0-elasticsearch-query");
    h.expect(12.0, true).await;
    assert_eq!(server.last_request().uri, "/jobs,archive/_search");

    // A null aggregation: an error, or 0 with ignoreNullValues.
    let mut null = query.clone();
    null.push(("valueLocation", "aggregations.oldest.value".to_string()));
    let err = build(null.clone()).await.expect_error().await.to_string();
    assert!(
        err.contains("must point to a value of type number but points to nothing (null)"),
        "{err}"
    );
    null.push(("ignoreNullValues", "true".to_string()));
    build(null).await.expect(0.0, false).await;

    // The cluster's errors: the documented type, never its reason.
    for (changes, expected) in [
        (
            vec![("index", "nope".to_string())],
            "Elasticsearch answered error index_not_found_exception (HTTP 404)",
        ),
        (
            vec![("searchTemplateName", "other".to_string())],
            "Elasticsearch answered error resource_not_found_exception (HTTP 404)",
        ),
        (
            vec![("index", "busy".to_string())],
            "Elasticsearch answered error es_rejected_execution_exception (HTTP 429)",
        ),
    ] {
        let err = build(changes).await.expect_error().await.to_string();
        assert!(err.ends_with(expected), "{err}");
        assert!(!err.contains("SECRET"), "{err}");
    }
    let mut bad_json = query;
    bad_json.push(("query", "{not json".to_string()));
    let err = build(bad_json).await.expect_error().await.to_string();
    assert!(
        err.ends_with("Elasticsearch answered error parsing_exception (HTTP 400)"),
        "{err}"
    );
}

#[tokio::test]
async fn elasticsearch_moves_on_to_the_next_address_and_names_refused_credentials() {
    let server = TestServer::start(fake_elasticsearch("elastic", "e1astic-pass")).await;
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", l.local_addr().expect("addr"))
    };
    let unavailable = TestServer::start(handler(|_| {
        es_error(StatusCode::SERVICE_UNAVAILABLE, "cluster_block_exception")
    }))
    .await;
    let addresses = format!("{down},{},{}", unavailable.url(""), server.url(""));
    let h = conformance(
        "elasticsearch",
        Setup {
            metadata: &[("addresses", &addresses)],
            auth: &[("username", "elastic"), ("password", "e1astic-pass")],
            ..Setup::default()
        },
    )
    .await;
    // Whichever address a poll starts at, the refused one and the unavailable one are passed.
    for _ in 0..3 {
        h.expect(7.0, true).await;
    }
    assert_eq!(server.requests().len(), 3);

    let h = conformance(
        "elasticsearch",
        Setup {
            metadata: &[("addresses", &server.url(""))],
            auth: &[("username", "elastic"), ("password", "wr0ng-pass")],
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.ends_with(
            "elasticsearch authentication failed (HTTP 401): check username and password"
        ),
        "{err}"
    );
    assert!(!err.contains("wr0ng-pass"), "{err}");
}

#[tokio::test]
async fn opensearch_runs_the_documented_query_with_basic_auth_and_refuses_a_query_that_is_not_json()
{
    let server = TestServer::start(fake_elasticsearch("admin", "0pen-pass")).await;
    let address = server.url("");
    let auth = [
        ("username", "admin"),
        ("password", "0pen-pass"),
        ("caCert", ""),
    ];
    let h = conformance(
        "opensearch",
        Setup {
            metadata: &[
                ("addresses", &address),
                ("query", r#"{"query":{"match_all":{}}}"#),
                ("index", "jobs;archive"),
            ],
            auth: &auth,
            ..Setup::default()
        },
    )
    .await;
    assert_eq!(h.metric_name, "s0-opensearch-query");
    h.expect(12.0, true).await;
    let seen = server.last_request();
    assert_eq!(
        (seen.method.as_str(), seen.uri.as_str()),
        ("POST", "/jobs,archive/_search")
    );
    // KEDA checks the query is JSON before it sends it: nothing is sent.
    let before = server.requests().len();
    let h = conformance(
        "opensearch",
        Setup {
            metadata: &[("addresses", &address), ("query", "{size: 0")],
            auth: &auth,
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert_eq!(
        err,
        "trigger 0 (opensearch): parameter \"query\" is not valid JSON (invalid query JSON)"
    );
    assert_eq!(server.requests().len(), before);
    let h = conformance(
        "opensearch",
        Setup {
            metadata: &[("addresses", &address), ("index", "nope")],
            auth: &auth,
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.ends_with("OpenSearch answered error index_not_found_exception (HTTP 404)"),
        "{err}"
    );
    assert!(!err.contains("SECRET"), "{err}");
}

#[tokio::test]
async fn opensearch_with_enable_tls_authenticates_with_its_client_certificate() {
    let ca = http_server::TestCa::new("opensearch-test-ca");
    let server = TestServer::start_tls(fake_search(None), ca.server_config(true)).await;
    let (cert, key) = ca.client("keda");
    let ca_pem = ca.pem();
    let address = server.url("");
    let metadata = [
        ("addresses", address.as_str()),
        ("enableTLS", "true"),
        ("query", ""),
        ("searchTemplateName", "pending-jobs"),
        ("parameters", "queue:orders"),
    ];
    let h = conformance(
        "opensearch",
        Setup {
            metadata: &metadata,
            auth: &[
                ("clientCert", &cert),
                ("clientKey", &key),
                ("caCert", &ca_pem),
                ("username", ""),
                ("password", ""),
            ],
            ..Setup::default()
        },
    )
    .await;
    assert_eq!(h.metric_name, "s0-opensearch-pending-jobs");
    h.expect(7.0, true).await;
    assert_eq!(server.last_request().uri, "/jobs/_search/template");
    // Without the client certificate the cluster ends the handshake: a TLS error, no answer.
    let other = http_server::TestCa::new("other-ca");
    let (cert, key) = other.client("keda");
    let h = conformance(
        "opensearch",
        Setup {
            metadata: &metadata,
            auth: &[
                ("clientCert", &cert),
                ("clientKey", &key),
                ("caCert", &ca_pem),
            ],
            ..Setup::default()
        },
    )
    .await;
    let err = h.expect_error().await.to_string();
    assert!(
        err.contains("opensearch search template pending-jobs on https://127.0.0.1:"),
        "{err}"
    );
}
