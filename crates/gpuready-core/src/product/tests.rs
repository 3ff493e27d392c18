//! Tests of `product`, in their own file beside it.

use super::*;

#[test]
fn nvml_names_take_gfd_spelling() {
    assert_eq!(from_nvml_name("NVIDIA H200"), "NVIDIA-H200");
    assert_eq!(
        from_nvml_name("NVIDIA  GeForce RTX 4070 Ti (SUPER)"),
        "NVIDIA-GeForce-RTX-4070-Ti-SUPER"
    );
    assert!(matches("NVIDIA-H200", &from_nvml_name("NVIDIA H200")));
}

#[test]
fn prefix_and_suffix_tolerance() {
    assert!(matches("NVIDIA-GeForce-RTX-3090", "GeForce-RTX-3090"));
    assert!(matches("GeForce-RTX-3090", "NVIDIA-GeForce-RTX-3090"));
    assert!(matches(
        "NVIDIA-A100-SXM4-40GB",
        "NVIDIA-A100-SXM4-40GB-SHARED"
    ));
    assert!(matches(
        "nvidia-geforce-rtx-3090",
        "NVIDIA-GeForce-RTX-3090"
    ));
    assert!(matches("Quadro-M5000", "Quadro-M5000"));
    assert!(!matches(
        "NVIDIA-GeForce-RTX-3090",
        "NVIDIA-GeForce-RTX-3090-Ti"
    ));
}

#[test]
fn globs() {
    assert!(matches("*RTX-30*", "NVIDIA-GeForce-RTX-3050"));
    assert!(matches("NVIDIA-H1??-*", "NVIDIA-H100-80GB-HBM3"));
    assert!(matches("H100*", "NVIDIA-H100-80GB-HBM3"));
    assert!(matches(
        "*-MIG-1g.10gb",
        "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    ));
    assert!(!matches("*RTX-40*", "NVIDIA-GeForce-RTX-3050"));
    assert!(!matches("[", "anything"));
}
