//! The chart's ValidatingAdmissionPolicy against a real kube-apiserver: as
//! gpuready's ServiceAccount, every write gpuready makes passes (one
//! resourceVersion-locked merge patch with its taint, labels and annotation; its
//! conditions by server-side apply on nodes/status; its Lease; Events about Nodes)
//! and every change RBAC alone would allow but gpuready must never make is refused
//! (cordon, providerID, a foreign taint, label or annotation, capacity, the
//! kubelet's conditions, another Lease, Events about other objects).
//!
//! Needs the binaries from `tests/control-plane/build.sh`.

mod support;

use std::time::Duration;

use gpuready_testenv::TestEnv;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

const NS: &str = "gpuready-system";
const RELEASE: &str = "gpuready";

/// Renders the chart with defaults and applies the RBAC, ServiceAccount and the
/// admission policy (the Deployment is irrelevant here).
async fn install_policy(env: &TestEnv) {
    let rendered = render(env, RELEASE, NS, &[]).await;
    let keep: Vec<String> = rendered
        .split("\n---")
        .filter(|doc| {
            [
                "kind: ServiceAccount",
                "kind: ClusterRole",
                "kind: Role",
                "kind: RoleBinding",
                "kind: ValidatingAdmissionPolicy",
            ]
            .iter()
            .any(|k| doc.contains(k))
        })
        .map(str::to_owned)
        .collect();
    assert!(
        keep.iter()
            .any(|d| d.contains("kind: ValidatingAdmissionPolicyBinding")),
        "the chart renders the policy binding"
    );
    must(
        kubectl(env, &["create", "namespace", NS]),
        None,
        "create the namespace",
    )
    .await;
    must(
        kubectl(env, &["apply", "--server-side", "-f", "-"]),
        Some(&keep.join("\n---\n")),
        "apply the chart's RBAC and admission policy",
    )
    .await;
}

fn node() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": "gpu-0",
            "labels": { "gpu-pool": "a", "example.com/foreign": "keep" },
            "annotations": { "example.com/note": "keep" },
        },
        "spec": { "taints": [
            { "key": "example.com/maintenance", "effect": "NoSchedule" },
        ] },
    })
}

#[tokio::test]
async fn service_account_may_write_only_what_gpuready_owns() {
    let env = TestEnv::shared().await.expect("test control plane");
    let admin = env.client().expect("client");
    install_policy(env).await;

    let nodes: Api<Node> = Api::all(admin.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(node()).expect("node"),
        )
        .await
        .expect("create node");
    nodes
        .patch_status(
            "gpu-0",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "capacity": { "nvidia.com/gpu": "1" },
                "allocatable": { "nvidia.com/gpu": "1" },
                "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "ok", "lastHeartbeatTime": "2026-11-30T00:00:00Z",
                    "lastTransitionTime": "2026-11-30T00:00:00Z" }],
            }})),
        )
        .await
        .expect("kubelet status");

    let sa = env
        .client_as_service_account(NS, RELEASE)
        .expect("SA client");
    let sa_nodes: Api<Node> = Api::all(sa.clone());
    let rv = || async {
        nodes
            .get("gpu-0")
            .await
            .expect("node")
            .metadata
            .resource_version
            .expect("rv")
    };

    // A forbidden change, retried until the policy is active (it is loaded
    // asynchronously after the binding is created).
    let cordon = || async {
        sa_nodes
            .patch(
                "gpu-0",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "unschedulable": true } })),
            )
            .await
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match cordon().await {
            Err(e) if status_code(&e) == Some(403) || status_code(&e) == Some(422) => {
                let msg = e.to_string();
                assert!(msg.contains("no cordon"), "{msg}");
                break;
            }
            Ok(_) => {
                // Not active yet: undo and retry.
                nodes
                    .patch(
                        "gpu-0",
                        &PatchParams::default(),
                        &Patch::Merge(json!({ "spec": { "unschedulable": null } })),
                    )
                    .await
                    .expect("uncordon");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the policy never refused a cordon"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("cordon: {e}"),
        }
    }

    // Needed: gpuready's node write (taint, labels, annotation, one locked merge
    // patch) and its condition (server-side apply on nodes/status).
    // The taints as they are (the API server adds node.kubernetes.io/not-ready at
    // creation), plus gpuready's: read, change only our key, write locked.
    let current = nodes.get("gpu-0").await.expect("node");
    let foreign: Vec<Value> = current
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .iter()
        .map(|t| serde_json::to_value(t).expect("taint"))
        .collect();
    let mut with_ours = foreign.clone();
    with_ours
        .push(json!({ "key": "readiness.k8s.io/gpuready-not-ready", "value": "true", "effect": "NoSchedule" }));
    sa_nodes
        .patch(
            "gpu-0",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {
                    "resourceVersion": current.metadata.resource_version,
                    "labels": { "gpuready.io/ready": "false", "gpuready.io/profile": "p" },
                    "annotations": { "gpuready.io/released-at": "2026-11-30T00:00:00Z" },
                },
                "spec": { "taints": with_ours },
            })),
        )
        .await
        .expect("gpuready's own taint, labels and annotation pass");
    sa_nodes
        .patch_status(
            "gpu-0",
            &PatchParams::apply("gpuready"),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "Node",
                "status": { "conditions": [{ "type": "GpuReady", "status": "False",
                    "reason": "DriverTooOld", "message": "m",
                    "lastHeartbeatTime": "2026-11-30T00:00:00Z",
                    "lastTransitionTime": "2026-11-30T00:00:00Z" }] },
            })),
        )
        .await
        .expect("gpuready's own condition passes");
    sa_nodes
        .patch(
            "gpu-0",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": { "resourceVersion": rv().await, "labels": { "gpuready.io/ready": null } },
                "spec": { "taints": foreign.clone() },
            })),
        )
        .await
        .expect("removing its own taint and label passes");

    // Forbidden: each one a change RBAC's `patch nodes` would allow.
    let forbidden: Vec<(&str, bool, Value)> = vec![
        (
            "set providerID",
            false,
            json!({ "spec": { "providerID": "aws:///i-1" } }),
        ),
        (
            "remove a foreign taint",
            false,
            json!({ "spec": { "taints": [] } }),
        ),
        (
            "add a foreign taint key",
            false,
            json!({ "spec": { "taints": foreign.iter().cloned().chain([
                json!({ "key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule" }),
            ]).collect::<Vec<_>>() } }),
        ),
        (
            "overwrite a foreign label",
            false,
            json!({ "metadata": { "labels": { "example.com/foreign": "taken" } } }),
        ),
        (
            "remove a foreign label",
            false,
            json!({ "metadata": { "labels": { "gpu-pool": null } } }),
        ),
        (
            "add a label outside gpuready.io/",
            false,
            json!({ "metadata": { "labels": { "kubernetes.io/hostname": "x" } } }),
        ),
        (
            "change a foreign annotation",
            false,
            json!({ "metadata": { "annotations": { "example.com/note": "x" } } }),
        ),
        (
            "fake GPU capacity",
            true,
            json!({ "status": { "capacity": { "nvidia.com/gpu": "8" } } }),
        ),
        (
            "fake allocatable",
            true,
            json!({ "status": { "allocatable": { "nvidia.com/gpu": "8" } } }),
        ),
        (
            "overwrite the kubelet's Ready condition",
            true,
            json!({ "status": { "conditions": [{ "type": "Ready", "status": "False",
                "reason": "Faked", "message": "m",
                "lastHeartbeatTime": "2026-11-30T00:00:00Z",
                "lastTransitionTime": "2026-11-30T00:00:00Z" }] } }),
        ),
    ];
    let mut failures = Vec::new();
    for (what, status, patch) in forbidden {
        let result = if status {
            sa_nodes
                .patch_status("gpu-0", &PatchParams::default(), &Patch::Strategic(patch))
                .await
        } else {
            sa_nodes
                .patch("gpu-0", &PatchParams::default(), &Patch::Merge(patch))
                .await
        };
        match result {
            Err(e) if matches!(status_code(&e), Some(403 | 422)) => {}
            other => failures.push(format!("{what}: expected a refusal, got {other:?}")),
        }
    }

    // Leases: only its own; Events: only about Nodes and GpuNodeProfiles.
    let lease = |name: &str| -> Lease {
        serde_json::from_value(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": { "name": name, "namespace": NS },
        }))
        .expect("lease")
    };
    let leases: Api<Lease> = Api::namespaced(sa.clone(), NS);
    if let Err(e) = leases.create(&PostParams::default(), &lease(RELEASE)).await {
        failures.push(format!("its own Lease: {e}"));
    }
    match leases
        .create(&PostParams::default(), &lease("someone-elses-lease"))
        .await
    {
        Err(e) if matches!(status_code(&e), Some(403 | 422)) => {}
        other => failures.push(format!("another Lease: expected a refusal, got {other:?}")),
    }
    let event = |kind: &str| -> Event {
        serde_json::from_value(json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": { "generateName": "gpuready-", "namespace": "default" },
            "eventTime": "2026-11-30T00:00:00.000000Z",
            "reportingController": "gpuready", "reportingInstance": "gpuready-0",
            "action": "Evaluate", "reason": "Test", "type": "Normal",
            "regarding": { "kind": kind, "name": "gpu-0", "apiVersion": "v1" },
        }))
        .expect("event")
    };
    let events: Api<Event> = Api::namespaced(sa.clone(), "default");
    if let Err(e) = events.create(&PostParams::default(), &event("Node")).await {
        failures.push(format!("an Event about a Node: {e}"));
    }
    match events
        .create(&PostParams::default(), &event("Secret"))
        .await
    {
        Err(e) if matches!(status_code(&e), Some(403 | 422)) => {}
        other => failures.push(format!(
            "an Event about a Secret: expected a refusal, got {other:?}"
        )),
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Nothing foreign changed through it all.
    let n = nodes.get("gpu-0").await.expect("node");
    let labels = n.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("example.com/foreign").map(String::as_str),
        Some("keep")
    );
    assert_eq!(labels.get("gpu-pool").map(String::as_str), Some("a"));
    assert_eq!(n.spec.and_then(|s| s.unschedulable), None);
}
