//! Reasons of the Health layer (and of
//! [`CONDITION_PROBE_HEALTHY`](super::CONDITION_PROBE_HEALTHY)), judged on the
//! report of `gpuready probe`. docs/probe.md says what each means and what to
//! do.

/// Ready: NVML answers and nothing in the report is wrong.
pub const PROBE_HEALTHY: &str = "ProbeHealthy";
/// No report for the node while the profile requires one.
pub const PROBE_MISSING: &str = "ProbeMissing";
/// The report is older than `probe.maxReportAgeSeconds`: the probe stopped.
pub const PROBE_REPORT_STALE: &str = "ProbeReportStale";
/// The carrier holds something that is not a report this gpuready reads.
pub const PROBE_REPORT_INVALID: &str = "ProbeReportInvalid";
/// Unknown: the probe released the GPUs because its node is in maintenance
/// (a driver upgrade, a MIG change, GPU clients paused); also while a
/// paused report outlives the maintenance, until it is fresh no more.
pub const PROBE_PAUSED: &str = "ProbePausedForMaintenance";
/// NVML could not be loaded or initialised inside the probe's container.
pub const NVML_UNUSABLE: &str = "NvmlUnusable";
/// NVML sees fewer GPUs than the profile or the node's labels say.
pub const GPUS_MISSING: &str = "GpusMissing";
/// Volatile uncorrectable ECC errors since the driver loaded.
pub const UNCORRECTABLE_ECC: &str = "UncorrectableEccErrors";
/// A row remapping (or page retirement) waits for a GPU reset.
pub const ROW_REMAP_PENDING: &str = "RowRemapPending";
/// Row remapping failed: no spare rows left.
pub const ROW_REMAP_FAILED: &str = "RowRemapFailed";
/// An XID from the profile's fatal list was seen since the probe started.
pub const FATAL_XID: &str = "FatalXid";
/// GFD's labels contradict NVML (product, memory, compute capability, driver).
pub const LABELS_CONTRADICT_PROBE: &str = "LabelsContradictProbe";
/// A device node a container needs (`/dev/nvidiactl`, `/dev/nvidia-uvm`,
/// `/dev/nvidia-uvm-tools`, `/dev/nvidia<N>`) is missing in the probe's container.
pub const DEVICE_NODE_MISSING: &str = "DeviceNodeMissing";
/// A GPU's NVSwitch fabric registration is not completed, or failed.
pub const FABRIC_NOT_READY: &str = "FabricNotReady";
/// The CUDA driver API could not be loaded or `cuInit` failed (by CUDA error name).
pub const CUDA_INIT_FAILED: &str = "CudaInitFailed";
/// A GPU returned wrong data in the compute check (copy or kernel result).
pub const COMPUTE_MISMATCH: &str = "ComputeMismatch";
/// A CUDA call of the compute check failed on a GPU (context, allocation, copy, launch).
pub const COMPUTE_CHECK_FAILED: &str = "ComputeCheckFailed";
/// No compute check has run: it was skipped (GPUs busy, exclusive mode, MIG).
pub const COMPUTE_CHECK_SKIPPED: &str = "ComputeCheckSkipped";
/// The latest compute check ran on another stack or too long ago.
pub const COMPUTE_CHECK_STALE: &str = "ComputeCheckStale";
/// NVML's GPU recovery action is GPU_RESET.
pub const GPU_RESET_REQUIRED: &str = "GpuResetRequired";
/// NVML's GPU recovery action is NODE_REBOOT.
pub const NODE_REBOOT_REQUIRED: &str = "NodeRebootRequired";
/// NVML's GPU recovery action is DRAIN_P2P (quiesce peer-to-peer traffic).
pub const DRAIN_REQUIRED: &str = "DrainRequired";
/// NVML's GPU recovery action is DRAIN_AND_RESET (reduced capacity).
pub const DRAIN_AND_RESET_REQUIRED: &str = "DrainAndResetRequired";
/// NVML's GPU recovery action is BUS_RESET (reset the GPU's PCIe bus).
pub const BUS_RESET_REQUIRED: &str = "BusResetRequired";
/// NVML's GPU recovery action is SYSTEM_REBOOT (reboot the system).
pub const SYSTEM_REBOOT_REQUIRED: &str = "SystemRebootRequired";
/// NVML's GPU recovery action is a value this gpuready does not know.
pub const RECOVERY_ACTION_REQUIRED: &str = "RecoveryActionRequired";
