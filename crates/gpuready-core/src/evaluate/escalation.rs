//! Escalation of the node's taint to `NoExecute` (`spec.escalation`, for the
//! reasons it names): a failing node whose reason escalates keeps its taint's
//! own effect for `dryRunSeconds` after `GpuReady` left True, then `NoExecute`.
//! Counted from durable state only (the condition's lastTransitionTime), so a
//! restart reaches the same verdict. A bad device's rule escalates in `devices`.
//!
//! With `escalation.extendedResourcePods: TaintNode`, a device escalated to
//! `NoExecute` that pods still hold as a DRA-backed extended resource (which
//! Kubernetes' device taint eviction does not evict, kubernetes #141290) fails
//! the DevicePlugin layer and escalates the node's taint at once (the device's
//! dry run was served): the node-level `NoExecute` path, which the taint
//! manager does enforce, planned like any other node taint (the safety brake
//! included).

use gpuready_api::keys::reasons;
use gpuready_api::{ExtendedResourcePods, GpuNodeProfileSpec, Layer, Mode};
use jiff::Timestamp;

use super::judged::Judged;
use crate::report::{LayerReport, NodeEscalation, NodeState, Status};

pub(super) fn apply_node_escalation(judged: &Judged, report: &mut LayerReport) {
    let Judged { spec, facts, now } = *judged;
    let Some(rules) = &spec.escalation else {
        return;
    };
    // Already escalated for pods Kubernetes does not evict: that stands.
    if report.state() != NodeState::NotReady
        || report.node_escalation.as_ref().is_some_and(|e| e.escalated)
    {
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
    let since = facts.gpu_ready_left_true().unwrap_or(now);
    let at_second = since
        .as_second()
        .saturating_add(i64::from(rules.dry_run_seconds));
    let at = Timestamp::from_second(at_second).unwrap_or(since);
    let left = at_second - now.as_second();
    report.recheck_within(left);
    report.node_escalation = Some(NodeEscalation {
        reason,
        at: at.to_string(),
        escalated: left <= 0 && spec.mode == Mode::Enforce,
        held: None,
    });
}

/// `escalation.extendedResourcePods: TaintNode`: while pods hold a device
/// whose escalation rule is `NoExecute` as a DRA-backed extended resource, the
/// DevicePlugin layer fails (the node is not ready) and the node's taint is
/// escalated, counted from the earliest such device's `NoExecute` time.
pub(super) fn apply_extended_resource_escalation(
    spec: &GpuNodeProfileSpec,
    report: &mut LayerReport,
) {
    let wanted = spec
        .escalation
        .as_ref()
        .is_some_and(|e| e.extended_resource_pods == ExtendedResourcePods::TaintNode);
    if !wanted || spec.mode != Mode::Enforce {
        return;
    }
    let Some(g) = &report.devices else {
        return;
    };
    let held: Vec<(&str, usize, &str)> = g
        .bad
        .iter()
        .filter_map(|b| {
            let e = b.escalation.as_ref().filter(|e| e.effect == "NoExecute")?;
            let n = b.not_evicted.as_ref().filter(|n| n.no_execute_now)?;
            Some((b.device.as_str(), n.pods.len(), e.no_execute_at.as_str()))
        })
        .collect();
    let Some(at) = held.iter().map(|(_, _, at)| *at).min().map(str::to_owned) else {
        return;
    };
    let what = held
        .iter()
        .map(|(d, n, _)| format!("{d} ({n} pod(s))"))
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(l) = report
        .layers
        .iter_mut()
        .find(|l| l.layer == Layer::DevicePlugin && l.status == Status::Ready)
    {
        l.status = Status::NotReady;
        l.reason = reasons::EXTENDED_RESOURCE_PODS_NOT_EVICTED.to_owned();
        l.message = format!(
            "pods hold {what} as a DRA extended resource; the devices are tainted NoExecute but Kubernetes does not evict such pods ({}), so the node's taint turns NoExecute until they are gone (escalation.extendedResourcePods: TaintNode); {}",
            crate::devices::EXTENDED_RESOURCE_EVICTION_ISSUE,
            l.message
        );
    }
    report.node_escalation = Some(NodeEscalation {
        reason: reasons::EXTENDED_RESOURCE_PODS_NOT_EVICTED.to_owned(),
        at,
        escalated: true,
        held: None,
    });
}
