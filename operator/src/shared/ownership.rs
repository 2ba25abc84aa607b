//! Which ScaledObjects and ScaledJobs this replica may write for: the one place that decides
//! ownership. Everything that writes for an object (the reconcile shell, a loop's poll, the
//! `/scale` write, a Job's creation, TriggerAuthentication Events) asks [`Shards::owns`] first.
//!
//! Without shards (the default: one leader does all the work) this replica owns everything.
//! With `--shards=auto` the answer comes from the latest [`ShardView`] that the membership task
//! ([`crate::process::shards`]) publishes, and is `true` only when all of these hold:
//! - the view is fresh: this replica renewed its own Lease and listed the others within the
//!   renew deadline (shorter than the lease duration), so it stops writing before any other
//!   replica can consider its Lease expired (fencing by Lease expiry);
//! - the hold after (re)joining has passed: a replica that has just created its Lease (or
//!   renewed it again after a fence) waits one renew deadline and a margin, by which time every
//!   replica that owned its objects has either seen its Lease and let them go, or fenced itself;
//! - the ring of the live members gives this replica for `namespace/name`.
//!
//! The checks read the clock at each call, so a fence takes effect at the deadline itself, not
//! at the next published view.

use std::sync::Arc;

use keda_api::shards::{Member, Ring};
use tokio::sync::watch;
use tokio::time::Instant;

/// One replica's knowledge of the shards, published by the membership task.
#[derive(Debug, Clone)]
pub struct ShardView {
    /// This replica's identity (its Lease's holder).
    pub me: String,
    /// The live members (this replica included while its view is fresh).
    pub members: Vec<Member>,
    /// The ring of `members`.
    pub ring: Arc<Ring>,
    /// Writes are allowed until then (the last successful round's start plus the renew
    /// deadline); `None`: never renewed (yet).
    pub fresh_until: Option<Instant>,
    /// Objects are taken from then on (the hold after joining).
    pub hold_until: Instant,
    /// The hold after joining (renew deadline and one retry period): an object this replica
    /// lost keeps its loop, serving metric reads but not polling, for twice that, so its new
    /// owner has started before the old one stops.
    pub hold: std::time::Duration,
}

impl ShardView {
    /// A view with no member and no right to write: what a replica knows before its first round.
    pub fn unknown(me: impl Into<String>) -> ShardView {
        ShardView {
            me: me.into(),
            members: Vec::new(),
            ring: Arc::new(Ring::default()),
            fresh_until: None,
            hold_until: Instant::now(),
            hold: std::time::Duration::ZERO,
        }
    }

    /// Whether this replica may write for anything at `now` (fresh, hold over).
    pub fn may_write(&self, now: Instant) -> bool {
        self.fresh_until.is_some_and(|until| now < until) && now >= self.hold_until
    }
}

/// The state of ownership: everything, or the shards' view.
#[derive(Clone, Debug, Default)]
pub enum Shards {
    /// No shards: this replica owns every object it watches (leader election decides whether
    /// it works at all).
    #[default]
    All,
    /// `--shards=auto`: the membership task's latest view.
    Leased(watch::Receiver<ShardView>),
}

/// Who owns an object, for `explain` and the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerInfo {
    /// The replica the ring names (`None`: no member is live, or no shards).
    pub owner: Option<String>,
    /// This replica's identity (`None` without shards).
    pub me: Option<String>,
    /// Whether this replica writes for the object now.
    pub owned_here: bool,
    /// Live members.
    pub members: usize,
}

impl Shards {
    /// Whether this replica may write for `namespace/name` now.
    pub fn owns(&self, namespace: &str, name: &str) -> bool {
        match self {
            Shards::All => true,
            Shards::Leased(view) => {
                let view = view.borrow();
                view.may_write(Instant::now())
                    && view.ring.owner(namespace, name) == Some(view.me.as_str())
            }
        }
    }

    /// Who owns `namespace/name` in this replica's view.
    pub fn owner_info(&self, namespace: &str, name: &str) -> OwnerInfo {
        match self {
            Shards::All => OwnerInfo {
                owner: None,
                me: None,
                owned_here: true,
                members: 1,
            },
            Shards::Leased(view) => {
                let owned_here = self.owns(namespace, name);
                let view = view.borrow();
                OwnerInfo {
                    owner: view.ring.owner(namespace, name).map(str::to_string),
                    me: Some(view.me.clone()),
                    owned_here,
                    members: view.members.len(),
                }
            }
        }
    }

    /// Whether shards are on.
    pub fn is_sharded(&self) -> bool {
        matches!(self, Shards::Leased(_))
    }

    /// How long a lost object's loop lingers (serving reads, not polling) before it stops.
    pub fn linger(&self) -> std::time::Duration {
        match self {
            Shards::All => std::time::Duration::ZERO,
            Shards::Leased(view) => view.borrow().hold * 2,
        }
    }

    /// A stream with an item each time what this replica owns may have changed (members
    /// joined or left, it was fenced, its hold ended); never an item without shards.
    pub fn changes(&self) -> futures::stream::BoxStream<'static, ()> {
        use futures::StreamExt;
        match self.subscribe() {
            None => futures::stream::pending().boxed(),
            Some(mut view) => {
                view.mark_unchanged();
                futures::stream::unfold(view, |mut view| async move {
                    view.changed().await.ok()?;
                    Some(((), view))
                })
                .boxed()
            }
        }
    }

    /// A receiver that sees each new view (`None` without shards: ownership never changes).
    pub fn subscribe(&self) -> Option<watch::Receiver<ShardView>> {
        match self {
            Shards::All => None,
            Shards::Leased(view) => Some(view.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn view(members: &[&str], fresh_for: Option<Duration>, hold_for: Duration) -> ShardView {
        let now = Instant::now();
        ShardView {
            me: "a".to_string(),
            members: members
                .iter()
                .map(|m| Member {
                    identity: (*m).to_string(),
                    address: None,
                })
                .collect(),
            ring: Arc::new(Ring::new(members.iter().copied())),
            fresh_until: fresh_for.map(|d| now + d),
            hold_until: now + hold_for,
            hold: hold_for,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_writes_only_while_fresh_after_its_hold_and_for_what_the_ring_gives_it() {
        let (tx, rx) = watch::channel(view(&["a"], Some(Duration::from_secs(10)), Duration::ZERO));
        let shards = Shards::Leased(rx);
        assert!(shards.owns("ns", "x"));
        // The renew deadline passes without a round: fenced, at the deadline itself.
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!shards.owns("ns", "x"));
        // Fresh again but within the hold after rejoining.
        tx.send_replace(view(
            &["a"],
            Some(Duration::from_secs(10)),
            Duration::from_secs(3),
        ));
        assert!(!shards.owns("ns", "x"));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(shards.owns("ns", "x"));
        // With a second member, exactly the objects the ring gives "a".
        tx.send_replace(view(
            &["a", "b"],
            Some(Duration::from_secs(10)),
            Duration::ZERO,
        ));
        let ring = Ring::new(["a", "b"]);
        for i in 0..200 {
            let name = format!("o-{i}");
            assert_eq!(
                shards.owns("ns", &name),
                ring.owner("ns", &name) == Some("a"),
                "{name}"
            );
        }
        assert!(Shards::All.owns("ns", "x"));
    }

    #[test]
    fn an_unknown_view_owns_nothing() {
        let (_tx, rx) = watch::channel(ShardView::unknown("a"));
        assert!(!Shards::Leased(rx).owns("ns", "x"));
    }
}
