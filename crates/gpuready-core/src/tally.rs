//! Running counts of node verdicts per profile, changed one node at a time.
//! The one place that counts ready / not ready / conflict: [`NodeCounts`] is
//! what `check`'s summary, the `gpuready_nodes{state}` gauges and profile
//! status read (through a [`ProfileTally`] for the latter two), so they cannot
//! disagree, and a single node's change costs O(log n) instead of a pass over
//! the fleet.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gpuready_api::{Layer, NeighbourSystem};
use serde::Serialize;

use crate::assess::{GovernanceKind, NodeAssessment};
use crate::report::{NodeState, Status};
use crate::timeline::JoinTime;

/// Nodes by readiness: governed (ready or not ready), in conflict between
/// profiles, or ungoverned. A conflict is neither ready nor governed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    pub governed: usize,
    pub ready: usize,
    /// Governed nodes that fail (maintenance and other gates are not failures).
    pub not_ready: usize,
    /// Governed nodes in maintenance (a driver upgrade, a MIG change).
    pub maintenance: usize,
    /// Governed nodes whose GPU stack is ready while another gate holds them.
    pub waiting_for_gate: usize,
    pub conflicts: usize,
    pub ungoverned: usize,
}

impl NodeCounts {
    /// Counts one node (`state` matters only for a governed node).
    pub fn add(&mut self, governance: GovernanceKind, state: NodeState) {
        self.each_slot(governance, state, |n| *n += 1);
    }

    /// Undoes [`NodeCounts::add`] of the same node.
    pub fn remove(&mut self, governance: GovernanceKind, state: NodeState) {
        self.each_slot(governance, state, dec);
    }

    /// Counts one assessed node.
    pub fn add_assessment(&mut self, a: &NodeAssessment) {
        self.add(a.governance, state_of(a));
    }

    /// The counts of a set of assessed nodes.
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a NodeAssessment>) -> NodeCounts {
        let mut c = NodeCounts::default();
        for a in nodes {
            c.add_assessment(a);
        }
        c
    }

    /// Nodes a profile matched: governed by it or in conflict involving it.
    pub fn matched(&self) -> usize {
        self.governed + self.conflicts
    }

    /// Applies `f` to every count the node is part of.
    fn each_slot(&mut self, governance: GovernanceKind, state: NodeState, f: fn(&mut usize)) {
        match governance {
            GovernanceKind::Ungoverned => f(&mut self.ungoverned),
            GovernanceKind::Conflict => f(&mut self.conflicts),
            GovernanceKind::Governed => {
                f(&mut self.governed);
                f(match state {
                    NodeState::Ready => &mut self.ready,
                    NodeState::NotReady => &mut self.not_ready,
                    NodeState::Maintenance => &mut self.maintenance,
                    NodeState::WaitingForGate => &mut self.waiting_for_gate,
                });
            }
        }
    }
}

/// What an assessed node counts as; a node judged before states existed (or
/// a conflict) by its readiness alone.
fn state_of(a: &NodeAssessment) -> NodeState {
    a.state.unwrap_or(if a.ready == Some(true) {
        NodeState::Ready
    } else {
        NodeState::NotReady
    })
}

/// One layer's verdict, as much of it as the aggregate reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerVerdict {
    pub layer: Layer,
    pub status: Status,
    /// Kept only when the layer is not Ready (the aggregate names failures only).
    pub reason: String,
}

/// What a profile's aggregate needs to know about one node it matches: the
/// verdict without the planned changes or the messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeVerdict {
    pub governance: GovernanceKind,
    /// The governing profile, or every profile of a conflict.
    pub profiles: Vec<String>,
    pub ready: bool,
    /// What the node counts as (`NotReady` for a conflict).
    pub state: NodeState,
    /// For maintenance and other gates: the state or the gates (the summary's `detail`).
    pub lifecycle_detail: String,
    /// Governed by a profile in Observe mode (gpuready only reports).
    pub observe: bool,
    /// Past the profile's deadline for becoming ready.
    pub past_deadline: bool,
    pub reason: String,
    /// The first gating layer that is not Ready (the summary names it), else `reason`.
    pub summary_layer: String,
    pub layers: Vec<LayerVerdict>,
    /// Devices gated by gpuready's DeviceTaintRules (`gpu-3 (FatalXid)`).
    pub tainted_devices: Vec<String>,
    /// Devices whose rule escalates to `NoExecute`, with the server's report.
    pub escalations: Vec<gpuready_api::DeviceEscalation>,
    /// The other systems that hold the node, once each (governed nodes only).
    pub held_by: Vec<NeighbourSystem>,
    /// Pods a `NoExecute` taint of gpuready's leaves running on the node's
    /// devices (DRA-backed extended resources, kubernetes #141290).
    pub not_evicted_pods: usize,
    /// The node's last finished wait when it was a join (its timeline record).
    pub last_join: Option<JoinTime>,
}

impl NodeVerdict {
    /// `None` for an ungoverned node: no profile counts it.
    pub fn of(a: &NodeAssessment) -> Option<NodeVerdict> {
        let profiles = match a.governance {
            GovernanceKind::Ungoverned => return None,
            GovernanceKind::Governed => a.profile.clone().into_iter().collect(),
            GovernanceKind::Conflict => a.conflicting_profiles.clone(),
        };
        Some(NodeVerdict {
            governance: a.governance,
            profiles,
            ready: a.ready == Some(true),
            state: state_of(a),
            lifecycle_detail: match state_of(a) {
                NodeState::Maintenance => a
                    .lifecycle
                    .maintenance
                    .as_ref()
                    .map(|m| m.detail.clone())
                    .unwrap_or_default(),
                NodeState::WaitingForGate => a.lifecycle.gates_short(),
                NodeState::Ready | NodeState::NotReady => String::new(),
            },
            observe: a.observe,
            past_deadline: a.deadline_passed.is_some(),
            reason: a.reason.clone(),
            summary_layer: a
                .layers
                .iter()
                .find(|l| l.gating && l.status != Status::Ready)
                .map(|l| l.layer.to_string())
                .unwrap_or_else(|| a.reason.clone()),
            layers: a
                .layers
                .iter()
                .map(|l| LayerVerdict {
                    layer: l.layer,
                    status: l.status,
                    reason: if l.status == Status::Ready {
                        String::new()
                    } else {
                        l.reason.clone()
                    },
                })
                .collect(),
            tainted_devices: a.tainted_devices.clone(),
            escalations: a.escalations.clone(),
            held_by: if a.governance == GovernanceKind::Governed {
                a.lifecycle.held_by()
            } else {
                Vec::new()
            },
            not_evicted_pods: a.not_evicted_pods,
            last_join: a.timeline.as_ref().and_then(|r| r.join_time()),
        })
    }
}

/// A not-ready node as the profile status lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotReadyEntry {
    pub reason: String,
    pub layer: String,
}

/// A node in maintenance or waiting for another gate, as the profile status lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LifecycleEntry {
    pub reason: String,
    /// The first gating layer that is not Ready (the maintenance reason when
    /// every layer is, as at `uncordon-required`), as `NotReadyEntry` has it.
    pub layer: String,
    /// The upgrade or MIG state, the paused operands, or the gates.
    pub detail: String,
}

/// The failures of one layer among a profile's nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayerTally {
    /// Nodes whose layer is Ready.
    pub ready: usize,
    /// Node → reason, for every node whose layer is not Ready, in name order.
    pub failing: BTreeMap<String, String>,
    /// Reason → how many failing nodes give it.
    pub reasons: BTreeMap<String, usize>,
}

/// The aggregate of one profile's matched nodes (governed, or in conflict
/// involving it). Every count is kept current by [`ProfileTally::add`] and
/// [`ProfileTally::remove`]; nothing here is recomputed from the whole set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileTally {
    /// Matched nodes (governed, ready or not, and conflicts) by readiness.
    pub counts: NodeCounts,
    /// Every matched node that is not ready (conflicts included), in name
    /// order; maintenance and other gates are not in it (they are not failures).
    pub not_ready: BTreeMap<String, NotReadyEntry>,
    /// Nodes in maintenance, in name order.
    pub maintenance: BTreeMap<String, LifecycleEntry>,
    /// Nodes whose GPU stack is ready while another gate holds them, in name order.
    pub waiting_for_gate: BTreeMap<String, LifecycleEntry>,
    /// Of `not_ready`, those governed in Observe mode.
    pub not_ready_observed: usize,
    /// Nodes past the profile's deadline.
    pub past_deadline: usize,
    pub conflicts: BTreeSet<String>,
    pub layers: BTreeMap<Layer, LayerTally>,
    /// Node → its devices gated by gpuready's DeviceTaintRules, in name order.
    pub tainted_devices: BTreeMap<String, Vec<String>>,
    /// Node → its escalating devices, in name order.
    pub escalations: BTreeMap<String, Vec<gpuready_api::DeviceEscalation>>,
    /// Governed nodes each other system holds (a node two hold counts under both).
    pub held_by: BTreeMap<NeighbourSystem, usize>,
    /// Pods left running on devices gpuready taints `NoExecute`, over every
    /// node (kubernetes #141290).
    pub not_evicted_pods: usize,
    /// Node → its last join (from its timeline record), governed nodes only.
    pub joins: BTreeMap<String, JoinTime>,
}

impl ProfileTally {
    /// Devices gated by DeviceTaintRules over every node of the profile.
    pub fn tainted_device_count(&self) -> usize {
        self.tainted_devices.values().map(Vec::len).sum()
    }
}

fn dec(n: &mut usize) {
    *n = n.saturating_sub(1);
}

impl ProfileTally {
    pub fn add(&mut self, node: &str, v: &NodeVerdict) {
        self.counts.add(v.governance, v.state);
        for s in &v.held_by {
            *self.held_by.entry(*s).or_default() += 1;
        }
        if !v.tainted_devices.is_empty() {
            self.tainted_devices
                .insert(node.to_owned(), v.tainted_devices.clone());
        }
        if !v.escalations.is_empty() {
            self.escalations
                .insert(node.to_owned(), v.escalations.clone());
        }
        self.not_evicted_pods += v.not_evicted_pods;
        if let Some(j) = &v.last_join {
            self.joins.insert(node.to_owned(), j.clone());
        }
        if v.past_deadline {
            self.past_deadline += 1;
        }
        if v.governance == GovernanceKind::Conflict {
            self.conflicts.insert(node.to_owned());
        }
        let entry = || LifecycleEntry {
            reason: v.reason.clone(),
            layer: v.summary_layer.clone(),
            detail: v.lifecycle_detail.clone(),
        };
        match (v.governance, v.state) {
            (GovernanceKind::Governed, NodeState::Maintenance) => {
                self.maintenance.insert(node.to_owned(), entry());
            }
            (GovernanceKind::Governed, NodeState::WaitingForGate) => {
                self.waiting_for_gate.insert(node.to_owned(), entry());
            }
            _ => {}
        }
        if self.fails(v) {
            if v.observe {
                self.not_ready_observed += 1;
            }
            self.not_ready.insert(
                node.to_owned(),
                NotReadyEntry {
                    reason: v.reason.clone(),
                    layer: v.summary_layer.clone(),
                },
            );
        }
        for l in &v.layers {
            let t = self.layers.entry(l.layer).or_default();
            if l.status == Status::Ready {
                t.ready += 1;
            } else {
                t.failing.insert(node.to_owned(), l.reason.clone());
                *t.reasons.entry(l.reason.clone()).or_default() += 1;
            }
        }
    }

    /// Undoes [`ProfileTally::add`] of the same verdict.
    pub fn remove(&mut self, node: &str, v: &NodeVerdict) {
        self.counts.remove(v.governance, v.state);
        for s in &v.held_by {
            if let Some(n) = self.held_by.get_mut(s) {
                dec(n);
                if *n == 0 {
                    self.held_by.remove(s);
                }
            }
        }
        self.tainted_devices.remove(node);
        self.escalations.remove(node);
        self.not_evicted_pods = self.not_evicted_pods.saturating_sub(v.not_evicted_pods);
        self.joins.remove(node);
        self.maintenance.remove(node);
        self.waiting_for_gate.remove(node);
        if v.past_deadline {
            dec(&mut self.past_deadline);
        }
        if v.governance == GovernanceKind::Conflict {
            self.conflicts.remove(node);
        }
        if self.fails(v) {
            if v.observe {
                dec(&mut self.not_ready_observed);
            }
            self.not_ready.remove(node);
        }
        for l in &v.layers {
            let Some(t) = self.layers.get_mut(&l.layer) else {
                continue;
            };
            if l.status == Status::Ready {
                dec(&mut t.ready);
            } else {
                t.failing.remove(node);
                if let Some(n) = t.reasons.get_mut(&l.reason) {
                    dec(n);
                    if *n == 0 {
                        t.reasons.remove(&l.reason);
                    }
                }
            }
        }
    }

    /// Whether the node is one of the profile's failures: not ready, and
    /// neither in maintenance nor waiting for another gate (a conflict is).
    fn fails(&self, v: &NodeVerdict) -> bool {
        v.governance == GovernanceKind::Conflict || v.state == NodeState::NotReady
    }

    /// Nodes governed by the profile or in conflict involving it.
    pub fn matched(&self) -> usize {
        self.counts.matched()
    }

    /// Nodes whose `layer` is Ready.
    pub fn layer_ready(&self, layer: Layer) -> usize {
        self.layers.get(&layer).map_or(0, |t| t.ready)
    }

    /// The tally of a fixed set of assessments, each counted for this profile
    /// (the caller picked the nodes it matches); ungoverned ones are skipped.
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a NodeAssessment>) -> ProfileTally {
        let mut t = ProfileTally::default();
        for a in nodes {
            if let Some(v) = NodeVerdict::of(a) {
                t.add(&a.name, &v);
            }
        }
        t
    }
}

/// Every node's last verdict and every profile's tally. Owned by one task (the
/// status aggregator); fed one node at a time.
#[derive(Debug, Default)]
pub struct Tally {
    nodes: HashMap<String, NodeVerdict>,
    profiles: BTreeMap<String, ProfileTally>,
}

impl Tally {
    /// Records a node's verdict (`None`: ungoverned or gone). Returns the
    /// profiles whose tally changed: empty when the verdict is the one already
    /// recorded, which is the common case of a reconcile that changed nothing.
    pub fn set(&mut self, node: &str, verdict: Option<NodeVerdict>) -> BTreeSet<String> {
        let mut touched = BTreeSet::new();
        if self.nodes.get(node) == verdict.as_ref() {
            return touched;
        }
        if let Some(old) = self.nodes.remove(node) {
            for p in &old.profiles {
                if let Some(t) = self.profiles.get_mut(p) {
                    t.remove(node, &old);
                    if t.matched() == 0 {
                        self.profiles.remove(p);
                    }
                }
                touched.insert(p.clone());
            }
        }
        if let Some(new) = verdict {
            for p in &new.profiles {
                self.profiles.entry(p.clone()).or_default().add(node, &new);
                touched.insert(p.clone());
            }
            self.nodes.insert(node.to_owned(), new);
        }
        touched
    }

    /// The tally of `profile` (empty when it matches no node).
    pub fn profile(&self, profile: &str) -> Option<&ProfileTally> {
        self.profiles.get(profile)
    }

    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Names of the nodes with a recorded verdict.
    pub fn node_names(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests;
