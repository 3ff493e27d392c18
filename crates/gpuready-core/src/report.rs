//! What a judgement says: a layer's [`Status`], its [`LayerResult`], and the
//! node's [`LayerReport`] under one profile. The words every judge writes and
//! every planner, tally and status reads; it judges nothing itself.

use gpuready_api::Layer;
use serde::Serialize;

// Below this module (the lifecycle's own words use it too); re-exported where
// the layer judges have always found it.
pub(crate) use crate::duration::human_seconds;

use crate::devices::DeviceGatingReport;
use crate::evidence::Source;
use crate::lifecycle::Lifecycle;

/// A layer's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Status {
    Ready,
    NotReady,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ready => "Ready",
            Status::NotReady => "NotReady",
            Status::Unknown => "Unknown",
        }
    }
}

/// One layer's verdict: a machine reason and a message a person can act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerResult {
    pub layer: Layer,
    pub status: Status,
    pub reason: String,
    pub message: String,
    /// Whether this layer can hold the node back under the profile.
    pub gating: bool,
    /// The evidence the verdict rests on.
    pub evidence: Source,
}

/// Every layer's verdict for one node under one profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerReport {
    pub layers: Vec<LayerResult>,
    /// Seconds until a time-based verdict (the GFD timestamp going stale) may
    /// change without any change to the node.
    pub recheck_after_seconds: Option<u64>,
    /// Set while the node is not ready for longer than the profile's
    /// `notReadyDeadline` allows.
    pub deadline: Option<DeadlinePassed>,
    /// The per-device verdict when the profile gates devices and the node's
    /// DRA pool could be judged device by device (`None` otherwise: gpuready's
    /// DeviceTaintRules for the node are then left as they are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<DeviceGatingReport>,
    /// Maintenance and other readiness gates (`lifecycle`): what the node's
    /// lifecycle adds to the layers' verdict.
    pub lifecycle: Lifecycle,
    /// The node's taint escalates to `NoExecute` (`spec.escalation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_escalation: Option<NodeEscalation>,
}

/// A failing node whose reason the profile escalates.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeEscalation {
    /// The failing reason that escalates.
    pub reason: String,
    /// RFC 3339: when the taint turns (or turned) `NoExecute`.
    pub at: String,
    /// The taint is `NoExecute` now.
    pub escalated: bool,
    /// Due, but held with the taint's own effect: why (the safety brake, or
    /// the profile's `NoExecute` budget: `crate::no_execute`).
    pub held: Option<String>,
}

/// Where a governed node stands, all things judged: what profile status,
/// metrics (`gpuready_nodes{state}`) and `check` count it as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeState {
    /// Every gating layer Ready, nothing else holds the node.
    Ready,
    /// A gating layer fails, or maintenance ended badly: a failure.
    NotReady,
    /// A driver upgrade, a MIG change or paused operands: gated, not failed.
    Maintenance,
    /// The GPU stack is ready; another readiness gate holds the node.
    WaitingForGate,
}

impl NodeState {
    /// The `state` label of `gpuready_nodes`.
    pub fn metric_label(self) -> &'static str {
        match self {
            NodeState::Ready => "ready",
            NodeState::NotReady => "not_ready",
            NodeState::Maintenance => "maintenance",
            NodeState::WaitingForGate => "waiting_for_gate",
        }
    }
}

/// A node past its not-ready deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadlinePassed {
    /// When the not-ready time started counting.
    pub since: String,
    pub seconds: u32,
    /// The profile asks for the remediation label.
    pub label: bool,
}

impl DeadlinePassed {
    pub fn describe(&self) -> String {
        format!(
            "not ready for longer than the {} deadline (counting since {})",
            human_seconds(i64::from(self.seconds)),
            self.since
        )
    }
}

impl LayerReport {
    /// Brings the next check forward to `left` seconds from now when that is
    /// sooner and still ahead; false when `left` has already run out.
    pub fn recheck_within(&mut self, left: i64) -> bool {
        if left <= 0 {
            return false;
        }
        let left = u64::try_from(left).unwrap_or(u64::MAX);
        self.recheck_after_seconds = Some(self.recheck_after_seconds.map_or(left, |r| r.min(left)));
        true
    }

    /// Every gating layer is Ready (what the layers alone say).
    pub fn layers_ready(&self) -> bool {
        self.layers
            .iter()
            .filter(|l| l.gating)
            .all(|l| l.status == Status::Ready)
    }

    /// The GPU stack may serve: every gating layer Ready and no maintenance.
    /// gpuready's taint follows this, and only this: another system's gate
    /// never makes gpuready hold its own (which could wait on each other).
    pub fn gpu_ready(&self) -> bool {
        self.layers_ready() && self.lifecycle.maintenance.is_none()
    }

    /// Ready for GPU work: the GPU stack may serve and no other gate holds
    /// the node. The `GpuReady` condition, the ready label and the counts follow this.
    pub fn ready(&self) -> bool {
        self.state() == NodeState::Ready
    }

    /// What the node counts as.
    pub fn state(&self) -> NodeState {
        match &self.lifecycle.maintenance {
            Some(m) if m.failed => NodeState::NotReady,
            Some(_) => NodeState::Maintenance,
            None if !self.layers_ready() => NodeState::NotReady,
            None if !self.lifecycle.gates.is_empty() => NodeState::WaitingForGate,
            None => NodeState::Ready,
        }
    }

    /// The first gating layer that is not Ready, bottom-up.
    pub fn first_failure(&self) -> Option<&LayerResult> {
        self.layers
            .iter()
            .find(|l| l.gating && l.status != Status::Ready)
    }

    /// Every gating layer that is not Ready.
    pub fn failures(&self) -> impl Iterator<Item = &LayerResult> {
        self.layers
            .iter()
            .filter(|l| l.gating && l.status != Status::Ready)
    }

    pub fn get(&self, layer: Layer) -> Option<&LayerResult> {
        self.layers.iter().find(|l| l.layer == layer)
    }
}
