//! Tests of `device_taint_rule`, in their own file beside it.

use super::*;

#[test]
fn names_are_readable_and_bounded() {
    assert_eq!(
        rule_name("gpu.nvidia.com", "gpu-h200-01", "gpu-3"),
        "gpuready-gpu-h200-01-gpu-3"
    );
    let long = "n".repeat(250);
    let a = rule_name("gpu.nvidia.com", &long, "gpu-3");
    let b = rule_name("gpu.nvidia.com", &long, "gpu-4");
    assert!(a.len() <= 253 && b.len() <= 253);
    assert_ne!(a, b);
    assert!(a.starts_with(keys::device_rules::NAME_PREFIX));
}

#[test]
fn ownership_needs_prefix_and_label() {
    let mut r = DeviceTaintRule {
        metadata: owned_metadata("n", "p", "FatalXid"),
        ..DeviceTaintRule::default()
    };
    r.metadata.name = Some("gpuready-n-gpu-0".into());
    assert!(is_owned(&r));
    assert_eq!(node_of(&r), Some("n"));
    let mut foreign = r.clone();
    foreign.metadata.name = Some("admin-gpu-0".into());
    assert!(!is_owned(&foreign), "label alone is not ownership");
    let mut unlabelled = r.clone();
    unlabelled.metadata.labels = None;
    assert!(!is_owned(&unlabelled), "prefix alone is not ownership");
}
