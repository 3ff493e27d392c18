//! What a judgement says: a layer's [`Status`], its [`LayerResult`], and the
//! node's [`LayerReport`] under one profile. The words every judge writes and
//! every planner, tally and status reads; it judges nothing itself.

use gpuready_api::Layer;
use serde::Serialize;

use crate::devices::DeviceGatingReport;
use crate::evidence::Source;

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
    /// Ready when every gating layer is Ready.
    pub fn ready(&self) -> bool {
        self.layers
            .iter()
            .filter(|l| l.gating)
            .all(|l| l.status == Status::Ready)
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

/// A duration as the messages write it: `90s`, `5m`, `6h`, `2d`.
pub(crate) fn human_seconds(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 || s % 3600 != 0 && s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}
