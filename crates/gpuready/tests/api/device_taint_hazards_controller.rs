//! Kubernetes' device-taint hazards against the real API server (kube-apiserver
//! v1.37, which serves `resource.k8s.io/v1` ResourceClaims, with their status,
//! and DeviceTaintRules): a pod holding an escalated GPU as a DRA extended
//! resource — the claim the scheduler makes for it, written here as the
//! scheduler writes it — is named by the controller (kubernetes #141290), with
//! `extendedResourcePods: TaintNode` the node's taint turns `NoExecute` until
//! the claim is gone; gpuready's condition in the escalation rule's status
//! names the pod, is not rewritten while nothing changes, and turns `False`
//! when the claim goes; and an admin's `NoExecute` rule with an empty selector
//! is counted (kubernetes #141422) and left alone.

use crate::support;

use gpuready_api::device_taint_rule::DeviceTaintRule;
use gpuready_api::keys;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

const NODE: &str = "h200-er";

fn rules_api(client: &Client) -> Api<DynamicObject> {
    dynamic_api(
        client,
        "resource.k8s.io",
        "v1",
        "DeviceTaintRule",
        "devicetaintrules",
        None,
    )
}

/// Creates the claim the scheduler makes for `pod`'s `nvidia.com/gpu: 1`
/// (KEP-5004) and allocates it to `device` as the scheduler does (status).
async fn schedulers_claim(client: &Client, ns: &str, pod: &str, device: &str) -> String {
    let claims = dynamic_api(
        client,
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        "resourceclaims",
        Some(ns),
    );
    let name = format!("{pod}-extended-resources-x7k2p");
    let uid = "6b1f3c8e-1d2a-4c5b-9e7f-0a1b2c3d4e5f";
    let claim: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid,
                                 "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {"devices": {"requests": [{"name": "container-0-request-0",
            "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}
    }))
    .expect("claim");
    claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("creating the ResourceClaim");
    claims
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "allocation": {
                    "devices": {"results": [{"request": "container-0-request-0",
                        "driver": "gpu.nvidia.com", "pool": NODE, "device": device}]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}
                },
                "reservedFor": [{"resource": "pods", "name": pod, "uid": uid}]
            }})),
        )
        .await
        .expect("allocating the ResourceClaim (status)");
    name
}

const ESCALATION_RULE: &str = "gpuready-h200-er-gpu-2-noexecute";

/// gpuready's condition on its escalation rule: (status, reason, message),
/// and whether gpuready's field manager applied it on the status subresource.
async fn rule_condition(client: &Client) -> Option<(String, String, String, bool)> {
    let r = rules_api(client).get(ESCALATION_RULE).await.ok()?;
    let c = r.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == keys::device_rules::CONDITION_PODS_NOT_EVICTED)?
        .clone();
    let applied = r.metadata.managed_fields.iter().flatten().any(|m| {
        m.manager.as_deref() == Some(keys::FIELD_MANAGER)
            && m.operation.as_deref() == Some("Apply")
            && m.subresource.as_deref() == Some("status")
    });
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("message"), applied))
}

fn profile_with(extra: &str) -> String {
    h200_profile(
        "er",
        "er",
        &format!(
            "  deviceGating: {{minReadyGpus: 7}}\n  escalation: {{reasons: [ProductMismatch], dryRunSeconds: 10{extra}}}"
        ),
    )
}

#[tokio::test]
async fn pods_holding_an_escalated_gpu_as_an_extended_resource_are_named_and_may_taint_the_node() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let ns = env.create_namespace("ml").await.expect("namespace");
    dra_only_node(&client, NODE, "er").await;
    let mut slice = eight_gpu_slice(NODE);
    slice["spec"]["devices"][2]["attributes"]["productName"] =
        json!({"string": "NVIDIA H100 80GB HBM3"});
    put_slice(&client, &slice).await;
    // The pod got gpu-2 before anything was wrong with it: its claim exists
    // before gpuready taints the device, so the claim watch must list again.
    let claim = schedulers_claim(&client, &ns, "trainer-0", "gpu-2").await;
    apply_profile(&client, &profile_with("")).await;
    let run = start_controller(&env, test_args());

    eventually(60, "gpu-2's escalation rule turns NoExecute", || async {
        let r: DeviceTaintRule = serde_json::from_value(
            serde_json::to_value(
                rules_api(&client)
                    .get("gpuready-h200-er-gpu-2-noexecute")
                    .await
                    .ok()?,
            )
            .ok()?,
        )
        .ok()?;
        (r.spec.taint.effect == "NoExecute").then_some(())
    })
    .await;
    let words = format!(
        "1 pod(s) hold gpu-2 as a DRA extended resource and are not evicted by Kubernetes (kubernetes #141290): {ns}/trainer-0"
    );
    eventually(30, "GpuReady names the pod", || async {
        let n = get_node(&client, NODE).await;
        gpu_ready_message(&n).contains(&words).then_some(())
    })
    .await;
    eventually(30, "the profile status and metric count it", || async {
        let s = Api::<gpuready_api::GpuNodeProfile>::all(client.clone())
            .get("er")
            .await
            .ok()?
            .status?;
        (s.not_evicted_pods == 1
            && s.escalations
                .first()
                .is_some_and(|e| e.not_evicted.as_deref() == Some(words.as_str()))
            && run.sample("gpuready_not_evicted_pods{profile=\"er\"}") == 1.0)
            .then_some(())
    })
    .await;
    // The rule's own status names the pod too: gpuready's condition, applied
    // under its field manager on the status subresource.
    let reasons = keys::device_rules::condition_reasons::NOT_EVICTED;
    eventually(30, "the escalation rule's status names the pod", || async {
        let (status, reason, message, applied) = rule_condition(&client).await?;
        (status == "True" && reason == reasons && message == words && applied).then_some(())
    })
    .await;
    // Settled: a reconcile (an unrelated label on the node) writes no status.
    let status_writes = || run.sample("gpuready_writes_total{kind=\"devicetaintrule_status\"}");
    let (writes, rv) = (
        status_writes(),
        rules_api(&client)
            .get(ESCALATION_RULE)
            .await
            .expect("rule")
            .metadata
            .resource_version,
    );
    assert!(writes >= 1.0, "the condition was written: {writes}");
    let reconciles = run.sample("gpuready_reconcile_duration_seconds_count");
    Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .patch(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"example.com/touched": "1"}}})),
        )
        .await
        .expect("label the node");
    eventually(30, "the node reconciled again", || async {
        (run.sample("gpuready_reconcile_duration_seconds_count") > reconciles).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(
        status_writes(),
        writes,
        "no status write when nothing changed"
    );
    assert_eq!(
        rules_api(&client)
            .get(ESCALATION_RULE)
            .await
            .expect("rule")
            .metadata
            .resource_version,
        rv,
        "the rule untouched"
    );
    assert!(
        !gated(&get_node(&client, NODE).await),
        "Report: the node stays untainted"
    );
    let report = live_report(&client).await;
    let a = report.nodes.iter().find(|n| n.name == NODE).expect("node");
    assert_eq!(
        a.not_evicted,
        std::slice::from_ref(&words),
        "check reads the same claims"
    );

    // TaintNode: the node's own taint turns NoExecute while the pod holds gpu-2.
    apply_profile(&client, &profile_with(", extendedResourcePods: TaintNode")).await;
    eventually(30, "the node tainted NoExecute", || async {
        let n = get_node(&client, NODE).await;
        let ours = taints(&n)
            .into_iter()
            .any(|t| t.key == keys::DEFAULT_TAINT_KEY && t.effect == "NoExecute");
        (ours
            && gpu_ready(&n)
                .is_some_and(|(_, r)| r == keys::reasons::EXTENDED_RESOURCE_PODS_NOT_EVICTED))
        .then_some(())
    })
    .await;
    // The pod is gone (its claim with it): the node taint goes, the rules stay.
    dynamic_api(
        &client,
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        "resourceclaims",
        Some(&ns),
    )
    .delete(&claim, &DeleteParams::default())
    .await
    .expect("deleting the claim");
    eventually(30, "the node untainted and ready", || async {
        let n = get_node(&client, NODE).await;
        (!gated(&n) && gpu_ready(&n) == Some(("True".into(), "Ready".into()))).then_some(())
    })
    .await;
    assert!(
        rules_api(&client)
            .get("gpuready-h200-er-gpu-2-noexecute")
            .await
            .is_ok(),
        "the device stays out"
    );
    eventually(30, "no pod counted any more", || async {
        (run.sample("gpuready_not_evicted_pods{profile=\"er\"}") == 0.0).then_some(())
    })
    .await;
    eventually(30, "the rule's condition turns False", || async {
        let (status, reason, message, _) = rule_condition(&client).await?;
        (status == "False"
            && reason == keys::device_rules::condition_reasons::NONE
            && message.contains("no pod holds gpu-2"))
        .then_some(())
    })
    .await;

    // An admin's NoExecute rule with an empty selector: counted, left alone.
    let wide: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain-everything"},
        "spec": {"deviceSelector": {}, "taint": {"key": "example.com/drain", "effect": "NoExecute"}}
    }))
    .expect("rule");
    let made = rules_api(&client)
        .create(&PostParams::default(), &wide)
        .await
        .expect("creating an admin's rule");
    eventually(30, "the cluster-wide rule counted", || async {
        (run.sample("gpuready_cluster_wide_device_taint_rules") == 1.0).then_some(())
    })
    .await;
    let report = live_report(&client).await;
    assert_eq!(
        report
            .wide_rules
            .iter()
            .map(|w| w.name.as_str())
            .collect::<Vec<_>>(),
        ["drain-everything"]
    );
    let after = rules_api(&client)
        .get("drain-everything")
        .await
        .expect("still there");
    assert_eq!(
        after.metadata.resource_version, made.metadata.resource_version,
        "untouched"
    );
    rules_api(&client)
        .delete("drain-everything", &DeleteParams::default())
        .await
        .expect("deleting it");
    eventually(30, "the gauge back to 0", || async {
        (run.sample("gpuready_cluster_wide_device_taint_rules") == 0.0).then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
}
