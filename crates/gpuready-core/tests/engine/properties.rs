//! Property tests over arbitrary nodes and profiles: the engine never panics,
//! readiness is exactly "every gating layer Ready", planning is idempotent (apply
//! the plan, plan again: nothing), foreign taints survive every plan, and driver
//! versions parse and order like numeric tuples.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use gpuready_api::keys::ANNOTATION_TAINT;
use gpuready_api::keys::{self, nvidia};
use gpuready_api::{
    Family, GpuExpectation, GpuNodeProfile, GpuNodeProfileSpec, Layer, Mode, TaintEffect,
    TaintPolicy, TaintSpec,
};
use gpuready_core::evaluate::Status;
use gpuready_core::plan::PlanOptions;
use gpuready_core::version::{DriverVersion, MajorMinor};
use gpuready_core::{GovernanceKind, NodeFacts};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use proptest::prelude::*;
use proptest::sample::subsequence;

/// Every label key the engine reads, plus neighbours it must ignore.
const KNOWN_KEYS: &[&str] = &[
    nvidia::GPU_PRESENT,
    nvidia::GPU_PRODUCT,
    nvidia::GPU_MEMORY,
    nvidia::GPU_COUNT,
    nvidia::GPU_FAMILY,
    nvidia::GPU_COMPUTE_MAJOR,
    nvidia::GPU_COMPUTE_MINOR,
    nvidia::GPU_REPLICAS,
    nvidia::GFD_TIMESTAMP,
    nvidia::MIG_STRATEGY,
    nvidia::DRIVER_FULL,
    nvidia::DRIVER_MAJOR,
    nvidia::DRIVER_MINOR,
    nvidia::DRIVER_REVISION,
    nvidia::DRIVER_MAJOR_OLD,
    nvidia::DRIVER_MINOR_OLD,
    nvidia::DRIVER_REV_OLD,
    nvidia::RUNTIME_FULL,
    nvidia::RUNTIME_MAJOR,
    nvidia::RUNTIME_MINOR,
    nvidia::RUNTIME_MAJOR_OLD,
    nvidia::RUNTIME_MINOR_OLD,
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.workload.config",
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0302_10de_2335.present",
    "feature.node.kubernetes.io/pci-0300_1002.present",
    "feature.node.kubernetes.io/pci-10de.sriov.capable",
    "feature.node.kubernetes.io/cpu-model.vendor_id",
    keys::LABEL_READY,
    keys::LABEL_PROFILE,
];

/// Values shaped like what GFD writes, so generated nodes often get far.
const PLAUSIBLE: &[&str] = &[
    "true",
    "false",
    "",
    "0",
    "1",
    "2",
    "07",
    "8",
    "9",
    "12",
    "13",
    "24576",
    "16376",
    "580",
    "178",
    "04",
    "570",
    "26",
    "580.178.04",
    "570.26",
    "580",
    "580.65.06.1",
    "13.0",
    "12.8",
    "12",
    "ampere",
    "ada-lovelace",
    "pascal",
    "maxwell",
    "undefined",
    "feynman",
    "mixed",
    "single",
    "NVIDIA-GeForce-RTX-3090",
    "GeForce-GTX-1070",
    "Quadro-M5000",
    "NVIDIA-A100-SXM4-40GB-SHARED",
    "1795953555",
    "1795694400",
    "99999999999999999999",
    "-1",
    "24GB",
    "x",
    "é",
    "1.5",
];

const RESOURCES: &[&str] = &[
    nvidia::GPU_RESOURCE,
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-1g.5gb",
    "nvidia.com/mig-3g.20gb",
    "example.com/fpga",
];

/// Taint keys that may be gpuready's (default, another gpuready.io key, a custom key).
const OUR_TAINT_KEYS: &[&str] = &[
    keys::DEFAULT_TAINT_KEY,
    "gpuready.io/pending",
    "example.com/gpu-not-ready",
];
/// Taint keys that are never gpuready's.
const FOREIGN_TAINT_KEYS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "karpenter.sh/disrupted",
    "dedicated",
    "nvidia.com/gpu",
];
const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(PLAUSIBLE).prop_map(str::to_owned),
        2 => "[0-9.]{0,12}",
        1 => "\\PC{0,16}",
        1 => ".{0,8}",
    ]
}

/// Label edits on top of a base node: for each known key, leave it, set it to an
/// arbitrary value, or remove it; plus random extra keys.
fn label_edits() -> impl Strategy<Value = Vec<(String, Option<String>)>> {
    let known = proptest::collection::vec(
        proptest::option::weighted(0.25, proptest::option::weighted(0.8, text())),
        KNOWN_KEYS.len(),
    );
    let extra = proptest::collection::btree_map("x-[a-z0-9./-]{0,20}", text(), 0..3);
    (known, extra).prop_map(|(known, extra)| {
        KNOWN_KEYS
            .iter()
            .zip(known)
            .filter_map(|(k, edit)| edit.map(|v| (k.to_string(), v)))
            .chain(extra.into_iter().map(|(k, v)| (k, Some(v))))
            .collect()
    })
}

fn quantities() -> impl Strategy<Value = Vec<(String, Option<String>, Option<String>)>> {
    let qty = prop_oneof![
        3 => proptest::sample::select(&["0", "1", "2", "4", "8"][..]).prop_map(str::to_owned),
        1 => text(),
    ];
    proptest::collection::vec(
        (
            proptest::sample::select(RESOURCES),
            proptest::option::of(qty.clone()),
            proptest::option::of(qty),
        ),
        0..4,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(k, c, a)| (k.to_owned(), c, a))
            .collect()
    })
}

fn taints(keys: &'static [&'static str]) -> impl Strategy<Value = Vec<(String, String, String)>> {
    proptest::collection::vec(
        (
            proptest::sample::select(keys),
            proptest::sample::select(&["", "true", "gpu"][..]),
            proptest::sample::select(EFFECTS),
        )
            .prop_map(|(k, v, e)| (k.to_owned(), v.to_owned(), e.to_owned())),
        0..3,
    )
}

fn gpu_condition() -> impl Strategy<Value = NodeCondition> {
    (
        proptest::sample::select(&["GpuReady", "GpuReadyDriver", "GpuReadyExternal"][..]),
        proptest::sample::select(&["True", "False", "Unknown"][..]),
        proptest::sample::select(&["Ready", "DriverTooOld", "Conflict"][..]),
        -7200i64..60,
        -7200i64..60,
    )
        .prop_map(|(t, s, r, transition, heartbeat)| NodeCondition {
            type_: t.into(),
            status: s.into(),
            reason: Some(r.into()),
            message: Some("earlier verdict".into()),
            last_transition_time: Some(Time(at(transition))),
            last_heartbeat_time: Some(Time(at(heartbeat))),
        })
}

prop_compose! {
    fn node()(
        base in 0u8..5,
        edits in label_edits(),
        quantities in quantities(),
        kubelet in proptest::sample::select(&["True", "False", "Unknown", "Bogus", "-"][..]),
        ours_before in taints(OUR_TAINT_KEYS),
        foreign in taints(FOREIGN_TAINT_KEYS),
        ours_after in taints(OUR_TAINT_KEYS),
        taint_annotation in proptest::option::of((proptest::sample::select(OUR_TAINT_KEYS), proptest::sample::select(EFFECTS))),
        released in proptest::option::of(Just(NOW)),
        conditions in proptest::collection::vec(gpu_condition(), 0..3),
        owned_labels in subsequence(vec![keys::LABEL_READY, keys::LABEL_PROFILE, "example.com/pool", "x-gone"], 0..=4),
        legacy in proptest::bool::ANY,
    ) -> Node {
        let mut b = match base {
            0 => NodeBuilder::bare("n").label(POOL.0, POOL.1),
            1 => NodeBuilder::gtx1070("n"),
            2 => NodeBuilder::a100_mig_mixed("n"),
            _ => NodeBuilder::gpu("n"),
        };
        for (k, v) in &edits {
            b = match v {
                Some(v) => b.label(k, v),
                None => b.unlabel(k),
            };
        }
        for (name, cap, alloc) in &quantities {
            b = b.resource(name, cap.as_deref().unwrap_or("0"), alloc.as_deref().unwrap_or("0"));
            if cap.is_none() || alloc.is_none() {
                let mut n = b.build();
                let s = n.status.as_mut().expect("status");
                if cap.is_none() { s.capacity.as_mut().map(|m| m.remove(name)); }
                if alloc.is_none() { s.allocatable.as_mut().map(|m| m.remove(name)); }
                b = NodeBuilder::from_node(n);
            }
        }
        b = match kubelet {
            "-" => b.no_kubelet_condition(),
            s => b.kubelet(s, "KubeletReason", "kubelet says so"),
        };
        for (k, v, e) in ours_before.iter().chain(&foreign).chain(&ours_after) {
            b = b.taint(k, v, e);
        }
        if let Some((k, e)) = taint_annotation {
            b = b.annotate(ANNOTATION_TAINT, &format!("{k}:{e}"));
        }
        if let Some(r) = released {
            b = b.annotate(keys::ANNOTATION_RELEASED, r);
        }
        for c in conditions {
            b = b.condition(c);
        }
        if legacy {
            b.owned_by_legacy_apply(&owned_labels).build()
        } else {
            b.owned_by_gpuready(&owned_labels).build()
        }
    }
}

fn gating() -> impl Strategy<Value = Option<Vec<Layer>>> {
    proptest::option::of(subsequence(Layer::ALL.to_vec(), 0..=7))
}

fn families() -> impl Strategy<Value = Vec<Family>> {
    subsequence(
        vec![
            Family::Maxwell,
            Family::Pascal,
            Family::Ampere,
            Family::AdaLovelace,
            Family::Blackwell,
        ],
        0..=2,
    )
}

prop_compose! {
    fn profile_spec()(
        gating in gating(),
        products in subsequence(vec!["NVIDIA-GeForce-RTX-3090", "*GTX-1070", "Quadro-M5000", "NVIDIA-*-SHARED"], 0..=2),
        min_memory_mib in proptest::option::of(1u32..50_000),
        min_cc in proptest::option::of(proptest::sample::select(&["5.2", "7.5", "8.6", "10.0"][..])),
        families in families(),
        excluded_families in families(),
        count in proptest::option::of(1u32..4),
        min_driver in proptest::option::of(proptest::sample::select(&["570.26", "580.65.06", "595.45.04"][..])),
        cuda in proptest::option::of(proptest::sample::select(&["12.2", "12.8", "13.0", "12.7", "14.0"][..])),
        resources in proptest::option::of(proptest::sample::select(RESOURCES)),
        max_age in prop_oneof![Just(0u32), 1u32..7200],
        observe in proptest::bool::weighted(0.15),
        until_first_ready in any::<bool>(),
        taint_key in proptest::sample::select(OUR_TAINT_KEYS),
        taint_value in proptest::sample::select(&["true", ""][..]),
        effect in proptest::sample::select(&[TaintEffect::NoSchedule, TaintEffect::PreferNoSchedule, TaintEffect::NoExecute][..]),
        ready_labels in any::<bool>(),
        per_layer in any::<bool>(),
    ) -> GpuNodeProfileSpec {
        GpuNodeProfileSpec {
            node_selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(POOL.0.to_owned(), POOL.1.to_owned())])),
                ..LabelSelector::default()
            },
            gpu: GpuExpectation {
                products: products.into_iter().map(str::to_owned).collect(),
                min_memory_mib,
                min_compute_capability: min_cc.map(str::to_owned),
                families,
                excluded_families,
                count,
                max_gpus_per_numa_node: None,
            },
            min_driver_version: min_driver.map(str::to_owned),
            cuda_version: cuda.map(str::to_owned),
            gating_layers: gating,
            resources: resources.map(|r| BTreeMap::from([(r.to_owned(), 1)])).unwrap_or_default(),
            max_label_age_seconds: max_age,
            mode: if observe { Mode::Observe } else { Mode::Enforce },
            taint_policy: if until_first_ready { TaintPolicy::UntilFirstReady } else { TaintPolicy::Continuous },
            taint: TaintSpec { key: taint_key.to_owned(), value: taint_value.to_owned(), effect },
            ready_labels: if ready_labels { BTreeMap::from([("example.com/pool".to_owned(), "a".to_owned())]) } else { BTreeMap::new() },
            per_layer_node_conditions: per_layer,
            evidence: Default::default(),
            workload: Default::default(),
            sandbox_resources: Vec::new(),
            not_ready_deadline: None,
            probe: None,
            device_gating: None,
            mig: None,
            fabric: None,
            external: None,
            maintenance: None,
            escalation: None,
        }
    }
}

/// Which profiles are around: one governing, none, two in conflict, or one being
/// deleted.
fn profiles() -> impl Strategy<Value = Vec<GpuNodeProfile>> {
    (profile_spec(), profile_spec(), 0u8..4).prop_map(|(a, b, shape)| {
        let p = GpuNodeProfile::new("p", a);
        let q = GpuNodeProfile::new("q", b);
        match shape {
            0 | 1 => vec![p],
            2 => vec![p, q],
            _ => {
                let mut gone = p;
                gone.metadata.deletion_timestamp = Some(Time(at(-1)));
                vec![gone]
            }
        }
    })
}

prop_compose! {
    fn plan_options()(heartbeat in 1i64..7200, brake in proptest::bool::weighted(0.2)) -> PlanOptions {
        PlanOptions { now: now(), heartbeat_seconds: heartbeat, hold_new_taints: brake, write_refused: false }
    }
}

fn foreign_taints(node: &Node) -> Vec<String> {
    node_taints(node)
        .into_iter()
        .filter(|t| {
            FOREIGN_TAINT_KEYS
                .iter()
                .any(|k| t.starts_with(&format!("{k}=")))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// (a) Arbitrary label maps, quantities and conditions never panic the engine.
    #[test]
    fn engine_never_panics(node in node(), profiles in profiles(), opts in plan_options()) {
        let facts = NodeFacts::from_node(&node);
        for p in &profiles {
            let report = gpuready_core::evaluate(&p.spec, &facts, opts.now);
            prop_assert_eq!(report.layers.len(), Layer::ALL.len());
        }
        let a = assess_with(&node, &profiles, &opts);
        prop_assert_eq!(a.name.as_str(), "n");
        let _ = serde_json::to_string(&a).expect("assessment serializes");
    }

    /// (b) ready() holds exactly when every gating layer is Ready; the assessment agrees.
    /// (The generated nodes carry no maintenance label and no other gate:
    /// tests/lifecycle.rs judges those.)
    #[test]
    fn ready_iff_every_gating_layer_is_ready(node in node(), spec in profile_spec()) {
        let facts = NodeFacts::from_node(&node);
        let report = gpuready_core::evaluate(&spec, &facts, now());
        let all_gating_ready = report
            .layers
            .iter()
            .filter(|l| spec.is_gating(l.layer))
            .all(|l| l.status == Status::Ready);
        prop_assert_eq!(report.ready(), all_gating_ready);
        prop_assert_eq!(report.first_failure().is_none(), all_gating_ready);
        for l in &report.layers {
            prop_assert_eq!(l.gating, spec.is_gating(l.layer));
        }
        let p = GpuNodeProfile::new("p", spec);
        let a = assess_with(&node, &[p], &PlanOptions { now: now(), heartbeat_seconds: 300, hold_new_taints: false, write_refused: false });
        prop_assert_eq!(a.governance, GovernanceKind::Governed);
        prop_assert_eq!(a.ready, Some(all_gating_ready));
        if all_gating_ready {
            prop_assert_eq!(a.reason.as_str(), keys::reasons::READY);
        }
    }

    /// (c) Planning is idempotent: once the plan is applied, the next plan is empty.
    #[test]
    fn planning_is_idempotent(node in node(), profiles in profiles(), opts in plan_options()) {
        let (first, after, second) = reconcile_twice(&node, &profiles, &opts);
        prop_assert!(
            second.changes.is_empty(),
            "second plan {:#?}\nafter first plan {:#?}\nnode after: labels {:?} taints {:?} annotations {:?}",
            second.changes,
            first.changes,
            labels_of(&after),
            node_taints(&after),
            after.metadata.annotations
        );
        prop_assert_eq!(first.ready, second.ready);
        prop_assert_eq!(first.changes.taint_held_by_brake, second.changes.taint_held_by_brake);
    }

    /// (d) No plan drops or reorders a taint that is not gpuready's.
    #[test]
    fn foreign_taints_are_never_dropped(node in node(), profiles in profiles(), opts in plan_options()) {
        let before = foreign_taints(&node);
        let a = assess_with(&node, &profiles, &opts);
        if let Some(t) = &a.changes.taint {
            let kept: Vec<String> = taint_strings(&t.taints)
                .into_iter()
                .filter(|t| FOREIGN_TAINT_KEYS.iter().any(|k| t.starts_with(&format!("{k}="))))
                .collect();
            prop_assert_eq!(&kept, &before);
        }
        let mut after = node.clone();
        apply(&mut after, &a.changes);
        prop_assert_eq!(foreign_taints(&after), before);
        if a.governance != GovernanceKind::Governed || a.observe {
            prop_assert!(a.changes.taint.as_ref().is_none_or(|t| t.kind != gpuready_core::TaintChangeKind::Add));
        }
    }

    /// (d2) A node no profile governs and that carries nothing gpuready
    /// recorded (no ownership annotation, no owned labels, none of its
    /// condition types) is never written, whatever taints it has.
    #[test]
    fn an_ungoverned_node_without_gpuready_traces_is_never_written(node in node(), profiles in profiles(), opts in plan_options()) {
        let facts = gpuready_core::NodeFacts::from_node(&node);
        let a = assess_with(&node, &profiles, &opts);
        let traces = facts.owned.taint.is_some()
            || facts.owned.released_at.is_some()
            || facts.owned.labels_annotation.is_some()
            || facts.owned.labels.iter().any(|k| facts.labels.contains_key(k))
            || !facts.gpu_conditions.is_empty();
        if a.governance == GovernanceKind::Ungoverned && !traces {
            prop_assert!(a.changes.is_empty(), "{:#?}", a.changes);
        }
    }

    /// (e) DriverVersion::parse never panics on any string.
    #[test]
    fn driver_version_parse_never_panics(s in "\\PC{0,24}", t in "[0-9.]{0,16}") {
        let _ = DriverVersion::parse(&s);
        let _ = DriverVersion::parse(&t);
        let _ = MajorMinor::parse(&s);
        let _ = MajorMinor::parse(&t);
    }

    /// (e) Parsed driver versions order like (major, minor, patch-or-0) tuples,
    /// zero padding and all.
    #[test]
    fn driver_versions_order_like_numeric_tuples(
        a in (0u32..1000, 0u32..300, proptest::option::of(0u32..200), 0usize..3),
        b in (0u32..1000, 0u32..300, proptest::option::of(0u32..200), 0usize..3),
    ) {
        let render = |(major, minor, patch, pad): (u32, u32, Option<u32>, usize)| match patch {
            Some(p) => format!("{major}.{minor}.{p:0width$}", width = pad),
            None => format!("{major}.{minor:0width$}", width = pad),
        };
        let (sa, sb) = (render(a), render(b));
        let va = DriverVersion::parse(&sa).expect("well-formed version parses");
        let vb = DriverVersion::parse(&sb).expect("well-formed version parses");
        prop_assert_eq!((va.major, va.minor, va.patch), (a.0, a.1, a.2));
        prop_assert_eq!(va.as_str(), sa.as_str());
        let ta = (a.0, a.1, a.2.unwrap_or(0));
        let tb = (b.0, b.1, b.2.unwrap_or(0));
        prop_assert_eq!(va.cmp(&vb), ta.cmp(&tb), "{} vs {}", sa, sb);
        prop_assert_eq!(va == vb, ta == tb);
    }

    /// Anything but 2 or 3 dot-separated runs of digits is refused.
    #[test]
    fn driver_versions_with_the_wrong_number_of_parts_are_refused(parts in proptest::collection::vec(0u32..1000, 0..7)) {
        let s: Vec<String> = parts.iter().map(u32::to_string).collect();
        let s = s.join(".");
        prop_assert_eq!(DriverVersion::parse(&s).is_ok(), (2..=3).contains(&parts.len()), "{}", s);
    }
}

#[test]
fn the_generators_reach_every_layer_status() {
    // Guards the properties above against generators too weak to matter: a sample
    // of generated cases must cover Ready, NotReady and Unknown, governed ready
    // nodes, and non-empty plans.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeSet<(Layer, &str)> = BTreeSet::new();
    let mut ready = 0;
    let mut writes = 0;
    for _ in 0..2000 {
        let node = node().new_tree(&mut runner).expect("tree").current();
        let spec = profile_spec()
            .new_tree(&mut runner)
            .expect("tree")
            .current();
        let report = gpuready_core::evaluate(&spec, &NodeFacts::from_node(&node), now());
        for l in &report.layers {
            seen.insert((l.layer, l.status.as_str()));
        }
        ready += usize::from(report.ready());
        let a = assess_with(&node, &[GpuNodeProfile::new("p", spec)], &opts());
        writes += usize::from(!a.changes.is_empty());
    }
    for layer in Layer::ALL {
        for status in ["Ready", "NotReady", "Unknown"] {
            assert!(
                seen.contains(&(layer, status)),
                "never saw {layer} {status}"
            );
        }
    }
    assert!(ready > 20, "only {ready} ready nodes in 2000");
    assert!(writes > 200, "only {writes} plans with writes in 2000");
}
