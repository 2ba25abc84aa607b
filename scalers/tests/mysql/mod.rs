//! The `mysql` scaler against the real MariaDB on 127.0.0.1:3306 (root without a password,
//! database `test`, no TLS configured). Every test creates its own table, and its own user
//! with a password where it needs one, and drops them at the end. The TLS modes run against a
//! MariaDB of the test's own with a certificate from a test CA (`own.rs`).

use std::time::{Duration, Instant};

use keda_scalers::scalers::mysql::{MySqlPool, MySqlScaler};
use keda_scalers::{Registry, Scaler, ScalerContext, ScalerError, Secret};
use mysql_async::prelude::Queryable;

use crate::common::{self, Setup, conformance, unique};

mod own;

const ADDRESS: &str = "127.0.0.1:3306";

/// The test's own connection as root.
struct Db {
    conn: mysql_async::Conn,
}

impl Db {
    async fn connect_or_skip(test: &str) -> Option<Self> {
        let attempt = async {
            let opts = mysql_async::OptsBuilder::default()
                .ip_or_hostname("127.0.0.1")
                .tcp_port(3306)
                .user(Some("root"))
                .db_name(Some("test"))
                .prefer_socket(false);
            mysql_async::Conn::new(opts).await
        };
        let conn = common::service_or_skip(test, &format!("MariaDB at {ADDRESS}"), attempt).await?;
        Some(Self { conn })
    }

    async fn run(&mut self, sql: &str) {
        self.conn
            .query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// A user allowed to read `test`, with `password`; its name is unique.
    async fn user(&mut self, password: &str) -> String {
        // At most 32 characters, MySQL's limit (MariaDB allows 80).
        let user = unique("u").replace('-', "_");
        self.run(&format!(
            "CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}'"
        ))
        .await;
        self.run(&format!(
            "GRANT SELECT, PROCESS ON *.* TO '{user}'@'127.0.0.1'"
        ))
        .await;
        user
    }

    async fn drop_user(&mut self, user: &str) {
        self.run(&format!("DROP USER '{user}'@'127.0.0.1'")).await;
    }

    /// How many statements of `user` are running `BENCHMARK`.
    async fn busy(&mut self, user: &str) -> i64 {
        self.conn
            .query_first(format!(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '{user}' AND INFO LIKE 'SELECT BENCHMARK%'"
            ))
            .await
            .expect("processlist")
            .unwrap_or(0)
    }
}

async fn scaler(query: &str, dsn: &str) -> common::Harness {
    conformance(
        "mysql",
        Setup {
            metadata: &[("query", query)],
            auth: &[("connectionString", dsn)],
            ..Setup::default()
        },
    )
    .await
}

fn context(index: usize, query: &str, auth: &[(&str, &str)]) -> ScalerContext {
    let mut ctx = ScalerContext::new("mysql", index);
    ctx.metadata.insert("query".into(), query.into());
    ctx.metadata.insert("queryValue".into(), "1".into());
    for (k, v) in auth {
        ctx.auth_params.insert(k.to_string(), Secret::new(*v));
    }
    ctx
}

#[tokio::test]
async fn the_documented_query_counts_unsent_rows_with_password_auth() {
    let test = "the_documented_query_counts_unsent_rows_with_password_auth";
    let Some(mut db) = Db::connect_or_skip(test).await else {
        return;
    };
    let table = unique("outbox").replace('-', "_");
    let password = "p@ss:w/rd";
    let user = db.user(password).await;
    db.run(&format!("CREATE TABLE `{table}` (sent INT)")).await;
    let query = format!("SELECT COUNT(*) FROM `{table}` WHERE sent = 0");
    let dsn = format!("{user}:{password}@tcp({ADDRESS})/test");
    let h = scaler(&query, &dsn).await;
    assert_eq!(h.metric_name, "s0-mysql-test");
    // Documented example: activationQueryValue 1.
    h.expect(0.0, false).await;
    db.run(&format!("INSERT INTO `{table}` VALUES (0)")).await;
    h.expect(1.0, false).await; // equal to the activation threshold: inactive
    db.run(&format!("INSERT INTO `{table}` VALUES (0), (0), (1)"))
        .await;
    h.expect(3.0, true).await;
    h.close().await;

    // The same with separate parameters, the password from the TriggerAuthentication.
    let mut ctx = context(1, &query, &[("password", password)]);
    for (k, v) in [
        ("host", "127.0.0.1"),
        ("port", "3306"),
        ("username", user.as_str()),
        ("dbName", "test"),
    ] {
        ctx.metadata.insert(k.into(), v.into());
    }
    let built = Registry::builtin()
        .build(ctx)
        .await
        .expect("separate parameters");
    let r = built
        .scaler()
        .metrics_and_activity("m")
        .await
        .expect("query");
    assert_eq!((r.values[0].value, r.active), (3.0, true));
    built.scaler().close().await;

    db.run(&format!("DROP TABLE `{table}`")).await;
    db.drop_user(&user).await;
}

#[tokio::test]
async fn a_wrong_password_fails_the_build_with_the_servers_reason_and_no_password() {
    let test = "a_wrong_password_fails_the_build_with_the_servers_reason_and_no_password";
    let Some(mut db) = Db::connect_or_skip(test).await else {
        return;
    };
    let user = db.user("right-password").await;
    let dsn = format!("{user}:wrong-password@tcp({ADDRESS})/test");
    let err = Registry::builtin()
        .build(context(2, "SELECT 1", &[("connectionString", &dsn)]))
        .await
        .expect_err("access denied");
    let message = err.to_string();
    assert!(matches!(err, ScalerError::Connect { .. }), "{message}");
    assert!(
        message
            .starts_with("trigger 2 (mysql): connecting to MySQL at 127.0.0.1:3306/test (parameter \"connectionString\") failed:")
            && message.ends_with("the server refused the credentials"),
        "{message}"
    );
    assert!(!message.contains("wrong-password"), "{message}");
    db.drop_user(&user).await;
}

#[tokio::test]
async fn numbers_in_numeric_and_text_columns_are_values() {
    let test = "numbers_in_numeric_and_text_columns_are_values";
    if Db::connect_or_skip(test).await.is_none() {
        return;
    }
    let dsn = format!("root@tcp({ADDRESS})/test");
    // (query, value); the documented activation threshold is 1.
    for (query, value) in [
        (
            "SELECT AVG(x) FROM (SELECT 1 AS x UNION ALL SELECT 2) AS t",
            1.5,
        ), // DECIMAL
        ("SELECT CAST(-0.25 AS DECIMAL(10, 2))", -0.25),
        ("SELECT 2.5e0", 2.5), // DOUBLE
        ("SELECT 9007199254740993", 9_007_199_254_740_992.0),
        ("SELECT '42'", 42.0), // text that reads as a number, as Go's database/sql takes it
        ("SELECT 4 UNION ALL SELECT 5", 4.0), // first row only
    ] {
        let h = scaler(query, &dsn).await;
        h.expect(value, value > 1.0).await;
        h.close().await;
    }
}

#[tokio::test]
async fn answers_that_are_not_one_number_are_errors_naming_the_query() {
    let test = "answers_that_are_not_one_number_are_errors_naming_the_query";
    if Db::connect_or_skip(test).await.is_none() {
        return;
    }
    let dsn = format!("root@tcp({ADDRESS})/test");
    let server = "MySQL at 127.0.0.1:3306/test";
    let rows = [
        (
            "SELECT 1 FROM DUAL WHERE 1 = 0",
            format!(
                "trigger 0 (mysql): the query (parameter \"query\") returned no row; it must return one row with one number (on {server})"
            ),
        ),
        (
            "SELECT 1, 2",
            format!(
                "trigger 0 (mysql): the query (parameter \"query\") returned 2 columns; it must return exactly one, a number (on {server})"
            ),
        ),
        (
            "SELECT SUM(x) FROM (SELECT 1 AS x FROM DUAL WHERE 1 = 0) AS t",
            format!(
                "trigger 0 (mysql): the query (parameter \"query\") returned NULL; wrap the expression in COALESCE(..., 0) (on {server})"
            ),
        ),
        (
            "SELECT 'five' AS jobs",
            format!(
                "trigger 0 (mysql): the query (parameter \"query\") returned column \"jobs\" of type VAR_STRING holding a non-numeric value, not a number; cast it to a numeric type (on {server})"
            ),
        ),
        (
            "SELEC 1",
            format!(
                "trigger 0 (mysql): running the query (parameter \"query\") on {server} failed: MySQL answered error 1064"
            ),
        ),
    ];
    for (query, expected) in rows {
        let h = scaler(query, &dsn).await;
        let message = h.expect_error().await.to_string();
        assert_eq!(message, expected, "{query}");
        h.close().await;
    }
}

#[tokio::test]
async fn triggers_with_one_connection_string_share_one_pool() {
    let test = "triggers_with_one_connection_string_share_one_pool";
    let Some(mut db) = Db::connect_or_skip(test).await else {
        return;
    };
    let user = db.user("pool-password").await;
    let dsn = format!("{user}:pool-password@tcp({ADDRESS})/test");
    let query =
        format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '{user}'");
    let pools = keda_scalers::pool::ClientPools::new();
    let registry = Registry::builtin();
    let mut built = Vec::new();
    for index in 0..6 {
        let ctx = ScalerContext {
            clients: pools.clone(),
            ..context(index, &query, &[("connectionString", &dsn)])
        };
        built.push(registry.build(ctx).await.expect("build"));
    }
    let pool = pools.pool::<Secret, MySqlPool>();
    assert_eq!((pool.len(), pool.users(&Secret::new(&dsn))), (1, 6));
    // Six triggers polled twice hold at most the pool's 4 connections to the server, not one
    // each.
    for _ in 0..2 {
        for scaler in &built {
            let r = scaler
                .scaler()
                .metrics_and_activity("m")
                .await
                .expect("query");
            assert!((1.0..=4.0).contains(&r.values[0].value), "{r:?}");
        }
    }
    for scaler in &built {
        scaler.scaler().close().await;
    }
    assert!(pool.is_empty());
    db.drop_user(&user).await;
}

#[tokio::test]
async fn a_query_that_runs_too_long_is_killed_on_the_server() {
    let test = "a_query_that_runs_too_long_is_killed_on_the_server";
    let Some(mut db) = Db::connect_or_skip(test).await else {
        return;
    };
    let user = db.user("slow-password").await;
    let dsn = format!("{user}:slow-password@tcp({ADDRESS})/test");
    // Hours of CPU that the server does not stop on its own when the client goes away (unlike
    // SLEEP, which notices).
    let endless = "SELECT BENCHMARK(1000000000000, MD5('keda-rs'))";
    let ctx = context(0, endless, &[("connectionString", &dsn)]);
    let scaler = MySqlScaler::build(&ctx)
        .await
        .expect("build")
        .with_query_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err = scaler.value().await.expect_err("timeout");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        err.to_string(),
        "trigger 0 (mysql): running the query (parameter \"query\") on MySQL at 127.0.0.1:3306/test failed: it did not finish within 500ms and was cancelled"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while db.busy(&user).await > 0 {
        if Instant::now() > deadline {
            db.run(&format!("KILL USER '{user}'")).await;
            panic!("the query still ran on the server 5 s after its timeout");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    scaler.close().await;
    db.drop_user(&user).await;
}

#[tokio::test]
async fn tls_true_needs_a_server_with_tls_and_preferred_falls_back() {
    let test = "tls_true_needs_a_server_with_tls_and_preferred_falls_back";
    let Some(mut db) = Db::connect_or_skip(test).await else {
        return;
    };
    let have_ssl: Option<String> = db
        .conn
        .query_first("SELECT @@have_ssl")
        .await
        .expect("have_ssl");
    if have_ssl.as_deref() == Some("YES") {
        eprintln!("skipping {test}: this MariaDB has TLS configured");
        return;
    }
    let base = format!("root@tcp({ADDRESS})/test");
    let h = scaler("SELECT 2", &format!("{base}?tls=preferred")).await;
    h.expect(2.0, true).await;
    h.close().await;
    let err = Registry::builtin()
        .build(context(
            0,
            "SELECT 1",
            &[("connectionString", &format!("{base}?tls=true"))],
        ))
        .await
        .expect_err("no TLS on the server");
    let message = err.to_string();
    assert!(
        message
            .starts_with("trigger 0 (mysql): connecting to MySQL at 127.0.0.1:3306/test (parameter \"connectionString\") failed:")
            && message.contains("SSL/TLS"),
        "{message}"
    );
}

#[tokio::test]
async fn an_unreachable_server_fails_the_build_at_once_without_the_password() {
    let started = Instant::now();
    let err = Registry::builtin()
        .build(context(
            3,
            "SELECT 1",
            &[("connectionString", "keda:hunter22@tcp(127.0.0.1:1)/jobs")],
        ))
        .await
        .expect_err("refused");
    let message = err.to_string();
    assert!(
        message.starts_with("trigger 3 (mysql): connecting to MySQL at 127.0.0.1:1/jobs (parameter \"connectionString\") failed:"),
        "{message}"
    );
    assert!(!message.contains("hunter22"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Whether the scaler's connection uses TLS, as the server sees it: 1 or 0.
const USES_TLS: &str = "SELECT COUNT(*) FROM information_schema.SESSION_STATUS \
    WHERE VARIABLE_NAME = 'Ssl_cipher' AND VARIABLE_VALUE <> ''";

#[tokio::test]
async fn tls_modes_against_a_server_with_tls() {
    let test = "tls_modes_against_a_server_with_tls";
    let Some(db) = own::OwnMariaDb::start_or_skip(test).await else {
        return;
    };
    let base = format!("root@tcp(127.0.0.1:{})/mysql", db.port);
    // (tls, whether the connection is encrypted)
    for (tls, encrypted) in [("skip-verify", 1.0), ("preferred", 1.0), ("false", 0.0)] {
        let built = Registry::builtin()
            .build(context(
                0,
                USES_TLS,
                &[("connectionString", &format!("{base}?tls={tls}"))],
            ))
            .await
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| panic!("tls={tls}: {e}"));
        let read = built
            .scaler()
            .metrics_and_activity("s0-mysql-mysql")
            .await
            .unwrap_or_else(|e| panic!("tls={tls}: {e}"));
        assert_eq!(read.values[0].value, encrypted, "tls={tls}");
        built.scaler().close().await;
    }
    // tls=true verifies the certificate against the system roots, which do not hold the test
    // CA (as Go's driver does): refused, naming the parameter.
    let Err(err) = Registry::builtin()
        .build(context(
            0,
            USES_TLS,
            &[("connectionString", &format!("{base}?tls=true"))],
        ))
        .await
    else {
        panic!("an unknown CA must be refused");
    };
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "trigger 0 (mysql): connecting to MySQL at 127.0.0.1:{}/mysql (parameter \"connectionString\") failed:",
            db.port
        )) && message.to_lowercase().contains("certificate"),
        "{message}"
    );
}
