//! Issue 30, finding 2: files named by trigger metadata (here `external`'s `tlsCertFile`;
//! postgresql's `sslrootcert`/`sslcert`/`sslkey` go through the same reader) are read only under the trigger file root,
//! only as regular files, bounded and off the runtime. A tenant naming `/dev/zero` or a FIFO gets
//! `Ready=False` naming the parameter, quickly; the operator's memory does not grow, and other
//! objects keep scaling. Through the operator on memkube.

mod common;
mod scenarios;

#[allow(dead_code)]
#[path = "../../scalers/tests/common/mod.rs"]
mod redis_common;

#[path = "../../scalers/tests/common/external.rs"]
mod external_server;

use std::time::{Duration, Instant};

use external_server::{ExternalServer, spec};
use memkube::MemKube;
use scenarios::{World, eventually, ready};

/// The resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn object(name: &str, trigger: &str) -> String {
    format!(
        r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef:
    name: {name}
  pollingInterval: 300
  minReplicaCount: 0
  triggers:
{trigger}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_zero_and_a_fifo_named_as_certificates_are_refused_and_others_keep_scaling() {
    let Some((_server, w)): Option<(MemKube, World)> =
        common::world::world("trigger files", keda_scalers::Registry::builtin()).await
    else {
        return;
    };
    // KEDA's reach (`--trigger-file-root /`): what stops these is the regular-file check and
    // the cap, not the root.
    let w = World {
        trigger_files: keda_scalers::files::TriggerFiles::new("/"),
        ..w
    };
    let dir = std::env::temp_dir().join(format!("keda-rs-trigger-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let fifo = dir.join("ca.pem");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let scaler = ExternalServer::plain(vec![spec("m", 1)]).await;
    scaler.set_value("m", 1, 0.0);
    scaler.set_active(true);
    for name in ["zero", "fifo", "good"] {
        w.deployment(name, 0).await;
    }
    let before = rss_kib();
    let op = w.start_operator();
    let started = Instant::now();
    let external = |file: &str| {
        format!(
            "    - type: external\n      metadata: {{scalerAddress: \"{}\", tlsCertFile: \"{file}\"}}",
            scaler.address()
        )
    };
    w.create(&object("zero", &external("/dev/zero"))).await;
    w.create(&object("fifo", &external(&fifo.display().to_string())))
        .await;
    w.create(&object(
        "good",
        &format!(
            "    - type: external\n      metadata: {{scalerAddress: \"{}\"}}",
            scaler.address()
        ),
    ))
    .await;
    for (name, expected) in [
        (
            "zero",
            "parameter \"tlsCertFile\": \"/dev/zero\" is not a regular file",
        ),
        ("fifo", "is not a regular file"),
    ] {
        let (_, _, message) = eventually(&format!("Ready=False on {name}"), || async {
            ready(&w.get(name).await).filter(|(s, _, _)| s == "False")
        })
        .await;
        assert!(message.contains(expected), "{name}: {message}");
    }
    eventually("the good object goes 0 -> 1", || async {
        (w.replicas("good").await == 1).then_some(())
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 100 * 1024, "the operator grew by {grown} KiB");
    op.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
