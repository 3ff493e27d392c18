//! How a profile's node counts map to its `Ready` condition, the reason
//! `kubectl get gnp` shows in its Status column: conflicts have their own
//! reason, and an Observe (report-only) profile is done (Ready=True) while it
//! reports not-ready nodes, so kstatus and Flux health checks read it Current.

use crate::common;

use common::*;
use gpuready_api::keys::{self, reasons};
use gpuready_core::NodeAssessment;
use gpuready_core::status::{ExtraConditions, profile_status};

fn ready_condition(nodes: &[&NodeAssessment]) -> (String, String, String) {
    let status = profile_status(
        "p",
        Some(1),
        nodes,
        &ExtraConditions::default(),
        None,
        now(),
    );
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == keys::CONDITION_READY)
        .expect("Ready condition");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

const STRICT: &str = "nodeSelector: {matchLabels: {gpu-pool: test}}\ngpu: {minMemoryMib: 48000}";

#[test]
fn enforce_profile_with_not_ready_nodes_is_not_ready() {
    let p = profile("p", STRICT);
    let a = assess_with(&NodeBuilder::gpu("n1").build(), &[p], &opts());
    assert_eq!(a.ready, Some(false));
    let (status, reason, _) = ready_condition(&[&a]);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", reasons::NODES_NOT_READY)
    );
}

#[test]
fn observe_profile_with_not_ready_nodes_is_ready_and_says_why() {
    let p = profile("p", &format!("{STRICT}\nmode: Observe"));
    let ok = profile(
        "p",
        "nodeSelector: {matchLabels: {gpu-pool: test}}\nmode: Observe",
    );
    let bad = assess_with(&NodeBuilder::gpu("n1").build(), &[p], &opts());
    let good = assess_with(&NodeBuilder::gpu("n2").build(), &[ok], &opts());
    assert_eq!(bad.ready, Some(false));
    let (status, reason, message) = ready_condition(&[&bad, &good]);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", reasons::OBSERVED_NODES_NOT_READY)
    );
    assert!(message.contains("1/2 node(s) not ready: n1"), "{message}");
    // All ready: the plain Ready reason, Observe or not.
    let (status, reason, _) = ready_condition(&[&good]);
    assert_eq!((status.as_str(), reason.as_str()), ("True", reasons::READY));
}

#[test]
fn a_conflict_has_its_own_reason_not_nodes_not_ready() {
    let a = profile("a", "nodeSelector: {matchLabels: {gpu-pool: test}}");
    let b = profile("b", "nodeSelector: {matchLabels: {gpu-pool: test}}");
    let conflict = assess_with(&NodeBuilder::gpu("n1").build(), &[a, b], &opts());
    assert_eq!(conflict.governance, gpuready_core::GovernanceKind::Conflict);
    let (status, reason, message) = ready_condition(&[&conflict]);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", reasons::CONFLICT)
    );
    assert!(message.contains("n1"), "{message}");
}
