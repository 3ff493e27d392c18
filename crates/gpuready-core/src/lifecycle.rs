//! The node's lifecycle beside its layers: maintenance the GPU operator drives
//! (a driver upgrade, a MIG change, paused operands), its bad ends, and the
//! readiness gates other systems hold on the node. Maintenance is not failure:
//! such a node stays gated under its own reason and is counted apart, so an
//! upgrade wave pages no one and trips no brake. Who holds the node besides
//! is named by the table in `neighbours`. Pure: labels, taints, annotations
//! and the `GpuReady` condition are inputs, time is an input.

use std::collections::BTreeMap;

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::keys::{self, lifecycle as lc, nvidia, reasons};
use jiff::Timestamp;
use serde::Serialize;

use crate::facts::NodeFacts;
use crate::neighbours::{self, Gate, NeighbourSystem, NodeMarks};
use crate::repair::RepairOutcome;

/// Maintenance, or the way it ended badly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Maintenance {
    /// `DriverUpgradeInProgress`, `MigReconfiguring`, `OperandsPaused`; or,
    /// when `failed`, `DriverUpgradeFailed`, `MigConfigFailed`, `MaintenanceStuck`.
    pub reason: &'static str,
    /// Ended badly or lasted too long: a failure like any other.
    pub failed: bool,
    /// The state the node is in (`pod-restart-required`, `pending`) or the
    /// paused operands: what the profile's summary shows.
    pub detail: String,
    pub message: String,
}

impl Maintenance {
    /// A bad end (a failed upgrade or MIG change, stuck maintenance): built in
    /// one place so every failure record sets `failed` the same way.
    fn failed(reason: &'static str, detail: String, message: String) -> Self {
        Self {
            reason,
            failed: true,
            detail,
            message,
        }
    }

    /// Maintenance under way, not a failure: the counterpart of `failed`.
    fn under_way(reason: &'static str, detail: String, message: String) -> Self {
        Self {
            reason,
            failed: false,
            detail,
            message,
        }
    }
}

/// What the node's lifecycle adds to its layers' verdict.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    pub maintenance: Option<Maintenance>,
    /// Other systems' holds on the node, each named with what it is doing
    /// and what releases it; gpuready never touches them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<Gate>,
    /// The GPU operator's upgrade cordon: part of the maintenance, so no
    /// other gate, but a hold by a named system all the same.
    pub upgrade_cordon: Option<Gate>,
    /// The operator's repair annotation and what it did.
    pub repair: Option<RepairOutcome>,
    /// Seconds until a maintenance deadline passes.
    #[serde(skip)]
    pub recheck_after_seconds: Option<u64>,
}

impl Lifecycle {
    /// No maintenance and no other gate: nothing to report.
    pub fn is_quiet(&self) -> bool {
        self.maintenance.is_none() && self.gates.is_empty() && self.repair.is_none()
    }

    /// Every system that holds the node, once each, in status order.
    pub fn held_by(&self) -> Vec<NeighbourSystem> {
        let mut out: Vec<NeighbourSystem> = self
            .gates
            .iter()
            .chain(&self.upgrade_cordon)
            .map(|g| g.system)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The other gates, short (`NodeWright (nodewright.nvidia.com=…)`), `; `-joined.
    pub fn gates_short(&self) -> String {
        self.gates_joined(Gate::short)
    }

    /// The other gates, each with what it is doing and what releases it.
    pub fn gates_described(&self) -> String {
        self.gates_joined(Gate::describe)
    }

    /// The other gates, each said by `say`, `; `-joined: the short and the
    /// described list are one list that differs only in how a gate is said.
    fn gates_joined(&self, say: fn(&Gate) -> String) -> String {
        self.gates.iter().map(say).collect::<Vec<_>>().join("; ")
    }
}

/// Steps of a driver upgrade that take the node out of service: from the
/// cordon to the uncordon. `upgrade-required` only queues the node, and
/// `upgrade-done` has it back; values the controller may add later are not
/// read as maintenance (the layers judge the node as they find it).
fn upgrade_step(state: &str) -> Option<usize> {
    let steps = &lc::UPGRADE_STATES[1..10];
    steps.iter().position(|s| *s == state)
}

/// The node's lifecycle under `spec` at `now`.
pub fn judge(spec: &GpuNodeProfileSpec, facts: &NodeFacts, now: Timestamp) -> Lifecycle {
    let upgrade_cordon = upgrade_owns_cordon(facts);
    let mut out = Lifecycle {
        maintenance: maintenance(facts),
        gates: gates(spec, facts, upgrade_cordon),
        upgrade_cordon: upgrade_cordon
            .filter(|_| facts.unschedulable)
            .map(neighbours::upgrade_cordon),
        repair: None,
        recheck_after_seconds: None,
    };
    // The maintenance names the cordon that comes with it, and what lifts it.
    if let (Some(m), Some(g)) = (out.maintenance.as_mut(), &out.upgrade_cordon)
        && (m.reason == lc::DRIVER_UPGRADE_IN_PROGRESS || m.reason == lc::DRIVER_UPGRADE_FAILED)
    {
        m.message.push_str(&format!("; held by {}", g.describe()));
    }
    if let Some(m) = &out.maintenance
        && !m.failed
        && let Some(limit) = spec.maintenance.as_ref().and_then(|r| r.deadline_seconds)
    {
        // When the maintenance started, as far as durable state tells: a
        // node still True (or never judged) enters it now.
        let since = facts.gpu_ready_left_true().unwrap_or(now);
        let left = since.as_second() + i64::from(limit) - now.as_second();
        if left > 0 {
            out.recheck_after_seconds = Some(u64::try_from(left).unwrap_or(u64::MAX));
        } else {
            let stuck = Maintenance::failed(
                lc::MAINTENANCE_STUCK,
                m.detail.clone(),
                format!(
                    "in maintenance for longer than the {} deadline (counting since {since}, when GpuReady left True): {}; look at the GPU operator's upgrade controller or mig-manager (its pod log and Events on the node)",
                    crate::duration::human_seconds(i64::from(limit)),
                    m.message
                ),
            );
            out.maintenance = Some(stuck);
        }
    }
    out
}

fn maintenance(facts: &NodeFacts) -> Option<Maintenance> {
    let label = |k: &str| facts.labels.get(k).map(String::as_str);
    let upgrade = label(lc::DRIVER_UPGRADE_STATE);
    let mig = label(nvidia::MIG_CONFIG_STATE);
    let paused = paused_operands(facts);
    // Bad ends first: they are failures whatever else is going on.
    if upgrade == Some(lc::UPGRADE_FAILED) {
        return Some(Maintenance::failed(
            lc::DRIVER_UPGRADE_FAILED,
            lc::UPGRADE_FAILED.to_owned(),
            format!(
                "the GPU operator's driver upgrade failed on this node ({}={}): read the driver pod's log and the upgrade controller's Events on the node, fix the cause, then let the controller retry (it moves the node back to {})",
                lc::DRIVER_UPGRADE_STATE,
                lc::UPGRADE_FAILED,
                lc::UPGRADE_REQUIRED
            ),
        ));
    }
    if mig == Some(lc::MIG_FAILED) {
        return Some(Maintenance::failed(
            reasons::MIG_CONFIG_FAILED,
            lc::MIG_FAILED.to_owned(),
            format!(
                "mig-manager could not apply the MIG configuration {} ({}={}): read the nvidia-mig-manager pod's log on the node, fix the configuration or free the GPUs, and set {} again",
                label(nvidia::MIG_CONFIG).unwrap_or("(none)"),
                nvidia::MIG_CONFIG_STATE,
                lc::MIG_FAILED,
                nvidia::MIG_CONFIG
            ),
        ));
    }
    if let Some(state) = upgrade
        && let Some(i) = upgrade_step(state)
    {
        return Some(Maintenance::under_way(
            lc::DRIVER_UPGRADE_IN_PROGRESS,
            state.to_owned(),
            format!(
                "the GPU operator is upgrading the driver ({}={state}, step {} of 9 from cordon to uncordon{}): maintenance, not a failure; gpuready keeps the node gated until the upgrade is done and every layer is Ready",
                lc::DRIVER_UPGRADE_STATE,
                i + 1,
                paused_note(&paused)
            ),
        ));
    }
    if let Some(state @ (lc::MIG_PENDING | lc::MIG_REBOOTING)) = mig {
        return Some(Maintenance::under_way(
            lc::MIG_RECONFIGURING,
            state.to_owned(),
            format!(
                "mig-manager is re-partitioning the GPUs to {} ({}={state}{}{}): maintenance, not a failure; gpuready keeps the node gated until the state is success and every layer is Ready",
                label(nvidia::MIG_CONFIG).unwrap_or("(no nvidia.com/mig.config)"),
                nvidia::MIG_CONFIG_STATE,
                if state == lc::MIG_REBOOTING {
                    ", the node reboots to apply it"
                } else {
                    ""
                },
                paused_note(&paused)
            ),
        ));
    }
    if !paused.is_empty() {
        return Some(Maintenance::under_way(
            lc::OPERANDS_PAUSED,
            paused.join(", "),
            format!(
                "GPU operator operands are paused ({}) while no upgrade or MIG state explains it: the driver manager or mig-manager paused them and has not restored them yet; if it stays, look at those pods' logs",
                paused.join(", ")
            ),
        ));
    }
    None
}

/// The labels that tell GPU clients to leave the node now, each as
/// `key=value` in key order; empty when none does. A GPU operator operand or
/// its client label paused (`paused-for-driver-upgrade`,
/// `paused-for-mig-change`, or such a suffix, which k8s-driver-manager v0.12.0
/// appends to a value it does not know), a driver upgrade between the cordon
/// and the uncordon, a MIG change under way. A process holding `/dev/nvidia*`
/// then keeps the driver from unloading or the GPU from changing MIG mode:
/// `gpuready probe` releases NVML while any of these holds, and the Health
/// layer reads its paused report as expected exactly then, so the two cannot
/// disagree on what maintenance is. Failed upgrades and MIG changes are not
/// in it: the probe's reading helps find the cause.
pub fn gpu_clients_paused(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels
        .iter()
        .filter(|(k, v)| {
            let paused = |p: &str| v.as_str() == p || v.ends_with(&format!("_{p}"));
            match k.as_str() {
                lc::DRIVER_UPGRADE_STATE => upgrade_step(v).is_some(),
                nvidia::MIG_CONFIG_STATE => {
                    matches!(v.as_str(), lc::MIG_PENDING | lc::MIG_REBOOTING)
                }
                k if k.starts_with(lc::DEPLOY_LABEL_PREFIX) => {
                    paused(lc::PAUSED_FOR_DRIVER_UPGRADE) || paused(lc::PAUSED_FOR_MIG_CHANGE)
                }
                _ => false,
            }
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// The upgrade controller cordons the node from cordon-required on and keeps
/// it cordoned when the upgrade fails: that cordon is part of the
/// maintenance, not another gate. The state, when it does.
fn upgrade_owns_cordon(facts: &NodeFacts) -> Option<&str> {
    facts
        .labels
        .get(lc::DRIVER_UPGRADE_STATE)
        .map(String::as_str)
        .filter(|s| upgrade_step(s).is_some() || *s == lc::UPGRADE_FAILED)
}

/// `device-plugin=paused-for-driver-upgrade`, … for every paused operand.
fn paused_operands(facts: &NodeFacts) -> Vec<String> {
    facts
        .labels
        .iter()
        .filter_map(|(k, v)| {
            let operand = k.strip_prefix(lc::DEPLOY_LABEL_PREFIX)?;
            (v == lc::PAUSED_FOR_DRIVER_UPGRADE || v == lc::PAUSED_FOR_MIG_CHANGE)
                .then(|| format!("{operand}={v}"))
        })
        .collect()
}

fn paused_note(paused: &[String]) -> String {
    if paused.is_empty() {
        String::new()
    } else {
        format!("; paused: {}", paused.join(", "))
    }
}

/// Other systems' holds (`neighbours::KNOWN`): NVSentinel, NodeWright, a
/// `readiness.k8s.io/` taint that is not gpuready's, a cordon (gpuready never
/// cordons, so every cordon is someone's; the upgrade controller's is its
/// maintenance: `upgrade_cordon`).
fn gates(spec: &GpuNodeProfileSpec, facts: &NodeFacts, upgrade_cordon: Option<&str>) -> Vec<Gate> {
    // gpuready's own keys, whichever profile or release set them: the
    // profile's, the one its annotation records, the default's.
    let ours = |key: &str| {
        key == spec.taint.key
            || key == keys::DEFAULT_TAINT_KEY
            || keys::PREVIOUS_DEFAULT_TAINT_KEYS.contains(&key)
            || facts.owned.taint.as_ref().is_some_and(|(k, _)| k == key)
    };
    neighbours::gates(&NodeMarks {
        taints: &facts.taints,
        labels: &facts.labels,
        annotations: &facts.neighbour_annotations,
        unschedulable: facts.unschedulable,
        upgrade_cordon: upgrade_cordon.is_some(),
        ours: &ours,
    })
}

#[cfg(test)]
mod tests;
