//! The open wait of one node: when it began and why (registration, the end of
//! maintenance, a repair, a fault), and when each step first went Ready since
//! — advanced by every verdict, closed into a [`ReadyRecord`] when the node is
//! Ready. Pure (time is an input); the node book keeps one per waiting node.
//! Kept apart from `timeline` (the record and its figures), which `assess`
//! reads: this reads verdicts, and one module doing both would be a cycle.

use std::collections::BTreeMap;

use gpuready_api::keys;
use jiff::Timestamp;

use crate::NodeAssessment;
use crate::facts::NodeFacts;
use crate::plan::TaintChangeKind;
use crate::report::{NodeState, Status};
use crate::timeline::{EpisodeKind, ReadyRecord, Step};

/// A node gpuready first sees this long after it registered is not timed
/// as a join (gpuready installed on a running fleet; a node that never
/// became ready before): its wait counts from `GpuReady` turning False.
pub const JOIN_HORIZON_SECONDS: i64 = 24 * 3600;

/// What one verdict tells a node's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub state: NodeState,
    /// The steps Ready now (the layers; [`Step::Gates`] is derived).
    pub ready: Vec<Step>,
    /// `metadata.creationTimestamp`.
    pub created: Option<Timestamp>,
    /// The node never finished a wait under gpuready: no timeline record on
    /// it and never labelled ready.
    pub never_ready: bool,
    /// The latest time the operator's repair annotation names.
    pub repaired_at: Option<Timestamp>,
    /// When `GpuReady` last turned to what it is, when that is not True.
    pub not_ready_since: Option<Timestamp>,
    /// This verdict takes gpuready's taint off: the node waited on it, even
    /// when gpuready saw it first Ready (a node registered with the taint
    /// whose layers were all up by the first verdict; a new leader's first).
    pub untaints: bool,
}

impl Observation {
    /// The clock's view of a governed node's planned verdict (`None`
    /// otherwise: a node no one profile governs has no wait). Planned, so
    /// that a taint coming off says the node waited on it.
    pub fn of(facts: &NodeFacts, verdict: &NodeAssessment, now: Timestamp) -> Option<Observation> {
        let state = verdict.state?;
        let repaired_at = facts
            .repaired_at
            .as_deref()
            .and_then(|v| crate::repair::parse(v, facts.created, now).ok())
            .and_then(|m| m.gpus.values().copied().chain(m.all).max());
        let not_ready_since = facts
            .gpu_conditions
            .iter()
            .find(|c| c.type_ == keys::CONDITION_GPU_READY && c.status != "True")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0);
        Some(Observation {
            state,
            ready: verdict
                .layers
                .iter()
                .filter(|l| l.status == Status::Ready)
                .map(|l| Step::Layer(l.layer))
                .collect(),
            created: facts.created,
            never_ready: facts.owned.timeline.is_none()
                && facts.labels.get(keys::LABEL_READY).map(String::as_str) != Some("true"),
            repaired_at,
            not_ready_since,
            untaints: verdict
                .changes
                .taint
                .as_ref()
                .is_some_and(|t| t.kind == TaintChangeKind::Remove),
        })
    }
}

/// A node's open wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clock {
    pub kind: EpisodeKind,
    pub started: Timestamp,
    /// When each step first went Ready since the start.
    pub steps: BTreeMap<Step, Timestamp>,
    /// In maintenance at the last verdict: the wait starts again when it ends.
    in_maintenance: bool,
    /// Another readiness gate held the node once its GPU stack was ready.
    gated: bool,
    /// When the node turned Ready (the record is then due).
    pub ready_at: Option<Timestamp>,
}

impl Clock {
    fn open(o: &Observation, now: Timestamp) -> Clock {
        let join = o.never_ready
            && o.created
                .is_some_and(|c| now.as_second() - c.as_second() <= JOIN_HORIZON_SECONDS);
        let (kind, started) = match o.created {
            Some(c) if join => (EpisodeKind::Join, c.min(now)),
            _ => (
                EpisodeKind::Fault,
                o.not_ready_since.filter(|t| *t <= now).unwrap_or(now),
            ),
        };
        Clock {
            kind,
            started,
            steps: BTreeMap::new(),
            in_maintenance: false,
            gated: false,
            ready_at: None,
        }
    }

    fn advance(&mut self, o: &Observation, now: Timestamp) {
        if o.state == NodeState::Maintenance {
            // Maintenance is not part of the wait: it counts from upgrade-done.
            self.kind = EpisodeKind::Maintenance;
            self.in_maintenance = true;
            self.steps.clear();
            return;
        }
        if self.in_maintenance {
            self.in_maintenance = false;
            self.started = now;
        }
        if let Some(r) = o.repaired_at.filter(|r| *r > self.started && *r <= now) {
            self.kind = EpisodeKind::Repair;
            self.started = r;
            self.steps.retain(|_, t| *t >= r);
        }
        for s in &o.ready {
            self.steps.entry(*s).or_insert(now);
        }
        self.gated |= o.state == NodeState::WaitingForGate;
        if o.state == NodeState::Ready {
            if self.gated {
                self.steps.entry(Step::Gates).or_insert(now);
            }
            self.ready_at.get_or_insert(now);
        }
    }

    /// The finished wait, once the node is Ready.
    pub fn record(&self) -> Option<ReadyRecord> {
        let since =
            |t: &Timestamp| u64::try_from(t.as_second() - self.started.as_second()).unwrap_or(0);
        let ready_at = self.ready_at?;
        Some(ReadyRecord {
            kind: self.kind,
            started: Timestamp::from_second(self.started.as_second()).unwrap_or(self.started),
            seconds: since(&ready_at),
            steps: self.steps.iter().map(|(s, t)| (*s, since(t))).collect(),
        })
    }
}

/// Advances a node's clock by one verdict: opens one when a Ready node turns
/// not Ready (or a node is first seen Ready under gpuready's taint), closes
/// its record when it is Ready again. Returns the record
/// due (the wait is over; the caller writes it and then drops the clock).
pub fn advance(clock: &mut Option<Clock>, o: &Observation, now: Timestamp) -> Option<ReadyRecord> {
    let ready = o.state == NodeState::Ready;
    match clock {
        // Ready with nothing held: no wait to time.
        None if ready && !o.untaints => return None,
        // Not ready again before the last wait's record went out: a new wait.
        Some(c) if !ready && c.ready_at.is_some() => *clock = None,
        _ => {}
    }
    let c = clock.get_or_insert_with(|| Clock::open(o, now));
    c.advance(o, now);
    c.record()
}

/// What a gate answered, as `gpuready_time_to_gate_seconds{source}` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GateSource {
    /// The probe's report (an XID, an ECC error, a recovery action).
    Probe,
    /// Another judge's Node condition (`spec.external`).
    Condition,
}

impl GateSource {
    pub const ALL: [GateSource; 2] = [GateSource::Probe, GateSource::Condition];

    pub fn as_str(self) -> &'static str {
        match self {
            GateSource::Probe => "probe",
            GateSource::Condition => "condition",
        }
    }
}

/// When the node's probe report was taken (`None` without a readable one).
pub fn report_time(facts: &NodeFacts) -> Option<Timestamp> {
    match &facts.probe {
        Some(crate::probe::ProbeEvidence::Report(r)) => r.generated_at.parse().ok(),
        _ => None,
    }
}

/// The evidence a node's new gate answers and when it appeared: for a
/// device gated (a DeviceTaintRule created) the probe report's time; for
/// the node's taint, the report's time when the Health layer fails, else
/// the newest transition of another judge's condition when the External
/// layer does. `None` for any other failure (no instant to time it from).
pub fn fault_evidence(
    facts: &NodeFacts,
    verdict: &NodeAssessment,
    device: bool,
) -> Option<(GateSource, Timestamp)> {
    let fails = |layer| {
        verdict
            .layers
            .iter()
            .any(|l| l.layer == layer && l.gating && l.status == Status::NotReady)
    };
    if device || fails(gpuready_api::Layer::Health) {
        return report_time(facts).map(|t| (GateSource::Probe, t));
    }
    if fails(gpuready_api::Layer::External) {
        let newest = facts
            .outside_conditions
            .iter()
            .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
            .max()?;
        return Some((GateSource::Condition, newest));
    }
    None
}

#[cfg(test)]
mod tests;
