//! Issue 26: `listenChannel` against the real PostgreSQL: one listening connection for every
//! trigger with the same connection settings, `INSERT` + `NOTIFY` wakes the triggers on that
//! channel (and only them), a listening connection terminated on the server comes back and
//! wakes its triggers, and a channel PostgreSQL cannot have is refused naming the parameter.

use std::time::Duration;

use keda_scalers::{BuiltScaler, Registry, ScalerContext, Secret, Wake};

use super::{connection, drop_table, postgres_or_skip, table};
use crate::common::unique;

async fn build(
    pools: &keda_scalers::pool::ClientPools,
    conn: &str,
    table: &str,
    channel: &str,
) -> Result<BuiltScaler, keda_scalers::ScalerError> {
    let mut c = ScalerContext::new("postgresql", 0);
    c.metadata.insert(
        "query".into(),
        format!("SELECT COUNT(*) FROM \"{table}\" WHERE state = 'pending'"),
    );
    c.metadata.insert("targetQueryValue".into(), "1".into());
    c.metadata.insert("listenChannel".into(), channel.into());
    c.auth_params.insert("connection".into(), Secret::new(conn));
    c.clients = pools.clone();
    Registry::builtin().build(c).await
}

async fn woken(wake: &mut Wake, within: Duration) -> bool {
    matches!(tokio::time::timeout(within, wake.woken()).await, Ok(true))
}

/// Connections of `app` on the server, after it settles (at most 10 s) on `n`.
async fn connections_become(db: &tokio_postgres::Client, app: &str, n: i64) -> i64 {
    let mut seen = 0;
    for _ in 0..100 {
        seen = db
            .query_one(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .expect("pg_stat_activity")
            .get(0);
        if seen == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

/// Inserts a pending row and notifies `channel` until `wake` fires (the listening connection
/// comes up in the background); whether it fired within 5 s.
async fn notify_until_woken(
    db: &tokio_postgres::Client,
    table: &str,
    channel: &str,
    wake: &mut Wake,
) -> bool {
    for _ in 0..50 {
        db.batch_execute(&format!(
            "INSERT INTO \"{table}\" VALUES ('pending'); NOTIFY \"{channel}\";"
        ))
        .await
        .expect("INSERT + NOTIFY");
        if woken(wake, Duration::from_millis(100)).await {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn a_notify_wakes_the_triggers_listening_on_its_channel_over_one_connection() {
    let test = "postgresql listen one connection";
    let Some(db) = postgres_or_skip(test).await else {
        return;
    };
    let (name, app) = (unique("listen"), unique("listen-app"));
    table(&db, &name, 0).await;
    let conn = connection(&format!("application_name={app}"));
    let pools = keda_scalers::pool::ClientPools::new();
    let mut on_jobs = Vec::new();
    for _ in 0..10 {
        on_jobs.push(build(&pools, &conn, &name, "jobs").await.expect("builds"));
    }
    let other = build(&pools, &conn, &name, "other").await.expect("builds");
    // One pooled query connection and one listening connection, for eleven triggers.
    assert_eq!(connections_become(&db, &app, 2).await, 2);
    let mut first = on_jobs[0].scaler().wake().expect("listenChannel wakes");
    let mut last = on_jobs[9].scaler().wake().expect("listenChannel wakes");
    let mut elsewhere = other.scaler().wake().expect("listenChannel wakes");
    assert!(notify_until_woken(&db, &name, "jobs", &mut first).await);
    assert!(
        woken(&mut last, Duration::from_secs(1)).await,
        "every trigger on the channel"
    );
    assert!(
        !woken(&mut elsewhere, Duration::from_millis(300)).await,
        "a NOTIFY on another channel woke a trigger"
    );
    for s in on_jobs.iter().chain([&other]) {
        s.scaler().close().await;
    }
    assert_eq!(
        connections_become(&db, &app, 0).await,
        0,
        "closed with the last trigger"
    );
    drop_table(&db, &name).await;
}

#[tokio::test]
async fn a_listening_connection_terminated_on_the_server_comes_back_and_wakes() {
    let test = "postgresql listen terminated";
    let Some(db) = postgres_or_skip(test).await else {
        return;
    };
    let (name, app) = (unique("listen-kill"), unique("listen-kill-app"));
    table(&db, &name, 0).await;
    let conn = connection(&format!("application_name={app}"));
    let pools = keda_scalers::pool::ClientPools::new();
    let s = build(&pools, &conn, &name, "kill").await.expect("builds");
    let mut wake = s.scaler().wake().expect("wakes");
    assert!(notify_until_woken(&db, &name, "kill", &mut wake).await);
    let terminated: i64 = db
        .query_one(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1 AND query LIKE 'LISTEN%'",
            &[&app],
        )
        .await
        .expect("terminate")
        .get(0);
    assert_eq!(terminated, 1, "the listening connection");
    assert!(
        woken(&mut wake, Duration::from_secs(5)).await,
        "the reconnect woke the trigger"
    );
    assert!(
        notify_until_woken(&db, &name, "kill", &mut wake).await,
        "NOTIFY wakes again"
    );
    s.scaler().close().await;
    drop_table(&db, &name).await;
}

#[tokio::test]
async fn a_channel_postgresql_cannot_have_is_refused_naming_the_parameter() {
    let pools = keda_scalers::pool::ClientPools::new();
    let Err(e) = build(&pools, &connection(""), "t", &"x".repeat(64)).await else {
        panic!("a 64-byte channel built");
    };
    assert!(e.to_string().contains("listenChannel"), "{e}");
}
