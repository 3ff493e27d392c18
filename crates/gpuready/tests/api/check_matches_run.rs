//! `gpuready check` reads what `gpuready run` reads and judges it the same,
//! layer by layer. Over every example cluster of deploy/examples, on a real
//! API server (gpuready-testenv), with probe report ConfigMaps beside the
//! nodes — the real H200's report (the core's fixture
//! `h200-real/probe-report.json`, published by the probe's own `publish`) for
//! one GPU node, an unreadable carrier for another, and an unlabelled
//! look-alike for a third, which no reader may take:
//!
//! - the controller (`gpuready run --probe-namespace NS`) writes every layer's
//!   condition (the profiles ask for `perLayerNodeConditions`) and `GpuReady`;
//!   the live `gpuready check --probe-namespace NS` reports the same status,
//!   reason and message for each layer, and the same overall verdict;
//! - the offline `gpuready check --nodes --profiles --probe-reports` over dumps
//!   of the same objects (the shapes `kubectl get -o json` prints) reports the
//!   live check's layers, at the same instant.
//!
//! The same over the real H200 VM of the engine's fixtures: its GFD labels,
//! the DRA driver's ResourceSlice, NFD's NodeFeature and the probe's report,
//! each read from the API server live and from its file offline.
//!
//! Observe profiles run as Enforce here: the mode decides what is written,
//! never a layer's verdict, and only written verdicts can be read back.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};

use gpuready::check::{CheckReport, check_cluster, check_files};
use gpuready_api::keys;
use gpuready_api::probe::{PROBE_REPORT_DATA_KEY, ProbeReport, configmap_name};
use gpuready_core::{GovernanceKind, Source, Status};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use support::*;

/// The report `gpuready probe` wrote on a real H200 node.
const H200_REPORT: &str =
    include_str!("../../../gpuready-core/tests/fixtures/h200-real/probe-report.json");

/// The example's profiles as applied here: per-layer node conditions on,
/// Observe run as Enforce. Returns the documents (the offline check's input).
async fn apply_profiles(client: &Client, example: &str) -> Vec<Value> {
    let path = repo_root().join(example).join("profiles.yaml");
    let text = std::fs::read_to_string(&path).expect("profiles.yaml");
    let mut docs = yaml_documents(&text);
    for doc in &mut docs {
        doc["spec"]["perLayerNodeConditions"] = json!(true);
        if doc["spec"]["mode"] == "Observe" {
            doc["spec"]["mode"] = json!("Enforce");
        }
        apply_profile_json(client, doc.clone()).await;
    }
    docs
}

/// GPU nodes of the example (those GFD labels), H200s first.
fn gpu_nodes(example: &str) -> Vec<String> {
    let mut nodes: Vec<(bool, String)> = example_nodes(example)
        .iter()
        .filter_map(|n| {
            let product = n["metadata"]["labels"]["nvidia.com/gpu.product"].as_str()?;
            let name = n["metadata"]["name"].as_str()?.to_owned();
            Some((!product.contains("H200"), name))
        })
        .collect();
    nodes.sort();
    nodes.into_iter().map(|(_, n)| n).collect()
}

fn configmap(name: &str, labelled: bool, report: &str) -> ConfigMap {
    let labels = if labelled {
        json!({ keys::LABEL_PROBE_REPORT: "true" })
    } else {
        json!({})
    };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "labels": labels },
        "data": { PROBE_REPORT_DATA_KEY: report },
    }))
    .expect("a ConfigMap")
}

/// Publishes the probe report ConfigMaps; returns the node with the H200's
/// report and the node with the unreadable one.
async fn publish_reports(client: &Client, ns: &str, gpus: &[String]) -> (String, Option<String>) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let first = gpus.first().expect("a GPU node").clone();
    let mut report: Value = serde_json::from_str(H200_REPORT).expect("the H200 report");
    report["node"] = json!(first);
    report["generatedAt"] = json!(jiff::Timestamp::now().to_string());
    let report: ProbeReport = serde_json::from_value(report).expect("a probe report");
    gpuready::probe::publish::publish(client, ns, &first, &report)
        .await
        .expect("publishing the H200 report");
    let invalid = gpus.get(1).cloned();
    if let Some(n) = &invalid {
        let name = configmap_name(n).expect("name");
        api.create(&PostParams::default(), &configmap(&name, true, "{not json"))
            .await
            .expect("an unreadable carrier");
    }
    if let Some(n) = gpus.get(2) {
        // Named like a carrier but without the label: the controller's watch
        // does not select it, so neither may a check.
        let name = configmap_name(n).expect("name");
        api.create(
            &PostParams::default(),
            &configmap(&name, false, "{not json"),
        )
        .await
        .expect("an unlabelled look-alike");
    }
    (first, invalid)
}

async fn live(client: &Client, ns: &str, now: Option<&str>) -> CheckReport {
    let mut flags = vec!["--probe-namespace", ns];
    if let Some(now) = now {
        flags.extend(["--now", now]);
    }
    check_cluster(client, "the test control plane", &check_args(&flags))
        .await
        .expect("live check")
}

fn condition_status(s: Status) -> &'static str {
    match s {
        Status::Ready => "True",
        Status::NotReady => "False",
        Status::Unknown => "Unknown",
    }
}

/// The controller's verdict as written on the node, against the live check's.
fn same_as_written(example: &str, node: &Node, a: &gpuready_core::NodeAssessment) {
    let conds: BTreeMap<String, (String, String, String)> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| gpuready_core::facts::is_own_condition(&c.type_))
        .map(|c| {
            let v = (
                c.status,
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default(),
            );
            (c.type_, v)
        })
        .collect();
    let at = format!("{example}/{}", a.name);
    if a.governance != GovernanceKind::Governed {
        assert!(conds.is_empty(), "{at}: ungoverned, yet {conds:?}");
        return;
    }
    let (status, reason, _) = &conds[keys::CONDITION_GPU_READY];
    let ready = if a.ready == Some(true) {
        "True"
    } else {
        "False"
    };
    assert_eq!(
        (status.as_str(), reason),
        (ready, &a.reason),
        "{at}: GpuReady"
    );
    let layer_types: BTreeSet<String> = gpuready_api::Layer::every()
        .map(|l| l.condition_type())
        .collect();
    let written: BTreeSet<&String> = conds.keys().filter(|t| layer_types.contains(*t)).collect();
    let judged: BTreeSet<String> = a.layers.iter().map(|l| l.layer.condition_type()).collect();
    assert_eq!(
        written,
        judged.iter().collect::<BTreeSet<_>>(),
        "{at}: the layers judged"
    );
    for l in &a.layers {
        let (status, reason, message) = &conds[&l.layer.condition_type()];
        assert_eq!(
            (status.as_str(), reason, message),
            (condition_status(l.status), &l.reason, &l.message),
            "{at}: layer {}",
            l.layer
        );
    }
}

/// `kubectl get <kind> -o json` of these objects.
fn list_json<T: serde::Serialize>(items: &[T]) -> String {
    serde_json::to_string(&json!({ "apiVersion": "v1", "kind": "List", "items": items }))
        .expect("a List")
}

fn by_name(r: &CheckReport, n: &str) -> gpuready_core::NodeAssessment {
    r.nodes
        .iter()
        .find(|a| a.name == n)
        .cloned()
        .unwrap_or_else(|| panic!("{n} in the report"))
}

/// The Health layer's reason for node `n`, if judged.
fn health(r: &CheckReport, n: &str) -> Option<String> {
    by_name(r, n)
        .layers
        .iter()
        .find(|l| l.layer == gpuready_api::Layer::Health)
        .map(|l| l.reason.clone())
}

/// A cluster loaded on `env` (nodes, `profiles`, report ConfigMaps in `ns`,
/// and `evidence`: files of other objects the offline check is given, as
/// (flag, `kubectl get -o json` of them)): runs the controller until the live
/// check plans nothing more, then holds run ⇔ live check ⇔ offline check,
/// layer by layer. Returns the live report and the count of layers compared.
async fn run_equals_check(
    what: &str,
    env: &gpuready_testenv::TestEnv,
    ns: &str,
    profiles: &[Value],
    evidence: &[(&str, String)],
) -> (CheckReport, usize) {
    let client = env.client().expect("client");
    let run = start_controller(env, run_args(&[&format!("--probe-namespace={ns}")]));
    // Converged: the live check plans no change the controller has not made.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let pending: Vec<String> = live(&client, ns, None)
            .await
            .nodes
            .into_iter()
            .filter(|a| !a.changes.is_empty())
            .map(|a| format!("{}: {:?}", a.name, a.changes))
            .collect();
        if pending.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: run did not converge to what check plans:\n{}",
            pending.join("\n")
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    run.stop().await.expect("clean stop");

    let now = jiff::Timestamp::now().to_string();
    let live = live(&client, ns, Some(&now)).await;

    // run ⇔ live check, read back from the nodes.
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items;
    let mut layers = 0;
    for a in &live.nodes {
        let node = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(&a.name))
            .expect("node");
        same_as_written(what, node, a);
        layers += a.layers.len();
    }

    // live check ⇔ offline check over dumps of the same objects.
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("configmaps")
        .items;
    let profiles_yaml = profiles
        .iter()
        .map(|d| serde_json::to_string(d).expect("json"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p.to_string_lossy().into_owned()
    };
    let files = [
        (
            "--nodes".to_owned(),
            write("nodes.json", &list_json(&nodes)),
        ),
        (
            "--profiles".to_owned(),
            write("profiles.yaml", &profiles_yaml),
        ),
        (
            "--probe-reports".to_owned(),
            write("configmaps.json", &list_json(&configmaps)),
        ),
    ]
    .into_iter()
    .chain(
        evidence
            .iter()
            .enumerate()
            .map(|(i, (flag, text))| ((*flag).to_owned(), write(&format!("e{i}.json"), text))),
    )
    .collect::<Vec<_>>();
    let mut flags: Vec<&str> = files
        .iter()
        .flat_map(|(f, p)| [f.as_str(), p.as_str()])
        .collect();
    flags.extend(["--now", &now]);
    let offline = check_files(&check_args(&flags)).expect("offline check");
    assert_eq!(offline.nodes.len(), live.nodes.len(), "{what}: nodes");
    for a in &live.nodes {
        let o = by_name(&offline, &a.name);
        assert_eq!(
            (&o.ready, &o.reason, &o.layers),
            (&a.ready, &a.reason, &a.layers),
            "{what}/{}: offline check against live check",
            a.name
        );
    }
    println!(
        "{what}: {} nodes, {layers} layers: run = live check = offline check",
        live.nodes.len()
    );
    (live, layers)
}

#[tokio::test]
async fn check_and_run_reach_the_same_verdict_layer_by_layer_over_the_examples() {
    let examples = examples();
    assert_eq!(examples.len(), 4, "four example clusters");
    let mut layers_compared = 0;
    for example in &examples {
        let env = env_with_crd().await;
        let client = env.client().expect("client");
        let ns = env.create_namespace("gpuready").await.expect("namespace");
        create_example_nodes(&client, example).await;
        let profiles = apply_profiles(&client, example).await;
        let (h200, invalid) = publish_reports(&client, &ns, &gpu_nodes(example)).await;
        let (live, layers) = run_equals_check(example, &env, &ns, &profiles, &[]).await;
        layers_compared += layers;
        // The reports were read: the H200's judged, the unreadable one named.
        assert!(
            health(&live, &h200).is_some(),
            "{example}/{h200}: the Health layer judged the H200's report"
        );
        if let Some(n) = &invalid {
            assert_eq!(
                health(&live, n).as_deref(),
                Some(keys::health_reasons::PROBE_REPORT_INVALID),
                "{example}/{n}: the unreadable carrier"
            );
        }
    }
    assert!(
        layers_compared > 20,
        "only {layers_compared} layers compared"
    );
}

/// A fixture of the engine's tests, as YAML, without its leading comments.
fn fixture(rel: &str) -> Value {
    let path = repo_root()
        .join("crates/gpuready-core/tests/fixtures")
        .join(rel);
    let text = std::fs::read_to_string(&path).expect("fixture");
    serde_yaml_ng::from_str(&text).expect("fixture YAML")
}

/// The real H200 VM of the engine's fixtures, as its sources showed it: GFD's
/// labels, the DRA driver's ResourceSlice, NFD's NodeFeature (its PCI scan),
/// and the probe's report, judged by DRA with device gating.
#[tokio::test]
async fn check_and_run_reach_the_same_verdict_on_the_real_h200_fixtures() {
    let env = env_with_crd().await;
    install_crds(&env, "deploy/crds/nfd-crds.yaml", "nfd").await;
    let client = env.client().expect("client");
    let ns = env.create_namespace("gpuready").await.expect("namespace");
    let node = "vm";
    let mut labels = fixture("evidence/gfd-h200-labels.yaml");
    labels["pool"] = json!("h200");
    labels["feature.node.kubernetes.io/pci-0302_10de.present"] = json!("true");
    // GFD's timestamp as fresh as the labels were when read.
    labels["nvidia.com/gfd.timestamp"] = json!(now_s().to_string());
    create_dumped_node(
        &client,
        &json!({
            "metadata": { "name": node, "labels": labels },
            "spec": {},
            "status": {
                "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady" }],
                "capacity": { "nvidia.com/gpu": "1" },
                "allocatable": { "nvidia.com/gpu": "1" },
            },
        }),
    )
    .await;
    let mut slice = fixture("h200-real/slice-driver-v25.12.0.yaml");
    slice["metadata"] = json!({ "name": slice["metadata"]["name"] });
    let obj: kube::api::DynamicObject = serde_json::from_value(slice.clone()).expect("slice");
    let slices = Api::<kube::api::DynamicObject>::all_with(
        client.clone(),
        &gpuready::readers::slice_resource(),
    );
    slices
        .create(&PostParams::default(), &obj)
        .await
        .expect("the ResourceSlice");
    let feature: gpuready_api::nfd::NodeFeature =
        serde_json::from_value(fixture("h200-real/nodefeature-nfd-v0.19.0.yaml"))
            .expect("a NodeFeature");
    let nfd_ns = feature.metadata.namespace.clone().expect("namespace");
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({ "metadata": { "name": nfd_ns } })).expect("namespace");
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("NFD's namespace");
    Api::<gpuready_api::nfd::NodeFeature>::namespaced(client.clone(), &nfd_ns)
        .create(&PostParams::default(), &feature)
        .await
        .expect("the NodeFeature");
    let profile = json!({
        "apiVersion": "gpuready.io/v1alpha1", "kind": "GpuNodeProfile",
        "metadata": { "name": "h200" },
        "spec": {
            "nodeSelector": { "matchLabels": { "pool": "h200" } },
            "gpu": { "products": ["NVIDIA-H200"], "minMemoryMib": 140000, "count": 1 },
            "minDriverVersion": "580.65.06",
            "cudaVersion": "13.0",
            "deviceGating": { "minReadyGpus": 1 },
            "probe": { "whenMissing": "Blocking" },
            "perLayerNodeConditions": true,
        },
    });
    apply_profile_json(&client, profile.clone()).await;
    let (h200, _) = publish_reports(&client, &ns, &[node.to_owned()]).await;

    let features = Api::<gpuready_api::nfd::NodeFeature>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodefeatures")
        .items;
    let evidence = [
        ("--resource-slices", list_json(&[slice])),
        ("--node-features", list_json(&features)),
    ];
    let (live, layers) = run_equals_check("the real H200", &env, &ns, &[profile], &evidence).await;
    let a = by_name(&live, &h200);
    assert!(layers >= 8, "every layer judged: {:?}", a.layers);
    let source = |l: gpuready_api::Layer| {
        a.layers
            .iter()
            .find(|x| x.layer == l)
            .map(|x| x.evidence)
            .unwrap_or_else(|| panic!("{l} judged"))
    };
    // Judged from every source the fixtures stand for.
    assert_eq!(
        source(gpuready_api::Layer::DevicePlugin),
        Source::ResourceSlices
    );
    assert_eq!(source(gpuready_api::Layer::Hardware), Source::NodeFeature);
    assert_eq!(source(gpuready_api::Layer::Health), Source::ProbeReport);
}
