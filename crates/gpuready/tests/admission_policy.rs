//! The chart's ValidatingAdmissionPolicies against a real kube-apiserver, as
//! gpuready's ServiceAccount (impersonated, with the chart's RBAC):
//!
//! - gpuready itself, run as the ServiceAccount, converges a node through the
//!   policies and releases it (taint, labels, annotations, conditions) when its
//!   profile goes — with a profile created *after* the chart was installed, whose
//!   taint key and readyLabels key no chart value lists: the policies read what
//!   they need from the objects, so they can never strand a node;
//! - each of the 10 writes issue 24 found possible beyond gpuready's fields is
//!   refused, and so is every change RBAC alone would allow but gpuready must
//!   never make (cordon, providerID, a foreign taint, label or annotation,
//!   capacity, the kubelet's conditions, another Lease, Events about other
//!   objects);
//! - the CEL key rules the policy applies are the CRD's own rules, word for word.
//!
//! Needs the binaries from `tests/control-plane/build.sh`.

mod support;

use std::time::Duration;

use gpuready_api::keys;
use gpuready_testenv::TestEnv;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

const NS: &str = "gpuready-system";
const RELEASE: &str = "gpuready";

/// Renders the chart with defaults and applies its CRD, RBAC, ServiceAccount
/// and admission policies (the Deployment is irrelevant here).
async fn install_policy(env: &TestEnv) -> String {
    let rendered = render(env, RELEASE, NS, &[]).await;
    let keep: Vec<String> = rendered
        .split("\n---")
        .filter(|doc| {
            [
                "kind: CustomResourceDefinition",
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
    assert_eq!(
        keep.iter()
            .filter(|d| d.contains("kind: ValidatingAdmissionPolicyBinding"))
            .count(),
        2,
        "the chart renders both policy bindings"
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
        "apply the chart's CRD, RBAC and admission policies",
    )
    .await;
    wait_established(
        &env.client().expect("client"),
        &["gpunodeprofiles.gpuready.io"],
    )
    .await;
    rendered
}

/// The rules of the CRD (`self.key` on taint.key, `k` on readyLabels keys)
/// appear in the rendered policy verbatim: one rule set for what a profile may
/// ask for and what gpuready may write.
fn assert_policy_uses_the_crds_rules(rendered: &str) {
    let crd = serde_json::to_string(&gpuready_api::crd::gpu_node_profile_crd()).expect("json");
    let crd: Value = serde_json::from_str(&crd).expect("json");
    let mut rules = Vec::new();
    fn collect(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("rule") {
                    out.push(r.clone());
                }
                m.values().for_each(|c| collect(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| collect(c, out)),
            _ => {}
        }
    }
    collect(&crd, &mut rules);
    let taint_rule = rules
        .iter()
        .find(|r| r.starts_with("!self.key.matches("))
        .expect("the CRD's taint.key rule");
    let as_policy = taint_rule.replace("self.key", "t.key");
    assert!(
        rendered.contains(&format!("({as_policy})")),
        "the policy's taint key rule is the CRD's: {as_policy}"
    );
    let label_rule = rules
        .iter()
        .find(|r| r.starts_with("self.all(k, !k.matches('^([^/]*\\\\.)?(kubernetes"))
        .expect("the CRD's readyLabels domain rule");
    let inner = label_rule
        .strip_prefix("self.all(k, ")
        .and_then(|r| r.strip_suffix(')'))
        .expect("self.all(k, …)");
    assert!(
        rendered.contains(&format!("({inner})")),
        "the policy's readyLabels key rule is the CRD's: {inner}"
    );
    // Every condition type the engine writes, by exact name.
    let mut types = vec![
        keys::CONDITION_GPU_READY.to_owned(),
        keys::CONDITION_PROBE_HEALTHY.to_owned(),
    ];
    types.extend(gpuready_api::Layer::ALL.iter().map(|l| l.condition_type()));
    types.extend(
        gpuready_api::Layer::OPTIONAL
            .iter()
            .map(|l| l.condition_type()),
    );
    for t in types {
        assert!(rendered.contains(&format!("'{t}'")), "condition type {t}");
    }
}

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": { "gpu-pool": "a", "example.com/foreign": "keep" },
            "annotations": { "example.com/note": "keep" },
        },
        "spec": { "taints": [
            { "key": "example.com/maintenance", "effect": "NoSchedule" },
        ] },
    })
}

/// Creates a node with kubelet's status (capacity, images, runtime handlers,
/// features: every status field gpuready must leave alone).
async fn create_node_with_status(admin: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(admin.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(node(name)).expect("node"),
        )
        .await
        .expect("create node");
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "capacity": { "nvidia.com/gpu": "1" },
                "allocatable": { "nvidia.com/gpu": "1" },
                "images": [{ "names": ["registry.example/app:1"], "sizeBytes": 1000 }],
                "runtimeHandlers": [{ "name": "runc", "features": { "recursiveReadOnlyMounts": true } }],
                "features": { "supplementalGroupsPolicy": true },
                "declaredFeatures": ["FeatureA"],
                "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "ok", "lastHeartbeatTime": "2026-11-30T00:00:00Z",
                    "lastTransitionTime": "2026-11-30T00:00:00Z" },
                    { "type": "GpuReadyFoo", "status": "True", "reason": "SomeoneElses",
                    "message": "a foreign condition that merely starts with GpuReady",
                    "lastHeartbeatTime": "2026-11-30T00:00:00Z",
                    "lastTransitionTime": "2026-11-30T00:00:00Z" }],
            }})),
        )
        .await
        .expect("kubelet status");
}

/// Waits until the policies are active: a cordon by the ServiceAccount is refused
/// (they are loaded asynchronously after the bindings are created).
async fn wait_active(admin: &kube::Client, sa: &kube::Client, node: &str) {
    let nodes: Api<Node> = Api::all(admin.clone());
    let sa_nodes: Api<Node> = Api::all(sa.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let cordon = sa_nodes
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "unschedulable": true } })),
            )
            .await;
        match cordon {
            Err(e) if matches!(status_code(&e), Some(403 | 422)) => {
                assert!(e.to_string().contains("no cordon"), "{e}");
                return;
            }
            Ok(_) => {
                nodes
                    .patch(
                        node,
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
}

/// A profile created after the chart: its taint key and readyLabels key are in
/// no chart value.
fn late_profile() -> Value {
    json!({
        "apiVersion": "gpuready.io/v1alpha1", "kind": "GpuNodeProfile",
        "metadata": { "name": "late" },
        "spec": {
            "nodeSelector": { "matchLabels": { "gpu-pool": "a" } },
            "taint": { "key": "example.org/gpu-not-ready", "effect": "NoSchedule" },
            "readyLabels": { "example.org/gpu-tier": "gold" },
        },
    })
}

#[tokio::test]
async fn service_account_may_write_only_what_gpuready_owns() {
    let env = TestEnv::shared().await.expect("test control plane");
    let admin = env.client().expect("client");
    let rendered = install_policy(env).await;
    assert_policy_uses_the_crds_rules(&rendered);
    install_crds(env, "deploy/crds/nfd-crds.yaml", "nfd").await;
    create_node_with_status(&admin, "gpu-0").await;
    let sa = env
        .client_as_service_account(NS, RELEASE)
        .expect("SA client");
    wait_active(&admin, &sa, "gpu-0").await;
    let nodes: Api<Node> = Api::all(admin.clone());

    // gpuready, as the ServiceAccount, governs the node under a profile the
    // chart never heard of: broken, then repaired, then released.
    apply_profile_json(&admin, late_profile()).await;
    let run = start_controller_with(service_account_config(env, NS, RELEASE), test_args());
    let gated_by = |n: &Node, key: &str| taint_keys(n).iter().any(|k| k == key);
    eventually(
        60,
        "the node is judged and tainted (no GPU labels)",
        || async {
            let n = nodes.get("gpu-0").await.ok()?;
            (gated_by(&n, "example.org/gpu-not-ready")
                && label(&n, keys::LABEL_READY).as_deref() == Some("false")
                && gpu_ready(&n).is_some())
            .then_some(())
        },
    )
    .await;
    set_labels(
        &admin,
        "gpu-0",
        serde_json::to_value(gfd_3090()).expect("labels"),
    )
    .await;
    eventually(60, "the repaired node is released and labelled", || async {
        let n = nodes.get("gpu-0").await.ok()?;
        (!gated_by(&n, "example.org/gpu-not-ready")
            && label(&n, "example.org/gpu-tier").as_deref() == Some("gold")
            && gpu_ready(&n).map(|(s, _)| s).as_deref() == Some("True"))
        .then_some(())
    })
    .await;
    delete_profile(&admin, "late").await;
    eventually(
        60,
        "the node is released: nothing of gpuready's left",
        || async {
            let n = nodes.get("gpu-0").await.ok()?;
            let labels = n.metadata.labels.clone().unwrap_or_default();
            let annotations = n.metadata.annotations.clone().unwrap_or_default();
            (!labels.keys().any(|k| k.starts_with(keys::KEY_PREFIX))
                && !labels.contains_key("example.org/gpu-tier")
                && !annotations.keys().any(|k| k.starts_with(keys::KEY_PREFIX))
                && gpu_ready(&n).is_none())
            .then_some(())
        },
    )
    .await;
    assert_eq!(
        run.sample("gpuready_reconcile_errors_total{kind=\"refused\"}"),
        0.0,
        "no write of gpuready's was refused"
    );
    run.stop().await.expect("clean stop");

    // The ten writes issue 24 found beyond gpuready's fields, and the others
    // RBAC's `patch nodes` alone would allow, on a node governed by a profile
    // that declares NoSchedule and the readyLabels key example.org/gpu-tier.
    apply_profile_json(&admin, late_profile()).await;
    create_node_with_status(&admin, "gpu-1").await;
    let governed = nodes.get("gpu-1").await.expect("node");
    // The status fields the writes below try to change are served and set
    // (read raw: the typed Node may not know the newest of them).
    let raw: Value = serde_json::from_str(
        &admin
            .request_text(
                http::Request::get("/api/v1/nodes/gpu-1")
                    .body(Vec::new())
                    .expect("request"),
            )
            .await
            .expect("node"),
    )
    .expect("json");
    let status = raw["status"].clone();
    for field in ["images", "runtimeHandlers", "features", "declaredFeatures"] {
        assert!(
            status.get(field).is_some_and(|v| !v.is_null()),
            "status.{field} is served and set: {status}"
        );
    }
    let mut taints: Vec<Value> = governed
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .iter()
        .map(|t| serde_json::to_value(t).expect("taint"))
        .collect();
    taints.push(
        json!({ "key": "example.org/gpu-not-ready", "value": "true", "effect": "NoSchedule" }),
    );
    nodes
        .patch(
            "gpu-1",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {
                    "labels": { "gpuready.io/profile": "late", "gpuready.io/ready": "false",
                        "example.org/gpu-tier": "silver" },
                    "annotations": { "gpuready.io/taint": "example.org/gpu-not-ready:NoSchedule" },
                },
                "spec": { "taints": taints.clone() },
            })),
        )
        .await
        .expect("the node as gpuready governs it, with an admin's gpu-tier label");
    let no_execute: Vec<Value> = taints
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if t["key"] == "example.org/gpu-not-ready" {
                t["effect"] = json!("NoExecute");
            }
            t
        })
        .collect();
    let sa_nodes: Api<Node> = Api::all(sa.clone());
    let sa_crds: Api<CustomResourceDefinition> = Api::all(sa.clone());
    let nf = "nodefeatures.nfd.k8s-sigs.io";
    enum Write {
        Node(Value),
        Status(Value),
        Crd(Value),
    }
    let forbidden: Vec<(&str, Write)> = vec![
        // Issue 24's ten.
        (
            "1. turn its own taint's effect into NoExecute",
            Write::Node(json!({
                "metadata": { "annotations": { "gpuready.io/taint": "example.org/gpu-not-ready:NoExecute" } },
                "spec": { "taints": no_execute },
            })),
        ),
        (
            "2. an NFD CRD schema that preserves unknown fields",
            Write::Crd(
                json!({ "spec": { "versions": [{ "name": "v1alpha1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }] } }),
            ),
        ),
        (
            "3. an NFD CRD serving no version",
            Write::Crd(
                json!({ "spec": { "versions": [{ "name": "v1alpha1", "served": false, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "properties": { "spec": { "type": "object" } } } } }] } }),
            ),
        ),
        (
            "4. an NFD CRD converted by an outside webhook",
            Write::Crd(
                json!({ "spec": { "conversion": { "strategy": "Webhook", "webhook": {
                "clientConfig": { "url": "https://convert.example.org/nfd" },
                "conversionReviewVersions": ["v1"] } } } }),
            ),
        ),
        (
            "5. change status.images",
            Write::Status(
                json!({ "status": { "images": [{ "names": ["evil.example/x:1"], "sizeBytes": 1 }] } }),
            ),
        ),
        (
            "6. change status.runtimeHandlers",
            Write::Status(json!({ "status": { "runtimeHandlers": [{ "name": "evil" }] } })),
        ),
        (
            "7. change status.features",
            Write::Status(
                json!({ "status": { "features": { "supplementalGroupsPolicy": false } } }),
            ),
        ),
        (
            "8. change status.declaredFeatures",
            Write::Status(json!({ "status": { "declaredFeatures": ["FeatureB"] } })),
        ),
        (
            "9. change a foreign condition that starts with GpuReady",
            Write::Status(
                json!({ "status": { "conditions": [{ "type": "GpuReadyFoo", "status": "False",
                "reason": "Faked", "message": "m",
                "lastHeartbeatTime": "2026-11-30T00:00:00Z",
                "lastTransitionTime": "2026-11-30T00:00:00Z" }] } }),
            ),
        ),
        (
            "10. overwrite an admin-set value of a readyLabels key",
            Write::Node(json!({ "metadata": {
                "labels": { "example.org/gpu-tier": "gold" },
                "annotations": { "gpuready.io/labels": "example.org/gpu-tier" } } })),
        ),
        // And what RBAC alone would allow.
        (
            "set providerID",
            Write::Node(json!({ "spec": { "providerID": "aws:///i-1" } })),
        ),
        (
            "remove a foreign taint",
            Write::Node(json!({ "spec": { "taints": [] } })),
        ),
        (
            "add a foreign taint key",
            Write::Node(json!({
                "metadata": { "annotations": { "gpuready.io/taint": "node.kubernetes.io/unschedulable:NoSchedule" } },
                "spec": { "taints": taints.iter().cloned().chain([
                json!({ "key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule" }),
            ]).collect::<Vec<_>>() } })),
        ),
        (
            "add a taint the annotation does not record",
            Write::Node(json!({ "spec": { "taints": taints.iter().cloned().chain([
                json!({ "key": "example.org/other", "effect": "NoSchedule" }),
            ]).collect::<Vec<_>>() } })),
        ),
        (
            "overwrite a foreign label",
            Write::Node(json!({ "metadata": { "labels": { "example.com/foreign": "taken" } } })),
        ),
        (
            "remove a foreign label",
            Write::Node(json!({ "metadata": { "labels": { "gpu-pool": null } } })),
        ),
        (
            "add a label in a reserved domain",
            Write::Node(json!({ "metadata": {
                "labels": { "kubernetes.io/hostname": "x" },
                "annotations": { "gpuready.io/labels": "kubernetes.io/hostname" } } })),
        ),
        (
            "add a label the profile does not declare",
            Write::Node(json!({ "metadata": {
                "labels": { "example.org/other": "x" },
                "annotations": { "gpuready.io/labels": "example.org/other" } } })),
        ),
        (
            "change a foreign annotation",
            Write::Node(json!({ "metadata": { "annotations": { "example.com/note": "x" } } })),
        ),
        (
            "fake GPU capacity",
            Write::Status(json!({ "status": { "capacity": { "nvidia.com/gpu": "8" } } })),
        ),
        (
            "fake allocatable",
            Write::Status(json!({ "status": { "allocatable": { "nvidia.com/gpu": "8" } } })),
        ),
        (
            "overwrite the kubelet's Ready condition",
            Write::Status(
                json!({ "status": { "conditions": [{ "type": "Ready", "status": "False",
                "reason": "Faked", "message": "m",
                "lastHeartbeatTime": "2026-11-30T00:00:00Z",
                "lastTransitionTime": "2026-11-30T00:00:00Z" }] } }),
            ),
        ),
    ];
    let mut failures = Vec::new();
    let mut refused = 0;
    // A write the server accepts but that changes nothing (a field this server
    // does not serve is dropped) is no write beyond gpuready's fields.
    let snapshot = || async {
        let mut v = serde_json::to_value(nodes.get("gpu-1").await.expect("node")).expect("json");
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        v
    };
    let mut by_server = Vec::new();
    for (what, write) in forbidden {
        let before = snapshot().await;
        let result = match write {
            Write::Node(patch) => sa_nodes
                .patch("gpu-1", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ()),
            Write::Status(patch) => sa_nodes
                .patch_status("gpu-1", &PatchParams::default(), &Patch::Strategic(patch))
                .await
                .map(|_| ()),
            Write::Crd(patch) => sa_crds
                .patch(nf, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ()),
        };
        match result {
            // A policy's denial: 422 (the validations' reason, Invalid).
            Err(kube::Error::Api(s))
                if matches!(s.code, 403 | 422)
                    && s.message.contains("ValidatingAdmissionPolicy") =>
            {
                refused += 1;
            }
            // Refused by the server's own validation before the policy saw it.
            Err(kube::Error::Api(s)) if s.code == 422 => {
                refused += 1;
                by_server.push(format!("{what} ({})", s.message));
            }
            Ok(()) if snapshot().await == before => by_server.push(format!("{what} (no effect)")),
            other => failures.push(format!("{what}: expected a refusal, got {other:?}")),
        }
    }
    println!(
        "ServiceAccount writes beyond its fields refused: {refused}; refused or dropped by the server itself: {by_server:?}"
    );

    // Needed: its own condition type passes beside the foreign one.
    sa_nodes
        .patch_status(
            "gpu-1",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({ "status": { "conditions": [{ "type": "GpuReady", "status": "False",
                "reason": "DriverTooOld", "message": "m",
                "lastHeartbeatTime": "2026-11-30T00:00:00Z",
                "lastTransitionTime": "2026-11-30T00:00:00Z" }] } }),
            ),
        )
        .await
        .expect("gpuready's own condition passes");

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
    let n = nodes.get("gpu-1").await.expect("node");
    let labels = n.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("example.com/foreign").map(String::as_str),
        Some("keep")
    );
    assert_eq!(
        labels.get("example.org/gpu-tier").map(String::as_str),
        Some("silver")
    );
    assert_eq!(labels.get("gpu-pool").map(String::as_str), Some("a"));
    assert_eq!(n.spec.as_ref().and_then(|s| s.unschedulable), None);
    let crd = Api::<CustomResourceDefinition>::all(admin.clone())
        .get(nf)
        .await
        .expect("NodeFeature CRD");
    assert!(crd.spec.conversion.and_then(|c| c.webhook).is_none());
    assert!(crd.spec.versions.iter().all(|v| v.served));
}
