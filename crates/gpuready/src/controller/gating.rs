//! The gating write first. When many nodes need work at once (a new pool joins,
//! a driver roll-out), what protects workloads is the taint; labels, the
//! condition and the Event can wait. A reconcile that changes a taint while
//! other taint writes are in progress sends only that write and defers the rest
//! of its node's writes; once no taint has been written for a short quiet
//! period, the deferred nodes are reconciled again and finish (the taint is then
//! already right, so that pass sends only what was deferred).
//!
//! A single change on a quiet cluster is not deferred: it is written at once,
//! as one reconcile.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long without a taint write before deferred work is released.
const QUIET: Duration = Duration::from_millis(300);

pub struct Gate {
    epoch: Instant,
    /// Milliseconds since `epoch` of the last taint write; 0: none yet.
    last_taint_ms: AtomicU64,
    pending: Mutex<BTreeSet<String>>,
    wake: Notify,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            epoch: Instant::now(),
            last_taint_ms: AtomicU64::new(0),
            pending: Mutex::default(),
            wake: Notify::new(),
        }
    }
}

impl Gate {
    fn now_ms(&self) -> u64 {
        // +1 so that 0 keeps meaning "never".
        u64::try_from(self.epoch.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1)
    }

    /// Whether other taint writes are under way (one within the quiet period):
    /// asked before this reconcile's own taint write.
    pub fn busy(&self) -> bool {
        let last = self.last_taint_ms.load(Ordering::Relaxed);
        last != 0 && self.now_ms().saturating_sub(last) < duration_ms(QUIET)
    }

    /// A taint write is being sent now.
    pub fn note_taint_write(&self) {
        self.last_taint_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The node's remaining writes wait for the quiet period.
    pub fn defer(&self, node: &str) {
        if let Ok(mut p) = self.pending.lock() {
            p.insert(node.to_owned());
        }
        self.wake.notify_one();
    }

    pub fn deferred(&self) -> usize {
        self.pending.lock().map(|p| p.len()).unwrap_or(0)
    }

    /// Hands deferred nodes back to the controller's queue once taint writes
    /// have paused for the quiet period.
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
            while self.busy() {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(QUIET / 3) => {},
                }
            }
            let nodes = self
                .pending
                .lock()
                .map(|mut p| std::mem::take(&mut *p))
                .unwrap_or_default();
            for n in nodes {
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

    #[tokio::test]
    async fn deferred_nodes_are_released_only_after_a_quiet_period() {
        let gate = std::sync::Arc::new(Gate::default());
        assert!(!gate.busy(), "a quiet cluster writes at once");
        gate.note_taint_write();
        assert!(gate.busy());
        gate.defer("a");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let task = {
            let (gate, stop) = (gate.clone(), stop.clone());
            tokio::spawn(async move { gate.drain(tx, stop).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        gate.note_taint_write();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err(), "still busy");
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(rx.try_recv().ok().map(|r| r.name), Some("a".to_owned()));
        stop.cancel();
        let _ = task.await;
    }
}
