//! The evidence the chart's ServiceAccount reads, on a real kube-apiserver with
//! gpuready run in-process as that account: ResourceSlices and NodeFeatures
//! drive the taint, the DRA driver's ComputeDomainCliques the Fabric layer. The
//! ClusterRole's list/watch suffice and every write is refused.

use crate::support;

use gpuready_api::keys;
use gpuready_testenv::TestEnv;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

/// nfd-worker's NodeFeature for `node`: `gpus` NVIDIA H200s (class 0302) and a NIC.
fn node_feature_json(node: &str, ns: &str, gpus: usize) -> Value {
    let mut elements =
        vec![json!({"attributes": {"class": "0200", "vendor": "1af4", "device": "1041"}})];
    elements.extend(
        (0..gpus)
            .map(|_| json!({"attributes": {"class": "0302", "vendor": "10de", "device": "2335"}})),
    );
    json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {"name": node, "namespace": ns, "labels": {"nfd.node.kubernetes.io/node-name": node}},
        "spec": {"features": {"instances": {"pci.device": {"elements": elements}}}},
    })
}

/// ResourceSlices and NodeFeatures on the real API server drive the taint on and
/// off, with gpuready running as the chart's ServiceAccount: its ClusterRole's
/// list/watch on exactly those two resources is sufficient, and it can write
/// neither.
#[tokio::test]
async fn resource_slices_and_node_features_drive_the_taint_as_the_service_account() {
    let env = TestEnv::start().await.expect("test control plane");
    let admin = env.client().expect("client");
    let ns = "gpuready-system";
    helm_install(&env, ns, &[]).await;
    wait_established(&admin, &[CRD_NAME]).await;
    // The NodeFeature CRD, as NFD's chart would install it.
    install_crds(&env, "deploy/crds/nfd-crds.yaml", "nfd").await;
    let nfd_ns = "node-feature-discovery";
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": nfd_ns}})).expect("ns"),
        )
        .await
        .expect("namespace");

    let node = "gpu-h200-01";
    create_node(
        &admin,
        node,
        [
            ("pool".to_owned(), "dra".to_owned()),
            (
                "feature.node.kubernetes.io/pci-0302_10de.present".to_owned(),
                "true".to_owned(),
            ),
        ]
        .into(),
        0,
        json!([]),
    )
    .await;
    apply_profile(
        &admin,
        r#"
apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata: { name: h200-dra }
spec:
  nodeSelector: { matchLabels: { pool: dra } }
  evidence: DRA
  gpu: { products: [NVIDIA-H200], count: 1, minMemoryMib: 140000 }
  minDriverVersion: "580.159.04"
  cudaVersion: "13.0"
  maxLabelAgeSeconds: 0
"#,
    )
    .await;
    let run = start_controller_with(service_account_config(&env, ns, RELEASE), test_args());
    let nodes: Api<Node> = Api::all(admin.clone());
    let expect = |status: &'static str, reason: &'static str| {
        let nodes = nodes.clone();
        async move {
            eventually(60, &format!("GpuReady={status} {reason}"), || async {
                let n = nodes.get(node).await.ok()?;
                let tainted = taint_keys(&n).contains(&keys::DEFAULT_TAINT_KEY.to_owned());
                let ok = gpu_ready(&n) == Some((status.into(), reason.into()))
                    && tainted == (status != "True");
                if !ok {
                    // Shown only when the test fails: what the node says instead.
                    println!("waiting: GpuReady {:?}, tainted {tainted}", gpu_ready(&n));
                }
                ok.then_some(())
            })
            .await;
        }
    };
    expect("False", keys::reasons::NO_RESOURCE_SLICE).await;

    // The DRA driver publishes its slice: ready, untainted.
    let slices = dynamic_api(
        &admin,
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        None,
    );
    let fixture = std::fs::read_to_string(
        repo_root().join("crates/gpuready-core/tests/fixtures/evidence/dra-h200-1gpu.yaml"),
    )
    .expect("fixture");
    let mut slice: Value = serde_yaml_ng::from_str(&fixture).expect("slice");
    slice["metadata"] = json!({"name": "h200-gpu-slice"});
    slices
        .create(
            &PostParams::default(),
            &serde_json::from_value(slice.clone()).expect("slice"),
        )
        .await
        .expect("create slice");
    expect("True", "Ready").await;
    // `gpuready check` against the cluster reads the same slices and agrees.
    let report = live_report(&admin).await;
    let a = report
        .nodes
        .iter()
        .find(|a| a.name == node)
        .expect("node in the live report");
    assert_eq!(a.ready, Some(true), "{}: {}", a.reason, a.message);

    // Health: the driver taints gpu-0 (XID 79, NoSchedule).
    let taint = json!({"spec": {"devices": [{
        "name": "gpu-0",
        "attributes": slice["spec"]["devices"][0]["attributes"],
        "capacity": slice["spec"]["devices"][0]["capacity"],
        "taints": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}],
    }]}});
    slices
        .patch(
            "h200-gpu-slice",
            &PatchParams::default(),
            &Patch::Merge(&taint),
        )
        .await
        .expect("taint the device");
    expect("False", keys::reasons::DEVICES_TAINTED).await;
    let healed = json!({"spec": {"devices": slice["spec"]["devices"]}});
    slices
        .patch(
            "h200-gpu-slice",
            &PatchParams::default(),
            &Patch::Merge(&healed),
        )
        .await
        .expect("untaint the device");
    expect("True", "Ready").await;

    // NFD's PCI scan: two GPUs on the bus, one published.
    let features = dynamic_api(
        &admin,
        "nfd.k8s-sigs.io",
        "v1alpha1",
        "NodeFeature",
        "nodefeatures",
        Some(nfd_ns),
    );
    features
        .create(
            &PostParams::default(),
            &serde_json::from_value(node_feature_json(node, nfd_ns, 2)).expect("nf"),
        )
        .await
        .expect("create NodeFeature");
    expect("False", keys::reasons::GPU_NOT_ADVERTISED).await;
    features
        .patch(
            node,
            &PatchParams::apply("nfd-worker").force(),
            &Patch::Apply(&node_feature_json(node, nfd_ns, 1)),
        )
        .await
        .expect("update NodeFeature");
    expect("True", "Ready").await;

    // The slice goes away (kubelet wipes it when the plugin stops).
    slices
        .delete("h200-gpu-slice", &DeleteParams::default())
        .await
        .expect("delete slice");
    expect("False", keys::reasons::NO_RESOURCE_SLICE).await;
    assert_eq!(
        run.sample("gpuready_reconcile_errors_total{kind=\"forbidden\"}"),
        0.0,
        "no reconcile was refused"
    );
    run.stop().await.expect("clean stop");

    // Read-only: the ServiceAccount writes neither source.
    let sa = env
        .client_as_service_account(ns, RELEASE)
        .expect("SA client");
    let err = dynamic_api(
        &sa,
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        None,
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(slice).expect("slice"),
    )
    .await
    .expect_err("SA cannot create ResourceSlices");
    assert_eq!(status_code(&err), Some(403), "{err}");
    let err = dynamic_api(
        &sa,
        "nfd.k8s-sigs.io",
        "v1alpha1",
        "NodeFeature",
        "nodefeatures",
        Some(nfd_ns),
    )
    .delete(node, &DeleteParams::default())
    .await
    .expect_err("SA cannot delete NodeFeatures");
    assert_eq!(status_code(&err), Some(403), "{err}");
    // ... and gets would need `get`, which it does not have either.
    let err = dynamic_api(
        &sa,
        "nfd.k8s-sigs.io",
        "v1alpha1",
        "NodeFeature",
        "nodefeatures",
        Some(nfd_ns),
    )
    .get(node)
    .await
    .expect_err("no get on NodeFeatures");
    assert_eq!(status_code(&err), Some(403), "{err}");
}

/// The NVIDIA DRA driver's ComputeDomainCliques, with the driver's own CRD
/// (v0.4.1, from the Go module proxy: tests/control-plane/dra-driver-crds.sh),
/// drive a profile's Fabric layer with gpuready running as the chart's
/// ServiceAccount: list/watch suffice, writes are refused, and before the CRD
/// exists the evidence reads as not read (Unknown), in `run` and `check` alike.
#[tokio::test]
async fn compute_domain_cliques_drive_the_fabric_layer_as_the_service_account() {
    let env = TestEnv::start().await.expect("test control plane");
    let admin = env.client().expect("client");
    let ns = "gpuready-system";
    helm_install(&env, ns, &[]).await;
    wait_established(&admin, &[CRD_NAME]).await;
    let node = "gb200-cd-01";
    let clique = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766";
    let mut labels = rtx3090_in("cd");
    labels.insert("nvidia.com/gpu.clique".into(), clique.into());
    create_node(&admin, node, labels, 1, json!([])).await;
    apply_profile(
        &admin,
        &rtx3090_profile(
            "cd",
            "cd",
            "fabric: {computeDomainCliques: Check, whenProbeMissing: Ignore}",
        ),
    )
    .await;
    let nodes: Api<Node> = Api::all(admin.clone());
    let expect = |status: &'static str, reason: &'static str| {
        let nodes = nodes.clone();
        async move {
            eventually(60, &format!("GpuReady={status} {reason}"), || async {
                let n = nodes.get(node).await.ok()?;
                (gpu_ready(&n) == Some((status.into(), reason.into()))).then_some(())
            })
            .await;
        }
    };
    let sa = || service_account_config(&env, ns, RELEASE);

    // No driver: the evidence is not read.
    let run = start_controller_with(sa(), test_args());
    expect("Unknown", keys::fabric::COMPUTE_DOMAIN_CLIQUES_UNREAD).await;
    run.stop().await.expect("clean stop");
    let live = live_report(&admin).await;
    let a = live.nodes.iter().find(|a| a.name == node).expect("node");
    assert_eq!(
        a.reason,
        keys::fabric::COMPUTE_DOMAIN_CLIQUES_UNREAD,
        "{}",
        a.message
    );

    // The driver's CRD, and its namespace.
    let crd = gpuready_testenv::upstream_dra::compute_domain_clique_crd().expect("driver CRD");
    install_crds(&env, crd.to_str().expect("utf-8 path"), "dra-driver").await;
    let driver_ns = "nvidia-dra-driver-gpu";
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": driver_ns}})).expect("ns"),
        )
        .await
        .expect("namespace");
    let run = start_controller_with(sa(), test_args());
    expect("True", "Ready").await;
    let cliques = dynamic_api(
        &admin,
        "resource.nvidia.com",
        "v1beta1",
        "ComputeDomainClique",
        "computedomaincliques",
        Some(driver_ns),
    );
    let domain = "5b7f1c2e-8d4a-4f0e-9c3b-2a1d6e8f0b47";
    let name = format!("{domain}.{clique}");
    let daemons = |status: &str, in_clique: &str| json!([{ "nodeName": node, "ipAddress": "10.0.12.11", "cliqueID": in_clique, "index": 0, "status": status }]);
    let object = json!({
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainClique",
        "metadata": { "name": name, "namespace": driver_ns,
            "labels": { "resource.nvidia.com/computeDomain": domain } },
        "daemons": daemons("NotReady", clique),
    });
    cliques
        .create(
            &PostParams::default(),
            &serde_json::from_value(object.clone()).expect("clique"),
        )
        .await
        .expect("create the ComputeDomainClique");
    expect("False", keys::fabric::IMEX_DAEMON_NOT_READY).await;
    let set = |d: Value| {
        let cliques = cliques.clone();
        let name = name.clone();
        async move {
            cliques
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({ "daemons": d })),
                )
                .await
                .expect("update the daemons");
        }
    };
    set(daemons("Ready", clique)).await;
    expect("True", "Ready").await;
    set(daemons("Ready", "9277d399-0674-44a9-b64e-d85bb19ce2b0.1")).await;
    expect("False", keys::fabric::COMPUTE_DOMAIN_CLIQUE_MISMATCH).await;
    cliques
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    expect("True", "Ready").await;
    assert_eq!(
        run.sample("gpuready_reconcile_errors_total{kind=\"forbidden\"}"),
        0.0,
        "no reconcile was refused"
    );
    run.stop().await.expect("clean stop");

    // Read-only: the ServiceAccount writes none.
    let sa_client = env
        .client_as_service_account(ns, RELEASE)
        .expect("SA client");
    let err = dynamic_api(
        &sa_client,
        "resource.nvidia.com",
        "v1beta1",
        "ComputeDomainClique",
        "computedomaincliques",
        Some(driver_ns),
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(object).expect("clique"),
    )
    .await
    .expect_err("SA cannot create ComputeDomainCliques");
    assert_eq!(status_code(&err), Some(403), "{err}");
}
