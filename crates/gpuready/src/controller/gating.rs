//! The gating write first, kept by one type: [`Gate`] owns the write ledger
//! (`gpuready_core::write_step::WriteLedger`: the queue of taint work, the
//! deferred nodes, the resourceVersion of gpuready's last write to each node)
//! behind one lock, and every change to it goes through its methods — from the
//! trigger streams (a node queued, its echo skipped, a node deleted) and from
//! the node reconciler (start, step, write, finish). The rule itself, every
//! pending taint write before any label, condition or Event write, is the pure
//! `write_step::step`; nothing here reads a clock.
//!
//! Deferred nodes are handed back through the controller's re-queue channel
//! at the moment the ledger says the taint work before them is done (in the
//! call that finished it): there is no drain task and no quiet period.

use std::sync::{Mutex, MutexGuard, PoisonError};

use gpuready_core::write_step::{CrdView, Trigger, WriteLedger, WriteStep, step};
use gpuready_core::{GovernanceKind, NodeChanges};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

pub struct Gate {
    ledger: Mutex<WriteLedger>,
    /// Where handed-back nodes go: the controller's queue.
    requeue: mpsc::UnboundedSender<ObjectRef<Node>>,
}

/// A reconcile in progress at the gate; dropping it finishes it.
pub struct Running<'a> {
    gate: &'a Gate,
    node: String,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let back = self.gate.ledger().finish(&self.node);
        self.gate.hand_back(back);
    }
}

impl Gate {
    pub fn new(requeue: mpsc::UnboundedSender<ObjectRef<Node>>) -> Self {
        Gate {
            ledger: Mutex::default(),
            requeue,
        }
    }

    fn ledger(&self) -> MutexGuard<'_, WriteLedger> {
        // The ledger is consistent after every method (none panics midway).
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn hand_back(&self, nodes: Vec<String>) {
        for n in nodes {
            let _ = self.requeue.send(ObjectRef::new(&n));
        }
    }

    /// A reconcile of the node was asked for (a profile change, evidence, a
    /// re-queue).
    pub fn queue(&self, node: &str) {
        self.ledger().queue(node);
    }

    /// The node's own watch event: false for the echo of gpuready's own write
    /// to a node waiting here (it queues nothing), true otherwise (queued).
    pub fn on_node_event(&self, node: &str, resource_version: Option<&str>) -> bool {
        self.ledger().on_node_event(node, resource_version) == Trigger::Queue
    }

    /// The node's reconcile starts; it is finished when the guard drops.
    pub fn start(&self, node: &str) -> Running<'_> {
        self.ledger().start(node);
        Running {
            gate: self,
            node: node.to_owned(),
        }
    }

    /// The one write decision for the node's plan, made and recorded under
    /// the lock (so no other reconcile's step slips in between).
    pub fn step(
        &self,
        node: &str,
        changes: &NodeChanges,
        governance: GovernanceKind,
        crd: CrdView,
    ) -> WriteStep {
        let (decision, back) = {
            let mut l = self.ledger();
            let decision = step(changes, governance, crd, l.view(node));
            let back = l.decided(node, &decision);
            (decision, back)
        };
        self.hand_back(back);
        decision
    }

    /// The node left the cache.
    pub fn forget(&self, node: &str) {
        let back = self.ledger().forget(node);
        self.hand_back(back);
    }

    /// Remembers the resourceVersion gpuready's own write left the node at.
    pub fn note_write(&self, node: &str, resource_version: String) {
        self.ledger().note_write(node, resource_version);
    }

    /// Whether the cached copy may predate gpuready's last write (see
    /// `WriteLedger::cache_may_be_behind`).
    pub fn cache_may_be_behind(&self, node: &str, cached: Option<&str>) -> bool {
        self.ledger().cache_may_be_behind(node, cached)
    }

    /// Nodes whose writes wait here now.
    pub fn deferred(&self) -> usize {
        self.ledger().deferred()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuready_core::plan::ConditionChange;

    #[test]
    fn a_deferred_node_is_handed_back_when_the_last_taint_work_finishes() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let gate = Gate::new(tx);
        gate.queue("a");
        gate.queue("b");
        let cond_only = NodeChanges {
            conditions: Some(ConditionChange {
                set: vec![],
                remove: vec!["GpuReadyDriver".into()],
            }),
            ..NodeChanges::default()
        };
        {
            let _a = gate.start("a");
            let s = gate.step(
                "a",
                &cond_only,
                GovernanceKind::Governed,
                CrdView::Confirmed,
            );
            assert_eq!(s, WriteStep::Defer, "b is still queued");
        }
        assert_eq!(gate.deferred(), 1);
        assert!(rx.try_recv().is_err());
        {
            let _b = gate.start("b");
        }
        assert_eq!(rx.try_recv().ok().map(|r| r.name), Some("a".to_owned()));
        assert_eq!(gate.deferred(), 0);
    }
}
