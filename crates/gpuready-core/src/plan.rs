//! The node changes gpuready would make: taint, labels, conditions. Each part is
//! `None` when the node already looks as wanted, so a no-op reconcile writes nothing.

use std::collections::BTreeMap;

use gpuready_api::keys::{self, reasons};
use gpuready_api::{GpuNodeProfile, Mode, TaintPolicy};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_core::ResourceExt;
use serde::Serialize;

use crate::evaluate::{LayerReport, Status};
use crate::facts::{ANNOTATION_TAINT, NodeFacts};

/// Node conditions carry a human message; keep it readable in `kubectl describe`.
const MAX_CONDITION_MESSAGE: usize = 1024;

/// Knobs that come from the controller rather than the profile.
#[derive(Clone, Copy, Debug)]
pub struct PlanOptions {
    pub now: Timestamp,
    /// Rewrite unchanged conditions after this long so readers can tell a live
    /// verdict from a stale one (nothing else marks custom conditions Unknown).
    pub heartbeat_seconds: i64,
    /// The safety brake is engaged: keep existing taints but add no new one.
    pub hold_new_taints: bool,
}

/// A new `spec.taints` list plus annotations written in the same request.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaintChange {
    /// The complete list to write (foreign taints untouched, in place).
    pub taints: Vec<Taint>,
    /// `Some` sets, `None` deletes.
    pub annotations: BTreeMap<String, Option<String>>,
    /// What changes, for events and logs: `add`, `remove`, `replace`, `marker`.
    pub summary: String,
}

/// What gpuready would write to one node. `None` parts need no write.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeChanges {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taint: Option<TaintChange>,
    /// The full set of labels gpuready applies (server-side apply drops owned keys
    /// that are left out; an empty map releases them all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// The full set of gpuready node conditions (same apply semantics).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<NodeCondition>>,
    /// A taint was wanted but the safety brake held it back.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub taint_held_by_brake: bool,
}

impl NodeChanges {
    pub fn is_empty(&self) -> bool {
        self.taint.is_none() && self.labels.is_none() && self.conditions.is_none()
    }
}

/// Whether a taint key belongs to gpuready on this node.
fn is_ours(t: &Taint, facts: &NodeFacts, profile_key: Option<&str>) -> bool {
    t.key.starts_with(keys::KEY_PREFIX)
        || Some(t.key.as_str()) == profile_key
        || facts.owned.taint.as_ref().is_some_and(|(k, _)| *k == t.key)
}

/// The taint list with gpuready's taints replaced by `want`, keeping every
/// foreign taint and its position. `None` when nothing changes.
fn retaint(
    facts: &NodeFacts,
    profile_key: Option<&str>,
    want: Option<&Taint>,
) -> Option<(Vec<Taint>, &'static str)> {
    let ours: Vec<&Taint> = facts
        .taints
        .iter()
        .filter(|t| is_ours(t, facts, profile_key))
        .collect();
    let same = match want {
        Some(w) => {
            ours.len() == 1
                && ours[0].key == w.key
                && ours[0].effect == w.effect
                && ours[0].value == w.value
        }
        None => ours.is_empty(),
    };
    if same {
        return None;
    }
    let mut taints: Vec<Taint> = Vec::with_capacity(facts.taints.len() + 1);
    let mut placed = false;
    for t in &facts.taints {
        if !is_ours(t, facts, profile_key) {
            taints.push(t.clone());
        } else if let Some(w) = want
            && !placed
        {
            taints.push(w.clone());
            placed = true;
        }
    }
    if let Some(w) = want
        && !placed
    {
        taints.push(w.clone());
    }
    let what = match (want, ours.is_empty()) {
        (Some(_), true) => "add",
        (Some(_), false) => "replace",
        (None, _) => "remove",
    };
    Some((taints, what))
}

fn annotation_change(
    key: &str,
    want: Option<String>,
    current: Option<&String>,
    out: &mut BTreeMap<String, Option<String>>,
) {
    if want.as_ref() != current {
        out.insert(key.to_owned(), want);
    }
}

fn current_taint_annotation(facts: &NodeFacts) -> Option<String> {
    facts.owned.taint.as_ref().map(|(k, e)| format!("{k}:{e}"))
}

/// The overall `GpuReady` condition for a report.
pub fn gpu_ready_condition(profile: &str, report: &LayerReport) -> (String, String, String) {
    if report.ready() {
        return (
            "True".into(),
            reasons::READY.into(),
            format!("every gating layer is Ready under GpuNodeProfile {profile}"),
        );
    }
    let failures: Vec<_> = report.failures().collect();
    let status = if failures.iter().any(|l| l.status == Status::NotReady) {
        "False"
    } else {
        "Unknown"
    };
    let mut reason = failures
        .first()
        .map(|l| l.reason.clone())
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
    if let Some(d) = &report.deadline {
        message = format!("{} ({reason}); {message}", d.describe());
        reason = reasons::NOT_READY_DEADLINE_EXCEEDED.to_owned();
    }
    (status.into(), reason, message)
}

fn condition_status(s: Status) -> &'static str {
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

/// Desired gpuready conditions, each keeping its `lastTransitionTime` when the
/// status is unchanged. `None` when the node already carries them and the
/// heartbeat is fresh.
fn plan_conditions(
    facts: &NodeFacts,
    desired: Vec<(String, String, String, String)>,
    opts: &PlanOptions,
) -> Option<Vec<NodeCondition>> {
    let now = Time(opts.now);
    let mut stale = false;
    let mut out = Vec::with_capacity(desired.len());
    for (type_, status, reason, message) in desired {
        let message = truncate(message);
        let current = facts.gpu_conditions.iter().find(|c| c.type_ == type_);
        let transition = match current {
            Some(c) if c.status == status => c.last_transition_time.clone().unwrap_or(now.clone()),
            _ => now.clone(),
        };
        let unchanged = current.is_some_and(|c| {
            c.status == status
                && c.reason.as_deref() == Some(reason.as_str())
                && c.message.as_deref() == Some(message.as_str())
                && c.last_heartbeat_time.as_ref().is_some_and(|hb| {
                    opts.now.as_second() - hb.0.as_second() < opts.heartbeat_seconds
                })
        });
        stale |= !unchanged;
        out.push(NodeCondition {
            type_,
            status,
            reason: Some(reason),
            message: Some(message),
            last_transition_time: Some(transition),
            last_heartbeat_time: Some(now.clone()),
        });
    }
    // A condition type gpuready owns but no longer wants: the apply removes it.
    let dropped = facts.owned.conditions.iter().any(|t| {
        !out.iter().any(|c| &c.type_ == t) && facts.gpu_conditions.iter().any(|c| &c.type_ == t)
    });
    (stale || dropped).then_some(out)
}

/// `None` when the node already carries exactly these values for gpuready's keys
/// and no owned key is left over.
fn plan_labels(
    facts: &NodeFacts,
    desired: BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    let differs = desired.iter().any(|(k, v)| facts.labels.get(k) != Some(v));
    let leftover = facts
        .owned
        .labels
        .iter()
        .any(|k| !desired.contains_key(k) && facts.labels.contains_key(k));
    (differs || leftover).then_some(desired)
}

/// Changes for a node one profile governs.
pub fn plan_governed(
    profile: &GpuNodeProfile,
    facts: &NodeFacts,
    report: &LayerReport,
    opts: &PlanOptions,
) -> NodeChanges {
    let spec = &profile.spec;
    if spec.mode == Mode::Observe {
        return NodeChanges::default();
    }
    let name = profile.name_any();
    let ready = report.ready();
    let released = facts.owned.released_at.is_some();

    // Taint.
    let released_for_good = spec.taint_policy == TaintPolicy::UntilFirstReady && released;
    let want_taint = !ready && !released_for_good;
    let taint = Taint {
        key: spec.taint.key.clone(),
        value: Some(spec.taint.value.clone()).filter(|v| !v.is_empty()),
        effect: spec.taint.effect.as_str().to_owned(),
        time_added: None,
    };
    let has_ours = facts
        .taints
        .iter()
        .any(|t| is_ours(t, facts, Some(&spec.taint.key)));
    let held = want_taint && !has_ours && opts.hold_new_taints;
    let want = (want_taint && !held).then_some(&taint);
    let retainted = retaint(facts, Some(&spec.taint.key), want);
    let mut annotations = BTreeMap::new();
    // The annotation names the taint gpuready holds after this change, including
    // one it found already in place (kubelet --register-with-taints), so release
    // and key changes can still tell it is gpuready's.
    annotation_change(
        ANNOTATION_TAINT,
        want.map(|t| format!("{}:{}", t.key, t.effect)),
        current_taint_annotation(facts).as_ref(),
        &mut annotations,
    );
    let mut summary = retainted.as_ref().map(|(_, w)| (*w).to_owned());
    if spec.taint_policy == TaintPolicy::UntilFirstReady && ready && !released {
        annotations.insert(
            keys::ANNOTATION_RELEASED.to_owned(),
            Some(opts.now.to_string()),
        );
        summary.get_or_insert_with(|| "marker".to_owned());
    }
    let taint_change = (retainted.is_some() || !annotations.is_empty()).then(|| TaintChange {
        taints: retainted
            .map(|(t, _)| t)
            .unwrap_or_else(|| facts.taints.clone()),
        annotations,
        summary: summary.unwrap_or_else(|| "annotations".to_owned()),
    });

    // Labels.
    let mut labels = BTreeMap::from([
        (keys::LABEL_PROFILE.to_owned(), name.clone()),
        (keys::LABEL_READY.to_owned(), ready.to_string()),
    ]);
    if ready {
        labels.extend(spec.ready_labels.clone());
    }
    if report.deadline.as_ref().is_some_and(|d| d.label) {
        labels.insert(keys::LABEL_DEADLINE_EXCEEDED.to_owned(), "true".to_owned());
    }

    // Conditions.
    let (status, reason, message) = gpu_ready_condition(&name, report);
    let mut desired = vec![(
        keys::CONDITION_GPU_READY.to_owned(),
        status,
        reason,
        message,
    )];
    // The probe's own condition, whenever the Health layer was judged: what a
    // person reading `kubectl describe node` wants to see first after an XID.
    if let Some(h) = report.get(gpuready_api::Layer::Health) {
        desired.push((
            keys::CONDITION_PROBE_HEALTHY.to_owned(),
            condition_status(h.status).to_owned(),
            h.reason.clone(),
            h.message.clone(),
        ));
    }
    if spec.per_layer_node_conditions {
        for l in &report.layers {
            desired.push((
                l.layer.condition_type(),
                condition_status(l.status).to_owned(),
                l.reason.clone(),
                l.message.clone(),
            ));
        }
    }

    NodeChanges {
        taint: taint_change,
        labels: plan_labels(facts, labels),
        conditions: plan_conditions(facts, desired, opts),
        taint_held_by_brake: held,
    }
}

/// A node matched by several profiles: taint and labels stay as they are; the
/// `GpuReady` condition says why.
pub fn plan_conflict(facts: &NodeFacts, profiles: &[String], opts: &PlanOptions) -> NodeChanges {
    let desired = vec![(
        keys::CONDITION_GPU_READY.to_owned(),
        "Unknown".to_owned(),
        reasons::CONFLICT.to_owned(),
        format!(
            "selected by several GpuNodeProfiles ({}): gpuready leaves the node's taint and labels as they are until exactly one profile selects it",
            profiles.join(", ")
        ),
    )];
    // Per-layer conditions an earlier profile had gpuready write would mislead:
    // applying only `GpuReady` drops them (plan_conditions sees them as owned and
    // no longer wanted). A GpuReady* condition gpuready does not own is not ours
    // to remove.
    NodeChanges {
        conditions: plan_conditions(facts, desired, opts),
        ..NodeChanges::default()
    }
}

/// A node no profile governs any more: remove everything gpuready put there.
pub fn plan_release(facts: &NodeFacts) -> NodeChanges {
    let retainted = retaint(facts, None, None);
    let mut annotations = BTreeMap::new();
    for key in [ANNOTATION_TAINT, keys::ANNOTATION_RELEASED] {
        if key == ANNOTATION_TAINT && facts.owned.taint.is_some()
            || key == keys::ANNOTATION_RELEASED && facts.owned.released_at.is_some()
        {
            annotations.insert(key.to_owned(), None);
        }
    }
    let taint = (retainted.is_some() || !annotations.is_empty()).then(|| TaintChange {
        taints: retainted
            .map(|(t, _)| t)
            .unwrap_or_else(|| facts.taints.clone()),
        annotations,
        summary: "remove".to_owned(),
    });
    let owns_labels = facts
        .owned
        .labels
        .iter()
        .any(|k| facts.labels.contains_key(k));
    let owns_conditions = facts
        .owned
        .conditions
        .iter()
        .any(|t| facts.gpu_conditions.iter().any(|c| &c.type_ == t));
    NodeChanges {
        taint,
        labels: owns_labels.then(BTreeMap::new),
        conditions: owns_conditions.then(Vec::new),
        taint_held_by_brake: false,
    }
}
