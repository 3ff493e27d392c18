//! Reasons shared by the engine, the controller and the CLI.

pub const READY: &str = "Ready";
pub const CONFLICT: &str = "Conflict";
pub const MALFORMED_LABEL: &str = "MalformedLabel";
pub const NODE_NOT_READY: &str = "NodeNotReady";
pub const NO_NODES: &str = "NoMatchingNodes";
pub const NODES_NOT_READY: &str = "NodesNotReady";
/// Profile `Ready=True` of an `Observe` profile with not-ready nodes: a
/// report-only profile has nothing left to reconcile, so it is done (kstatus
/// Current) while its nodes are reported, not ready, in the counts.
pub const OBSERVED_NODES_NOT_READY: &str = "ObservedNodesNotReady";

// Evidence beyond GFD labels (docs/evidence.md names what triggers each).
/// DRA expected but the node has no `gpu.nvidia.com` ResourceSlice.
pub const NO_RESOURCE_SLICE: &str = "NoResourceSlice";
/// The newest pool generation is not fully published yet (or is being replaced).
pub const RESOURCE_POOL_INCOMPLETE: &str = "ResourcePoolIncomplete";
/// Enough devices are published, but NoSchedule/NoExecute device taints leave too few usable.
pub const DEVICES_TAINTED: &str = "DevicesTainted";
/// DRA expected but ResourceSlices could not be read (API not served, not watched).
pub const DRA_EVIDENCE_UNAVAILABLE: &str = "DraEvidenceUnavailable";
/// The DRA driver's health monitor tainted devices `gpu.nvidia.com/gpu-lost`:
/// a GPU fell off the bus.
pub const GPU_LOST: &str = "GpuLost";
/// Ready under DRA, but the driver's health monitor could not watch some
/// devices (`gpu.nvidia.com/unmonitored`): their XIDs go unseen.
pub const DEVICES_UNMONITORED: &str = "DevicesUnmonitored";
/// MIG geometry (`spec.mig`): mig-manager has not applied the config yet
/// (`nvidia.com/mig.config.state=pending`).
pub const MIG_CONFIG_PENDING: &str = "MigConfigPending";
/// `nvidia.com/mig.config.state=rebooting`: mig-manager reboots the node to apply it.
pub const MIG_CONFIG_REBOOTING: &str = "MigConfigRebooting";
/// `nvidia.com/mig.config.state=failed`: mig-manager could not apply the config.
pub const MIG_CONFIG_FAILED: &str = "MigConfigFailed";
/// No `nvidia.com/mig.config.state`, or a value mig-manager does not write.
pub const MIG_CONFIG_STATE_UNKNOWN: &str = "MigConfigStateUnknown";
/// `nvidia.com/mig.config` names another configuration than the profile's `mig.config`.
pub const MIG_CONFIG_MISMATCH: &str = "MigConfigMismatch";
/// Fewer MIG devices of a profile than `mig.devices` needs.
pub const MIG_DEVICES_MISSING: &str = "MigDevicesMissing";
/// GFD's single MIG strategy labels the node `<model>-MIG-INVALID`: its MIG
/// layout does not fit the strategy, so no device is advertised.
pub const MIG_STRATEGY_INVALID: &str = "MigStrategyInvalid";
/// A profile without `mig` (full GPUs) governs a node whose GPUs GFD's
/// single strategy shows partitioned into MIG devices.
pub const MIG_PARTITIONED: &str = "MigPartitioned";
/// Device gating: fewer ready GPUs remain than `deviceGating.minReadyGpus`
/// once gpuready's DeviceTaintRules took the bad devices out.
pub const TOO_FEW_READY_DEVICES: &str = "TooFewReadyDevices";
/// Device gating with `escalation.extendedResourcePods: TaintNode`: pods
/// hold a device escalated to `NoExecute` as a DRA-backed extended
/// resource, which Kubernetes does not evict (kubernetes #141290), so the
/// node's taint escalates to `NoExecute` instead.
pub const EXTENDED_RESOURCE_PODS_NOT_EVICTED: &str = "ExtendedResourcePodsNotEvicted";
/// A GPU attribute the profile needs is not in the node's ResourceSlices.
pub const DRA_ATTRIBUTE_MISSING: &str = "DraAttributeMissing";
/// Ready under DRA: the pool's usable devices cover what the profile needs.
pub const DRA_DEVICES_AVAILABLE: &str = "DraDevicesAvailable";
/// Ready: GPU attributes come from ResourceSlices instead of GFD labels.
pub const DRA_ATTRIBUTES: &str = "DraAttributes";
/// `gpu.maxGpusPerNumaNode`: a NUMA node holds more GPUs than the profile
/// allows (a BIOS NUMA setting that collapsed the topology, say).
pub const TOO_MANY_GPUS_PER_NUMA_NODE: &str = "TooManyGpusPerNumaNode";
/// NFD's PCI scan shows more NVIDIA GPUs than the stack advertises.
pub const GPU_NOT_ADVERTISED: &str = "GpuNotAdvertised";
/// The stack advertises more GPUs than NFD's PCI scan finds (a GPU fell off the bus).
pub const GPU_MISSING_FROM_BUS: &str = "GpuMissingFromBus";
/// Ready (Hardware): the DRA driver publishes GPUs for the node.
pub const SEEN_BY_DRA_DRIVER: &str = "SeenByDraDriver";
/// Ready (Hardware): NFD's NodeFeature lists NVIDIA GPUs on the PCI bus.
pub const NVIDIA_GPUS_ON_BUS: &str = "NvidiaGpusOnBus";
/// GFD runs in vfio mode (compute capability -1, driver `unknown`) on a node
/// judged as a container node.
pub const GFD_VFIO_MODE: &str = "GfdVfioMode";
/// `nvidia.com/gpu.workload.config` names another workload than the profile serves.
pub const WORKLOAD_MISMATCH: &str = "WorkloadMismatch";
/// vm-passthrough / vm-vgpu node: no sandbox device plugin resource is advertised.
pub const SANDBOX_RESOURCE_MISSING: &str = "SandboxResourceMissing";
/// Ready: sandbox device plugin resources cover what the profile needs.
pub const SANDBOX_RESOURCES: &str = "SandboxResources";
/// Ready: a layer that only applies to container workloads, on a VM-workload node.
pub const NOT_APPLICABLE_TO_WORKLOAD: &str = "NotApplicableToWorkload";
/// vGPU guest whose driver branch differs from the host's vGPU manager branch.
pub const VGPU_BRANCH_MISMATCH: &str = "VgpuBranchMismatch";
/// GpuReady reason once a node is not ready for longer than `notReadyDeadline`.
pub const NOT_READY_DEADLINE_EXCEEDED: &str = "NotReadyDeadlineExceeded";
