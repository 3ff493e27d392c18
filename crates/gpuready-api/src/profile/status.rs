//! A GpuNodeProfile's `status`: the aggregated verdict over its nodes, written by
//! the status task (per-node detail lives on each Node).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Aggregated verdict over the profile's nodes. Per-node detail is on each Node's
/// `GpuReady` condition.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuNodeProfileStatus {
    /// The `metadata.generation` this status was computed from.
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
    pub no_execute: Option<NoExecuteBudget>,

    /// How long the profile's nodes took to join over the last 24 hours:
    /// from each Node's registration until it was Ready, read from the
    /// record gpuready writes on each node (`gpuready.io/timeline`). Absent
    /// while no node joined in the window.
    pub time_to_ready: Option<TimeToReady>,
}

/// A profile's recent joins as its status reports them (docs/time-to-ready.md).
#[serde_with::skip_serializing_none]
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
#[serde_with::skip_serializing_none]
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
    pub eviction: Option<String>,
    /// The pods that hold the device as a DRA-backed extended resource, in
    /// words: Kubernetes' device taint eviction does not evict them
    /// (kubernetes #141290), so `eviction` does not count them either.
    pub not_evicted: Option<String>,
    /// Due, but held with effect `None`: why (the safety brake, or the
    /// profile's `NoExecute` budget).
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
