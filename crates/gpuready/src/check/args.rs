//! The flags of `gpuready check` and the output formats: what a check is
//! asked, kept apart from how it reads and judges.

use std::path::PathBuf;

use jiff::Timestamp;

use crate::cluster::ClusterArgs;

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
