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
//! Observe profiles run as Enforce here: the mode decides what is written,
//! never a layer's verdict, and only written verdicts can be read back.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use gpuready::check::{CheckReport, check_cluster, check_files};
use gpuready_api::keys;
use gpuready_api::probe::{PROBE_REPORT_DATA_KEY, ProbeReport, configmap_name};
use gpuready_core::{GovernanceKind, Status};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use support::*;

/// The report `gpuready probe` wrote on a real H200 node.
const H200_REPORT: &str =
    include_str!("../../gpuready-core/tests/fixtures/h200-real/probe-report.json");

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

        let run = start_controller(&env, run_args(&[&format!("--probe-namespace={ns}")]));
        // Converged: the live check plans no change the controller has not made.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        loop {
            let pending: Vec<String> = live(&client, &ns, None)
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
                "{example}: run did not converge to what check plans:\n{}",
                pending.join("\n")
            );
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        run.stop().await.expect("clean stop");

        let now = jiff::Timestamp::now().to_string();
        let live = live(&client, &ns, Some(&now)).await;

        // run ⇔ live check, read back from the nodes.
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("nodes")
            .items;
        for a in &live.nodes {
            let node = nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(&a.name))
                .expect("node");
            same_as_written(example, node, a);
            layers_compared += a.layers.len();
        }
        // The reports were read: the H200's judged, the unreadable one named.
        let by_name = |r: &CheckReport, n: &str| {
            r.nodes
                .iter()
                .find(|a| a.name == n)
                .cloned()
                .unwrap_or_else(|| panic!("{n} in the report"))
        };
        let health = |r: &CheckReport, n: &str| {
            by_name(r, n)
                .layers
                .iter()
                .find(|l| l.layer == gpuready_api::Layer::Health)
                .map(|l| l.reason.clone())
        };
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

        // live check ⇔ offline check over dumps of the same objects.
        let configmaps = Api::<ConfigMap>::namespaced(client.clone(), &ns)
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
        let write = |name: &str, text: String| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).expect("write");
            p.to_string_lossy().into_owned()
        };
        let nodes_file = write("nodes.json", list_json(&nodes));
        let profiles_file = write("profiles.yaml", profiles_yaml);
        let reports_file = write("configmaps.json", list_json(&configmaps));
        let offline = check_files(&check_args(&[
            "--nodes",
            &nodes_file,
            "--profiles",
            &profiles_file,
            "--probe-reports",
            &reports_file,
            "--now",
            &now,
        ]))
        .expect("offline check");
        assert_eq!(offline.nodes.len(), live.nodes.len(), "{example}: nodes");
        for a in &live.nodes {
            let o = by_name(&offline, &a.name);
            assert_eq!(
                (&o.ready, &o.reason, &o.layers),
                (&a.ready, &a.reason, &a.layers),
                "{example}/{}: offline check against live check",
                a.name
            );
        }
        println!(
            "{example}: {} nodes, run = live check = offline check",
            live.nodes.len()
        );
    }
    assert!(
        layers_compared > 20,
        "only {layers_compared} layers compared"
    );
}
