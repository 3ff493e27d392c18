//! The node changes gpuready would make, as exact differences: one merge patch on
//! the node (taint list, gpuready's labels and annotations) and one patch of
//! gpuready's own conditions on the status subresource. Each part is `None` when
//! the node already looks as wanted, so a no-op reconcile writes nothing.
//!
//! Ownership is exact: the taint is the governing profile's key and effect (or
//! the key:effect gpuready's annotation records, if a profile could have set that
//! key); labels are the keys gpuready's annotation lists, or keys the node lacks;
//! conditions are the `GpuReady*` types gpuready writes. Nothing else is touched.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use gpuready_api::keys::{self, reasons};
use gpuready_api::validate::is_profile_taint_key;
use gpuready_api::{GpuNodeProfile, Mode, TaintPolicy};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_core::ResourceExt;
use serde::Serialize;

use crate::devices::{DeviceRuleChange, RuleAction};
use crate::facts::{NodeFacts, listed_labels};
use crate::report::{LayerReport, NodeState, Status};
use gpuready_api::device_taint_rule::DeviceTaintRule;

/// Node conditions carry a human message; keep it readable in `kubectl describe`.
const MAX_CONDITION_MESSAGE: usize = 1024;

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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaintChange {
    /// The complete list to write (foreign taints untouched, in place).
    pub taints: Vec<Taint>,
    pub kind: TaintChangeKind,
    /// gpuready's taint after the change (`None` when removed).
    #[serde(skip_serializing_if = "Option::is_none")]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeChanges {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taint: Option<TaintChange>,
    /// Label keys to set (`Some`) or delete (`None`); only keys gpuready owns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, Option<String>>>,
    /// gpuready's annotations to set (`Some`) or delete (`None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, Option<String>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
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

/// Whether a taint on the node is gpuready's: exactly the governing profile's
/// key and effect, or exactly the key:effect gpuready's own annotation records —
/// the latter only if a profile could have named that key. Never by prefix: an
/// admin's `gpuready.io/maintenance` taint is not gpuready's.
fn is_ours(t: &Taint, facts: &NodeFacts, profile_taint: Option<&Taint>) -> bool {
    profile_taint.is_some_and(|p| p.key == t.key && p.effect == t.effect)
        // A bootstrap taint under the default key of an earlier release (kubelet
        // --register-with-taints from older docs): the current default replaces
        // it in the same patch.
        || profile_taint.is_some_and(|p| {
            p.key == keys::DEFAULT_TAINT_KEY
                && p.effect == t.effect
                && keys::PREVIOUS_DEFAULT_TAINT_KEYS.contains(&t.key.as_str())
        })
        || facts
            .owned
            .taint
            .as_ref()
            .is_some_and(|(k, e)| *k == t.key && *e == t.effect && is_profile_taint_key(k))
}

/// The taint list with gpuready's taints replaced by `want`, keeping every
/// foreign taint and its position. `None` when nothing changes.
fn retaint(
    facts: &NodeFacts,
    profile_taint: Option<&Taint>,
    want: Option<&Taint>,
) -> Option<TaintChange> {
    let ours: Vec<&Taint> = facts
        .taints
        .iter()
        .filter(|t| is_ours(t, facts, profile_taint))
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
        if !is_ours(t, facts, profile_taint) {
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
    let kind = match (want, ours.is_empty()) {
        (Some(_), true) => TaintChangeKind::Add,
        (Some(_), false) => TaintChangeKind::Replace,
        (None, _) => TaintChangeKind::Remove,
    };
    Some(TaintChange {
        taints,
        kind,
        ours: want.cloned(),
    })
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

/// The DeviceTaintRule changes for a governed node: one rule per bad device
/// when the profile gates devices and the pool was judged; none at all when
/// the profile does not gate devices (any rule gpuready holds goes); the rules
/// as they are while the pool cannot be judged (being republished).
fn plan_device_rules(
    profile: &str,
    spec: &gpuready_api::GpuNodeProfileSpec,
    facts: &NodeFacts,
    report: &LayerReport,
    now: jiff::Timestamp,
) -> Vec<DeviceRuleChange> {
    let Some(owned) = &facts.evidence.device_rules else {
        return vec![];
    };
    match (&spec.device_gating, &report.devices) {
        (None, _) => crate::devices::rule_changes(&facts.name, owned, None),
        (Some(_), Some(g)) => {
            let mut changes =
                crate::devices::rule_changes(&facts.name, owned, Some((g, profile, spec)));
            // gpuready's condition on the rules it keeps, only where the
            // claims were read: unread, no pod is known to be gone.
            if facts.evidence.extended_resource_holds.is_some() {
                let kept: Vec<DeviceTaintRule> = owned
                    .iter()
                    .filter(|r| {
                        !changes.iter().any(|c| {
                            c.action == RuleAction::Delete
                                && r.metadata.name.as_deref() == Some(c.name.as_str())
                        })
                    })
                    .cloned()
                    .collect();
                changes.extend(crate::devices::status_changes(&kept, g, now));
            }
            changes
        }
        (Some(_), None) => vec![],
    }
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

/// gpuready's conditions to write: a desired condition whose status, reason or
/// message differs from the node's (keeping `lastTransitionTime` when only the
/// reason or message moved), one whose heartbeat is due when a heartbeat is
/// set, and the removal of gpuready's condition types no longer wanted. `None`
/// when the node already carries exactly these.
fn plan_conditions(
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

/// Whether gpuready owns this label key on the node: its own verdict labels
/// (`keys::NODE_LABELS_WRITTEN`) always; any other key only if gpuready's
/// annotation lists it.
fn owns_label(facts: &NodeFacts, key: &str) -> bool {
    keys::NODE_LABELS_WRITTEN.contains(&key) || facts.owned.labels.contains(key)
}

/// Label changes towards `desired`, touching only keys gpuready owns or that
/// the node lacks, plus the `gpuready.io/labels` annotation recording the keys
/// owned afterwards beyond gpuready's own verdict labels, which are its by
/// name (no annotation at all when there are none: a profile without
/// `readyLabels` adds no annotation to its nodes). An annotation an earlier
/// build wrote, which lists the verdict labels too, is left as it is while it
/// records the same other keys: no fleet-wide rewrite on upgrade. A desired
/// key another writer already set (any value) is left alone and reported.
fn plan_labels(
    facts: &NodeFacts,
    desired: BTreeMap<String, String>,
    annotations: &mut BTreeMap<String, Option<String>>,
) -> (Option<BTreeMap<String, Option<String>>>, Vec<String>) {
    let mut changes = BTreeMap::new();
    let mut owned_after = BTreeSet::new();
    let mut foreign = Vec::new();
    for (k, v) in desired {
        let present = facts.labels.get(&k);
        if present.is_some() && !owns_label(facts, &k) {
            foreign.push(k);
            continue;
        }
        match present {
            Some(p) if *p == v => {}
            // A readyLabels value that changed (the profile was edited) is
            // removed now and set on the next pass: the chart's admission
            // policy never lets gpuready overwrite a value, so that an admin's
            // value can never be taken over (docs/hardening.md).
            Some(_) if !keys::NODE_LABELS_WRITTEN.contains(&k.as_str()) => {
                changes.insert(k.clone(), None);
            }
            _ => {
                changes.insert(k.clone(), Some(v));
            }
        }
        owned_after.insert(k);
    }
    for k in &facts.owned.labels {
        if !owned_after.contains(k) && facts.labels.contains_key(k) {
            changes.insert(k.clone(), None);
        }
    }
    let beyond_verdict = |k: &&str| !keys::NODE_LABELS_WRITTEN.contains(k);
    let record: Vec<&str> = owned_after
        .iter()
        .map(String::as_str)
        .filter(beyond_verdict)
        .collect();
    let recorded: BTreeSet<&str> = facts
        .owned
        .labels_annotation
        .as_deref()
        .map(|a| listed_labels(a).filter(beyond_verdict).collect())
        .unwrap_or_default();
    if record.iter().copied().collect::<BTreeSet<_>>() != recorded {
        annotations.insert(
            keys::ANNOTATION_LABELS.to_owned(),
            (!record.is_empty()).then(|| record.join(",")),
        );
    }
    ((!changes.is_empty()).then_some(changes), foreign)
}

/// Changes for a node one profile governs.
pub fn plan_governed(
    profile: &GpuNodeProfile,
    facts: &NodeFacts,
    report: &LayerReport,
    opts: &PlanOptions,
) -> NodeChanges {
    let spec = &profile.spec;
    let mut device_taint_rules =
        plan_device_rules(&profile.name_any(), spec, facts, report, opts.now);
    // An engaged brake holds new device taints as it holds node taints: a
    // rule that taints (not a dry run's `None`) is created only once it
    // releases; the rules in place stay.
    let rules_before = device_taint_rules.len();
    if opts.hold_new_taints {
        device_taint_rules.retain(|c| !(c.action == RuleAction::Create && c.taints()));
    }
    let rules_held = device_taint_rules.len() < rules_before;
    if spec.mode == Mode::Observe {
        // Zero node writes; device rules only with effect None (reported by the
        // API server as what NoExecute would do, with no effect on pods).
        return NodeChanges {
            device_taint_rules,
            ..NodeChanges::default()
        };
    }
    let name = profile.name_any();
    let ready = report.ready();
    // The taint follows the GPU stack (maintenance included), never another
    // system's gate: holding it for a gate whose own pods must land on the
    // node could leave both waiting on each other.
    let gpu_ready = report.gpu_ready();
    let released = facts.owned.released_at.is_some();

    // Taint.
    let released_for_good = spec.taint_policy == TaintPolicy::UntilFirstReady && released;
    let want_taint = !gpu_ready && !released_for_good;
    let taint = Taint {
        key: spec.taint.key.clone(),
        value: Some(spec.taint.value.clone()).filter(|v| !v.is_empty()),
        effect: spec.taint.effect.as_str().to_owned(),
        time_added: None,
    };
    // Escalated (`spec.escalation`): the same taint with effect NoExecute. The
    // profile's own effect still names the taint gpuready may replace, and the
    // annotation the escalated one once written.
    let escalated = report
        .node_escalation
        .as_ref()
        .is_some_and(|e| e.escalated)
        .then(|| Taint {
            effect: "NoExecute".to_owned(),
            ..taint.clone()
        });
    let has_ours = facts.taints.iter().any(|t| is_ours(t, facts, Some(&taint)));
    let held = want_taint && !has_ours && opts.hold_new_taints;
    let want = (want_taint && !held).then(|| escalated.as_ref().unwrap_or(&taint));
    let taint_change = retaint(facts, Some(&taint), want);
    let mut annotations = BTreeMap::new();
    // The annotation names the taint gpuready holds after this change, including
    // one it found already in place (kubelet --register-with-taints), so release
    // and key changes can still tell it is gpuready's.
    annotation_change(
        keys::ANNOTATION_TAINT,
        want.map(|t| format!("{}:{}", t.key, t.effect)),
        current_taint_annotation(facts).as_ref(),
        &mut annotations,
    );
    if spec.taint_policy == TaintPolicy::UntilFirstReady && gpu_ready && !released {
        annotations.insert(
            keys::ANNOTATION_RELEASED.to_owned(),
            Some(opts.now.to_string()),
        );
    }

    // Labels.
    let mut desired_labels = BTreeMap::from([
        (keys::LABEL_PROFILE.to_owned(), name.clone()),
        (keys::LABEL_READY.to_owned(), ready.to_string()),
    ]);
    if ready {
        desired_labels.extend(spec.ready_labels.clone());
    }
    if report.deadline.as_ref().is_some_and(|d| d.label) {
        desired_labels.insert(keys::LABEL_DEADLINE_EXCEEDED.to_owned(), "true".to_owned());
    }
    let (labels, foreign_labels_left) = plan_labels(facts, desired_labels, &mut annotations);

    // Conditions.
    let mut desired = vec![gpu_ready_condition(&name, report)];
    // The probe's own condition, whenever the Health layer was judged: what a
    // person reading `kubectl describe node` wants to see first after an XID.
    if let Some(h) = report.get(gpuready_api::Layer::Health) {
        desired.push(DesiredCondition {
            type_: keys::CONDITION_PROBE_HEALTHY.to_owned(),
            status: condition_status(h.status).to_owned(),
            reason: h.reason.clone(),
            message: h.message.clone(),
        });
    }
    if spec.per_layer_node_conditions {
        for l in &report.layers {
            desired.push(DesiredCondition {
                type_: l.layer.condition_type(),
                status: condition_status(l.status).to_owned(),
                reason: l.reason.clone(),
                message: l.message.clone(),
            });
        }
    }

    NodeChanges {
        taint: taint_change,
        labels,
        annotations: (!annotations.is_empty()).then_some(annotations),
        conditions: plan_conditions(facts, desired, opts),
        taint_held_by_brake: held || rules_held,
        foreign_labels_left,
        device_taint_rules,
    }
}

/// A node matched by several profiles: taint and labels stay as they are; the
/// `GpuReady` condition says why (and gpuready's per-layer conditions, which
/// would mislead, are removed).
pub fn plan_conflict(facts: &NodeFacts, profiles: &[String], opts: &PlanOptions) -> NodeChanges {
    let desired = vec![DesiredCondition {
        type_: keys::CONDITION_GPU_READY.to_owned(),
        status: "Unknown".to_owned(),
        reason: reasons::CONFLICT.to_owned(),
        message: format!(
            "selected by several GpuNodeProfiles ({}): gpuready leaves the node's taint and labels as they are until exactly one profile selects it",
            profiles.join(", ")
        ),
    }];
    NodeChanges {
        conditions: plan_conditions(facts, desired, opts),
        ..NodeChanges::default()
    }
}

/// A node no Enforce profile selects. gpuready takes back only what it put
/// there: the taint its annotation records (exact key and effect), the label
/// keys its annotation lists, its annotations and its condition types. A node
/// gpuready never wrote carries none of these and is never written — whatever
/// taint it has, gpuready's default key included (a bootstrap taint from
/// `--register-with-taints` waits for a profile).
pub fn plan_release(facts: &NodeFacts) -> NodeChanges {
    let taint = retaint(facts, None, None);
    let mut annotations = BTreeMap::new();
    if facts.owned.taint.is_some() {
        annotations.insert(keys::ANNOTATION_TAINT.to_owned(), None);
    }
    if facts.owned.released_at.is_some() {
        annotations.insert(keys::ANNOTATION_RELEASED.to_owned(), None);
    }
    if facts.owned.labels_annotation.is_some() {
        annotations.insert(keys::ANNOTATION_LABELS.to_owned(), None);
    }
    if facts.owned.timeline.is_some() {
        annotations.insert(keys::ANNOTATION_TIMELINE.to_owned(), None);
    }
    // Only recorded ownership here: on a node gpuready does not govern, even a
    // `gpuready.io/` label someone else set is not gpuready's to delete.
    let labels: BTreeMap<String, Option<String>> = facts
        .labels
        .keys()
        .filter(|k| facts.owned.labels.contains(*k))
        .map(|k| (k.clone(), None))
        .collect();
    let remove: Vec<String> = facts
        .gpu_conditions
        .iter()
        .map(|c| c.type_.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    NodeChanges {
        taint,
        labels: (!labels.is_empty()).then_some(labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        conditions: (!remove.is_empty()).then(|| ConditionChange {
            set: vec![],
            remove,
        }),
        taint_held_by_brake: false,
        foreign_labels_left: vec![],
        // Every DeviceTaintRule gpuready holds for the node goes with it.
        device_taint_rules: facts
            .evidence
            .device_rules
            .as_deref()
            .map(|owned| crate::devices::rule_changes(&facts.name, owned, None))
            .unwrap_or_default(),
    }
}
