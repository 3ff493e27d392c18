//! What gpuready writes to a node: taints (foreign ones untouched, in place),
//! labels and conditions, no-op reconciles, Observe, UntilFirstReady, the safety
//! brake, heartbeats, release and taint changes. Each "second reconcile" applies the
//! first plan with `apply` (the in-memory API server) and plans again.

use crate::common;

use common::*;
use gpuready_api::GpuNodeProfile;
use gpuready_api::keys::ANNOTATION_TAINT;
use gpuready_api::keys::{self, nvidia};
use gpuready_core::GovernanceKind;
use gpuready_core::TaintChangeKind;
use gpuready_core::plan::PlanOptions;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const KUBELET_NOT_READY: (&str, &str, &str) = ("node.kubernetes.io/not-ready", "", "NoSchedule");
const KARPENTER: (&str, &str, &str) = ("karpenter.sh/disrupted", "", "NoSchedule");
const DEDICATED: (&str, &str, &str) = ("dedicated", "gpu", "NoSchedule");
const OURS: &str = "readiness.k8s.io/gpuready-not-ready=true:NoSchedule";

fn foreign() -> Vec<String> {
    [KUBELET_NOT_READY, KARPENTER, DEDICATED]
        .iter()
        .map(|(k, v, e)| format!("{k}={v}:{e}"))
        .collect()
}

/// A GPU node carrying the three foreign taints, optionally with gpuready's
/// taint (and its annotation) between them.
fn with_foreign_taints(node: NodeBuilder, ours: bool) -> NodeBuilder {
    let (k, v, e) = KUBELET_NOT_READY;
    let mut node = node.taint(k, v, e);
    if ours {
        node = node
            .taint(keys::DEFAULT_TAINT_KEY, "true", "NoSchedule")
            .annotate(
                ANNOTATION_TAINT,
                "readiness.k8s.io/gpuready-not-ready:NoSchedule",
            );
    }
    let (k, v, e) = KARPENTER;
    let (k2, v2, e2) = DEDICATED;
    node.taint(k, v, e).taint(k2, v2, e2)
}

fn ready_node() -> NodeBuilder {
    NodeBuilder::gpu("n")
}

fn not_ready_node() -> NodeBuilder {
    NodeBuilder::gpu("n").gpus(1, 0)
}

fn without_ours(taints: &[String]) -> Vec<String> {
    taints
        .iter()
        .filter(|t| !t.starts_with("gpuready.io/") && !t.starts_with(keys::DEFAULT_TAINT_KEY))
        .cloned()
        .collect()
}

fn one(p: GpuNodeProfile) -> Vec<GpuNodeProfile> {
    vec![p]
}

/// Reconciles until nothing is left to write (at most `rounds` times) and
/// returns the settled node.
fn settle(node: Node, profiles: &[GpuNodeProfile], opts: &PlanOptions) -> Node {
    let mut node = node;
    for _ in 0..3 {
        let a = assess_with(&node, profiles, opts);
        if a.changes.is_empty() {
            return node;
        }
        apply(&mut node, &a.changes);
    }
    panic!("still changing after 3 reconciles");
}

// ---- Foreign taints ----

#[test]
fn foreign_taints_stay_in_place_in_every_case() {
    let policies = ["taintPolicy: Continuous", "taintPolicy: UntilFirstReady"];
    for policy in policies {
        for ready in [true, false] {
            for ours in [true, false] {
                for released in [true, false] {
                    for brake in [true, false] {
                        let base = if ready {
                            ready_node()
                        } else {
                            not_ready_node()
                        };
                        let mut node = with_foreign_taints(base, ours);
                        if released {
                            node = node.annotate(keys::ANNOTATION_RELEASED, "2026-11-01T00:00:00Z");
                        }
                        let node = node.build();
                        let opts = PlanOptions {
                            hold_new_taints: brake,
                            write_refused: false,
                            ..opts()
                        };
                        let case = format!(
                            "{policy}, ready={ready}, ours={ours}, released={released}, brake={brake}"
                        );
                        for profiles in [
                            one(profile("p", policy)),
                            vec![], // ungoverned: release
                            vec![profile("p", policy), profile("q", "")], // conflict
                        ] {
                            let a = assess_with(&node, &profiles, &opts);
                            if let Some(t) = &a.changes.taint {
                                assert_eq!(
                                    without_ours(&taint_strings(&t.taints)),
                                    foreign(),
                                    "{case}, {:?}",
                                    a.governance
                                );
                            }
                            let mut after = node.clone();
                            apply(&mut after, &a.changes);
                            assert_eq!(without_ours(&node_taints(&after)), foreign(), "{case}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn gpuready_taint_is_added_after_foreign_ones_and_removed_from_between_them() {
    let p = one(profile("p", ""));
    let a = assess_with(
        &with_foreign_taints(not_ready_node(), false).build(),
        &p,
        &opts(),
    );
    let ann = a.changes.annotations.clone().unwrap_or_default();
    let t = a.changes.taint.expect("taint change");
    assert_eq!(t.kind, TaintChangeKind::Add);
    let mut want = foreign();
    want.push(OURS.into());
    assert_eq!(taint_strings(&t.taints), want);
    assert_eq!(
        ann.get(ANNOTATION_TAINT),
        Some(&Some(
            "readiness.k8s.io/gpuready-not-ready:NoSchedule".to_owned()
        ))
    );

    let a = assess_with(
        &with_foreign_taints(ready_node(), true).build(),
        &p,
        &opts(),
    );
    let ann = a.changes.annotations.clone().unwrap_or_default();
    let t = a.changes.taint.expect("taint change");
    assert_eq!(t.kind, TaintChangeKind::Remove);
    assert_eq!(taint_strings(&t.taints), foreign());
    assert_eq!(ann.get(ANNOTATION_TAINT), Some(&None));
}

// ---- No-op reconcile ----

#[test]
fn node_in_the_desired_state_needs_no_write() {
    let cases: Vec<(&str, NodeBuilder, Vec<GpuNodeProfile>)> = vec![
        (
            "ready",
            ready_node(),
            one(profile("p", "readyLabels: {example.com/pool: a}")),
        ),
        ("not ready", not_ready_node(), one(profile("p", ""))),
        (
            "per-layer conditions",
            not_ready_node(),
            one(profile("p", "perLayerNodeConditions: true")),
        ),
        (
            "until first ready, ready",
            ready_node(),
            one(profile("p", "taintPolicy: UntilFirstReady")),
        ),
        (
            "until first ready, not ready",
            not_ready_node(),
            one(profile("p", "taintPolicy: UntilFirstReady")),
        ),
        (
            "foreign taints",
            with_foreign_taints(not_ready_node(), true),
            one(profile("p", "")),
        ),
        (
            "conflict",
            not_ready_node(),
            vec![profile("p", ""), profile("q", "")],
        ),
        (
            "ungoverned, was tainted",
            with_foreign_taints(ready_node(), true),
            vec![],
        ),
        (
            "kubelet down",
            NodeBuilder::gpu("n").kubelet_not_ready("PLEG is not healthy"),
            one(profile("p", "")),
        ),
    ];
    for (case, node, profiles) in cases {
        let (first, after, second) = reconcile_twice(&node.build(), &profiles, &opts());
        assert!(
            second.changes.is_empty(),
            "{case}: second reconcile still writes {:#?}\nfirst: {:#?}\nnode after first: {:#?}",
            second.changes,
            first.changes,
            after.metadata
        );
        assert_eq!(first.ready, second.ready, "{case}");
    }
}

#[test]
fn applied_labels_and_conditions_are_what_the_plan_said() {
    let p = one(profile(
        "p",
        "readyLabels: {example.com/pool: a}\nperLayerNodeConditions: true",
    ));
    let (first, after, _) = reconcile_twice(&ready_node().build(), &p, &opts());
    let labels = labels_of(&after);
    assert_eq!(
        labels.get(keys::LABEL_READY).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels.get(keys::LABEL_PROFILE).map(String::as_str),
        Some("p")
    );
    assert_eq!(
        labels.get("example.com/pool").map(String::as_str),
        Some("a")
    );
    let c = condition(&after, keys::CONDITION_GPU_READY).expect("GpuReady");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("True", Some("Ready"))
    );
    for layer in gpuready_api::Layer::ALL {
        let c = condition(&after, &layer.condition_type()).expect("per-layer condition");
        assert_eq!(c.status, "True", "{layer}");
    }
    assert_eq!(
        first.changes.conditions.as_ref().map(|c| c.set.len()),
        Some(gpuready_api::Layer::ALL.len() + 1)
    );
    // kubelet's condition is untouched.
    assert_eq!(
        condition(&after, "Ready").map(|c| c.status.as_str()),
        Some("True")
    );
}

#[test]
fn a_node_that_becomes_not_ready_loses_the_ready_labels() {
    let p = one(profile("p", "readyLabels: {example.com/pool: a}"));
    let node = settle(ready_node().build(), &p, &opts());
    let mut broken = node.clone();
    broken
        .status
        .as_mut()
        .and_then(|s| s.allocatable.as_mut())
        .expect("allocatable")
        .insert(
            nvidia::GPU_RESOURCE.into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("0".into()),
        );
    let (first, after, second) = reconcile_twice(&broken, &p, &opts());
    assert_eq!(first.ready, Some(false));
    let labels = labels_of(&after);
    assert_eq!(
        labels.get(keys::LABEL_READY).map(String::as_str),
        Some("false")
    );
    assert!(!labels.contains_key("example.com/pool"));
    assert_eq!(labels.get(POOL.0).map(String::as_str), Some(POOL.1));
    assert!(node_taints(&after).contains(&OURS.to_owned()));
    assert!(second.changes.is_empty());
}

// ---- Observe ----

#[test]
fn observe_mode_writes_nothing() {
    let p = one(profile("p", "mode: Observe\nperLayerNodeConditions: true"));
    for node in [
        not_ready_node(),
        ready_node(),
        with_foreign_taints(not_ready_node(), true),
        with_foreign_taints(ready_node(), true),
    ] {
        let a = assess_with(&node.build(), &p, &opts());
        assert!(a.observe);
        assert!(a.changes.is_empty(), "{:#?}", a.changes);
        assert!(!a.changes.taint_held_by_brake);
    }
}

// ---- UntilFirstReady ----

#[test]
fn until_first_ready_releases_once_and_never_retaints() {
    let p = one(profile("p", "taintPolicy: UntilFirstReady"));
    // Joins not ready: tainted.
    let node = settle(not_ready_node().build(), &p, &opts());
    assert_eq!(node_taints(&node), [OURS]);
    assert_eq!(annotation(&node, keys::ANNOTATION_RELEASED), None);

    // Becomes ready: the taint goes and the marker is written in the same request.
    let mut healthy = node.clone();
    healthy
        .status
        .as_mut()
        .and_then(|s| s.allocatable.as_mut())
        .expect("allocatable")
        .insert(
            nvidia::GPU_RESOURCE.into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
        );
    let a = assess_with(&healthy, &p, &opts());
    let t = a.changes.taint.as_ref().expect("one taint change");
    assert!(t.taints.is_empty(), "taint removed");
    // In the same merge patch as the taint list.
    let ann = a.changes.annotations.clone().unwrap_or_default();
    assert_eq!(
        ann.get(keys::ANNOTATION_RELEASED),
        Some(&Some(NOW.to_owned()))
    );
    assert_eq!(ann.get(ANNOTATION_TAINT), Some(&None));
    let released = settle(healthy, &p, &opts());
    assert_eq!(annotation(&released, keys::ANNOTATION_RELEASED), Some(NOW));
    assert!(node_taints(&released).is_empty());

    // Breaks again later: reported not ready, but never re-tainted.
    let mut broken = released.clone();
    broken
        .status
        .as_mut()
        .and_then(|s| s.allocatable.as_mut())
        .expect("allocatable")
        .insert(
            nvidia::GPU_RESOURCE.into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("0".into()),
        );
    let a = assess_with(&broken, &p, &opts());
    assert_eq!(a.ready, Some(false));
    assert!(a.changes.taint.is_none(), "{:#?}", a.changes.taint);
    assert!(!a.changes.taint_held_by_brake);
    let settled = settle(broken, &p, &opts());
    assert!(node_taints(&settled).is_empty());
    assert_eq!(
        labels_of(&settled)
            .get(keys::LABEL_READY)
            .map(String::as_str),
        Some("false")
    );
}

#[test]
fn until_first_ready_node_ready_from_the_start_gets_only_the_marker() {
    let p = one(profile("p", "taintPolicy: UntilFirstReady"));
    let node = with_foreign_taints(ready_node(), false).build();
    let a = assess_with(&node, &p, &opts());
    assert!(a.changes.taint.is_none(), "the taint list stays as it is");
    let ann = a.changes.annotations.expect("marker");
    // No labels annotation: the profile sets no readyLabels, and gpuready's
    // own verdict labels are its by name.
    assert_eq!(ann.keys().collect::<Vec<_>>(), [keys::ANNOTATION_RELEASED]);
}

#[test]
fn continuous_policy_retaints_a_node_that_breaks() {
    let p = one(profile("p", ""));
    let node = settle(ready_node().build(), &p, &opts());
    assert!(node_taints(&node).is_empty());
    let mut broken = node;
    broken
        .status
        .as_mut()
        .and_then(|s| s.conditions.as_mut())
        .expect("conditions")
        .iter_mut()
        .filter(|c| c.type_ == "Ready")
        .for_each(|c| c.status = "False".into());
    let a = assess_with(&broken, &p, &opts());
    assert_eq!(a.changes.taint.map(|t| t.kind), Some(TaintChangeKind::Add));
}

// ---- Safety brake ----

#[test]
fn safety_brake_holds_a_new_taint_but_still_reports() {
    let p = one(profile("p", ""));
    let braked = PlanOptions {
        hold_new_taints: true,
        write_refused: false,
        ..opts()
    };
    let node = with_foreign_taints(not_ready_node(), false).build();
    let a = assess_with(&node, &p, &braked);
    assert!(a.changes.taint.is_none());
    assert!(a.changes.taint_held_by_brake);
    assert_eq!(
        a.changes
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::LABEL_READY))
            .and_then(|v| v.as_deref()),
        Some("false")
    );
    assert!(a.changes.conditions.is_some());
    let (_, after, second) = reconcile_twice(&node, &p, &braked);
    assert_eq!(node_taints(&after), foreign());
    assert!(second.changes.is_empty());
    assert!(second.changes.taint_held_by_brake);
}

#[test]
fn safety_brake_keeps_an_existing_taint() {
    let p = one(profile("p", ""));
    let braked = PlanOptions {
        hold_new_taints: true,
        write_refused: false,
        ..opts()
    };
    let node = settle(
        with_foreign_taints(not_ready_node(), true).build(),
        &p,
        &opts(),
    );
    let a = assess_with(&node, &p, &braked);
    assert!(a.changes.is_empty(), "{:#?}", a.changes);
    assert!(!a.changes.taint_held_by_brake);
    assert!(node_taints(&node).contains(&OURS.to_owned()));
}

#[test]
fn safety_brake_does_not_stop_a_ready_node_from_being_released() {
    let p = one(profile("p", ""));
    let braked = PlanOptions {
        hold_new_taints: true,
        write_refused: false,
        ..opts()
    };
    let a = assess_with(
        &with_foreign_taints(ready_node(), true).build(),
        &p,
        &braked,
    );
    assert_eq!(
        a.changes.taint.map(|t| t.kind),
        Some(TaintChangeKind::Remove)
    );
}

// ---- Conditions: transition time and heartbeat ----

fn gpu_ready(node: &Node) -> NodeCondition {
    condition(node, keys::CONDITION_GPU_READY)
        .cloned()
        .expect("GpuReady condition")
}

#[test]
fn condition_keeps_its_transition_time_while_the_status_holds() {
    let p = one(profile("p", "minDriverVersion: 590.44.01"));
    let earlier = PlanOptions {
        now: at(-3600),
        ..opts()
    };
    // An hour ago: driver too old.
    let node = settle(NodeBuilder::gpu("n").build(), &p, &earlier);
    let before = gpu_ready(&node);
    assert_eq!(
        (before.status.as_str(), before.reason.as_deref()),
        ("False", Some("DriverTooOld"))
    );
    assert_eq!(before.last_transition_time, Some(Time(at(-3600))));

    // Now the device plugin fails too, under a newer driver: still False, new reason.
    let mut changed = node.clone();
    let labels = changed.metadata.labels.as_mut().expect("labels");
    labels.insert(nvidia::DRIVER_FULL.into(), "590.48.01".into());
    let changed = NodeBuilder::from_node(changed).gpus(1, 0).build();
    let (first, after, _) = reconcile_twice(&changed, &p, &opts());
    let c = gpu_ready(&after);
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("DevicesUnhealthy"))
    );
    assert_eq!(
        c.last_transition_time,
        Some(Time(at(-3600))),
        "status unchanged: transition kept"
    );
    assert_eq!(c.last_heartbeat_time, Some(Time(now())));
    assert!(first.changes.conditions.is_some());

    // Healthy: the status flips and the transition time moves.
    let healthy = NodeBuilder::from_node(after).gpus(1, 1).build();
    let (_, after, _) = reconcile_twice(&healthy, &p, &opts());
    let c = gpu_ready(&after);
    assert_eq!(c.status, "True");
    assert_eq!(c.last_transition_time, Some(Time(now())));
}

#[test]
fn condition_heartbeat_is_refreshed_after_heartbeat_seconds() {
    let p = one(profile("p", ""));
    let start = PlanOptions {
        now: at(-1000),
        heartbeat_seconds: 300,
        hold_new_taints: false,
        write_refused: false,
    };
    let node = settle(ready_node().build(), &p, &start);
    // 299 s later: nothing to write.
    let a = assess_with(
        &node,
        &p,
        &PlanOptions {
            now: at(-701),
            ..start
        },
    );
    assert!(a.changes.is_empty(), "{:#?}", a.changes);
    // 300 s later: the unchanged condition is rewritten with a new heartbeat only.
    let later = PlanOptions {
        now: at(-700),
        ..start
    };
    let a = assess_with(&node, &p, &later);
    assert!(a.changes.taint.is_none() && a.changes.labels.is_none());
    let conds = a.changes.conditions.expect("heartbeat refresh").set;
    assert_eq!(conds.len(), 1);
    assert_eq!(conds[0].last_heartbeat_time, Some(Time(at(-700))));
    assert_eq!(conds[0].last_transition_time, Some(Time(at(-1000))));
}

#[test]
fn turning_per_layer_conditions_off_removes_them() {
    let on = one(profile("p", "perLayerNodeConditions: true"));
    let node = settle(not_ready_node().build(), &on, &opts());
    assert!(condition(&node, "GpuReadyDriver").is_some());
    let off = one(profile("p", ""));
    let (first, after, second) = reconcile_twice(&node, &off, &opts());
    let c = first.changes.conditions.clone().expect("removals");
    assert!(c.set.is_empty(), "GpuReady itself is unchanged: {c:?}");
    assert_eq!(c.remove.len(), gpuready_api::Layer::ALL.len());
    assert!(condition(&after, "GpuReadyDriver").is_none());
    assert!(condition(&after, keys::CONDITION_GPU_READY).is_some());
    assert!(second.changes.is_empty());
}

// ---- Conflicts and release ----

#[test]
fn conflict_leaves_taint_and_labels_and_says_why() {
    let profiles = vec![profile("b", ""), profile("a", "")];
    let node = with_foreign_taints(not_ready_node(), true).build();
    let a = assess_with(&node, &profiles, &opts());
    assert_eq!(a.governance, GovernanceKind::Conflict);
    assert_eq!(a.conflicting_profiles, ["a", "b"]);
    assert_eq!(a.ready, Some(false));
    assert_eq!(a.reason, "Conflict");
    assert!(a.changes.taint.is_none() && a.changes.labels.is_none());
    let conds = a.changes.conditions.expect("GpuReady").set;
    assert_eq!(conds.len(), 1);
    assert_eq!(
        (conds[0].status.as_str(), conds[0].reason.as_deref()),
        ("Unknown", Some("Conflict"))
    );
    assert!(
        conds[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("a, b"))
    );
}

#[test]
fn conflict_with_a_foreign_gpu_ready_condition_settles() {
    // Another tool's condition whose type happens to start with GpuReady: gpuready
    // does not own it, cannot remove it, and must not fight over it.
    let foreign_condition = NodeCondition {
        type_: "GpuReadyForTraining".into(),
        status: "True".into(),
        reason: Some("Burnin".into()),
        message: Some("burn-in passed".into()),
        last_heartbeat_time: Some(Time(at(-60))),
        last_transition_time: Some(Time(at(-600))),
    };
    let node = not_ready_node().condition(foreign_condition).build();
    let profiles = vec![profile("a", ""), profile("b", "")];
    let (_, after, second) = reconcile_twice(&node, &profiles, &opts());
    assert!(condition(&after, keys::CONDITION_GPU_READY).is_some());
    assert!(second.changes.is_empty(), "{:#?}", second.changes);
}

#[test]
fn conflict_drops_per_layer_conditions_of_the_former_profile() {
    let node = settle(
        not_ready_node().build(),
        &one(profile("a", "perLayerNodeConditions: true")),
        &opts(),
    );
    let profiles = vec![
        profile("a", "perLayerNodeConditions: true"),
        profile("b", ""),
    ];
    let (_, after, second) = reconcile_twice(&node, &profiles, &opts());
    let types: Vec<String> = after
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|c| c.iter().map(|c| c.type_.clone()).collect())
        .unwrap_or_default();
    assert_eq!(types, ["Ready", keys::CONDITION_GPU_READY]);
    assert!(second.changes.is_empty());
}

#[test]
fn release_of_an_ungoverned_node_removes_only_what_gpuready_wrote() {
    let p = one(profile(
        "p",
        "taintPolicy: UntilFirstReady\nreadyLabels: {example.com/pool: a}\nperLayerNodeConditions: true",
    ));
    // Governed and released once, then re-tainted by hand with our key; foreign
    // taints, labels and conditions all around.
    let governed = settle(
        with_foreign_taints(ready_node(), false).build(),
        &p,
        &opts(),
    );
    assert!(annotation(&governed, keys::ANNOTATION_RELEASED).is_some());
    let node = NodeBuilder::from_node(governed)
        .taint(keys::DEFAULT_TAINT_KEY, "true", "NoSchedule")
        .annotate(
            ANNOTATION_TAINT,
            "readiness.k8s.io/gpuready-not-ready:NoSchedule",
        )
        .annotate("example.com/owner", "team-a")
        .label("example.com/rack", "r12")
        .condition(NodeCondition {
            type_: "MemoryPressure".into(),
            status: "False".into(),
            ..NodeCondition::default()
        })
        .build();
    let labels_before = labels_of(&node);

    // The profile goes away.
    let (first, after, second) = reconcile_twice(&node, &[], &opts());
    assert_eq!(first.governance, GovernanceKind::Ungoverned);
    assert_eq!(first.ready, None);
    assert_eq!(node_taints(&after), foreign());
    let labels = labels_of(&after);
    for k in [keys::LABEL_READY, keys::LABEL_PROFILE, "example.com/pool"] {
        assert!(!labels.contains_key(k), "{k} should be gone");
    }
    let mut expected = labels_before;
    expected.retain(|k, _| {
        ![keys::LABEL_READY, keys::LABEL_PROFILE, "example.com/pool"].contains(&k.as_str())
    });
    assert_eq!(labels, expected, "foreign labels untouched");
    let types: Vec<&str> = after
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|c| c.iter().map(|c| c.type_.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(types, ["Ready", "MemoryPressure"]);
    assert_eq!(annotation(&after, ANNOTATION_TAINT), None);
    assert_eq!(annotation(&after, keys::ANNOTATION_RELEASED), None);
    assert_eq!(annotation(&after, keys::ANNOTATION_LABELS), None);
    assert_eq!(annotation(&after, "example.com/owner"), Some("team-a"));
    assert!(second.changes.is_empty());
}

#[test]
fn a_profile_being_deleted_releases_its_nodes() {
    let mut deleting = profile("p", "");
    deleting.metadata.deletion_timestamp = Some(Time(at(-5)));
    let node = settle(not_ready_node().build(), &one(profile("p", "")), &opts());
    assert_eq!(node_taints(&node), [OURS]);
    let a = assess_with(&node, &[deleting.clone()], &opts());
    assert_eq!(a.governance, GovernanceKind::Ungoverned);
    assert_eq!(a.changes.taint.as_ref().map(|t| t.taints.len()), Some(0));
    // With a live profile beside it, the live one governs: no conflict.
    let a = assess_with(&node, &[deleting, profile("q", "")], &opts());
    assert_eq!(a.governance, GovernanceKind::Governed);
    assert_eq!(a.profile.as_deref(), Some("q"));
}

#[test]
fn an_ungoverned_node_gpuready_never_touched_needs_no_write() {
    let node =
        with_foreign_taints(NodeBuilder::bare("cpu-1"), false).label("kubernetes.io/os", "linux");
    let a = assess_with(&node.build(), &one(profile("p", "")), &opts());
    assert_eq!(a.governance, GovernanceKind::Ungoverned);
    assert!(a.changes.is_empty(), "{:#?}", a.changes);
}

// ---- Taint key / effect changes ----

#[test]
fn changing_the_taint_effect_replaces_the_taint_in_place() {
    let before = one(profile("p", ""));
    let node = settle(
        with_foreign_taints(not_ready_node(), false).build(),
        &before,
        &opts(),
    );
    let after_profile = one(profile("p", "taint: {effect: NoExecute}"));
    let a = assess_with(&node, &after_profile, &opts());
    let t = a.changes.taint.as_ref().expect("replace");
    assert_eq!(t.kind, TaintChangeKind::Replace);
    let mut want = foreign();
    want.push("readiness.k8s.io/gpuready-not-ready=true:NoExecute".into());
    assert_eq!(taint_strings(&t.taints), want);
    assert_eq!(
        a.changes
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_TAINT)),
        Some(&Some(
            "readiness.k8s.io/gpuready-not-ready:NoExecute".to_owned()
        ))
    );
    let (_, _, second) = reconcile_twice(&node, &after_profile, &opts());
    assert!(second.changes.is_empty(), "{:#?}", second.changes);
    let settled = settle(node, &after_profile, &opts());
    assert_eq!(node_taints(&settled), want);
}

#[test]
fn changing_the_taint_key_replaces_the_old_gpuready_taint() {
    let custom = one(profile(
        "p",
        "taint: {key: example.com/gpu-not-ready, value: pending}",
    ));
    let node = settle(
        with_foreign_taints(not_ready_node(), false).build(),
        &custom,
        &opts(),
    );
    let mut want = foreign();
    want.push("example.com/gpu-not-ready=pending:NoSchedule".into());
    assert_eq!(node_taints(&node), want);
    assert_eq!(
        annotation(&node, ANNOTATION_TAINT),
        Some("example.com/gpu-not-ready:NoSchedule")
    );

    // A second custom key: the first is known from the annotation and replaced.
    let other = one(profile("p", "taint: {key: example.com/gpu-pending}"));
    let a = assess_with(&node, &other, &opts());
    assert_eq!(
        a.changes.taint.as_ref().map(|t| t.kind),
        Some(TaintChangeKind::Replace)
    );
    let settled = settle(node, &other, &opts());
    let mut want = foreign();
    want.push("example.com/gpu-pending=true:NoSchedule".into());
    assert_eq!(node_taints(&settled), want);

    // Back to the default key.
    let default = one(profile("p", ""));
    let settled = settle(settled, &default, &opts());
    let mut want = foreign();
    want.push(OURS.into());
    assert_eq!(node_taints(&settled), want);
    assert_eq!(
        annotation(&settled, ANNOTATION_TAINT),
        Some("readiness.k8s.io/gpuready-not-ready:NoSchedule")
    );
}

// ---- Messages that do not age ----

#[test]
fn a_later_reconcile_with_nothing_new_writes_nothing() {
    // Condition messages must not embed the time elapsed since the GFD timestamp,
    // or every reconcile (kubelet status every 5 min, each GFD refresh, the
    // recheck timer) rewrites node status on every node.
    let cases = [
        (
            "fresh, per-layer conditions",
            NodeBuilder::gpu("n"),
            "perLayerNodeConditions: true",
        ),
        (
            "stale",
            NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, &seconds_ago(3700)),
            "",
        ),
        (
            "stale, per-layer conditions",
            NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, &seconds_ago(3700)),
            "perLayerNodeConditions: true",
        ),
    ];
    for (case, node, spec) in cases {
        let p = one(profile("p", spec));
        let node = settle(node.build(), &p, &opts());
        for later in [1, 59, 60, 61, 299] {
            let a = assess_with(
                &node,
                &p,
                &PlanOptions {
                    now: at(later),
                    ..opts()
                },
            );
            assert!(
                a.changes.is_empty(),
                "{case}, {later}s later: {:#?}",
                a.changes.conditions
            );
        }
    }
}

#[test]
fn a_taint_kubelet_registered_with_a_custom_key_is_adopted_and_released_with_the_profile() {
    // kubelet --register-with-taints=example.com/gpu-not-ready=true:NoSchedule: the
    // node arrives already carrying the profile's taint. gpuready holds it from then
    // on and must record it, or it cannot tell it is its own once the profile is gone.
    let p = one(profile("p", "taint: {key: example.com/gpu-not-ready}"));
    let registered = with_foreign_taints(not_ready_node(), false)
        .taint("example.com/gpu-not-ready", "true", "NoSchedule")
        .build();
    let node = settle(registered, &p, &opts());
    assert_eq!(
        annotation(&node, ANNOTATION_TAINT),
        Some("example.com/gpu-not-ready:NoSchedule")
    );
    // The profile is deleted while the node is still not ready.
    let released = settle(node.clone(), &[], &opts());
    assert_eq!(node_taints(&released), foreign());
    // Or its taint key changes.
    let renamed = settle(node, &one(profile("p", "")), &opts());
    let mut want = foreign();
    want.push(OURS.into());
    assert_eq!(node_taints(&renamed), want);
}

// ---- Exact ownership: taints, labels, conditions ----

#[test]
fn a_node_no_profile_selects_keeps_gpureadys_own_taint_key() {
    // A bootstrap taint from kubelet --register-with-taints, before any profile
    // exists: no annotation says gpuready put it there, so it stays.
    for effect in ["NoSchedule", "NoExecute"] {
        let node = with_foreign_taints(not_ready_node(), false)
            .taint(keys::DEFAULT_TAINT_KEY, "true", effect)
            .build();
        for profiles in [
            vec![],
            one(profile(
                "other",
                "nodeSelector: {matchLabels: {pool: elsewhere}}",
            )),
        ] {
            let a = assess_with(&node, &profiles, &opts());
            assert_eq!(a.governance, GovernanceKind::Ungoverned);
            assert!(a.changes.is_empty(), "{effect}: {:#?}", a.changes);
        }
    }
}

#[test]
fn a_bootstrap_taint_is_adopted_once_a_profile_selects_the_node() {
    let node = with_foreign_taints(not_ready_node(), false)
        .taint(keys::DEFAULT_TAINT_KEY, "true", "NoSchedule")
        .build();
    let p = one(profile("p", ""));
    let a = assess_with(&node, &p, &opts());
    assert!(
        a.changes.taint.is_none(),
        "already in place: {:?}",
        a.changes.taint
    );
    assert_eq!(
        a.changes
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_TAINT)),
        Some(&Some(
            "readiness.k8s.io/gpuready-not-ready:NoSchedule".to_owned()
        ))
    );
    // Ready later: gpuready removes it.
    let adopted = settle(node, &p, &opts());
    let healthy = NodeBuilder::from_node(adopted).gpus(1, 1).build();
    let released = settle(healthy, &p, &opts());
    assert_eq!(node_taints(&released), foreign());
}

#[test]
fn taints_under_gpureadys_prefix_that_no_profile_sets_are_not_gpureadys() {
    // An admin's maintenance taint under gpuready.io/, on governed nodes (ready
    // or not) and on a node gpuready releases.
    let maintenance = "gpuready.io/maintenance=true:NoExecute";
    for ready in [true, false] {
        let base = if ready {
            ready_node()
        } else {
            not_ready_node()
        };
        let node = with_foreign_taints(base, true)
            .taint("gpuready.io/maintenance", "true", "NoExecute")
            .build();
        for profiles in [one(profile("p", "")), vec![]] {
            let settled = settle(node.clone(), &profiles, &opts());
            assert!(
                node_taints(&settled).contains(&maintenance.to_owned()),
                "ready={ready}, {} profiles: {:?}",
                profiles.len(),
                node_taints(&settled)
            );
        }
    }
}

#[test]
fn an_annotation_naming_a_key_no_profile_may_set_is_not_obeyed() {
    // The annotation says gpuready holds the cordon taint: it cannot have (no
    // profile may name a kubernetes.io key), so the taint is not touched.
    let cordon = "node.kubernetes.io/unschedulable=:NoSchedule";
    let node = ready_node()
        .taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
        .annotate(
            ANNOTATION_TAINT,
            "node.kubernetes.io/unschedulable:NoSchedule",
        )
        .build();
    for profiles in [one(profile("p", "")), vec![]] {
        let settled = settle(node.clone(), &profiles, &opts());
        assert_eq!(
            node_taints(&settled),
            [cordon],
            "{} profiles",
            profiles.len()
        );
    }
}

#[test]
fn the_same_key_with_another_effect_is_not_gpureadys() {
    // Profile: readiness.k8s.io/gpuready-not-ready:NoSchedule. Someone else's NoExecute taint
    // of the same key stays beside gpuready's.
    let node = not_ready_node()
        .taint(keys::DEFAULT_TAINT_KEY, "x", "NoExecute")
        .build();
    let settled = settle(node, &one(profile("p", "")), &opts());
    assert_eq!(
        node_taints(&settled),
        ["readiness.k8s.io/gpuready-not-ready=x:NoExecute", OURS]
    );
}

#[test]
fn a_ready_label_another_writer_set_is_never_taken_over_nor_deleted() {
    let p = one(profile(
        "p",
        "readyLabels: {example.com/pool: a, example.com/tier: gpu}",
    ));
    // Another writer set example.com/pool (to another value); example.com/tier is free.
    let node = ready_node().label("example.com/pool", "b").build();
    let a = assess_with(&node, &p, &opts());
    assert_eq!(a.changes.foreign_labels_left, ["example.com/pool"]);
    let ready = settle(node, &p, &opts());
    let labels = labels_of(&ready);
    assert_eq!(
        labels.get("example.com/pool").map(String::as_str),
        Some("b")
    );
    assert_eq!(
        labels.get("example.com/tier").map(String::as_str),
        Some("gpu")
    );
    assert_eq!(
        annotation(&ready, keys::ANNOTATION_LABELS),
        Some("example.com/tier")
    );
    // Not ready: gpuready's own ready label goes, the other writer's stays.
    let broken = settle(
        NodeBuilder::from_node(ready).gpus(1, 0).build(),
        &p,
        &opts(),
    );
    let labels = labels_of(&broken);
    assert_eq!(
        labels.get("example.com/pool").map(String::as_str),
        Some("b")
    );
    assert!(!labels.contains_key("example.com/tier"));
    // Released: the same.
    let released = settle(broken, &[], &opts());
    let labels = labels_of(&released);
    assert_eq!(
        labels.get("example.com/pool").map(String::as_str),
        Some("b")
    );
    assert!(!labels.contains_key(keys::LABEL_READY));
}

#[test]
fn the_labels_annotation_records_only_what_lies_beyond_the_verdict_labels() {
    // Without readyLabels a node gets no annotation at all: gpuready's verdict
    // labels are its by name.
    let plain = one(profile("p", ""));
    let ready = settle(ready_node().build(), &plain, &opts());
    assert_eq!(
        labels_of(&ready).get(keys::LABEL_READY).map(String::as_str),
        Some("true")
    );
    assert_eq!(annotation(&ready, keys::ANNOTATION_LABELS), None);
    // ...and released, it loses them all the same.
    let released = settle(ready, &[], &opts());
    for k in keys::NODE_LABELS_WRITTEN {
        assert!(!labels_of(&released).contains_key(*k), "{k}");
    }
    // A profile's readyLabels key is recorded, alone.
    let pool = one(profile("p", "readyLabels: {example.com/pool: a}"));
    let ready = settle(ready_node().build(), &pool, &opts());
    assert_eq!(
        annotation(&ready, keys::ANNOTATION_LABELS),
        Some("example.com/pool")
    );
    // Not ready: the readyLabels key goes, and so does the annotation.
    let broken = settle(
        NodeBuilder::from_node(ready).gpus(1, 0).build(),
        &pool,
        &opts(),
    );
    assert!(!labels_of(&broken).contains_key("example.com/pool"));
    assert_eq!(annotation(&broken, keys::ANNOTATION_LABELS), None);
}

#[test]
fn an_earlier_annotation_that_lists_the_verdict_labels_is_not_rewritten() {
    // Written by an earlier gpuready, which listed its verdict labels too:
    // recording the same keys beyond them, it stays as it is (no fleet-wide
    // rewrite on upgrade), and it still says what gpuready owns.
    for (profile_spec, listed) in [
        ("", "gpuready.io/profile,gpuready.io/ready"),
        (
            "readyLabels: {example.com/pool: a}",
            "example.com/pool,gpuready.io/profile,gpuready.io/ready",
        ),
    ] {
        let p = one(profile("p", profile_spec));
        let settled = settle(ready_node().build(), &p, &opts());
        let older = NodeBuilder::from_node(settled)
            .owned_by_gpuready(&listed.split(',').collect::<Vec<_>>())
            .build();
        let a = assess_with(&older, &p, &opts());
        assert!(a.changes.is_empty(), "{profile_spec}: {:#?}", a.changes);
        let released = settle(older, &[], &opts());
        let labels = labels_of(&released);
        for k in listed.split(',') {
            assert!(!labels.contains_key(k), "{profile_spec}: {k}");
        }
        assert_eq!(annotation(&released, keys::ANNOTATION_LABELS), None);
    }
}

#[test]
fn labels_owned_by_an_older_gpureadys_apply_are_still_released() {
    // Nodes written by gpuready before 0.2 (server-side apply, no annotation).
    let node = ready_node()
        .label(keys::LABEL_READY, "true")
        .label(keys::LABEL_PROFILE, "p")
        .label("example.com/pool", "a")
        .owned_by_legacy_apply(&[keys::LABEL_READY, keys::LABEL_PROFILE, "example.com/pool"])
        .build();
    let released = settle(node, &[], &opts());
    let labels = labels_of(&released);
    for k in [keys::LABEL_READY, keys::LABEL_PROFILE, "example.com/pool"] {
        assert!(!labels.contains_key(k), "{k}");
    }
}

#[test]
fn without_a_heartbeat_an_unchanged_condition_is_never_rewritten() {
    let p = one(profile("p", "perLayerNodeConditions: true"));
    let off = PlanOptions {
        heartbeat_seconds: 0,
        ..opts()
    };
    let node = settle(not_ready_node().build(), &p, &off);
    // (Within the GFD freshness limit, so the verdict itself does not change.)
    for later in [60, 300, 1800, 3000] {
        let a = assess_with(
            &node,
            &p,
            &PlanOptions {
                now: at(later),
                ..off
            },
        );
        assert!(a.changes.is_empty(), "{later}s later: {:#?}", a.changes);
    }
}

#[test]
fn a_transition_is_one_node_patch_and_one_condition_patch() {
    let p = one(profile(
        "p",
        "readyLabels: {example.com/pool: a}\nperLayerNodeConditions: true",
    ));
    let node = settle(ready_node().build(), &p, &opts());
    let broken = NodeBuilder::from_node(node).gpus(1, 0).build();
    let a = assess_with(&broken, &p, &opts());
    // Taint, labels and annotation all in the node's one merge patch.
    assert!(a.changes.taint.is_some() && a.changes.labels.is_some());
    assert!(a.changes.annotations.is_some());
    assert!(a.changes.patches_node());
    let c = a.changes.conditions.expect("conditions");
    assert!(c.set.iter().any(|c| c.type_ == keys::CONDITION_GPU_READY));
    // Nothing but gpuready's own types.
    assert!(
        c.set
            .iter()
            .map(|c| c.type_.as_str())
            .chain(c.remove.iter().map(String::as_str))
            .all(gpuready_core::facts::is_own_condition)
    );
}

#[test]
fn judging_once_then_planning_is_assessing_and_the_verdict_plans_nothing() {
    let nodes = [
        ready_node().build(),
        not_ready_node().build(),
        with_foreign_taints(not_ready_node(), true).build(),
    ];
    let cases = [
        one(profile("p", "")),
        one(profile("p", "mode: Observe")),
        vec![profile("p", ""), profile("q", "")],
        vec![],
    ];
    for node in &nodes {
        for profiles in &cases {
            let selectors: Vec<_> = profiles
                .iter()
                .map(|p| gpuready_core::select::profile_selector(p).expect("selector"))
                .collect();
            let pairs: Vec<_> = profiles.iter().zip(selectors.iter()).collect();
            let facts = gpuready_core::NodeFacts::from_node(node);
            let judgement = gpuready_core::judge(&facts, &pairs, now());
            assert!(judgement.verdict.changes.is_empty());
            let planned = judgement.clone().plan(&facts, &opts());
            assert_eq!(planned, assess_with(node, profiles, &opts()));
            // The brake changes the plan, never the verdict.
            let held = judgement.plan(
                &facts,
                &PlanOptions {
                    hold_new_taints: true,
                    write_refused: false,
                    ..opts()
                },
            );
            assert_eq!(
                (held.ready, &held.reason, held.governance),
                (planned.ready, &planned.reason, planned.governance)
            );
        }
    }
}
