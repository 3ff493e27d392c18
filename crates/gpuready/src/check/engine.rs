//! The engine over a check's nodes: each node judged as it is read, with the
//! evidence read beside it, into the report `check` prints.

use std::path::PathBuf;

use gpuready_api::GpuNodeProfile;
use gpuready_core::evidence::EvidenceIndex;
use gpuready_core::group_peers::group_keys;
use gpuready_core::tally::NodeCounts;
use gpuready_core::wide_rules::WideRule;
use gpuready_core::{NodeAssessment, NodeFacts, PlanOptions, assess};
use jiff::Timestamp;
use kube::core::Selector;
use serde::Serialize;

use super::extra::{ExtraEvidence, GroupedNodes};
use crate::input::InputError;

/// The whole report, as `--output json|yaml` prints it.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    pub now: String,
    pub nodes: Vec<NodeAssessment>,
    pub summary: Summary,
    /// Governed nodes whose taint is still to be written although the API
    /// server refused it last time (their `GpuReady` condition says so): they
    /// are not gated as their verdict says.
    #[serde(rename = "taintRefused", skip_serializing_if = "Vec::is_empty")]
    pub taint_refused: Vec<String>,
    /// Anyone's `NoExecute` DeviceTaintRules whose selector names no pool:
    /// they evict across the cluster (kubernetes #141422). Reported only: the
    /// exit code does not change for them.
    #[serde(
        rename = "clusterWideDeviceTaintRules",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub wide_rules: Vec<WideRule>,
}

/// The report's summary: the same counting as profile status and metrics.
pub type Summary = NodeCounts;

impl CheckReport {
    /// 0 when every governed node is ready and gated as it should be, 1
    /// otherwise (a node in maintenance or held by another gate takes no GPU
    /// work either).
    pub fn exit_code(&self) -> u8 {
        let m = &self.summary;
        u8::from(
            m.not_ready > 0
                || m.maintenance > 0
                || m.waiting_for_gate > 0
                || m.conflicts > 0
                || !self.taint_refused.is_empty(),
        )
    }
}

/// Assesses every node against the profiles.
pub fn run_engine(
    nodes: &[k8s_openapi::api::core::v1::Node],
    profiles: &[GpuNodeProfile],
    extra: &mut ExtraEvidence,
    now: Timestamp,
) -> Result<CheckReport, InputError> {
    let keys = group_keys(profiles);
    if !keys.is_empty() {
        extra.grouped = GroupedNodes::new(keys);
        nodes.iter().for_each(|n| extra.grouped.add(n));
    }
    judge(profiles, extra, now, |each| {
        nodes.iter().for_each(each);
        Ok(())
    })
}

/// Assesses every node that `feed` hands over, one at a time: a node is judged
/// as soon as it is read and only its assessment is kept (the slim result the
/// report prints), never the Node, so an offline check over a million nodes
/// holds a million assessments, not a million Nodes beside them.
pub fn judge(
    profiles: &[GpuNodeProfile],
    extra: &ExtraEvidence,
    now: Timestamp,
    feed: impl FnOnce(&mut dyn FnMut(&k8s_openapi::api::core::v1::Node)) -> Result<(), InputError>,
) -> Result<CheckReport, InputError> {
    let mut out: Vec<NodeAssessment> = Vec::new();
    let mut taint_refused = Vec::new();
    judge_each(profiles, extra, now, feed, |a, refused| {
        if refused {
            taint_refused.push(a.name.clone());
        }
        out.push(a);
    })?;
    out.shrink_to_fit();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    taint_refused.sort();
    let summary = NodeCounts::of(&out);
    Ok(CheckReport {
        now: now.to_string(),
        nodes: out,
        summary,
        taint_refused,
        wide_rules: extra.wide_rules.clone(),
    })
}

/// Judges every node `feed` hands over and hands each assessment to `each`,
/// with whether the node's taint was refused last time and is still to be
/// written (see [`CheckReport::taint_refused`]). Keeps nothing itself.
pub(crate) fn judge_each(
    profiles: &[GpuNodeProfile],
    extra: &ExtraEvidence,
    now: Timestamp,
    feed: impl FnOnce(&mut dyn FnMut(&k8s_openapi::api::core::v1::Node)) -> Result<(), InputError>,
    mut each: impl FnMut(NodeAssessment, bool),
) -> Result<(), InputError> {
    let index = EvidenceIndex::new(
        extra.resource_slices.as_deref(),
        extra.node_features.as_deref(),
    )
    .with_compute_domain_cliques(extra.compute_domain_cliques.as_deref())
    .with_resource_claims(extra.resource_claims.as_deref());
    let selectors: Vec<Selector> = profiles
        .iter()
        .map(|p| {
            gpuready_core::select::profile_selector(p).map_err(|e| InputError::Field {
                path: PathBuf::from("<profiles>"),
                doc: 0,
                what: format!(" (GpuNodeProfile {})", e.profile),
                field: "spec.nodeSelector".into(),
                message: e.message,
            })
        })
        .collect::<Result<_, _>>()?;
    let pairs: Vec<(&GpuNodeProfile, &Selector)> = profiles.iter().zip(selectors.iter()).collect();
    // `run`'s default: conditions are rewritten only when they change.
    let opts = PlanOptions {
        now,
        heartbeat_seconds: 0,
        hold_new_taints: false,
        write_refused: false,
    };
    feed(&mut |n| {
        let facts = NodeFacts::from_node(n);
        let refused_before = taint_refused_before(&facts);
        let rules = extra.device_rules.as_ref().map(|all| {
            all.iter()
                .filter(|r| {
                    gpuready_api::device_taint_rule::node_of(r) == Some(facts.name.as_str())
                })
                .cloned()
                .collect()
        });
        let mut evidence = index.for_node(&facts.name).with_device_rules(rules);
        evidence.clique_group = extra.grouped.group_of(&facts, &pairs);
        // The controller's reading of a report ConfigMap, through the same
        // core function (`probe::evidence_for`); `--probe-report` wins.
        let probe = match extra.probe_reports.get(&facts.name) {
            Some(p) => Some(p.clone()),
            None => extra.carriers.evidence_for(&facts.name),
        };
        let a = assess(
            &facts.with_evidence(evidence).with_probe(probe),
            &pairs,
            &opts,
        );
        let refused = refused_before && a.changes.taint.is_some();
        each(a, refused);
    })
}

/// Whether the node's `GpuReady` condition says the API server refused
/// gpuready's taint (the controller writes it so when the taint alone is
/// refused).
fn taint_refused_before(facts: &NodeFacts) -> bool {
    facts.gpu_conditions.iter().any(|c| {
        c.type_ == gpuready_api::keys::CONDITION_GPU_READY
            && c.message
                .as_deref()
                .is_some_and(|m| m.contains(gpuready_api::keys::TAINT_REFUSED))
    })
}
