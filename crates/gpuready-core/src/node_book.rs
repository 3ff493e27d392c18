//! The node book: everything the node write path remembers between two
//! reconciles, as one plain-data type whose methods are the rules — the write
//! ledger (taint work first, deferred nodes, gpuready's last write to each
//! node), every profile's safety brake with the matched count it decides by,
//! the nodes it holds and its `NoExecute` budget, the nodes whose last
//! write the API server refused (with their backoff), and the error backoff
//! of failed reconciles. The ledger is also the one queue in front of kube's
//! `Controller` (`crate::write_ledger`): every trigger enters through
//! [`NodeBook::ask`], kube is fed from [`NodeBook::next`] alone, and nodes a
//! rule hands back are queued here, never sent out and back in. One type
//! because the rules cross: a brake released re-queues the nodes it held, a
//! write that passes clears a refusal, a node that leaves is forgotten by
//! all. The controller keeps one behind one lock (`controller/ledger.rs`);
//! nothing here reads a clock or sends anything.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gpuready_api::keys;

use crate::brake::{BrakeConfig, BrakeState};
use crate::clocks::{self, Clock, Observation};
use crate::no_execute::{self, Budget, BudgetView, Grant};
use crate::report::NodeState;
use crate::timeline::ReadyRecord;
use crate::write_ledger::{Trigger, WriteLedger};
use crate::write_step::{CrdView, WriteStep, step};
use crate::{GovernanceKind, NodeAssessment, NodeChanges, NodeFacts};
use jiff::Timestamp;

/// What part of a node write the API server refused (admission, RBAC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefusedWrite {
    /// The taint itself: the node is not gated as its verdict says.
    Taint,
    /// A label or annotation (the taint, if any, passed alone).
    Other,
}

impl RefusedWrite {
    /// The `write` label of `gpuready_write_refused_nodes`.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusedWrite::Taint => "taint",
            RefusedWrite::Other => "other",
        }
    }

    /// How the node's `GpuReady` message and its Event say it.
    pub fn sentence(self) -> &'static str {
        match self {
            RefusedWrite::Taint => keys::TAINT_REFUSED,
            RefusedWrite::Other => keys::WRITE_REFUSED,
        }
    }
}

/// One profile's refused nodes: how many, by what was refused, and the first
/// one (by name) with its reason.
#[derive(Debug, PartialEq, Eq)]
pub struct RefusedNodes {
    pub taint: usize,
    pub other: usize,
    pub first: String,
    pub why: String,
}

/// One refused node: its profile, the API server's reason, what it refused,
/// and the backoff before the same changes are sent again.
#[derive(Debug)]
struct Refusal {
    profile: String,
    why: String,
    what: RefusedWrite,
    /// The changes refused (what was sent): a refused taint holds the same
    /// taint change, anything else exactly these changes. `None`: nothing
    /// is held.
    changes: Option<NodeChanges>,
    /// Refusals of these same changes in a row.
    attempts: u32,
    retry_at: Timestamp,
}

/// Seconds before refused changes are sent again: 1, 4, 16, 64, 256, then
/// every 300 (a refusal is fixed by a person changing a policy or RBAC, not
/// by retrying; five minutes bounds how late the fix is noticed, and a
/// changed plan is sent at once).
pub fn refusal_backoff_seconds(attempts: u32) -> i64 {
    4_i64
        .saturating_pow(attempts.saturating_sub(1).min(8))
        .min(REFUSAL_BACKOFF_MAX_SECONDS)
}

/// The longest wait between two sends of the same refused changes.
pub const REFUSAL_BACKOFF_MAX_SECONDS: i64 = 300;

/// The wait before a node whose reconcile failed `attempts` times in a row
/// runs again: 1 s doubling to 150 s (a failure is mostly the API server or
/// the network, fixed in seconds, while 150 s bounds how late a long outage's
/// end is noticed), plus up to as much again, spread by node and attempt so
/// that a fleet failing at once (an API server restart) does not retry at
/// once. Spread by a hash, not a random draw: the book reads no randomness.
pub fn error_backoff(node: &str, attempts: u32) -> std::time::Duration {
    use std::hash::{Hash, Hasher};
    let base_ms = 1_000_u64
        .saturating_mul(1 << attempts.saturating_sub(1).min(8))
        .min(ERROR_BACKOFF_MAX_MS);
    let mut h = std::hash::DefaultHasher::new();
    (node, attempts).hash(&mut h);
    std::time::Duration::from_millis(base_ms + h.finish() % base_ms.max(1))
}

/// The longest error backoff before its spread.
const ERROR_BACKOFF_MAX_MS: u64 = 150_000;

/// The changes without the times a plan stamps (conditions' transition and
/// heartbeat times, the release annotation's instant, and the rules' status
/// conditions, which carry one): two passes that would send the same thing
/// compare equal.
fn timeless(changes: &NodeChanges) -> NodeChanges {
    let mut c = changes.clone();
    if let Some(set) = c.conditions.as_mut().map(|c| &mut c.set) {
        for cond in set {
            cond.last_transition_time = None;
            cond.last_heartbeat_time = None;
        }
    }
    if let Some(v) = c
        .annotations
        .as_mut()
        .and_then(|a| a.get_mut(keys::ANNOTATION_RELEASED))
    {
        *v = v.as_ref().map(|_| String::new());
    }
    for r in &mut c.device_taint_rules {
        r.condition = None;
    }
    c
}

/// One profile's brake and what it decides with.
#[derive(Debug, Default)]
struct ProfileBrake {
    state: BrakeState,
    /// The tally's matched count at the last [`NodeBook::counts`]: the
    /// denominator of the turns recorded until the next one.
    matched: usize,
    /// Nodes whose new taint the brake held back: re-queued when it releases.
    held: BTreeSet<String>,
    /// Escalations to `NoExecute` granted and held (`crate::no_execute`).
    budget: Budget,
}

/// What the brake reads of one verdict.
#[derive(Clone, Copy, Debug)]
pub struct Turn<'a> {
    pub node: &'a str,
    /// The governing profile (`None` for a conflict or an ungoverned node:
    /// no brake).
    pub profile: Option<&'a str>,
    pub state: Option<NodeState>,
    /// gpuready labelled the node ready at its last write.
    pub labelled_ready: bool,
}

impl<'a> Turn<'a> {
    pub fn of(facts: &'a NodeFacts, verdict: &'a NodeAssessment) -> Self {
        let governed = verdict.governance == GovernanceKind::Governed;
        Turn {
            node: &facts.name,
            profile: verdict.profile.as_deref().filter(|_| governed),
            state: verdict.state,
            labelled_ready: facts.labels.get(keys::LABEL_READY).map(String::as_str) == Some("true"),
        }
    }
}

/// What [`NodeBook::step`] decides on: the node's plan as one value, so the
/// book and the controller's lock wrapper say the signature once.
#[derive(Clone, Copy, Debug)]
pub struct PlannedWrite<'a> {
    pub node: &'a str,
    /// The governing profile, whose brake may hold the write.
    pub profile: Option<&'a str>,
    pub changes: &'a NodeChanges,
    pub governance: GovernanceKind,
}

impl<'a> PlannedWrite<'a> {
    pub fn of(facts: &'a NodeFacts, plan: &'a NodeAssessment) -> Self {
        PlannedWrite {
            node: &facts.name,
            profile: plan.profile.as_deref(),
            changes: &plan.changes,
            governance: plan.governance,
        }
    }
}

/// What [`NodeBook::refused`] notes of one refused write, as one value, so
/// the book and the controller's lock wrapper say the signature once.
#[derive(Clone, Copy, Debug)]
pub struct RefusalNote<'a> {
    /// The profile whose status counts the refusal (empty: none).
    pub profile: &'a str,
    /// The API server's reason.
    pub why: &'a str,
    pub what: RefusedWrite,
    /// The changes sent; `None`: nothing is held back.
    pub changes: Option<&'a NodeChanges>,
}

/// What [`NodeBook::counts`] decided for a profile.
#[derive(Debug, PartialEq, Eq)]
struct Counted {
    /// The brake is engaged now.
    engaged: bool,
    /// The brake released in this call: these nodes' taints were held back
    /// and nothing about them changed, so nothing else would reconcile them.
    requeue: Vec<String>,
}

/// The node write path's memory (see the module comment).
#[derive(Debug)]
pub struct NodeBook {
    ledger: WriteLedger,
    brake: BrakeConfig,
    brakes: BTreeMap<String, ProfileBrake>,
    refused: HashMap<String, Refusal>,
    /// The open wait of every governed node that is not Ready (`crate::clocks`).
    clocks: HashMap<String, Clock>,
    /// Failed reconciles in a row, by node (see [`error_backoff`]).
    failures: HashMap<String, u32>,
}

impl NodeBook {
    pub fn new(brake: BrakeConfig) -> Self {
        NodeBook {
            ledger: WriteLedger::default(),
            brake,
            brakes: BTreeMap::new(),
            refused: HashMap::new(),
            clocks: HashMap::new(),
            failures: HashMap::new(),
        }
    }

    /// Nodes a rule hands back are queued again, here.
    fn requeue(&mut self, nodes: impl IntoIterator<Item = String>) {
        for n in nodes {
            self.ledger.queue(&n);
        }
    }

    /// The settings the brakes decide with (for the condition's message).
    pub fn brake_config(&self) -> &BrakeConfig {
        &self.brake
    }

    // --- The trigger streams -------------------------------------------------

    /// A reconcile of the node was asked for: the one door of every trigger.
    /// `resource_version` is the node's own watch event's (`None` for any
    /// other trigger): the echo of gpuready's own write to a node waiting at
    /// the gate is skipped; anything else queues it.
    pub fn ask(&mut self, node: &str, resource_version: Option<&str>) -> Trigger {
        self.ledger.ask(node, resource_version)
    }

    /// The next node for kube, while it holds fewer than `slots` running or
    /// due (`WriteLedger::next`).
    pub fn next(&mut self, slots: usize) -> Option<String> {
        self.ledger.next(slots)
    }

    /// Whether [`NodeBook::next`] has a node for kube now.
    pub fn can_hand(&self, slots: usize) -> bool {
        self.ledger.can_hand(slots)
    }

    /// Taint work whose nodes are not named yet (a profile change being
    /// mapped): pending until [`NodeBook::unnamed_done`] with the ticket.
    pub fn unnamed_work(&mut self) -> u64 {
        self.ledger.unnamed_work()
    }

    /// Every node of that work is queued.
    pub fn unnamed_done(&mut self, ticket: u64) {
        self.ledger.unnamed_done(ticket);
    }

    /// The node left the cluster (or kube dropped it, not cached): forgotten
    /// by the ledger, every brake, the refusals and the error backoff.
    pub fn forget(&mut self, node: &str) {
        let mut requeue = vec![];
        for b in self.brakes.values_mut() {
            b.state.forget(node);
            b.held.remove(node);
            if b.budget.forget(node) {
                requeue.extend(b.budget.waiting());
            }
        }
        self.refused.remove(node);
        self.clocks.remove(node);
        self.failures.remove(node);
        self.ledger.forget(node);
        self.requeue(requeue);
    }

    // --- One reconcile, in order ---------------------------------------------

    /// The node's reconcile starts.
    pub fn start(&mut self, node: &str) {
        self.ledger.start(node);
    }

    /// Whether the cached copy of the node may predate gpuready's last write.
    pub fn cache_may_be_behind(&mut self, node: &str, cached: Option<&str>) -> bool {
        self.ledger.cache_may_be_behind(node, cached)
    }

    /// Notes the node's verdict for its profile's brake: a node labelled
    /// ready that now fails is a turn, which may engage the brake (at once, so
    /// a burst is braked within the reconcile that trips it) but never release
    /// it; any other verdict forgets the node's turn. Maintenance and other
    /// gates are not failures. Returns whether new taints are held back for
    /// the node's profile — the turn that trips the brake is held too, so a
    /// burst taints at most floor(threshold × matched) nodes.
    pub fn turn(&mut self, t: &Turn<'_>, now: Timestamp) -> bool {
        let Some(profile) = t.profile else {
            return false;
        };
        let b = self.brakes.entry(profile.to_owned()).or_default();
        if t.state != Some(NodeState::NotReady) {
            b.state.forget(t.node);
        } else if t.labelled_ready {
            b.state.turn(&self.brake, t.node, b.matched, now);
        }
        b.state.engaged()
    }

    /// Advances the node's open wait by its verdict (`None`: no one profile
    /// governs it, and it has no wait). Returns the finished wait's record
    /// once the node is Ready: the plan writes it, then [`NodeBook::wait_written`].
    pub fn clock(
        &mut self,
        node: &str,
        seen: Option<&Observation>,
        now: Timestamp,
    ) -> Option<ReadyRecord> {
        let Some(seen) = seen else {
            self.clocks.remove(node);
            return None;
        };
        let mut clock = self.clocks.remove(node);
        let record = clocks::advance(&mut clock, seen, now);
        if let Some(c) = clock {
            self.clocks.insert(node.to_owned(), c);
        }
        record
    }

    /// The node's finished wait is on the node (written now, or found there):
    /// its clock goes. Returns the record, for the metrics.
    pub fn wait_written(&mut self, node: &str) -> Option<ReadyRecord> {
        self.clocks.remove(node)?.record()
    }

    /// The node's escalations to `NoExecute` against its profile's budget,
    /// decided at once (so two reconciles can never both take the last
    /// place): granted when already `NoExecute` or when they fit, held while
    /// the profile's brake is engaged or its budget is full. `ask` is `None`
    /// for a node no one profile governs; the node's grants in every other
    /// profile's budget are given back. Returns the holds; the waiting nodes
    /// are queued again when room opened.
    pub fn no_execute(&mut self, node: &str, ask: Option<(&str, &no_execute::Ask)>) -> Grant {
        let (grant, requeue) = self.no_execute_grant(node, ask);
        self.requeue(requeue);
        grant
    }

    fn no_execute_grant(
        &mut self,
        node: &str,
        ask: Option<(&str, &no_execute::Ask)>,
    ) -> (Grant, Vec<String>) {
        let mut requeue = vec![];
        for (p, b) in &mut self.brakes {
            if ask.is_none_or(|(mine, _)| mine != p) && b.budget.forget(node) {
                requeue.extend(b.budget.waiting());
            }
        }
        let Some((profile, ask)) = ask else {
            return (Grant::default(), requeue);
        };
        let b = self.brakes.entry(profile.to_owned()).or_default();
        let (grant, opened) = b.budget.ask(node, ask, b.matched, b.state.engaged());
        if opened {
            requeue.extend(b.budget.waiting().into_iter().filter(|n| n != node));
        }
        (grant, requeue)
    }

    /// The one write decision for the node's plan, made and recorded at once.
    /// The node itself is queued again when the brake its plan assumed was
    /// released in the meantime (its held taint would otherwise wait for a
    /// change).
    pub fn step(&mut self, plan: PlannedWrite<'_>, crd: CrdView, now: Timestamp) -> WriteStep {
        let PlannedWrite {
            node,
            profile,
            changes,
            governance,
        } = plan;
        let decision = match self.refusal_wait(node, changes, now) {
            // The refused taint waits; the rest (labels, conditions) goes.
            Some((secs, RefusedWrite::Taint)) => {
                let rest = changes.without_taint();
                if rest.is_empty() {
                    WriteStep::HoldByRefusal {
                        retry_after_seconds: secs,
                    }
                } else {
                    step(&rest, governance, crd, self.ledger.view(node)).or_refusal(secs)
                }
            }
            Some((retry_after_seconds, _)) => WriteStep::HoldByRefusal {
                retry_after_seconds,
            },
            None => step(changes, governance, crd, self.ledger.view(node)),
        };
        self.ledger.decided(node, &decision);
        if let (WriteStep::HoldByBrake { .. }, Some(p)) = (&decision, profile) {
            match self.brakes.get_mut(p) {
                Some(b) if b.state.engaged() => {
                    b.held.insert(node.to_owned());
                }
                _ => self.ledger.queue(node),
            }
        }
        decision
    }

    /// gpuready's write to the node passed and left it at `resource_version`.
    /// Returns the profile whose status changes because the node's earlier
    /// refusal is over.
    pub fn written(
        &mut self,
        node: &str,
        resource_version: Option<String>,
        with_taint: bool,
    ) -> Option<String> {
        if let Some(rv) = resource_version {
            self.ledger.note_write(node, rv);
        }
        // A write without the taint ends no refusal of the taint.
        if !with_taint
            && self
                .refused
                .get(node)
                .is_some_and(|r| r.what == RefusedWrite::Taint)
        {
            return None;
        }
        self.refused.remove(node).map(|r| r.profile)
    }

    /// The API server refused part of gpuready's write of `changes` to the
    /// node at `now`: reported, and backed off (the same changes refused
    /// again wait four times longer, up to five minutes). `changes`: what was
    /// sent (`None`: reported, not held).
    pub fn refused(&mut self, node: &str, note: RefusalNote<'_>, now: Timestamp) {
        let RefusalNote {
            profile,
            why,
            what,
            changes,
        } = note;
        let changes = changes.map(timeless);
        let attempts = match self.refused.get(node) {
            Some(r) if changes.is_some() && r.changes == changes => r.attempts.saturating_add(1),
            _ => 1,
        };
        let wait = refusal_backoff_seconds(attempts);
        let retry_at = Timestamp::from_second(now.as_second().saturating_add(wait)).unwrap_or(now);
        self.refused.insert(
            node.to_owned(),
            Refusal {
                profile: profile.to_owned(),
                why: why.to_owned(),
                what,
                changes,
                attempts,
                retry_at,
            },
        );
    }

    /// Seconds until the node's refused changes may be sent again, and what
    /// was refused, when the backoff has not passed and `changes` carry the
    /// same: the same taint change for a refused taint, the same changes
    /// for anything else.
    fn refusal_wait(
        &self,
        node: &str,
        changes: &NodeChanges,
        now: Timestamp,
    ) -> Option<(u64, RefusedWrite)> {
        let r = self.refused.get(node)?;
        let left = r.retry_at.as_second() - now.as_second();
        let refused = r.changes.as_ref()?;
        let same = match r.what {
            RefusedWrite::Taint => changes.taint.is_some() && refused.taint == changes.taint,
            RefusedWrite::Other => *refused == timeless(changes),
        };
        (left > 0 && same).then(|| (u64::try_from(left).unwrap_or(1), r.what))
    }

    /// Whether the API server refused the node's last write.
    pub fn is_refused(&self, node: &str) -> bool {
        self.refused.contains_key(node)
    }

    /// What the API server refused of the node's last write, and why.
    pub fn refusal(&self, node: &str) -> Option<(RefusedWrite, String)> {
        self.refused.get(node).map(|r| (r.what, r.why.clone()))
    }

    /// The node's reconcile is over.
    pub fn finish(&mut self, node: &str) {
        self.ledger.finish(node);
    }

    /// The node's reconcile failed: how long to wait before it runs again
    /// (see [`error_backoff`]).
    pub fn failed(&mut self, node: &str) -> std::time::Duration {
        let attempts = self.failures.entry(node.to_owned()).or_default();
        *attempts = attempts.saturating_add(1);
        error_backoff(node, *attempts)
    }

    /// The node's reconcile passed: its error backoff starts over.
    pub fn succeeded(&mut self, node: &str) {
        self.failures.remove(node);
    }

    // --- The status task -------------------------------------------------------

    /// The tally's counts for `profile`: they set the brake's denominator and
    /// are the one input that may release it. On a release the nodes it held
    /// are queued again, whoever engaged it. Returns whether the brake is
    /// engaged.
    pub fn counts(
        &mut self,
        profile: &str,
        matched: usize,
        not_ready: usize,
        now: Timestamp,
    ) -> bool {
        let counted = self.counted(profile, matched, not_ready, now);
        self.requeue(counted.requeue);
        counted.engaged
    }

    fn counted(
        &mut self,
        profile: &str,
        matched: usize,
        not_ready: usize,
        now: Timestamp,
    ) -> Counted {
        let b = self.brakes.entry(profile.to_owned()).or_default();
        let was = b.state.engaged();
        b.matched = matched;
        let engaged = b.state.counts(&self.brake, matched, not_ready, now);
        let room = b.budget.matched(matched);
        let mut requeue: Vec<String> = if was && !engaged {
            std::mem::take(&mut b.held).into_iter().collect()
        } else {
            vec![]
        };
        // Escalations the brake held wait in the budget: asked again on a
        // release, as they are when the budget's limit rises.
        if (was && !engaged) || room {
            requeue.extend(b.budget.waiting());
        }
        Counted { engaged, requeue }
    }

    /// Forgets the brakes of profiles that no longer exist. The nodes they
    /// held are queued again (their profile is gone: they are judged again).
    pub fn retain_profiles(&mut self, exists: impl Fn(&str) -> bool) {
        let gone: Vec<String> = self.brakes.keys().filter(|p| !exists(p)).cloned().collect();
        let held: Vec<String> = gone
            .iter()
            .filter_map(|p| self.brakes.remove(p))
            .flat_map(|b| {
                let waiting = b.budget.waiting();
                b.held.into_iter().chain(waiting)
            })
            .collect();
        self.requeue(held);
    }

    // --- Reads -------------------------------------------------------------------

    /// Whether new taints are held back for `profile`.
    pub fn engaged(&self, profile: &str) -> bool {
        self.brakes.get(profile).is_some_and(|b| b.state.engaged())
    }

    /// The profile's `NoExecute` budget: escalated, limits, held.
    pub fn no_execute_of(&self, profile: &str) -> Option<BudgetView> {
        self.brakes.get(profile).map(|b| b.budget.view())
    }

    /// The profile's refused nodes among those that still exist.
    pub fn refusals_of(
        &self,
        profile: &str,
        exists: impl Fn(&str) -> bool,
    ) -> Option<RefusedNodes> {
        let mut mine: Vec<(&String, &Refusal)> = self
            .refused
            .iter()
            .filter(|(n, r)| r.profile == profile && exists(n))
            .collect();
        mine.sort_by(|a, b| a.0.cmp(b.0));
        let (first, r) = mine.first()?;
        let taint = mine
            .iter()
            .filter(|(_, r)| r.what == RefusedWrite::Taint)
            .count();
        Some(RefusedNodes {
            taint,
            other: mine.len() - taint,
            first: (*first).clone(),
            why: format!("{}: {}", r.what.sentence(), r.why),
        })
    }

    /// Nodes whose writes wait at the gate now.
    pub fn deferred(&self) -> usize {
        self.ledger.deferred()
    }

    /// Whether any taint work is pending (`WriteLedger::taint_work_pending`).
    pub fn taint_work_pending(&self) -> bool {
        self.ledger.taint_work_pending()
    }
}

#[cfg(test)]
mod tests;
