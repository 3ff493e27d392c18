//! Which profile governs a node, as `assess` reports it: exactly one, none, a
//! conflict, or profiles being deleted (ignored).

use crate::common;

use common::*;
use gpuready_api::keys::nvidia;
use gpuready_core::GovernanceKind;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn deleting(name: &str, spec: &str) -> gpuready_api::GpuNodeProfile {
    let mut p = profile(name, spec);
    p.metadata.deletion_timestamp = Some(Time(at(-30)));
    p
}

#[test]
fn one_matching_profile_governs_and_the_others_do_not_matter() {
    let node = NodeBuilder::gpu("n").build();
    let other = profile(
        "other",
        "nodeSelector: {matchLabels: {gpu-pool: elsewhere}}",
    );
    let a = assess_with(&node, &[other, profile("mine", "")], &opts());
    assert_eq!(a.governance, GovernanceKind::Governed);
    assert_eq!(a.profile.as_deref(), Some("mine"));
    assert_eq!(a.ready, Some(true));
    assert_eq!(a.reason, "Ready");
    assert_eq!(a.layers.len(), 7);
    assert!(a.conflicting_profiles.is_empty());
}

#[test]
fn a_node_no_profile_selects_is_ungoverned() {
    let node = NodeBuilder::gpu("n").label("gpu-pool", "other").build();
    let a = assess_with(&node, &[profile("p", "")], &opts());
    assert_eq!(a.governance, GovernanceKind::Ungoverned);
    assert_eq!((a.profile.as_deref(), a.ready), (None, None));
    assert_eq!(a.reason, "Ungoverned");
    assert!(a.layers.is_empty());
    assert!(a.changes.is_empty());
}

#[test]
fn several_matching_profiles_are_a_conflict_listed_by_name() {
    let node = NodeBuilder::gpu("n").build();
    let by_expression = profile(
        "b-expr",
        "nodeSelector: {matchExpressions: [{key: gpu-pool, operator: In, values: [test, other]}]}",
    );
    let by_existence = profile(
        "c-exists",
        &format!(
            "nodeSelector: {{matchExpressions: [{{key: {}, operator: Exists}}]}}",
            nvidia::GPU_PRODUCT
        ),
    );
    let a = assess_with(
        &node,
        &[by_existence, profile("a", ""), by_expression],
        &opts(),
    );
    assert_eq!(a.governance, GovernanceKind::Conflict);
    assert_eq!(a.conflicting_profiles, ["a", "b-expr", "c-exists"]);
    assert_eq!((a.profile.as_deref(), a.ready), (None, Some(false)));
    assert_eq!(a.reason, "Conflict");
    assert!(a.message.contains("a, b-expr, c-exists"), "{}", a.message);
    assert!(a.layers.is_empty());
}

#[test]
fn profiles_being_deleted_are_ignored() {
    let node = NodeBuilder::gpu("n").build();
    // Alone: the node is released.
    let a = assess_with(&node, &[deleting("old", "")], &opts());
    assert_eq!(a.governance, GovernanceKind::Ungoverned);
    // Beside a live profile: no conflict, the live one governs.
    let a = assess_with(&node, &[deleting("old", ""), profile("new", "")], &opts());
    assert_eq!(a.governance, GovernanceKind::Governed);
    assert_eq!(a.profile.as_deref(), Some("new"));
    // Two live ones still conflict, whatever else is being deleted.
    let a = assess_with(
        &node,
        &[deleting("old", ""), profile("x", ""), profile("y", "")],
        &opts(),
    );
    assert_eq!(a.conflicting_profiles, ["x", "y"]);
}

#[test]
fn the_assessment_carries_observe_and_the_recheck_time() {
    let node = NodeBuilder::gpu("n").build();
    let a = assess_with(
        &node,
        &[profile("p", "mode: Observe\nmaxLabelAgeSeconds: 600")],
        &opts(),
    );
    assert!(a.observe);
    assert_eq!(a.recheck_after_seconds, Some(600 - 45 + 1));
    let a = assess_with(&node, &[profile("p", "")], &opts());
    assert!(!a.observe);
    assert_eq!(a.recheck_after_seconds, Some(3600 - 45 + 1));
}

#[test]
fn the_assessment_reason_is_the_lowest_failing_gating_layer() {
    let node = NodeBuilder::gtx1070("n").driver("535.183.01").gpus(1, 0);
    let a = assess_with(
        &node.build(),
        &[profile(
            "p",
            "minDriverVersion: 570.124.06\ncudaVersion: '12.8'",
        )],
        &opts(),
    );
    assert_eq!(a.reason, "DriverTooOld");
    // The message lists every failing gating layer, bottom-up.
    let driver = a.message.find("Driver:").expect("Driver in message");
    let plugin = a
        .message
        .find("DevicePlugin:")
        .expect("DevicePlugin in message");
    let compat = a
        .message
        .find("Compatibility:")
        .expect("Compatibility in message");
    assert!(driver < plugin && plugin < compat, "{}", a.message);
}

/// gpuready's own labels never take part in selection: a selector that reads
/// them (stored by an older CRD) sees the node as it would be without them, so
/// gpuready's write of `gpuready.io/ready` cannot flip the node in and out of
/// the profile (the write storm of issue 24).
#[test]
fn labels_gpuready_wrote_do_not_take_part_in_selection() {
    // Built without validation: the CRD refuses these selectors now.
    let unchecked = |name: &str, spec: &str| {
        gpuready_api::GpuNodeProfile::new(
            name,
            serde_yaml_ng::from_str(spec).expect("test profile YAML parses"),
        )
    };
    let storm = unchecked(
        "storm",
        "nodeSelector: {matchLabels: {gpu-pool: test}, matchExpressions: [{key: gpuready.io/ready, operator: NotIn, values: [\"true\"]}]}",
    );
    let before = NodeBuilder::gpu("n").build();
    let after = NodeBuilder::gpu("n")
        .label("gpuready.io/ready", "true")
        .label("gpuready.io/profile", "storm")
        .build();
    for node in [&before, &after] {
        let a = assess_with(node, std::slice::from_ref(&storm), &opts());
        assert_eq!(a.governance, GovernanceKind::Governed, "{:?}", a.reason);
    }
    let selects_ready = unchecked(
        "ready-only",
        "nodeSelector: {matchLabels: {gpuready.io/ready: \"true\"}}",
    );
    let a = assess_with(&after, &[selects_ready], &opts());
    assert_eq!(a.governance, GovernanceKind::Ungoverned);
    // A readyLabels key another profile set (listed in gpuready.io/labels).
    let tiered = NodeBuilder::gpu("n")
        .label("example.com/tier", "gold")
        .annotate("gpuready.io/labels", "example.com/tier")
        .build();
    let by_tier = profile(
        "by-tier",
        "nodeSelector: {matchLabels: {example.com/tier: gold}}",
    );
    let a = assess_with(&tiered, &[by_tier, profile("base", "")], &opts());
    assert_eq!(a.governance, GovernanceKind::Governed);
    assert_eq!(a.profile.as_deref(), Some("base"));
}
