//! `gpuready check`: the engine over node dumps or a live cluster (read-only),
//! printed as a table, JSON or YAML. It reads what `gpuready run` reads — the
//! Nodes, profiles, ResourceSlices, NodeFeatures, gpuready's DeviceTaintRules,
//! the DRA driver's ComputeDomainCliques and the probe report ConfigMaps — and
//! hands them to the same engine.

use std::io::Write as _;
use std::path::PathBuf;

use gpuready_api::GpuNodeProfile;
use gpuready_api::compute_domain::ComputeDomainClique;
use gpuready_api::device_taint_rule::DeviceTaintRule;
use gpuready_api::dra::ResourceSlice;
use gpuready_api::nfd::NodeFeature;
use gpuready_api::resource_claim::ResourceClaim;
use gpuready_core::clique_groups::GroupIndex;
use gpuready_core::evidence::EvidenceIndex;
use gpuready_core::group_peers::{group_keys, read_group};
use gpuready_core::probe::{Carriers, ProbeEvidence};
use gpuready_core::report::NodeState;
use gpuready_core::tally::NodeCounts;
use gpuready_core::wide_rules::WideRule;
use gpuready_core::{GovernanceKind, NodeAssessment, NodeFacts, PlanOptions, assess};
use jiff::Timestamp;
use kube::core::Selector;
use serde::Serialize;

use crate::cluster::{ClusterArgs, ClusterError, describe_request_error};
use crate::input::{self, InputError};

/// The offline check that spills its report as it judges (what `main` runs
/// for `--nodes`); it builds on this module, never the other way round.
pub mod spill;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Node dumps: what `kubectl get nodes -o json` (or `-o yaml`) prints. Several
    /// files may follow one flag. Without it, nodes are read from the cluster of
    /// the current kubeconfig context (read-only).
    #[arg(long, value_name = "FILE", num_args = 1.., requires = "profiles")]
    pub nodes: Vec<PathBuf>,
    /// GpuNodeProfile YAML (multi-document allowed). Required with --nodes.
    /// Without --nodes it is optional: given, it replaces the cluster's profiles
    /// (a what-if before applying them).
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub profiles: Vec<PathBuf>,
    /// DRA ResourceSlices: what `kubectl get resourceslices -o json` prints.
    /// Given, every node is judged with them (a node with none has no slice);
    /// without it offline checks read no DRA evidence. Live checks read them
    /// from the cluster when resource.k8s.io/v1 is served.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub resource_slices: Vec<PathBuf>,
    /// NFD NodeFeature objects: what `kubectl get nodefeatures -A -o json`
    /// prints. Their PCI scan counts the NVIDIA GPUs on each node's bus.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub node_features: Vec<PathBuf>,
    /// The NVIDIA DRA driver's ComputeDomainCliques: what `kubectl get
    /// computedomaincliques -A -o json` prints. Read by profiles with
    /// fabric.computeDomainCliques; without it an offline check reads none
    /// (the Fabric layer is then Unknown for them). Live checks read them
    /// from the cluster when resource.nvidia.com/v1beta1 is served.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub compute_domain_cliques: Vec<PathBuf>,
    /// DeviceTaintRules: what `kubectl get devicetaintrules -o json` prints.
    /// gpuready's own among them are the rules device gating plans against
    /// (without the flag an offline check assumes none exist), and any rule's
    /// `NoExecute` taint without a pool in its selector is reported: it evicts
    /// across the cluster (kubernetes #141422). Live checks read them all.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub device_taint_rules: Vec<PathBuf>,
    /// ResourceClaims: what `kubectl get resourceclaims -A -o json` prints.
    /// The claims the scheduler made for DRA-backed extended resources name
    /// the pods a `NoExecute` device taint does not evict (kubernetes
    /// #141290). Live checks read them from the cluster.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub resource_claims: Vec<PathBuf>,

    /// Probe report ConfigMaps for the Health layer, as `gpuready run` reads
    /// them: what `kubectl get configmaps -n gpuready-system -l
    /// gpuready.io/probe-report=true -o yaml` (or `-o json`) prints; a List,
    /// single objects, multi-document YAML. Only ConfigMaps labelled
    /// gpuready.io/probe-report=true count, each for the node its name
    /// (gpuready-probe-<node>) names. Given, they replace the cluster's in a
    /// live check; without them an offline check reads no probe report.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub probe_reports: Vec<PathBuf>,
    /// One bare probe report for the Health layer (what `gpuready probe --once
    /// --output json` prints, or a report ConfigMap's report.json): `NODE=FILE`,
    /// or `FILE` when the report names its node. Wins over a ConfigMap's for
    /// the same node.
    #[arg(long, value_name = "[NODE=]FILE", num_args = 1..)]
    pub probe_report: Vec<String>,
    /// Where a live check reads the probe report ConfigMaps: the namespace
    /// `gpuready run` reads them from (its --probe-namespace; the chart's
    /// release namespace). A namespace without reports, or one gpuready cannot
    /// list, gives no reports (the latter with a warning).
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "GPUREADY_PROBE_NAMESPACE",
        default_value = "gpuready-system"
    )]
    pub probe_namespace: String,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Evaluate as of this instant (RFC 3339) instead of now: reproducible runs
    /// over saved dumps, whose GFD timestamps age otherwise.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<Timestamp>,
    /// The cluster to read when no --nodes are given.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Why a live check could not run. Maps to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A request failed; the text names the server when it was not reached.
    #[error("{0}")]
    Request(String),
    #[error(transparent)]
    Input(#[from] InputError),
}

/// Live check: nodes (and, unless files are given, profiles) from the cluster.
/// Only GET/LIST requests are sent.
pub async fn check_live(args: &CheckArgs) -> Result<CheckReport, LiveError> {
    let (client, server) = args.cluster.client().await?;
    check_cluster(&client, &server, args).await
}

/// The live check over an existing client; `server` names the API server in
/// errors. The tests judge the clusters they build through this, so "what
/// `check` prints" and "what the tests compare against" cannot drift apart.
pub async fn check_cluster(
    client: &kube::Client,
    server: &str,
    args: &CheckArgs,
) -> Result<CheckReport, LiveError> {
    use kube::api::{Api, ListParams};
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| LiveError::Request(describe_request_error(server, "listing nodes", &e)))?
        .items;
    let profiles = if args.profiles.is_empty() {
        // Untyped, then typed one by one, as `gpuready run` reads them: one
        // profile the types cannot hold (admitted by an older CRD) is named
        // and skipped, not taken for an unreachable server.
        match crate::readers::dynamic_api(client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list
                .items
                .iter()
                .filter_map(|o| {
                    let name = o.metadata.name.as_deref().unwrap_or_default();
                    let typed = crate::readers::to_profile(o).and_then(|p| {
                        gpuready_core::select::profile_selector(&p)
                            .map(|_| p)
                            .map_err(|e| format!("spec.nodeSelector: {}", e.message))
                    });
                    typed
                        .map_err(|why| {
                            eprintln!(
                                "warning: GpuNodeProfile {name} cannot be read and is skipped, as gpuready run skips it: {why}"
                            )
                        })
                        .ok()
                })
                .collect(),
            Err(kube::Error::Api(s)) if s.code == 404 => {
                eprintln!(
                    "warning: the GpuNodeProfile CRD is not installed: every node is ungoverned (pass --profiles FILE for a what-if)"
                );
                Vec::new()
            }
            Err(e) => {
                return Err(LiveError::Request(describe_request_error(
                    server,
                    "listing gpunodeprofiles",
                    &e,
                )));
            }
        }
    } else {
        input::read_all_profiles(&args.profiles)?
    };
    let mut extra = read_evidence_files(args)?;
    if args.resource_slices.is_empty() {
        extra.resource_slices = list_resource_slices(client).await?;
    }
    if args.node_features.is_empty() {
        extra.node_features = list_node_features(client).await?;
    }
    if args.device_taint_rules.is_empty() {
        let all = list_device_rules(client).await?;
        extra.set_device_taint_rules(all);
    }
    if args.resource_claims.is_empty() {
        extra.resource_claims = list_resource_claims(client).await?;
    }
    if args.compute_domain_cliques.is_empty() {
        extra.compute_domain_cliques = list_compute_domain_cliques(client).await?;
    }
    if args.probe_reports.is_empty() {
        extra.carriers = list_probe_reports(client, &args.probe_namespace).await?;
    }
    Ok(run_engine(
        &nodes,
        &profiles,
        &mut extra,
        args.now.unwrap_or_else(Timestamp::now),
    )?)
}

/// `resource.k8s.io/v1` ResourceSlices, or `None` where the API is not served
/// (clusters before 1.34, or DRA turned off): the evidence is then Unknown.
async fn list_resource_slices(
    client: &kube::Client,
) -> Result<Option<Vec<ResourceSlice>>, LiveError> {
    use kube::api::{Api, DynamicObject, ListParams};
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &crate::readers::slice_resource());
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(Some(
            list.items
                .into_iter()
                .filter_map(crate::readers::slice_from_dynamic)
                .collect(),
        )),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
            eprintln!(
                "warning: resource.k8s.io/v1 ResourceSlices are not served or not readable ({}): DRA evidence is unavailable",
                s.code
            );
            Ok(None)
        }
        Err(e) => Err(LiveError::Request(format!("listing resourceslices: {e}"))),
    }
}

/// NFD's NodeFeatures, or `None` where the CRD is not installed.
async fn list_node_features(client: &kube::Client) -> Result<Option<Vec<NodeFeature>>, LiveError> {
    use kube::api::{Api, ListParams};
    match Api::<NodeFeature>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(Some(list.items)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
            eprintln!(
                "warning: NodeFeatures are not served or not readable ({}): GPU counts on the PCI bus are unavailable",
                s.code
            );
            Ok(None)
        }
        Err(e) => Err(LiveError::Request(format!("listing nodefeatures: {e}"))),
    }
}

/// The DRA driver's ComputeDomainCliques in every namespace, or `None` where
/// `resource.nvidia.com/v1beta1` is not served or not readable (no DRA driver,
/// its ComputeDomainCliques gate off): profiles that read them are then Unknown.
async fn list_compute_domain_cliques(
    client: &kube::Client,
) -> Result<Option<Vec<ComputeDomainClique>>, LiveError> {
    use kube::api::{Api, ListParams};
    match Api::<ComputeDomainClique>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(Some(list.items)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => Ok(None),
        Err(e) => Err(LiveError::Request(format!(
            "listing computedomaincliques: {e}"
        ))),
    }
}

/// The probe report ConfigMaps in `namespace`, selected by label as the
/// controller's watch selects them. None where ConfigMaps there cannot be
/// listed: the Health layer then judges every node as one without a report.
async fn list_probe_reports(client: &kube::Client, namespace: &str) -> Result<Carriers, LiveError> {
    use kube::api::{Api, ListParams};
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(&gpuready_core::probe::carrier_selector());
    match api.list(&params).await {
        Ok(list) => Ok(Carriers::new(list.items)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
            eprintln!(
                "warning: probe report ConfigMaps in namespace {namespace} are not readable ({}): the Health layer sees no report (pass --probe-reports FILE...)",
                s.code
            );
            Ok(Carriers::default())
        }
        Err(e) => Err(LiveError::Request(format!(
            "listing configmaps in {namespace}: {e}"
        ))),
    }
}

/// Every DeviceTaintRule (anyone's: they are few), or `None` where
/// `resource.k8s.io/v1` DeviceTaintRules are not served or not readable:
/// device gating then plans no rule and gates whole nodes.
async fn list_device_rules(
    client: &kube::Client,
) -> Result<Option<Vec<DeviceTaintRule>>, LiveError> {
    use kube::api::{Api, ListParams};
    match Api::<DeviceTaintRule>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(Some(list.items)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => Ok(None),
        Err(e) => Err(LiveError::Request(format!("listing devicetaintrules: {e}"))),
    }
}

/// ResourceClaims in every namespace, or `None` where they are not served or
/// not readable: the pods a `NoExecute` device taint leaves running are then
/// not counted.
async fn list_resource_claims(
    client: &kube::Client,
) -> Result<Option<Vec<ResourceClaim>>, LiveError> {
    use kube::api::{Api, ListParams};
    match Api::<ResourceClaim>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(Some(list.items)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
            eprintln!(
                "warning: resource.k8s.io/v1 ResourceClaims are not served or not readable ({}): pods holding a GPU as a DRA extended resource are not counted",
                s.code
            );
            Ok(None)
        }
        Err(e) => Err(LiveError::Request(format!("listing resourceclaims: {e}"))),
    }
}

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
    fn new(keys: std::collections::BTreeSet<String>) -> GroupedNodes {
        GroupedNodes {
            index: GroupIndex::with_keys(keys),
            labels: Default::default(),
        }
    }

    fn add(&mut self, node: &k8s_openapi::api::core::v1::Node) {
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
    fn group_of(
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
    fn set_device_taint_rules(&mut self, all: Option<Vec<DeviceTaintRule>>) {
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

fn read_evidence_files(args: &CheckArgs) -> Result<ExtraEvidence, InputError> {
    let mut extra = ExtraEvidence::default();
    if !args.resource_slices.is_empty() {
        let mut all = Vec::new();
        for p in &args.resource_slices {
            all.extend(input::read_resource_slices(p)?);
        }
        extra.resource_slices = Some(all);
        extra.device_rules = Some(Vec::new());
    }
    if !args.device_taint_rules.is_empty() {
        let mut all = Vec::new();
        for p in &args.device_taint_rules {
            all.extend(input::read_device_taint_rules(p)?);
        }
        extra.set_device_taint_rules(Some(all));
    }
    if !args.resource_claims.is_empty() {
        let mut all = Vec::new();
        for p in &args.resource_claims {
            all.extend(input::read_resource_claims(p)?);
        }
        extra.resource_claims = Some(all);
    }
    if !args.node_features.is_empty() {
        let mut all = Vec::new();
        for p in &args.node_features {
            all.extend(input::read_node_features(p)?);
        }
        extra.node_features = Some(all);
    }
    if !args.compute_domain_cliques.is_empty() {
        let mut all = Vec::new();
        for p in &args.compute_domain_cliques {
            all.extend(input::read_compute_domain_cliques(p)?);
        }
        extra.compute_domain_cliques = Some(all);
    }
    if !args.probe_reports.is_empty() {
        let mut all = Vec::new();
        for p in &args.probe_reports {
            all.extend(input::read_configmaps(p)?);
        }
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

/// Offline check over files: profiles and evidence first (a bad profile is
/// reported before a large dump is read), then each node judged as it is read.
pub fn check_files(args: &CheckArgs) -> Result<CheckReport, InputError> {
    let profiles = input::read_all_profiles(&args.profiles)?;
    let extra = read_evidence_files_for(&profiles, args)?;
    judge(
        &profiles,
        &extra,
        args.now.unwrap_or_else(Timestamp::now),
        |each| {
            for n in &args.nodes {
                input::for_each_node(n, &mut *each)?;
            }
            Ok(())
        },
    )
}

/// Writes the report as it is rendered (no copy of the whole text in memory:
/// a 100k-node JSON report is hundreds of MB).
pub fn render_to(
    report: &CheckReport,
    output: Output,
    out: &mut dyn std::io::Write,
) -> Result<(), std::io::Error> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    match output {
        Output::Json => {
            serde_json::to_writer_pretty(&mut out, report)?;
            writeln!(out)?;
        }
        Output::Yaml => {
            serde_yaml_ng::to_writer(&mut out, report).map_err(std::io::Error::other)?
        }
        Output::Table => render_table(report, &mut out)?,
    }
    out.flush()
}

/// Text as the table shows it: control characters (a newline or escape in a node
/// name from a dump) escaped, so no input can forge rows or move the cursor.
fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(char::is_control) {
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect::<String>()
            .into()
    } else {
        s.into()
    }
}

fn yes_no(ready: Option<bool>) -> &'static str {
    match ready {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    }
}

/// The planned writes in words, one phrase per kind of change — exactly what
/// `gpuready run` would send for this node.
fn describe_changes(a: &NodeAssessment) -> Vec<String> {
    use gpuready_api::keys;
    use gpuready_core::TaintChangeKind;
    let c = &a.changes;
    let mut out = Vec::new();
    let taint_text = |t: &k8s_openapi::api::core::v1::Taint| {
        format!(
            "{}={}:{}",
            t.key,
            t.value.as_deref().unwrap_or(""),
            t.effect
        )
    };
    if let Some(t) = &c.taint {
        let ours = t.ours.as_ref().map(taint_text).unwrap_or_default();
        out.push(match t.kind {
            TaintChangeKind::Add => format!("add taint {ours}"),
            TaintChangeKind::Replace => format!("replace the readiness taint with {ours}"),
            TaintChangeKind::Remove => "remove the readiness taint".to_owned(),
        });
    }
    if c.taint_held_by_brake {
        out.push("taint held back by the safety brake".to_owned());
    }
    for r in &c.device_taint_rules {
        use gpuready_core::devices::RuleAction;
        let effect = r
            .rule
            .as_ref()
            .map(|r| r.spec.taint.effect.as_str())
            .unwrap_or("");
        out.push(match r.action {
            RuleAction::Create => format!(
                "create DeviceTaintRule {} ({}:{effect}) for device {}",
                r.name,
                r.reason.as_deref().unwrap_or(""),
                r.device
            ),
            RuleAction::Update => format!(
                "update DeviceTaintRule {} ({}:{effect}) for device {}",
                r.name,
                r.reason.as_deref().unwrap_or(""),
                r.device
            ),
            RuleAction::Delete => {
                format!("delete DeviceTaintRule {} (device {})", r.name, r.device)
            }
            RuleAction::Status => {
                let c = r.condition.as_ref();
                format!(
                    "set {}={} ({}) on DeviceTaintRule {}: {}",
                    keys::device_rules::CONDITION_PODS_NOT_EVICTED,
                    c.map(|c| c.status.as_str()).unwrap_or(""),
                    r.reason.as_deref().unwrap_or(""),
                    r.name,
                    r.message.as_deref().unwrap_or("")
                )
            }
        });
    }
    if let Some(ann) = &c.annotations {
        if c.taint.is_none()
            && let Some(Some(held)) = ann.get(keys::ANNOTATION_TAINT)
        {
            out.push(format!("adopt the taint {held} already on the node"));
        }
        if matches!(ann.get(keys::ANNOTATION_RELEASED), Some(Some(_))) {
            out.push("mark the node released (UntilFirstReady)".to_owned());
        }
    }
    if let Some(l) = &c.labels {
        let set: Vec<String> = l
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
            .collect();
        let removed: Vec<&str> = l
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.as_str())
            .collect();
        if !set.is_empty() {
            out.push(format!("set labels {}", set.join(",")));
        }
        if !removed.is_empty() {
            out.push(format!("remove labels {}", removed.join(",")));
        }
    }
    if !c.foreign_labels_left.is_empty() {
        out.push(format!(
            "leave labels {} (set by another writer)",
            c.foreign_labels_left.join(",")
        ));
    }
    if let Some(conds) = &c.conditions {
        if !conds.set.is_empty() {
            let s: Vec<String> = conds
                .set
                .iter()
                .map(|c| format!("{}={}", c.type_, c.status))
                .collect();
            out.push(format!("set condition {}", s.join(", ")));
        }
        if !conds.remove.is_empty() {
            out.push(format!("remove condition {}", conds.remove.join(", ")));
        }
    }
    out
}

fn render_table(report: &CheckReport, s: &mut dyn std::io::Write) -> std::io::Result<()> {
    let rows: Vec<TableRow<'_>> = report.nodes.iter().map(TableRow::of).collect();
    table_head(&rows, s)?;
    for n in &report.nodes {
        node_details(n, s)?;
    }
    table_foot(
        &report.summary,
        &report.taint_refused,
        &report.wide_rules,
        &report.now,
        s,
    )
}

/// A node's row in the table's first part.
pub(crate) struct TableRow<'a> {
    pub name: &'a str,
    /// The PROFILE column: the profile, `(conflict)` or `(none)`.
    pub profile: &'a str,
    pub ready: Option<bool>,
    pub reason: &'a str,
}

impl<'a> TableRow<'a> {
    pub fn of(n: &'a NodeAssessment) -> TableRow<'a> {
        TableRow {
            name: &n.name,
            profile: match n.governance {
                GovernanceKind::Conflict => "(conflict)",
                GovernanceKind::Ungoverned => "(none)",
                GovernanceKind::Governed => n.profile.as_deref().unwrap_or("-"),
            },
            ready: n.ready,
            reason: &n.reason,
        }
    }
}

/// The table's header and one row per node, columns as wide as the widest
/// name and profile.
pub(crate) fn table_head(rows: &[TableRow<'_>], s: &mut dyn std::io::Write) -> std::io::Result<()> {
    let w_node = rows
        .iter()
        .map(|r| printable(r.name).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let w_prof = rows
        .iter()
        .map(|r| printable(r.profile).chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    writeln!(
        s,
        "{:w_node$}  {:w_prof$}  READY  REASON",
        "NODE", "PROFILE"
    )?;
    for r in rows {
        writeln!(
            s,
            "{:w_node$}  {:w_prof$}  {:5}  {}",
            printable(r.name),
            printable(r.profile),
            yes_no(r.ready),
            printable(r.reason)
        )?;
    }
    Ok(())
}

/// One node's part of the table's second part: its verdict, layers and what
/// gpuready would change.
pub(crate) fn node_details(n: &NodeAssessment, s: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(s)?;
    match n.governance {
        GovernanceKind::Ungoverned => {
            writeln!(
                s,
                "{}: ungoverned — {}",
                printable(&n.name),
                printable(&n.message)
            )?;
        }
        GovernanceKind::Conflict => {
            writeln!(
                s,
                "{}: CONFLICT — {}",
                printable(&n.name),
                printable(&n.message)
            )?;
        }
        GovernanceKind::Governed => {
            let verdict = match n.state {
                Some(NodeState::Ready) => "READY",
                Some(NodeState::Maintenance) => "IN MAINTENANCE",
                Some(NodeState::WaitingForGate) => "WAITING FOR GATE",
                Some(NodeState::NotReady) | None => "NOT READY",
            };
            let observe = if n.observe {
                " (Observe mode: no writes)"
            } else {
                ""
            };
            writeln!(
                s,
                "{}: {verdict} under GpuNodeProfile {}{observe}",
                printable(&n.name),
                printable(n.profile.as_deref().unwrap_or("-"))
            )?;
            let w_reason = n
                .layers
                .iter()
                .map(|l| printable(&l.reason).chars().count())
                .max()
                .unwrap_or(6)
                .max(6);
            // At least 16 wide, as before, and wide enough for every
            // source's name (`ComputeDomainCliques` is 20).
            let w_evidence = n
                .layers
                .iter()
                .map(|l| l.evidence.as_str().len())
                .max()
                .unwrap_or(16)
                .max(16);
            writeln!(
                s,
                "  {:16}  {:8}  {:w_reason$}  {:w_evidence$}  MESSAGE",
                "LAYER", "STATUS", "REASON", "EVIDENCE"
            )?;
            for l in &n.layers {
                let gate = if l.gating { "" } else { " (not gating)" };
                writeln!(
                    s,
                    "  {:16}  {:8}  {:w_reason$}  {:w_evidence$}  {}{gate}",
                    l.layer.as_str(),
                    l.status.as_str(),
                    printable(&l.reason),
                    l.evidence.as_str(),
                    printable(&l.message)
                )?;
            }
            if let Some(d) = &n.deadline_passed {
                writeln!(s, "  deadline: {}", printable(&d.describe()))?;
            }
            if let Some(m) = &n.lifecycle.maintenance {
                writeln!(
                    s,
                    "  maintenance: {} ({}): {}",
                    m.reason,
                    printable(&m.detail),
                    printable(&m.message)
                )?;
            }
            for g in &n.lifecycle.gates {
                writeln!(s, "  held by: {}", printable(&g.describe()))?;
            }
            if let Some(note) = n.lifecycle.repair.as_ref().and_then(|r| r.note()) {
                writeln!(s, "  repair: {}", printable(&note))?;
            }
            // The node's last finished wait, from its gpuready.io/timeline.
            if let Some(r) = &n.timeline {
                writeln!(s, "  last wait: {}", r.describe())?;
            }
            for e in &n.escalations {
                writeln!(
                    s,
                    "  escalation: {} ({}) effect {}, NoExecute at {}{}",
                    printable(&e.device),
                    printable(&e.reason),
                    e.effect,
                    e.no_execute_at,
                    e.eviction
                        .as_deref()
                        .map(|v| format!("; eviction: {}", printable(v)))
                        .unwrap_or_default()
                )?;
            }
            for m in &n.not_evicted {
                writeln!(s, "  not evicted: {}", printable(m))?;
            }
        }
    }
    let changes = describe_changes(n);
    if !changes.is_empty() {
        writeln!(s, "  would: {}", printable(&changes.join("; ")))?;
    }
    Ok(())
}

/// The table's last lines: nodes whose taint was refused, and the counts.
pub(crate) fn table_foot(
    m: &Summary,
    taint_refused: &[String],
    wide_rules: &[WideRule],
    now: &str,
    s: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    if !wide_rules.is_empty() {
        writeln!(
            s,
            "\n{} DeviceTaintRule(s) evict across the cluster (reported only; gpuready changes no one else's rule):",
            wide_rules.len()
        )?;
        for r in wide_rules {
            writeln!(s, "  {}", printable(&r.message))?;
        }
    }
    if !taint_refused.is_empty() {
        writeln!(
            s,
            "\n{} node(s) not gated as their verdict says: {} last time ({}); see their GpuReady condition",
            taint_refused.len(),
            gpuready_api::keys::TAINT_REFUSED,
            printable(&taint_refused.join(", "))
        )?;
    }
    writeln!(
        s,
        "\n{} governed node(s): {} ready, {} not ready{}{}; {} conflict(s); {} ungoverned (as of {now})",
        m.governed,
        m.ready,
        m.not_ready,
        if m.maintenance > 0 {
            format!(", {} in maintenance", m.maintenance)
        } else {
            String::new()
        },
        if m.waiting_for_gate > 0 {
            format!(", {} waiting for another gate", m.waiting_for_gate)
        } else {
            String::new()
        },
        m.conflicts,
        m.ungoverned
    )
}
