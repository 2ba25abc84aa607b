//! KEDA's lag arithmetic for the `kafka` trigger, as pure functions over offsets already read
//! from the cluster: per-partition lag (with the uncommitted-offset and persistent-lag rules),
//! the total, and the caps that keep the HPA from asking for more consumers than partitions.

use std::collections::{BTreeMap, HashMap};

/// Where a consumer without a committed offset starts (`offsetResetPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OffsetResetPolicy {
    /// At the end: an uncommitted partition counts as lag 1, enough to wake one consumer.
    Latest,
    /// At the beginning: an uncommitted partition counts as its whole content.
    Earliest,
}

/// The options of the trigger that shape the lag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LagRules {
    /// `lagThreshold` (> 0).
    pub lag_threshold: i64,
    /// `offsetResetPolicy`.
    pub offset_reset_policy: OffsetResetPolicy,
    /// `scaleToZeroOnInvalidOffset`.
    pub scale_to_zero_on_invalid_offset: bool,
    /// `allowIdleConsumers`.
    pub allow_idle_consumers: bool,
    /// `excludePersistentLag`.
    pub exclude_persistent_lag: bool,
    /// `limitToPartitionsWithLag`.
    pub limit_to_partitions_with_lag: bool,
    /// `ensureEvenDistributionOfPartitions`.
    pub ensure_even_distribution: bool,
}

/// A committed offset as Kafka reports it: `-1` when the group has none for the partition.
pub const NO_COMMITTED_OFFSET: i64 = -1;

/// One partition's offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// The group's committed offset, or [`NO_COMMITTED_OFFSET`].
    pub committed: i64,
    /// The partition's latest offset (high watermark), or `None` when the broker did not
    /// report it (KEDA counts such a partition as lag 0).
    pub latest: Option<i64>,
}

/// `(topic, partition)`.
pub type TopicPartition = (String, i32);

/// The result of one evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TotalLag {
    /// The value reported to the HPA, after persistent lag is excluded and the caps applied.
    pub value: i64,
    /// The sum of the lag including persistent lag: what activity is judged on.
    pub with_persistent: i64,
}

/// The committed offset last seen per partition, for `excludePersistentLag`.
pub type PreviousOffsets = HashMap<TopicPartition, i64>;

/// `(lag, lag including persistent lag)` of one partition (KEDA's `getLagForPartition`).
/// Updates `previous` as KEDA does when `excludePersistentLag` is set.
pub fn partition_lag(
    rules: &LagRules,
    partition: &TopicPartition,
    offsets: PartitionOffsets,
    previous: &mut PreviousOffsets,
) -> (i64, i64) {
    let committed = offsets.committed;
    if committed == NO_COMMITTED_OFFSET {
        match rules.offset_reset_policy {
            OffsetResetPolicy::Latest => {
                let lag = if rules.scale_to_zero_on_invalid_offset {
                    0
                } else {
                    1
                };
                return (lag, lag);
            }
            OffsetResetPolicy::Earliest if rules.scale_to_zero_on_invalid_offset => return (0, 0),
            OffsetResetPolicy::Earliest => {}
        }
    }
    let Some(latest) = offsets.latest else {
        return (0, 0);
    };
    if committed == NO_COMMITTED_OFFSET {
        return (latest, latest);
    }
    // Offsets come from the broker: saturate rather than overflow on a bogus pair.
    let lag = latest.saturating_sub(committed);
    if rules.exclude_persistent_lag {
        match previous.get(partition) {
            // The consumer has not moved since the last poll: something may be wrong with the
            // message at this offset. Do not scale on it, but keep it for activity.
            Some(&before) if before == committed => return (0, lag),
            _ => {
                previous.insert(partition.clone(), committed);
            }
        }
    }
    (lag, lag)
}

/// The total lag of all `partitions` (KEDA's `getTotalLag`), capped unless idle consumers are
/// allowed: without `allowIdleConsumers` the value never asks for more replicas than partitions
/// (with `limitToPartitionsWithLag`: than partitions that have lag), and with
/// `ensureEvenDistributionOfPartitions` it is rounded up to a replica count that divides the
/// partition count.
pub fn total_lag(
    rules: &LagRules,
    partitions: &BTreeMap<TopicPartition, PartitionOffsets>,
    previous: &mut PreviousOffsets,
) -> TotalLag {
    let mut value = 0i64;
    let mut with_persistent = 0i64;
    let mut partitions_with_lag = 0i64;
    for (partition, offsets) in partitions {
        let (lag, lag_with_persistent) = partition_lag(rules, partition, *offsets, previous);
        value = value.saturating_add(lag);
        with_persistent = with_persistent.saturating_add(lag_with_persistent);
        if lag > 0 {
            partitions_with_lag += 1;
        }
    }
    let partition_count = i64::try_from(partitions.len()).unwrap_or(i64::MAX);
    let threshold = rules.lag_threshold.max(1);
    if !rules.allow_idle_consumers
        || rules.limit_to_partitions_with_lag
        || rules.ensure_even_distribution
    {
        let mut upper_bound = partition_count;
        if rules.ensure_even_distribution {
            value =
                next_balanced_factor(value, partition_count, threshold).saturating_mul(threshold);
        }
        if rules.limit_to_partitions_with_lag {
            upper_bound = partitions_with_lag;
        }
        // KEDA compares the integer quotient, so a lag up to one threshold above the cap
        // passes unchanged (25 with threshold 10 and 2 partitions stays 25).
        if value / threshold > upper_bound {
            value = upper_bound.saturating_mul(threshold);
        }
    }
    TotalLag {
        value,
        with_persistent,
    }
}

/// The smallest divisor `f` of `partitions` with `f * threshold >= lag`, or `partitions`.
fn next_balanced_factor(lag: i64, partitions: i64, threshold: i64) -> i64 {
    factors(partitions)
        .into_iter()
        .find(|f| f.saturating_mul(threshold) >= lag)
        .unwrap_or(partitions)
}

/// The divisors of `n`, ascending (none for `n < 1`).
fn factors(n: i64) -> Vec<i64> {
    let mut out: Vec<i64> = (1..=n)
        .take_while(|i| i.saturating_mul(*i) <= n)
        .filter(|i| n % i == 0)
        .flat_map(|i| if i == n / i { vec![i] } else { vec![i, n / i] })
        .collect();
    out.sort_unstable();
    out
}

/// The most partitions `partitionLimitation` may list, counting each range's members (400 KB
/// of `i32`), so `0-2147483647` cannot allocate 8 GB.
pub const MAX_LIMITED_PARTITIONS: usize = 100_000;

/// Parses `partitionLimitation`: comma-separated partition ids and inclusive ranges
/// (`1,2,10-12`), [`MAX_LIMITED_PARTITIONS`] partitions at most.
///
/// # Errors
/// The item that is neither an integer nor a `start-end` range, or too many partitions, as a
/// message.
pub fn parse_partition_limitation(raw: &str) -> Result<Vec<i32>, String> {
    let mut out = Vec::new();
    let too_many =
        || format!("partition limitation lists more than {MAX_LIMITED_PARTITIONS} partitions");
    for item in raw.split(',').map(str::trim) {
        let invalid = || format!("invalid partition limitation: \"{item}\"");
        match item.split_once('-') {
            Some((start, end)) => {
                let start: i32 = start.trim().parse().map_err(|_| invalid())?;
                let end: i32 = end.trim().parse().map_err(|_| invalid())?;
                let members = usize::try_from(i64::from(end) - i64::from(start) + 1).unwrap_or(0);
                if out.len().saturating_add(members) > MAX_LIMITED_PARTITIONS {
                    return Err(too_many());
                }
                out.extend(start..=end);
            }
            None => {
                if out.len() >= MAX_LIMITED_PARTITIONS {
                    return Err(too_many());
                }
                out.push(item.parse().map_err(|_| invalid())?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> LagRules {
        LagRules {
            lag_threshold: 10,
            offset_reset_policy: OffsetResetPolicy::Latest,
            scale_to_zero_on_invalid_offset: false,
            allow_idle_consumers: false,
            exclude_persistent_lag: false,
            limit_to_partitions_with_lag: false,
            ensure_even_distribution: false,
        }
    }

    fn tp(p: i32) -> TopicPartition {
        ("t".to_string(), p)
    }

    fn offsets(rows: &[(i64, i64)]) -> BTreeMap<TopicPartition, PartitionOffsets> {
        rows.iter()
            .enumerate()
            .map(|(i, &(committed, latest))| {
                (
                    tp(i32::try_from(i).expect("small")),
                    PartitionOffsets {
                        committed,
                        latest: Some(latest),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn uncommitted_partitions_follow_the_reset_policy() {
        // (policy, scaleToZeroOnInvalidOffset, latest offset, expected lag)
        for (policy, to_zero, latest, expected) in [
            (OffsetResetPolicy::Latest, false, 7, 1), // one consumer to start reading
            (OffsetResetPolicy::Latest, true, 7, 0),
            (OffsetResetPolicy::Earliest, false, 7, 7), // everything is lag
            (OffsetResetPolicy::Earliest, true, 7, 0),
        ] {
            let r = LagRules {
                offset_reset_policy: policy,
                scale_to_zero_on_invalid_offset: to_zero,
                ..rules()
            };
            let o = PartitionOffsets {
                committed: NO_COMMITTED_OFFSET,
                latest: Some(latest),
            };
            let got = partition_lag(&r, &tp(0), o, &mut PreviousOffsets::new());
            assert_eq!(got, (expected, expected), "{policy:?} {to_zero}");
        }
    }

    #[test]
    fn a_partition_without_a_latest_offset_counts_as_no_lag() {
        let o = PartitionOffsets {
            committed: 3,
            latest: None,
        };
        assert_eq!(
            partition_lag(&rules(), &tp(0), o, &mut PreviousOffsets::new()),
            (0, 0)
        );
    }

    #[test]
    fn the_total_is_capped_at_partitions_times_threshold_unless_idle_consumers_are_allowed() {
        // 2 partitions, lags 30 and 15: 45 / 10 = 4 > 2 partitions -> 20.
        let parts = offsets(&[(0, 30), (5, 20)]);
        let capped = total_lag(&rules(), &parts, &mut PreviousOffsets::new());
        assert_eq!(
            capped,
            TotalLag {
                value: 20,
                with_persistent: 45
            }
        );
        let idle = LagRules {
            allow_idle_consumers: true,
            ..rules()
        };
        let free = total_lag(&idle, &parts, &mut PreviousOffsets::new());
        assert_eq!(free.value, 45);
        // Integer quotient: 25 / 10 = 2 is not above 2 partitions, so 25 stays.
        let edge = total_lag(
            &rules(),
            &offsets(&[(0, 20), (0, 5)]),
            &mut PreviousOffsets::new(),
        );
        assert_eq!(edge.value, 25);
    }

    #[test]
    fn limit_to_partitions_with_lag_caps_by_lagging_partitions() {
        let r = LagRules {
            limit_to_partitions_with_lag: true,
            ..rules()
        };
        // 3 partitions, only one lags (by 50): cap at 1 x 10.
        let parts = offsets(&[(0, 50), (4, 4), (9, 9)]);
        assert_eq!(total_lag(&r, &parts, &mut PreviousOffsets::new()).value, 10);
    }

    #[test]
    fn even_distribution_rounds_up_to_a_divisor_of_the_partition_count() {
        let r = LagRules {
            ensure_even_distribution: true,
            ..rules()
        };
        // 6 partitions (divisors 1, 2, 3, 6); total lag 35 -> 4 replicas would be uneven,
        // so 6 x 10 = 60.
        let parts = offsets(&[(0, 35), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0)]);
        assert_eq!(total_lag(&r, &parts, &mut PreviousOffsets::new()).value, 60);
        // total lag 15 -> 2 replicas -> 20.
        let parts = offsets(&[(0, 15), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0)]);
        assert_eq!(total_lag(&r, &parts, &mut PreviousOffsets::new()).value, 20);
        assert_eq!(factors(12), vec![1, 2, 3, 4, 6, 12]);
        assert_eq!(factors(9), vec![1, 3, 9]);
        assert!(factors(0).is_empty());
    }

    #[test]
    fn persistent_lag_is_excluded_from_the_value_but_not_from_activity() {
        let r = LagRules {
            exclude_persistent_lag: true,
            allow_idle_consumers: true,
            ..rules()
        };
        let mut previous = PreviousOffsets::new();
        let first = total_lag(&r, &offsets(&[(2, 9)]), &mut previous);
        assert_eq!(
            first,
            TotalLag {
                value: 7,
                with_persistent: 7
            }
        );
        // The consumer did not move: the value drops to 0, activity still sees 7.
        let stuck = total_lag(&r, &offsets(&[(2, 9)]), &mut previous);
        assert_eq!(
            stuck,
            TotalLag {
                value: 0,
                with_persistent: 7
            }
        );
        // It moved: counted again.
        let moved = total_lag(&r, &offsets(&[(3, 9)]), &mut previous);
        assert_eq!(
            moved,
            TotalLag {
                value: 6,
                with_persistent: 6
            }
        );
    }

    #[test]
    fn partition_limitation_lists_and_ranges() {
        assert_eq!(
            parse_partition_limitation("1, 2,10-12").expect("valid"),
            vec![1, 2, 10, 11, 12]
        );
        assert_eq!(
            parse_partition_limitation("1,x").unwrap_err(),
            "invalid partition limitation: \"x\""
        );
        assert_eq!(
            parse_partition_limitation("1-2-3").unwrap_err(),
            "invalid partition limitation: \"1-2-3\""
        );
    }

    #[test]
    fn partition_limitation_is_bounded() {
        // Before, this allocated 2^31 partition ids (8 GB) and the process was killed.
        for raw in ["0-2147483647", "0-99999,100000", "0-60000,0-60000"] {
            assert_eq!(
                parse_partition_limitation(raw).unwrap_err(),
                "partition limitation lists more than 100000 partitions",
                "{raw}"
            );
        }
        assert_eq!(
            parse_partition_limitation("0-99999")
                .expect("at the bound")
                .len(),
            MAX_LIMITED_PARTITIONS
        );
        // A backwards range is empty, as before.
        assert_eq!(parse_partition_limitation("5-1"), Ok(vec![]));
    }

    #[test]
    fn huge_thresholds_and_offsets_saturate_instead_of_overflowing() {
        // A lagThreshold of 2^62 times a balanced factor of 3 overflowed before.
        let r = LagRules {
            lag_threshold: 1 << 62,
            ensure_even_distribution: true,
            ..rules()
        };
        let rows = [(0, i64::MAX), (0, 0), (0, 0)];
        let total = total_lag(&r, &offsets(&rows), &mut PreviousOffsets::new());
        assert_eq!(total.value, i64::MAX);
        let r = LagRules {
            lag_threshold: i64::MAX,
            ..rules()
        };
        let total = total_lag(&r, &offsets(&[(-5, i64::MAX)]), &mut PreviousOffsets::new());
        assert_eq!(total.value, i64::MAX);
    }
}
