//! The profile's `external` block: the outside verdicts the External layer
//! reads (documented presets and any other condition type).

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::BrokenWhen;
use crate::keys;

use super::health::ProbePolicy;

/// Outside verdicts the External layer reads: documented presets, any other
/// condition type, and how old a verdict may be.
#[serde_with::skip_serializing_none]
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
