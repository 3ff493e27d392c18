//! One node, all profiles, one instant: which profile governs it, every layer's
//! verdict, and the changes gpuready would make. Shared by `gpuready check`, the
//! controller and the tests.

use std::collections::BTreeMap;

use gpuready_api::GpuNodeProfile;
use gpuready_api::keys::reasons;
use jiff::Timestamp;
use kube_core::{ResourceExt, Selector};
use serde::Serialize;

use crate::evaluate::evaluate;
use crate::facts::NodeFacts;
use crate::lifecycle::Lifecycle;
use crate::no_execute;
use crate::plan::{self, NodeChanges, PlanOptions};
use crate::report::{DeadlinePassed, LayerReport, LayerResult, NodeState};
use crate::select::{Governance, govern};
use crate::timeline::ReadyRecord;

/// The labels profiles' selectors are matched against: the node's labels less
/// every key gpuready writes itself — its own domain (`gpuready.io/`) and the
/// `readyLabels` keys its annotation says it set on this node. gpuready's own
/// writes can then never change which profile governs a node: a selector that
/// reads them (refused at admission, but stored by an older CRD, or a
/// `readyLabels` key of another profile) cannot start a write loop. The status
/// task reports such a selector on its profile.
///
/// A requirement reads only its own key, so the labels are copied only when a
/// profile's selector names one of the keys left out: in the common case
/// (no selector reads what gpuready writes) this borrows the node's labels.
pub fn selectable_labels<'a>(
    facts: &'a NodeFacts,
    profiles: &[(&GpuNodeProfile, &Selector)],
) -> std::borrow::Cow<'a, BTreeMap<String, String>> {
    let written =
        |k: &str| gpuready_api::validate::is_owned_key(k) || facts.owned.labels.contains(k);
    let reads_written = profiles
        .iter()
        .any(|(p, _)| p.spec.selector_keys().into_iter().any(written));
    if reads_written && facts.labels.keys().any(|k| written(k)) {
        std::borrow::Cow::Owned(
            facts
                .labels
                .iter()
                .filter(|(k, _)| !written(k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    } else {
        std::borrow::Cow::Borrowed(&facts.labels)
    }
}

/// How the node relates to the profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GovernanceKind {
    Governed,
    Ungoverned,
    Conflict,
}

/// Everything gpuready concludes about one node.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAssessment {
    pub name: String,
    /// The governing profile; `None` when ungoverned or in conflict.
    #[serialize_always]
    pub profile: Option<String>,
    pub governance: GovernanceKind,
    /// Profiles that all select the node (only for conflicts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflicting_profiles: Vec<String>,
    /// `None` for an ungoverned node: there is nothing to be ready for.
    #[serialize_always]
    pub ready: Option<bool>,
    /// First failing gating layer's reason, `Ready`, `Conflict` or `Ungoverned`.
    pub reason: String,
    pub message: String,
    pub layers: Vec<LayerResult>,
    pub changes: NodeChanges,
    /// The governing profile is in Observe mode: `changes` stays empty.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub observe: bool,
    pub recheck_after_seconds: Option<u64>,
    /// Set while the node is past its profile's `notReadyDeadline`.
    pub deadline_passed: Option<DeadlinePassed>,
    /// Devices gated by gpuready's DeviceTaintRules (`gpu-3 (FatalXid)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tainted_devices: Vec<String>,
    /// What a governed node counts as: `ready`, `notReady`, `maintenance`,
    /// `waitingForGate` (`None` for a conflict or an ungoverned node).
    pub state: Option<NodeState>,
    /// Maintenance the node is in and the other readiness gates on it.
    #[serde(skip_serializing_if = "Lifecycle::is_quiet")]
    pub lifecycle: Lifecycle,
    /// Devices whose DeviceTaintRule escalates to `NoExecute` (`escalation`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub escalations: Vec<gpuready_api::DeviceEscalation>,
    /// Per bad device, the pods a `NoExecute` taint of gpuready's leaves
    /// running because they hold the device as a DRA-backed extended
    /// resource (kubernetes #141290), in words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_evicted: Vec<String>,
    /// How many pods `not_evicted` names under a taint that is `NoExecute`
    /// now (not a dry run, not an `Observe` profile's): left running.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_evicted_pods: usize,
    /// The node's last finished wait for readiness, as its annotation
    /// (`gpuready.io/timeline`) records it (governed nodes only).
    pub timeline: Option<ReadyRecord>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The verdict on one node before any write is planned: which profile governs
/// it and every layer's result. The controller judges once, consults the
/// safety brake with the verdict, then plans once ([`Judgement::plan`]); a
/// reader that wants only verdicts (status, tallies) never plans.
#[derive(Clone, Debug)]
pub struct Judgement<'a> {
    /// The assessment with `changes` still empty.
    pub verdict: NodeAssessment,
    basis: Basis<'a>,
}

#[derive(Clone, Debug)]
enum Basis<'a> {
    // Boxed: the report (layers, lifecycle, devices) dwarfs the other variants.
    Governed(&'a GpuNodeProfile, Box<LayerReport>),
    Conflict(Vec<String>),
    Ungoverned,
}

/// Judges one node against the profiles (each with its parsed selector).
pub fn judge<'a>(
    facts: &NodeFacts,
    profiles: &[(&'a GpuNodeProfile, &Selector)],
    now: Timestamp,
) -> Judgement<'a> {
    match govern(&selectable_labels(facts, profiles), profiles) {
        Governance::Governed(profile) => {
            let report: LayerReport = evaluate(&profile.spec, facts, now);
            Judgement {
                verdict: governed_verdict(facts, profile, &report),
                basis: Basis::Governed(profile, Box::new(report)),
            }
        }
        Governance::Conflict(names) => {
            // Observe promises zero node writes: the Conflict condition is written
            // only when at least one of the profiles involved enforces.
            let observe_only = profiles
                .iter()
                .filter(|(p, _)| names.contains(&p.name_any()))
                .all(|(p, _)| p.spec.mode == gpuready_api::Mode::Observe);
            Judgement {
                verdict: NodeAssessment {
                    ready: Some(false),
                    conflicting_profiles: names.clone(),
                    observe: observe_only,
                    ..NodeAssessment::bare(
                        facts,
                        GovernanceKind::Conflict,
                        reasons::CONFLICT,
                        format!(
                            "selected by {} GpuNodeProfiles ({}): narrow their nodeSelectors so exactly one selects the node",
                            names.len(),
                            names.join(", ")
                        ),
                    )
                },
                basis: Basis::Conflict(names),
            }
        }
        Governance::Ungoverned => Judgement {
            verdict: NodeAssessment::bare(
                facts,
                GovernanceKind::Ungoverned,
                "Ungoverned",
                "no GpuNodeProfile selects this node".to_owned(),
            ),
            basis: Basis::Ungoverned,
        },
    }
}

/// The verdict on a node `profile` governs, from its report.
fn governed_verdict(
    facts: &NodeFacts,
    profile: &GpuNodeProfile,
    report: &LayerReport,
) -> NodeAssessment {
    let verdict = plan::gpu_ready_condition(&profile.name_any(), report);
    let bad = || report.devices.iter().flat_map(|g| g.bad.iter());
    NodeAssessment {
        profile: Some(profile.name_any()),
        ready: Some(report.ready()),
        recheck_after_seconds: report.recheck_after_seconds,
        deadline_passed: report.deadline.clone(),
        tainted_devices: bad()
            .map(|b| format!("{} ({})", b.device, b.reason))
            .collect(),
        observe: profile.spec.mode == gpuready_api::Mode::Observe,
        layers: report.layers.clone(),
        state: Some(report.state()),
        lifecycle: report.lifecycle.clone(),
        escalations: bad()
            .filter_map(|b| {
                let e = b.escalation.as_ref()?;
                Some(gpuready_api::DeviceEscalation {
                    node: facts.name.clone(),
                    device: b.device.clone(),
                    reason: b.reason.clone(),
                    effect: e.effect.to_owned(),
                    no_execute_at: e.no_execute_at.clone(),
                    eviction: e.eviction.clone(),
                    not_evicted: b.not_evicted.as_ref().map(|n| n.message.clone()),
                    held: e.held.clone(),
                })
            })
            .collect(),
        not_evicted: bad()
            .filter_map(|b| b.not_evicted.as_ref().map(|n| n.message.clone()))
            .collect(),
        not_evicted_pods: bad()
            .filter_map(|b| b.not_evicted.as_ref())
            .filter(|n| n.no_execute_now)
            .map(|n| n.pods.len())
            .sum(),
        timeline: facts.owned.timeline.as_deref().and_then(ReadyRecord::parse),
        ..NodeAssessment::bare(
            facts,
            GovernanceKind::Governed,
            &verdict.reason,
            verdict.message,
        )
    }
}

impl Judgement<'_> {
    /// What this pass asks of the governing profile's `NoExecute` budget
    /// (`crate::no_execute`): `None` for a node no one profile governs.
    /// A profile without `escalation` asks nothing, which gives back what
    /// the node held.
    pub fn no_execute_ask(&self, facts: &NodeFacts) -> Option<(String, no_execute::Ask)> {
        let Basis::Governed(profile, report) = &self.basis else {
            return None;
        };
        let spec = &profile.spec;
        let mut ask = no_execute::Ask {
            percent: spec
                .escalation
                .as_ref()
                .map_or(0, |e| e.max_no_execute_percent),
            node_due: report.node_escalation.as_ref().is_some_and(|e| e.escalated),
            node_now: facts
                .taints
                .iter()
                .any(|t| t.key == spec.taint.key && t.effect == "NoExecute"),
            ..no_execute::Ask::default()
        };
        if let Some(g) = &report.devices {
            ask.devices = g.devices;
            let owned = facts.evidence.device_rules.as_deref().unwrap_or_default();
            for b in &g.bad {
                if b.escalation
                    .as_ref()
                    .is_none_or(|e| e.effect != "NoExecute")
                {
                    continue;
                }
                ask.devices_due.insert(b.device.clone());
                let name = crate::devices::escalation_rule_name(&b.driver, &b.pool, &b.device);
                let now = owned.iter().any(|r| {
                    r.metadata.name.as_deref() == Some(name.as_str())
                        && r.spec.taint.effect == "NoExecute"
                });
                if now {
                    ask.devices_now.insert(b.device.clone());
                }
            }
        }
        Some((profile.name_any(), ask))
    }

    /// Holds back what the budget (or the engaged brake) did not grant: the
    /// node's taint keeps its own effect, a device's escalation rule stays
    /// `None`, each with why; the verdict is judged again from the report.
    pub fn hold_no_execute(&mut self, facts: &NodeFacts, grant: &no_execute::Grant) {
        if !grant.holds_anything() {
            return;
        }
        let Basis::Governed(profile, report) = &mut self.basis else {
            return;
        };
        if let (Some(h), Some(e)) = (&grant.node_held, report.node_escalation.as_mut()) {
            e.escalated = false;
            e.held = Some(h.describe("nodes"));
        }
        let own_no_execute = profile
            .spec
            .device_gating
            .as_ref()
            .is_some_and(|g| g.effect == gpuready_api::DeviceTaintEffect::NoExecute);
        for b in report.devices.iter_mut().flat_map(|g| g.bad.iter_mut()) {
            if let (Some(h), Some(e)) = (grant.devices_held.get(&b.device), b.escalation.as_mut()) {
                e.effect = "None";
                e.held = Some(h.describe("devices"));
                if let Some(n) = b.not_evicted.as_mut() {
                    n.no_execute_now = own_no_execute;
                }
            }
        }
        self.verdict = governed_verdict(facts, profile, report);
    }

    /// The writes that bring the node in line with the verdict.
    pub fn plan(self, facts: &NodeFacts, opts: &PlanOptions) -> NodeAssessment {
        let mut a = self.verdict;
        a.changes = match &self.basis {
            Basis::Governed(profile, report) => plan::plan_governed(profile, facts, report, opts),
            Basis::Conflict(_) if a.observe => NodeChanges::default(),
            Basis::Conflict(names) => plan::plan_conflict(facts, names, opts),
            Basis::Ungoverned => plan::plan_release(facts),
        };
        a
    }
}

impl NodeAssessment {
    /// A verdict that says only whom it is about, how the node is governed
    /// and why: no layers, no changes, nothing found. The one place every
    /// field is named; each kind of verdict fills in what it has.
    fn bare(
        facts: &NodeFacts,
        governance: GovernanceKind,
        reason: &str,
        message: String,
    ) -> NodeAssessment {
        NodeAssessment {
            name: facts.name.clone(),
            profile: None,
            governance,
            conflicting_profiles: vec![],
            ready: None,
            reason: reason.to_owned(),
            message,
            layers: vec![],
            changes: NodeChanges::default(),
            observe: false,
            recheck_after_seconds: None,
            deadline_passed: None,
            tainted_devices: vec![],
            state: None,
            lifecycle: Lifecycle::default(),
            escalations: vec![],
            not_evicted: vec![],
            not_evicted_pods: 0,
            timeline: None,
        }
    }

    /// Writes the node's finished wait (`gpuready.io/timeline`) with the
    /// change that makes it Ready, or on its own once it is, unless the node
    /// carries that very record. An Observe profile writes nothing.
    pub fn record_wait(&mut self, facts: &NodeFacts, record: Option<&ReadyRecord>) {
        let Some(r) = record else {
            return;
        };
        if self.observe || self.governance != GovernanceKind::Governed || self.ready != Some(true) {
            return;
        }
        let value = r.to_string();
        if facts.owned.timeline.as_deref() == Some(value.as_str()) {
            return;
        }
        self.changes
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                gpuready_api::keys::ANNOTATION_TIMELINE.to_owned(),
                Some(value),
            );
    }

    /// Whether the planned changes write the node's finished wait.
    pub fn writes_wait(&self) -> bool {
        self.changes
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(gpuready_api::keys::ANNOTATION_TIMELINE))
    }
}

/// Judges and plans one node (what `gpuready check` shows).
pub fn assess(
    facts: &NodeFacts,
    profiles: &[(&GpuNodeProfile, &Selector)],
    opts: &PlanOptions,
) -> NodeAssessment {
    judge(facts, profiles, opts.now).plan(facts, opts)
}
