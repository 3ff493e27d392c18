//! What the engine costs per node, against a baseline measured in the same run:
//! deserializing the Node's JSON, which any controller pays to read a node at all.
//! Fleet: the example clusters' nodes, cloned with new names to 5,000 nodes.

use std::path::PathBuf;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use gpuready_api::GpuNodeProfile;
use gpuready_core::{NodeFacts, PlanOptions, assess};
use k8s_openapi::api::core::v1::Node;
use kube_core::Selector;

const FLEET: usize = 5_000;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/examples")
}

fn fleet_json() -> Vec<String> {
    let mut base = Vec::new();
    for dir in ["talos-rtx3050", "rtx3090-rtx4070tis", "pascal-maxwell"] {
        let text =
            std::fs::read_to_string(examples().join(dir).join("nodes.json")).expect("nodes.json");
        let list: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        base.extend(list["items"].as_array().expect("items").iter().cloned());
    }
    (0..FLEET)
        .map(|i| {
            let mut n = base[i % base.len()].clone();
            n["metadata"]["name"] = format!("node-{i}").into();
            serde_json::to_string(&n).expect("serialize")
        })
        .collect()
}

fn profiles() -> Vec<GpuNodeProfile> {
    let mut out = Vec::new();
    for dir in ["talos-rtx3050", "rtx3090-rtx4070tis", "pascal-maxwell"] {
        let text =
            std::fs::read_to_string(examples().join(dir).join("profiles.yaml")).expect("profiles");
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            out.push(serde::Deserialize::deserialize(doc).expect("profile"));
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let json = fleet_json();
    let nodes: Vec<Node> = json
        .iter()
        .map(|j| serde_json::from_str(j).expect("node"))
        .collect();
    let profiles = profiles();
    let selectors: Vec<Selector> = profiles
        .iter()
        .map(|p| gpuready_core::select::profile_selector(p).expect("selector"))
        .collect();
    let pairs: Vec<(&GpuNodeProfile, &Selector)> = profiles.iter().zip(selectors.iter()).collect();
    let opts = PlanOptions {
        now: "2026-11-29T12:00:00Z".parse().expect("time"),
        heartbeat_seconds: 300,
        hold_new_taints: false,
        write_refused: false,
    };

    let mut g = c.benchmark_group("fleet-5000");
    g.throughput(Throughput::Elements(FLEET as u64));
    g.sample_size(20);
    g.bench_function("baseline: deserialize Node JSON", |b| {
        b.iter(|| {
            for j in &json {
                let n: Node = serde_json::from_str(j).expect("node");
                std::hint::black_box(n);
            }
        })
    });
    g.bench_function("engine: facts + select + evaluate + plan", |b| {
        b.iter(|| {
            for n in &nodes {
                let facts = NodeFacts::from_node(n);
                std::hint::black_box(assess(&facts, &pairs, &opts));
            }
        })
    });
    g.bench_function("engine: evaluate + plan on parsed facts", |b| {
        b.iter_batched(
            || nodes.iter().map(NodeFacts::from_node).collect::<Vec<_>>(),
            |facts| {
                for f in &facts {
                    std::hint::black_box(assess(f, &pairs, &opts));
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
