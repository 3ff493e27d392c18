//! The `GpuReady*` node conditions a verdict calls for: the summary
//! condition's message (the failing layers, the trailing notes, the devices
//! gated) and the per-layer conditions, as changes against the node's.

use std::collections::BTreeSet;

use gpuready_api::keys::{self, reasons};
use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::facts::NodeFacts;
use crate::report::{LayerReport, NodeState, Status};

use super::changes::{ConditionChange, DesiredCondition, PlanOptions};

/// Node conditions carry a human message; keep it readable in `kubectl describe`.
const MAX_CONDITION_MESSAGE: usize = 1024;

/// The overall `GpuReady` condition for a report.
pub fn gpu_ready_condition(profile: &str, report: &LayerReport) -> DesiredCondition {
    let type_ = keys::CONDITION_GPU_READY.to_owned();
    let gates = &report.lifecycle.gates;
    match report.state() {
        NodeState::Ready => {
            return DesiredCondition {
                type_,
                status: "True".into(),
                reason: reasons::READY.into(),
                message: format!(
                    "every gating layer is Ready under GpuNodeProfile {profile}{}",
                    trailing_notes(report)
                ),
            };
        }
        NodeState::WaitingForGate => {
            return DesiredCondition {
                type_,
                status: "False".into(),
                reason: keys::lifecycle::WAITING_FOR_GATE.into(),
                message: format!(
                    "every gating layer is Ready under GpuNodeProfile {profile}, but another readiness gate holds the node: {}; it takes no GPU work until that is gone (gpuready leaves other gates to their owners, and does not hold its own taint for them){}",
                    report.lifecycle.gates_described(),
                    trailing_notes(report)
                ),
            };
        }
        NodeState::NotReady | NodeState::Maintenance => {}
    }
    let maintenance = report.lifecycle.maintenance.as_ref();
    let failures: Vec<_> = report.failures().collect();
    // Maintenance gates whatever the layers say: its status is False.
    let status = if maintenance.is_some() || failures.iter().any(|l| l.status == Status::NotReady) {
        "False"
    } else {
        "Unknown"
    };
    let mut reason = maintenance
        .map(|m| m.reason.to_owned())
        .or_else(|| failures.first().map(|l| l.reason.clone()))
        .unwrap_or_default();
    // Evidence from the Node object is implied; any other source is named so a
    // reader knows which object to inspect.
    let mut message = failures
        .iter()
        .map(|l| {
            if l.evidence.is_node_object() {
                format!("{}: {}", l.layer, l.message)
            } else {
                format!("{} (from {}): {}", l.layer, l.evidence, l.message)
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    // The layer that is down during maintenance still says what it sees,
    // under the maintenance reason.
    if let Some(m) = maintenance {
        message = if message.is_empty() {
            format!("{}; every gating layer is Ready", m.message)
        } else {
            format!("{}; {message}", m.message)
        };
    }
    if let Some(d) = &report.deadline {
        message = format!("{} ({reason}); {message}", d.describe());
        reason = reasons::NOT_READY_DEADLINE_EXCEEDED.to_owned();
    }
    if !gates.is_empty() {
        message.push_str(&format!(
            "; also held by another readiness gate: {}",
            report.lifecycle.gates_short()
        ));
    }
    if let Some(e) = &report.node_escalation {
        message.push_str(&if e.escalated {
            format!(
                "; the taint escalated to NoExecute at {} ({})",
                e.at, e.reason
            )
        } else if let Some(why) = &e.held {
            format!(
                "; the taint was due to escalate at {} ({}): {why}",
                e.at, e.reason
            )
        } else {
            format!(
                "; the taint escalates to NoExecute at {} ({})",
                e.at, e.reason
            )
        });
    }
    message.push_str(&trailing_notes(report));
    DesiredCondition {
        type_,
        status: status.into(),
        reason,
        message,
    }
}

/// What every `GpuReady` message ends with: the devices gated by
/// DeviceTaintRules and what the repair annotation did.
fn trailing_notes(report: &LayerReport) -> String {
    let repair = report
        .lifecycle
        .repair
        .as_ref()
        .and_then(|r| r.note())
        .map(|n| format!("; {n}"))
        .unwrap_or_default();
    format!("{}{repair}", devices_note(report))
}

/// `; devices tainted by DeviceTaintRule: gpu-3 (FatalXid)` when device gating
/// took devices out of service, so `kubectl describe node` names them.
fn devices_note(report: &LayerReport) -> String {
    match &report.devices {
        Some(g) if !g.bad.is_empty() => {
            let escalating: Vec<String> = g
                .bad
                .iter()
                .filter_map(|b| {
                    let e = b.escalation.as_ref()?;
                    Some(if e.effect == "NoExecute" {
                        format!("{} NoExecute since {}", b.device, e.no_execute_at)
                    } else if let Some(why) = &e.held {
                        format!("{} due at {}, {why}", b.device, e.no_execute_at)
                    } else {
                        format!(
                            "{} dry run (effect None) until {}",
                            b.device, e.no_execute_at
                        )
                    })
                })
                .collect();
            let not_evicted: String = g
                .bad
                .iter()
                .filter_map(|b| b.not_evicted.as_ref())
                .map(|n| format!("; {}", n.message))
                .collect();
            format!(
                "; {} device(s) tainted by gpuready's DeviceTaintRules: {}; {} of at least {} GPU(s) ready{}{not_evicted}",
                g.bad.len(),
                g.describe(),
                g.ready_gpus,
                g.min_ready_gpus,
                if escalating.is_empty() {
                    String::new()
                } else {
                    format!("; escalating: {}", escalating.join(", "))
                }
            )
        }
        _ => String::new(),
    }
}

pub(super) fn condition_status(s: Status) -> &'static str {
    match s {
        Status::Ready => "True",
        Status::NotReady => "False",
        Status::Unknown => "Unknown",
    }
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_CONDITION_MESSAGE {
        let mut cut = MAX_CONDITION_MESSAGE - 3;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// gpuready's conditions to write: a desired condition whose status, reason or
/// message differs from the node's (keeping `lastTransitionTime` when only the
/// reason or message moved), one whose heartbeat is due when a heartbeat is
/// set, and the removal of gpuready's condition types no longer wanted. `None`
/// when the node already carries exactly these.
pub(super) fn plan_conditions(
    facts: &NodeFacts,
    desired: Vec<DesiredCondition>,
    opts: &PlanOptions,
) -> Option<ConditionChange> {
    let now = Time(opts.now);
    let mut change = ConditionChange::default();
    for d in &desired {
        let message = truncate(d.message.clone());
        let current = facts.gpu_conditions.iter().find(|c| c.type_ == d.type_);
        let transition = match current {
            Some(c) if c.status == d.status => {
                c.last_transition_time.clone().unwrap_or(now.clone())
            }
            _ => now.clone(),
        };
        let heartbeat_due = |c: &NodeCondition| {
            opts.heartbeat_seconds > 0
                && c.last_heartbeat_time.as_ref().is_none_or(|hb| {
                    opts.now.as_second() - hb.0.as_second() >= opts.heartbeat_seconds
                })
        };
        let same_message = |m: &str| {
            m == message
                || (opts.write_refused
                    && d.type_ == keys::CONDITION_GPU_READY
                    && m.strip_prefix(message.as_str())
                        .and_then(|rest| rest.strip_prefix("; "))
                        .is_some_and(|note| {
                            note.starts_with(keys::TAINT_REFUSED)
                                || note.starts_with(keys::WRITE_REFUSED)
                        }))
        };
        let unchanged = current.is_some_and(|c| {
            c.status == d.status
                && c.reason.as_deref() == Some(d.reason.as_str())
                && c.message.as_deref().is_some_and(same_message)
                && !heartbeat_due(c)
        });
        if !unchanged {
            change.set.push(NodeCondition {
                type_: d.type_.clone(),
                status: d.status.clone(),
                reason: Some(d.reason.clone()),
                message: Some(message),
                last_transition_time: Some(transition),
                last_heartbeat_time: Some(now.clone()),
            });
        }
    }
    // gpuready's types on the node that are no longer wanted (per-layer
    // conditions switched off, a profile gone): removed by type, nothing else.
    change.remove = facts
        .gpu_conditions
        .iter()
        .filter(|c| !desired.iter().any(|d| d.type_ == c.type_))
        .map(|c| c.type_.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    (!change.set.is_empty() || !change.remove.is_empty()).then_some(change)
}
