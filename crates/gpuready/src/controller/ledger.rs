//! The node book behind one lock: [`Ledger`] keeps the controller's one
//! `gpuready_core::node_book::NodeBook` (the write ledger and its queue,
//! every profile's brake, the refused nodes, the error backoff) and is the
//! only feed of kube's `Controller` ([`Ledger::stream`]): every trigger
//! enters through [`Ledger::ask`], and what a rule of the book hands back is
//! queued inside the book, in the call that decided it. The trigger streams,
//! the node reconciler and the status task all reach the book through here;
//! each call holds the lock for one method of the book, and on leaving it
//! wakes whoever waits on the book (the stream, the status task).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::Stream;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::{Notify, watch};

use crate::controller::watch::cached::CachedNode;
use gpuready_core::brake::BrakeConfig;
use gpuready_core::clocks::Observation;
use gpuready_core::no_execute::{self, BudgetView, Grant};
use gpuready_core::node_book::{
    NodeBook, PlannedWrite, RefusalNote, RefusedNodes, RefusedWrite, Turn,
};
use gpuready_core::timeline::ReadyRecord;
use gpuready_core::write_ledger::{LOOKAHEAD, Trigger};
use gpuready_core::write_step::{CrdView, WriteStep};
use jiff::Timestamp;

pub struct Ledger {
    book: Mutex<NodeBook>,
    /// Whether taint work is pending, published as each call leaves the book:
    /// the status task waits on it rather than asking again and again.
    taint_work: watch::Sender<bool>,
    /// Wakes [`Ledger::stream`]: a node waits and kube has room for it.
    wake: Notify,
    /// What kube may hold at once, running or due: its reconcile slots
    /// (`--concurrency`) and the core's `LOOKAHEAD`.
    slots: usize,
}

/// The book, locked for one call; on release it publishes whether taint work
/// is still pending and wakes the stream when a node can go to kube (a
/// comparison or two when nothing changed).
struct Book<'a> {
    book: MutexGuard<'a, NodeBook>,
    ledger: &'a Ledger,
}

impl Deref for Book<'_> {
    type Target = NodeBook;
    fn deref(&self) -> &NodeBook {
        &self.book
    }
}

impl DerefMut for Book<'_> {
    fn deref_mut(&mut self) -> &mut NodeBook {
        &mut self.book
    }
}

impl Drop for Book<'_> {
    fn drop(&mut self) {
        let pending = self.book.taint_work_pending();
        self.ledger.taint_work.send_if_modified(|was| {
            let changed = *was != pending;
            *was = pending;
            changed
        });
        // Only when a node can go now (exactly: the stream that wakes finds
        // one, and never spins on a permit); kept as a permit when the
        // stream is not waiting yet.
        if self.book.can_hand(self.ledger.slots) {
            self.ledger.wake.notify_one();
        }
    }
}

/// A reconcile in progress; dropping it finishes it.
pub struct Running<'a> {
    ledger: &'a Ledger,
    node: String,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.ledger.book().finish(&self.node);
    }
}

/// Taint work not named yet (a profile change being mapped); dropping it
/// says every node of it is queued.
pub struct Unnamed<'a> {
    ledger: &'a Ledger,
    ticket: u64,
}

impl Drop for Unnamed<'_> {
    fn drop(&mut self) {
        self.ledger.book().unnamed_done(self.ticket);
    }
}

impl Ledger {
    /// The book of a controller with `concurrency` reconcile slots.
    pub fn new(brake: BrakeConfig, concurrency: usize) -> Self {
        Ledger {
            book: Mutex::new(NodeBook::new(brake)),
            taint_work: watch::Sender::new(false),
            wake: Notify::new(),
            slots: concurrency.max(1) + LOOKAHEAD,
        }
    }

    fn book(&self) -> Book<'_> {
        Book {
            // The book is consistent after every method (none panics midway).
            book: self.book.lock().unwrap_or_else(PoisonError::into_inner),
            ledger: self,
        }
    }

    /// A reconcile of the node was asked for: the one door of every trigger.
    /// `resource_version`: the node's own watch event's (`None` for any
    /// other trigger). False for the echo of gpuready's own write to a node
    /// waiting at the gate, which queues nothing.
    pub fn ask(&self, node: &str, resource_version: Option<&str>) -> bool {
        self.book().ask(node, resource_version) == Trigger::Queue
    }

    /// The nodes for kube's `Controller`, in the book's order, as its slots
    /// free up: its only feed (`reconcile_on`).
    pub fn stream(self: Arc<Self>) -> impl Stream<Item = ObjectRef<CachedNode>> + Send {
        futures::stream::unfold(self, |l| async move {
            loop {
                let next = l.book().next(l.slots);
                if let Some(node) = next {
                    return Some((ObjectRef::new(&node), l));
                }
                // A wake-up sent since `next` looked is kept as a permit.
                l.wake.notified().await;
            }
        })
    }

    /// Taint work whose nodes are still being found: pending at the gate
    /// until the guard drops (`NodeBook::unnamed_work`).
    pub fn unnamed_work(&self) -> Unnamed<'_> {
        let ticket = self.book().unnamed_work();
        Unnamed {
            ledger: self,
            ticket,
        }
    }

    /// The node left the cluster, or kube dropped it (not cached).
    pub fn forget(&self, node: &str) {
        self.book().forget(node);
    }

    /// The node's reconcile starts (the one start site: the controller's
    /// reconcile); it is finished when the guard drops, however it ends.
    pub fn start(&self, node: &str) -> Running<'_> {
        self.book().start(node);
        Running {
            ledger: self,
            node: node.to_owned(),
        }
    }

    /// Whether the cached copy may predate gpuready's last write.
    pub fn cache_may_be_behind(&self, node: &str, cached: Option<&str>) -> bool {
        self.book().cache_may_be_behind(node, cached)
    }

    /// The verdict's turn for its profile's brake; whether new taints are
    /// held back (`NodeBook::turn`).
    pub fn turn(&self, turn: &Turn<'_>, now: Timestamp) -> bool {
        self.book().turn(turn, now)
    }

    /// The node's open wait advanced by its verdict; the finished wait's
    /// record once it is Ready (`NodeBook::clock`).
    pub fn clock(
        &self,
        node: &str,
        seen: Option<&Observation>,
        now: Timestamp,
    ) -> Option<ReadyRecord> {
        self.book().clock(node, seen, now)
    }

    /// The node's finished wait is on the node: its record, for the metrics.
    pub fn wait_written(&self, node: &str) -> Option<ReadyRecord> {
        self.book().wait_written(node)
    }

    /// The node's escalations to `NoExecute` against its profile's budget
    /// (`NodeBook::no_execute`), decided under the lock: two reconciles
    /// never both take the last place. Returns what is held.
    pub fn no_execute(&self, node: &str, ask: Option<(&str, &no_execute::Ask)>) -> Grant {
        self.book().no_execute(node, ask)
    }

    /// The profile's `NoExecute` budget (status, metrics).
    pub fn no_execute_of(&self, profile: &str) -> Option<BudgetView> {
        self.book().no_execute_of(profile)
    }

    /// The one write decision for the node's plan, made and recorded under
    /// the lock (so no other reconcile's step slips in between).
    pub fn step(&self, plan: PlannedWrite<'_>, crd: CrdView, now: Timestamp) -> WriteStep {
        self.book().step(plan, crd, now)
    }

    /// A write to the node passed; the profile whose refusal count changes.
    pub fn written(
        &self,
        node: &str,
        resource_version: Option<String>,
        with_taint: bool,
    ) -> Option<String> {
        self.book().written(node, resource_version, with_taint)
    }

    /// The API server refused part of a write of `changes` to the node: noted
    /// for the profile's status, and backed off (`NodeBook::refused`).
    pub fn refused(&self, node: &str, note: RefusalNote<'_>, now: Timestamp) {
        self.book().refused(node, note, now);
    }

    /// Whether the API server refused the node's last write.
    pub fn is_refused(&self, node: &str) -> bool {
        self.book().is_refused(node)
    }

    /// What the API server refused of the node's last write, and why.
    pub fn refusal(&self, node: &str) -> Option<(RefusedWrite, String)> {
        self.book().refusal(node)
    }

    /// The tally's counts for a profile (the status task): the brake's
    /// denominator, and its release, which re-queues what it held. Returns
    /// whether the brake is engaged.
    pub fn counts(&self, profile: &str, matched: usize, not_ready: usize, now: Timestamp) -> bool {
        self.book().counts(profile, matched, not_ready, now)
    }

    /// Forgets the brakes of profiles that are gone (re-queueing what they held).
    pub fn retain_profiles(&self, exists: impl Fn(&str) -> bool) {
        self.book().retain_profiles(exists);
    }

    /// The node's reconcile failed: how long before it runs again.
    pub fn failed(&self, node: &str) -> Duration {
        self.book().failed(node)
    }

    /// The node's reconcile passed: its error backoff starts over.
    pub fn succeeded(&self, node: &str) {
        self.book().succeeded(node);
    }

    /// Whether new taints are held back for `profile`.
    pub fn engaged(&self, profile: &str) -> bool {
        self.book().engaged(profile)
    }

    pub fn brake_config(&self) -> BrakeConfig {
        *self.book().brake_config()
    }

    /// The profile's refused nodes among those that still exist.
    pub fn refusals_of(
        &self,
        profile: &str,
        exists: impl Fn(&str) -> bool,
    ) -> Option<RefusedNodes> {
        self.book().refusals_of(profile, exists)
    }

    /// Nodes whose writes wait at the gate now.
    pub fn deferred(&self) -> usize {
        self.book().deferred()
    }

    /// Returns once no taint work is pending (at once when none is).
    pub async fn taint_work_done(&self) {
        // The sender lives as long as the ledger: `wait_for` cannot fail here.
        let _ = self
            .taint_work
            .subscribe()
            .wait_for(|pending| !pending)
            .await;
    }
}

#[cfg(test)]
mod tests;
