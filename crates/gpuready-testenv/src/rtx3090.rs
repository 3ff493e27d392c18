//! The healthy RTX 3090 node the tests' fixtures and the benchmark's fleet both
//! start from, as GPU Feature Discovery and NFD label it: one copy, so a test
//! and the benchmark cannot drift apart on the card they judge.
//!
//! Here, in the dev-only crate, because it is test data (a driver and a card
//! picked for fixtures), not product knowledge the engine should ship.

use std::collections::BTreeMap;

/// `nvidia.com/gpu.product`, as GFD spells the card.
pub const PRODUCT: &str = "NVIDIA-GeForce-RTX-3090";
/// NVML's name of the card: what the probe and the DRA driver report.
pub const NVML_NAME: &str = "NVIDIA GeForce RTX 3090";
/// `nvidia.com/gpu.memory`, in MiB.
pub const MEMORY_MIB: u32 = 24576;
/// The NVIDIA driver (`nvidia.com/cuda.driver-version.full`).
pub const DRIVER: &str = "580.178.04";
/// The CUDA version the driver supports (`nvidia.com/cuda.runtime-version.full`).
pub const CUDA: &str = "13.0";

/// The labels of one healthy RTX 3090 (Ampere, compute 8.6) on [`DRIVER`]
/// with [`CUDA`], one GPU, without `nvidia.com/gfd.timestamp`: each caller
/// stamps its own time.
pub const LABELS: [(&str, &str); 9] = [
    ("nvidia.com/gpu.product", PRODUCT),
    ("nvidia.com/gpu.memory", "24576"),
    ("nvidia.com/gpu.compute.major", "8"),
    ("nvidia.com/gpu.compute.minor", "6"),
    ("nvidia.com/gpu.family", "ampere"),
    ("nvidia.com/gpu.count", "1"),
    ("nvidia.com/cuda.driver-version.full", DRIVER),
    ("nvidia.com/cuda.runtime-version.full", CUDA),
    ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
];

/// [`LABELS`] with `nvidia.com/gfd.timestamp` at `unix_seconds`, as a Node's
/// label map holds them.
pub fn labels_at(unix_seconds: i64) -> BTreeMap<String, String> {
    LABELS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .chain([(
            "nvidia.com/gfd.timestamp".to_owned(),
            unix_seconds.to_string(),
        )])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_label_is_the_memory() {
        let labels = labels_at(1);
        assert_eq!(labels["nvidia.com/gpu.memory"], MEMORY_MIB.to_string());
        assert_eq!(labels["nvidia.com/gfd.timestamp"], "1");
        assert_eq!(labels.len(), LABELS.len() + 1);
    }
}
