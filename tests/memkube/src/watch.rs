//! Watch streams: one task per open watch turns store changes into newline-delimited JSON events.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::store::{Change, ChangeKind, WatchStart, event_line};
use crate::view::{Filter, View};

/// Annotation on the bookmark that ends the initial events of a `sendInitialEvents` watch.
pub(crate) const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Most changes sent in one body frame; batching keeps large watches fast.
const MAX_BATCH: usize = 512;

/// What one watch request asked for.
pub(crate) struct WatchParams {
    pub view: View,
    pub filter: Filter,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Option<Duration>,
    pub bookmark_interval: Duration,
    /// Reads the cluster's current resourceVersion (briefly takes the state lock).
    pub current_rv: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// Changes when the server closes every watch.
    pub closer: tokio::sync::watch::Receiver<u64>,
}

/// A 410 watch: the real server answers 200 and sends one ERROR event with the `Status`.
pub(crate) fn error_stream(error: &ApiError) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel(1);
    // The receiver is alive: this cannot fail.
    let _ = tx.try_send(event_line("ERROR", &error.to_status()));
    rx
}

fn bookmark(view: &View, rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if initial_end && let Some(map) = metadata.as_object_mut() {
        map.insert(
            "annotations".to_string(),
            json!({ INITIAL_EVENTS_END: "true" }),
        );
    }
    event_line(
        "BOOKMARK",
        &json!({ "apiVersion": view.api_version, "kind": view.kind, "metadata": metadata }),
    )
}

/// Renders a change for one watcher; `None` when the watcher must not see it. An object that
/// stops matching the selectors is reported DELETED, one that starts matching ADDED, as the
/// real server's watch cache does.
fn render(change: &Change, params: &WatchParams) -> Option<Bytes> {
    if params.filter.is_empty() && params.view.is_identity_for(&change.object) {
        return Some(change.line());
    }
    let now = params.filter.matches(&change.object);
    let before = change
        .old
        .as_ref()
        .is_some_and(|old| params.filter.matches(old));
    let line = |kind: ChangeKind, obj: &Value| event_line(kind.as_str(), &params.view.render(obj));
    match change.kind {
        ChangeKind::Modified if before && !now => {
            let mut old = change.old.as_deref().cloned().unwrap_or_default();
            if let Some(meta) = old.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert(
                    "resourceVersion".to_string(),
                    Value::String(change.rv.to_string()),
                );
            }
            Some(line(ChangeKind::Deleted, &old))
        }
        ChangeKind::Modified if now && !before => Some(line(ChangeKind::Added, &change.object)),
        kind if now => Some(line(kind, &change.object)),
        _ => None,
    }
}

/// Starts the task that feeds one watch response; returns the body's frames.
pub(crate) fn spawn(start: WatchStart, params: WatchParams) -> mpsc::Receiver<Bytes> {
    let (out, frames) = mpsc::channel::<Bytes>(16);
    tokio::spawn(run(start, params, out));
    frames
}

async fn run(start: WatchStart, mut params: WatchParams, out: mpsc::Sender<Bytes>) {
    let WatchStart {
        initial,
        replay,
        start_rv,
        mut rx,
    } = start;
    let mut last_rv = start_rv;
    let mut batch = BytesMut::new();
    for obj in &initial {
        if params.filter.matches(obj) {
            batch.extend_from_slice(&event_line("ADDED", &params.view.render(obj)));
        }
    }
    for change in &replay {
        if let Some(line) = render(change, &params) {
            batch.extend_from_slice(&line);
        }
        last_rv = last_rv.max(change.rv);
    }
    if params.send_initial_events && params.bookmarks {
        batch.extend_from_slice(&bookmark(&params.view, start_rv, true));
    }
    if !batch.is_empty() && out.send(batch.split().freeze()).await.is_err() {
        return;
    }
    let timeout = tokio::time::sleep(params.timeout.unwrap_or(Duration::MAX / 4));
    tokio::pin!(timeout);
    let mut ticker = tokio::time::interval(params.bookmark_interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            change = rx.recv() => {
                let Some(change) = change else { return };
                let mut pending = vec![change];
                while pending.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(change) => pending.push(change),
                        Err(_) => break,
                    }
                }
                for change in &pending {
                    if let Some(line) = render(change, &params) {
                        batch.extend_from_slice(&line);
                    }
                    last_rv = last_rv.max(change.rv);
                }
                if !batch.is_empty() && out.send(batch.split().freeze()).await.is_err() {
                    return;
                }
            }
            _ = ticker.tick(), if params.bookmarks => {
                // Read the cluster resourceVersion first, then drain: every change at or below it
                // was queued before it was read, so the bookmark never skips an undelivered change.
                let current = (params.current_rv)();
                while let Ok(change) = rx.try_recv() {
                    if let Some(line) = render(&change, &params) {
                        batch.extend_from_slice(&line);
                    }
                    last_rv = last_rv.max(change.rv);
                }
                last_rv = last_rv.max(current);
                batch.extend_from_slice(&bookmark(&params.view, last_rv, false));
                if out.send(batch.split().freeze()).await.is_err() {
                    return;
                }
            }
            () = &mut timeout => return,
            _ = params.closer.changed() => return,
            () = out.closed() => return,
        }
    }
}
