//! The early wake-up of the `kafka` trigger ([`crate::wake`]): the shared cluster client
//! refreshes the end offsets (high watermarks) of every watched topic every [`REFRESH`], and a
//! partition whose end offset moved wakes the triggers of its topic, which then read the lag as
//! a poll does.
//!
//! One refresh task per cluster (bootstrap servers, SASL and TLS: the key of the shared
//! [`KafkaCluster`]), whatever the number of triggers: each watches its `topic`
//! (reference-counted), and each refresh asks for the end offsets of every partition of every
//! watched topic in one ListOffsets request per partition leader (librdkafka batches them). The
//! partitions of a topic are described again every [`METADATA_REFRESH`] and when a topic is
//! first watched.
//!
//! Cost on the cluster: per [`REFRESH`], one ListOffsets request per leader broker of the
//! watched partitions (none while no trigger watches); per [`METADATA_REFRESH`], one Metadata
//! request per watched topic. On the operator: one blocking-pool call per refresh.
//!
//! The first end offsets seen are the baseline: only a later change wakes (a moved offset, or a
//! partition that appears). A topic that cannot be described (it does not exist yet, or the
//! cluster is down) is left out and described again after [`DESCRIBE_RETRY`], without slowing
//! the others. A failed ListOffsets backs off
//! ([`REFRESH`] doubling up to [`MAX_BACKOFF`]), every topic is described again, and the
//! baseline is kept, so the first good refresh after a failure wakes for what moved meanwhile. A trigger without `topic` (the group's topics) is polled only.
//! Throughout, the loops poll at `pollingInterval` as always.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::client::{ClusterSettings, KafkaCluster};
use super::lag::TopicPartition;
use crate::pool::Lease;
use crate::wake::{Wake, WakeChannels, WakeSource, Watch};

/// How often the end offsets of the watched partitions are asked for.
pub const REFRESH: Duration = Duration::from_millis(100);
/// How often the partitions of the watched topics are described again.
pub const METADATA_REFRESH: Duration = Duration::from_secs(30);
/// How soon a topic that could not be described is described again.
pub const DESCRIBE_RETRY: Duration = Duration::from_secs(5);
/// The longest wait after failed refreshes.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The pool key: the cluster's settings.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct WatchKey(ClusterSettings);

/// One trigger's registration; dropping it unregisters (and stops the refresh task when it was
/// the last).
pub struct Registration {
    lease: Lease<WatchKey, WakeSource>,
    topic: String,
    wake: Wake,
}

impl Registration {
    /// The trigger's wake-ups.
    pub fn wake(&self) -> Wake {
        self.wake.clone()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.lease.unregister(&self.topic);
    }
}

/// Registers `topic` on the refresh task of `cluster`'s client (started on first use; never
/// waits for the cluster).
pub async fn register(
    cluster: Lease<ClusterSettings, KafkaCluster>,
    pools: &crate::pool::ClientPools,
    topic: &str,
    timeout: Duration,
) -> Registration {
    let key = WatchKey(cluster.settings().clone());
    // The task holds the client itself, not a lease: the pool counts the scalers' leases only,
    // so the client leaves the pool with the last scaler (and closes when the task stops).
    let cluster = crate::pool::Held::new(cluster).client();
    let lease = pools
        .pool::<WatchKey, WakeSource>()
        .get_or_connect(key, || async move {
            Ok::<_, std::convert::Infallible>(WakeSource::start(move |channels, commands, stop| {
                run(cluster, timeout, channels, commands, stop)
            }))
        })
        .await
        .unwrap_or_else(|never| match never {});
    let wake = lease.register(topic);
    Registration {
        lease,
        topic: topic.to_string(),
        wake,
    }
}

/// The end offsets last seen, and which topics moved since.
#[derive(Debug, Default)]
pub struct Offsets {
    seen: BTreeMap<TopicPartition, i64>,
}

impl Offsets {
    /// Takes a refresh's answer: the topics with a partition whose end offset changed (or that
    /// appeared) since a previous answer. The first answer for a topic is its baseline.
    pub fn update(&mut self, answer: &BTreeMap<TopicPartition, i64>) -> Vec<String> {
        let known: std::collections::BTreeSet<&String> =
            self.seen.keys().map(|(topic, _)| topic).collect();
        let mut moved: Vec<String> = Vec::new();
        for ((topic, partition), offset) in answer {
            let before = self.seen.get(&(topic.clone(), *partition));
            let changed = match before {
                Some(before) => before != offset,
                None => known.contains(topic),
            };
            if changed && !moved.contains(topic) {
                moved.push(topic.clone());
            }
        }
        for (tp, offset) in answer {
            self.seen.insert(tp.clone(), *offset);
        }
        moved
    }

    /// Forgets `topic` (no trigger watches it any more).
    pub fn forget(&mut self, topic: &str) {
        self.seen.retain(|(t, _), _| t != topic);
    }
}

async fn run(
    cluster: Option<std::sync::Arc<KafkaCluster>>,
    timeout: Duration,
    channels: WakeChannels,
    mut commands: mpsc::UnboundedReceiver<Watch>,
    stop: CancellationToken,
) {
    let Some(cluster) = cluster else {
        return;
    };
    let mut partitions: HashMap<String, (Instant, Vec<i32>)> = HashMap::new();
    let mut offsets = Offsets::default();
    let mut wait = Duration::ZERO;
    let mut next = Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            command = commands.recv() => match command {
                None => return,
                // Described on the next refresh.
                Some(Watch::Add(_)) => continue,
                Some(Watch::Remove(topic)) => {
                    if !channels.contains(&topic) {
                        partitions.remove(&topic);
                        offsets.forget(&topic);
                    }
                    continue;
                }
            },
            () = tokio::time::sleep_until(next) => {}
        }
        let ok = tokio::select! {
            () = stop.cancelled() => return,
            ok = refresh(&cluster, timeout, &channels, &mut partitions, &mut offsets) => ok,
        };
        wait = if ok {
            REFRESH
        } else {
            debug!(
                cluster = cluster.settings().describe(),
                "kafka end-offset refresh failed; polling until it succeeds"
            );
            (wait.max(REFRESH) * 2).min(MAX_BACKOFF)
        };
        next = Instant::now() + wait;
    }
}

/// One refresh: describes the topics that need it, asks for every watched partition's end
/// offset, wakes the topics that moved. `false` when a request failed.
async fn refresh(
    cluster: &KafkaCluster,
    timeout: Duration,
    channels: &WakeChannels,
    // Each topic's partitions, and when to describe it again.
    partitions: &mut HashMap<String, (Instant, Vec<i32>)>,
    offsets: &mut Offsets,
) -> bool {
    let topics = channels.names();
    if topics.is_empty() {
        return true;
    }
    let now = Instant::now();
    let stale: Vec<String> = topics
        .iter()
        .filter(|t| partitions.get(*t).is_none_or(|(due, _)| now >= *due))
        .cloned()
        .collect();
    for topic in stale {
        // One topic at a time: a topic that does not exist (yet), or that this client may not
        // describe, is left out until the next description, and slows nobody else's wakes.
        let described = match cluster.partitions(Some(vec![topic.clone()]), timeout).await {
            Ok(described) => described.get(&topic).cloned().unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        let due = if described.is_empty() {
            now + DESCRIBE_RETRY
        } else {
            now + METADATA_REFRESH
        };
        partitions.insert(topic, (due, described));
    }
    let watched: Vec<TopicPartition> = topics
        .iter()
        .filter_map(|t| partitions.get(t).map(|(_, ids)| (t, ids)))
        .flat_map(|(t, ids)| ids.iter().map(move |id| (t.clone(), *id)))
        .collect();
    if watched.is_empty() {
        return true;
    }
    match cluster.latest_offsets(watched, timeout).await {
        Ok(answer) => {
            for topic in offsets.update(&answer) {
                channels.wake(&topic);
            }
            true
        }
        Err(_) => {
            // A partition may be gone (a deleted topic fails the whole request): describe
            // every topic again at the next refresh.
            partitions.clear();
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(rows: &[(&str, i32, i64)]) -> BTreeMap<TopicPartition, i64> {
        rows.iter()
            .map(|(t, p, o)| ((t.to_string(), *p), *o))
            .collect()
    }

    #[test]
    fn the_first_answer_is_the_baseline_and_a_moved_end_offset_wakes_its_topic() {
        let mut offsets = Offsets::default();
        // First sight of both topics: no wake.
        assert!(
            offsets
                .update(&answer(&[("a", 0, 5), ("a", 1, 0), ("b", 0, 7)]))
                .is_empty()
        );
        // Nothing moved.
        assert!(
            offsets
                .update(&answer(&[("a", 0, 5), ("a", 1, 0), ("b", 0, 7)]))
                .is_empty()
        );
        // a/1 moved: a once, not b.
        assert_eq!(
            offsets.update(&answer(&[("a", 0, 6), ("a", 1, 1), ("b", 0, 7)])),
            ["a"]
        );
        // A partition added to a known topic wakes it; a smaller offset (a topic created
        // again) wakes too.
        assert_eq!(
            offsets.update(&answer(&[("a", 2, 0), ("b", 0, 1)])),
            ["a", "b"]
        );
        // A forgotten topic starts from a new baseline.
        offsets.forget("a");
        assert!(offsets.update(&answer(&[("a", 0, 9)])).is_empty());
    }
}
