//! A bounded channel that never makes a sender wait and never loses news:
//! over its capacity, messages wait in a map keyed by what they are about,
//! the latest per key kept, and each is counted as an overflow. Hand-written
//! because tokio's bounded `mpsc` would either block a reconcile or drop a
//! verdict, and no maintained crate bounds a queue by coalescing per key.
//!
//! Order per key holds: while the map holds anything every sender adds to it,
//! and the receiver takes the map only once the channel is empty, so what it
//! takes is newer than anything it has received.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::mpsc::{self, error::TryRecvError, error::TrySendError};

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::ObjectRef;

use crate::controller::status_input::{StatusInput, StatusKey};

/// A channel's gauges: messages waiting now, the most that ever waited, and
/// the messages that went to the overflow map.
#[derive(Clone, Default)]
pub struct ChannelGauges {
    pub depth: Gauge,
    pub peak: Gauge,
    pub overflows: Counter,
}

struct Shared<K, T> {
    capacity: usize,
    overflow: Mutex<BTreeMap<K, T>>,
    gauges: ChannelGauges,
}

impl<K, T> Shared<K, T> {
    fn overflow(&self) -> std::sync::MutexGuard<'_, BTreeMap<K, T>> {
        // A panic while the lock was held left a map, not a broken one.
        self.overflow.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record_depth(&self, queued: usize, overflowed: usize) {
        let depth = i64::try_from(queued + overflowed).unwrap_or(i64::MAX);
        self.gauges.depth.set(depth);
        // On the gauge's own atomic: two senders racing cannot lower it.
        self.gauges.peak.inner().fetch_max(depth, Ordering::Relaxed);
    }
}

/// The sending end; cheap to clone.
pub struct MailboxSender<K, T> {
    tx: mpsc::Sender<T>,
    shared: Arc<Shared<K, T>>,
}

impl<K, T> Clone for MailboxSender<K, T> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            shared: self.shared.clone(),
        }
    }
}

/// The receiving end.
pub struct MailboxReceiver<K, T> {
    rx: mpsc::Receiver<T>,
    shared: Arc<Shared<K, T>>,
    taken: VecDeque<T>,
}

/// A mailbox of `capacity` queued messages (at least 1) before it coalesces.
pub fn mailbox<K: Ord, T>(
    capacity: usize,
    gauges: ChannelGauges,
) -> (MailboxSender<K, T>, MailboxReceiver<K, T>) {
    let capacity = capacity.max(1);
    let (tx, rx) = mpsc::channel(capacity);
    let shared = Arc::new(Shared {
        capacity,
        overflow: Mutex::default(),
        gauges,
    });
    let receiver = MailboxReceiver {
        rx,
        shared: shared.clone(),
        taken: VecDeque::new(),
    };
    (MailboxSender { tx, shared }, receiver)
}

impl<K: Ord, T> MailboxSender<K, T> {
    /// Queues `message` about `key`; never waits. Dropped only when the
    /// receiver is gone.
    pub fn send(&self, key: K, message: T) {
        let mut overflow = self.shared.overflow();
        let message = if overflow.is_empty() {
            match self.tx.try_send(message) {
                Ok(()) => {
                    let queued = self.shared.capacity - self.tx.capacity();
                    self.shared.record_depth(queued, 0);
                    return;
                }
                Err(TrySendError::Closed(_)) => return,
                Err(TrySendError::Full(m)) => m,
            }
        } else {
            message
        };
        overflow.insert(key, message);
        self.shared.gauges.overflows.inc();
        self.shared
            .record_depth(self.shared.capacity, overflow.len());
    }
}

impl<K: Ord, T> MailboxReceiver<K, T> {
    /// The next message, waiting for one; `None` once every sender is gone
    /// and nothing is left. Cancel-safe: what it took stays in the receiver.
    pub async fn recv(&mut self) -> Option<T> {
        loop {
            if let Some(m) = self.try_recv() {
                return Some(m);
            }
            match self.rx.recv().await {
                Some(m) => return Some(self.received(m)),
                None if self.take_overflow() => continue,
                None => return None,
            }
        }
    }

    /// The next message if one is waiting.
    pub fn try_recv(&mut self) -> Option<T> {
        loop {
            if let Some(m) = self.taken.pop_front() {
                return Some(self.received(m));
            }
            match self.rx.try_recv() {
                Ok(m) => return Some(self.received(m)),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => {
                    if !self.take_overflow() {
                        return None;
                    }
                }
            }
        }
    }

    /// Notes the depth left behind `m` (taken messages still wait).
    fn received(&self, m: T) -> T {
        let queued = self.rx.len() + self.taken.len();
        self.shared
            .record_depth(queued, self.shared.overflow().len());
        m
    }

    /// Takes what waits in the overflow map; false when it held nothing.
    fn take_overflow(&mut self) -> bool {
        let taken = std::mem::take(&mut *self.shared.overflow());
        let any = !taken.is_empty();
        self.taken.extend(taken.into_values());
        any
    }
}

/// How many messages each mailbox queues before it coalesces, from the
/// deepest each got in the benchmark (docs/performance-history.md, "Bounded
/// channels"). Status: one verdict a reconcile piles up while the status task
/// makes its first count at start-up — 776 deep at 10,000 nodes, 6,320 at
/// 100,000 — so 16,384 queues a start-up of 100,000 nodes with room to
/// spare (a few MiB of verdicts at most). Requeue: the nodes the evidence
/// watches, the fabric groups and the status pass name (the node book queues
/// what it hands back itself, so it sends nothing here: 0 deep at 10,000
/// nodes, where it was 16 when the book's hand-backs came through) — 1,024
/// holds a burst of those; past either capacity the messages coalesce per
/// node and nothing is lost.
pub const STATUS_CAPACITY: usize = 16_384;
pub const REQUEUE_CAPACITY: usize = 1_024;

/// Verdicts and other news for the status task, keyed by the node or
/// profile they are about (`status_input.rs`).
pub type StatusSender = MailboxSender<StatusKey, StatusInput>;
pub type StatusReceiver = MailboxReceiver<StatusKey, StatusInput>;

impl StatusSender {
    /// Tells the status task; never waits.
    pub fn tell(&self, message: StatusInput) {
        self.send(message.key(), message);
    }
}

/// Nodes to judge again without a change of theirs (a brake released, a
/// deferred write, evidence or a fabric group), keyed by name.
pub type RequeueSender = MailboxSender<String, ObjectRef<Node>>;
pub type RequeueReceiver = MailboxReceiver<String, ObjectRef<Node>>;

impl RequeueSender {
    /// Asks for `node` to be judged again; never waits.
    pub fn requeue(&self, node: &str) {
        self.send(node.to_owned(), ObjectRef::new(node));
    }
}

#[cfg(test)]
mod tests;
