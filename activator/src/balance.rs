//! Which pods this activator replica sends to, with how much capacity each, and the
//! least-loaded choice among them.
//!
//! Capacity is split across activator replicas as Knative's throttler does: with at least as
//! many ready pods as activators, each activator gets its own slice of the pods (pod `i` of the
//! sorted list goes to activator `i % activators`) at full `containerConcurrency`; with fewer
//! pods than activators, every activator uses every pod at `containerConcurrency / activators`
//! (at least 1), so together they never exceed the per-pod limit.

use std::net::SocketAddr;

/// One pod this replica may send to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSlot {
    /// The pod's address and target port.
    pub addr: SocketAddr,
    /// Requests this replica may have in flight to it; 0 = no limit.
    pub capacity: u32,
    /// Requests this replica has in flight to it.
    pub in_flight: u32,
}

impl PodSlot {
    fn has_room(&self) -> bool {
        self.capacity == 0 || self.in_flight < self.capacity
    }
}

/// This replica's position among the ready activator replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replicas {
    /// This replica's index in the sorted list of ready activators, if it is in it.
    pub index: Option<usize>,
    /// How many activators are ready (at least 1).
    pub count: usize,
}

impl Default for Replicas {
    fn default() -> Self {
        Self {
            index: None,
            count: 1,
        }
    }
}

/// The pods of `ready` (sorted here) that this replica uses, each with its capacity.
pub fn assign(
    ready: &[SocketAddr],
    container_concurrency: u32,
    replicas: Replicas,
) -> Vec<(SocketAddr, u32)> {
    let mut pods = ready.to_vec();
    pods.sort_unstable();
    pods.dedup();
    let count = replicas.count.max(1);
    let Some(index) = replicas.index.filter(|_| count > 1) else {
        return pods
            .into_iter()
            .map(|p| (p, container_concurrency))
            .collect();
    };
    if pods.len() >= count {
        pods.into_iter()
            .enumerate()
            .filter(|(i, _)| i % count == index % count)
            .map(|(_, p)| (p, container_concurrency))
            .collect()
    } else {
        let share = if container_concurrency == 0 {
            0
        } else {
            (container_concurrency / u32::try_from(count).unwrap_or(u32::MAX)).max(1)
        };
        pods.into_iter().map(|p| (p, share)).collect()
    }
}

/// The index of the least-loaded pod with room, starting the scan at `start` so equally
/// loaded pods take turns. `None` when every pod is full (or there is none).
pub fn pick(pods: &[PodSlot], start: usize) -> Option<usize> {
    let n = pods.len();
    let mut best: Option<usize> = None;
    for k in 0..n {
        let i = (start + k) % n;
        let pod = &pods[i];
        if !pod.has_room() {
            continue;
        }
        if pod.in_flight == 0 {
            return Some(i);
        }
        if best.is_none_or(|b| pods[b].in_flight > pod.in_flight) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, last], 8080))
    }

    fn slots(loads: &[(u32, u32)]) -> Vec<PodSlot> {
        loads
            .iter()
            .enumerate()
            .map(|(i, &(in_flight, capacity))| PodSlot {
                addr: addr(u8::try_from(i).unwrap()),
                capacity,
                in_flight,
            })
            .collect()
    }

    /// (in-flight/capacity per pod, scan start, expected)
    type Case = (&'static [(u32, u32)], usize, Option<usize>);

    #[test]
    fn pick_chooses_the_least_loaded_pod_with_room() {
        let cases: &[Case] = &[
            // No pods.
            (&[], 0, None),
            // Least loaded wins.
            (&[(3, 0), (1, 0), (2, 0)], 0, Some(1)),
            // A full pod is skipped even when it is the least loaded... of the ones with room.
            (&[(2, 2), (5, 10)], 0, Some(1)),
            // Every pod full: nothing.
            (&[(2, 2), (1, 1)], 0, None),
            // Ties go to the first from the start index, so idle pods take turns.
            (&[(0, 0), (0, 0), (0, 0)], 1, Some(1)),
            (&[(0, 0), (0, 0), (0, 0)], 2, Some(2)),
            (&[(1, 0), (1, 0)], 1, Some(1)),
        ];
        for (loads, start, expected) in cases {
            assert_eq!(
                pick(&slots(loads), *start),
                *expected,
                "{loads:?} from {start}"
            );
        }
    }

    #[test]
    fn capacity_is_split_across_activators_as_knative_does() {
        let pods = [addr(3), addr(1), addr(2), addr(4)];
        // One activator (or not in the list): every pod at full capacity.
        assert_eq!(
            assign(&pods, 10, Replicas::default()),
            vec![(addr(1), 10), (addr(2), 10), (addr(3), 10), (addr(4), 10)]
        );
        // Two activators, four pods: each gets every other pod at full capacity.
        let second = Replicas {
            index: Some(1),
            count: 2,
        };
        assert_eq!(
            assign(&pods, 10, second),
            vec![(addr(2), 10), (addr(4), 10)]
        );
        // Three activators, two pods: all pods, capacity divided (10 / 3 = 3).
        let third = Replicas {
            index: Some(2),
            count: 3,
        };
        assert_eq!(
            assign(&pods[..2], 10, third),
            vec![(addr(1), 3), (addr(3), 3)]
        );
        // Never below 1, and no limit stays no limit.
        assert_eq!(assign(&pods[..1], 2, third), vec![(addr(3), 1)]);
        assert_eq!(assign(&pods[..1], 0, third), vec![(addr(3), 0)]);
    }
}
