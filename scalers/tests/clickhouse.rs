//! The `clickhouse` scaler against a real ClickHouse server (Debian's clickhouse-server, started
//! by `scripts/services.sh` on 127.0.0.1 with its HTTP interface on 8123 and a user `keda`
//! with password `keda-test-pw`), built from its documented example through the registry. Each
//! test creates a database of its own, fills a table through the HTTP interface and reads it
//! back through the scaler, so KEDA's reading (first column of the first row, no row is 0,
//! NULL an error), the native-port mapping, the DSN forms and ClickHouse's own error answers
//! are exercised against the server's answers.

#[allow(dead_code)]
mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{Harness, Setup, conformance};

const HTTP: &str = "http://127.0.0.1:8123/";
const USER: &str = "keda";
const PASSWORD: &str = "keda-test-pw";

/// Runs `sql` as `keda` through the HTTP interface.
async fn run(sql: &str) -> Result<String, String> {
    let client = keda_scalers::http_client::reqwest_client(
        &keda_scalers::tls::TlsSettings::default(),
        std::time::Duration::from_secs(10),
    )
    .map_err(|e| e.to_string())?;
    let answer = client
        .post(HTTP)
        .basic_auth(USER, Some(PASSWORD))
        .body(sql.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    let text = answer.text().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(text)
    } else {
        Err(format!("{status}: {text}"))
    }
}

/// A database of the test's own with a table `jobs (status String, n Nullable(Float64))`, or
/// `None` (skip; a failure under CI=true).
async fn database_or_skip(test: &str) -> Option<String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    let db = format!("keda_rs_{test}_{}_{nanos}", std::process::id());
    let attempt = async {
        run(&format!("CREATE DATABASE {db}")).await?;
        run(&format!(
            "CREATE TABLE {db}.jobs (status String, n Nullable(Float64)) ENGINE = Memory"
        ))
        .await
    };
    common::service_or_skip(
        test,
        "ClickHouse's HTTP interface on 127.0.0.1:8123",
        attempt,
    )
    .await
    .map(|_| db)
}

async fn harness(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Harness {
    let mut all = vec![("host", "127.0.0.1")];
    all.extend_from_slice(metadata);
    conformance(
        "clickhouse",
        Setup {
            metadata: &all,
            auth,
            ..Setup::default()
        },
    )
    .await
}

const KEDA: &[(&str, &str)] = &[("username", USER), ("password", PASSWORD)];

#[tokio::test]
async fn the_first_value_of_the_query_is_the_metric_and_activity_is_above_the_threshold() {
    let Some(db) = database_or_skip("value").await else {
        return;
    };
    // The documented example: native port 9000, asked on the HTTP interface's 8123.
    let h = harness(&[("database", &db)], KEDA).await;
    assert_eq!(h.metric_name, "s0-clickhouse");
    // count() is a UInt64, which ClickHouse quotes in JSON.
    h.expect(0.0, false).await;
    run(&format!(
        "INSERT INTO {db}.jobs VALUES ('pending', 1), ('pending', 2), ('done', 3)"
    ))
    .await
    .expect("insert");
    // SELECT count() FROM jobs WHERE status = 'pending': 2, above activationTargetQueryValue 1.
    h.expect(2.0, true).await;
    h.close().await;

    // Several columns and rows: the first of the first; a Float64 sum; no row is 0.
    for (query, value) in [
        (
            format!("SELECT sum(n) AS s, count() FROM {db}.jobs GROUP BY status ORDER BY s DESC"),
            3.0,
        ),
        (
            format!("SELECT avg(n) FROM {db}.jobs WHERE status = 'pending'"),
            1.5,
        ),
        (
            format!("SELECT n FROM {db}.jobs WHERE status = 'none'"),
            0.0,
        ),
    ] {
        let h = harness(&[("query", &query)], KEDA).await;
        h.expect(value, value > 1.0).await;
        h.close().await;
    }
}

#[tokio::test]
async fn connection_strings_reach_the_http_interface() {
    let Some(db) = database_or_skip("dsn").await else {
        return;
    };
    run(&format!("INSERT INTO {db}.jobs VALUES ('pending', 4)"))
        .await
        .expect("insert");
    let query = format!("SELECT count() + 4 FROM {db}.jobs");
    for dsn in [
        // The native port of KEDA's examples, mapped onto 8123.
        format!("clickhouse://{USER}:{PASSWORD}@127.0.0.1:9000/{db}"),
        // No port; the user and password as options.
        format!("tcp://127.0.0.1/{db}?username={USER}&password={PASSWORD}"),
        // clickhouse-go's HTTP protocol, a setting passed through.
        format!("http://{USER}:{PASSWORD}@127.0.0.1:8123/{db}?max_execution_time=30"),
    ] {
        let h = conformance(
            "clickhouse",
            Setup {
                metadata: &[("host", ""), ("query", &query)],
                auth: &[("connectionString", &dsn)],
                ..Setup::default()
            },
        )
        .await;
        h.expect(5.0, true).await;
        h.close().await;
    }
}

#[tokio::test]
async fn clickhouse_errors_show_its_code_and_status_never_its_message() {
    let Some(db) = database_or_skip("errors").await else {
        return;
    };
    // NULL cannot be scanned into a number, as in KEDA.
    let h = harness(&[("query", "SELECT NULL")], KEDA).await;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("NULL"), "{text}");
    h.close().await;

    // An unknown table: ClickHouse's code 60 (UNKNOWN_TABLE), not its message.
    let h = harness(
        &[("query", &format!("SELECT count() FROM {db}.no_such_table"))],
        KEDA,
    )
    .await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("ClickHouse answered error Code 60 (HTTP"),
        "{text}"
    );
    assert!(
        text.contains("clickhouse query on http://127.0.0.1:8123/"),
        "{text}"
    );
    assert!(!text.contains("no_such_table"), "{text}");
    h.close().await;

    // A wrong password: refused by the server (code 193 before ClickHouse 20.x, 516 after).
    let h = harness(&[], &[("username", USER), ("password", "wrong-password")]).await;
    let text = h.expect_error().await.to_string();
    assert!(
        text.contains("ClickHouse answered error Code 193 (HTTP 401)")
            || text.contains("ClickHouse answered error Code 516 (HTTP 401)"),
        "{text}"
    );
    assert!(!text.contains("wrong-password"), "{text}");
    h.close().await;

    // A query in another format than JSONCompact.
    let h = harness(&[("query", "SELECT 1 FORMAT TabSeparated")], KEDA).await;
    let text = h.expect_error().await.to_string();
    assert!(text.contains("JSONCompact"), "{text}");
    h.close().await;
}
