//! The fleet's other systems that hold GPU nodes out of service, as data: who
//! each is, what marks its hold on a Node (a taint, a label, a cordon with
//! the annotation beside it), what it is doing while the mark is there and
//! what releases it. `lifecycle` reads a node against [`KNOWN`] so a gate is
//! named by its owner, not left as "a foreign cordon". gpuready only reads
//! these marks; it never writes, removes or waits on them for its own taint.

use std::collections::BTreeMap;

pub use gpuready_api::NeighbourSystem;
use gpuready_api::keys::lifecycle as lc;
use k8s_openapi::api::core::v1::Taint;
use serde::Serialize;

/// How a system marks its hold on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A taint with this exact key that keeps pods off (NoSchedule, NoExecute).
    Taint(&'static str),
    /// Such a taint with a key under this prefix, gpuready's own keys excepted.
    TaintPrefix(&'static str),
    /// A label with this key, whatever its value (per-value words in `states`).
    Label(&'static str),
    /// A cordon, with this annotation beside it.
    CordonAnnotation(&'static str),
    /// A cordon, with an annotation under this prefix (the rest of the key
    /// names who on the system's side holds it).
    CordonAnnotationPrefix(&'static str),
    /// A cordon while the GPU operator's upgrade controller is between
    /// `cordon-required` and `uncordon-required` (or failed): part of the
    /// maintenance `lifecycle` judges, named here for its words.
    UpgradeCordon,
    /// A cordon no other row explains.
    AnyCordon,
}

/// What a label's value says the system is doing, and what releases it.
#[derive(Clone, Copy, Debug)]
pub struct State {
    pub value: &'static str,
    pub doing: &'static str,
    pub releases: &'static str,
}

/// One row of the table: a system and one of its marks.
#[derive(Clone, Copy, Debug)]
pub struct Neighbour {
    pub system: NeighbourSystem,
    pub mark: Mark,
    /// What the system is doing while the mark is on the node.
    pub doing: &'static str,
    /// What takes the mark off.
    pub releases: &'static str,
    /// For a label: the words of each value it is known to take (a value
    /// not listed reads as `doing` / `releases`).
    pub states: &'static [State],
}

const NVSENTINEL_RELEASE: &str = "NVSentinel's health monitors report the node healthy: it then uncordons the node and removes the label";
const NVSENTINEL_TERMINAL: &str = "a person remediates the node by hand (its quarantineHealthEvent annotation names the fault and the recommended action); NVSentinel uncordons it and removes the label once its health checks pass";

/// The values of NVSentinel's state label (`commons/pkg/statemanager`).
const NVSENTINEL_STATES: &[State] = &[
    State {
        value: "quarantined",
        doing: "quarantined the node for a fault its health monitors reported; the drain comes next",
        releases: NVSENTINEL_RELEASE,
    },
    State {
        value: "draining",
        doing: "draining the node's workloads after a fault",
        releases: NVSENTINEL_RELEASE,
    },
    State {
        value: "drain-succeeded",
        doing: "drained the node after a fault; remediation comes next",
        releases: NVSENTINEL_RELEASE,
    },
    State {
        value: "drain-failed",
        doing: "could not drain the node (terminal: no remediation follows)",
        releases: NVSENTINEL_TERMINAL,
    },
    State {
        value: "remediating",
        doing: "starting the remediation of a fault (a reset, a reboot or a hand-off)",
        releases: NVSENTINEL_RELEASE,
    },
    State {
        value: "remediation-succeeded",
        doing: "asked for the remediation of a fault; it may still be running",
        releases: NVSENTINEL_RELEASE,
    },
    State {
        value: "remediation-failed",
        doing: "could not start the remediation (terminal: the action is unsupported or its request failed)",
        releases: NVSENTINEL_TERMINAL,
    },
];

/// The GPU operator's upgrade controller and its cordon (k8s-operator-libs'
/// upgrade states, docs/operations.md).
const UPGRADE_CORDON: Neighbour = Neighbour {
    system: NeighbourSystem::GpuOperator,
    mark: Mark::UpgradeCordon,
    doing: "the upgrade controller cordoned the node for its driver upgrade",
    releases: "the upgrade controller uncordons the node at uncordon-required; upgrade-failed keeps the cordon until a retried upgrade succeeds",
    states: &[],
};

/// Every system gpuready names, each mark in the order a node is read:
/// taints first (the first row whose mark fits a taint names it), then the
/// state label, then the cordon (every row whose annotation is there names
/// it; none: the last row). Sources: docs/operations.md.
pub const KNOWN: &[Neighbour] = &[
    Neighbour {
        system: NeighbourSystem::NvSentinel,
        mark: Mark::Taint(lc::NVSENTINEL_EXTERNAL_REMEDIATION_TAINT),
        doing: "handed the node to an external remediation system (the taint's value names the ExternalRemediationRequest); no NVSentinel component touches the node meanwhile",
        releases: "the external system sets ExternalRemediationComplete on that ExternalRemediationRequest, or someone deletes it: NVSentinel then removes the taint",
        states: &[],
    },
    Neighbour {
        system: NeighbourSystem::NodeWright,
        mark: Mark::Taint(lc::NODEWRIGHT_TAINT),
        doing: "applying its runtime-required packages (node tuning before any workload)",
        releases: "every runtime-required NodeWright completes on this node: NodeWright removes the taint",
        states: &[],
    },
    Neighbour {
        system: NeighbourSystem::NodeWright,
        mark: Mark::Taint(lc::SKYHOOK_TAINT),
        doing: "applying its runtime-required packages (node tuning before any workload; the former Skyhook key)",
        releases: "every runtime-required NodeWright completes on this node: NodeWright removes the taint",
        states: &[],
    },
    Neighbour {
        system: NeighbourSystem::NodeReadinessController,
        mark: Mark::TaintPrefix(lc::READINESS_TAINT_PREFIX),
        doing: "a readiness rule keeps the node tainted until the node conditions it names hold (node-readiness-controller, or another controller under readiness.k8s.io/)",
        releases: "the rule's controller removes the taint once those conditions hold",
        states: &[],
    },
    Neighbour {
        system: NeighbourSystem::NvSentinel,
        mark: Mark::Label(lc::NVSENTINEL_STATE),
        doing: "holding the node in a state gpuready does not know",
        releases: NVSENTINEL_RELEASE,
        states: NVSENTINEL_STATES,
    },
    Neighbour {
        system: NeighbourSystem::NodeWright,
        mark: Mark::CordonAnnotation(lc::NODEWRIGHT_RUNTIME_REQUIRED_CORDON),
        doing: "keeps the node cordoned after its runtime-required packages (runtimeRequiredCordonAfter) for an outside validation",
        releases: "an outside validator removes the nodewright.nvidia.com/runtimeRequiredCordon annotation and uncordons the node in the same patch",
        states: &[],
    },
    Neighbour {
        system: NeighbourSystem::NodeWright,
        mark: Mark::CordonAnnotationPrefix(lc::NODEWRIGHT_CORDON_PREFIX),
        doing: "cordoned the node for a package that needs an interrupt (drain, reboot or service restart); the annotation names the NodeWright",
        releases: "that NodeWright's interrupt completes: NodeWright uncordons the node once no cordon_ annotation is left",
        states: &[],
    },
    Neighbour {
        system: NeighbourSystem::NodeWright,
        mark: Mark::CordonAnnotationPrefix(lc::SKYHOOK_CORDON_PREFIX),
        doing: "cordoned the node for a package that needs an interrupt (the former Skyhook key); the annotation names the Skyhook",
        releases: "that package's interrupt completes: NodeWright uncordons the node once no cordon_ annotation is left",
        states: &[],
    },
    UPGRADE_CORDON,
    Neighbour {
        system: NeighbourSystem::Other,
        mark: Mark::AnyCordon,
        doing: "cordoned by an admin or by a controller gpuready does not know",
        releases: "whoever cordoned it uncordons it (kubectl uncordon)",
        states: &[],
    },
];

/// The system's name in messages (status spells it `NeighbourSystem::as_str`).
pub fn human(system: NeighbourSystem) -> &'static str {
    match system {
        NeighbourSystem::NvSentinel => "NVSentinel",
        NeighbourSystem::NodeWright => "NodeWright",
        NeighbourSystem::GpuOperator => "the GPU operator",
        NeighbourSystem::NodeReadinessController => "a readiness controller",
        NeighbourSystem::Other => "an unknown owner",
    }
}

/// One system's hold on one node, as found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gate {
    pub system: NeighbourSystem,
    /// The mark as it is on the node: `key=value:Effect`, `label=value`,
    /// `spec.unschedulable` with the annotation that names its owner.
    pub mark: String,
    pub doing: &'static str,
    pub releases: &'static str,
}

impl Gate {
    fn of(n: &Neighbour, mark: String) -> Gate {
        Gate {
            system: n.system,
            mark,
            doing: n.doing,
            releases: n.releases,
        }
    }

    /// `NVSentinel (dgxc.nvidia.com/nvsentinel-state=draining, cordoned)`:
    /// who and by what, for lists and the profile's summary.
    pub fn short(&self) -> String {
        format!("{} ({})", human(self.system), self.mark)
    }

    /// Who, by what, what it is doing and what releases it.
    pub fn describe(&self) -> String {
        format!(
            "{}: {}; released when {}",
            self.short(),
            self.doing,
            self.releases
        )
    }
}

/// What of a node the table reads.
pub struct NodeMarks<'a> {
    pub taints: &'a [Taint],
    pub labels: &'a BTreeMap<String, String>,
    /// Other systems' annotations (`facts::is_neighbour_annotation`).
    pub annotations: &'a BTreeMap<String, String>,
    pub unschedulable: bool,
    /// The GPU operator's upgrade controller holds the cordon (maintenance).
    pub upgrade_cordon: bool,
    /// Whether a taint key is gpuready's own (any profile's, any release's).
    pub ours: &'a dyn Fn(&str) -> bool,
}

/// Every other system's hold on the node, in the table's order: its taints
/// (only effects that keep pods off), its state label, its cordon. The
/// upgrade controller's cordon is left to `lifecycle`'s maintenance
/// ([`upgrade_cordon`]).
pub fn gates(node: &NodeMarks<'_>) -> Vec<Gate> {
    let mut out: Vec<Gate> = node
        .taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .filter_map(|t| {
            let row = KNOWN.iter().find(|n| match n.mark {
                Mark::Taint(key) => t.key == key,
                Mark::TaintPrefix(prefix) => t.key.starts_with(prefix) && !(node.ours)(&t.key),
                _ => false,
            })?;
            Some(Gate::of(row, describe_taint(t)))
        })
        .collect();
    let cordon = node.unschedulable && !node.upgrade_cordon;
    let mut cordon_named = false;
    for row in KNOWN {
        match row.mark {
            Mark::Label(key) => {
                let Some(value) = node.labels.get(key) else {
                    continue;
                };
                let state = row.states.iter().find(|s| s.value == value);
                cordon_named |= cordon;
                out.push(Gate {
                    system: row.system,
                    mark: format!("{key}={value}{}", if cordon { ", cordoned" } else { "" }),
                    doing: state.map_or(row.doing, |s| s.doing),
                    releases: state.map_or(row.releases, |s| s.releases),
                });
            }
            Mark::CordonAnnotation(key) if cordon && node.annotations.contains_key(key) => {
                cordon_named = true;
                out.push(Gate::of(row, format!("spec.unschedulable, {key}")));
            }
            Mark::CordonAnnotationPrefix(prefix) if cordon => {
                let owners: Vec<&str> = node
                    .annotations
                    .keys()
                    .filter_map(|k| k.strip_prefix(prefix))
                    .collect();
                if !owners.is_empty() {
                    cordon_named = true;
                    out.push(Gate::of(
                        row,
                        format!("spec.unschedulable, {prefix}{}", owners.join(", ")),
                    ));
                }
            }
            Mark::AnyCordon if cordon && !cordon_named => {
                out.push(Gate::of(row, "spec.unschedulable".to_owned()));
            }
            _ => {}
        }
    }
    out
}

/// The GPU operator's hold while its upgrade controller owns the cordon
/// (`lifecycle` counts it as the maintenance's, not another gate).
pub fn upgrade_cordon(state: &str) -> Gate {
    Gate::of(
        &UPGRADE_CORDON,
        format!("spec.unschedulable, {}={state}", lc::DRIVER_UPGRADE_STATE),
    )
}

/// `key=value:Effect`, or `key:Effect` without a value.
pub fn describe_taint(t: &Taint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

/// Whether gpuready reads this annotation of another system (the controller's
/// node cache keeps exactly these besides gpuready's own).
pub fn is_neighbour_annotation(key: &str) -> bool {
    KNOWN.iter().any(|n| match n.mark {
        Mark::CordonAnnotation(k) => key == k,
        Mark::CordonAnnotationPrefix(p) => key.starts_with(p),
        _ => false,
    })
}

#[cfg(test)]
mod tests;
