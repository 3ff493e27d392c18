//! Escalation of the node's taint to `NoExecute` (`spec.escalation`, for the
//! reasons it names): a failing node whose reason escalates keeps its taint's
//! own effect for `dryRunSeconds` after `GpuReady` left True, then `NoExecute`.
//! Counted from durable state only (the condition's lastTransitionTime), so a
//! restart reaches the same verdict. A bad device's rule escalates in `devices`.

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::keys;
use jiff::Timestamp;

use crate::facts::NodeFacts;
use crate::report::{LayerReport, NodeEscalation, NodeState};

pub(super) fn apply_node_escalation(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    now: Timestamp,
    report: &mut LayerReport,
) {
    let Some(rules) = &spec.escalation else {
        return;
    };
    if report.state() != NodeState::NotReady {
        return;
    }
    let failing = report
        .lifecycle
        .maintenance
        .iter()
        .map(|m| m.reason)
        .chain(report.failures().map(|l| l.reason.as_str()));
    let Some(reason) = failing
        .into_iter()
        .find(|r| rules.reasons.iter().any(|e| e == r))
        .map(str::to_owned)
    else {
        return;
    };
    let since = facts
        .gpu_conditions
        .iter()
        .find(|c| c.type_ == keys::CONDITION_GPU_READY && c.status != "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map_or(now, |t| t.0);
    let at_second = since
        .as_second()
        .saturating_add(i64::from(rules.dry_run_seconds));
    let at = Timestamp::from_second(at_second).unwrap_or(since);
    let left = at_second - now.as_second();
    if left > 0 {
        let left = u64::try_from(left).unwrap_or(u64::MAX);
        report.recheck_after_seconds =
            Some(report.recheck_after_seconds.map_or(left, |r| r.min(left)));
    }
    report.node_escalation = Some(NodeEscalation {
        reason,
        at: at.to_string(),
        escalated: left <= 0 && spec.mode == gpuready_api::Mode::Enforce,
    });
}
