//! The readiness layers, bottom-up: the order in which a person debugs a GPU node.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One layer of the GPU stack. Declaration order is evaluation order (bottom-up).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum Layer {
    /// kubelet reports the node Ready.
    Node,
    /// An NVIDIA PCI device is visible (NFD PCI labels or `nvidia.com/gpu.present`).
    Hardware,
    /// The driver version is known and at least the profile's minimum.
    Driver,
    /// The device plugin advertises enough allocatable GPUs.
    DevicePlugin,
    /// GPU Feature Discovery labels are present and fresh.
    FeatureDiscovery,
    /// The GPU matches the profile: product, memory, compute capability, family, count.
    Profile,
    /// The declared CUDA version fits the card and the driver.
    Compatibility,
    /// What `gpuready probe` read from the GPUs through NVML: initialised, every
    /// GPU there, no uncorrectable memory errors or fatal XIDs, labels not
    /// contradicted. Judged only when a report exists or the profile requires one.
    Health,
    /// Multi-node NVLink (`spec.fabric`): the node sits in the expected NVLink
    /// clique (`nvidia.com/gpu.clique`), every GPU's fabric registration
    /// completed (the probe's NVML fabric state), the driver fits IMEX.
    /// Judged only when the profile asks for it.
    Fabric,
    /// Other judges' verdicts the profile names (`spec.external`): a cloud
    /// provider's GPU health agent, node-problem-detector checks, as Node
    /// conditions. Judged only when the profile names some.
    External,
}

impl Layer {
    /// The layers judged on every governed node, bottom-up. Health is not among
    /// them: it is judged only where a probe report exists or the profile
    /// requires one (see [`Layer::OPTIONAL`]), and always comes after these.
    pub const ALL: [Layer; 7] = [
        Layer::Node,
        Layer::Hardware,
        Layer::Driver,
        Layer::DevicePlugin,
        Layer::FeatureDiscovery,
        Layer::Profile,
        Layer::Compatibility,
    ];

    /// Layers judged only when their evidence exists or the profile asks for
    /// them, after [`Layer::ALL`].
    pub const OPTIONAL: [Layer; 3] = [Layer::Health, Layer::Fabric, Layer::External];

    /// Every layer, bottom-up: [`Layer::ALL`] then [`Layer::OPTIONAL`].
    pub fn every() -> impl Iterator<Item = Layer> {
        Layer::ALL.into_iter().chain(Layer::OPTIONAL)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Node => "Node",
            Layer::Hardware => "Hardware",
            Layer::Driver => "Driver",
            Layer::DevicePlugin => "DevicePlugin",
            Layer::FeatureDiscovery => "FeatureDiscovery",
            Layer::Profile => "Profile",
            Layer::Compatibility => "Compatibility",
            Layer::Health => "Health",
            Layer::Fabric => "Fabric",
            Layer::External => "External",
        }
    }

    /// Condition type used for this layer on a GpuNodeProfile (and, when enabled, on Nodes).
    pub fn condition_type(self) -> String {
        format!("{}{}", crate::keys::CONDITION_LAYER_PREFIX, self.as_str())
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
