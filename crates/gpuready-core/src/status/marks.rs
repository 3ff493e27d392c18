//! What the controller marks on a profile's status beside the tally's verdict:
//! a profile that breaks the CRD's rules, a selector that reads gpuready's own
//! labels, refused writes, the `NoExecute` budget and the time to ready.

use gpuready_api::GpuNodeProfileStatus;
use gpuready_api::keys;
use jiff::Timestamp;

use crate::no_execute::BudgetView;
use crate::tally::ProfileTally;
use crate::timeline;

use super::condition::{CONDITION_STALLED, condition};

/// Why a profile the API server admitted breaks the CRD's rules (admitted by an
/// older CRD, or stored before a rule existed): the first broken rule as
/// `field: message`, or None when it is valid.
pub fn profile_problem(profile: &gpuready_api::GpuNodeProfile) -> Option<String> {
    if let Some(e) = profile.validate().into_iter().next() {
        return Some(e.to_string());
    }
    crate::select::profile_selector(profile)
        .err()
        .map(|e| format!("spec.nodeSelector: {}", e.message))
}

/// Why a profile's selector depends on what gpuready writes: it reads a key
/// another profile's `readyLabels` sets (admission sees one profile at a time
/// and cannot refuse it), on nodes that profile may govern. gpuready ignores
/// the labels it wrote when it selects ([`crate::assess::selectable_labels`]),
/// so no write loop follows; this names the mistake on the profile. `None`
/// when the selector is independent — or when the two profiles can never
/// select the same node ([`crate::select::provably_disjoint`]): then the label
/// it reads is never one gpuready wrote there, and the profile works as
/// written (issue 32 found such a profile reported Stalled).
pub fn selector_feedback(
    profile: &gpuready_api::GpuNodeProfile,
    profiles: &[std::sync::Arc<gpuready_api::GpuNodeProfile>],
) -> Option<String> {
    let name = profile.metadata.name.as_deref().unwrap_or_default();
    profile.spec.selector_keys().into_iter().find_map(|key| {
        profiles
            .iter()
            .filter(|o| o.metadata.name.as_deref() != Some(name))
            .filter(|o| !crate::select::provably_disjoint(profile, o))
            .find(|o| o.spec.ready_labels.contains_key(key))
            .map(|o| {
                format!(
                    "spec.nodeSelector: reads {key:?}, a label GpuNodeProfile {} sets through readyLabels: gpuready ignores labels it wrote itself when it selects nodes, so this requirement never sees them; select on labels gpuready does not write",
                    o.metadata.name.as_deref().unwrap_or_default()
                )
            })
    })
}

/// `status` saying the profile is invalid, the way kstatus (and so Flux) reads a
/// failure that needs a person: `Ready=False` and `Stalled=True`, both with reason
/// `InvalidProfile` and the broken rule as message. Without it such a profile
/// looks healthy (`Ready=True NoMatchingNodes`) while gpuready ignores it.
pub fn mark_invalid(
    status: GpuNodeProfileStatus,
    problem: &str,
    generation: Option<i64>,
    previous: Option<&GpuNodeProfileStatus>,
    now: Timestamp,
) -> GpuNodeProfileStatus {
    let message = format!("the profile breaks a rule of the GpuNodeProfile CRD: {problem}");
    mark_failed(
        status,
        keys::REASON_INVALID_PROFILE,
        &message,
        generation,
        previous,
        now,
    )
}

/// `status` with the profile's `NoExecute` budget (`None`: the profile has
/// no `escalation`). Escalations held back are named in the `SafetyBrake`
/// condition's message too, where whoever looks at the brake looks.
pub fn with_no_execute(
    mut status: GpuNodeProfileStatus,
    budget: Option<&BudgetView>,
) -> GpuNodeProfileStatus {
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    status.no_execute = budget.map(|b| gpuready_api::NoExecuteBudget {
        nodes: count(b.nodes),
        node_limit: count(b.node_limit),
        nodes_held: count(b.nodes_held),
        devices: count(b.devices),
        device_limit: count(b.device_limit),
        devices_held: count(b.devices_held),
    });
    let Some(b) = budget.filter(|b| b.nodes_held + b.devices_held > 0) else {
        return status;
    };
    if let Some(c) = status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == keys::CONDITION_SAFETY_BRAKE)
    {
        c.message = format!(
            "{}; escalations to NoExecute held: {} node(s) ({} of at most {} escalated), {} device(s) ({} of at most {} escalated)",
            c.message,
            b.nodes_held,
            b.nodes,
            b.node_limit,
            b.devices_held,
            b.devices,
            b.device_limit
        );
    }
    status
}

/// `status` with the profile's recent joins (`status.timeToReady`): the
/// joins of the last [`timeline::STATUS_WINDOW_SECONDS`] among the nodes'
/// timeline records; absent without any.
pub fn with_time_to_ready(
    mut status: GpuNodeProfileStatus,
    tally: &ProfileTally,
    now: Timestamp,
) -> GpuNodeProfileStatus {
    let secs = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    status.time_to_ready =
        timeline::time_to_ready(tally.joins.values(), now, timeline::STATUS_WINDOW_SECONDS).map(
            |t| gpuready_api::TimeToReady {
                joins: i32::try_from(t.joins).unwrap_or(i32::MAX),
                window_seconds: timeline::STATUS_WINDOW_SECONDS,
                p50_seconds: secs(t.p50_seconds),
                p90_seconds: secs(t.p90_seconds),
                max_seconds: secs(t.max_seconds),
                slowest_layer: t.slowest_step.map(|s| s.as_str().to_owned()),
            },
        );
    status
}

/// `status` saying the API server refuses gpuready's writes to `count` of the
/// profile's nodes (an admission policy, RBAC): `Ready=False`, `Stalled=True`
/// with reason `WritesRefused` and the server's reason for the first node, so
/// kstatus reads Failed instead of the Current a `Ready=True` would claim while
/// the nodes stay as they were.
pub fn mark_refused(
    status: GpuNodeProfileStatus,
    count: usize,
    node: &str,
    why: &str,
    generation: Option<i64>,
    previous: Option<&GpuNodeProfileStatus>,
    now: Timestamp,
) -> GpuNodeProfileStatus {
    let message = format!(
        "the API server refuses gpuready's writes to {count} node(s) of this profile, so their taint, labels or conditions may not match their verdict; node {node}: {why}"
    );
    let message: String = message.chars().take(1024).collect();
    mark_failed(
        status,
        keys::REASON_WRITES_REFUSED,
        &message,
        generation,
        previous,
        now,
    )
}

fn mark_failed(
    mut status: GpuNodeProfileStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    previous: Option<&GpuNodeProfileStatus>,
    now: Timestamp,
) -> GpuNodeProfileStatus {
    for (type_, status_value) in [(keys::CONDITION_READY, false), (CONDITION_STALLED, true)] {
        let mut c = condition(
            type_,
            status_value,
            reason,
            message.to_owned(),
            generation,
            now,
        );
        if let Some(p) = previous
            .into_iter()
            .flat_map(|p| p.conditions.iter())
            .find(|p| p.type_ == c.type_ && p.status == c.status)
        {
            c.last_transition_time = p.last_transition_time.clone();
        }
        status.conditions.retain(|x| x.type_ != type_);
        status.conditions.push(c);
    }
    status
}
