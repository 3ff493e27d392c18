//! gpuready's API surface: the GpuNodeProfile custom resource, the keys gpuready
//! writes onto Nodes, and CRD generation. No client, no I/O.

pub mod compute_domain;
pub mod condition;
pub mod crd;
mod crd_schemas;
pub mod device_taint_rule;
pub mod dra;
pub mod keys;
pub mod layer;
pub mod nfd;
pub mod probe;
pub mod profile;
mod resource;
pub mod resource_claim;
pub mod selector_schema;
pub mod validate;

pub use layer::Layer;
pub use profile::{
    BrokenWhen, ComputeDomainCliquePolicy, DeadlineStart, DeviceEscalation, DeviceGating,
    DeviceTaintEffect, Escalation, EvidenceMode, ExtendedResourcePods, ExternalCondition,
    ExternalPreset, ExternalSignals, FabricExpectation, Family, GpuExpectation, GpuNodeProfile,
    GpuNodeProfileSpec, GpuNodeProfileStatus, ImexMode, LifecycleNode, MaintenanceRules,
    MigExpectation, Mode, NeighbourSystem, NoExecuteBudget, NotReadyDeadline, NotReadyNode,
    ProbeExpectation, ProbePolicy, SystemCount, TaintEffect, TaintPolicy, TaintSpec, TimeToReady,
    Workload,
};
