//! The evidence of issue 31 read by the controller on a real API server
//! (kube-apiserver v1.37): ResourceSlices whose attributes come in KEP-5491's
//! list form (served with the `DRAListTypeAttributes` gate on), judged by a
//! profile's `gpu.maxGpusPerNumaNode`; outside verdicts, Node conditions
//! another agent writes, judged by the External layer; and a multi-node NVLink
//! tray's clique label and probe-reported fabric state, judged by the Fabric
//! layer.

use crate::support;

use std::collections::BTreeMap;

use gpuready::probe::publish::publish;
use gpuready_api::keys::{external, fabric, reasons};
use gpuready_api::probe::{FabricPhase, ProbeReport};
use gpuready_testenv::{TestEnv, Tuning};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::*;

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
    let stored = put_slice(&client, &engine_slice("dra-h200-8gpu-numa-ints.yaml", node)).await;
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
        &engine_slice("dra-h200-8gpu-numa-collapsed.yaml", node),
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

/// Sets one outside condition on the node as node-problem-detector does (a
/// strategic merge of `status.conditions`, keyed by type), kubelet's Ready kept.
async fn set_outside_condition(
    client: &Client,
    node: &str,
    type_: &str,
    status: &str,
    reason: &str,
) {
    let now = jiff::Timestamp::now().to_string();
    let patch = json!({ "status": { "conditions": [{
        "type": type_, "status": status, "reason": reason, "message": "set by the test",
        "lastHeartbeatTime": now, "lastTransitionTime": now,
    }] } });
    Api::<Node>::all(client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("setting the outside condition");
}

#[tokio::test]
async fn an_outside_verdict_gates_the_node_and_its_recovery_releases_it() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let node = "aks-gpu-1";
    create_node(&client, node, rtx3090_in("aks"), 1, json!([])).await;
    set_outside_condition(&client, node, "XIDErrors", "False", "NoXIDErrors").await;
    apply_profile(
        &client,
        &rtx3090_profile(
            "aks",
            "aks",
            "external: {presets: [AksNodeProblemDetector]}",
        ),
    )
    .await;
    let run = start_controller(&env, test_args());
    eventually(60, "healthy outside verdict: ready", || async {
        let n = get_node(&client, node).await;
        (gpu_ready(&n) == Some(("True".into(), "Ready".into()))).then_some(())
    })
    .await;
    // NPD finds XIDs: the status flip alone re-queues the node.
    set_outside_condition(&client, node, "XIDErrors", "True", "XIDErrors").await;
    eventually(60, "the provider's verdict gates the node", || async {
        let n = get_node(&client, node).await;
        (gpu_ready(&n) == Some(("False".into(), external::BROKEN.into()))).then_some(())
    })
    .await;
    set_outside_condition(&client, node, "XIDErrors", "False", "NoXIDErrors").await;
    eventually(60, "the verdict clears: ready again", || async {
        let n = get_node(&client, node).await;
        (gpu_ready(&n) == Some(("True".into(), "Ready".into()))).then_some(())
    })
    .await;
    // The foreign condition is the provider's: gpuready left it as it was.
    let n = get_node(&client, node).await;
    let xid = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "XIDErrors"))
        .expect("XIDErrors still there");
    assert_eq!(xid.message.as_deref(), Some("set by the test"));
    run.stop().await.expect("clean stop");
}

fn tray_report(node: &str) -> ProbeReport {
    let path =
        repo_root().join("crates/gpuready-core/tests/fixtures/fabric/gb200-tray-report.json");
    let mut r: ProbeReport =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("report");
    r.node = Some(node.into());
    r.generated_at = jiff::Timestamp::now().to_string();
    r
}

#[tokio::test]
async fn the_fabric_layer_follows_the_clique_label_and_the_probe() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let ns = env.create_namespace("gpuready").await.expect("namespace");
    let node = "gb200-a-01";
    let clique = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766";
    let mut labels = rtx3090_in("nvl");
    labels.insert("nvidia.com/gpu.clique".into(), clique.into());
    create_node(&client, node, labels, 1, json!([])).await;
    // Health is left out of the gate so the Fabric layer's own reason shows.
    apply_profile(
        &client,
        &rtx3090_profile(
            "nvl",
            "nvl",
            &format!(
                "gatingLayers: [Node, Hardware, Driver, DevicePlugin, FeatureDiscovery, Profile, Compatibility, Fabric]\nfabric: {{cliques: [\"{clique}\"]}}"
            ),
        ),
    )
    .await;
    let run = start_controller(&env, run_args(&[&format!("--probe-namespace={ns}")]));
    publish(&client, &ns, node, &tray_report(node))
        .await
        .expect("publish");
    eventually(60, "every GPU registered: ready", || async {
        let n = get_node(&client, node).await;
        (gpu_ready(&n) == Some(("True".into(), "Ready".into()))).then_some(())
    })
    .await;
    let mut pending = tray_report(node);
    pending.gpus[2].fabric.as_mut().expect("fabric").state = FabricPhase::InProgress;
    publish(&client, &ns, node, &pending)
        .await
        .expect("publish");
    eventually(60, "a GPU still registering: not ready", || async {
        let n = get_node(&client, node).await;
        (gpu_ready(&n)
            == Some((
                "False".into(),
                fabric::FABRIC_REGISTRATION_INCOMPLETE.into(),
            )))
        .then_some(())
    })
    .await;
    publish(&client, &ns, node, &tray_report(node))
        .await
        .expect("publish");
    set_labels(
        &client,
        node,
        json!({ "nvidia.com/gpu.clique": "9277d399-0674-44a9-b64e-d85bb19ce2b0.1" }),
    )
    .await;
    eventually(60, "another clique than the rack's: not ready", || async {
        let n = get_node(&client, node).await;
        (gpu_ready(&n) == Some(("False".into(), fabric::UNEXPECTED_CLIQUE.into()))).then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
}

/// Racks grouped by a label: a node's verdict follows its peers' cliques, and
/// a change of one node re-queues the others of its rack (the node whose
/// verdict flips below never changes itself).
#[tokio::test]
async fn a_rack_grouped_by_a_label_follows_its_peers_cliques() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let x = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766";
    let y = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32767";
    for (node, rack, clique) in [
        ("nvl-a1", "a", x),
        ("nvl-a2", "a", x),
        ("nvl-a3", "a", x),
        ("nvl-b1", "b", y),
    ] {
        let mut labels = rtx3090_in("racks");
        labels.insert("example.com/nvl-rack".into(), rack.into());
        labels.insert("nvidia.com/gpu.clique".into(), clique.into());
        create_node(&client, node, labels, 1, json!([])).await;
    }
    apply_profile(
        &client,
        &rtx3090_profile(
            "racks",
            "racks",
            "fabric: {groupByLabel: example.com/nvl-rack, whenProbeMissing: Ignore}",
        ),
    )
    .await;
    let run = start_controller(&env, test_args());
    let verdicts = || async {
        let mut out = Vec::new();
        for n in ["nvl-a1", "nvl-a2", "nvl-a3", "nvl-b1"] {
            out.push(gpu_ready(&get_node(&client, n).await).map(|(s, r)| format!("{s}/{r}")));
        }
        out
    };
    let expect = |want: [&'static str; 4], what: &'static str| {
        let verdicts = &verdicts;
        async move {
            let want: Vec<Option<String>> = want.iter().map(|w| Some((*w).to_owned())).collect();
            eventually(60, what, || async {
                (verdicts().await == want).then_some(())
            })
            .await;
        }
    };
    let ready = "True/Ready";
    let split = "False/CliqueSplit";
    expect([ready; 4], "every rack in one clique: ready").await;
    set_labels(&client, "nvl-a3", json!({ "nvidia.com/gpu.clique": y })).await;
    expect(
        [ready, ready, split, ready],
        "a3 alone in another clique: a3 is the minority",
    )
    .await;
    // a2 joins a3: a1, unchanged, is now the minority of rack a.
    set_labels(&client, "nvl-a2", json!({ "nvidia.com/gpu.clique": y })).await;
    expect(
        [split, ready, ready, ready],
        "a1 is now the minority, re-judged for a peer's change",
    )
    .await;
    // a3 leaves the rack: a1 and a2 tie, no majority.
    set_labels(&client, "nvl-a3", json!({ "example.com/nvl-rack": "b" })).await;
    expect(
        [split, split, ready, ready],
        "a tie in rack a; a3 is in rack b's clique",
    )
    .await;
    // a2 is deleted: a1, unchanged, is alone in rack a and ready again.
    Api::<Node>::all(client.clone())
        .delete("nvl-a2", &Default::default())
        .await
        .expect("delete");
    eventually(60, "a1 alone in rack a: ready", || async {
        (gpu_ready(&get_node(&client, "nvl-a1").await) == Some(("True".into(), "Ready".into())))
            .then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
}
