//! The write ledger: the one queue of nodes to judge, pure. It orders every
//! trigger (taint work first, then the oldest), hands kube's `Controller` a
//! node only while a reconcile slot is free for it, keeps what is running,
//! the deferred nodes and their hand-back, and gpuready's last write to each
//! node. One owner for "which nodes are queued or running": the controller
//! keeps it inside the `node_book::NodeBook`, behind one lock, and feeds kube
//! from [`WriteLedger::next`] alone.
//!
//! Why an order of our own: once every reconcile slot is busy, kube-runtime's
//! scheduler moves the objects it holds into a `HashSet` and takes them in
//! hash order, so under a backlog the first node of a join storm could be
//! judged last (measured: a join storm's p99 at about twice a first-come
//! floor's). Kube is handed at most its slots plus a small lookahead, so it
//! never holds a backlog to take in hash order. See `write_step` for the
//! gate's rules (taint work before labels, conditions and Events).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::write_step::{GateView, WriteStep};

/// What to do with a node's own watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Queue a reconcile.
    Queue,
    /// The echo of gpuready's own write to a node that waits at the gate:
    /// judging it could only defer it again, so nothing is queued.
    SkipEcho,
}

/// A running reconcile.
#[derive(Debug)]
struct Running {
    ticket: u64,
    /// Still counted as taint work (not judged yet, or judged to write one).
    pending: bool,
    /// Handed back by the gate: its deferred writes go now.
    released: bool,
}

/// How many reconciles queued after a deferred node may hold it back (while
/// everything queued before it is done): above a 100,000-node fleet's start-up
/// and any join storm, so those write every taint first, yet finite, so a
/// fleet whose taint work never ends still gets its conditions.
pub const HOLD_TICKETS: u64 = 1 << 17;

/// Nodes handed to kube beyond its reconcile slots (`--concurrency`): when a
/// slot frees, the next node is already due inside kube and starts at once,
/// instead of a millisecond or two later, when kube's scheduler timer has
/// fired for a node handed just then (with 8 slots and writes of 20–30 ms,
/// that gap idled each slot about one write in twenty). Two, so kube's hash
/// order among the nodes it holds can move a node back by a slot or two, not
/// by a storm.
pub const LOOKAHEAD: usize = 2;

/// Where a queued node waits for kube: taint work (`false`) before the rest,
/// then by ticket.
type Place = (bool, u64);

/// The write ledger (see the module comment). Every node in a reconcile's
/// queue or run gets a ticket, in order; the set of pending tickets is the
/// taint work still ahead.
#[derive(Debug, Default)]
pub struct WriteLedger {
    next_ticket: u64,
    /// Nodes queued and not started, with their ticket (handed to kube or not).
    queued: HashMap<String, u64>,
    /// The queued nodes not handed to kube yet, in the order kube gets them.
    waiting: BTreeMap<Place, String>,
    /// Handed to kube and not started yet.
    handed: HashSet<String>,
    /// Reconciles in progress (handed from here, or started by kube itself:
    /// a timed requeue takes a slot too).
    running: HashMap<String, Running>,
    /// Tickets of pending taint work (queued, or running and pending).
    pending: BTreeSet<u64>,
    /// Deferred nodes and their barrier, both ways.
    deferred: HashMap<String, u64>,
    by_barrier: BTreeSet<(u64, String)>,
    /// Handed back and not started yet.
    released: HashSet<String>,
    /// Node → resourceVersion gpuready's last write to it returned.
    last_writes: HashMap<String, String>,
}

impl WriteLedger {
    fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// Where the queued node with `ticket` waits: taint work goes first.
    fn place(&self, ticket: u64) -> Place {
        (!self.pending.contains(&ticket), ticket)
    }

    /// A reconcile of `node` was asked for (any trigger but its own echo).
    /// A node queued twice keeps its first place; one handed to kube and not
    /// started is not queued again (its reconcile reads the cache when it
    /// starts, so it sees this change). A handed-back node's reconcile writes
    /// what waited: it is not taint work for the others.
    pub fn queue(&mut self, node: &str) {
        if !self.queued.contains_key(node) {
            let t = self.ticket();
            self.queued.insert(node.to_owned(), t);
            if !self.released.contains(node) {
                self.pending.insert(t);
            }
            self.waiting.insert(self.place(t), node.to_owned());
        }
    }

    /// The node's own watch event at `resource_version`: its echo is skipped
    /// while the node waits at the gate (and forgotten: the cache caught up);
    /// anything else queues it.
    pub fn ask(&mut self, node: &str, resource_version: Option<&str>) -> Trigger {
        let echo = self.deferred.contains_key(node)
            && resource_version.is_some()
            && self.last_writes.get(node).map(String::as_str) == resource_version;
        if echo {
            self.last_writes.remove(node);
            return Trigger::SkipEcho;
        }
        self.queue(node);
        Trigger::Queue
    }

    /// The next node for kube, if one waits that is not running and kube
    /// holds fewer than `slots` (its reconcile slots and the [`LOOKAHEAD`]),
    /// running or due: taint work first, then the oldest; never a running
    /// node (kube would hold it until its run ends).
    pub fn next(&mut self, slots: usize) -> Option<String> {
        let place = self.next_place(slots)?;
        let node = self.waiting.remove(&place)?;
        self.handed.insert(node.clone());
        Some(node)
    }

    /// Whether [`WriteLedger::next`] would hand a node now: exactly, so that
    /// whoever wakes on it finds one (a waiting node that is running does
    /// not count; skipping those costs at most one step per running node).
    pub fn can_hand(&self, slots: usize) -> bool {
        self.next_place(slots).is_some()
    }

    fn next_place(&self, slots: usize) -> Option<Place> {
        if self.handed.len() + self.running.len() >= slots.max(1) {
            return None;
        }
        self.waiting
            .iter()
            .find(|(_, n)| !self.running.contains_key(*n))
            .map(|(p, _)| *p)
    }

    /// Taint work whose nodes are not named yet: a profile change still being
    /// mapped to the nodes it may affect. Its nodes are queued while it runs
    /// (the first can be judged before the last is found), and until
    /// [`WriteLedger::unnamed_done`] with the returned ticket it counts as
    /// pending, so no label, condition or Event goes before a taint it may
    /// still bring.
    pub fn unnamed_work(&mut self) -> u64 {
        let t = self.ticket();
        self.pending.insert(t);
        t
    }

    /// The work of [`WriteLedger::unnamed_work`]'s `ticket` is named: every
    /// node it may affect is queued. Returns the nodes handed back now.
    pub fn unnamed_done(&mut self, ticket: u64) -> Vec<String> {
        self.pending.remove(&ticket);
        self.release_ready()
    }

    /// A reconcile of `node` starts (handed from here or started by kube
    /// itself): it leaves the queue and counts as taint work until
    /// [`WriteLedger::decided`] says otherwise.
    pub fn start(&mut self, node: &str) {
        let released = self.released.remove(node);
        self.handed.remove(node);
        let ticket = match self.queued.remove(node) {
            Some(t) => {
                let place = self.place(t);
                self.waiting.remove(&place);
                t
            }
            None => {
                let t = self.ticket();
                if !released {
                    self.pending.insert(t);
                }
                t
            }
        };
        let pending = self.pending.contains(&ticket);
        if let Some(old) = self.running.insert(
            node.to_owned(),
            Running {
                ticket,
                pending,
                released,
            },
        ) && old.pending
        {
            self.pending.remove(&old.ticket);
        }
    }

    /// The gate as the running reconcile of `node` sees it.
    pub fn view(&self, node: &str) -> GateView {
        let own = self
            .running
            .get(node)
            .filter(|r| r.pending)
            .map(|r| r.ticket);
        let queued_again = self.queued.get(node).copied();
        let others = self
            .pending
            .iter()
            .filter(|t| Some(**t) != own && Some(**t) != queued_again)
            .take(1)
            .count();
        GateView {
            taint_work_ahead: others > 0,
            released: self.running.get(node).is_some_and(|r| r.released),
        }
    }

    /// The reconcile of `node` has decided its step: unless it writes a taint
    /// it no longer holds anyone back; what the step defers waits from now.
    /// Returns the nodes handed back now.
    pub fn decided(&mut self, node: &str, step: &WriteStep) -> Vec<String> {
        if !step.writes_taint()
            && let Some(r) = self.running.get_mut(node)
            && r.pending
        {
            r.pending = false;
            self.pending.remove(&r.ticket);
        }
        // Deferred now, before the write of what goes now: the echo of that
        // write may come back before the reconcile does.
        if matches!(
            step,
            WriteStep::Defer
                | WriteStep::Write {
                    rest_deferred: true,
                    ..
                }
        ) {
            self.defer(node);
        }
        self.release_ready()
    }

    /// The node's remaining writes wait at the gate. A node deferred again
    /// keeps its first barrier.
    pub fn defer(&mut self, node: &str) {
        if !self.deferred.contains_key(node) {
            let barrier = self.next_ticket + 1;
            self.deferred.insert(node.to_owned(), barrier);
            self.by_barrier.insert((barrier, node.to_owned()));
        }
    }

    /// The reconcile of `node` is over (written, failed or returned early).
    /// Returns the nodes handed back now.
    pub fn finish(&mut self, node: &str) -> Vec<String> {
        if let Some(r) = self.running.remove(node)
            && r.pending
        {
            self.pending.remove(&r.ticket);
        }
        self.release_ready()
    }

    /// The node left the cluster (or the cache), or kube dropped its request:
    /// it is forgotten, except for a reconcile of it still running, which
    /// [`WriteLedger::finish`] ends. Returns the nodes handed back now.
    pub fn forget(&mut self, node: &str) -> Vec<String> {
        if let Some(t) = self.queued.remove(node) {
            let place = self.place(t);
            self.waiting.remove(&place);
            self.pending.remove(&t);
        }
        if let Some(b) = self.deferred.remove(node) {
            self.by_barrier.remove(&(b, node.to_owned()));
        }
        self.handed.remove(node);
        self.released.remove(node);
        self.last_writes.remove(node);
        self.release_ready()
    }

    /// Hands deferred nodes back, oldest first, by queueing them again as
    /// work that is not taint work (so any taint work queued meanwhile goes
    /// before them): all of them once no taint work is pending, and one whose
    /// barrier no pending work is before once [`HOLD_TICKETS`] reconciles
    /// were queued after it. Kube's slots are the only throttle. Returns the
    /// nodes handed back.
    fn release_ready(&mut self) -> Vec<String> {
        let first_pending = self.pending.first().copied();
        let mut out = Vec::new();
        while let Some((barrier, _)) = self.by_barrier.first() {
            let free = first_pending.is_none_or(|p| {
                *barrier <= p && self.next_ticket.saturating_sub(*barrier) >= HOLD_TICKETS
            });
            if !free {
                break;
            }
            let Some((_, node)) = self.by_barrier.pop_first() else {
                break;
            };
            self.deferred.remove(&node);
            self.hand_back(&node);
            out.push(node);
        }
        out
    }

    /// The deferred node goes to the back of the queue, as no one's taint
    /// work. Queued already (a watch event while it waited): that place is
    /// now the handed-back reconcile's, moved behind the taint work.
    fn hand_back(&mut self, node: &str) {
        self.released.insert(node.to_owned());
        match self.queued.get(node).copied() {
            Some(t) => {
                let was = self.place(t);
                self.pending.remove(&t);
                if let Some(n) = self.waiting.remove(&was) {
                    self.waiting.insert(self.place(t), n);
                }
            }
            None => self.queue(node),
        }
    }

    /// Nodes whose writes wait at the gate now.
    pub fn deferred(&self) -> usize {
        self.deferred.len()
    }

    /// Whether any taint work is pending: a node queued or judging that may
    /// bring a taint change, or a profile change still being mapped. What is
    /// not a node's own write (a profile's status) waits while it is.
    pub fn taint_work_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Remembers the resourceVersion gpuready's own write left the node at.
    pub fn note_write(&mut self, node: &str, resource_version: String) {
        self.last_writes.insert(node.to_owned(), resource_version);
    }

    /// Whether the cached copy of the node (at `cached`) may predate
    /// gpuready's last write to it. Answers once per write: the caller reads
    /// the node from the API when true.
    pub fn cache_may_be_behind(&mut self, node: &str, cached: Option<&str>) -> bool {
        self.last_writes
            .remove(node)
            .is_some_and(|rv| Some(rv.as_str()) != cached)
    }

    /// How many nodes have a last write remembered (bounded by the fleet).
    pub fn last_writes(&self) -> usize {
        self.last_writes.len()
    }
}

#[cfg(test)]
mod tests;
