//! External metric names exactly as KEDA builds them, so HPAs, `status.externalMetricNames` and
//! metric requests stay compatible.
//!
//! A trigger's metric is `s<triggerIndex>-<scaler part>`. Most scalers pass their part through
//! [`normalize`], which replaces each of `/ . : % ( )` with `-` and keeps case. With
//! `scalingModifiers` the HPA sees one metric, [`COMPOSITE_METRIC_NAME`], without index.

pub use crate::scaled_object::COMPOSITE_METRIC_NAME;

/// KEDA's `NormalizeString`: replaces `/`, `.`, `:`, `%`, `(` and `)` with `-`; nothing else.
pub fn normalize(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '/' | '.' | ':' | '%' | '(' | ')' => '-',
            other => other,
        })
        .collect()
}

/// `s<index>-<name>` (KEDA's `GenerateMetricNameWithIndex`). `name` is used as given.
pub fn with_index(trigger_index: usize, name: &str) -> String {
    format!("s{trigger_index}-{name}")
}

/// Why [`strip_index`] refused a name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StripIndexError {
    /// The name has no `-` at all.
    #[error("metric name {0:?} has no index prefix")]
    NoPrefix(String),
    /// The part before the first `-` is not `s<index>`.
    #[error("metric name {name:?} does not start with the index prefix \"s{index}-\"")]
    WrongPrefix {
        /// The name given.
        name: String,
        /// The trigger index expected.
        index: usize,
    },
}

/// Removes the `s<index>-` prefix (KEDA's `RemoveIndexFromMetricName`), e.g. to give an external
/// scaler the name it returned.
///
/// # Errors
/// When the name does not start with `s<index>-`.
pub fn strip_index(trigger_index: usize, metric_name: &str) -> Result<&str, StripIndexError> {
    let Some((prefix, rest)) = metric_name.split_once('-') else {
        return Err(StripIndexError::NoPrefix(metric_name.to_string()));
    };
    if prefix.strip_prefix('s') == Some(trigger_index.to_string().as_str()) {
        Ok(rest)
    } else {
        Err(StripIndexError::WrongPrefix {
            name: metric_name.to_string(),
            index: trigger_index,
        })
    }
}

/// Go's `url.QueryEscape`: keeps ASCII letters, digits and `- _ . ~`, turns a space into `+` and
/// every other byte of the UTF-8 encoding into `%XX` (upper-case hex).
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// The cron scaler's encoding of a schedule: spaces removed, `*` -> `x`, `/` -> `Sl`,
/// `?` -> `Qm`, `,` -> `Cm`.
pub fn cron_schedule_part(schedule: &str) -> String {
    let mut out = String::with_capacity(schedule.len());
    for c in schedule.chars() {
        match c {
            ' ' => {}
            '*' => out.push('x'),
            '/' => out.push_str("Sl"),
            '?' => out.push_str("Qm"),
            ',' => out.push_str("Cm"),
            other => out.push(other),
        }
    }
    out
}

/// The database name of a MySQL DSN (`user:pass@tcp(host:3306)/dbname?params`): the text after
/// the last `/` and before `?`; empty when there is no `/`.
pub fn mysql_db_name_from_dsn(dsn: &str) -> &str {
    match dsn.rfind('/') {
        None => "",
        Some(i) => {
            let rest = &dsn[i + 1..];
            rest.split_once('?').map_or(rest, |(db, _)| db)
        }
    }
}

/// The inputs of a scaler's metric name, after its metadata has been parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalerMetric<'a> {
    /// `redis`, `redis-cluster`, `redis-sentinel`: `redis-<listName>`.
    Redis {
        /// `listName`.
        list_name: &'a str,
    },
    /// `redis-streams` and its cluster/sentinel variants: `redis-streams-<stream>`.
    RedisStreams {
        /// `stream`.
        stream: &'a str,
    },
    /// `kafka`: `kafka-<topic>`, or `kafka-<consumerGroup>-topics` without a topic.
    Kafka {
        /// `topic`, if set and non-empty.
        topic: Option<&'a str>,
        /// `consumerGroup`.
        consumer_group: &'a str,
    },
    /// `rabbitmq`: `rabbitmq-<query-escaped queueName>`.
    RabbitMq {
        /// `queueName`.
        queue_name: &'a str,
    },
    /// `prometheus`: the constant `prometheus`.
    Prometheus,
    /// `cron`: `cron-<timezone>-<start>-<end>` with the schedule encoding of
    /// [`cron_schedule_part`].
    Cron {
        /// `timezone`.
        timezone: &'a str,
        /// `start`.
        start: &'a str,
        /// `end`.
        end: &'a str,
    },
    /// `metrics-api`: `metric-api-<valueLocation>`.
    MetricsApi {
        /// `valueLocation`.
        value_location: &'a str,
    },
    /// `postgresql`: the constant `postgresql`.
    PostgreSql,
    /// `mysql`: `mysql-<dbName>` (from `dbName` or the connection string).
    MySql {
        /// The database name.
        db_name: &'a str,
    },
    /// `nats-jetstream`: `nats-jetstream-<stream>`.
    NatsJetStream {
        /// `stream`.
        stream: &'a str,
    },
    /// `kubernetes-workload`: `workload-<namespace of the scaled object>`.
    KubernetesWorkload {
        /// Namespace of the ScaledObject/ScaledJob.
        namespace: &'a str,
    },
    /// `external`, `external-push`: the name returned by `GetMetricSpec`, not normalized.
    External {
        /// The metric name the external scaler returned.
        metric_name: &'a str,
    },
}

impl ScalerMetric<'_> {
    /// The scaler part of the name, before the index prefix.
    pub fn part(&self) -> String {
        match *self {
            Self::Redis { list_name } => normalize(&format!("redis-{list_name}")),
            Self::RedisStreams { stream } => normalize(&format!("redis-streams-{stream}")),
            Self::Kafka {
                topic: Some(topic), ..
            } if !topic.is_empty() => normalize(&format!("kafka-{topic}")),
            Self::Kafka { consumer_group, .. } => {
                normalize(&format!("kafka-{consumer_group}-topics"))
            }
            Self::RabbitMq { queue_name } => {
                normalize(&format!("rabbitmq-{}", query_escape(queue_name)))
            }
            Self::Prometheus => "prometheus".to_string(),
            Self::Cron {
                timezone,
                start,
                end,
            } => normalize(&format!(
                "cron-{timezone}-{}-{}",
                cron_schedule_part(start),
                cron_schedule_part(end)
            )),
            Self::MetricsApi { value_location } => {
                normalize(&format!("metric-api-{value_location}"))
            }
            Self::PostgreSql => "postgresql".to_string(),
            Self::MySql { db_name } => normalize(&format!("mysql-{db_name}")),
            Self::NatsJetStream { stream } => normalize(&format!("nats-jetstream-{stream}")),
            Self::KubernetesWorkload { namespace } => normalize(&format!("workload-{namespace}")),
            Self::External { metric_name } => metric_name.to_string(),
        }
    }

    /// The full metric name for the trigger at `trigger_index`: `s<index>-<part>`.
    pub fn name(&self, trigger_index: usize) -> String {
        with_index(trigger_index, &self.part())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_replaces_only_kedas_six_characters() {
        let cases = [
            // every replaced character
            ("a/b.c:d%e(f)g", "a-b-c-d-e-f-g"),
            // case, underscores, spaces, plus and commas are kept
            ("My_Queue +x,y", "My_Queue +x,y"),
            // empty stays empty
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(input), want, "{input:?}");
        }
    }

    #[test]
    fn scaler_metric_names_match_keda_examples() {
        let cases: &[(usize, ScalerMetric<'_>, &str)] = &[
            // redis scaler test: list "mylist"
            (
                0,
                ScalerMetric::Redis {
                    list_name: "mylist",
                },
                "s0-redis-mylist",
            ),
            // redis list name with dots and colons is normalized
            (
                1,
                ScalerMetric::Redis {
                    list_name: "jobs:high.prio",
                },
                "s1-redis-jobs-high-prio",
            ),
            // redis-streams scaler test: stream "my-stream"
            (
                0,
                ScalerMetric::RedisStreams {
                    stream: "my-stream",
                },
                "s0-redis-streams-my-stream",
            ),
            // kafka with topic
            (
                0,
                ScalerMetric::Kafka {
                    topic: Some("my-topic"),
                    consumer_group: "my-group",
                },
                "s0-kafka-my-topic",
            ),
            // kafka without topic: all topics of the group
            (
                1,
                ScalerMetric::Kafka {
                    topic: None,
                    consumer_group: "my-group",
                },
                "s1-kafka-my-group-topics",
            ),
            // kafka with an empty topic behaves as no topic
            (
                0,
                ScalerMetric::Kafka {
                    topic: Some(""),
                    consumer_group: "g",
                },
                "s0-kafka-g-topics",
            ),
            // rabbitmq scaler test: queue "hello"
            (
                0,
                ScalerMetric::RabbitMq {
                    queue_name: "hello",
                },
                "s0-rabbitmq-hello",
            ),
            // rabbitmq: query escaping first ("/" -> %2F, " " -> +), then normalizing (% -> -)
            (
                0,
                ScalerMetric::RabbitMq {
                    queue_name: "a/b c.d",
                },
                "s0-rabbitmq-a-2Fb+c-d",
            ),
            // prometheus is a constant
            (0, ScalerMetric::Prometheus, "s0-prometheus"),
            // cron scaler test: Etc/UTC, "15 * * * *" to "16 * * * *"
            (
                0,
                ScalerMetric::Cron {
                    timezone: "Etc/UTC",
                    start: "15 * * * *",
                    end: "16 * * * *",
                },
                "s0-cron-Etc-UTC-15xxxx-16xxxx",
            ),
            // cron with steps, ranges, lists and '?'
            (
                2,
                ScalerMetric::Cron {
                    timezone: "America/New_York",
                    start: "*/5 8-17 ? * 1,3",
                    end: "0 18 * * *",
                },
                "s2-cron-America-New_York-xSl58-17Qmx1Cm3-018xxx",
            ),
            // metrics-api: dots of the value location become dashes
            (
                0,
                ScalerMetric::MetricsApi {
                    value_location: "components.worker.tasks",
                },
                "s0-metric-api-components-worker-tasks",
            ),
            // postgresql is a constant
            (3, ScalerMetric::PostgreSql, "s3-postgresql"),
            // mysql uses the database name
            (
                0,
                ScalerMetric::MySql {
                    db_name: "test_db_name",
                },
                "s0-mysql-test_db_name",
            ),
            // nats-jetstream uses the stream
            (
                0,
                ScalerMetric::NatsJetStream { stream: "mystream" },
                "s0-nats-jetstream-mystream",
            ),
            // kubernetes-workload uses the namespace
            (
                0,
                ScalerMetric::KubernetesWorkload {
                    namespace: "default",
                },
                "s0-workload-default",
            ),
            // external: not normalized
            (
                1,
                ScalerMetric::External {
                    metric_name: "queue.depth/a",
                },
                "s1-queue.depth/a",
            ),
        ];
        for (index, metric, want) in cases {
            assert_eq!(metric.name(*index), *want, "{metric:?}");
        }
    }

    #[test]
    fn strip_index_accepts_only_the_matching_prefix() {
        assert_eq!(strip_index(0, "s0-redis-mylist"), Ok("redis-mylist"));
        assert_eq!(strip_index(12, "s12-x"), Ok("x"));
        assert_eq!(
            strip_index(1, "s0-redis"),
            Err(StripIndexError::WrongPrefix {
                name: "s0-redis".into(),
                index: 1
            })
        );
        assert_eq!(
            strip_index(0, "redis"),
            Err(StripIndexError::NoPrefix("redis".into()))
        );
        assert_eq!(
            strip_index(0, "x0-redis").unwrap_err().to_string(),
            "metric name \"x0-redis\" does not start with the index prefix \"s0-\""
        );
    }

    #[test]
    fn query_escape_matches_go() {
        let cases = [
            // unreserved characters are kept
            ("AZaz09-_.~", "AZaz09-_.~"),
            // space becomes plus
            ("a b", "a+b"),
            // reserved characters are percent-encoded, upper-case hex
            ("a/b?c=d&e", "a%2Fb%3Fc%3Dd%26e"),
            // non-ASCII: each UTF-8 byte
            ("é", "%C3%A9"),
        ];
        for (input, want) in cases {
            assert_eq!(query_escape(input), want, "{input:?}");
        }
    }

    #[test]
    fn mysql_db_name_is_read_from_the_dsn() {
        let cases = [
            // typical go-sql-driver DSN
            ("user:pass@tcp(localhost:3306)/stats_db", "stats_db"),
            // parameters are dropped
            ("root:x@tcp(db:3306)/orders?parseTime=true", "orders"),
            // no database part
            ("user@tcp(db)", ""),
        ];
        for (dsn, want) in cases {
            assert_eq!(mysql_db_name_from_dsn(dsn), want, "{dsn:?}");
        }
    }
}
