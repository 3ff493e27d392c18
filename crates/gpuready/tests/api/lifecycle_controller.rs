//! The node's lifecycle against the real API server: a GPU operator driver
//! upgrade wave (the labels changed as the upgrade controller changes them,
//! in its order), a MIG change with and without a profile `mig` section, and
//! other readiness gates. Maintenance keeps a node gated under its own reason
//! and out of the failure count, so the not-ready count stays 0 and the
//! safety brake — set here to engage on a single turn — never engages; a
//! node another gate holds says so and gpuready leaves the gate alone.
//! Each step prints the node's reason and the profile's counts (the run's
//! log is the evidence the issue asks for).

use crate::support;

use gpuready_api::keys::{self, lifecycle as lc};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

/// Profile status counts: matched, ready, not ready, maintenance, waiting.
async fn counts(client: &Client, profile: &str) -> Option<(i32, i32, i32, i32, i32)> {
    let s = get_profile(client, profile).await.status?;
    Some((
        s.matched_nodes,
        s.ready_nodes,
        s.not_ready_nodes,
        s.maintenance_nodes,
        s.waiting_for_gate_nodes,
    ))
}

/// Merges labels into the node and sets its cordon, as the upgrade
/// controller and mig-manager do (one request each, like them).
async fn relabel(client: &Client, node: &str, labels: Value, cordon: Option<bool>) {
    set_labels(client, node, labels).await;
    if let Some(on) = cordon {
        Api::<Node>::all(client.clone())
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "spec": { "unschedulable": if on { json!(true) } else { Value::Null } } })),
            )
            .await
            .unwrap_or_else(|e| panic!("cordon {node}: {e}"));
    }
}

async fn wait_reason(client: &Client, node: &str, status: &str, reason: &str) -> Node {
    eventually(
        30,
        &format!("{node}: GpuReady {status} {reason}"),
        || async {
            let n = get_node(client, node).await;
            (gpu_ready(&n) == Some((status.into(), reason.into()))).then_some(n)
        },
    )
    .await
}

/// The driver upgrade's evidence at each state: cordoned from
/// cordon-required through validation-required (the controller uncordons in
/// uncordon-required), the device plugin paused and allocatable 0 while the
/// driver pod restarts.
async fn to_step(client: &Client, node: &str, state: &str) {
    let cordoned = !matches!(
        state,
        "upgrade-required" | "uncordon-required" | "upgrade-done"
    );
    let paused = if state == "pod-restart-required" {
        json!(lc::PAUSED_FOR_DRIVER_UPGRADE)
    } else {
        json!("true")
    };
    relabel(
        client,
        node,
        json!({
            lc::DRIVER_UPGRADE_STATE: state,
            "nvidia.com/gpu.deploy.device-plugin": paused,
        }),
        Some(cordoned),
    )
    .await;
    let gpus = if state == "pod-restart-required" {
        0
    } else {
        1
    };
    set_node_status(client, node, 1, gpus, true).await;
}

fn expected(state: &str) -> (&'static str, &'static str, bool) {
    match state {
        "upgrade-required" | "upgrade-done" => ("True", "Ready", false),
        _ => ("False", lc::DRIVER_UPGRADE_IN_PROGRESS, true),
    }
}

#[tokio::test]
async fn a_driver_upgrade_wave_is_maintenance_not_failure() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let nodes = ["gpu-1", "gpu-2", "gpu-3"];
    for n in nodes {
        create_node(&client, n, rtx3090_in("w"), 1, json!([])).await;
    }
    apply_profile(&client, &rtx3090_profile("wave", "w", "")).await;
    // A brake that engages on a single ready→not-ready turn: any node of the
    // wave counted as a failure would trip it.
    let run = start_controller(
        &env,
        run_args(&["--brake-threshold=0.2", "--brake-min-nodes=1"]),
    );
    for n in nodes {
        wait_reason(&client, n, "True", "Ready").await;
    }
    // The upgrade controller queues every outdated node; the wave takes two
    // at a time (maxParallelUpgrades: 2), then the third.
    for n in nodes {
        to_step(&client, n, "upgrade-required").await;
    }
    for wave in [&nodes[..2], &nodes[2..]] {
        // Every state in the upgrade controller's order, upgrade-failed aside.
        for state in lc::UPGRADE_STATES
            .into_iter()
            .filter(|s| *s != lc::UPGRADE_FAILED)
        {
            for n in wave {
                to_step(&client, n, state).await;
            }
            let (status, reason, tainted) = expected(state);
            for n in wave {
                let node = wait_reason(&client, n, status, reason).await;
                assert_eq!(gated(&node), tainted, "{n} at {state}: taint");
            }
            let in_maintenance = if tainted { wave.len() as i32 } else { 0 };
            let want = (3, 3 - in_maintenance, 0, in_maintenance, 0);
            eventually(30, &format!("profile counts at {state}"), || async {
                (counts(&client, "wave").await == Some(want)).then_some(())
            })
            .await;
            let node = get_node(&client, wave[0]).await;
            say!(
                "upgrade {:<28} {}: GpuReady {} {:<24} taint {:<5} | profile ready {} notReady {} maintenance {} | not_ready metric {} maintenance metric {} brake {}",
                state,
                wave[0],
                status,
                reason,
                gated(&node),
                want.1,
                want.2,
                want.3,
                run.sample("gpuready_nodes{profile=\"wave\",state=\"not_ready\"}"),
                run.sample("gpuready_nodes{profile=\"wave\",state=\"maintenance\"}"),
                run.sample("gpuready_safety_brake_engaged{profile=\"wave\"}"),
            );
            assert_eq!(
                run.sample("gpuready_nodes{profile=\"wave\",state=\"not_ready\"}"),
                0.0
            );
            assert_eq!(
                run.sample("gpuready_safety_brake_engaged{profile=\"wave\"}"),
                0.0
            );
        }
    }
    // The message of a node in maintenance names the state and what is down.
    // The state label and the allocatable drop are two requests (as the
    // upgrade controller and the kubelet make them): the reason follows the
    // first, the down layer the second, so wait for the message to name both.
    to_step(&client, "gpu-1", "pod-restart-required").await;
    let message = eventually(
        30,
        "gpu-1's message names the state and the down layer",
        || async {
            let n = get_node(&client, "gpu-1").await;
            let message = gpu_ready_message(&n);
            let in_maintenance =
                gpu_ready(&n) == Some(("False".into(), lc::DRIVER_UPGRADE_IN_PROGRESS.into()));
            (in_maintenance
                && message.contains("pod-restart-required")
                && message.contains("DevicePlugin: "))
            .then_some(message)
        },
    )
    .await;
    say!("gpu-1 GpuReady message: {message}");
    // It ends badly: upgrade-failed is a failure like any other.
    relabel(
        &client,
        "gpu-1",
        json!({ lc::DRIVER_UPGRADE_STATE: lc::UPGRADE_FAILED }),
        None,
    )
    .await;
    wait_reason(&client, "gpu-1", "False", lc::DRIVER_UPGRADE_FAILED).await;
    eventually(30, "the failed upgrade counts as not ready", || async {
        (counts(&client, "wave").await == Some((3, 2, 1, 0, 0))).then_some(())
    })
    .await;
    assert_eq!(
        profile_condition(&client, "wave", keys::CONDITION_SAFETY_BRAKE).await,
        Some(("False".into(), keys::brake_reasons::RELEASED.into()))
    );
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_mig_change_is_maintenance_with_or_without_a_mig_section() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let mig_labels = |pool: &str| {
        let mut l = rtx3090_in(pool);
        l.insert("nvidia.com/mig.config".into(), "all-1g.5gb".into());
        l.insert("nvidia.com/mig.config.state".into(), "success".into());
        l
    };
    create_node(&client, "plain-1", mig_labels("m1"), 1, json!([])).await;
    create_node(&client, "mig-1", mig_labels("m2"), 1, json!([])).await;
    apply_profile(&client, &rtx3090_profile("plain", "m1", "")).await;
    apply_profile(
        &client,
        &rtx3090_profile("mig", "m2", "mig: { config: all-1g.5gb }"),
    )
    .await;
    let run = start_controller(&env, test_args());
    // mig-manager: pending (operands paused, the device plugin gone), the
    // node rebooting (kubelet down), success; then a config that fails.
    // Last, operands left paused with a state that does not explain it.
    let steps: [(&str, &str, u32, bool, &str, &str); 6] = [
        ("success", "true", 1, true, "True", "Ready"),
        (
            "pending",
            lc::PAUSED_FOR_MIG_CHANGE,
            0,
            true,
            "False",
            lc::MIG_RECONFIGURING,
        ),
        (
            "rebooting",
            lc::PAUSED_FOR_MIG_CHANGE,
            0,
            false,
            "False",
            lc::MIG_RECONFIGURING,
        ),
        ("success", "true", 1, true, "True", "Ready"),
        (
            "failed",
            "true",
            1,
            true,
            "False",
            keys::reasons::MIG_CONFIG_FAILED,
        ),
        (
            "success",
            lc::PAUSED_FOR_MIG_CHANGE,
            1,
            true,
            "False",
            lc::OPERANDS_PAUSED,
        ),
    ];
    for (state, deploy, gpus, kubelet, status, reason) in steps {
        for (node, profile) in [("plain-1", "plain"), ("mig-1", "mig")] {
            relabel(
                &client,
                node,
                json!({
                    "nvidia.com/mig.config.state": state,
                    "nvidia.com/gpu.deploy.device-plugin": deploy,
                }),
                None,
            )
            .await;
            set_node_status(&client, node, 1, gpus, kubelet).await;
            let n = wait_reason(&client, node, status, reason).await;
            let maintenance =
                i32::from(reason == lc::MIG_RECONFIGURING || reason == lc::OPERANDS_PAUSED);
            let failing = i32::from(reason == keys::reasons::MIG_CONFIG_FAILED);
            let want = (1, 1 - maintenance - failing, failing, maintenance, 0);
            eventually(30, &format!("{profile} counts at {state}"), || async {
                (counts(&client, profile).await == Some(want)).then_some(())
            })
            .await;
            say!(
                "mig {:<10} {:<8} ({:<16}) GpuReady {} {:<20} taint {:<5} | profile ready {} notReady {} maintenance {}",
                state,
                node,
                if profile == "mig" {
                    "mig section"
                } else {
                    "no mig section"
                },
                status,
                reason,
                gated(&n),
                want.1,
                want.2,
                want.3
            );
        }
    }
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn other_gates_are_named_and_left_alone() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    create_node(&client, "gpu-1", rtx3090_in("g"), 1, json!([])).await;
    apply_profile(&client, &rtx3090_profile("gates", "g", "")).await;
    let history = record_node(&client, "gpu-1").await;
    let run = start_controller(&env, test_args());
    wait_reason(&client, "gpu-1", "True", "Ready").await;
    let api: Api<Node> = Api::all(client.clone());
    let set_taints = |taints: Value| {
        let api = api.clone();
        async move {
            api.patch(
                "gpu-1",
                &PatchParams::default(),
                &Patch::Merge(&json!({ "spec": { "taints": taints } })),
            )
            .await
            .expect("taints")
        }
    };
    // NodeWright still tuning the node.
    let nodewright =
        json!({ "key": lc::NODEWRIGHT_TAINT, "value": "runtime-required", "effect": "NoSchedule" });
    set_taints(json!([nodewright])).await;
    let n = wait_reason(&client, "gpu-1", "False", lc::WAITING_FOR_GATE).await;
    assert!(!gated(&n), "gpuready holds no taint for another gate");
    assert_eq!(foreign_taints(&n), [lc::NODEWRIGHT_TAINT]);
    assert_eq!(label(&n, keys::LABEL_READY).as_deref(), Some("false"));
    eventually(30, "the profile counts it waiting", || async {
        (counts(&client, "gates").await == Some((1, 0, 0, 0, 1))).then_some(())
    })
    .await;
    say!(
        "gate nodewright: GpuReady False WaitingForGate | profile ready 0 notReady 0 waitingForGate 1 | waiting metric {}",
        run.sample("gpuready_nodes{profile=\"gates\",state=\"waiting_for_gate\"}")
    );
    // NodeWright done: ready.
    set_taints(json!([])).await;
    wait_reason(&client, "gpu-1", "True", "Ready").await;
    // A cordon someone else set, then lifted.
    relabel(&client, "gpu-1", json!({}), Some(true)).await;
    wait_reason(&client, "gpu-1", "False", lc::WAITING_FOR_GATE).await;
    relabel(&client, "gpu-1", json!({}), Some(false)).await;
    wait_reason(&client, "gpu-1", "True", "Ready").await;
    // NodeWright's persistent cordon: first a cordon nobody is named for,
    // then NodeWright's annotation beside it (an annotation alone changes:
    // the controller's cache keeps it and the node is judged again), then
    // the outside validator's release, annotation and cordon in one patch.
    relabel(&client, "gpu-1", json!({}), Some(true)).await;
    eventually(30, "an unknown owner's cordon", || async {
        Some(gpu_ready_message(&get_node(&client, "gpu-1").await))
            .filter(|m| m.contains("an unknown owner (spec.unschedulable)"))
    })
    .await;
    let annotate = |value: Value, unschedulable: Value| {
        let api = api.clone();
        async move {
            api.patch(
                "gpu-1",
                &PatchParams::default(),
                &Patch::Merge(&json!({
                    "metadata": { "annotations": { lc::NODEWRIGHT_RUNTIME_REQUIRED_CORDON: value } },
                    "spec": { "unschedulable": unschedulable },
                })),
            )
            .await
            .expect("annotate")
        }
    };
    annotate(json!("true"), json!(true)).await;
    let m = eventually(30, "NodeWright's persistent cordon named", || async {
        Some(gpu_ready_message(&get_node(&client, "gpu-1").await)).filter(|m| {
            m.contains(
                "NodeWright (spec.unschedulable, nodewright.nvidia.com/runtimeRequiredCordon)",
            )
        })
    })
    .await;
    assert!(
        m.contains("released when an outside validator removes"),
        "{m}"
    );
    eventually(30, "the profile counts it under NodeWright", || async {
        let s = get_profile(&client, "gates").await.status?;
        let held: Vec<(String, i32)> = s
            .held_by_system
            .iter()
            .map(|c| (c.system.as_str().to_owned(), c.nodes))
            .collect();
        (held == [("NodeWright".to_owned(), 1)]).then_some(())
    })
    .await;
    say!("gate nodewright cordon: {m}");
    annotate(Value::Null, Value::Null).await;
    wait_reason(&client, "gpu-1", "True", "Ready").await;
    eventually(30, "no system holds a node", || async {
        let s = get_profile(&client, "gates").await.status?;
        s.held_by_system.is_empty().then_some(())
    })
    .await;
    // Another readiness controller's gate.
    set_taints(json!([{ "key": "readiness.k8s.io/network-ready", "value": "false", "effect": "NoSchedule" }])).await;
    wait_reason(&client, "gpu-1", "False", lc::WAITING_FOR_GATE).await;
    set_taints(json!([])).await;
    wait_reason(&client, "gpu-1", "True", "Ready").await;
    // gpuready never cordoned or uncordoned: the cordon changed four times,
    // by the test; NodeWright's annotation came and went by the test alone.
    let versions = history.snapshot();
    let cordoned = |n: &Node| n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    assert_eq!(transitions(&versions, cordoned), 4);
    let annotated = |n: &Node| {
        n.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(lc::NODEWRIGHT_RUNTIME_REQUIRED_CORDON))
    };
    assert_eq!(transitions(&versions, annotated), 2);
    // No version carried gpuready's taint beside another gate.
    assert!(
        versions
            .iter()
            .all(|v| !gated(v) || foreign_taints(v).is_empty()),
        "gpuready never held its taint for another gate"
    );
    run.stop().await.expect("clean stop");
}
