//! The GpuNodeProfile custom resource: what a set of GPU nodes must have, and the
//! aggregated verdict over them.
//!
//! Validation lives in the schema (bounds, enums, CEL rules with messages a person
//! can act on) so the API server refuses a bad profile at admission; `validate.rs`
//! repeats the same rules for offline use by `gpuready check`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::condition::BrokenWhen;
use crate::layer::Layer;

mod escalation;
mod external;
mod fabric;
mod gpu;
mod health;
mod status;
mod taint;

pub use escalation::{
    DeviceGating, DeviceTaintEffect, Escalation, ExtendedResourcePods, MaintenanceRules,
};
pub use external::{ExternalCondition, ExternalPreset, ExternalSignals};
pub use fabric::{ComputeDomainCliquePolicy, FabricExpectation, ImexMode};
pub use gpu::{Family, GpuExpectation, MigExpectation};
pub use health::{
    APPLICATION_XIDS, ComputeCheckRules, DEFAULT_FATAL_XIDS, ProbeExpectation, ProbePolicy,
};
pub use status::{
    DeviceEscalation, GpuNodeProfileStatus, LifecycleNode, NeighbourSystem, NoExecuteBudget,
    NotReadyNode, SystemCount, TaintedDevices, TimeToReady,
};
pub use taint::{Mode, TaintEffect, TaintPolicy, TaintSpec};

/// Upper bound of the not-ready summary kept in status. Per-node detail lives on
/// the Node itself, so a 5,000-node profile stays a few KiB.
pub const MAX_NOT_READY_SUMMARY: usize = 20;

/// What a set of GPU nodes must have to be called ready, and what gpuready does
/// about nodes that are not.
// One `printcolumn(...)` per column is kube's syntax; clippy reads the repeated
// `type_ = ...` inside them as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[serde_with::skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
// Which API: the group, version and kind, as a manifest's apiVersion and kind.
#[kube(group = "gpuready.io", version = "v1alpha1", kind = "GpuNodeProfile")]
#[kube(plural = "gpunodeprofiles", shortname = "gnp", category = "gpuready")]
#[kube(
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
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]{0,8}\\\\.(0|[1-9][0-9]{0,8})(\\\\.[0-9]{1,9})?$')").message("minDriverVersion must look like 580.65.06 or 570.26 (at most 9 digits a part, no leading zero in the first two)"))]
    #[schemars(length(max = 32))]
    pub min_driver_version: Option<String>,

    /// CUDA version the workloads are built for, e.g. `12.4` or `13.0`. Checked
    /// against the card's compute capability, the driver's minimum for that CUDA
    /// release and the CUDA version the driver reports.
    #[x_kube(validation = Rule::new("self.matches('^([1-9]|1[0-9]|20)\\\\.(0|[1-9][0-9]?)$')").message("cudaVersion must be a CUDA release like 12.4 or 13.0 (major 1 to 20, no leading zero)"))]
    #[schemars(length(max = 16))]
    pub cuda_version: Option<String>,

    /// Layers whose verdict gates readiness. Default: all of them. A layer left out
    /// is still evaluated and reported, but cannot hold the node back.
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
    pub not_ready_deadline: Option<NotReadyDeadline>,

    /// How the Health layer uses the report of the node agent `gpuready probe`
    /// (NVML read where the workloads run). Absent: a report is judged when one
    /// exists, and a node without one is judged as before.
    pub probe: Option<ProbeExpectation>,

    /// Per-device gating on DRA nodes: gpuready writes one `DeviceTaintRule`
    /// per bad device (its probe state, its attributes against `gpu`, its
    /// parent GPU for MIG devices) instead of tainting the whole node, and taints
    /// the node as well only when fewer than `minReadyGpus` ready GPUs remain.
    /// Absent: whole-node gating only, as before.
    pub device_gating: Option<DeviceGating>,

    /// The MIG layout the pool needs, judged from mig-manager's labels
    /// (`nvidia.com/mig.config`, `nvidia.com/mig.config.state`), GFD's MIG
    /// labels and the DRA driver's MIG devices. Absent: not checked.
    pub mig: Option<MigExpectation>,

    /// How maintenance the GPU operator drives (driver upgrades, MIG changes,
    /// paused operands) is judged: such a node stays gated under its own
    /// reason and is counted apart from failures. Absent: maintenance may
    /// last as long as it takes.
    pub maintenance: Option<MaintenanceRules>,

    /// Which reasons take a bad GPU out harder: its DeviceTaintRule (device
    /// gating) — or, without device gating, the node's taint — escalates to
    /// `NoExecute`, evicting the pods that use it, after a dry run in which
    /// the rule runs with effect `None` and the API server reports what
    /// `NoExecute` would evict. Absent: nothing escalates.
    pub escalation: Option<Escalation>,

    /// The Fabric layer: multi-node NVLink readiness (GB200/GB300-class
    /// systems): the NVLink clique label GFD writes, the probe's NVML fabric
    /// state of every GPU, the driver IMEX needs and the host's IMEX service.
    /// Absent: not checked.
    pub fabric: Option<FabricExpectation>,

    /// The External layer: which verdicts of other judges count, as Node
    /// conditions their agents write (a cloud provider's GPU health agent,
    /// node-problem-detector checks). Absent: none is read.
    pub external: Option<ExternalSignals>,
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

impl GpuNodeProfileSpec {
    pub fn is_gating(&self, layer: Layer) -> bool {
        self.gating_layers
            .as_ref()
            .is_none_or(|layers| layers.contains(&layer))
    }
}
