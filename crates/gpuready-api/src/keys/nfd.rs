//! Labels published by Node Feature Discovery.

pub const LABEL_PREFIX: &str = "feature.node.kubernetes.io/";
pub const PCI_PREFIX: &str = "feature.node.kubernetes.io/pci-";
pub const PCI_SUFFIX: &str = ".present";
pub const NVIDIA_VENDOR: &str = "10de";
/// Label naming the node a NodeFeature object describes.
pub const NODE_NAME_LABEL: &str = "nfd.node.kubernetes.io/node-name";
/// NodeFeature instance set of PCI devices (attributes `class`, `vendor`, `device`).
pub const PCI_DEVICE_FEATURE: &str = "pci.device";
/// PCI classes of GPUs: VGA-compatible (0300) and 3D controller (0302).
pub const GPU_PCI_CLASSES: [&str; 2] = ["0300", "0302"];
