//! The evidence beside the Nodes a check judges with: read from the files
//! `check` is given, and the labels of the nodes a profile groups, gathered
//! before any node is judged.

use std::path::PathBuf;

use gpuready_api::GpuNodeProfile;
use gpuready_api::compute_domain::ComputeDomainClique;
use gpuready_api::device_taint_rule::DeviceTaintRule;
use gpuready_api::dra::ResourceSlice;
use gpuready_api::nfd::NodeFeature;
use gpuready_api::resource_claim::ResourceClaim;
use gpuready_core::NodeFacts;
use gpuready_core::clique_groups::GroupIndex;
use gpuready_core::group_peers::{group_keys, read_group};
use gpuready_core::probe::{Carriers, ProbeEvidence};
use gpuready_core::wide_rules::WideRule;
use kube::core::Selector;

use super::args::CheckArgs;
use crate::input::{self, InputError};

/// Objects read beside the Nodes. `None`: the source was not read.
#[derive(Debug, Default)]
pub struct ExtraEvidence {
    pub resource_slices: Option<Vec<ResourceSlice>>,
    pub node_features: Option<Vec<NodeFeature>>,
    /// The DRA driver's ComputeDomainCliques.
    pub compute_domain_cliques: Option<Vec<ComputeDomainClique>>,
    /// Probe report ConfigMaps (`--probe-reports`, or the cluster's).
    pub carriers: Carriers,
    /// Bare probe reports by node name (`--probe-report`): they win over a
    /// ConfigMap for the same node.
    pub probe_reports: std::collections::BTreeMap<String, ProbeEvidence>,
    /// gpuready's own DeviceTaintRules. Offline, with ResourceSlice files
    /// given and no `--device-taint-rules`, none are assumed to exist: the
    /// plan shows every rule to create.
    pub device_rules: Option<Vec<DeviceTaintRule>>,
    /// Anyone's `NoExecute` DeviceTaintRules whose selector names no pool
    /// (kubernetes #141422), from every rule read.
    pub wide_rules: Vec<WideRule>,
    /// ResourceClaims (the scheduler's extended-resource claims are read).
    pub resource_claims: Option<Vec<ResourceClaim>>,
    /// The nodes in a `fabric.groupByLabel` group, read before any node is
    /// judged (each node's verdict reads its group's cliques).
    pub grouped: GroupedNodes,
}

/// The labels of every node carrying a label a profile groups by, and their
/// groups: what `gpuready run` keeps from its node cache, built here in one
/// pass over the nodes. Empty when no profile groups nodes (no pass then).
#[derive(Debug, Default)]
pub struct GroupedNodes {
    index: GroupIndex,
    labels: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
}

impl GroupedNodes {
    /// Starts an empty index of `keys`; `add` each node.
    pub(super) fn new(keys: std::collections::BTreeSet<String>) -> GroupedNodes {
        GroupedNodes {
            index: GroupIndex::with_keys(keys),
            labels: Default::default(),
        }
    }

    pub(super) fn add(&mut self, node: &k8s_openapi::api::core::v1::Node) {
        let Some(labels) = &node.metadata.labels else {
            return;
        };
        if !self.index.keys().iter().any(|k| labels.contains_key(k)) {
            return;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        self.index
            .update(&name, labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        self.labels.insert(name, labels.clone());
    }

    /// The node's group, as the Fabric layer reads it.
    pub(super) fn group_of(
        &self,
        facts: &NodeFacts,
        pairs: &[(&GpuNodeProfile, &Selector)],
    ) -> Option<gpuready_core::clique_groups::CliqueGroup> {
        read_group(facts, pairs, |key, value| {
            self.index
                .members(key, value)
                .filter_map(|n| Some((n.to_owned(), self.labels.get(n)?.clone())))
                .collect::<Vec<_>>()
        })
    }
}

impl ExtraEvidence {
    /// Every DeviceTaintRule read (`None`: not read): gpuready's own for
    /// device gating, anyone's wide `NoExecute` rule for the report.
    pub(super) fn set_device_taint_rules(&mut self, all: Option<Vec<DeviceTaintRule>>) {
        self.wide_rules = all
            .as_deref()
            .map(gpuready_core::wide_rules::wide_rules)
            .unwrap_or_default();
        self.device_rules = all.map(|a| {
            a.into_iter()
                .filter(gpuready_api::device_taint_rule::is_owned)
                .collect()
        });
    }
}

/// The objects of every file in `paths`, or `None` where none was given (the
/// source is then not read).
fn read_files<T>(
    paths: &[PathBuf],
    read: fn(&std::path::Path) -> Result<Vec<T>, InputError>,
) -> Result<Option<Vec<T>>, InputError> {
    if paths.is_empty() {
        return Ok(None);
    }
    let mut all = Vec::new();
    for p in paths {
        all.extend(read(p)?);
    }
    Ok(Some(all))
}

pub(super) fn read_evidence_files(args: &CheckArgs) -> Result<ExtraEvidence, InputError> {
    // Read in the order they always were, so the same bad file is named first.
    let resource_slices = read_files(&args.resource_slices, input::read_resource_slices)?;
    let mut extra = ExtraEvidence {
        device_rules: resource_slices.as_ref().map(|_| Vec::new()),
        resource_slices,
        ..ExtraEvidence::default()
    };
    if let Some(all) = read_files(&args.device_taint_rules, input::read_device_taint_rules)? {
        extra.set_device_taint_rules(Some(all));
    }
    extra.resource_claims = read_files(&args.resource_claims, input::read_resource_claims)?;
    extra.node_features = read_files(&args.node_features, input::read_node_features)?;
    extra.compute_domain_cliques = read_files(
        &args.compute_domain_cliques,
        input::read_compute_domain_cliques,
    )?;
    if let Some(all) = read_files(&args.probe_reports, input::read_configmaps)? {
        extra.carriers = Carriers::new(all);
    }
    for arg in &args.probe_report {
        let (node, path) = read_probe_report(arg)?;
        extra.probe_reports.insert(node, path);
    }
    Ok(extra)
}

/// One `--probe-report [NODE=]FILE`: the node it is for and what it says. A
/// report the engine cannot read is kept as such (`ProbeReportInvalid`), as
/// the controller keeps an unreadable ConfigMap.
fn read_probe_report(arg: &str) -> Result<(String, ProbeEvidence), InputError> {
    let (node, file) = match arg.split_once('=') {
        Some((n, f)) if !n.is_empty() && !n.contains('/') => (Some(n.to_owned()), f),
        _ => (None, arg),
    };
    let path = PathBuf::from(file);
    let text = std::fs::read_to_string(&path).map_err(|source| InputError::Read {
        path: path.clone(),
        source,
    })?;
    let evidence = ProbeEvidence::from_json(&text);
    let named = match &evidence {
        ProbeEvidence::Report(r) => r.node.clone(),
        ProbeEvidence::Invalid(_) => None,
    };
    match node.or(named) {
        Some(n) => Ok((n, evidence)),
        None => Err(InputError::Field {
            path,
            doc: 1,
            what: String::new(),
            field: "node".into(),
            message: "the report names no node (a --once report): pass it as NODE=FILE".into(),
        }),
    }
}

/// The evidence files, and — only where a profile groups nodes — a first
/// pass over the node files for the labels of the grouped nodes (a node's
/// verdict reads its group's cliques).
pub(crate) fn read_evidence_files_for(
    profiles: &[GpuNodeProfile],
    args: &CheckArgs,
) -> Result<ExtraEvidence, InputError> {
    let mut extra = read_evidence_files(args)?;
    let keys = group_keys(profiles);
    if !keys.is_empty() {
        extra.grouped = GroupedNodes::new(keys);
        for n in &args.nodes {
            input::for_each_node(n, &mut |node| extra.grouped.add(node))?;
        }
    }
    Ok(extra)
}
