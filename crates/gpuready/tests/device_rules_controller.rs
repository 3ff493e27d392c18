//! Per-device gating against the real API server (kube-apiserver v1.37, which
//! serves `resource.k8s.io/v1` DeviceTaintRules): the controller creates,
//! updates and deletes one DeviceTaintRule per bad device as the probe report
//! and the ResourceSlice change, keeps the node untainted while its minimum of
//! ready GPUs holds, never touches a rule it did not create, and writes rules
//! with effect `None` for an Observe profile.

mod support;

use std::time::Duration;

use gpuready::probe::publish::publish;
use gpuready_api::device_taint_rule::DeviceTaintRule;
use gpuready_api::keys::{self, health_reasons};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use support::*;

fn rules_api(client: &Client) -> Api<DeviceTaintRule> {
    Api::all(client.clone())
}

/// `device → (value, effect)` of gpuready's rules.
async fn our_rules(client: &Client) -> Vec<(String, String, String)> {
    let list = rules_api(client)
        .list(&ListParams::default())
        .await
        .expect("list DeviceTaintRules");
    let mut out: Vec<(String, String, String)> = list
        .items
        .iter()
        .filter(|r| gpuready_api::device_taint_rule::is_owned(r))
        .map(|r| {
            (
                r.spec
                    .device_selector
                    .as_ref()
                    .and_then(|s| s.device.clone())
                    .unwrap_or_default(),
                r.spec.taint.value.clone().unwrap_or_default(),
                r.spec.taint.effect.clone(),
            )
        })
        .collect();
    out.sort();
    out
}

fn gpu_ready_message(n: &Node) -> String {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == keys::CONDITION_GPU_READY))
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn device_taint_rules_follow_probe_reports_and_slices() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let ns = env.create_namespace("gpuready").await.expect("namespace");
    let node = "h200-8";
    dra_only_node(&client, node, "dra").await;
    let mut slice = eight_gpu_slice(node);
    put_slice(&client, &slice).await;
    // An admin's rule on gpu-1, and one named like gpuready's but without its
    // label: neither is gpuready's, and neither is ever touched.
    let foreign: Vec<DeviceTaintRule> = [
        ("maintenance-h200-8-gpu-1", "gpu-1", true),
        ("gpuready-h200-8-gpu-6", "gpu-6", false),
    ]
    .into_iter()
    .map(|(name, device, _)| {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": {
                "deviceSelector": { "driver": "gpu.nvidia.com", "pool": node, "device": device },
                "taint": { "key": "example.com/maintenance", "value": "planned", "effect": "None" },
            },
        }))
        .expect("rule")
    })
    .collect();
    let mut foreign_versions = Vec::new();
    for r in &foreign {
        let made = rules_api(&client)
            .create(&PostParams::default(), r)
            .await
            .expect("creating a foreign DeviceTaintRule");
        foreign_versions.push((made.name_any(), made.resource_version()));
    }
    apply_profile(
        &client,
        &h200_profile("h200", "dra", "  deviceGating: {minReadyGpus: 7}"),
    )
    .await;
    let run = start_controller(&env, run_args(&[&format!("--probe-namespace={ns}")]));
    publish(&client, &ns, node, &h200_report(node, &slice, &[]))
        .await
        .expect("publish");
    eventually(60, "the DRA-only node is ready from its slice", || async {
        let n = get_node(&client, node).await;
        (gpu_ready(&n) == Some(("True".into(), "Ready".into())) && !gated(&n)).then_some(())
    })
    .await;
    assert!(our_rules(&client).await.is_empty());

    // XID 79 on gpu-3: one rule, the node stays untainted (7 ready GPUs).
    publish(&client, &ns, node, &h200_report(node, &slice, &["gpu-3"]))
        .await
        .expect("publish");
    eventually(60, "a rule for gpu-3", || async {
        (our_rules(&client).await
            == [(
                "gpu-3".into(),
                health_reasons::FATAL_XID.into(),
                "NoSchedule".into(),
            )])
        .then_some(())
    })
    .await;
    let n = get_node(&client, node).await;
    assert!(!gated(&n), "seven good GPUs stay in service");
    eventually(30, "GpuReady names the tainted device", || async {
        let n = get_node(&client, node).await;
        gpu_ready_message(&n)
            .contains("gpu-3 (FatalXid)")
            .then_some(())
    })
    .await;
    eventually(
        30,
        "the profile status and metric name the device",
        || async {
            let s = Api::<gpuready_api::GpuNodeProfile>::all(client.clone())
                .get("h200")
                .await
                .ok()?
                .status?;
            (s.tainted_devices == 1
                && s.tainted_device_summary.first().is_some_and(|t| {
                    t.node == node && t.devices == ["gpu-3 (FatalXid)".to_owned()]
                })
                && run.sample("gpuready_tainted_devices{profile=\"h200\"}") == 1.0)
                .then_some(())
        },
    )
    .await;
    let written = rules_api(&client)
        .get("gpuready-h200-8-gpu-3")
        .await
        .expect("gpuready's rule");
    assert!(
        written
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .all(|m| m.manager.as_deref() == Some(keys::FIELD_MANAGER)),
        "written under gpuready's field manager"
    );
    let mut shown = serde_json::to_value(&written).expect("rule");
    shown["apiVersion"] = json!("resource.k8s.io/v1");
    shown["kind"] = json!("DeviceTaintRule");
    println!(
        "DeviceTaintRule written by the controller:\n{}",
        serde_yaml_ng::to_string(&shown).expect("yaml")
    );

    // The slice changes: gpu-5 reports another product. A second rule, and
    // now fewer than 7 ready GPUs remain: the node is tainted as well.
    slice["spec"]["devices"][5]["attributes"]["productName"] =
        json!({"string": "NVIDIA H100 80GB HBM3"});
    put_slice(&client, &slice).await;
    eventually(60, "a rule for gpu-5 and the node tainted too", || async {
        let rules = our_rules(&client).await;
        let n = get_node(&client, node).await;
        (rules
            == [
                (
                    "gpu-3".into(),
                    health_reasons::FATAL_XID.into(),
                    "NoSchedule".into(),
                ),
                (
                    "gpu-5".into(),
                    "ProductMismatch".into(),
                    "NoSchedule".into(),
                ),
            ]
            && gated(&n)
            && gpu_ready(&n).is_some_and(|(_, r)| r == keys::reasons::TOO_FEW_READY_DEVICES))
        .then_some(())
    })
    .await;

    // The profile asks for NoExecute: both rules are updated in place.
    apply_profile(
        &client,
        &h200_profile(
            "h200",
            "dra",
            "  deviceGating: {minReadyGpus: 6, effect: NoExecute}",
        ),
    )
    .await;
    eventually(60, "rules updated to NoExecute, node released", || async {
        let rules = our_rules(&client).await;
        let n = get_node(&client, node).await;
        (rules.iter().all(|(_, _, e)| e == "NoExecute") && rules.len() == 2 && !gated(&n))
            .then_some(())
    })
    .await;

    // Both devices recover: the rules go.
    slice["spec"]["devices"][5]["attributes"]["productName"] = json!({"string": "NVIDIA H200"});
    put_slice(&client, &slice).await;
    publish(&client, &ns, node, &h200_report(node, &slice, &[]))
        .await
        .expect("publish");
    eventually(60, "every rule of gpuready deleted", || async {
        our_rules(&client).await.is_empty().then_some(())
    })
    .await;
    eventually(30, "the rule gauge back to 0", || async {
        (run.sample("gpuready_device_taint_rules") == 0.0).then_some(())
    })
    .await;
    let reasons = event_reasons(&client, node).await;
    assert!(
        reasons
            .iter()
            .any(|r| r == keys::event_reasons::DEVICE_TAINTED),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r == keys::event_reasons::DEVICE_TAINT_REMOVED),
        "{reasons:?}"
    );
    assert!(
        run.writes("devicetaintrule") >= 6,
        "create ×2, update ×2, delete ×2"
    );

    // The foreign rules are exactly as they were created.
    for (name, rv) in &foreign_versions {
        let r = rules_api(&client)
            .get(name)
            .await
            .expect("foreign rule still there");
        assert_eq!(&r.resource_version(), rv, "{name} untouched");
    }

    // A quiet moment writes nothing.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = run.writes_sent();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        run.writes_sent(),
        before,
        "a settled node sends zero writes"
    );
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn an_observe_profile_writes_device_rules_with_effect_none_and_never_the_node() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let node = "h200-observe";
    dra_only_node(&client, node, "observe").await;
    let mut slice = eight_gpu_slice(node);
    slice["spec"]["devices"][2]["attributes"]["productName"] =
        json!({"string": "NVIDIA H100 80GB HBM3"});
    put_slice(&client, &slice).await;
    apply_profile(
        &client,
        &h200_profile("observe", "observe", "  mode: Observe\n  deviceGating: {}"),
    )
    .await;
    let run = start_controller(&env, test_args());
    eventually(60, "an informational rule for gpu-2", || async {
        (our_rules(&client).await == [("gpu-2".into(), "ProductMismatch".into(), "None".into())])
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let n = get_node(&client, node).await;
    assert!(
        gpuready_traces(&n).is_empty(),
        "Observe: zero node writes, found {:?}",
        gpuready_traces(&n)
    );
    assert_eq!(run.node_writes(), 0);
    run.stop().await.expect("clean stop");
}

/// The chart's RBAC is exactly what device gating needs: gpuready, run as the
/// release's ServiceAccount, creates, updates and deletes its DeviceTaintRules
/// with no request refused; the same account may not patch a rule, delete
/// rules as a collection, or write a ResourceSlice.
#[tokio::test]
async fn the_charts_service_account_gates_devices_and_nothing_more() {
    let env = gpuready_testenv::TestEnv::start()
        .await
        .expect("test control plane");
    let admin = env.client().expect("client");
    let ns = "gpuready-system";
    let chart = chart_dir();
    let chart = chart.to_str().expect("path");
    must(
        helm(
            &env,
            &[
                "install",
                "gpuready",
                chart,
                "--namespace",
                ns,
                "--create-namespace",
            ],
        ),
        None,
        "helm install",
    )
    .await;
    wait_established(&admin, &["gpunodeprofiles.gpuready.io"]).await;
    let node = "h200-sa";
    dra_only_node(&admin, node, "sa").await;
    let mut slice = eight_gpu_slice(node);
    slice["spec"]["devices"][4]["attributes"]["productName"] =
        json!({"string": "NVIDIA H100 80GB HBM3"});
    put_slice(&admin, &slice).await;
    apply_profile(
        &admin,
        &h200_profile("sa", "sa", "  deviceGating: {minReadyGpus: 7}"),
    )
    .await;
    let run = start_controller_with(service_account_config(&env, ns, "gpuready"), test_args());
    eventually(60, "the ServiceAccount creates the rule", || async {
        (our_rules(&admin).await
            == [(
                "gpu-4".into(),
                "ProductMismatch".into(),
                "NoSchedule".into(),
            )])
        .then_some(())
    })
    .await;
    apply_profile(
        &admin,
        &h200_profile(
            "sa",
            "sa",
            "  deviceGating: {minReadyGpus: 7, effect: NoExecute}",
        ),
    )
    .await;
    eventually(60, "... updates it", || async {
        (our_rules(&admin).await
            == [("gpu-4".into(), "ProductMismatch".into(), "NoExecute".into())])
        .then_some(())
    })
    .await;
    slice["spec"]["devices"][4]["attributes"]["productName"] = json!({"string": "NVIDIA H200"});
    put_slice(&admin, &slice).await;
    eventually(60, "... and deletes it", || async {
        our_rules(&admin).await.is_empty().then_some(())
    })
    .await;
    assert_eq!(
        run.sample("gpuready_reconcile_errors_total{kind=\"forbidden\"}"),
        0.0,
        "no request was refused"
    );
    run.stop().await.expect("clean stop");

    let sa = env
        .client_as_service_account(ns, "gpuready")
        .expect("SA client");
    // 403: RBAC's or a policy's denial; 422: a policy's validation (Invalid).
    let refused = |what: &str, r: Result<(), kube::Error>| match r {
        Err(e) if matches!(status_code(&e), Some(403 | 422)) => {}
        other => panic!("{what}: expected the request refused, got {other:?}"),
    };
    let mine: DeviceTaintRule = serde_json::from_value(json!({
        "metadata": { "name": "admins-rule" },
        "spec": {
            "deviceSelector": { "driver": "gpu.nvidia.com", "pool": node, "device": "gpu-0" },
            "taint": { "key": "example.com/maintenance", "effect": "None" },
        },
    }))
    .expect("rule");
    rules_api(&admin)
        .create(&PostParams::default(), &mine)
        .await
        .expect("admin creates a rule");
    refused(
        "patch a DeviceTaintRule",
        rules_api(&sa)
            .patch(
                "admins-rule",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taint": {"effect": "NoExecute"}}})),
            )
            .await
            .map(drop),
    );
    // RBAC lets the account update and delete rules (their names follow the
    // devices); the chart's admission policy keeps it to gpuready's own.
    refused(
        "delete an admin's DeviceTaintRule",
        rules_api(&sa)
            .delete("admins-rule", &kube::api::DeleteParams::default())
            .await
            .map(drop),
    );
    let mut admins = rules_api(&admin)
        .get("admins-rule")
        .await
        .expect("admin's rule");
    admins.spec.taint.effect = "NoExecute".into();
    refused(
        "update an admin's DeviceTaintRule",
        rules_api(&sa)
            .replace("admins-rule", &PostParams::default(), &admins)
            .await
            .map(drop),
    );
    let mut unlabelled: DeviceTaintRule = mine.clone();
    unlabelled.metadata.name = Some("gpuready-sa-gpu-5".into());
    refused(
        "create a gpuready-named rule without gpuready's label",
        rules_api(&sa)
            .create(&PostParams::default(), &unlabelled)
            .await
            .map(drop),
    );
    let mut other_key = mine.clone();
    other_key.metadata = gpuready_api::device_taint_rule::owned_metadata(node, "FatalXid");
    other_key.metadata.name = Some("gpuready-sa-gpu-6".into());
    refused(
        "create an own-looking rule with another taint key",
        rules_api(&sa)
            .create(&PostParams::default(), &other_key)
            .await
            .map(drop),
    );
    refused(
        "delete DeviceTaintRules as a collection",
        rules_api(&sa)
            .delete_collection(&kube::api::DeleteParams::default(), &ListParams::default())
            .await
            .map(drop),
    );
    refused(
        "write a ResourceSlice",
        slice_api(&sa)
            .patch(
                &format!("{node}-gpu.nvidia.com-test"),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
            )
            .await
            .map(drop),
    );
}

/// The test API server serves `resource.k8s.io/v1` DeviceTaintRules with the
/// selector fields gpuready sets (what `kubectl explain` shows).
#[tokio::test]
async fn the_api_server_serves_device_taint_rules_v1() {
    let env = env_with_crd().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut cmd = env.kubectl();
        cmd.args([
            "explain",
            "devicetaintrules.spec.deviceSelector",
            "--api-version=resource.k8s.io/v1",
        ]);
        let out = run(cmd, None).await;
        if out.ok {
            for field in ["driver", "pool", "device"] {
                assert!(out.stdout.contains(field), "{}", out.stdout);
            }
            println!("{}", out.stdout);
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "kubectl explain failed: {}{}",
            out.stdout,
            out.stderr
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `gpuready release` (the chart's uninstall hook) deletes the DeviceTaintRules
/// gpuready wrote — its label and name prefix, nothing else — so uninstalling
/// leaves no GPU tainted; an admin's rule and a look-alike without gpuready's
/// label stay as they were. Its own control plane: release takes back
/// everything of gpuready's the cluster holds.
#[tokio::test]
async fn gpuready_release_deletes_only_its_own_device_rules() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let rule = |name: &str, device: &str, owned: bool| -> DeviceTaintRule {
        let mut r: DeviceTaintRule = serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": {
                "deviceSelector": { "driver": "gpu.nvidia.com", "pool": "h200-8", "device": device },
                "taint": { "key": keys::device_rules::TAINT_KEY, "value": "FatalXid", "effect": "NoSchedule" },
            },
        }))
        .expect("rule");
        if owned {
            let mut meta = gpuready_api::device_taint_rule::owned_metadata("h200-8", "FatalXid");
            meta.name = Some(name.to_owned());
            r.metadata = meta;
        }
        r
    };
    let api = rules_api(&client);
    for r in [
        rule("gpuready-h200-8-gpu-3", "gpu-3", true),
        rule("gpuready-h200-8-gpu-6", "gpu-6", false),
        rule("maintenance-h200-8-gpu-1", "gpu-1", false),
    ] {
        api.create(&PostParams::default(), &r)
            .await
            .expect("creating a DeviceTaintRule");
    }
    let kubeconfig = env.kubeconfig_path().to_str().expect("utf-8").to_owned();
    let o = gpuready()
        .args(["release", "--kubeconfig", &kubeconfig, "--dry-run"])
        .output()
        .expect("gpuready release --dry-run");
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("would delete DeviceTaintRule gpuready-h200-8-gpu-3"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        api.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        3
    );
    let o = gpuready()
        .args(["release", "--kubeconfig", &kubeconfig])
        .output()
        .expect("gpuready release");
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("1 DeviceTaintRule(s) released"),
        "{}",
        stdout(&o)
    );
    let mut left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|r| r.name_any())
        .collect();
    left.sort();
    assert_eq!(left, ["gpuready-h200-8-gpu-6", "maintenance-h200-8-gpu-1"]);
}
