//! Labels published by GPU Feature Discovery, the GPU operator and the device plugin.

pub const GPU_PRESENT: &str = "nvidia.com/gpu.present";
pub const GPU_PRODUCT: &str = "nvidia.com/gpu.product";
pub const GPU_MEMORY: &str = "nvidia.com/gpu.memory";
pub const GPU_COUNT: &str = "nvidia.com/gpu.count";
pub const GPU_FAMILY: &str = "nvidia.com/gpu.family";
/// GFD: the NVLink clique of the node's fabric-attached GPUs,
/// `<cluster UUID>.<clique ID>` (only when they all agree).
pub const GPU_CLIQUE: &str = "nvidia.com/gpu.clique";
pub const GPU_COMPUTE_MAJOR: &str = "nvidia.com/gpu.compute.major";
pub const GPU_COMPUTE_MINOR: &str = "nvidia.com/gpu.compute.minor";
pub const GPU_REPLICAS: &str = "nvidia.com/gpu.replicas";
pub const GFD_TIMESTAMP: &str = "nvidia.com/gfd.timestamp";
pub const MIG_STRATEGY: &str = "nvidia.com/mig.strategy";
pub const DRIVER_FULL: &str = "nvidia.com/cuda.driver-version.full";
pub const DRIVER_MAJOR: &str = "nvidia.com/cuda.driver-version.major";
pub const DRIVER_MINOR: &str = "nvidia.com/cuda.driver-version.minor";
pub const DRIVER_REVISION: &str = "nvidia.com/cuda.driver-version.revision";
pub const DRIVER_MAJOR_OLD: &str = "nvidia.com/cuda.driver.major";
pub const DRIVER_MINOR_OLD: &str = "nvidia.com/cuda.driver.minor";
pub const DRIVER_REV_OLD: &str = "nvidia.com/cuda.driver.rev";
pub const RUNTIME_FULL: &str = "nvidia.com/cuda.runtime-version.full";
pub const RUNTIME_MAJOR: &str = "nvidia.com/cuda.runtime-version.major";
pub const RUNTIME_MINOR: &str = "nvidia.com/cuda.runtime-version.minor";
pub const RUNTIME_MAJOR_OLD: &str = "nvidia.com/cuda.runtime.major";
pub const RUNTIME_MINOR_OLD: &str = "nvidia.com/cuda.runtime.minor";
/// Default extended resource of the device plugin.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// The GPU operator's per-node workload: `container`, `vm-passthrough`, `vm-vgpu`.
pub const WORKLOAD_CONFIG: &str = "nvidia.com/gpu.workload.config";
/// GFD inside a vGPU guest: `true` when the GPU is a vGPU.
pub const VGPU_PRESENT: &str = "nvidia.com/vgpu.present";
/// GFD inside a vGPU guest: the host vGPU manager's branch, e.g. `r550_40`.
pub const VGPU_HOST_BRANCH: &str = "nvidia.com/vgpu.host-driver-branch";
/// GFD inside a vGPU guest: the host vGPU manager's version, e.g. `550.54.16`.
pub const VGPU_HOST_VERSION: &str = "nvidia.com/vgpu.host-driver-version";
/// Prefix of MIG extended resources under the `mixed` strategy.
pub const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";
/// mig-manager: the MIG configuration the node should have (`all-1g.18gb`).
pub const MIG_CONFIG: &str = "nvidia.com/mig.config";
/// mig-manager: `pending`, `rebooting`, `success` or `failed`.
pub const MIG_CONFIG_STATE: &str = "nvidia.com/mig.config.state";
/// GFD, mixed strategy: `nvidia.com/mig-<profile>.count` (`+` written `.`).
pub const MIG_LABEL_PREFIX: &str = "nvidia.com/mig-";
pub const MIG_COUNT_SUFFIX: &str = ".count";
