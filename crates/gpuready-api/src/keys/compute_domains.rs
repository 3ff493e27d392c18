//! The NVIDIA DRA driver's ComputeDomainCliques (`compute_domain.rs`).

pub const API_GROUP: &str = "resource.nvidia.com";
pub const API_VERSION: &str = "v1beta1";
pub const KIND: &str = "ComputeDomainClique";
pub const PLURAL: &str = "computedomaincliques";
/// The ComputeDomain's UID, on each clique object.
pub const LABEL_COMPUTE_DOMAIN: &str = "resource.nvidia.com/computeDomain";
/// A daemon's `status` while its IMEX daemon can broker memory exchanges.
pub const STATUS_READY: &str = "Ready";
