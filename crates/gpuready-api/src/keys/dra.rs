//! The NVIDIA DRA driver's ResourceSlices (`resource.k8s.io/v1`).

/// `spec.driver` of the GPU kubelet plugin.
pub const DRIVER: &str = "gpu.nvidia.com";
pub const API_GROUP: &str = "resource.k8s.io";
pub const API_VERSION: &str = "v1";
pub const KIND: &str = "ResourceSlice";
pub const PLURAL: &str = "resourceslices";
pub const ATTR_TYPE: &str = "type";
pub const ATTR_UUID: &str = "uuid";
pub const ATTR_PARENT_UUID: &str = "parentUUID";
pub const ATTR_PRODUCT: &str = "productName";
pub const ATTR_ARCHITECTURE: &str = "architecture";
pub const ATTR_COMPUTE: &str = "cudaComputeCapability";
pub const ATTR_DRIVER: &str = "driverVersion";
pub const ATTR_CUDA_DRIVER: &str = "cudaDriverVersion";
pub const ATTR_PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";
/// Kubernetes' standard NUMA attribute (stable in 1.37): an `int`, or an
/// `ints` list when the driver's `DRAListTypeAttributes` gate is on.
pub const ATTR_NUMA_NODE: &str = "resource.kubernetes.io/numaNode";
/// The DRA driver v0.4.x's own NUMA attribute on VFIO devices (an `int`),
/// before it moved to [`ATTR_NUMA_NODE`].
pub const ATTR_NUMA_LEGACY: &str = "numa";
/// MIG devices: the nvidia-smi profile name, e.g. `1g.18gb`.
pub const ATTR_MIG_PROFILE: &str = "profile";
/// The driver's health monitor: an XID (value = the XID; `NoSchedule`
/// when fatal, `None` for the ignored application XIDs).
pub const TAINT_XID: &str = "gpu.nvidia.com/xid";
/// The driver's health monitor: the GPU fell off the bus (`NoSchedule`, on every device).
pub const TAINT_GPU_LOST: &str = "gpu.nvidia.com/gpu-lost";
/// The driver's health monitor could not register for the device's events (`None`).
pub const TAINT_UNMONITORED: &str = "gpu.nvidia.com/unmonitored";
pub const CAPACITY_MEMORY: &str = "memory";
pub const TYPE_GPU: &str = "gpu";
pub const TYPE_MIG: &str = "mig";
pub const TYPE_VFIO: &str = "vfio";
/// `ResourceClaim`: read for the claims the scheduler makes for DRA-backed
/// extended resources (KEP-5004), which the device taint eviction
/// controller does not evict (kubernetes #141290).
pub const CLAIM_KIND: &str = "ResourceClaim";
pub const CLAIM_PLURAL: &str = "resourceclaims";
/// On the claim the scheduler makes for a pod's DRA-backed extended
/// resources; its one valid value is `"true"` (k8s.io/api `resource/v1`
/// `ExtendedResourceClaimAnnotation`).
pub const ANNOTATION_EXTENDED_RESOURCE_CLAIM: &str =
    "resource.kubernetes.io/extended-resource-claim";
