//! Issue 27's fidelity test: a live `keda-rs dev` session recorded with `--record` (the
//! triggers' values and the replica timeline the operator and the HPA produced), its values
//! replayed by `keda-rs simulate`: the same timeline, every change within one HPA sync period.

mod common;

use std::path::Path;

use common::{Dev, redis_or_skip, replicas_seen};
use jiff::{SignedDuration, Timestamp};

/// The HPA sync period of both runs. A replay cannot know when the live operator polled, and
/// live polls land a few milliseconds after their tick: a change made at a poll (activation,
/// the scale to zero after the cooldown) may come one `pollingInterval` (1 s in the example)
/// apart for the poll grid's phase, one more for a cooldown ending exactly at a poll (live
/// jitter decides whether that poll is strictly after it, the replay's exact time says no),
/// plus the recording's sampling (100 ms). The sync period is longer than that sum, so the
/// bound holds at every run, not most.
const SYNC: SignedDuration = SignedDuration::from_secs(3);

fn timeline(path: &Path) -> Vec<(Timestamp, i32)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time,replicas"), "{}", path.display());
    lines
        .map(|l| {
            let (time, count) = l.split_once(',').expect("time,replicas");
            (
                time.parse().expect("an RFC 3339 time"),
                count.parse().expect("a count"),
            )
        })
        .collect()
}

/// The changes after the start, with the changes of one burst (each within a sync period of
/// the one before) as one: its first time and its last count. The operator's 0 -> 1 and the
/// HPA's 1 -> N a sync later are one burst live; a replay may do both at one instant.
fn bursts(changes: &[(Timestamp, i32)]) -> Vec<(Timestamp, i32)> {
    let mut out: Vec<(Timestamp, i32)> = Vec::new();
    let mut last_time: Option<Timestamp> = None;
    for (at, count) in changes.iter().skip(1) {
        match (out.last_mut(), last_time) {
            (Some(burst), Some(previous)) if at.duration_since(previous) <= SYNC => {
                burst.1 = *count;
            }
            _ => out.push((*at, *count)),
        }
        last_time = Some(*at);
    }
    out
}

#[tokio::test]
async fn a_recorded_dev_session_replays_to_the_same_timeline() {
    let _serial = common::serial().await;
    let Some(mut redis) = redis_or_skip("a_recorded_dev_session_replays").await else {
        return;
    };
    let _: () = redis::cmd("DEL")
        .arg("jobs")
        .query_async(&mut redis)
        .await
        .expect("DEL");
    let dir = std::env::temp_dir().join(format!(
        "keda-rs-fidelity-{}-{}",
        std::process::id(),
        Timestamp::now().as_nanosecond()
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let record = dir.join("session.csv");
    let record_flag = record.display().to_string();

    let dev = Dev::start_with(
        &["examples/redis-list.yaml"],
        &[
            "--record",
            &record_flag,
            "--refresh",
            "100ms",
            "--hpa-sync-period",
            "3s",
        ],
    )
    .await;
    let client = dev.client().await;
    let seen = replicas_seen(client.clone(), "default", "redis-worker");
    dev.wait_for_line("s0-redis-jobs value=0").await;
    seen.wait_for(0).await;
    // A few idle seconds, then 20 jobs (5 per replica: 0 -> 1 -> 4), then none: back to 0
    // after the 10 s cooldown.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let items: Vec<i32> = (1..=20).collect();
    let _: () = redis::cmd("RPUSH")
        .arg("jobs")
        .arg(&items)
        .query_async(&mut redis)
        .await
        .expect("RPUSH");
    seen.wait_for(4).await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let _: () = redis::cmd("DEL")
        .arg("jobs")
        .query_async(&mut redis)
        .await
        .expect("DEL");
    seen.wait_for(0).await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    dev.quit().await;

    let live = timeline(&dir.join("session.replicas.csv"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keda-rs"))
        .current_dir(common::workspace())
        .args([
            "simulate",
            "examples/redis-list.yaml",
            "--values",
            &record_flag,
        ])
        .args(["--hpa-sync-period", "3s", "--replicas", "0", "--out"])
        .arg(dir.join("out"))
        .output()
        .expect("simulate runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replayed = timeline(&dir.join("out/default-redis-worker.csv"));
    let (live_bursts, replayed_bursts) = (bursts(&live), bursts(&replayed));
    let report = format!(
        "live {live:?}\nreplayed {replayed:?}\nvalues:\n{}",
        std::fs::read_to_string(&record).unwrap_or_default()
    );
    assert_eq!(
        live_bursts.iter().map(|b| b.1).collect::<Vec<_>>(),
        [4, 0],
        "{report}"
    );
    assert_eq!(
        replayed_bursts.iter().map(|b| b.1).collect::<Vec<_>>(),
        [4, 0],
        "{report}"
    );
    for (l, r) in live_bursts.iter().zip(&replayed_bursts) {
        let gap = r.0.duration_since(l.0).abs();
        eprintln!(
            "change to {}: live {} replayed {} ({gap:?} apart)",
            l.1, l.0, r.0
        );
        assert!(
            gap <= SYNC,
            "{gap:?} apart at the change to {}\n{report}",
            l.1
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
