//! The evidence of issue 31 read by the controller on a real API server
//! (kube-apiserver v1.37): ResourceSlices whose attributes come in KEP-5491's
//! list form (served with the `DRAListTypeAttributes` gate on), judged by a
//! profile's `gpu.maxGpusPerNumaNode`.

mod support;

use std::collections::BTreeMap;

use gpuready_api::keys::reasons;
use gpuready_testenv::{TestEnv, Tuning};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

fn fixture_slice(file: &str, node: &str) -> Value {
    let path = repo_root()
        .join("crates/gpuready-core/tests/fixtures/evidence")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("fixture");
    let mut v: Value = serde_yaml_ng::from_str(&text).expect("slice YAML");
    v["metadata"] = json!({ "name": format!("{node}-gpu.nvidia.com-test") });
    v["spec"]["nodeName"] = json!(node);
    v["spec"]["pool"]["name"] = json!(node);
    v
}

async fn put_slice(client: &Client, slice: &Value) -> Value {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &gpuready::controller::evidence::slice_resource(),
    );
    let obj: DynamicObject = serde_json::from_value(slice.clone()).expect("slice");
    let stored = api
        .patch(
            obj.metadata.name.as_deref().expect("name"),
            &PatchParams::apply("test").force(),
            &Patch::Apply(&obj),
        )
        .await
        .expect("publishing the ResourceSlice");
    serde_json::to_value(stored).expect("json")
}

#[tokio::test]
async fn list_typed_numa_nodes_reach_the_controller() {
    let env = TestEnv::start_with(&Tuning {
        apiserver: vec!["--feature-gates=DRAListTypeAttributes=true".into()],
        ..Tuning::default()
    })
    .await
    .expect("test control plane");
    install_crds(&env, CRD_FILE, TEST_MANAGER).await;
    let client = env.client().expect("client");
    let node = "h200-numa";
    let labels = BTreeMap::from([
        (POOL.to_owned(), "numa".to_owned()),
        (
            "feature.node.kubernetes.io/pci-0302_10de.present".to_owned(),
            "true".to_owned(),
        ),
    ]);
    create_node(&client, node, labels, 0, json!([])).await;
    // The API server keeps the list form (it drops fields of gates that are off).
    let stored = put_slice(
        &client,
        &fixture_slice("dra-h200-8gpu-numa-ints.yaml", node),
    )
    .await;
    assert_eq!(
        stored["spec"]["devices"][0]["attributes"]["resource.kubernetes.io/numaNode"],
        json!({ "ints": [0] }),
        "the API server served the list form back"
    );
    apply_profile(
        &client,
        &format!(
            "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata: {{name: numa}}\nspec:\n  nodeSelector: {{matchLabels: {{{POOL}: numa}}}}\n  gpu: {{products: [NVIDIA-H200], count: 8, maxGpusPerNumaNode: 4}}\n"
        ),
    )
    .await;
    let run = start_controller(&env, test_args());
    eventually(60, "four GPUs per NUMA node: ready", || async {
        let n = get_node(&client, node).await;
        (gpu_ready(&n) == Some(("True".into(), "Ready".into()))).then_some(())
    })
    .await;
    // The BIOS collapses the topology: every GPU on NUMA node 0.
    put_slice(
        &client,
        &fixture_slice("dra-h200-8gpu-numa-collapsed.yaml", node),
    )
    .await;
    eventually(60, "eight GPUs on one NUMA node: not ready", || async {
        let n = get_node(&client, node).await;
        (gpu_ready(&n) == Some(("False".into(), reasons::TOO_MANY_GPUS_PER_NUMA_NODE.into())))
            .then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
}
