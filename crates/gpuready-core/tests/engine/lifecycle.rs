//! The node's lifecycle beside its layers: maintenance the GPU operator drives
//! (driver upgrades in waves, MIG changes, paused operands), its bad ends, the
//! maintenance deadline, and the readiness gates other systems hold — judged
//! on nodes described with `NodeBuilder`, as data: each row is a node's
//! labels and taints and what gpuready must make of them.

use crate::common;

use common::*;
use gpuready_api::NeighbourSystem;
use gpuready_api::keys::{self, lifecycle as lc, nvidia};
use gpuready_core::report::NodeState;
use gpuready_core::tally::ProfileTally;
use gpuready_core::{NodeAssessment, TaintChangeKind};
use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const TAINT: &str = "readiness.k8s.io/gpuready-not-ready=true:NoSchedule";

/// A node of the pool: one RTX 3090, labelled the way GFD and NFD label it.
fn node(name: &str) -> NodeBuilder {
    NodeBuilder::gpu(name)
}

/// The evidence a node shows at each step of a GPU operator driver upgrade
/// (k8s-operator-libs' states, in order): the controller cordons it, evicts
/// the workloads, restarts the driver pod (the driver manager pauses the
/// operands and the device plugin unregisters: allocatable 0), validates
/// the new driver, uncordons it.
fn at_upgrade_step(n: NodeBuilder, state: &str) -> NodeBuilder {
    let cordoned = matches!(
        state,
        "cordon-required"
            | "wait-for-jobs-required"
            | "pod-deletion-required"
            | "drain-required"
            | "node-maintenance-required"
            | "post-maintenance-required"
            | "pod-restart-required"
            | "validation-required"
    );
    let mut n = n.label(lc::DRIVER_UPGRADE_STATE, state).cordoned(cordoned);
    n = match state {
        "pod-restart-required" => n
            .label(
                "nvidia.com/gpu.deploy.device-plugin",
                lc::PAUSED_FOR_DRIVER_UPGRADE,
            )
            .label(
                "nvidia.com/gpu.deploy.gpu-feature-discovery",
                lc::PAUSED_FOR_DRIVER_UPGRADE,
            )
            .gpus(1, 0),
        "validation-required" | "uncordon-required" | "upgrade-done" | "upgrade-failed" => n
            .label("nvidia.com/gpu.deploy.device-plugin", "true")
            .label("nvidia.com/gpu.deploy.gpu-feature-discovery", "true")
            .driver("580.178.05")
            .gpus(1, 1),
        _ => n,
    };
    n
}

struct Row {
    what: &'static str,
    node: NodeBuilder,
    profile: &'static str,
    state: NodeState,
    reason: &'static str,
    /// Fragments the GpuReady message must hold.
    mentions: &'static [&'static str],
    /// gpuready's taint is wanted on the node.
    tainted: bool,
}

fn rows() -> Vec<Row> {
    let mig_profile = "mig: { config: all-1g.5gb }";
    vec![
        Row {
            what: "in service",
            node: node("n"),
            profile: "",
            state: NodeState::Ready,
            reason: "Ready",
            mentions: &["every gating layer is Ready"],
            tainted: false,
        },
        Row {
            what: "queued for an upgrade: upgrade-required takes nothing away yet",
            node: at_upgrade_step(node("n"), "upgrade-required"),
            profile: "",
            state: NodeState::Ready,
            reason: "Ready",
            mentions: &[],
            tainted: false,
        },
        Row {
            what: "the issue's node: pod-restart-required, device plugin paused, allocatable 0",
            node: at_upgrade_step(node("n"), "pod-restart-required"),
            profile: "",
            state: NodeState::Maintenance,
            reason: lc::DRIVER_UPGRADE_IN_PROGRESS,
            // The layer that is down says what it sees, under the maintenance reason.
            mentions: &[
                "nvidia.com/gpu-driver-upgrade-state=pod-restart-required",
                "step 7 of 9",
                "device-plugin=paused-for-driver-upgrade",
                "maintenance, not a failure",
                "DevicePlugin: ",
            ],
            tainted: true,
        },
        Row {
            what: "uncordon-required: every layer Ready, still gated until upgrade-done",
            node: at_upgrade_step(node("n"), "uncordon-required"),
            profile: "",
            state: NodeState::Maintenance,
            reason: lc::DRIVER_UPGRADE_IN_PROGRESS,
            mentions: &["every gating layer is Ready"],
            tainted: true,
        },
        Row {
            what: "upgrade-done: back in service",
            node: at_upgrade_step(node("n"), "upgrade-done"),
            profile: "",
            state: NodeState::Ready,
            reason: "Ready",
            mentions: &[],
            tainted: false,
        },
        Row {
            what: "upgrade-failed is a failure, whatever the layers say",
            node: at_upgrade_step(node("n"), "upgrade-failed"),
            profile: "",
            state: NodeState::NotReady,
            reason: lc::DRIVER_UPGRADE_FAILED,
            mentions: &["upgrade-failed", "driver pod's log"],
            tainted: true,
        },
        Row {
            what: "an upgrade state the controller may add later is not read as maintenance",
            node: node("n").label(lc::DRIVER_UPGRADE_STATE, "upgrade-skipped"),
            profile: "",
            state: NodeState::Ready,
            reason: "Ready",
            mentions: &[],
            tainted: false,
        },
        Row {
            what: "MIG change without a profile mig section: pending, operands paused",
            node: node("n")
                .label(nvidia::MIG_CONFIG, "all-1g.5gb")
                .label(nvidia::MIG_CONFIG_STATE, lc::MIG_PENDING)
                .label(
                    "nvidia.com/gpu.deploy.device-plugin",
                    lc::PAUSED_FOR_MIG_CHANGE,
                )
                .gpus(1, 0),
            profile: "",
            state: NodeState::Maintenance,
            reason: lc::MIG_RECONFIGURING,
            mentions: &[
                "re-partitioning the GPUs to all-1g.5gb",
                "nvidia.com/mig.config.state=pending",
                "device-plugin=paused-for-mig-change",
                "DevicePlugin: ",
            ],
            tainted: true,
        },
        Row {
            what: "MIG change under a mig profile: the Profile layer's MigConfigRebooting under MigReconfiguring",
            node: node("n")
                .label(nvidia::MIG_CONFIG, "all-1g.5gb")
                .label(nvidia::MIG_CONFIG_STATE, lc::MIG_REBOOTING),
            profile: mig_profile,
            state: NodeState::Maintenance,
            reason: lc::MIG_RECONFIGURING,
            mentions: &["the node reboots to apply it", "Profile: "],
            tainted: true,
        },
        Row {
            what: "MIG failed without a mig section is a failure",
            node: node("n")
                .label(nvidia::MIG_CONFIG, "all-1g.5gb")
                .label(nvidia::MIG_CONFIG_STATE, lc::MIG_FAILED),
            profile: "",
            state: NodeState::NotReady,
            reason: keys::reasons::MIG_CONFIG_FAILED,
            mentions: &["nvidia-mig-manager pod's log"],
            tainted: true,
        },
        Row {
            what: "MIG success under a mig profile: in service",
            node: node("n")
                .label(nvidia::MIG_CONFIG, "all-1g.5gb")
                .label(nvidia::MIG_CONFIG_STATE, "success"),
            profile: mig_profile,
            state: NodeState::Ready,
            reason: "Ready",
            mentions: &[],
            tainted: false,
        },
        Row {
            what: "operands paused with no state to explain it",
            node: node("n").label(
                "nvidia.com/gpu.deploy.dcgm-exporter",
                lc::PAUSED_FOR_MIG_CHANGE,
            ),
            profile: "",
            state: NodeState::Maintenance,
            reason: lc::OPERANDS_PAUSED,
            mentions: &["dcgm-exporter=paused-for-mig-change"],
            tainted: true,
        },
        Row {
            what: "an operand an outside owner runs (deploy=false) is not paused",
            node: node("n").label("nvidia.com/gpu.deploy.driver", "false"),
            profile: "",
            state: NodeState::Ready,
            reason: "Ready",
            mentions: &[],
            tainted: false,
        },
        Row {
            what: "NodeWright still tuning: GPU stack ready, waiting for its gate",
            node: node("n").taint(lc::NODEWRIGHT_TAINT, "runtime-required", "NoSchedule"),
            profile: "",
            state: NodeState::WaitingForGate,
            reason: lc::WAITING_FOR_GATE,
            mentions: &[
                "NodeWright (nodewright.nvidia.com=runtime-required:NoSchedule): applying its runtime-required packages",
                "released when every runtime-required NodeWright completes on this node",
                "every gating layer is Ready",
            ],
            tainted: false,
        },
        Row {
            what: "NodeWright under its former Skyhook key",
            node: node("n").taint(lc::SKYHOOK_TAINT, "runtime-required", "NoSchedule"),
            profile: "",
            state: NodeState::WaitingForGate,
            reason: lc::WAITING_FOR_GATE,
            mentions: &["NodeWright (skyhook.nvidia.com=runtime-required:NoSchedule)"],
            tainted: false,
        },
        Row {
            what: "another readiness.k8s.io gate",
            node: node("n").taint("readiness.k8s.io/network-ready", "false", "NoExecute"),
            profile: "",
            state: NodeState::WaitingForGate,
            reason: lc::WAITING_FOR_GATE,
            mentions: &[
                "a readiness controller (readiness.k8s.io/network-ready=false:NoExecute)",
                "released when the rule's controller removes the taint",
            ],
            tainted: false,
        },
        Row {
            what: "a cordon no known system marks",
            node: node("n").cordoned(true),
            profile: "",
            state: NodeState::WaitingForGate,
            reason: lc::WAITING_FOR_GATE,
            mentions: &[
                "an unknown owner (spec.unschedulable): cordoned by an admin",
                "released when whoever cordoned it uncordons it",
            ],
            tainted: false,
        },
        Row {
            what: "NVSentinel draining a node it quarantined: its cordon, named",
            node: node("n")
                .label(lc::NVSENTINEL_STATE, "draining")
                .cordoned(true),
            profile: "",
            state: NodeState::WaitingForGate,
            reason: lc::WAITING_FOR_GATE,
            mentions: &[
                "NVSentinel (dgxc.nvidia.com/nvsentinel-state=draining, cordoned): draining the node's workloads",
                "released when NVSentinel's health monitors report the node healthy",
            ],
            tainted: false,
        },
        Row {
            what: "NVSentinel's terminal drain-failed needs a person",
            node: node("n")
                .label(lc::NVSENTINEL_STATE, "drain-failed")
                .cordoned(true),
            profile: "",
            state: NodeState::WaitingForGate,
            reason: lc::WAITING_FOR_GATE,
            mentions: &[
                "terminal",
                "released when a person remediates the node by hand",
            ],
            tainted: false,
        },
        Row {
            what: "NVSentinel handed the node to an external remediation",
            node: node("n").taint(
                lc::NVSENTINEL_EXTERNAL_REMEDIATION_TAINT,
                "gpu0-xid79-node-01",
                "NoSchedule",
            ),
            profile: "",
            state: NodeState::WaitingForGate,
            reason: lc::WAITING_FOR_GATE,
            mentions: &[
                "NVSentinel (nvsentinel.nvidia.com/external-remediation=gpu0-xid79-node-01:NoSchedule): handed the node to an external remediation system",
                "sets ExternalRemediationComplete",
            ],
            tainted: false,
        },
        Row {
            what: "NodeWright's persistent cordon waits for an outside validator",
            node: node("n")
                .annotate(lc::NODEWRIGHT_RUNTIME_REQUIRED_CORDON, "true")
                .cordoned(true),
            profile: "",
            state: NodeState::WaitingForGate,
            reason: lc::WAITING_FOR_GATE,
            mentions: &[
                "NodeWright (spec.unschedulable, nodewright.nvidia.com/runtimeRequiredCordon)",
                "released when an outside validator removes the nodewright.nvidia.com/runtimeRequiredCordon annotation and uncordons",
            ],
            tainted: false,
        },
        Row {
            what: "NodeWright's interrupt cordon names the NodeWright",
            node: node("n")
                .annotate("nodewright.nvidia.com/cordon_gpu-tuning", "true")
                .cordoned(true),
            profile: "",
            state: NodeState::WaitingForGate,
            reason: lc::WAITING_FOR_GATE,
            mentions: &[
                "NodeWright (spec.unschedulable, nodewright.nvidia.com/cordon_gpu-tuning)",
                "needs an interrupt",
            ],
            tainted: false,
        },
        Row {
            what: "NodeWright's annotation without a cordon holds nothing",
            node: node("n").annotate(lc::NODEWRIGHT_RUNTIME_REQUIRED_CORDON, "true"),
            profile: "",
            state: NodeState::Ready,
            reason: "Ready",
            mentions: &[],
            tainted: false,
        },
        Row {
            what: "gpuready's own taint is no other gate",
            node: node("n").taint(keys::DEFAULT_TAINT_KEY, "true", "NoSchedule"),
            profile: "",
            state: NodeState::Ready,
            reason: "Ready",
            mentions: &[],
            tainted: false,
        },
        Row {
            what: "PreferNoSchedule keeps no pod off: no gate",
            node: node("n").taint("readiness.k8s.io/soft", "x", "PreferNoSchedule"),
            profile: "",
            state: NodeState::Ready,
            reason: "Ready",
            mentions: &[],
            tainted: false,
        },
        Row {
            what: "a GPU failure under another gate is a failure, the gate named beside it",
            node: node("n").driver("570.86.15").taint(
                lc::NODEWRIGHT_TAINT,
                "runtime-required",
                "NoSchedule",
            ),
            profile: "minDriverVersion: 580.65.06",
            state: NodeState::NotReady,
            reason: "DriverTooOld",
            mentions: &["also held by another readiness gate: NodeWright (nodewright.nvidia.com"],
            tainted: true,
        },
    ]
}

fn assess_row(r: &Row) -> NodeAssessment {
    assess_with(&r.node.clone().build(), &[profile("p", r.profile)], &opts())
}

#[test]
fn every_lifecycle_row_gets_its_state_reason_and_taint() {
    for r in rows() {
        let a = assess_row(&r);
        assert_eq!(a.state, Some(r.state), "{}: {}", r.what, a.message);
        assert_eq!(a.reason, r.reason, "{}: {}", r.what, a.message);
        assert_eq!(
            a.ready,
            Some(r.state == NodeState::Ready),
            "{}: ready follows the state",
            r.what
        );
        for m in r.mentions {
            assert!(
                a.message.contains(m),
                "{}: {:?} should mention {m:?}",
                r.what,
                a.message
            );
        }
        let after = {
            let mut n = r.node.clone().build();
            apply(&mut n, &a.changes);
            n
        };
        assert_eq!(
            node_taints(&after).iter().any(|t| t == TAINT),
            r.tainted,
            "{}: taints {:?}",
            r.what,
            node_taints(&after)
        );
        // gpuready never touches another gate: every taint that is not its
        // own is still there, in place.
        let before: Vec<String> = node_taints(&r.node.clone().build())
            .into_iter()
            .filter(|t| !t.starts_with(keys::DEFAULT_TAINT_KEY))
            .collect();
        let kept: Vec<String> = node_taints(&after)
            .into_iter()
            .filter(|t| !t.starts_with(keys::DEFAULT_TAINT_KEY))
            .collect();
        assert_eq!(before, kept, "{}: foreign taints untouched", r.what);
        // gpuready never cordons or uncordons either (its node patch has no spec
        // but the taint list).
        let gpu_ready = condition(&after, keys::CONDITION_GPU_READY).expect("GpuReady");
        assert_eq!(
            gpu_ready.status,
            if r.state == NodeState::Ready {
                "True"
            } else {
                "False"
            },
            "{}",
            r.what
        );
    }
}

/// One node through every state of a driver upgrade, reconciled at each
/// step as the controller would (the previous step's writes applied): the
/// taint goes on when the upgrade takes the node out of service and comes off
/// when it is done and every layer is Ready; the node is never a failure.
#[test]
fn a_node_walks_through_a_driver_upgrade_in_the_controllers_order() {
    let p = profile("p", "");
    let mut seen = Vec::new();
    let mut current = node("gpu-1").build();
    for state in lc::UPGRADE_STATES
        .iter()
        .copied()
        .filter(|s| *s != lc::UPGRADE_FAILED)
    {
        let n = at_upgrade_step(NodeBuilder::from_node(current.clone()), state).build();
        let a = assess_with(&n, std::slice::from_ref(&p), &opts());
        let mut after = n.clone();
        apply(&mut after, &a.changes);
        let taint = a.changes.taint.as_ref().map(|t| t.kind);
        seen.push((state, a.reason.clone(), a.state, taint));
        assert_ne!(a.state, Some(NodeState::NotReady), "{state}: {}", a.message);
        // The upgrade controller's cordon is its maintenance, not another gate.
        assert!(
            a.lifecycle.gates.is_empty(),
            "{state}: {:?}",
            a.lifecycle.gates
        );
        current = after;
    }
    let expected: Vec<(&str, &str, Option<TaintChangeKind>)> = vec![
        ("upgrade-required", "Ready", None),
        (
            "cordon-required",
            lc::DRIVER_UPGRADE_IN_PROGRESS,
            Some(TaintChangeKind::Add),
        ),
        (
            "wait-for-jobs-required",
            lc::DRIVER_UPGRADE_IN_PROGRESS,
            None,
        ),
        (
            "pod-deletion-required",
            lc::DRIVER_UPGRADE_IN_PROGRESS,
            None,
        ),
        ("drain-required", lc::DRIVER_UPGRADE_IN_PROGRESS, None),
        (
            "node-maintenance-required",
            lc::DRIVER_UPGRADE_IN_PROGRESS,
            None,
        ),
        (
            "post-maintenance-required",
            lc::DRIVER_UPGRADE_IN_PROGRESS,
            None,
        ),
        ("pod-restart-required", lc::DRIVER_UPGRADE_IN_PROGRESS, None),
        ("validation-required", lc::DRIVER_UPGRADE_IN_PROGRESS, None),
        ("uncordon-required", lc::DRIVER_UPGRADE_IN_PROGRESS, None),
        ("upgrade-done", "Ready", Some(TaintChangeKind::Remove)),
    ];
    let got: Vec<(&str, &str, Option<TaintChangeKind>)> = seen
        .iter()
        .map(|(s, r, _, t)| (*s, r.as_str(), *t))
        .collect();
    assert_eq!(got, expected);
}

/// A wave over three nodes, one state each, counted the way profile status
/// and the metrics count them: the node in maintenance is neither ready nor a
/// failure, so not-ready stays 0 while the wave runs.
#[test]
fn a_wave_counts_maintenance_apart_from_failures() {
    let p = profile("p", "");
    let nodes = [
        at_upgrade_step(node("gpu-1"), "upgrade-done"),
        at_upgrade_step(node("gpu-2"), "pod-restart-required"),
        at_upgrade_step(node("gpu-3"), "upgrade-required"),
        node("gpu-4").taint(lc::NODEWRIGHT_TAINT, "runtime-required", "NoSchedule"),
    ];
    let assessed: Vec<NodeAssessment> = nodes
        .iter()
        .map(|n| assess_with(&n.clone().build(), std::slice::from_ref(&p), &opts()))
        .collect();
    let t = ProfileTally::of(&assessed);
    assert_eq!(
        (
            t.counts.ready,
            t.counts.not_ready,
            t.counts.maintenance,
            t.counts.waiting_for_gate
        ),
        (2, 0, 1, 1)
    );
    assert!(t.not_ready.is_empty(), "{:?}", t.not_ready);
    let m = &t.maintenance["gpu-2"];
    assert_eq!(
        (m.reason.as_str(), m.detail.as_str()),
        (lc::DRIVER_UPGRADE_IN_PROGRESS, "pod-restart-required")
    );
    assert!(t.waiting_for_gate["gpu-4"].detail.contains("nodewright"));
    let status = gpuready_core::status::status_from_tally(
        "p",
        Some(1),
        &t,
        &Default::default(),
        None,
        now(),
    );
    assert_eq!(
        (
            status.matched_nodes,
            status.ready_nodes,
            status.not_ready_nodes,
            status.maintenance_nodes,
            status.waiting_for_gate_nodes
        ),
        (4, 2, 0, 1, 1)
    );
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", lc::NODES_IN_MAINTENANCE),
        "{}",
        ready.message
    );
    assert_eq!(status.maintenance_summary[0].detail, "pod-restart-required");
    assert_eq!(status.waiting_for_gate_summary[0].name, "gpu-4");
    // Who holds them: the upgrade controller's cordon, NodeWright's taint.
    let held: Vec<(NeighbourSystem, i32)> = status
        .held_by_system
        .iter()
        .map(|c| (c.system, c.nodes))
        .collect();
    assert_eq!(
        held,
        [
            (NeighbourSystem::NodeWright, 1),
            (NeighbourSystem::GpuOperator, 1)
        ]
    );
    let upgrade = &assessed[1].message;
    assert!(
        upgrade.contains("held by the GPU operator (spec.unschedulable, nvidia.com/gpu-driver-upgrade-state=pod-restart-required)")
            && upgrade.contains("released when the upgrade controller uncordons the node at uncordon-required"),
        "{upgrade}"
    );
}

/// The fleet's other systems, one node each, counted by system in profile
/// status the way they hold the node: a node two systems hold counts under
/// both, a failing node held by one counts too, and the counts stay a fixed
/// small set (the systems, then Other).
#[test]
fn profile_status_counts_the_nodes_each_system_holds() {
    let p = profile("p", "minDriverVersion: 580.65.06");
    let nodes = [
        node("nvs-1")
            .label(lc::NVSENTINEL_STATE, "quarantined")
            .cordoned(true),
        node("nvs-2").taint(
            lc::NVSENTINEL_EXTERNAL_REMEDIATION_TAINT,
            "gpu0-xid79-nvs-2",
            "NoSchedule",
        ),
        // A broken GPU NVSentinel quarantined: a failure, and held.
        node("nvs-3")
            .driver("570.86.15")
            .label(lc::NVSENTINEL_STATE, "remediating")
            .cordoned(true),
        node("nw-1")
            .annotate(lc::NODEWRIGHT_RUNTIME_REQUIRED_CORDON, "true")
            .cordoned(true)
            .taint(lc::NODEWRIGHT_TAINT, "runtime-required", "NoSchedule"),
        node("nrc-1").taint("readiness.k8s.io/network-ready", "false", "NoSchedule"),
        node("admin-1").cordoned(true),
        // NVSentinel and a readiness rule at once.
        node("both-1")
            .label(lc::NVSENTINEL_STATE, "draining")
            .taint("readiness.k8s.io/storage-ready", "pending", "NoSchedule"),
        node("free-1"),
    ];
    let assessed: Vec<NodeAssessment> = nodes
        .iter()
        .map(|n| assess_with(&n.clone().build(), std::slice::from_ref(&p), &opts()))
        .collect();
    let t = ProfileTally::of(&assessed);
    let status = gpuready_core::status::status_from_tally(
        "p",
        Some(1),
        &t,
        &Default::default(),
        None,
        now(),
    );
    let held: Vec<(&str, i32)> = status
        .held_by_system
        .iter()
        .map(|c| (c.system.as_str(), c.nodes))
        .collect();
    assert_eq!(
        held,
        [
            ("NVSentinel", 4),
            ("NodeWright", 1),
            ("NodeReadinessController", 2),
            ("Other", 1)
        ]
    );
    assert_eq!(
        (
            status.waiting_for_gate_nodes,
            status.not_ready_nodes,
            status.ready_nodes
        ),
        (6, 1, 1)
    );
    // The failing node names its GPU fault first and NVSentinel beside it.
    let nvs3 = &assessed[2];
    assert_eq!(nvs3.reason, "DriverTooOld");
    assert!(
        nvs3.message.contains(
            "also held by another readiness gate: NVSentinel (dgxc.nvidia.com/nvsentinel-state=remediating, cordoned)"
        ),
        "{}",
        nvs3.message
    );
    // One NodeWright node, two marks: counted once.
    assert_eq!(assessed[3].lifecycle.gates.len(), 2);
    // The summary's detail names who, short.
    assert_eq!(
        t.waiting_for_gate["nvs-1"].detail,
        "NVSentinel (dgxc.nvidia.com/nvsentinel-state=quarantined, cordoned)"
    );
}

fn gpu_ready_since(secs_ago: i64) -> NodeCondition {
    NodeCondition {
        type_: keys::CONDITION_GPU_READY.into(),
        status: "False".into(),
        reason: Some(lc::DRIVER_UPGRADE_IN_PROGRESS.into()),
        message: Some("…".into()),
        last_transition_time: Some(Time(at(-secs_ago))),
        last_heartbeat_time: None,
    }
}

#[test]
fn maintenance_past_the_profile_deadline_is_stuck() {
    let profile_yaml = "maintenance: { deadlineSeconds: 3600 }";
    let p = profile("p", profile_yaml);
    let step = |secs_ago: i64| {
        let n = at_upgrade_step(node("n"), "drain-required")
            .condition(gpu_ready_since(secs_ago))
            .build();
        assess_with(&n, std::slice::from_ref(&p), &opts())
    };
    let within = step(3000);
    assert_eq!(within.state, Some(NodeState::Maintenance));
    // Re-checked when the deadline falls, not by polling.
    assert_eq!(within.recheck_after_seconds, Some(600));
    let past = step(3601);
    assert_eq!(past.state, Some(NodeState::NotReady));
    assert_eq!(past.reason, lc::MAINTENANCE_STUCK);
    assert!(
        past.message.contains("longer than the 1h deadline")
            && past.message.contains("drain-required"),
        "{}",
        past.message
    );
    // A node ready until now enters maintenance now: not stuck, whatever its age.
    let fresh = assess_with(
        &at_upgrade_step(node("n"), "drain-required").build(),
        std::slice::from_ref(&p),
        &opts(),
    );
    assert_eq!(fresh.state, Some(NodeState::Maintenance));
}

#[test]
fn maintenance_does_not_run_against_the_not_ready_deadline() {
    let p = profile("p", "notReadyDeadline: { seconds: 600, since: LastReady }");
    let n = at_upgrade_step(node("n"), "pod-restart-required")
        .condition(gpu_ready_since(7200))
        .build();
    let a = assess_with(&n, std::slice::from_ref(&p), &opts());
    assert_eq!(a.reason, lc::DRIVER_UPGRADE_IN_PROGRESS);
    assert!(a.deadline_passed.is_none());
}

/// Without device gating the node's own taint escalates: its effect for the
/// dry run after GpuReady left True, then NoExecute (replaced in place, the
/// annotation naming it), and released as usual once the node recovers.
#[test]
fn a_node_taint_escalates_to_no_execute_after_its_window() {
    let p = profile(
        "p",
        "minDriverVersion: 580.65.06\nescalation: { reasons: [DriverTooOld], dryRunSeconds: 60 }",
    );
    let old = |secs_ago: i64| {
        node("n")
            .driver("570.86.15")
            .condition(NodeCondition {
                type_: keys::CONDITION_GPU_READY.into(),
                status: "False".into(),
                reason: Some("DriverTooOld".into()),
                message: Some("…".into()),
                last_transition_time: Some(Time(at(-secs_ago))),
                last_heartbeat_time: None,
            })
            .taint(keys::DEFAULT_TAINT_KEY, "true", "NoSchedule")
            .annotate(
                keys::ANNOTATION_TAINT,
                "readiness.k8s.io/gpuready-not-ready:NoSchedule",
            )
            .build()
    };
    let within = assess_with(&old(30), std::slice::from_ref(&p), &opts());
    assert!(
        within.changes.taint.is_none(),
        "still NoSchedule in the window"
    );
    assert_eq!(within.recheck_after_seconds, Some(30));
    assert!(
        within.message.contains("escalates to NoExecute at"),
        "{}",
        within.message
    );
    let (past, after, again) = reconcile_twice(&old(61), std::slice::from_ref(&p), &opts());
    let t = past.changes.taint.as_ref().expect("escalated");
    assert_eq!(t.kind, TaintChangeKind::Replace);
    assert_eq!(
        node_taints(&after),
        ["readiness.k8s.io/gpuready-not-ready=true:NoExecute"]
    );
    assert_eq!(
        annotation(&after, keys::ANNOTATION_TAINT),
        Some("readiness.k8s.io/gpuready-not-ready:NoExecute")
    );
    assert!(
        again.changes.taint.is_none(),
        "stays NoExecute: {:?}",
        again.changes
    );
    // Recovered: the NoExecute taint goes like any of gpuready's.
    let fixed = NodeBuilder::from_node(after).driver("580.95.05").build();
    let a = assess_with(&fixed, std::slice::from_ref(&p), &opts());
    assert_eq!(
        a.changes.taint.as_ref().map(|t| t.kind),
        Some(TaintChangeKind::Remove)
    );
    // A reason the profile does not name never escalates.
    let other = profile(
        "p",
        "minDriverVersion: 580.65.06\nescalation: { reasons: [FatalXid] }",
    );
    let a = assess_with(&old(3600), std::slice::from_ref(&other), &opts());
    assert!(a.changes.taint.is_none());
}
