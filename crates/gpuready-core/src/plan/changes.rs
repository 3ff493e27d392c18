//! What a plan is: the exact node changes as data ([`NodeChanges`] and its
//! parts), how they split into the taint's part and the rest, and the options
//! a plan is made under.

use std::collections::BTreeMap;
use std::fmt;

use gpuready_api::keys;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NodeCondition, Taint};
use serde::Serialize;

use crate::devices::DeviceRuleChange;

/// Knobs that come from the controller rather than the profile.
#[derive(Clone, Copy, Debug)]
pub struct PlanOptions {
    pub now: Timestamp,
    /// Rewrite an unchanged condition after this long (a per-node liveness stamp
    /// in `lastHeartbeatTime`). 0: never — a condition is written only when its
    /// status, reason or message changes, so the write rate at rest is zero
    /// whatever the fleet size; liveness is the controller's Lease and the
    /// profile status.
    pub heartbeat_seconds: i64,
    /// The safety brake is engaged: keep existing taints (node taints and
    /// DeviceTaintRules) but add no new one.
    pub hold_new_taints: bool,
    /// The API server refused the node's last write, and the controller said
    /// so after the verdict in `GpuReady`'s message: that message is the
    /// verdict's still, not a change to write again on every pass.
    pub write_refused: bool,
}

/// What a change to the taint list does to gpuready's taint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaintChangeKind {
    /// gpuready's taint is added.
    Add,
    /// gpuready's taint is removed.
    Remove,
    /// gpuready's taint is replaced (new value or effect, or a new key).
    Replace,
}

impl fmt::Display for TaintChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TaintChangeKind::Add => "add",
            TaintChangeKind::Remove => "remove",
            TaintChangeKind::Replace => "replace",
        })
    }
}

/// A new `spec.taints` list.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaintChange {
    /// The complete list to write (foreign taints untouched, in place).
    pub taints: Vec<Taint>,
    pub kind: TaintChangeKind,
    /// gpuready's taint after the change (`None` when removed).
    pub ours: Option<Taint>,
}

/// gpuready's node conditions to write: each in `set` added or replaced by type,
/// each type in `remove` deleted. No other condition is part of the write.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionChange {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<NodeCondition>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

/// A condition gpuready wants on the node, before times are stamped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredCondition {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// What gpuready would write to one node. `None` parts need no write.
///
/// `taint`, `labels` and `annotations` go out together as ONE merge patch on the
/// node carrying its resourceVersion; `conditions` as one patch on the status
/// subresource. So a transition costs at most two writes — three when taint
/// work of other nodes is ahead and the taint goes first on its own
/// ([`NodeChanges::gating_part`]).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeChanges {
    pub taint: Option<TaintChange>,
    /// Label keys to set (`Some`) or delete (`None`); only keys gpuready owns.
    pub labels: Option<BTreeMap<String, Option<String>>>,
    /// gpuready's annotations to set (`Some`) or delete (`None`).
    pub annotations: Option<BTreeMap<String, Option<String>>>,
    pub conditions: Option<ConditionChange>,
    /// A taint was wanted (the node's, or a DeviceTaintRule's) but the safety
    /// brake held it back.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub taint_held_by_brake: bool,
    /// Label keys gpuready would set but leaves alone: another writer set them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub foreign_labels_left: Vec<String>,
    /// gpuready's DeviceTaintRules for the node's devices to create, update or
    /// delete (device gating), one entry per rule. Written before the node patch.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device_taint_rules: Vec<DeviceRuleChange>,
}

impl NodeChanges {
    pub fn is_empty(&self) -> bool {
        !self.patches_node() && self.conditions.is_none() && self.device_taint_rules.is_empty()
    }

    /// Whether the node object needs its (one) merge patch.
    pub fn patches_node(&self) -> bool {
        self.taint.is_some() || self.labels.is_some() || self.annotations.is_some()
    }

    /// The changes split in two: the part that keeps workloads off broken
    /// hardware — the taint change, the annotations that record it
    /// ([`records_taint`]), the DeviceTaintRules, `gpuready.io/ready` unless
    /// it turns `true`, and `gpuready.io/profile` set with any taint change
    /// (its removal goes with the rest) — and the rest (the other labels and annotations, the
    /// conditions). The first is what a node sends while other nodes' taint
    /// writes are pending: the smallest write that gates it. The verdict
    /// label goes with a taint added but after a taint removed, so a node
    /// gpuready taints never reads `gpuready.io/ready=true`; a taint added or
    /// removed names the profile that governs the node in the same request
    /// (the chart's admission policy holds gpuready to that: a bootstrap
    /// taint goes only with the profile label, issue 49), and a release
    /// removes the label with the rest, after the taint.
    pub fn gating_part(&self) -> (NodeChanges, NodeChanges) {
        let taints = self.taint.is_some();
        let gating_label = |k: &str, v: &Option<String>| {
            (k == keys::LABEL_READY && v.as_deref() != Some("true"))
                || (k == keys::LABEL_PROFILE && v.is_some() && taints)
        };
        let (labels, rest_labels) = split_keys(&self.labels, gating_label);
        let (annotations, rest_annotations) =
            split_keys(&self.annotations, |k, _| records_taint(k));
        let now = NodeChanges {
            taint: self.taint.clone(),
            labels,
            annotations,
            device_taint_rules: self.device_taint_rules.clone(),
            ..NodeChanges::default()
        };
        let rest = NodeChanges {
            labels: rest_labels,
            annotations: rest_annotations,
            conditions: self.conditions.clone(),
            foreign_labels_left: self.foreign_labels_left.clone(),
            ..NodeChanges::default()
        };
        (now, rest)
    }

    /// Everything but the taint (and the annotations that record it): what
    /// goes while the API server's refusal of the taint is backed off.
    pub fn without_taint(&self) -> NodeChanges {
        let (_, annotations) = split_keys(&self.annotations, |k, _| records_taint(k));
        NodeChanges {
            taint: None,
            annotations,
            taint_held_by_brake: false,
            ..self.clone()
        }
    }
}

type KeyChanges = Option<BTreeMap<String, Option<String>>>;

/// The entries of `m` that `now` picks and the others, each `None` when empty.
fn split_keys(
    m: &KeyChanges,
    now: impl Fn(&str, &Option<String>) -> bool,
) -> (KeyChanges, KeyChanges) {
    let Some(m) = m else {
        return (None, None);
    };
    let (picked, left): (BTreeMap<_, _>, BTreeMap<_, _>) = m
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(k, v)| now(k, v));
    let some = |m: BTreeMap<String, Option<String>>| (!m.is_empty()).then_some(m);
    (some(picked), some(left))
}

/// Whether an annotation records gpuready's taint (which taint it holds, when
/// it first released it): written in the same request as the taint change,
/// so a crash cannot separate the two.
pub fn records_taint(key: &str) -> bool {
    key == keys::ANNOTATION_TAINT || key == keys::ANNOTATION_RELEASED
}
