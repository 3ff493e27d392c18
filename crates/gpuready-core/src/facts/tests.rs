//! Tests of `facts`, in their own file beside it.

use super::*;

#[test]
fn every_condition_type_gpuready_writes_is_its_own() {
    assert!(is_own_condition(keys::CONDITION_GPU_READY));
    assert!(is_own_condition(keys::CONDITION_PROBE_HEALTHY));
    for layer in gpuready_api::Layer::every() {
        assert!(is_own_condition(&layer.condition_type()), "{layer}");
    }
    for other in [
        "Ready",
        "GpuReadyForTraining",
        "GpuReadyDrive",
        "GpuReadyDriverX",
        "gpureadyDriver",
        "Driver",
        "GpuReadyGpuReadyDriver",
    ] {
        assert!(!is_own_condition(other), "{other}");
    }
}

#[test]
fn pci_label_forms() {
    assert!(is_nvidia_pci_label(
        "feature.node.kubernetes.io/pci-10de.present"
    ));
    assert!(is_nvidia_pci_label(
        "feature.node.kubernetes.io/pci-0300_10de.present"
    ));
    assert!(is_nvidia_pci_label(
        "feature.node.kubernetes.io/pci-0302_10de.present"
    ));
    assert!(is_nvidia_pci_label(
        "feature.node.kubernetes.io/pci-0302_10de_2335.present"
    ));
    assert!(!is_nvidia_pci_label(
        "feature.node.kubernetes.io/pci-0300_1002.present"
    ));
    assert!(!is_nvidia_pci_label(
        "feature.node.kubernetes.io/pci-10de.sriov.capable"
    ));
    assert!(!is_nvidia_pci_label(
        "feature.node.kubernetes.io/pci-0300_8086_10de.present"
    ));
    // Multi-byte characters where a class code would be never panic.
    for key in [
        "feature.node.kubernetes.io/pci-aé1_10de.present",
        "feature.node.kubernetes.io/pci-é_10de.present",
        "feature.node.kubernetes.io/pci-0é0_10de.present",
        "feature.node.kubernetes.io/pci-😀_10de.present",
    ] {
        assert!(!is_nvidia_pci_label(key), "{key}");
    }
}
