//! gpuready's API surface: the GpuNodeProfile custom resource, the keys gpuready
//! writes onto Nodes, and CRD generation. No client, no I/O.

pub mod crd;
pub mod keys;
pub mod layer;
pub mod nfd;
pub mod probe;
pub mod profile;
pub mod validate;

pub use layer::Layer;
pub use profile::{
    Family, GpuExpectation, GpuNodeProfile, GpuNodeProfileSpec, GpuNodeProfileStatus, Mode,
    NotReadyNode, ProbeExpectation, ProbePolicy, TaintEffect, TaintPolicy, TaintSpec,
};
