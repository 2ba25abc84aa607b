//! Client connections spread evenly over the proxy threads.
//!
//! Every proxy thread accepts on the same listening socket
//! ([`crate::server::spawn_proxy_threads`]). A new connection wakes every thread, and the one
//! that is awake first accepts it and, since tokio keeps a listener readable until an accept
//! finds nothing, every other connection waiting in the backlog too: a client that opens its
//! connections at once (a load balancer's pool, wrk) found all of them on one thread and the
//! other threads idle, at 8 connections 0.7 to all of the reads on one of 2 threads
//! (`cargo bench -p keda-activator --bench proxy -- --syscalls`, docs/benchmarks.md). nginx
//! accepts one connection per wake-up (`multi_accept off`), which spreads them.
//!
//! Here the thread that accepts a connection serves it only if no thread has fewer open
//! connections; otherwise it hands the socket to the thread with the fewest, which registers it
//! with its own runtime. A connection stays on its thread for its life, so this costs once
//! per connection (two `epoll_ctl` and a wake-up of the other thread), never per request.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The open connections of each proxy thread, and the way to hand one a connection.
#[derive(Debug)]
pub struct Spread {
    open: Box<[AtomicUsize]>,
    inboxes: Box<[UnboundedSender<Accepted>]>,
}

/// A connection accepted on one thread, for another to serve, with what was reserved for it.
#[derive(Debug)]
pub struct Accepted {
    /// The socket, out of the accepting thread's runtime.
    pub stream: std::net::TcpStream,
    /// The client's address.
    pub remote: SocketAddr,
    /// Its place under the connection limit.
    pub permit: OwnedSemaphorePermit,
    /// Its share of the memory budget.
    pub memory: OwnedSemaphorePermit,
    /// Its count on the thread that serves it.
    pub seat: Seat,
}

/// A connection's count among its thread's open connections, given back when dropped.
#[derive(Debug)]
pub struct Seat {
    spread: Arc<Spread>,
    thread: usize,
}

impl Seat {
    /// The thread that serves the connection.
    pub fn thread(&self) -> usize {
        self.thread
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.spread.open[self.thread].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Spread {
    /// For `threads` threads (at least one); each thread's receiver of handed connections, by
    /// index.
    pub fn new(threads: usize) -> (Arc<Self>, Vec<UnboundedReceiver<Accepted>>) {
        let (inboxes, receivers): (Vec<_>, Vec<_>) =
            (0..threads.max(1)).map(|_| unbounded_channel()).unzip();
        let spread = Self {
            open: inboxes.iter().map(|_| AtomicUsize::new(0)).collect(),
            inboxes: inboxes.into_boxed_slice(),
        };
        (Arc::new(spread), receivers)
    }

    /// Counts a connection accepted on thread `here` on the thread that should serve it: the
    /// one with the fewest open connections, `here` when it is one of those.
    pub fn seat(self: &Arc<Self>, here: usize) -> Seat {
        let count = |i: usize| self.open[i].load(Ordering::Relaxed);
        let here = here.min(self.open.len() - 1);
        let mut thread = here;
        for i in 0..self.open.len() {
            if count(i) < count(thread) {
                thread = i;
            }
        }
        self.open[thread].fetch_add(1, Ordering::Relaxed);
        Seat {
            spread: Arc::clone(self),
            thread,
        }
    }

    /// Hands `accepted` to the thread of its seat; back if that thread has stopped.
    ///
    /// # Errors
    /// The thread no longer takes connections (it is shutting down).
    pub fn hand(&self, accepted: Accepted) -> Result<(), Box<Accepted>> {
        let thread = accepted.seat.thread;
        self.inboxes[thread]
            .send(accepted)
            .map_err(|failed| Box::new(failed.0))
    }

    /// Open connections of each thread now.
    pub fn open(&self) -> Vec<usize> {
        self.open
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_accepted_on_one_thread_are_seated_evenly() {
        let (spread, _inboxes) = Spread::new(2);
        // Eight connections accepted at once by thread 0, as when a client opens its pool.
        let seats: Vec<Seat> = (0..8).map(|_| spread.seat(0)).collect();
        assert_eq!(spread.open(), vec![4, 4]);
        // The accepting thread keeps a connection when it is among the least loaded.
        assert_eq!(seats[0].thread(), 0);
        assert_eq!(seats[1].thread(), 1);
        drop(seats);
        assert_eq!(spread.open(), vec![0, 0]);
    }

    #[test]
    fn a_closed_connection_frees_its_place_for_the_next_one() {
        let (spread, _inboxes) = Spread::new(3);
        let mut seats: Vec<Seat> = (0..6).map(|_| spread.seat(2)).collect();
        assert_eq!(spread.open(), vec![2, 2, 2]);
        let on_1 = seats
            .iter()
            .position(|s| s.thread() == 1)
            .expect("a seat on 1");
        seats.remove(on_1);
        assert_eq!(spread.seat(0).thread(), 1);
    }

    #[test]
    fn a_connection_handed_to_a_stopped_thread_comes_back() {
        let (spread, mut inboxes) = Spread::new(2);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let semaphore = Arc::new(tokio::sync::Semaphore::new(4));
        let accepted = |seat: Seat| {
            let stream = std::net::TcpStream::connect(addr).expect("connect");
            Accepted {
                remote: stream.local_addr().expect("address"),
                stream,
                permit: Arc::clone(&semaphore).try_acquire_owned().expect("permit"),
                memory: Arc::clone(&semaphore).try_acquire_owned().expect("permit"),
                seat,
            }
        };
        let _on_0 = spread.seat(0);
        let to_1 = spread.seat(0);
        assert_eq!(to_1.thread(), 1);
        spread.hand(accepted(to_1)).expect("thread 1 takes it");
        let received = inboxes[1].try_recv().expect("handed to thread 1");
        assert_eq!(received.seat.thread(), 1);
        drop(inboxes.remove(1));
        let back = spread.hand(received).expect_err("thread 1 has stopped");
        assert_eq!(back.seat.thread(), 1);
    }
}
