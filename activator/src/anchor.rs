//! A timer that keeps a proxy thread's own timers from waking its runtime.
//!
//! tokio's timer driver wakes its runtime's I/O driver (an `eventfd` write, and an
//! `epoll_wait` that then returns at once) whenever a timer is registered that expires before
//! the wake-up the driver last planned, even when the task registering it runs on the
//! driver's own thread and the driver is not asleep (tokio 1.x, `runtime/time/mod.rs`,
//! `reregister`). On a proxy thread ([`crate::server::spawn_proxy_threads`]) whose only other
//! timers are its connections' idle deadlines (75 s by default), every request's response
//! timeout (`responseHeaderTimeout`, 60 s by default) is such a timer whenever no other
//! request is in flight on the thread: at 8 connections over 2 proxy threads that was 0.2-0.6
//! `write` system calls per request, each followed by an `epoll_wait` with nothing to do
//! (`cargo bench -p keda-activator --bench proxy -- --syscalls`, docs/benchmarks.md).
//!
//! [`run`] keeps one timer on the thread that always expires within [`PERIOD`], so the planned
//! wake-up is never further away than that and a timer of at least [`PERIOD`] never moves it
//! forward: no system call. Its cost is one wake-up of the thread per [`PERIOD`].

use std::time::Duration;

use tokio::time::MissedTickBehavior;

/// How far away the thread's planned wake-up may be: every default timeout of the proxy
/// (header read, idle, write, response, upstream idle) is longer.
pub const PERIOD: Duration = Duration::from_secs(1);

/// Keeps a timer of the current runtime always due within [`PERIOD`]; never returns (spawn it
/// on the proxy thread's runtime, which drops it when it shuts down).
pub async fn run() {
    every(PERIOD).await;
}

/// [`run`] with a timer due within `period`.
async fn every(period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Waker};

    /// Write system calls made by this thread so far (`/proc/thread-self/io`): tokio's wake-up
    /// of its I/O driver is an `eventfd` write.
    fn writes_of_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").expect("/proc/thread-self/io");
        io.lines()
            .find_map(|line| line.strip_prefix("syscw:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("syscw in /proc/thread-self/io")
    }

    /// On a current-thread runtime like a proxy thread's, with a connection's idle deadline
    /// (75 s) pending: the write system calls made while 100 requests register their response
    /// timeouts (60 s).
    fn writes_for_response_timeouts(anchored: bool) -> u64 {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                if anchored {
                    // 30 s rather than [`PERIOD`]: a test thread starved for a second on a
                    // loaded machine would see the anchor fire in the wake-up below, before
                    // it re-arms.
                    tokio::spawn(every(Duration::from_secs(30)));
                }
                let mut cx = Context::from_waker(Waker::noop());
                let mut idle = pin!(tokio::time::sleep(Duration::from_secs(75)));
                assert!(idle.as_mut().poll(&mut cx).is_pending());
                // A park and a wake-up: the driver plans its next wake-up from the timers it
                // has.
                tokio::time::sleep(Duration::from_millis(2)).await;
                let before = writes_of_this_thread();
                for _ in 0..100 {
                    let mut response = pin!(tokio::time::timeout(
                        Duration::from_secs(60),
                        std::future::pending::<()>(),
                    ));
                    assert!(response.as_mut().poll(&mut cx).is_pending());
                }
                writes_of_this_thread() - before
            })
        })
        .join()
        .expect("runtime thread")
    }

    #[test]
    fn response_timeouts_do_not_wake_the_runtime_once_the_anchor_runs() {
        // Without the anchor, each one wakes the driver: what this module is for (if a tokio
        // release stops doing that, this says so and the anchor can go).
        assert!(
            writes_for_response_timeouts(false) >= 100,
            "tokio no longer wakes its driver for an earlier timer"
        );
        assert_eq!(writes_for_response_timeouts(true), 0);
    }
}
