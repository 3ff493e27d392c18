//! The gating write first. When many nodes need work at once (a new pool joins,
//! a driver roll-out), what protects workloads is the taint; labels, the
//! condition and the Event can wait. While taint writes are under way, a
//! reconcile that changes a taint sends only the node patch (taint, labels,
//! annotations) and defers the condition and Event; a reconcile with no taint
//! to change sends nothing and defers all of it. Deferred nodes are reconciled
//! again once the backlog of taint work is gone — no taint written for a short
//! quiet period *and* fewer reconciles in flight than the controller's
//! concurrency (a full set of workers means the queue still holds nodes, whose
//! taints come first). A pause in a loaded burst (a slow API server, a starved
//! core) therefore no longer lets conditions in between the taints.
//!
//! A single change on a quiet cluster is not deferred: it is written at once,
//! as one reconcile. Deferred work waits at most `MAX_HOLD`, so a fleet whose
//! taint work never ends still gets its conditions.
//!
//! The watch event echoing a taint write of a node that waits here queues no
//! reconcile at all (`LastWrites::is_echo_waiting_at`, applied to the node
//! watch): judging it could only defer it again.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long without a taint write before deferred work may be released.
const QUIET: Duration = Duration::from_millis(300);

/// The longest a node's deferred writes wait while taint work goes on: past
/// it, a stale condition misleads readers more than its write delays taints.
const MAX_HOLD: Duration = Duration::from_secs(120);

pub struct Gate {
    epoch: Instant,
    /// Milliseconds since `epoch` of the last taint write; 0: none yet.
    last_taint_ms: AtomicU64,
    /// Reconciles running now, and how many may run at once.
    in_flight: AtomicUsize,
    workers: usize,
    /// Deferred nodes and when each was first deferred.
    pending: Mutex<BTreeMap<String, Instant>>,
    wake: Notify,
}

/// Counts one reconcile as in flight until dropped.
pub struct InFlight<'a>(&'a Gate);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Gate {
    /// A gate for a controller running up to `workers` reconciles at once.
    pub fn new(workers: usize) -> Self {
        Gate {
            epoch: Instant::now(),
            last_taint_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            workers: workers.max(1),
            pending: Mutex::default(),
            wake: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        // +1 so that 0 keeps meaning "never".
        u64::try_from(self.epoch.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1)
    }

    /// Marks a reconcile as running for as long as the guard lives.
    pub fn enter(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self)
    }

    /// Whether taint writes are under way (one within the quiet period): asked
    /// before this reconcile's own writes.
    pub fn busy(&self) -> bool {
        let last = self.last_taint_ms.load(Ordering::Relaxed);
        last != 0 && self.now_ms().saturating_sub(last) < duration_ms(QUIET)
    }

    /// Whether nodes still wait for their taint: every worker is busy, so the
    /// controller's queue is not empty.
    fn backlog(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) >= self.workers
    }

    /// A taint write is being sent now.
    pub fn note_taint_write(&self) {
        self.last_taint_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The node's remaining writes wait until the taint work is done.
    pub fn defer(&self, node: &str) {
        if let Ok(mut p) = self.pending.lock() {
            p.entry(node.to_owned()).or_insert_with(Instant::now);
        }
        self.wake.notify_one();
    }

    /// Whether the node's writes are deferred now (it will be handed back).
    pub fn is_pending(&self, node: &str) -> bool {
        self.pending.lock().is_ok_and(|p| p.contains_key(node))
    }

    pub fn deferred(&self) -> usize {
        self.pending.lock().map(|p| p.len()).unwrap_or(0)
    }

    /// Nodes to hand back now: all of them once the taint work is done, else
    /// those held past `MAX_HOLD`.
    fn take_ready(&self) -> Vec<String> {
        let done = !self.busy() && !self.backlog();
        let Ok(mut p) = self.pending.lock() else {
            return Vec::new();
        };
        if done {
            return std::mem::take(&mut *p).into_keys().collect();
        }
        let overdue: Vec<String> = p
            .iter()
            .filter(|(_, since)| since.elapsed() >= MAX_HOLD)
            .map(|(n, _)| n.clone())
            .collect();
        for n in &overdue {
            p.remove(n);
        }
        overdue
    }

    /// Hands deferred nodes back to the controller's queue once the taint work
    /// is done (or they waited too long).
    pub async fn drain(
        &self,
        requeue: mpsc::UnboundedSender<ObjectRef<Node>>,
        stop: CancellationToken,
    ) {
        loop {
            if self.deferred() == 0 {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = self.wake.notified() => {},
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(QUIET / 3) => {},
            }
            for n in self.take_ready() {
                let _ = requeue.send(ObjectRef::new(&n));
            }
        }
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn_drain(
        gate: &std::sync::Arc<Gate>,
    ) -> (
        mpsc::UnboundedReceiver<ObjectRef<Node>>,
        CancellationToken,
        tokio::task::JoinHandle<()>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let task = {
            let (gate, stop) = (gate.clone(), stop.clone());
            tokio::spawn(async move { gate.drain(tx, stop).await })
        };
        (rx, stop, task)
    }

    #[tokio::test]
    async fn deferred_nodes_are_released_only_after_a_quiet_period() {
        let gate = std::sync::Arc::new(Gate::new(2));
        assert!(!gate.busy(), "a quiet cluster writes at once");
        gate.note_taint_write();
        assert!(gate.busy());
        gate.defer("a");
        let (mut rx, stop, task) = spawn_drain(&gate);
        tokio::time::sleep(Duration::from_millis(100)).await;
        gate.note_taint_write();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err(), "still busy");
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(rx.try_recv().ok().map(|r| r.name), Some("a".to_owned()));
        stop.cancel();
        let _ = task.await;
    }

    #[tokio::test]
    async fn a_pause_with_every_worker_busy_releases_nothing() {
        let gate = std::sync::Arc::new(Gate::new(2));
        gate.note_taint_write();
        gate.defer("a");
        let (mut rx, stop, task) = spawn_drain(&gate);
        let first = gate.enter();
        let second = gate.enter();
        // No taint write for well over the quiet period, but the queue is full.
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(rx.try_recv().is_err(), "a full set of workers is a backlog");
        drop(first);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(rx.try_recv().ok().map(|r| r.name), Some("a".to_owned()));
        drop(second);
        stop.cancel();
        let _ = task.await;
    }
}
