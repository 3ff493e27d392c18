//! What gpuready does beyond its node taint: escalation to `NoExecute`,
//! maintenance deadlines, per-device gating with DeviceTaintRules.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceRules {
    /// Seconds a node may stay in maintenance, counted from when its
    /// `GpuReady` condition last left True; past it the node is a failure
    /// (`MaintenanceStuck`). Absent: no limit.
    #[schemars(range(min = 60, max = 2592000))]
    pub deadline_seconds: Option<u32>,
}

/// Per-device gating: what gpuready's DeviceTaintRules look like.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceGating {
    /// Ready GPUs (not bad, not tainted by the DRA driver) the node must keep
    /// for its node taint to stay off. Default: `gpu.count`, else 1.
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
