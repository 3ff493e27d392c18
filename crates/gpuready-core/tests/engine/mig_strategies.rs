//! MIG under GFD's strategies, judged from data: the real H200's GFD labels
//! turned into each strategy's labels the way GFD v0.20.0's label code writes
//! them, and a table of cases (`fixtures/mig/gfd-v0.20.0-h200-strategies.yaml`)
//! saying what every layer must say. The single strategy relabels
//! `gpu.product` and `gpu.count` for the MIG devices: a product, memory or
//! count rule must read them as what they are, and a node mig-manager is
//! re-partitioning must show its state, not a mismatch.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use gpuready_api::Layer;
use gpuready_api::nfd::NodeFeature;
use gpuready_core::evaluate::Status;
use gpuready_core::evidence::EvidenceIndex;
use serde::Deserialize;

fn read(dir: &str, name: &str) -> String {
    let path = format!("{}/tests/fixtures/{dir}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[derive(Deserialize)]
struct Table {
    strategies: BTreeMap<String, BTreeMap<String, String>>,
    profiles: BTreeMap<String, String>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    strategy: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    /// Extended resource → [capacity, allocatable].
    resources: BTreeMap<String, [u32; 2]>,
    profile: String,
    ready: bool,
    /// [layer, status, reason, a fragment of the message].
    expect: Vec<[String; 4]>,
}

fn layer(name: &str) -> Layer {
    Layer::every()
        .find(|l| l.as_str() == name)
        .unwrap_or_else(|| panic!("no layer {name}"))
}

fn status(name: &str) -> Status {
    match name {
        "Ready" => Status::Ready,
        "NotReady" => Status::NotReady,
        "Unknown" => Status::Unknown,
        other => panic!("no status {other}"),
    }
}

#[test]
fn every_strategy_case_reads_as_the_table_says() {
    let table: Table = serde_yaml_ng::from_str(&read("mig", "gfd-v0.20.0-h200-strategies.yaml"))
        .expect("the strategy table");
    let base: BTreeMap<String, String> =
        serde_yaml_ng::from_str(&read("evidence", "gfd-h200-labels.yaml")).expect("GFD labels");
    let nfd: NodeFeature =
        serde_yaml_ng::from_str(&read("h200-real", "nodefeature-nfd-v0.19.0.yaml"))
            .expect("the real NodeFeature");
    let node_name = gpuready_core::evidence::node_feature_node(&nfd)
        .expect("the NodeFeature names its node")
        .to_owned();
    assert!(table.cases.len() >= 10, "the table lost its cases");
    for case in &table.cases {
        let mut node = NodeBuilder::bare(&node_name)
            .label(POOL.0, POOL.1)
            .label("feature.node.kubernetes.io/pci-0302_10de.present", "true")
            .label(gpuready_api::keys::nvidia::GFD_TIMESTAMP, &seconds_ago(30));
        let overlay = table
            .strategies
            .get(&case.strategy)
            .unwrap_or_else(|| panic!("{}: no strategy {}", case.name, case.strategy));
        let mut labels = base.clone();
        labels.extend(overlay.clone());
        labels.extend(case.labels.clone());
        labels.remove(gpuready_api::keys::nvidia::GFD_TIMESTAMP);
        for (k, v) in &labels {
            node = node.label(k, v);
        }
        for (name, [cap, alloc]) in &case.resources {
            node = node.resource(name, &cap.to_string(), &alloc.to_string());
        }
        let facts = node.facts().with_evidence(
            EvidenceIndex::new(None, Some(std::slice::from_ref(&nfd))).for_node(&node_name),
        );
        let profile = table
            .profiles
            .get(&case.profile)
            .unwrap_or_else(|| panic!("{}: no profile {}", case.name, case.profile));
        let report = gpuready_core::evaluate(&spec(profile), &facts, now());
        for [l, s, reason, fragment] in &case.expect {
            let got = report
                .get(layer(l))
                .unwrap_or_else(|| panic!("{}: no {l} layer", case.name));
            assert_eq!(
                (got.status, got.reason.as_str()),
                (status(s), reason.as_str()),
                "{}: {l}: {}",
                case.name,
                got.message
            );
            assert!(
                got.message.contains(fragment.as_str()),
                "{}: {l} message {:?} should mention {fragment:?}",
                case.name,
                got.message
            );
        }
        assert_eq!(report.ready(), case.ready, "{}: {report:?}", case.name);
    }
}
