//! The shard series (`--shards=auto` only): `keda_rs_shard_members{shard}`,
//! `keda_rs_shard_writing{shard}` and `keda_rs_shard_owned_objects{shard}`, each labelled with
//! the replica's identity, so a dashboard tells the replicas apart and sums what they own.
//! KEDA's own series keep KEDA's labels (its dashboards select by them); Prometheus adds the
//! pod's labels at scrape time.

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};

use super::*;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ShardLabels {
    shard: String,
}

impl EncodeLabelSet for ShardLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [("shard", self.shard.as_str())].encode(encoder)
    }
}

pub(super) struct ShardFamilies {
    members: Family<ShardLabels, Gauge>,
    writing: Family<ShardLabels, Gauge>,
    owned: Family<ShardLabels, Gauge>,
}

impl Metrics {
    fn shard_families(&self) -> &ShardFamilies {
        self.inner.shards.get_or_init(|| {
            let families = ShardFamilies {
                members: Family::default(),
                writing: Family::default(),
                owned: Family::default(),
            };
            self.register(
                "rs_shard_members",
                "Live operator replicas (shard Leases not expired) as this replica sees them.",
                families.members.clone(),
            );
            self.register(
                "rs_shard_writing",
                "Whether this replica may write (1): its shard Lease is renewed within the renew deadline and its hold after joining is over.",
                families.writing.clone(),
            );
            self.register(
                "rs_shard_owned_objects",
                "ScaledObjects and ScaledJobs whose loops run on this replica.",
                families.owned.clone(),
            );
            families
        })
    }

    /// What the membership task saw in its last round.
    pub fn set_shard_state(&self, shard: &str, members: usize, writing: bool) {
        let labels = ShardLabels {
            shard: shard.to_string(),
        };
        let f = self.shard_families();
        f.members
            .get_or_create(&labels)
            .set(i64::try_from(members).unwrap_or(i64::MAX));
        f.writing.get_or_create(&labels).set(i64::from(writing));
    }

    /// How many objects' loops run on this replica.
    pub fn set_shard_owned(&self, shard: &str, owned: usize) {
        let labels = ShardLabels {
            shard: shard.to_string(),
        };
        self.shard_families()
            .owned
            .get_or_create(&labels)
            .set(i64::try_from(owned).unwrap_or(i64::MAX));
    }
}
