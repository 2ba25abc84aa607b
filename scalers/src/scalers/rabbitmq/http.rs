//! Reading queue statistics from the RabbitMQ management plugin's HTTP API.

use std::time::Duration;

use serde::Deserialize;

use super::config::Operation;
pub use crate::http_client::HttpClientError;
use crate::http_client::reqwest_client;
use crate::tls::TlsSettings;

/// What an HTTP client is shared by: triggers with the same TLS settings and timeout use one
/// client (and its keep-alive connections), whatever broker they ask.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HttpKey {
    /// TLS settings for `https://` hosts.
    pub tls: TlsSettings,
    /// Request timeout.
    pub timeout: Duration,
}

/// Builds the client of `key`.
///
/// # Errors
/// The TLS material is invalid, or the client cannot be built.
pub fn client(key: &HttpKey) -> Result<reqwest::Client, HttpClientError> {
    reqwest_client(&key.tls, key.timeout)
}

/// The counters of one queue, as the management API reports them. Absent fields (a queue
/// whose statistics are not collected yet) count as 0, as in KEDA.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct QueueInfo {
    /// Ready + unacknowledged messages.
    #[serde(default)]
    pub messages: i64,
    /// Ready messages.
    #[serde(default)]
    pub messages_ready: i64,
    /// Rates.
    #[serde(default)]
    pub message_stats: MessageStats,
}

/// `message_stats` of a queue.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct MessageStats {
    /// Publishing.
    #[serde(default)]
    pub publish_details: Rate,
    /// Deliveries and gets.
    #[serde(default)]
    pub deliver_get_details: Rate,
}

/// A rate in messages per second over the broker's sampling interval.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Rate {
    /// Messages per second.
    #[serde(default)]
    pub rate: f64,
}

/// The page of queues a regex query answers.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct QueuePage {
    /// The matching queues.
    #[serde(default)]
    pub items: Vec<QueueInfo>,
    /// How many pages there are.
    #[serde(default)]
    pub page_count: i64,
}

/// Message count and rates of one queue, or of several combined.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueueStatus {
    /// Messages counted (ready + unacked, or ready only with `excludeUnacknowledged`).
    pub messages: i64,
    /// Publish rate, messages per second.
    pub publish_rate: f64,
    /// Deliver + get rate, messages per second.
    pub deliver_get_rate: f64,
}

impl QueueInfo {
    /// This queue's status, counting ready messages only if `ready_only`.
    pub fn status(&self, ready_only: bool) -> QueueStatus {
        QueueStatus {
            messages: if ready_only {
                self.messages_ready
            } else {
                self.messages
            },
            publish_rate: self.message_stats.publish_details.rate,
            deliver_get_rate: self.message_stats.deliver_get_details.rate,
        }
    }
}

/// KEDA's `getComposedQueue`: combines the queues a regex matched. Each counter and rate is
/// combined on its own (the maximum of messages and the maximum of rates may come from
/// different queues); the average of message counts uses integer division. No queue gives
/// zeros.
pub fn compose(queues: &[QueueInfo], operation: Operation, ready_only: bool) -> QueueStatus {
    let statuses: Vec<QueueStatus> = queues.iter().map(|q| q.status(ready_only)).collect();
    if statuses.is_empty() {
        return QueueStatus::default();
    }
    let sum = statuses
        .iter()
        .fold(QueueStatus::default(), |acc, s| QueueStatus {
            // Counts come from the broker: saturate rather than overflow on a bogus one.
            messages: acc.messages.saturating_add(s.messages),
            publish_rate: acc.publish_rate + s.publish_rate,
            deliver_get_rate: acc.deliver_get_rate + s.deliver_get_rate,
        });
    match operation {
        Operation::Sum => sum,
        Operation::Avg => {
            let n = statuses.len();
            QueueStatus {
                messages: sum.messages / i64::try_from(n).unwrap_or(i64::MAX).max(1),
                publish_rate: sum.publish_rate / n as f64,
                deliver_get_rate: sum.deliver_get_rate / n as f64,
            }
        }
        Operation::Max => statuses
            .iter()
            .fold(QueueStatus::default(), |acc, s| QueueStatus {
                messages: acc.messages.max(s.messages),
                publish_rate: acc.publish_rate.max(s.publish_rate),
                deliver_get_rate: acc.deliver_get_rate.max(s.deliver_get_rate),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(messages: i64, ready: i64, publish: f64, deliver: f64) -> QueueInfo {
        QueueInfo {
            messages,
            messages_ready: ready,
            message_stats: MessageStats {
                publish_details: Rate { rate: publish },
                deliver_get_details: Rate { rate: deliver },
            },
        }
    }

    #[test]
    fn composition_sums_averages_and_maximizes_each_field_separately() {
        let queues = [queue(3, 1, 2.0, 0.5), queue(4, 4, 1.0, 1.5)];
        // (operation, ready only, expected)
        let rows = [
            (Operation::Sum, false, (7, 3.0, 2.0)),
            (Operation::Sum, true, (5, 3.0, 2.0)),
            (Operation::Avg, false, (3, 1.5, 1.0)), // 7 / 2 = 3 (integer division)
            (Operation::Avg, true, (2, 1.5, 1.0)),
            (Operation::Max, false, (4, 2.0, 1.5)),
        ];
        for (operation, ready_only, (messages, publish, deliver)) in rows {
            assert_eq!(
                compose(&queues, operation, ready_only),
                QueueStatus {
                    messages,
                    publish_rate: publish,
                    deliver_get_rate: deliver
                },
                "{operation:?} ready_only={ready_only}"
            );
        }
        assert_eq!(compose(&[], Operation::Avg, false), QueueStatus::default());
    }

    #[test]
    fn missing_fields_decode_as_zero() {
        let q: QueueInfo = serde_json::from_str(r#"{"name":"q"}"#).unwrap();
        assert_eq!(q, QueueInfo::default());
        let q: QueueInfo = serde_json::from_str(
            r#"{"messages":5,"messages_ready":2,"message_stats":{"publish_details":{"rate":1.5}}}"#,
        )
        .unwrap();
        assert_eq!(
            q.status(false),
            QueueStatus {
                messages: 5,
                publish_rate: 1.5,
                deliver_get_rate: 0.0
            }
        );
        assert_eq!(q.status(true).messages, 2);
    }
}
