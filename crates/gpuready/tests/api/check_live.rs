//! `gpuready check` without `--nodes` reads the live cluster, read-only, and
//! prints the same verdicts as the offline check.

use crate::support;

use serde_json::{Value, json};
use support::*;

/// `gpuready <args>` against `env`: exit code, stdout, stderr.
fn gpuready_check(env: &gpuready_testenv::TestEnv, args: &[&str]) -> (i32, String, String) {
    let out: Out = gpuready_on(env)
        .args(args)
        .output()
        .expect("run gpuready")
        .into();
    (out.code.unwrap_or(-1), out.stdout, out.stderr)
}

#[tokio::test]
async fn live_check_reads_the_cluster_and_writes_nothing() {
    let env = env_with_crd().await;
    let client = env.client().unwrap();
    create_node(&client, "live-good", rtx3090_in("live"), 1, json!([])).await;
    create_node(&client, "live-broken", rtx3090_in("live"), 1, json!([])).await;
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

    let (code, stdout, stderr) = gpuready_check(&env, &["check", "-o", "json"]);
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
    let (_dir, what_if) = temp_file(
        "p.yaml",
        r#"
apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata: { name: what-if }
spec:
  nodeSelector: { matchLabels: { pool: live } }
  gpu: { minMemoryMib: 40000 }
"#,
    );
    let (code, stdout, _) =
        gpuready_check(&env, &["check", "--profiles", what_if.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stdout.contains("MemoryTooSmall"), "{stdout}");
    assert!(stdout.contains("what-if"), "{stdout}");
}
