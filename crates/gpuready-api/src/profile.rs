//! The GpuNodeProfile custom resource: what a set of GPU nodes must have, and the
//! aggregated verdict over them.
//!
//! Validation lives in the schema (bounds, enums, CEL rules with messages a person
//! can act on) so the API server refuses a bad profile at admission; `validate.rs`
//! repeats the same rules for offline use by `gpuready check`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::condition::BrokenWhen;
use crate::keys;
use crate::layer::Layer;

/// Upper bound of the not-ready summary kept in status. Per-node detail lives on
/// the Node itself, so a 5,000-node profile stays a few KiB.
pub const MAX_NOT_READY_SUMMARY: usize = 20;

/// What a set of GPU nodes must have to be called ready, and what gpuready does
/// about nodes that are not.
// One `printcolumn(...)` per column is kube's syntax; clippy reads the repeated
// `type_ = ...` inside them as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "gpuready.io",
    version = "v1alpha1",
    kind = "GpuNodeProfile",
    plural = "gpunodeprofiles",
    shortname = "gnp",
    category = "gpuready",
    validation = Rule::new("self.metadata.name.size() <= 63").message("metadata.name must be at most 63 characters: gpuready writes it as the value of the gpuready.io/profile node label"),
    doc = "GpuNodeProfile declares what a set of GPU nodes must have (product, memory, compute capability, count, driver and CUDA) and how gpuready gates them until they are ready.",
    status = "GpuNodeProfileStatus",
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(
        name = "Matched",
        type_ = "integer",
        json_path = ".status.matchedNodes"
    ),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyNodes"),
    printcolumn(
        name = "Not-Ready",
        type_ = "integer",
        json_path = ".status.notReadyNodes"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Maintenance",
        type_ = "integer",
        priority = 1,
        json_path = ".status.maintenanceNodes"
    ),
    printcolumn(
        name = "Waiting",
        type_ = "integer",
        priority = 1,
        json_path = ".status.waitingForGateNodes"
    ),
    printcolumn(
        name = "Product",
        type_ = "string",
        priority = 1,
        json_path = ".spec.gpu.products"
    ),
    printcolumn(
        name = "P90-To-Ready",
        type_ = "integer",
        priority = 1,
        json_path = ".status.timeToReady.p90Seconds"
    ),
    printcolumn(
        name = "Slowest-Layer",
        type_ = "string",
        priority = 1,
        json_path = ".status.timeToReady.slowestLayer"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.escalation) || !has(self.escalation.extendedResourcePods) || self.escalation.extendedResourcePods != 'TaintNode' || has(self.deviceGating)").message("escalation.extendedResourcePods TaintNode needs deviceGating: without it no device escalates, the node's own taint does"))]
#[x_kube(validation = Rule::new("!has(self.readyLabels) || self.readyLabels.all(k, !(has(self.nodeSelector.matchLabels) && k in self.nodeSelector.matchLabels) && !(has(self.nodeSelector.matchExpressions) && self.nodeSelector.matchExpressions.exists(e, e.key == k)))").message("readyLabels must not name a key of nodeSelector: gpuready would remove the label that makes the node belong to this profile"))]
pub struct GpuNodeProfileSpec {
    /// Which nodes this profile governs. A node matched by two profiles is reported
    /// as a Conflict and left as it is.
    #[schemars(schema_with = "crate::selector_schema::node_selector")]
    pub node_selector: LabelSelector,

    /// The GPU every governed node must carry.
    #[serde(default)]
    pub gpu: GpuExpectation,

    /// Minimum NVIDIA driver version, e.g. `580.65.06` or `570.26`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]{0,8}\\\\.(0|[1-9][0-9]{0,8})(\\\\.[0-9]{1,9})?$')").message("minDriverVersion must look like 580.65.06 or 570.26 (at most 9 digits a part, no leading zero in the first two)"))]
    #[schemars(length(max = 32))]
    pub min_driver_version: Option<String>,

    /// CUDA version the workloads are built for, e.g. `12.4` or `13.0`. Checked
    /// against the card's compute capability, the driver's minimum for that CUDA
    /// release and the CUDA version the driver reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^([1-9]|1[0-9]|20)\\\\.(0|[1-9][0-9]?)$')").message("cudaVersion must be a CUDA release like 12.4 or 13.0 (major 1 to 20, no leading zero)"))]
    #[schemars(length(max = 16))]
    pub cuda_version: Option<String>,

    /// Layers whose verdict gates readiness. Default: all of them. A layer left out
    /// is still evaluated and reported, but cannot hold the node back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10))]
    #[x_kube(validation = Rule::new("self.all(l, self.exists_one(m, m == l))").message("gatingLayers must not repeat a layer"))]
    #[x_kube(validation = Rule::new("self.exists(l, l != 'Health')").message("gatingLayers must name a layer besides Health: Health is judged only where a probe report exists, so alone it gates nothing"))]
    pub gating_layers: Option<Vec<Layer>>,

    /// Extended resources the device plugin must advertise as allocatable, with the
    /// minimum quantity, e.g. `{"nvidia.com/mig-1g.10gb": 7}`. Default:
    /// `nvidia.com/gpu` at `gpu.count` (or 1), or any `nvidia.com/mig-*` resource
    /// when the node runs the MIG `mixed` strategy.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    // `maximum` because the server ignores `format: uint32`: a larger number would
    // be admitted and then fail to deserialize in the controller.
    #[schemars(extend("maxProperties" = 16, "additionalProperties" = {"type": "integer", "format": "uint32", "minimum": 0, "maximum": 4294967295u32}))]
    #[x_kube(validation = Rule::new("self.all(k, k.matches('^[a-z0-9.-]+/[A-Za-z0-9._-]+$') && self[k] >= 1)").message("resources must map a domain-qualified resource name (like nvidia.com/gpu) to a quantity of at least 1"))]
    #[x_kube(validation = Rule::new("self.all(k, !k.matches('^([^/]*\\\\.)?(kubernetes\\\\.io|k8s\\\\.io)/'))").message("resources must not name a resource in kubernetes.io or k8s.io: Kubernetes reserves those domains, no device plugin advertises one"))]
    pub resources: BTreeMap<String, u32>,

    /// Oldest acceptable `nvidia.com/gfd.timestamp`, in seconds. 0 disables the
    /// check. GFD refreshes its labels every minute by default.
    #[serde(default = "default_max_label_age")]
    #[schemars(range(min = 0, max = 604800))]
    pub max_label_age_seconds: u32,

    /// `Enforce` taints and labels nodes; `Observe` only reports (zero node writes).
    #[serde(default)]
    pub mode: Mode,

    /// `Continuous` keeps the taint in step with readiness; `UntilFirstReady`
    /// releases it once and never re-taints the node.
    #[serde(default)]
    pub taint_policy: TaintPolicy,

    /// The taint held on a node until its GPU stack is ready.
    #[serde(default)]
    pub taint: TaintSpec,

    /// Labels put on nodes once they are ready (and removed when they are not).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    // The values' maxLength is what lets the API server accept the value rule
    // below: without it CEL's cost estimate assumes request-sized strings and
    // kube-apiserver refuses the CRD ("estimated rule cost exceeds budget by 6.0x").
    #[schemars(extend("maxProperties" = 16, "additionalProperties" = {"type": "string", "maxLength": 63}))]
    #[x_kube(validation = Rule::new("self.all(k, !k.matches('^([^/]*\\\\.)?gpuready\\\\.io/'))").message("readyLabels must not name keys in gpuready's own domain (gpuready.io/ and its subdomains): gpuready writes those itself"))]
    #[x_kube(validation = Rule::new("self.all(k, !k.matches('^([^/]*\\\\.)?(kubernetes\\\\.io|k8s\\\\.io|x-k8s\\\\.io|nvidia\\\\.com|karpenter\\\\.sh|karpenter\\\\.k8s\\\\.aws|azure\\\\.com|cloud\\\\.google\\\\.com|gke\\\\.io|amazonaws\\\\.com|oraclecloud\\\\.com)/'))").message("readyLabels must not name keys other systems own (kubernetes.io, k8s.io, x-k8s.io, nvidia.com, karpenter.sh, karpenter.k8s.aws, the cloud providers' azure.com, cloud.google.com, gke.io, amazonaws.com, oraclecloud.com, and their subdomains): use your own domain, like example.com/gpu-pool"))]
    #[x_kube(validation = Rule::new("self.all(k, !format.qualifiedName().validate(k).hasValue())").message("readyLabels keys must be valid label keys, like example.com/gpu-pool"))]
    #[x_kube(validation = Rule::new("self.all(k, self[k].size() <= 63 && self[k].matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'))").message("readyLabels values must be valid label values: at most 63 characters of letters, digits, '-', '_' or '.'"))]
    pub ready_labels: BTreeMap<String, String>,

    /// Also write one node condition per layer (`GpuReadyDriver`, ...) besides
    /// `GpuReady`. Off by default to keep `kubectl describe node` short.
    #[serde(default)]
    pub per_layer_node_conditions: bool,

    /// Which evidence advertises the GPUs: `DevicePlugin` (extended resources in
    /// `status.allocatable`, GFD labels), `DRA` (ResourceSlices of driver
    /// `gpu.nvidia.com`), or `Auto` (default): DRA when the node has such a
    /// ResourceSlice, else the device plugin.
    #[serde(default)]
    pub evidence: EvidenceMode,

    /// The workload the governed nodes serve, as the GPU operator's
    /// `nvidia.com/gpu.workload.config` label names it. `VmPassthrough` and
    /// `VmVgpu` nodes are judged by the sandbox device plugin's resources, never
    /// by container-driver labels. Default `Container`.
    #[serde(default)]
    pub workload: Workload,

    /// Sandbox device plugin resources a `VmPassthrough`/`VmVgpu` node must
    /// advertise, e.g. `nvidia.com/GH100_H200_SXM_141GB` (at `gpu.count`, or 1,
    /// in total). Empty: any `nvidia.com/` resource named like the sandbox
    /// plugin names them (no lower-case letter).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    // maxLength on the items keeps the CEL cost estimate within budget.
    #[schemars(length(max = 16), extend("items" = {"type": "string", "maxLength": 253}))]
    #[x_kube(validation = Rule::new("self.all(k, k.size() <= 253 && k.matches('^[a-z0-9.-]+/[A-Za-z0-9._-]+$'))").message("sandboxResources must be domain-qualified resource names like nvidia.com/GH100_H200_SXM_141GB"))]
    pub sandbox_resources: Vec<String>,

    /// How long a node may stay not ready before gpuready marks it for
    /// remediation (condition reason, Event, metric, optional label). gpuready
    /// never deletes, drains or cordons a node. Absent: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_ready_deadline: Option<NotReadyDeadline>,

    /// How the Health layer uses the report of the node agent `gpuready probe`
    /// (NVML read where the workloads run). Absent: a report is judged when one
    /// exists, and a node without one is judged as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeExpectation>,

    /// Per-device gating on DRA nodes: gpuready writes one `DeviceTaintRule`
    /// per bad device (its probe state, its attributes against `gpu`, its
    /// parent GPU for MIG devices) instead of tainting the whole node, and taints
    /// the node as well only when fewer than `minReadyGpus` ready GPUs remain.
    /// Absent: whole-node gating only, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_gating: Option<DeviceGating>,

    /// The MIG layout the pool needs, judged from mig-manager's labels
    /// (`nvidia.com/mig.config`, `nvidia.com/mig.config.state`), GFD's MIG
    /// labels and the DRA driver's MIG devices. Absent: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigExpectation>,

    /// How maintenance the GPU operator drives (driver upgrades, MIG changes,
    /// paused operands) is judged: such a node stays gated under its own
    /// reason and is counted apart from failures. Absent: maintenance may
    /// last as long as it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<MaintenanceRules>,

    /// Which reasons take a bad GPU out harder: its DeviceTaintRule (device
    /// gating) — or, without device gating, the node's taint — escalates to
    /// `NoExecute`, evicting the pods that use it, after a dry run in which
    /// the rule runs with effect `None` and the API server reports what
    /// `NoExecute` would evict. Absent: nothing escalates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Escalation>,

    /// The Fabric layer: multi-node NVLink readiness (GB200/GB300-class
    /// systems): the NVLink clique label GFD writes, the probe's NVML fabric
    /// state of every GPU, the driver IMEX needs and the host's IMEX service.
    /// Absent: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<FabricExpectation>,

    /// The External layer: which verdicts of other judges count, as Node
    /// conditions their agents write (a cloud provider's GPU health agent,
    /// node-problem-detector checks). Absent: none is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalSignals>,
}

/// What multi-node NVLink readiness requires of a node.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.imexMode) || self.imexMode != 'HostManaged' || !has(self.computeDomainCliques) || self.computeDomainCliques == 'Ignore'").message("fabric.computeDomainCliques must be Ignore with fabric.imexMode HostManaged: the DRA driver writes no ComputeDomainCliques in host-managed IMEX mode, so every node would read Unknown"))]
pub struct FabricExpectation {
    /// The cliques the nodes must sit in, as GFD's `nvidia.com/gpu.clique`
    /// spells them: `<cluster UUID>.<clique ID>`. One entry makes every node
    /// of the profile one NVLink domain (a rack); empty: any well-formed clique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new("self.all(c, c.matches('^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\\\.[0-9]{1,10}$'))").message("fabric.cliques must be NVLink cliques as nvidia.com/gpu.clique spells them: <cluster UUID>.<clique ID>, e.g. 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"))]
    pub cliques: Vec<String>,

    /// Minimum driver for the fabric's IMEX daemons. Default `570.158.01`,
    /// what the NVIDIA DRA driver's ComputeDomains need (IMEX daemons with DNS
    /// names); none with `imexMode: HostManaged`, where the driver runs no
    /// IMEX daemon and checks no minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]{0,8}\\\\.(0|[1-9][0-9]{0,8})(\\\\.[0-9]{1,9})?$')").message("fabric.minDriverVersion must look like 570.158.01 (at most 9 digits a part, no leading zero in the first two)"))]
    #[schemars(length(max = 32))]
    pub min_driver_version: Option<String>,

    /// What a node without a probe report means for the per-GPU fabric state:
    /// `Unknown` (default: the clique label alone does not show that every GPU
    /// registered, GFD leaves a failed one out), `Blocking`, or `Ignore` (judge
    /// the label and the driver only; the message says so).
    #[serde(default = "default_unknown")]
    pub when_probe_missing: ProbePolicy,

    /// A node label naming the NVLink domain a node belongs to (a rack label,
    /// e.g. `example.com/nvl-rack`): every node of the profile sharing a value
    /// of it must sit in one clique. A node in a minority clique of its group
    /// is not ready (`CliqueSplit`); with no majority, every node of the group
    /// is (docs/fabric.md). Absent: nodes are not compared with each other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    #[x_kube(validation = Rule::new("!format.qualifiedName().validate(self).hasValue()").message("fabric.groupByLabel must be a valid label key, like example.com/nvl-rack"))]
    pub group_by_label: Option<String>,

    /// The NVIDIA DRA driver's ComputeDomainCliques (`resource.nvidia.com/v1beta1`):
    /// `Ignore` (default: not read), `Check` (every entry naming the node must
    /// be in the node's clique with its IMEX daemon `Ready`; a node no
    /// ComputeDomain uses now is fine), or `Require` (as `Check`, and some
    /// ComputeDomainClique must list the node). Where the API is not served
    /// the layer is Unknown (`ComputeDomainCliquesUnread`).
    #[serde(default)]
    pub compute_domain_cliques: ComputeDomainCliquePolicy,

    /// Who runs the node's IMEX daemon, as the NVIDIA DRA driver is set up
    /// (its `imex.mode`): `DriverManaged` (the driver's default: the host's
    /// `nvidia-imex.service` must not be enabled) or `HostManaged` (it must be
    /// installed and running, with `IMEX_CMD_ENABLED=1` and its control
    /// socket). Judged from what the probe reads of the host's files (the
    /// chart's `probe.imex.enabled`); absent: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "not_nullable::<ImexMode>")]
    pub imex_mode: Option<ImexMode>,
}

/// The schema of an optional enum without `nullable`: the API server checks a
/// null against `enum` too, so a nullable enum refuses `field: null`, where a
/// field that is not nullable has its null pruned (read as absent, like the
/// other optional fields' nulls).
fn not_nullable<T: JsonSchema>(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<T>()
}

/// Who runs a node's IMEX daemon (the NVIDIA DRA driver's `imex.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ImexMode {
    /// The DRA driver runs one per ComputeDomain; the host service must be
    /// disabled.
    DriverManaged,
    /// The host's `nvidia-imex.service` runs it; the driver only hands out
    /// channels.
    HostManaged,
}

/// How the Fabric layer reads the DRA driver's ComputeDomainCliques.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ComputeDomainCliquePolicy {
    /// Not read.
    #[default]
    Ignore,
    /// The entries naming the node must agree with its clique and be Ready.
    Check,
    /// As `Check`, and at least one ComputeDomainClique must list the node.
    Require,
}

fn default_unknown() -> ProbePolicy {
    ProbePolicy::Unknown
}

/// Outside verdicts the External layer reads: documented presets, any other
/// condition type, and how old a verdict may be.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.presets) && size(self.presets) > 0) || (has(self.conditions) && size(self.conditions) > 0)").message("external must name at least one preset or condition: an External layer that reads nothing would always be Ready"))]
pub struct ExternalSignals {
    /// Documented sets of conditions (docs/external.md lists each type, the
    /// status that means broken and where it is documented).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(validation = Rule::new("self.all(p, self.exists_one(q, q == p))").message("external.presets must not repeat a preset"))]
    pub presets: Vec<ExternalPreset>,

    /// Any other Node condition type and the status that means broken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("self.all(c, self.exists_one(d, d.type == c.type))").message("external.conditions must not repeat a condition type"))]
    pub conditions: Vec<ExternalCondition>,

    /// A condition whose `lastHeartbeatTime` is older than this many seconds
    /// makes the layer Unknown (`ExternalSignalStale`): its agent stopped
    /// reporting. Absent: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 604800))]
    pub max_heartbeat_age_seconds: Option<u32>,

    /// What a named condition the node does not carry means: `Ignore`
    /// (default: the agent may not run on every pool; the message says so),
    /// `Unknown` or `Blocking` (`ExternalSignalMissing`).
    #[serde(default)]
    pub when_missing: ProbePolicy,
}

/// A documented set of outside conditions (docs/external.md).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum ExternalPreset {
    /// Amazon EKS node monitoring agent: `AcceleratedHardwareReady`, broken when `False`.
    EksNodeMonitoringAgent,
    /// AKS Node Problem Detector's GPU conditions (`GPUMissing`, `XIDErrors`,
    /// `NVLinkStatusInactive`, `UnhealthyNvidiaDevicePlugin`,
    /// `UnhealthyNvidiaDCGMServices`), broken when `True`.
    AksNodeProblemDetector,
    /// Nebius Managed Kubernetes GPU health checks: `NebiusGPUError`, broken when `True`.
    NebiusGpuHealthChecks,
    /// Meta GCM health checks under node-problem-detector (`GcmXidErrorsProblem`, …), broken when `True`.
    MetaGcmHealthChecks,
    /// GKE's GPU device plugin: `XidCriticalError`, broken when `True` (its
    /// reason lists the XIDs); the plugin writes it only on a critical XID,
    /// so its absence is healthy, whatever `whenMissing` says.
    GkeDevicePlugin,
    /// node-problem-detector's generic node faults GPU remediation treats as
    /// fatal: `KernelDeadlock`, `ReadonlyFilesystem`, `XfsShutdown`,
    /// `CperHardwareErrorFatal`, broken when `True`.
    NodeProblemDetector,
}

impl ExternalPreset {
    /// The preset's conditions: (type, the status that means broken).
    pub fn conditions(self) -> &'static [(&'static str, BrokenWhen)] {
        use keys::external as e;
        match self {
            ExternalPreset::EksNodeMonitoringAgent => e::EKS,
            ExternalPreset::AksNodeProblemDetector => e::AKS,
            ExternalPreset::NebiusGpuHealthChecks => e::NEBIUS,
            ExternalPreset::MetaGcmHealthChecks => e::META_GCM,
            ExternalPreset::GkeDevicePlugin => e::GKE,
            ExternalPreset::NodeProblemDetector => e::NPD,
        }
    }

    /// Whether the preset's agent writes its conditions only while a problem
    /// holds, so a condition the node does not carry means healthy (never
    /// `ExternalSignalMissing`). The other presets' agents write theirs
    /// healthy too; an absent one is judged by `whenMissing`.
    pub fn absent_is_healthy(self) -> bool {
        matches!(self, ExternalPreset::GkeDevicePlugin)
    }

    /// How a broken verdict of the preset's agent clears, where it differs
    /// from "when the agent finds the node healthy again".
    pub fn clears(self) -> Option<&'static str> {
        match self {
            ExternalPreset::GkeDevicePlugin => Some(
                "the device plugin removes XidCriticalError once the node has rebooted (its message is the boot the XIDs were seen in)",
            ),
            ExternalPreset::NodeProblemDetector => Some(
                "node-problem-detector's log-matched conditions stay True until it restarts: repair the node, then restart node-problem-detector on it",
            ),
            _ => None,
        }
    }

    /// Who writes the preset's conditions, for messages.
    pub fn writer(self) -> &'static str {
        match self {
            ExternalPreset::EksNodeMonitoringAgent => "the EKS node monitoring agent",
            ExternalPreset::AksNodeProblemDetector => "AKS's node-problem-detector",
            ExternalPreset::NebiusGpuHealthChecks => "Nebius Managed Kubernetes' GPU health checks",
            ExternalPreset::MetaGcmHealthChecks => "Meta GCM's node-problem-detector checks",
            ExternalPreset::GkeDevicePlugin => "GKE's GPU device plugin",
            ExternalPreset::NodeProblemDetector => "node-problem-detector",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExternalPreset::EksNodeMonitoringAgent => "EksNodeMonitoringAgent",
            ExternalPreset::AksNodeProblemDetector => "AksNodeProblemDetector",
            ExternalPreset::NebiusGpuHealthChecks => "NebiusGpuHealthChecks",
            ExternalPreset::MetaGcmHealthChecks => "MetaGcmHealthChecks",
            ExternalPreset::GkeDevicePlugin => "GkeDevicePlugin",
            ExternalPreset::NodeProblemDetector => "NodeProblemDetector",
        }
    }
}

/// One outside Node condition and the status that means broken.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalCondition {
    /// The condition type, e.g. `GpuHealthy` or `example.com/GPUProblem`.
    /// gpuready's own (`GpuReady…`) and kubelet's `Ready` cannot be named.
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 316))]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$')").message("external.conditions[].type must be a condition type like GpuHealthy or example.com/GPUProblem (letters, digits, '-', '_', '.', '/')"))]
    #[x_kube(validation = Rule::new("!self.startsWith('GpuReady') && self != 'Ready'").message("external.conditions[].type must not be gpuready's own GpuReady… conditions (gpuready would judge from what it writes) nor kubelet's Ready (the Node layer reads it)"))]
    pub type_: String,

    /// The status that means broken: `True` (default: the node-problem-detector
    /// convention, a condition naming a problem) or `False` (a condition naming
    /// health, like `AcceleratedHardwareReady`). `Unknown` is never broken: it
    /// makes the layer Unknown.
    #[serde(default)]
    pub broken_when: BrokenWhen,
}

/// Escalation of gpuready's taints to `NoExecute`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Escalation {
    /// Reasons that escalate: a bad device's reason (`FatalXid`,
    /// `GpuResetRequired`, `UncorrectableEccErrors`, …) or, for the node's
    /// taint, the `GpuReady` reason (`FatalXid`, `DriverUpgradeFailed`, …).
    #[schemars(length(min = 1, max = 16), inner(length(min = 1, max = 64)))]
    #[x_kube(validation = Rule::new("self.all(r, r.matches('^[A-Z][A-Za-z0-9]*$'))").message("escalation.reasons must be reason names like FatalXid or GpuResetRequired"))]
    #[x_kube(validation = Rule::new("self.all(r, self.exists_one(s, s == r))").message("escalation.reasons must not repeat a reason"))]
    pub reasons: Vec<String>,

    /// Seconds the escalation runs as a dry run first: the device's
    /// escalation rule has effect `None` (the API server's status says what
    /// `NoExecute` would evict), then `NoExecute`. For the node's taint,
    /// seconds since `GpuReady` left True. Default 300.
    #[serde(default = "default_dry_run_seconds")]
    #[schemars(range(min = 10, max = 604800))]
    pub dry_run_seconds: u32,

    /// Pods that hold an escalated device as a DRA-backed extended resource
    /// (they asked for `nvidia.com/gpu` and the scheduler served it from DRA)
    /// are not evicted by Kubernetes' device taint eviction (kubernetes
    /// #141290). `Report` (default): gpuready names them (node message,
    /// profile status, `check`, a metric). `TaintNode`: while any such pod
    /// holds a device whose escalation rule is `NoExecute`, the node's taint
    /// turns `NoExecute` too, which evicts every pod on the node that does not
    /// tolerate it (through the safety brake, as any node taint). Needs
    /// `deviceGating`.
    #[serde(default)]
    pub extended_resource_pods: ExtendedResourcePods,

    /// The most of this profile's nodes, and of its GPUs, that may be under a
    /// `NoExecute` escalation at once, in percent of those it governs
    /// (default 10; at least one node and one device whenever it is above 0;
    /// 0: nothing escalates). Not a rate over a window: a node or device
    /// escalates only while fewer are escalated than this, so no sequence of
    /// failures, however spread out, drains more. An escalation beyond it, or
    /// while the safety brake is engaged, waits with the taint's own effect.
    #[serde(default = "default_max_no_execute_percent")]
    #[schemars(range(max = 100))]
    pub max_no_execute_percent: u8,
}

/// What gpuready does about pods a `NoExecute` device taint does not evict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ExtendedResourcePods {
    /// Name them; change nothing else.
    #[default]
    Report,
    /// Escalate the node's own taint to `NoExecute` while they hold the device.
    TaintNode,
}

fn default_dry_run_seconds() -> u32 {
    300
}

fn default_max_no_execute_percent() -> u8 {
    10
}

/// The profile's rules for nodes in maintenance.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceRules {
    /// Seconds a node may stay in maintenance, counted from when its
    /// `GpuReady` condition last left True; past it the node is a failure
    /// (`MaintenanceStuck`). Absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 2592000))]
    pub deadline_seconds: Option<u32>,
}

/// Per-device gating: what gpuready's DeviceTaintRules look like.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceGating {
    /// Ready GPUs (not bad, not tainted by the DRA driver) the node must keep
    /// for its node taint to stay off. Default: `gpu.count`, else 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub min_ready_gpus: Option<u32>,

    /// Effect of gpuready's device taints: `NoSchedule` (default: new claims
    /// avoid the device) or `NoExecute` (pods using it are evicted too). An
    /// `Observe` profile always writes `None` (reported, no effect).
    #[serde(default)]
    pub effect: DeviceTaintEffect,
}

/// Effect of a DeviceTaintRule gpuready writes under an `Enforce` profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeviceTaintEffect {
    #[default]
    NoSchedule,
    NoExecute,
}

impl DeviceTaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceTaintEffect::NoSchedule => "NoSchedule",
            DeviceTaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// The MIG geometry a pool needs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MigExpectation {
    /// The mig-manager configuration the node must be labelled with
    /// (`nvidia.com/mig.config`), e.g. `all-1g.18gb`; its
    /// `nvidia.com/mig.config.state` must be `success`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub config: Option<String>,

    /// MIG devices per profile the node must offer, at least, e.g.
    /// `{"1g.18gb": 7}`: counted from GFD's `nvidia.com/mig-<profile>.count`
    /// (mixed strategy), its single-strategy `nvidia.com/gpu.product`
    /// `…-MIG-<profile>` with `nvidia.com/gpu.count`, or the DRA driver's MIG devices.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16, "additionalProperties" = {"type": "integer", "format": "uint32", "minimum": 1, "maximum": 1024}))]
    #[x_kube(validation = Rule::new("self.all(k, k.matches('^[0-9]+g\\\\.[0-9]+gb([.+][a-z0-9+.]+)?$'))").message("mig.devices keys must be MIG profile names like 1g.18gb or 1g.18gb+me"))]
    pub devices: BTreeMap<String, u32>,
}

/// Where the GPUs' advertisement is read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EvidenceMode {
    /// DRA when the node has a `gpu.nvidia.com` ResourceSlice, else the device plugin.
    #[default]
    Auto,
    /// The device plugin: `status.allocatable` and GFD labels.
    DevicePlugin,
    /// The NVIDIA DRA driver: ResourceSlices of driver `gpu.nvidia.com`.
    #[serde(rename = "DRA")]
    Dra,
}

impl EvidenceMode {
    pub fn is_auto(&self) -> bool {
        *self == EvidenceMode::Auto
    }
}

/// The GPU operator's sandbox workload of a node (`nvidia.com/gpu.workload.config`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Workload {
    /// Containers on the NVIDIA driver (the operator's default).
    #[default]
    Container,
    /// GPUs bound to vfio-pci for KubeVirt/Kata VMs (label value `vm-passthrough`).
    VmPassthrough,
    /// A vGPU host handing out mediated devices (label value `vm-vgpu`).
    VmVgpu,
}

impl Workload {
    pub fn is_container(&self) -> bool {
        *self == Workload::Container
    }

    /// The value of `nvidia.com/gpu.workload.config` for this workload.
    pub fn label_value(self) -> &'static str {
        match self {
            Workload::Container => "container",
            Workload::VmPassthrough => "vm-passthrough",
            Workload::VmVgpu => "vm-vgpu",
        }
    }
}

/// The Health layer's rules for the probe report.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProbeExpectation {
    /// What a node without a probe report is: `Ignore` (default: the Health layer
    /// is left out, as before the probe existed), `Unknown` (not ready, status
    /// Unknown), or `Blocking` (not ready).
    #[serde(default)]
    pub when_missing: ProbePolicy,

    /// Oldest acceptable report (its `generatedAt`), in seconds; an older one is
    /// `ProbeReportStale`. 0 disables the check. The probe reports every 60 s by default.
    #[serde(default = "default_max_report_age")]
    #[schemars(range(min = 0, max = 86400))]
    pub max_report_age_seconds: u32,

    /// XIDs that make the node not ready when the probe saw one since it started.
    /// Default: 48, 61, 62, 64, 74, 79, 95, 119, 120, 140, 154 (NVIDIA's Xid
    /// catalog: reset the GPU or reboot). The application XIDs 13, 31, 43, 45, 68
    /// and 109 cannot be listed: they follow a faulty workload, not the GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.all(x, x >= 1 && x <= 65535)").message("probe.fatalXids must be XID numbers from 1 to 65535"))]
    #[x_kube(validation = Rule::new("self.all(x, !(x in [13, 31, 43, 45, 68, 109]))").message("probe.fatalXids must not list the application XIDs 13, 31, 43, 45, 68 or 109: they follow a faulty workload, not a faulty GPU"))]
    pub fatal_xids: Option<Vec<u32>>,

    /// Compare NVML's product, memory, compute capability and driver with GFD's
    /// labels and fail on a contradiction (labels left stale by a driver or
    /// hardware change). Default true.
    #[serde(default = "default_true")]
    pub check_labels: bool,

    /// How the CUDA compute check of the probe (report v2) gates. Absent: a
    /// failed check gates, a skipped or stale one is only reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_check: Option<ComputeCheckRules>,
}

/// The Health layer's rules for the probe's compute check. A failed check
/// (CUDA error, wrong result) always makes the node not ready; these choose what
/// a check that could not run, or ran on another stack or too long ago, means.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ComputeCheckRules {
    /// No check has run in the probe because it was skipped (GPUs busy,
    /// exclusive compute mode, MIG): `Ignore` (default: reported in the message,
    /// not gating), `Unknown` or `Blocking`.
    #[serde(default)]
    pub when_skipped: ProbePolicy,
    /// The latest check ran on another stack (driver version, boot ID, GPU set)
    /// or longer ago than `maxAgeSeconds`: `Ignore` (default), `Unknown` or `Blocking`.
    #[serde(default)]
    pub when_stale: ProbePolicy,
    /// Age in seconds after which a check is stale. 0 (default): never by age
    /// alone (a stack change still makes it stale).
    #[serde(default)]
    #[schemars(range(min = 0, max = 31536000))]
    pub max_age_seconds: u32,
}

fn default_max_report_age() -> u32 {
    300
}

fn default_true() -> bool {
    true
}

impl Default for ProbeExpectation {
    fn default() -> Self {
        ProbeExpectation {
            when_missing: ProbePolicy::default(),
            max_report_age_seconds: default_max_report_age(),
            fatal_xids: None,
            check_labels: true,
            compute_check: None,
        }
    }
}

/// XIDs that are fatal for a node unless the profile lists its own: those NVIDIA's
/// Xid catalog resolves by a GPU reset or a reboot (48 double-bit ECC, 61/62
/// micro-controller breakpoint/halt, 64 row-remapper or page-retirement failure,
/// 74 NVLink, 79 fallen off the bus, 95 uncontained ECC, 119/120 GSP timeout or
/// error, 140 unrecovered ECC, 154 recovery action changed).
pub const DEFAULT_FATAL_XIDS: &[u32] = &[48, 61, 62, 64, 74, 79, 95, 119, 120, 140, 154];

/// XIDs caused by the workload, not the GPU (the device plugin's and DRA driver's
/// ignore list): never fatal.
pub const APPLICATION_XIDS: &[u32] = &[13, 31, 43, 45, 68, 109];

/// What a missing probe report means for the Health layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ProbePolicy {
    /// Leave the Health layer out when there is no report.
    #[default]
    Ignore,
    /// Health is Unknown without a report (the node is not ready).
    Unknown,
    /// Health is NotReady without a report.
    Blocking,
}

/// A limit on how long a governed node may stay not ready.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NotReadyDeadline {
    /// Seconds a node may stay not ready, counted from `since`.
    #[schemars(range(min = 60, max = 2592000))]
    pub seconds: u32,

    /// `FirstSeen` (default): from the node's creationTimestamp, for nodes that
    /// register but never become ready. `LastReady`: from the moment the
    /// `GpuReady` condition last left True (its lastTransitionTime).
    #[serde(default)]
    pub since: DeadlineStart,

    /// Also set the label `gpuready.io/not-ready-deadline-exceeded=true` on the
    /// node while it is past the deadline, for remediation systems (medik8s Node
    /// Healthcheck, autoscalers).
    #[serde(default)]
    pub label: bool,
}

/// What a [`NotReadyDeadline`] counts from. Both come from state the API server
/// keeps, never from gpuready's memory, so a restart changes nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeadlineStart {
    /// The node's `metadata.creationTimestamp`.
    #[default]
    FirstSeen,
    /// The `GpuReady` condition's lastTransitionTime while it is not True (the
    /// node's creation when gpuready has not written the condition yet).
    LastReady,
}

fn default_max_label_age() -> u32 {
    3600
}

/// The GPU expected on every governed node. Every field is optional; an absent
/// field is not checked.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.families) || !has(self.excludedFamilies) || !self.families.exists(f, f in self.excludedFamilies)").message("gpu.families and gpu.excludedFamilies must not share a family: no card could be both allowed and excluded"))]
pub struct GpuExpectation {
    /// Accepted `nvidia.com/gpu.product` values: exact names or glob patterns
    /// (`*`, `?`, `[...]`), case-insensitive. The `NVIDIA-` prefix older drivers
    /// omit and the `-SHARED` suffix of time-slicing/MPS are tolerated on both sides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 128)))]
    #[x_kube(validation = Rule::new("self.all(p, p.size() >= 1 && p.size() <= 128)").message("each product must be 1 to 128 characters"))]
    #[x_kube(validation = Rule::new("self.all(p, !p.contains('**') && p.matches('^([^\\\\[\\\\]]|\\\\[(![^\\\\[\\\\]]+|[^!\\\\[\\\\]][^\\\\[\\\\]]*)\\\\])*$'))").message("products must be valid patterns: *, ? and [...] classes, each [ closed by ], no **"))]
    #[x_kube(validation = Rule::new("self.all(p, p == '*' || p.matches('[^*?]'))").message("products must name something: a pattern of only ? and * matches every short name (use * alone for any product)"))]
    // A class range between letters or digits that runs high to low (`z-a`)
    // matches nothing: every such pair, spelled out (CEL cannot compare
    // characters; validate.rs checks the same by code point).
    #[x_kube(validation = Rule::new("self.all(p, !p.matches('\\\\[[^\\\\]]*([a-z]-[0-9A-Z]|[A-Z]-[0-9]|1-0|2-[0-1]|3-[0-2]|4-[0-3]|5-[0-4]|6-[0-5]|7-[0-6]|8-[0-7]|9-[0-8]|B-A|C-[A-B]|D-[A-C]|E-[A-D]|F-[A-E]|G-[A-F]|H-[A-G]|I-[A-H]|J-[A-I]|K-[A-J]|L-[A-K]|M-[A-L]|N-[A-M]|O-[A-N]|P-[A-O]|Q-[A-P]|R-[A-Q]|S-[A-R]|T-[A-S]|U-[A-T]|V-[A-U]|W-[A-V]|X-[A-W]|Y-[A-X]|Z-[A-Y]|b-a|c-[a-b]|d-[a-c]|e-[a-d]|f-[a-e]|g-[a-f]|h-[a-g]|i-[a-h]|j-[a-i]|k-[a-j]|l-[a-k]|m-[a-l]|n-[a-m]|o-[a-n]|p-[a-o]|q-[a-p]|r-[a-q]|s-[a-r]|t-[a-s]|u-[a-t]|v-[a-u]|w-[a-v]|x-[a-w]|y-[a-x]|z-[a-y])'))").message("products must not hold a range that matches nothing: a range between letters or digits runs low to high ([a-z], not [z-a])"))]
    pub products: Vec<String>,

    /// Minimum `nvidia.com/gpu.memory`, in MiB (e.g. 24576 for a 24 GiB card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16777216))]
    pub min_memory_mib: Option<u32>,

    /// Minimum compute capability as `major.minor`, e.g. `8.6`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 8))]
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]?\\\\.[0-9]$')").message("minComputeCapability must look like 8.6 (major.minor, from 1.0, no leading zero)"))]
    pub min_compute_capability: Option<String>,

    /// Allowed architecture families. Empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 12))]
    #[x_kube(validation = Rule::new("self.all(f, self.exists_one(g, g == f))").message("gpu.families must list each family once"))]
    pub families: Vec<Family>,

    /// Families that must not be used (e.g. `maxwell` for a fleet moving to CUDA 13).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 12))]
    #[x_kube(validation = Rule::new("self.all(f, self.exists_one(g, g == f))").message("gpu.excludedFamilies must list each family once"))]
    pub excluded_families: Vec<Family>,

    /// GPUs per node: at least this many in `nvidia.com/gpu.count` and allocatable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub count: Option<u32>,

    /// At most this many GPUs on one NUMA node, read from the DRA driver's
    /// standard `resource.kubernetes.io/numaNode` attribute (an `int`, or an
    /// `ints` list): on an 8-GPU board with two sockets, 4 catches a BIOS
    /// NUMA setting that put every GPU on one node. Judged on DRA nodes only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub max_gpus_per_numa_node: Option<u32>,
}

/// GPU architecture family, as GFD spells it in `nvidia.com/gpu.family`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    Tesla,
    Fermi,
    Kepler,
    Maxwell,
    Pascal,
    Volta,
    Turing,
    Ampere,
    AdaLovelace,
    Hopper,
    Blackwell,
    Rubin,
}

impl Family {
    pub const ALL: [Family; 12] = [
        Family::Tesla,
        Family::Fermi,
        Family::Kepler,
        Family::Maxwell,
        Family::Pascal,
        Family::Volta,
        Family::Turing,
        Family::Ampere,
        Family::AdaLovelace,
        Family::Hopper,
        Family::Blackwell,
        Family::Rubin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Tesla => "tesla",
            Family::Fermi => "fermi",
            Family::Kepler => "kepler",
            Family::Maxwell => "maxwell",
            Family::Pascal => "pascal",
            Family::Volta => "volta",
            Family::Turing => "turing",
            Family::Ampere => "ampere",
            Family::AdaLovelace => "ada-lovelace",
            Family::Hopper => "hopper",
            Family::Blackwell => "blackwell",
            Family::Rubin => "rubin",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether gpuready acts on nodes or only reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Mode {
    /// Taint, label and condition nodes.
    #[default]
    Enforce,
    /// Report only: status, events and metrics, zero node writes.
    Observe,
}

/// When the readiness taint is applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaintPolicy {
    /// Taint whenever the node is not ready.
    #[default]
    Continuous,
    /// Taint only until the node is first ready; never re-taint afterwards.
    UntilFirstReady,
}

/// The readiness taint.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!self.key.matches('^([^/]*\\\\.)?(kubernetes\\\\.io|k8s\\\\.io|x-k8s\\\\.io|nvidia\\\\.com|karpenter\\\\.sh|karpenter\\\\.k8s\\\\.aws|azure\\\\.com|cloud\\\\.google\\\\.com|gke\\\\.io|amazonaws\\\\.com|oraclecloud\\\\.com)/') || self.key.startsWith('readiness.k8s.io/') || self.key.startsWith('startup-taint.cluster-autoscaler.kubernetes.io/') || self.key.startsWith('ignore-taint.cluster-autoscaler.kubernetes.io/')").message("taint.key must not be in a namespace other systems own (kubernetes.io, k8s.io, x-k8s.io, nvidia.com, karpenter.sh, karpenter.k8s.aws, the cloud providers' azure.com, cloud.google.com, gke.io, amazonaws.com, oraclecloud.com): pick your own domain, or one of the autoscaler prefixes readiness.k8s.io/, startup-taint.cluster-autoscaler.kubernetes.io/, ignore-taint.cluster-autoscaler.kubernetes.io/"))]
pub struct TaintSpec {
    /// Taint key. Default `readiness.k8s.io/gpuready-not-ready` (a startup
    /// taint for Karpenter and, with `--startup-taint-prefix`, Cluster Autoscaler).
    #[serde(default = "default_taint_key")]
    #[schemars(length(min = 1, max = 317))]
    // The Kubernetes CEL format library: the same rule as a taint key on a
    // Node (prefix a DNS subdomain of at most 253, name at most 63).
    #[x_kube(validation = Rule::new("!format.qualifiedName().validate(self).hasValue()").message("taint.key must be a qualified name like gpuready.io/not-ready"))]
    pub key: String,

    /// Taint value. Default `true`.
    #[serde(default = "default_taint_value")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new("self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')").message("taint.value must be a valid label value (letters, digits, '-', '_', '.')"))]
    pub value: String,

    /// Taint effect: `NoSchedule` (default), `PreferNoSchedule` or `NoExecute`.
    #[serde(default)]
    pub effect: TaintEffect,
}

fn default_taint_key() -> String {
    keys::DEFAULT_TAINT_KEY.to_owned()
}

fn default_taint_value() -> String {
    keys::DEFAULT_TAINT_VALUE.to_owned()
}

impl Default for TaintSpec {
    fn default() -> Self {
        TaintSpec {
            key: default_taint_key(),
            value: default_taint_value(),
            effect: TaintEffect::default(),
        }
    }
}

/// Kubernetes taint effect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaintEffect {
    #[default]
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// Aggregated verdict over the profile's nodes. Per-node detail is on each Node's
/// `GpuReady` condition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuNodeProfileStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Nodes the selector matches (conflicting nodes included).
    #[serde(default)]
    pub matched_nodes: i32,
    /// Matched nodes whose gating layers are all Ready.
    #[serde(default)]
    pub ready_nodes: i32,
    /// Matched nodes that are not ready (conflicts included).
    #[serde(default)]
    pub not_ready_nodes: i32,
    /// kstatus-compatible conditions: `Ready`, one per layer (`GpuReadyDriver`, ...),
    /// `SafetyBrake` and `NfdCrds`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Up to 20 not-ready nodes (sorted by name) with their first failing layer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub not_ready_summary: Vec<NotReadyNode>,
    /// Devices gpuready took out of service with DeviceTaintRules (device
    /// gating), over every matched node.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tainted_devices: i32,
    /// Up to 20 nodes (sorted by name) with devices gated by DeviceTaintRules,
    /// each with its devices and reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub tainted_device_summary: Vec<TaintedDevices>,
    /// Matched nodes in maintenance (a driver upgrade, a MIG change, paused
    /// operands): gated, and counted neither ready nor not ready.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub maintenance_nodes: i32,
    /// Matched nodes whose GPU stack is ready while another readiness gate
    /// (a NodeWright or other `readiness.k8s.io/` taint, a cordon) holds them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waiting_for_gate_nodes: i32,
    /// Up to 20 nodes in maintenance (sorted by name), each with its reason
    /// and the state it is in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub maintenance_summary: Vec<LifecycleNode>,
    /// Up to 20 nodes waiting for another gate (sorted by name), each with the gates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub waiting_for_gate_summary: Vec<LifecycleNode>,
    /// Up to 20 escalating devices (sorted by node and device): their dry
    /// run, or the `NoExecute` eviction, as the API server reports it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub escalations: Vec<DeviceEscalation>,
    /// Governed nodes another system holds out of service (its taint, its
    /// cordon, its state label), by system: NVSentinel, NodeWright, the GPU
    /// operator's upgrade cordon, a node-readiness-controller rule, or Other
    /// (a cordon no known system marks). A node two systems hold counts
    /// under each; only systems holding a node are listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["system"]))]
    pub held_by_system: Vec<SystemCount>,
    /// Pods, over every matched node, that hold a device gpuready taints
    /// `NoExecute` as a DRA-backed extended resource: Kubernetes' device taint
    /// eviction does not evict them (kubernetes #141290). `check` and the
    /// nodes' `GpuReady` message name them (and, during a dry run, those it
    /// will not evict).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_evicted_pods: i32,

    /// The profile's `NoExecute` budget (`escalation.maxNoExecutePercent`):
    /// how many of its nodes and devices are escalated to `NoExecute`, the
    /// most that may be, and how many escalations are held back (by the
    /// budget or the safety brake). Absent without `escalation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_execute: Option<NoExecuteBudget>,

    /// How long the profile's nodes took to join over the last 24 hours:
    /// from each Node's registration until it was Ready, read from the
    /// record gpuready writes on each node (`gpuready.io/timeline`). Absent
    /// while no node joined in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_ready: Option<TimeToReady>,
}

/// A profile's recent joins as its status reports them (docs/time-to-ready.md).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimeToReady {
    /// Joins in the window (`windowSeconds`) that the figures count.
    pub joins: i32,
    /// The window: joins that ended this many seconds before the status.
    pub window_seconds: i64,
    /// Median seconds from registration to Ready (nearest rank).
    pub p50_seconds: i64,
    /// 90th percentile (nearest rank: an observed join, never interpolated).
    pub p90_seconds: i64,
    /// The slowest join.
    pub max_seconds: i64,
    /// The step that held the window's joins longest, summed over them: a
    /// layer (`Driver`, `DevicePlugin`, `FeatureDiscovery`, ...) or `Gates`
    /// (other readiness gates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest_layer: Option<String>,
}

/// A profile's `NoExecute` budget as its status reports it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NoExecuteBudget {
    /// Nodes whose taint gpuready escalated to `NoExecute`.
    pub nodes: i32,
    /// The most nodes that may be.
    pub node_limit: i32,
    /// Nodes whose escalation is due but held.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nodes_held: i32,
    /// Devices whose escalation rule is `NoExecute`.
    pub devices: i32,
    /// The most devices that may be.
    pub device_limit: i32,
    /// Devices whose escalation is due but held.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub devices_held: i32,
}

/// Another system that holds GPU nodes out of service, as gpuready names it
/// (docs/operations.md, "Other systems on the node").
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum NeighbourSystem {
    /// NVIDIA NVSentinel: its state label, its external-remediation taint.
    #[serde(rename = "NVSentinel")]
    NvSentinel,
    /// NVIDIA NodeWright (formerly Skyhook): its runtime-required taint, its cordons.
    NodeWright,
    /// The NVIDIA GPU operator's driver-upgrade cordon.
    #[serde(rename = "GPUOperator")]
    GpuOperator,
    /// A node-readiness-controller rule (a `readiness.k8s.io/` taint not gpuready's).
    NodeReadinessController,
    /// A cordon no known system marks: an admin's, or another controller's.
    Other,
}

impl NeighbourSystem {
    /// Every system, in the order status lists them.
    pub const ALL: [NeighbourSystem; 5] = [
        NeighbourSystem::NvSentinel,
        NeighbourSystem::NodeWright,
        NeighbourSystem::GpuOperator,
        NeighbourSystem::NodeReadinessController,
        NeighbourSystem::Other,
    ];

    /// The name as status and messages spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            NeighbourSystem::NvSentinel => "NVSentinel",
            NeighbourSystem::NodeWright => "NodeWright",
            NeighbourSystem::GpuOperator => "GPUOperator",
            NeighbourSystem::NodeReadinessController => "NodeReadinessController",
            NeighbourSystem::Other => "Other",
        }
    }
}

/// How many of a profile's nodes one system holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SystemCount {
    pub system: NeighbourSystem,
    pub nodes: i32,
}

/// One device's escalation to `NoExecute`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceEscalation {
    pub node: String,
    pub device: String,
    /// Why the device is bad (`FatalXid`, …).
    pub reason: String,
    /// `None` during the dry run, `NoExecute` once escalated.
    pub effect: String,
    /// RFC 3339: when the dry run ends (or ended).
    pub no_execute_at: String,
    /// The escalation rule's `EvictionInProgress` condition as the API
    /// server wrote it (`True`/`False` and its message): during the dry run
    /// what `NoExecute` would evict, afterwards the pods pending eviction and
    /// evicted. Absent until the server reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction: Option<String>,
    /// The pods that hold the device as a DRA-backed extended resource, in
    /// words: Kubernetes' device taint eviction does not evict them
    /// (kubernetes #141290), so `eviction` does not count them either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_evicted: Option<String>,
    /// Due, but held with effect `None`: why (the safety brake, or the
    /// profile's `NoExecute` budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

/// One node of a lifecycle summary.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleNode {
    /// Node name.
    pub name: String,
    /// `DriverUpgradeInProgress`, `MigReconfiguring`, `OperandsPaused` or `WaitingForGate`.
    pub reason: String,
    /// The upgrade or MIG state (`pod-restart-required`, `pending`), the
    /// paused operands, or the gates that hold the node.
    pub detail: String,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// One node's devices gated by gpuready's DeviceTaintRules.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaintedDevices {
    /// Node name.
    pub node: String,
    /// `device (reason)`, e.g. `gpu-3 (FatalXid)`.
    #[schemars(length(max = 64))]
    pub devices: Vec<String>,
}

/// One entry of the bounded not-ready summary.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotReadyNode {
    /// Node name.
    pub name: String,
    /// First failing gating layer (bottom-up), or `Conflict`.
    pub layer: String,
    /// Machine-readable reason.
    pub reason: String,
}

impl GpuNodeProfileSpec {
    pub fn is_gating(&self, layer: Layer) -> bool {
        self.gating_layers
            .as_ref()
            .is_none_or(|layers| layers.contains(&layer))
    }
}
