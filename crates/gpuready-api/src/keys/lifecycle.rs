//! The node's lifecycle beside its layers (docs/operations.md, "Lifecycle"):
//! the labels the NVIDIA GPU operator, its driver manager and mig-manager
//! write while they change a node, the taints other readiness gates hold, the
//! repair annotation an operator writes, and the reasons gpuready gives each.
//! gpuready only reads these labels and taints; it never writes them.

/// k8s-operator-libs' upgrade controller (GPU operator v26.7.0): where a
/// node is in a driver upgrade, one of [`UPGRADE_STATES`].
pub const DRIVER_UPGRADE_STATE: &str = "nvidia.com/gpu-driver-upgrade-state";
/// The 12 values of [`DRIVER_UPGRADE_STATE`], in the order the upgrade
/// controller moves a node through them (`consts.go` of k8s-operator-libs).
pub const UPGRADE_STATES: [&str; 12] = [
    UPGRADE_REQUIRED,
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "drain-required",
    "node-maintenance-required",
    "post-maintenance-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    UPGRADE_DONE,
    UPGRADE_FAILED,
];
/// Queued for an upgrade: "no actions are performed at this stage" (the
/// node still serves; the controller picks it when a slot of the wave frees).
pub const UPGRADE_REQUIRED: &str = "upgrade-required";
pub const UPGRADE_DONE: &str = "upgrade-done";
pub const UPGRADE_FAILED: &str = "upgrade-failed";
/// `nvidia.com/gpu.deploy.<operand>`: whether the GPU operator deploys an operand.
pub const DEPLOY_LABEL_PREFIX: &str = "nvidia.com/gpu.deploy.";
/// GPU operator v26.7.0 (`controllers/state_manager.go`, PR #2607): `true`
/// on every GPU node it manages, for third-party GPU clients such as
/// gpuready's probe. k8s-driver-manager v0.12.0 sets it to
/// [`PAUSED_FOR_DRIVER_UPGRADE`] before unloading the driver, mig-manager
/// v0.15.0 to [`PAUSED_FOR_MIG_CHANGE`] while it re-partitions, and both
/// set it back to `true` after. The chart's probe requires it absent or
/// `true` (docs/probe.md, "Maintenance").
pub const DEPLOY_CLIENT: &str = "nvidia.com/gpu.deploy.client";
/// The driver manager evicted the operand for a driver upgrade.
pub const PAUSED_FOR_DRIVER_UPGRADE: &str = "paused-for-driver-upgrade";
/// mig-manager evicted the operand while it re-partitions the GPUs.
pub const PAUSED_FOR_MIG_CHANGE: &str = "paused-for-mig-change";
/// Values of `nvidia.com/mig.config.state` (mig-parted `reconfigure.go`).
pub const MIG_PENDING: &str = "pending";
pub const MIG_REBOOTING: &str = "rebooting";
pub const MIG_FAILED: &str = "failed";
/// NVIDIA NodeWright's startup taint (v0.18.0 and later), removed once
/// every runtime-required package is applied.
pub const NODEWRIGHT_TAINT: &str = "nodewright.nvidia.com";
/// The same taint under NodeWright's former name, Skyhook (still accepted).
pub const SKYHOOK_TAINT: &str = "skyhook.nvidia.com";
/// The prefix readiness controllers share (node-readiness-controller rules,
/// gpuready's own default): every key there that is not gpuready's belongs
/// to another gate.
pub const READINESS_TAINT_PREFIX: &str = "readiness.k8s.io/";
/// NVSentinel's fault-handling state (NVIDIA/NVSentinel
/// `commons/pkg/statemanager/statemanager.go`): absent on a healthy node,
/// else one of [`NVSENTINEL_STATES`] while it quarantines (cordons),
/// drains and remediates the node.
pub const NVSENTINEL_STATE: &str = "dgxc.nvidia.com/nvsentinel-state";
/// The values of [`NVSENTINEL_STATE`], in the order NVSentinel moves a
/// node through them; `drain-failed` and `remediation-failed` are terminal.
pub const NVSENTINEL_STATES: [&str; 7] = [
    "quarantined",
    "draining",
    "drain-succeeded",
    "drain-failed",
    "remediating",
    "remediation-succeeded",
    "remediation-failed",
];
/// NVSentinel's release taint (ADR-040, NVIDIA/NVSentinel PR #1316): the
/// node is handed to an external remediation system; the value is the
/// ExternalRemediationRequest's name.
pub const NVSENTINEL_EXTERNAL_REMEDIATION_TAINT: &str =
    "nvsentinel.nvidia.com/external-remediation";
/// NodeWright's persistent cordon (`runtimeRequiredCordonAfter`,
/// NVIDIA/nodewright PR #401, `docs/runtime_required.md`): set with the
/// cordon when the runtime-required taint comes off; an outside validator
/// releases the node by removing it and uncordoning in one patch.
pub const NODEWRIGHT_RUNTIME_REQUIRED_CORDON: &str = "nodewright.nvidia.com/runtimeRequiredCordon";
/// NodeWright's cordon ownership, one annotation per NodeWright whose
/// interrupt holds the node (`cordon_<name>`; NodeWright
/// `docs/architecture/interrupt-flow.md`).
pub const NODEWRIGHT_CORDON_PREFIX: &str = "nodewright.nvidia.com/cordon_";
/// The same under NodeWright's former name, Skyhook
/// (`operator/internal/wrapper/node.go`).
pub const SKYHOOK_CORDON_PREFIX: &str = "skyhook.nvidia.com/cordon_";
/// Written by an operator, never by gpuready: when the node's GPUs were
/// repaired, as an RFC 3339 time (every GPU) or a JSON object of GPU UUID
/// to RFC 3339 time. Faults recorded before it no longer count.
pub const ANNOTATION_REPAIRED_AT: &str = "gpuready.io/repaired-at";

/// GpuReady reason: a driver upgrade is taking the node through its steps.
pub const DRIVER_UPGRADE_IN_PROGRESS: &str = "DriverUpgradeInProgress";
/// GpuReady reason: the upgrade controller gave up (`upgrade-failed`).
pub const DRIVER_UPGRADE_FAILED: &str = "DriverUpgradeFailed";
/// GpuReady reason: mig-manager re-partitions the GPUs (`pending`, `rebooting`).
pub const MIG_RECONFIGURING: &str = "MigReconfiguring";
/// GpuReady reason: GPU operator operands are paused (`paused-for-*`)
/// without an upgrade or MIG state that explains it.
pub const OPERANDS_PAUSED: &str = "OperandsPaused";
/// GpuReady reason: maintenance lasted longer than `maintenance.deadlineSeconds`.
pub const MAINTENANCE_STUCK: &str = "MaintenanceStuck";
/// GpuReady reason: the GPU stack is ready, another readiness gate holds the node.
pub const WAITING_FOR_GATE: &str = "WaitingForGate";
/// Profile `Ready=True` reason while nodes are in maintenance (and none fails).
pub const NODES_IN_MAINTENANCE: &str = "NodesInMaintenance";
/// Profile `Ready=True` reason while nodes wait for other gates (and none fails).
pub const NODES_WAITING_FOR_GATE: &str = "NodesWaitingForGate";
/// Node Event: the repair annotation was refused (the note says why).
pub const EVENT_REPAIR_REFUSED: &str = "RepairRefused";
