//! The `postgresql` scaler against the real PostgreSQL on 127.0.0.1:5432 (trust auth on
//! loopback, database `test`, TLS on with Debian's self-signed "snakeoil" certificate for
//! `localhost`). Every test creates its own table and drops it at the end.
//!
//! Trust auth accepts any password, so a wrong password cannot be tested here; the MariaDB
//! tests cover it for the shared SQL code.

use std::time::{Duration, Instant};

use keda_scalers::scalers::postgresql::PostgresScaler;
use keda_scalers::{Registry, Scaler, ScalerContext, ScalerError, Secret};
use tokio_postgres::NoTls;

use crate::common::{self, Setup, conformance, unique};

mod listen;
mod own;

const SERVER: &str = "host=127.0.0.1 port=5432 user=postgres dbname=test";
const SNAKEOIL: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";

/// The test's own connection, to create tables and watch the server.
async fn postgres_or_skip(test: &str) -> Option<tokio_postgres::Client> {
    let attempt = async {
        let (client, connection) = tokio_postgres::connect(SERVER, NoTls).await?;
        tokio::spawn(connection);
        Ok::<_, tokio_postgres::Error>(client)
    };
    common::service_or_skip(test, "PostgreSQL at 127.0.0.1:5432", attempt).await
}

/// A table `name(state text)` with `pending` rows in state 'pending'.
async fn table(db: &tokio_postgres::Client, name: &str, pending: usize) {
    db.batch_execute(&format!(
        "CREATE TABLE \"{name}\" (state text); \
         INSERT INTO \"{name}\" SELECT 'pending' FROM generate_series(1, {pending});"
    ))
    .await
    .expect("create table");
}

async fn drop_table(db: &tokio_postgres::Client, name: &str) {
    db.batch_execute(&format!("DROP TABLE IF EXISTS \"{name}\""))
        .await
        .expect("drop table");
}

fn connection(extra: &str) -> String {
    format!("{SERVER} sslmode=disable {extra}")
}

/// The documented example with `query` and the connection string replaced.
async fn scaler(query: &str, connection: &str) -> common::Harness {
    conformance(
        "postgresql",
        Setup {
            metadata: &[("query", query)],
            auth: &[("connection", connection)],
            ..Setup::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_documented_query_counts_pending_rows() {
    let test = "the_documented_query_counts_pending_rows";
    let Some(db) = postgres_or_skip(test).await else {
        return;
    };
    let name = unique("pg");
    table(&db, &name, 0).await;
    let query = format!("SELECT COUNT(*) FROM \"{name}\" WHERE state = 'pending'");
    let h = scaler(&query, &connection("")).await;
    assert_eq!(h.metric_name, "s0-postgresql");
    // Documented example: activationTargetQueryValue 1.
    h.expect(0.0, false).await;
    db.execute(&format!("INSERT INTO \"{name}\" VALUES ('pending')"), &[])
        .await
        .expect("insert");
    h.expect(1.0, false).await; // equal to the activation threshold: inactive
    db.execute(
        &format!("INSERT INTO \"{name}\" VALUES ('pending'), ('pending'), ('done')"),
        &[],
    )
    .await
    .expect("insert");
    h.expect(3.0, true).await;
    h.close().await;
    drop_table(&db, &name).await;
}

#[tokio::test]
async fn numeric_integer_and_float_answers_are_numbers() {
    let test = "numeric_integer_and_float_answers_are_numbers";
    if postgres_or_skip(test).await.is_none() {
        return;
    }
    let conn = connection("");
    // (query, value); the documented activation threshold is 1.
    for (query, value) in [
        ("SELECT AVG(x) FROM (VALUES (1), (2)) AS t(x)", 1.5), // numeric
        (
            "SELECT 12345678901234::numeric(20, 2)",
            12_345_678_901_234.0,
        ),
        ("SELECT -0.25::numeric", -0.25),
        ("SELECT 2::smallint", 2.0),
        ("SELECT 9007199254740993::bigint", 9_007_199_254_740_992.0), // nearest float
        ("SELECT 2.5::real", 2.5),
        ("SELECT 1e3::double precision", 1000.0),
        ("SELECT x FROM generate_series(4, 6) AS x", 4.0), // first row only
    ] {
        let h = scaler(query, &conn).await;
        h.expect(value, value > 1.0).await;
        h.close().await;
    }
}

#[tokio::test]
async fn answers_that_are_not_one_number_are_errors_naming_the_query() {
    let test = "answers_that_are_not_one_number_are_errors_naming_the_query";
    if postgres_or_skip(test).await.is_none() {
        return;
    }
    let conn = connection("");
    let server = "PostgreSQL at 127.0.0.1:5432/test";
    let rows = [
        (
            "SELECT 1 WHERE false",
            format!(
                "trigger 0 (postgresql): the query (parameter \"query\") returned no row; it must return one row with one number (on {server})"
            ),
        ),
        (
            "SELECT 1, 2",
            format!(
                "trigger 0 (postgresql): the query (parameter \"query\") returned 2 columns; it must return exactly one, a number (on {server})"
            ),
        ),
        (
            "SELECT SUM(x) FROM (SELECT 1 AS x WHERE false) AS t",
            format!(
                "trigger 0 (postgresql): the query (parameter \"query\") returned NULL; wrap the expression in COALESCE(..., 0) (on {server})"
            ),
        ),
        (
            "SELECT 'five' AS jobs",
            format!(
                "trigger 0 (postgresql): the query (parameter \"query\") returned column \"jobs\" of type text, not a number; cast it to a numeric type (on {server})"
            ),
        ),
        (
            "SELEC 1",
            format!(
                "trigger 0 (postgresql): running the query (parameter \"query\") on {server} failed: PostgreSQL answered error SQLSTATE 42601"
            ),
        ),
    ];
    for (query, expected) in rows {
        let h = scaler(query, &conn).await;
        let message = h.expect_error().await.to_string();
        assert_eq!(message, expected, "{query}");
        h.close().await;
    }
}

#[tokio::test]
async fn triggers_with_one_connection_string_share_one_pooled_connection() {
    let test = "triggers_with_one_connection_string_share_one_pooled_connection";
    if postgres_or_skip(test).await.is_none() {
        return;
    }
    let app = unique("pool");
    let conn = connection(&format!("application_name={app}"));
    let query = format!("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = '{app}'");
    let registry = Registry::builtin();
    let context = |index| {
        let mut c = ScalerContext::new("postgresql", index);
        c.metadata.insert("query".into(), query.clone());
        c.metadata.insert("targetQueryValue".into(), "1".into());
        c.auth_params
            .insert("connection".into(), Secret::new(&conn));
        c
    };
    let first = context(0);
    let pools = first.clients.clone();
    let a = registry.build(first).await.expect("first");
    let b = registry
        .build(ScalerContext {
            clients: pools.clone(),
            ..context(1)
        })
        .await
        .expect("second");
    // Sequential polls of both reuse the one connection the pool opened at build.
    for scaler in [a.scaler(), b.scaler(), a.scaler()] {
        let r = scaler.metrics_and_activity("m").await.expect("query");
        assert_eq!(r.values[0].value, 1.0);
    }
    a.scaler().close().await;
    b.scaler().close().await;
}

#[tokio::test]
async fn a_query_that_runs_too_long_is_cancelled_on_the_server() {
    let test = "a_query_that_runs_too_long_is_cancelled_on_the_server";
    let Some(db) = postgres_or_skip(test).await else {
        return;
    };
    let app = unique("slow");
    // A query that keeps a CPU busy for hours without materializing anything, and that
    // PostgreSQL does not stop on its own when the client goes away (unlike pg_sleep).
    let endless = "SELECT COUNT(*) FROM pg_class a, pg_class b, pg_class c, pg_class d";
    let mut ctx = ScalerContext::new("postgresql", 0);
    ctx.metadata.insert("query".into(), endless.into());
    ctx.metadata.insert("targetQueryValue".into(), "1".into());
    ctx.auth_params.insert(
        "connection".into(),
        Secret::new(connection(&format!("application_name={app}"))),
    );
    let scaler = PostgresScaler::build(&ctx)
        .await
        .expect("build")
        .with_query_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err = scaler.value().await.expect_err("timeout");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        err.to_string(),
        "trigger 0 (postgresql): running the query (parameter \"query\") on PostgreSQL at 127.0.0.1:5432/test failed: it did not finish within 500ms and was cancelled"
    );
    // The statement no longer runs on the server.
    let running =
        "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'";
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let row = db
            .query_one(running, &[&app])
            .await
            .expect("pg_stat_activity");
        if row.get::<_, i64>(0) == 0 {
            break;
        }
        if Instant::now() > deadline {
            db.execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .expect("clean up");
            panic!("the query still ran on the server 5 s after its timeout");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    scaler.close().await;
}

#[tokio::test]
async fn sslmodes_negotiate_and_verify_like_pgx() {
    let test = "sslmodes_negotiate_and_verify_like_pgx";
    let Some(db) = postgres_or_skip(test).await else {
        return;
    };
    let ssl_on = db
        .query_one("SHOW ssl", &[])
        .await
        .map(|row| row.get::<_, String>(0) == "on")
        .unwrap_or(false);
    let with_tls = async {
        if ssl_on {
            Ok(())
        } else {
            Err("the server has ssl = off")
        }
    };
    if common::service_or_skip(test, "PostgreSQL with TLS", with_tls)
        .await
        .is_none()
    {
        return;
    }
    let query =
        "SELECT CASE WHEN ssl THEN 1 ELSE 0 END FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
    // The snakeoil certificate is self-signed for the name localhost (Debian also links it
    // into /etc/ssl/certs, so it may count as a system root too).
    let localhost = "host=localhost hostaddr=127.0.0.1 port=5432 user=postgres dbname=test";
    // (connection, uses TLS)
    for (connection, tls) in [
        (format!("{SERVER} sslmode=disable"), 0.0),
        (format!("{SERVER} sslmode=prefer"), 1.0),
        (format!("{SERVER} sslmode=require"), 1.0),
        (
            format!("{SERVER} sslmode=verify-ca sslrootcert={SNAKEOIL}"),
            1.0,
        ),
        (
            format!("{localhost} sslmode=verify-full sslrootcert={SNAKEOIL}"),
            1.0,
        ),
    ] {
        let h = scaler(query, &connection).await;
        h.expect(tls, false).await;
        h.close().await;
    }
    // verify-full checks the name: the certificate does not name 127.0.0.1.
    let mut ctx = ScalerContext::new("postgresql", 0);
    ctx.trigger_files = keda_scalers::files::TriggerFiles::new("/");
    ctx.metadata.insert("query".into(), query.into());
    ctx.metadata.insert("targetQueryValue".into(), "1".into());
    ctx.auth_params.insert(
        "connection".into(),
        Secret::new(format!(
            "{SERVER} sslmode=verify-full sslrootcert={SNAKEOIL}"
        )),
    );
    let err = Registry::builtin()
        .build(ctx)
        .await
        .expect_err("certificate rejected");
    let message = err.to_string();
    assert!(matches!(err, ScalerError::Connect { .. }), "{message}");
    assert!(
        message.starts_with(
            "trigger 0 (postgresql): connecting to PostgreSQL at 127.0.0.1:5432/test (parameter \"connection\") failed:"
        ) && message.contains("certificate not valid for name"),
        "{message}"
    );
}

#[tokio::test]
async fn ssl_files_are_read_only_under_the_root_and_never_from_a_device() {
    // Before any connection: no server is needed.
    for (root, file, want) in [
        // the default root: /etc/ssl is not under it
        (
            None,
            SNAKEOIL,
            "sslrootcert: \"/etc/ssl/certs/ssl-cert-snakeoil.pem\" is not under the trigger file root /etc/keda-rs/trigger-files",
        ),
        // KEDA's reach: still no device
        (
            Some("/"),
            "/dev/zero",
            "sslrootcert: \"/dev/zero\" is not a regular file",
        ),
    ] {
        let mut ctx = ScalerContext::new("postgresql", 0);
        if let Some(root) = root {
            ctx.trigger_files = keda_scalers::files::TriggerFiles::new(root);
        }
        ctx.metadata.insert("query".into(), "select 1".into());
        ctx.metadata.insert("targetQueryValue".into(), "1".into());
        ctx.auth_params.insert(
            "connection".into(),
            Secret::new(format!("{SERVER} sslmode=verify-ca sslrootcert={file}")),
        );
        let started = Instant::now();
        let message = Registry::builtin()
            .build(ctx)
            .await
            .expect_err("refused")
            .to_string();
        assert!(message.contains(want), "{message}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}

#[tokio::test]
async fn an_unreachable_server_fails_the_build_at_once_without_the_password() {
    let started = Instant::now();
    let mut ctx = ScalerContext::new("postgresql", 3);
    ctx.metadata.insert("query".into(), "SELECT 1".into());
    ctx.metadata.insert("targetQueryValue".into(), "1".into());
    ctx.auth_params.insert(
        "connection".into(),
        Secret::new("postgres://keda:hunter22@127.0.0.1:1/test?sslmode=disable"),
    );
    let err = Registry::builtin().build(ctx).await.expect_err("refused");
    let message = err.to_string();
    assert!(
        message.starts_with(
            "trigger 3 (postgresql): connecting to PostgreSQL at 127.0.0.1:1/test (parameter \"connection\") failed:"
        ),
        "{message}"
    );
    assert!(!message.contains("hunter22"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Builds a `postgresql` trigger (index 1) with `metadata` and TriggerAuthentication `auth`.
async fn build(
    metadata: &[(&str, &str)],
    auth: &[(&str, &str)],
) -> Result<keda_scalers::BuiltScaler, ScalerError> {
    let mut ctx = ScalerContext::new("postgresql", 1);
    ctx.metadata.insert("query".into(), "SELECT 7".into());
    ctx.metadata.insert("targetQueryValue".into(), "1".into());
    for (k, v) in metadata {
        ctx.metadata.insert((*k).into(), (*v).into());
    }
    for (k, v) in auth {
        ctx.auth_params.insert((*k).into(), Secret::new(*v));
    }
    Registry::builtin().build(ctx).await
}

#[tokio::test]
async fn password_authentication_uses_the_password_and_a_wrong_one_is_refused_naming_it() {
    let test = "password_authentication_uses_the_password_and_a_wrong_one_is_refused_naming_it";
    const RIGHT: &str = "right-pw-keda-rs";
    const WRONG: &str = "wrong-pw-never-print-me";
    let Some(pg) = own::OwnPostgres::start_or_skip(test, "keda", RIGHT).await else {
        return;
    };
    let port = pg.port.to_string();
    let parts = [
        ("host", "127.0.0.1"),
        ("port", port.as_str()),
        ("userName", "keda"),
        ("dbName", "postgres"),
        ("sslmode", "disable"),
    ];
    // The separate parameters with the password from the TriggerAuthentication, and the same
    // as one connection URL.
    let url = format!("postgres://keda:{RIGHT}@127.0.0.1:{port}/postgres?sslmode=disable");
    for (metadata, auth) in [
        (&parts[..], vec![("password", RIGHT)]),
        (&[][..], vec![("connection", url.as_str())]),
    ] {
        let built = build(metadata, &auth).await.expect("the right password");
        let read = built
            .scaler()
            .metrics_and_activity("s1-postgresql")
            .await
            .expect("a value");
        assert_eq!(read.values[0].value, 7.0);
        assert!(read.active);
        built.scaler().close().await;
    }

    // A wrong password, and none at all: refused when built, naming the parameters.
    for auth in [vec![("password", WRONG)], vec![]] {
        let Err(err) = build(&parts, &auth).await else {
            panic!("refused");
        };
        let message = err.to_string();
        assert!(matches!(err, ScalerError::Connect { .. }), "{message}");
        assert!(
            message.starts_with(&format!(
                "trigger 1 (postgresql): connecting to PostgreSQL at 127.0.0.1:{port}/postgres \
                 (parameters \"host\", \"port\", \"userName\", \"password\", \"dbName\", \"sslmode\") failed:"
            )) && (auth.is_empty()
                || message.ends_with("the server refused the credentials")),
            "{message}"
        );
        assert!(!message.contains(WRONG), "{message}");
    }
    let wrong_url = format!("postgres://keda:{WRONG}@127.0.0.1:{port}/postgres?sslmode=disable");
    let Err(err) = build(&[], &[("connection", &wrong_url)]).await else {
        panic!("refused");
    };
    let message = err.to_string();
    assert!(
        message.contains("(parameter \"connection\") failed:")
            && message.ends_with("the server refused the credentials"),
        "{message}"
    );
    assert!(!message.contains(WRONG), "{message}");
}
