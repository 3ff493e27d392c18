//! Tests of `neighbours`, in their own file beside it.

use super::*;

#[test]
fn every_system_has_a_row_and_every_row_its_words() {
    for system in NeighbourSystem::ALL {
        assert!(KNOWN.iter().any(|n| n.system == system), "{system:?}");
    }
    for n in KNOWN {
        assert!(!n.doing.is_empty() && !n.releases.is_empty(), "{n:?}");
    }
    // Every state NVSentinel's state machine has is worded.
    for v in lc::NVSENTINEL_STATES {
        assert!(NVSENTINEL_STATES.iter().any(|s| s.value == v), "{v}");
    }
    assert_eq!(
        upgrade_cordon("drain-required").system,
        NeighbourSystem::GpuOperator
    );
    assert!(!upgrade_cordon("drain-required").doing.is_empty());
}

#[test]
fn neighbour_annotations_are_the_cordon_marks() {
    assert!(is_neighbour_annotation(
        lc::NODEWRIGHT_RUNTIME_REQUIRED_CORDON
    ));
    assert!(is_neighbour_annotation(
        "nodewright.nvidia.com/cordon_gpu-tuning"
    ));
    assert!(is_neighbour_annotation(
        "skyhook.nvidia.com/cordon_gpu-tuning"
    ));
    assert!(!is_neighbour_annotation(
        "nodewright.nvidia.com/status_gpu-tuning"
    ));
    assert!(!is_neighbour_annotation("example.com/note"));
}
