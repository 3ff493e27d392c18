//! A GpuNodeProfile's status from the assessments of the nodes it matches: counts,
//! kstatus-compatible conditions and a bounded not-ready summary.

use std::collections::BTreeSet;

use gpuready_api::keys::{self, reasons};
use gpuready_api::profile::MAX_NOT_READY_SUMMARY;
use gpuready_api::{GpuNodeProfileStatus, Layer, NotReadyNode};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::assess::NodeAssessment;
use crate::brake::BrakeCondition;
use crate::nfd_crds::NfdCrdCondition;
use crate::tally::{LayerTally, ProfileTally};

mod condition;
mod marks;

pub use condition::CONDITION_STALLED;
use condition::{MAX_NAMES_IN_MESSAGE, condition, count, names_message};
pub use marks::{
    mark_invalid, mark_refused, profile_problem, selector_feedback, with_no_execute,
    with_time_to_ready,
};

/// ` (gpu-1 DriverUpgradeInProgress pod-restart-required, …)` for a lifecycle
/// map, empty when it is.
fn lifecycle_names(m: &std::collections::BTreeMap<String, crate::tally::LifecycleEntry>) -> String {
    if m.is_empty() {
        return String::new();
    }
    let names: Vec<String> = m
        .iter()
        .take(MAX_NAMES_IN_MESSAGE)
        .map(|(n, e)| format!("{n} {} {}", e.reason, e.detail))
        .collect();
    format!(" ({})", names_message(&names, m.len()))
}

/// Extra conditions the controller contributes (safety brake, NFD CRDs).
#[derive(Clone, Debug, Default)]
pub struct ExtraConditions {
    pub brake: Option<BrakeCondition>,
    pub nfd_crds: Option<NfdCrdCondition>,
}

/// The status for a profile whose matched nodes were assessed as `nodes`
/// (governed by it, or in conflict involving it).
pub fn profile_status(
    profile_name: &str,
    generation: Option<i64>,
    nodes: &[&NodeAssessment],
    extra: &ExtraConditions,
    previous: Option<&GpuNodeProfileStatus>,
    now: Timestamp,
) -> GpuNodeProfileStatus {
    let tally = ProfileTally::of(nodes.iter().copied());
    status_from_tally(profile_name, generation, &tally, extra, previous, now)
}

/// The governed nodes each other system holds, as profile status lists them.
fn held_by_system(tally: &ProfileTally) -> Vec<gpuready_api::SystemCount> {
    tally
        .held_by
        .iter()
        .map(|(system, n)| gpuready_api::SystemCount {
            system: *system,
            nodes: i32::try_from(*n).unwrap_or(i32::MAX),
        })
        .collect()
}

/// The status of a profile from its running tally: work bounded by the number
/// of layers and names shown, whatever the size of the fleet.
pub fn status_from_tally(
    profile_name: &str,
    generation: Option<i64>,
    tally: &ProfileTally,
    extra: &ExtraConditions,
    previous: Option<&GpuNodeProfileStatus>,
    now: Timestamp,
) -> GpuNodeProfileStatus {
    let (ready, reason, message) = ready_state(profile_name, tally);
    let mut conditions = vec![condition(
        keys::CONDITION_READY,
        ready,
        reason,
        message,
        generation,
        now,
    )];
    conditions.extend(layer_conditions(tally, generation, now));
    conditions.push(stalled_condition(&tally.conflicts, generation, now));
    conditions.extend(extra_conditions(extra, generation, now));
    if let Some(prev) = previous {
        keep_transition_times(&mut conditions, prev);
    }
    let matched = tally.matched();
    GpuNodeProfileStatus {
        observed_generation: generation,
        matched_nodes: count(matched),
        ready_nodes: count(tally.counts.ready),
        not_ready_nodes: count(tally.not_ready.len()),
        conditions,
        not_ready_summary: not_ready_summary(tally),
        tainted_devices: count(tally.tainted_device_count()),
        tainted_device_summary: tainted_device_summary(tally),
        maintenance_nodes: count(tally.maintenance.len()),
        waiting_for_gate_nodes: count(tally.waiting_for_gate.len()),
        maintenance_summary: lifecycle_summary(&tally.maintenance),
        waiting_for_gate_summary: lifecycle_summary(&tally.waiting_for_gate),
        escalations: escalation_summary(tally),
        held_by_system: held_by_system(tally),
        not_evicted_pods: count(tally.not_evicted_pods),
        no_execute: None,
        time_to_ready: None,
    }
}

/// The Ready condition's status, reason and message: a conflict first (it
/// needs a person), then no node, then maintenance or gates, then readiness.
fn ready_state(profile_name: &str, tally: &ProfileTally) -> (bool, &'static str, String) {
    let matched = tally.matched();
    if !tally.conflicts.is_empty() {
        // A conflict needs a person; say so in the reason `kubectl get gnp`
        // shows, not as one more "not ready".
        return (
            false,
            reasons::CONFLICT,
            format!(
                "{} node(s) also selected by another GpuNodeProfile: {}",
                tally.conflicts.len(),
                conflict_names(&tally.conflicts)
            ),
        );
    }
    if matched == 0 {
        return (
            true,
            reasons::NO_NODES,
            format!("the nodeSelector of {profile_name} matches no node"),
        );
    }
    if tally.not_ready.is_empty() {
        return held_or_ready(tally, matched);
    }
    if tally.not_ready_observed == tally.not_ready.len() {
        // Observe: gpuready writes nothing to these nodes, so there is nothing
        // to wait for. Ready=True (kstatus Current, a Flux health check passes);
        // the reason and the counts tell that nodes are not ready.
        return (
            true,
            reasons::OBSERVED_NODES_NOT_READY,
            format!(
                "Observe mode (report only): {}/{matched} node(s) not ready: {}",
                tally.not_ready.len(),
                not_ready_names(tally)
            ),
        );
    }
    (
        false,
        reasons::NODES_NOT_READY,
        format!(
            "{}/{matched} node(s) not ready: {}",
            tally.not_ready.len(),
            not_ready_names(tally)
        ),
    )
}

/// The Ready state when no node fails: in maintenance, waiting for another
/// gate, or simply ready.
fn held_or_ready(tally: &ProfileTally, matched: usize) -> (bool, &'static str, String) {
    if tally.maintenance.is_empty() && tally.waiting_for_gate.is_empty() {
        return (
            true,
            reasons::READY,
            format!("all {matched} node(s) are ready"),
        );
    }
    // Maintenance is not failure, and a node another gate holds is not
    // gpuready's to fail: nothing here needs a person (kstatus Current, a
    // Flux health check passes through an upgrade wave); the reason and
    // the counts tell.
    let reason = if tally.maintenance.is_empty() {
        keys::lifecycle::NODES_WAITING_FOR_GATE
    } else {
        keys::lifecycle::NODES_IN_MAINTENANCE
    };
    (
        true,
        reason,
        format!(
            "no node fails: {} ready, {} in maintenance{}, {} waiting for another readiness gate{} (of {matched})",
            tally.counts.ready,
            tally.maintenance.len(),
            lifecycle_names(&tally.maintenance),
            tally.waiting_for_gate.len(),
            lifecycle_names(&tally.waiting_for_gate),
        ),
    )
}

/// The first not-ready nodes with their reasons, for a condition message.
fn not_ready_names(tally: &ProfileTally) -> String {
    let names: Vec<String> = tally
        .not_ready
        .iter()
        .take(MAX_NAMES_IN_MESSAGE)
        .map(|(n, e)| format!("{n} ({})", e.reason))
        .collect();
    names_message(&names, tally.not_ready.len())
}

/// The first nodes in conflict, for a condition message.
fn conflict_names(conflicts: &BTreeSet<String>) -> String {
    names_message(
        &conflicts
            .iter()
            .take(MAX_NAMES_IN_MESSAGE)
            .cloned()
            .collect::<Vec<_>>(),
        conflicts.len(),
    )
}

/// One condition per layer, in layer order, leaving out the optional layers
/// no node has evidence for.
fn layer_conditions(
    tally: &ProfileTally,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let empty = LayerTally::default();
    Layer::every()
        .filter_map(|layer| {
            let t = tally.layers.get(&layer).unwrap_or(&empty);
            // The optional layers are judged only where their evidence exists or
            // the profile asks for them; a profile none of whose nodes has one
            // gets no condition for it.
            if Layer::OPTIONAL.contains(&layer) && t.ready == 0 && t.failing.is_empty() {
                return None;
            }
            Some(layer_condition(
                layer,
                t,
                tally.counts.governed,
                generation,
                now,
            ))
        })
        .collect()
}

/// A layer's condition: Ready on every governed node, or the most common
/// reason of those failing and the first of them.
fn layer_condition(
    layer: Layer,
    t: &LayerTally,
    governed: usize,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    if t.failing.is_empty() {
        return condition(
            &layer.condition_type(),
            true,
            reasons::READY,
            format!("{layer} is Ready on all {governed} governed node(s)"),
            generation,
            now,
        );
    }
    let top = t
        .reasons
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(r, _)| r.as_str())
        .unwrap_or("NotReady");
    let names: Vec<String> = t
        .failing
        .iter()
        .take(MAX_NAMES_IN_MESSAGE)
        .map(|(n, r)| format!("{n} ({r})"))
        .collect();
    condition(
        &layer.condition_type(),
        false,
        top,
        format!(
            "{}/{governed} node(s): {}",
            t.failing.len(),
            names_message(&names, t.failing.len())
        ),
        generation,
        now,
    )
}

/// Stalled: whether nodes are in conflict with another profile.
fn stalled_condition(
    conflicts: &BTreeSet<String>,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    if conflicts.is_empty() {
        return condition(
            CONDITION_STALLED,
            false,
            "NoConflicts",
            "no node is selected by another profile too".into(),
            generation,
            now,
        );
    }
    condition(
        CONDITION_STALLED,
        true,
        reasons::CONFLICT,
        format!(
            "{} node(s) also selected by another GpuNodeProfile, left as they are: {}",
            conflicts.len(),
            conflict_names(conflicts)
        ),
        generation,
        now,
    )
}

/// The conditions the controller contributes: the safety brake, then NFD's CRDs.
fn extra_conditions(
    extra: &ExtraConditions,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    // Each contribution says its type, status, reason and message in its own
    // fields; from there on both become a condition the same way.
    let brake = extra.brake.as_ref().map(|b| {
        (
            keys::CONDITION_SAFETY_BRAKE,
            b.engaged,
            &b.reason,
            &b.message,
        )
    });
    let nfd_crds = extra
        .nfd_crds
        .as_ref()
        .map(|n| (keys::CONDITION_NFD_CRDS, n.ready, &n.reason, &n.message));
    brake
        .into_iter()
        .chain(nfd_crds)
        .map(|(type_, status, reason, message)| {
            condition(type_, status, reason, message.clone(), generation, now)
        })
        .collect()
}

/// Keeps each condition's lastTransitionTime while its status holds.
fn keep_transition_times(conditions: &mut [Condition], previous: &GpuNodeProfileStatus) {
    for c in conditions {
        if let Some(p) = previous
            .conditions
            .iter()
            .find(|p| p.type_ == c.type_ && p.status == c.status)
        {
            c.last_transition_time = p.last_transition_time.clone();
        }
    }
}

/// The first not-ready nodes, with the layer and reason that hold each.
fn not_ready_summary(tally: &ProfileTally) -> Vec<NotReadyNode> {
    tally
        .not_ready
        .iter()
        .take(MAX_NOT_READY_SUMMARY)
        .map(|(name, e)| NotReadyNode {
            name: name.clone(),
            layer: e.layer.clone(),
            reason: e.reason.clone(),
        })
        .collect()
}

/// The first nodes with gated devices, with (at most 64 of) their devices.
fn tainted_device_summary(tally: &ProfileTally) -> Vec<gpuready_api::profile::TaintedDevices> {
    tally
        .tainted_devices
        .iter()
        .take(MAX_NOT_READY_SUMMARY)
        .map(|(node, devices)| gpuready_api::profile::TaintedDevices {
            node: node.clone(),
            devices: devices.iter().take(64).cloned().collect(),
        })
        .collect()
}

/// The first escalating devices, their long messages cut to 512 characters.
fn escalation_summary(tally: &ProfileTally) -> Vec<gpuready_api::DeviceEscalation> {
    tally
        .escalations
        .values()
        .flatten()
        .take(MAX_NOT_READY_SUMMARY)
        .map(|e| gpuready_api::DeviceEscalation {
            eviction: e.eviction.as_ref().map(|m| m.chars().take(512).collect()),
            not_evicted: e
                .not_evicted
                .as_ref()
                .map(|m| m.chars().take(512).collect()),
            ..e.clone()
        })
        .collect()
}

fn lifecycle_summary(
    m: &std::collections::BTreeMap<String, crate::tally::LifecycleEntry>,
) -> Vec<gpuready_api::LifecycleNode> {
    m.iter()
        .take(MAX_NOT_READY_SUMMARY)
        .map(|(name, e)| gpuready_api::LifecycleNode {
            name: name.clone(),
            reason: e.reason.clone(),
            detail: e.detail.chars().take(256).collect(),
        })
        .collect()
}

#[cfg(test)]
mod invalid_tests;
