//! Polling files for changes.
//!
//! Polling rather than inotify: a Secret volume changes by swapping a `..data` symlink, which
//! file-system events report on the directory and not on the files the flags name, and a poll of
//! three small files every few seconds costs nothing.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::TlsError;

/// Calls `on_change` whenever the content of one of `paths` differs from what the previous poll
/// saw (a file that cannot be read counts as a content of its own). The first poll is one
/// `interval` after this call. Runs on the current tokio runtime until `cancel`.
///
/// # Panics
/// Outside a tokio runtime, or (in the spawned task) when `interval` is zero.
pub fn watch_files(
    paths: Vec<PathBuf>,
    interval: Duration,
    cancel: CancellationToken,
    on_change: impl Fn() + Send + 'static,
) {
    let snapshot = |paths: &[PathBuf]| -> Vec<Option<Vec<u8>>> {
        paths.iter().map(|p| std::fs::read(p).ok()).collect()
    };
    let mut seen = snapshot(&paths);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let now = snapshot(&paths);
            if now != seen {
                seen = now;
                on_change();
            }
        }
    });
}

/// Watches `paths` and calls `reload` when one changes; logs the outcome, naming `what` and the
/// files. A failed reload leaves the previous material in use (`reload` replaces it only once
/// the new one is loaded).
pub(crate) fn reload_on_change(
    what: &'static str,
    paths: Vec<PathBuf>,
    interval: Duration,
    cancel: CancellationToken,
    reload: impl Fn() -> Result<(), TlsError> + Send + 'static,
) {
    let files = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    watch_files(paths, interval, cancel, move || match reload() {
        Ok(()) => info!(what, %files, "TLS files changed; reloaded"),
        Err(error) => {
            warn!(what, %files, %error, "TLS files changed but cannot be loaded; keeping the previous ones")
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pki::{changes_of, temp_dir};

    #[tokio::test(start_paused = true)]
    async fn a_change_is_reported_once_per_change_and_not_before_the_first_poll() {
        let dir = temp_dir("watch");
        let file = dir.join("ca.crt");
        std::fs::write(&file, "one").expect("write");
        let cancel = CancellationToken::new();
        let mut rx = changes_of(&file, &cancel);
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert!(rx.try_recv().is_err(), "no change, no call");

        std::fs::write(&file, "two").expect("write");
        tokio::time::timeout(Duration::from_secs(11), rx.recv())
            .await
            .expect("seen at the next poll")
            .expect("watcher alive");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(rx.try_recv().is_err(), "one change, one call");

        std::fs::remove_file(&file).expect("remove");
        tokio::time::timeout(Duration::from_secs(11), rx.recv())
            .await
            .expect("a vanished file is a change")
            .expect("watcher alive");
        cancel.cancel();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
