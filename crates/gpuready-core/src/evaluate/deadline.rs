//! The not-ready deadline: how long a node may stay not ready under the
//! profile, counted from durable state only.

use gpuready_api::DeadlineStart;
use gpuready_api::keys::{self};

use super::judged::Judged;
use crate::report::{DeadlinePassed, LayerReport};

/// The not-ready deadline: counted from durable state only (the node's
/// creationTimestamp, or the `GpuReady` condition's lastTransitionTime), so a
/// restarted gpuready reaches the same verdict.
pub(super) fn apply_deadline(judged: &Judged, report: &mut LayerReport) {
    let Judged { spec, facts, now } = *judged;
    let Some(d) = &spec.not_ready_deadline else {
        return;
    };
    // Only failures run against the deadline: maintenance has a deadline of
    // its own, and a node another gate holds is not gpuready's to call late.
    if report.state() != crate::report::NodeState::NotReady {
        return;
    }
    let gpu_ready = facts
        .gpu_conditions
        .iter()
        .find(|c| c.type_ == keys::CONDITION_GPU_READY);
    let since = match d.since {
        DeadlineStart::FirstSeen => facts.created,
        DeadlineStart::LastReady => match gpu_ready {
            // Ready until this verdict: the clock starts now.
            Some(c) if c.status == "True" => Some(now),
            Some(c) => c
                .last_transition_time
                .as_ref()
                .map(|t| t.0)
                .or(facts.created),
            None => facts.created,
        },
    };
    let Some(since) = since else {
        return;
    };
    let left = since.as_second() + i64::from(d.seconds) - now.as_second();
    if report.recheck_within(left) {
        return;
    }
    report.deadline = Some(DeadlinePassed {
        since: since.to_string(),
        seconds: d.seconds,
        label: d.label,
    });
}
