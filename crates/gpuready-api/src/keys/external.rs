//! Outside Node conditions the External layer's presets read (docs/external.md
//! names the document each comes from), and the External layer's reasons.

use crate::condition::BrokenWhen;

/// Amazon EKS node monitoring agent (aws/eks-node-monitoring-agent,
/// `docs/node-health-issues.adoc`; EKS user guide "Detect node health
/// issues with the EKS node monitoring agent"): `True` while healthy.
pub const EKS: &[(&str, BrokenWhen)] = &[("AcceleratedHardwareReady", BrokenWhen::False)];
/// AKS node-problem-detector (MicrosoftDocs/azure-aks-docs
/// `articles/aks/node-problem-detector.md`, "GPU only" rows, and
/// `aks-managed-gpu-nodes.md`): `True` names the problem.
pub const AKS: &[(&str, BrokenWhen)] = &[
    ("GPUMissing", BrokenWhen::True),
    ("XIDErrors", BrokenWhen::True),
    ("NVLinkStatusInactive", BrokenWhen::True),
    ("UnhealthyNvidiaDevicePlugin", BrokenWhen::True),
    ("UnhealthyNvidiaDCGMServices", BrokenWhen::True),
];
/// Nebius Managed Kubernetes (docs.nebius.com, "Health checks and automatic
/// recovery of Managed Service for Kubernetes nodes"): `False` when every
/// GPU health check passed.
pub const NEBIUS: &[(&str, BrokenWhen)] = &[("NebiusGPUError", BrokenWhen::True)];
/// Meta GCM health checks under node-problem-detector (GCM docs,
/// "Kubernetes Deployment", default health checks).
pub const META_GCM: &[(&str, BrokenWhen)] = &[
    ("GcmXidErrorsProblem", BrokenWhen::True),
    ("GcmSmiEccProblem", BrokenWhen::True),
    ("GcmSmiDisconnectedProblem", BrokenWhen::True),
    ("GcmProcZombieProblem", BrokenWhen::True),
    ("GcmDcgmiNvlinkStatusProblem", BrokenWhen::True),
    ("GcmDcgmiDiagProblem", BrokenWhen::True),
];
/// GKE's GPU device plugin (GoogleCloudPlatform/container-engine-accelerators
/// `pkg/gpu/nvidia/health_check/health_checker.go`, PR #497 and #516):
/// added `True` when a critical XID is seen, its reason a JSON object of
/// the XIDs (`{"48":true,"79":true}`), its message the node's boot ID;
/// removed once the node has rebooted. Absent on a healthy node.
pub const GKE: &[(&str, BrokenWhen)] = &[(GKE_XID_CRITICAL_ERROR, BrokenWhen::True)];
/// The condition type of [`GKE`].
pub const GKE_XID_CRITICAL_ERROR: &str = "XidCriticalError";
/// node-problem-detector's permanent node conditions that GPU remediation
/// treats as fatal (kubernetes/node-problem-detector `config/kernel-monitor.json`
/// and `config/readonly-monitor.json`; NVSentinel's opt-in
/// `values-npd-remediation.yaml` replaces the node on the last three):
/// `False` from NPD's start while healthy, `True` names the fault.
pub const NPD: &[(&str, BrokenWhen)] = &[
    ("KernelDeadlock", BrokenWhen::True),
    ("ReadonlyFilesystem", BrokenWhen::True),
    ("XfsShutdown", BrokenWhen::True),
    ("CperHardwareErrorFatal", BrokenWhen::True),
];

/// Ready: every outside condition read says healthy.
pub const HEALTHY: &str = "ExternalSignalsHealthy";
/// NotReady: an outside judge calls the node broken.
pub const BROKEN: &str = "ExternalSignalBroken";
/// Unknown: a condition's heartbeat is older than `maxHeartbeatAgeSeconds`.
pub const STALE: &str = "ExternalSignalStale";
/// Unknown: a condition reads `Unknown` (its agent cannot tell).
pub const UNKNOWN: &str = "ExternalSignalUnknown";
/// Unknown or NotReady (`whenMissing`): a named condition is not on the node.
pub const MISSING: &str = "ExternalSignalMissing";
