//! The node write path's one decision, pure: from a node's plan, what is known
//! of the GpuNodeProfile CRD, and where the node stands in the write ledger,
//! whether to write now, defer, hold (by the safety brake or the CRD guard) or
//! skip a watch event as the echo of gpuready's own write. The controller asks
//! [`step`] once per plan (through `node_book::NodeBook::step`) and runs one
//! `match` of I/O (`crates/gpuready/src/controller/write/node.rs`); the ledger the
//! answer depends on ([`WriteLedger`]) is plain data here, part of the
//! `NodeBook` the controller keeps behind one lock (`controller/ledger.rs`).
//!
//! # Priority, not timing
//!
//! Every pending taint write goes before any label, condition or Event write,
//! across all nodes. "Pending" is what the ledger sees: nodes queued for a
//! reconcile and not yet judged, and reconciles judged to write a taint (or a
//! DeviceTaintRule) and not done yet. A node whose changes include a taint
//! sends the taint alone at once — with the annotations that record it, its
//! DeviceTaintRules, `gpuready.io/ready` unless it turns `true` and
//! `gpuready.io/profile` unless the taint only goes: the smallest write that
//! gates it ([`NodeChanges::gating_part`]) — and defers its other labels and
//! annotations, its conditions and its Event; a node with no taint to change
//! defers everything — but only while such work is ahead of it. On a quiet
//! cluster nothing waits: the node patch carries taint, labels and
//! annotations together, as one write.
//!
//! Deferred nodes are handed back only when no taint work is pending at all,
//! and a few at a time (the release window: twice the controller's concurrency):
//! each handed-back node is re-queued behind whatever came meanwhile, so a
//! node that joins while the deferred writes drain waits behind at most a
//! window of them, never behind all. A handed-back node's own reconcile is
//! not taint work for the others. Two bounds keep deferred writes from
//! starving when taint work never stops: a deferred node is also handed back
//! once everything queued before it is done and [`HOLD_TICKETS`] reconciles
//! have been queued after it.
//! No clock is read: the same events in the same order give the same writes.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::{GovernanceKind, NodeChanges};

/// What the CRD guard knows of the GpuNodeProfile CRD now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrdView {
    /// Read and found healthy after the last profile deletion seen.
    Confirmed,
    /// Found missing or being deleted, recently enough to trust.
    Missing,
    /// Not known since the last profile deletion: read it before a release.
    Unconfirmed,
}

/// Where the node stands at the gate (from [`WriteLedger::view`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateView {
    /// Taint work is pending for other nodes (queued, or judged to write one).
    pub taint_work_ahead: bool,
    /// The node was deferred and handed back: what waited goes now.
    pub released: bool,
}

/// What the reconciler does with a plan.
#[derive(Clone, Debug, PartialEq)]
pub enum WriteStep {
    /// Nothing differs from the node: no request.
    Nothing,
    /// Send these changes now. `rest_deferred`: the node's labels, other
    /// annotations and conditions (and the Event they would bring) were
    /// taken out and wait at the gate.
    Write {
        changes: NodeChanges,
        rest_deferred: bool,
    },
    /// Send nothing yet: taint writes are ahead of this node's label,
    /// condition and Event writes. The node waits at the gate.
    Defer,
    /// The safety brake holds this node's new taint back; the rest (labels,
    /// the condition saying why) is sent now.
    HoldByBrake { changes: NodeChanges },
    /// A release of a node no profile governs, while the CRD is missing (its
    /// deletion deletes every profile) or not confirmed: nothing is sent, the
    /// node is looked at again later. The controller confirms the CRD before
    /// it asks whenever [`needs_crd`] says so, so `Unconfirmed` reaching here
    /// means the read failed: holding is the safe side.
    HoldByCrdGuard,
    /// The API server refused these very changes a moment ago (admission,
    /// RBAC): nothing is sent until the node's backoff has passed — whatever
    /// triggers the reconcile meanwhile (another controller's label writes
    /// do, every few seconds) — unless the changes are new. The refusal
    /// stays reported.
    HoldByRefusal { retry_after_seconds: u64 },
}

impl WriteStep {
    /// This step, for the rest of a plan whose taint waits out a refusal:
    /// nothing to send becomes a hold until the backoff has passed.
    pub fn or_refusal(self, retry_after_seconds: u64) -> WriteStep {
        match self {
            WriteStep::Nothing => WriteStep::HoldByRefusal {
                retry_after_seconds,
            },
            other => other,
        }
    }

    /// Whether this step sends a gating write (a taint or a DeviceTaintRule):
    /// the ledger counts it as taint work until the reconcile is done.
    pub fn writes_taint(&self) -> bool {
        match self {
            WriteStep::Write { changes, .. } | WriteStep::HoldByBrake { changes } => {
                gating(changes)
            }
            _ => false,
        }
    }
}

/// Changes that keep workloads off broken hardware: the node's taint, and the
/// per-device DeviceTaintRules.
fn gating(c: &NodeChanges) -> bool {
    c.taint.is_some() || !c.device_taint_rules.is_empty()
}

/// The one decision of the node write path.
pub fn step(
    changes: &NodeChanges,
    governance: GovernanceKind,
    crd: CrdView,
    gate: GateView,
) -> WriteStep {
    if changes.is_empty() {
        return WriteStep::Nothing;
    }
    if needs_crd(changes, governance) && crd != CrdView::Confirmed {
        return WriteStep::HoldByCrdGuard;
    }
    if gate.released || !gate.taint_work_ahead {
        return if changes.taint_held_by_brake {
            WriteStep::HoldByBrake {
                changes: changes.clone(),
            }
        } else {
            WriteStep::Write {
                changes: changes.clone(),
                rest_deferred: false,
            }
        };
    }
    if !gating(changes) {
        return WriteStep::Defer;
    }
    let (now, rest) = changes.gating_part();
    WriteStep::Write {
        changes: now,
        rest_deferred: !rest.is_empty(),
    }
}

/// Whether the plan releases a node because no profile governs it: such a
/// write waits for the GpuNodeProfile CRD to be confirmed healthy (its
/// deletion deletes every profile, which must not release every node).
pub fn needs_crd(changes: &NodeChanges, governance: GovernanceKind) -> bool {
    !changes.is_empty() && governance == GovernanceKind::Ungoverned
}

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

/// Deferred nodes handed back at a time when none is configured: twice
/// gpuready's default `--concurrency` of 8.
pub const DEFAULT_RELEASE_WINDOW: usize = 16;

/// The write ledger: the gate's queue of taint work and deferred nodes, and
/// the resourceVersion of gpuready's last write to each node (for echoes and a
/// cache that is behind). Plain data; the controller keeps one behind a lock.
///
/// Every node in a reconcile's queue or run gets a ticket, in order; the set
/// of pending tickets is the taint work still ahead.
#[derive(Debug)]
pub struct WriteLedger {
    next_ticket: u64,
    /// Nodes queued and not started, with their ticket.
    queued: HashMap<String, u64>,
    /// Reconciles in progress.
    running: HashMap<String, Running>,
    /// Tickets of pending taint work (queued, or running and pending).
    pending: BTreeSet<u64>,
    /// Deferred nodes and their barrier, both ways.
    deferred: HashMap<String, u64>,
    by_barrier: BTreeSet<(u64, String)>,
    /// Handed back and not started yet.
    released: HashSet<String>,
    /// Handed back at most this many at a time (not started, or running).
    release_window: usize,
    /// Node → resourceVersion gpuready's last write to it returned.
    last_writes: HashMap<String, String>,
}

impl Default for WriteLedger {
    fn default() -> Self {
        WriteLedger::with_release_window(DEFAULT_RELEASE_WINDOW)
    }
}

impl WriteLedger {
    /// An empty ledger that hands deferred nodes back `window` at a time (at
    /// least one).
    pub fn with_release_window(window: usize) -> Self {
        WriteLedger {
            next_ticket: 0,
            queued: HashMap::new(),
            running: HashMap::new(),
            pending: BTreeSet::new(),
            deferred: HashMap::new(),
            by_barrier: BTreeSet::new(),
            released: HashSet::new(),
            release_window: window.max(1),
            last_writes: HashMap::new(),
        }
    }

    fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// A reconcile of `node` was asked for (any trigger but its own echo).
    /// A node queued twice keeps its first place. A handed-back node's
    /// reconcile writes what waited: it is not taint work for the others.
    pub fn queue(&mut self, node: &str) {
        if !self.queued.contains_key(node) {
            let t = self.ticket();
            self.queued.insert(node.to_owned(), t);
            if !self.released.contains(node) {
                self.pending.insert(t);
            }
        }
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
    /// node it may affect is queued. Returns the nodes to hand back now.
    #[must_use]
    pub fn unnamed_done(&mut self, ticket: u64) -> Vec<String> {
        self.pending.remove(&ticket);
        self.release_ready()
    }

    /// The node's own watch event at `resource_version`: its echo is skipped
    /// while the node waits at the gate (and forgotten: the cache caught up);
    /// anything else queues it.
    pub fn on_node_event(&mut self, node: &str, resource_version: Option<&str>) -> Trigger {
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

    /// A reconcile of `node` starts: it leaves the queue and counts as taint
    /// work until [`WriteLedger::decided`] says otherwise.
    pub fn start(&mut self, node: &str) {
        let released = self.released.remove(node);
        let ticket = match self.queued.remove(node) {
            Some(t) => t,
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
    /// Returns the nodes to hand back now.
    #[must_use]
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
    /// Returns the nodes to hand back now.
    #[must_use]
    pub fn finish(&mut self, node: &str) -> Vec<String> {
        if let Some(r) = self.running.remove(node)
            && r.pending
        {
            self.pending.remove(&r.ticket);
        }
        self.release_ready()
    }

    /// The node left the cluster (or the cache): it is forgotten, except for a
    /// reconcile of it still running, which [`WriteLedger::finish`] ends.
    #[must_use]
    pub fn forget(&mut self, node: &str) -> Vec<String> {
        if let Some(t) = self.queued.remove(node) {
            self.pending.remove(&t);
        }
        if let Some(b) = self.deferred.remove(node) {
            self.by_barrier.remove(&(b, node.to_owned()));
        }
        self.released.remove(node);
        self.last_writes.remove(node);
        self.release_ready()
    }

    /// Deferred nodes to hand back now (the caller re-queues them), oldest
    /// first, while the release window has room: all of them once no taint
    /// work is pending, and one whose barrier no pending work is before once
    /// [`HOLD_TICKETS`] reconciles were queued after it.
    fn release_ready(&mut self) -> Vec<String> {
        let first_pending = self.pending.first().copied();
        let in_flight = self.released.len() + self.running.values().filter(|r| r.released).count();
        let room = self.release_window.saturating_sub(in_flight);
        let mut out = Vec::new();
        while out.len() < room
            && let Some((barrier, _)) = self.by_barrier.first()
        {
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
            // Queued already (a watch event while it waited): that place is
            // now the handed-back reconcile's, no taint work for the others.
            if let Some(t) = self.queued.get(&node) {
                self.pending.remove(t);
            }
            self.released.insert(node.clone());
            out.push(node);
        }
        out
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

/// Tickets by node, for tests that want to look inside.
#[cfg(test)]
fn pending_nodes(l: &WriteLedger) -> std::collections::BTreeMap<u64, String> {
    l.queued
        .iter()
        .filter(|(_, t)| l.pending.contains(t))
        .map(|(n, t)| (*t, n.clone()))
        .chain(
            l.running
                .iter()
                .filter(|(_, r)| r.pending)
                .map(|(n, r)| (r.ticket, n.clone())),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ConditionChange, TaintChange, TaintChangeKind};
    use gpuready_api::keys;
    use std::collections::BTreeMap;

    fn taint() -> Option<TaintChange> {
        Some(TaintChange {
            taints: vec![],
            kind: TaintChangeKind::Add,
            ours: None,
        })
    }

    fn conditions() -> Option<ConditionChange> {
        Some(ConditionChange {
            set: vec![],
            remove: vec!["GpuReadyDriver".into()],
        })
    }

    fn labels() -> Option<BTreeMap<String, Option<String>>> {
        Some(BTreeMap::from([
            (keys::LABEL_READY.to_owned(), Some("false".to_owned())),
            (keys::LABEL_PROFILE.to_owned(), Some("p".to_owned())),
        ]))
    }

    fn full() -> NodeChanges {
        NodeChanges {
            taint: taint(),
            labels: labels(),
            annotations: Some(BTreeMap::from([
                (keys::ANNOTATION_TAINT.to_owned(), None),
                (keys::ANNOTATION_LABELS.to_owned(), None),
            ])),
            conditions: conditions(),
            ..NodeChanges::default()
        }
    }

    const QUIET: GateView = GateView {
        taint_work_ahead: false,
        released: false,
    };
    const BUSY: GateView = GateView {
        taint_work_ahead: true,
        released: false,
    };
    const GOV: GovernanceKind = GovernanceKind::Governed;

    #[test]
    fn nothing_to_change_sends_nothing() {
        let none = NodeChanges::default();
        assert_eq!(
            step(&none, GOV, CrdView::Confirmed, BUSY),
            WriteStep::Nothing
        );
        assert_eq!(
            step(&none, GovernanceKind::Ungoverned, CrdView::Missing, QUIET),
            WriteStep::Nothing,
            "a node with nothing to release needs no CRD check"
        );
    }

    #[test]
    fn a_quiet_cluster_writes_everything_at_once() {
        assert_eq!(
            step(&full(), GOV, CrdView::Unconfirmed, QUIET),
            WriteStep::Write {
                changes: full(),
                rest_deferred: false
            },
            "a governed node does not wait for the CRD guard"
        );
    }

    #[test]
    fn with_taint_work_ahead_a_taint_goes_now_alone_and_the_rest_waits() {
        let WriteStep::Write {
            changes,
            rest_deferred,
        } = step(&full(), GOV, CrdView::Confirmed, BUSY)
        else {
            panic!("the taint is written now");
        };
        assert!(rest_deferred);
        assert!(changes.taint.is_some());
        assert_eq!(
            changes.labels,
            labels(),
            "a taint added takes `ready=false` and the profile label with it"
        );
        assert!(changes.conditions.is_none(), "the condition waits");
        assert_eq!(
            changes.annotations,
            Some(BTreeMap::from([(keys::ANNOTATION_TAINT.to_owned(), None)])),
            "the annotation recording the taint goes with it; the labels' list waits"
        );
        // A taint removed goes before `ready=true`: a tainted node never
        // reads ready.
        let mut release = full();
        if let Some(t) = release.taint.as_mut() {
            t.kind = TaintChangeKind::Remove;
        }
        if let Some(l) = release.labels.as_mut() {
            l.insert(keys::LABEL_READY.to_owned(), Some("true".to_owned()));
        }
        let (now, rest) = release.gating_part();
        assert!(now.taint.is_some() && rest.labels.is_some());
        // ... with the profile label it sets (issue 49: the chart's policy
        // lets a taint go only from a node labelled with a profile), and
        // before every other label.
        assert_eq!(
            now.labels,
            Some(BTreeMap::from([(
                keys::LABEL_PROFILE.to_owned(),
                Some("p".to_owned())
            )])),
            "a taint removed goes with the profile label and before every other label"
        );
        // A release removes the profile label with the rest, after the taint.
        if let Some(l) = release.labels.as_mut() {
            l.insert(keys::LABEL_PROFILE.to_owned(), None);
        }
        let (now, rest) = release.gating_part();
        assert_eq!(now.labels, None, "a release's label removals wait");
        assert!(
            rest.labels
                .is_some_and(|l| l.contains_key(keys::LABEL_PROFILE))
        );
        // A taint change with nothing else leaves nothing to wait.
        let (alone, _) = full().gating_part();
        assert_eq!(
            step(&alone, GOV, CrdView::Confirmed, BUSY),
            WriteStep::Write {
                changes: alone,
                rest_deferred: false
            }
        );
    }

    #[test]
    fn with_taint_work_ahead_a_node_without_taint_change_defers_all() {
        let labels_and_condition = NodeChanges {
            labels: labels(),
            conditions: conditions(),
            ..NodeChanges::default()
        };
        assert_eq!(
            step(&labels_and_condition, GOV, CrdView::Confirmed, BUSY),
            WriteStep::Defer
        );
        let released = GateView {
            released: true,
            ..BUSY
        };
        assert!(
            matches!(
                step(&labels_and_condition, GOV, CrdView::Confirmed, released),
                WriteStep::Write {
                    rest_deferred: false,
                    ..
                }
            ),
            "handed back: what waited goes, whatever is queued since"
        );
    }

    #[test]
    fn a_taint_held_by_the_brake_is_reported_and_the_rest_written() {
        let held = NodeChanges {
            labels: labels(),
            conditions: conditions(),
            taint_held_by_brake: true,
            ..NodeChanges::default()
        };
        assert_eq!(
            step(&held, GOV, CrdView::Confirmed, QUIET),
            WriteStep::HoldByBrake {
                changes: held.clone()
            }
        );
        assert!(!step(&held, GOV, CrdView::Confirmed, QUIET).writes_taint());
        assert_eq!(
            step(&held, GOV, CrdView::Confirmed, BUSY),
            WriteStep::Defer,
            "its writes are not taint writes"
        );
    }

    #[test]
    fn a_release_waits_for_the_crd_guard() {
        let release = NodeChanges {
            taint: taint(),
            ..NodeChanges::default()
        };
        let un = GovernanceKind::Ungoverned;
        assert_eq!(
            step(&release, un, CrdView::Missing, QUIET),
            WriteStep::HoldByCrdGuard
        );
        assert!(needs_crd(&release, un));
        assert!(!needs_crd(&NodeChanges::default(), un));
        assert!(!needs_crd(&release, GOV));
        assert_eq!(
            step(&release, un, CrdView::Unconfirmed, QUIET),
            WriteStep::HoldByCrdGuard,
            "a CRD that could not be confirmed holds"
        );
        assert!(step(&release, un, CrdView::Confirmed, BUSY).writes_taint());
    }

    #[test]
    fn the_echo_of_a_write_is_skipped_only_while_the_node_waits() {
        let mut l = WriteLedger::default();
        l.note_write("a", "7".into());
        assert_eq!(
            l.on_node_event("a", Some("7")),
            Trigger::Queue,
            "not waiting"
        );
        l.note_write("a", "7".into());
        l.defer("b"); // some other node waits: irrelevant to a
        l.queue("c");
        l.defer("a");
        assert_eq!(
            l.on_node_event("a", Some("8")),
            Trigger::Queue,
            "someone else's newer write is judged"
        );
        assert_eq!(l.on_node_event("a", Some("7")), Trigger::SkipEcho);
        assert_eq!(l.last_writes(), 0, "forgotten once its echo is seen");
        assert_eq!(l.on_node_event("a", Some("7")), Trigger::Queue);
    }

    #[test]
    fn a_cache_behind_the_last_write_is_said_once() {
        let mut l = WriteLedger::default();
        l.note_write("a", "7".into());
        assert!(l.cache_may_be_behind("a", Some("6")));
        assert!(!l.cache_may_be_behind("a", Some("6")), "answered once");
        l.note_write("a", "7".into());
        assert!(!l.cache_may_be_behind("a", Some("7")));
    }

    /// One reconcile through the ledger: start, step, decided, finish.
    fn reconcile(
        l: &mut WriteLedger,
        node: &str,
        changes: &NodeChanges,
    ) -> (WriteStep, Vec<String>) {
        l.start(node);
        let s = step(changes, GOV, CrdView::Confirmed, l.view(node));
        let mut out = l.decided(node, &s);
        out.extend(l.finish(node));
        (s, out)
    }

    #[test]
    fn a_burst_writes_every_taint_before_any_condition() {
        let mut l = WriteLedger::default();
        assert!(!l.taint_work_pending());
        for n in ["a", "b", "c"] {
            l.queue(n);
        }
        // A profile's status waits as long as any of them may bring a taint.
        assert!(l.taint_work_pending());
        let cond_only = NodeChanges {
            conditions: conditions(),
            ..NodeChanges::default()
        };
        // a: taint now, condition deferred; b: condition only, deferred.
        let (s, out) = reconcile(&mut l, "a", &full());
        assert!(matches!(
            s,
            WriteStep::Write {
                rest_deferred: true,
                ..
            }
        ));
        l.defer("a");
        assert!(out.is_empty());
        let (s, out) = reconcile(&mut l, "b", &cond_only);
        assert_eq!(s, WriteStep::Defer);
        assert!(out.is_empty(), "c is still queued");
        assert_eq!(l.deferred(), 2);
        // c, the last queued node, writes its taint; then both are handed back.
        l.start("c");
        let s = step(&full(), GOV, CrdView::Confirmed, l.view("c"));
        assert!(
            matches!(
                s,
                WriteStep::Write {
                    rest_deferred: false,
                    ..
                }
            ),
            "nothing ahead of c"
        );
        assert!(
            l.decided("c", &s).is_empty(),
            "c's taint is still being written"
        );
        assert!(l.taint_work_pending(), "c's taint is still being written");
        let mut back = l.finish("c");
        back.sort();
        assert_eq!(back, ["a", "b"]);
        assert!(pending_nodes(&l).is_empty());
        assert!(!l.taint_work_pending(), "only deferred writes are left");
        // Handed back, each writes what waited even if new work is queued.
        for n in &back {
            l.queue(n);
        }
        l.queue("d");
        l.start("a");
        assert!(l.view("a").released && l.view("a").taint_work_ahead);
    }

    #[test]
    fn a_profile_change_still_being_mapped_holds_conditions_back() {
        let mut l = WriteLedger::default();
        let mapping = l.unnamed_work();
        l.queue("a");
        // a, found first, writes its taint at once; its condition waits for
        // the nodes not found yet, which may bring taints too.
        let (s, out) = reconcile(&mut l, "a", &full());
        assert!(matches!(
            s,
            WriteStep::Write {
                rest_deferred: true,
                ..
            }
        ));
        assert!(out.is_empty());
        let (s, out) = reconcile(&mut l, "b", &cond_only());
        assert_eq!(s, WriteStep::Defer, "the mapping is taint work ahead");
        assert!(out.is_empty());
        l.queue("c");
        assert!(l.unnamed_done(mapping).is_empty(), "c is still queued");
        let (_, mut back) = reconcile(&mut l, "c", &taint_only());
        back.sort();
        assert_eq!(back, ["a", "b"]);
        assert!(pending_nodes(&l).is_empty() && l.pending.is_empty());
    }

    fn cond_only() -> NodeChanges {
        NodeChanges {
            conditions: conditions(),
            ..NodeChanges::default()
        }
    }

    fn taint_only() -> NodeChanges {
        NodeChanges {
            taint: taint(),
            ..NodeChanges::default()
        }
    }

    #[test]
    fn taint_work_queued_after_a_deferral_goes_first() {
        let mut l = WriteLedger::default();
        l.queue("x");
        l.queue("a");
        let (s, _) = reconcile(&mut l, "a", &cond_only());
        assert_eq!(s, WriteStep::Defer);
        // Nodes join behind a, each with a taint to take off.
        for i in 0..100 {
            l.queue(&format!("n{i}"));
        }
        let (_, back) = reconcile(&mut l, "x", &full());
        assert!(
            back.is_empty(),
            "the joiners' untaints go before a's condition"
        );
        for i in 0..99 {
            let (_, back) = reconcile(&mut l, &format!("n{i}"), &taint_only());
            assert!(back.is_empty());
        }
        let (_, back) = reconcile(&mut l, "n99", &taint_only());
        // No taint work is left: a, then x (its condition deferred after a's).
        assert_eq!(back, ["a", "x"]);
    }

    #[test]
    fn taint_work_that_never_ends_holds_a_deferral_only_so_long() {
        let mut l = WriteLedger::default();
        l.queue("x");
        l.queue("a");
        let (s, _) = reconcile(&mut l, "a", &cond_only());
        assert_eq!(s, WriteStep::Defer);
        // A stream of new work, each judged and done, one always still queued.
        l.queue("n0");
        let (_, back) = reconcile(&mut l, "x", &taint_only());
        assert!(back.is_empty());
        let mut handed_back_after = None;
        for i in 1..=HOLD_TICKETS + 1 {
            l.queue(&format!("n{i}"));
            let (_, back) = reconcile(&mut l, &format!("n{}", i - 1), &taint_only());
            if back == ["a"] {
                handed_back_after = Some(i);
                break;
            }
            assert!(back.is_empty());
        }
        assert!(
            handed_back_after.is_some_and(|i| i + 1 >= HOLD_TICKETS),
            "handed back after {handed_back_after:?} later reconciles"
        );
    }

    #[test]
    fn deferred_nodes_are_handed_back_a_window_at_a_time() {
        let mut l = WriteLedger::with_release_window(3);
        l.queue("x");
        for i in 0..7 {
            l.queue(&format!("d{i}"));
            let (s, _) = reconcile(&mut l, &format!("d{i}"), &cond_only());
            assert_eq!(s, WriteStep::Defer);
        }
        let (_, back) = reconcile(&mut l, "x", &full());
        assert_eq!(back, ["d0", "d1", "d2"], "oldest first, three at a time");
        for n in &back {
            l.queue(n);
        }
        // A joiner queued now is taint work; the handed-back three are not.
        l.queue("j");
        l.start("d0");
        assert!(l.view("d0").released);
        assert_eq!(pending_nodes(&l).values().collect::<Vec<_>>(), ["j"]);
        let s = step(&cond_only(), GOV, CrdView::Confirmed, l.view("d0"));
        assert!(l.decided("d0", &s).is_empty());
        assert!(
            l.finish("d0").is_empty(),
            "the joiner's taint work holds the rest back"
        );
        let (_, back) = reconcile(&mut l, "j", &full());
        assert_eq!(back, ["d3"], "one place in the window is free");
    }

    #[test]
    fn a_deleted_node_holds_no_one_back() {
        let mut l = WriteLedger::default();
        l.queue("gone");
        l.queue("a");
        let cond_only = NodeChanges {
            conditions: conditions(),
            ..NodeChanges::default()
        };
        let (s, back) = reconcile(&mut l, "a", &cond_only);
        assert_eq!(s, WriteStep::Defer);
        assert!(back.is_empty());
        assert_eq!(l.forget("gone"), ["a"]);
        assert_eq!(l.forget("a"), Vec::<String>::new());
    }
}
