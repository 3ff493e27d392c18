//! `gpuready check` without `--nodes` reads the live cluster, read-only, and
//! prints the same verdicts as the offline check.

mod support;

use std::process::Command;

use serde_json::{Value, json};
use support::*;

fn gpuready(env: &gpuready_testenv::TestEnv, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpuready"))
        .args(args)
        .env("KUBECONFIG", env.kubeconfig_path())
        .output()
        .expect("run gpuready");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn live_check_reads_the_cluster_and_writes_nothing() {
    let env = env_with_crd().await;
    let client = env.client().unwrap();
    let mut labels = gfd_3090();
    labels.insert("pool".into(), "live".into());
    create_node(&client, "live-good", labels.clone(), 1, json!([])).await;
    create_node(&client, "live-broken", labels, 1, json!([])).await;
    set_node_status(&client, "live-broken", 1, 0, true).await;
    apply_profile(
        &client,
        r#"
apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata: { name: live }
spec:
  nodeSelector: { matchLabels: { pool: live } }
  gpu: { products: ["NVIDIA-GeForce-RTX-3090"] }
"#,
    )
    .await;
    let before = get_node(&client, "live-broken")
        .await
        .metadata
        .resource_version;

    let (code, stdout, stderr) = gpuready(&env, &["check", "-o", "json"]);
    assert_eq!(code, 1, "one node is not ready\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("JSON report");
    let by_name = |n: &str| {
        report["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} in report"))
    };
    assert_eq!(by_name("live-good")["ready"], true);
    assert_eq!(by_name("live-broken")["reason"], "DevicesUnhealthy");
    assert_eq!(
        get_node(&client, "live-broken")
            .await
            .metadata
            .resource_version,
        before,
        "a check writes nothing"
    );

    // A what-if: local profiles replace the cluster's.
    let dir = tempfile::tempdir().unwrap();
    let what_if = dir.path().join("p.yaml");
    std::fs::write(
        &what_if,
        r#"
apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata: { name: what-if }
spec:
  nodeSelector: { matchLabels: { pool: live } }
  gpu: { minMemoryMib: 40000 }
"#,
    )
    .unwrap();
    let (code, stdout, _) = gpuready(&env, &["check", "--profiles", what_if.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stdout.contains("MemoryTooSmall"), "{stdout}");
    assert!(stdout.contains("what-if"), "{stdout}");
}
