//! The DRA driver's attributes in every form Kubernetes 1.37 serves: the
//! scalar ones, KEP-5491's lists (`ints`, `strings`, `versions`, `bools`), the
//! standard `resource.kubernetes.io/numaNode` either way, and a slice's
//! `partitionTypeAttribute`; read and shown, never dropped, and judged by the
//! profile's `gpu.maxGpusPerNumaNode`.

use crate::common;

use common::*;
use gpuready_api::Layer;
use gpuready_api::dra::{DeviceAttribute, ResourceSlice};
use gpuready_api::keys::{dra, reasons};
use gpuready_core::evaluate::Status;
use gpuready_core::evidence::{DraEvidence, EvidenceIndex, Source};

const NODE: &str = "gpu-h200-01";

fn slice(name: &str) -> ResourceSlice {
    let path = format!(
        "{}/tests/fixtures/evidence/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml_ng::from_str(&text).expect("a ResourceSlice")
}

/// A DRA-only node (the GPU operator's GPUCluster stack): NFD's labels only.
fn dra_node() -> NodeBuilder {
    NodeBuilder::bare(NODE)
        .label(POOL.0, POOL.1)
        .label("feature.node.kubernetes.io/pci-0302_10de.present", "true")
}

fn judge_slice(profile: &str, s: &ResourceSlice) -> gpuready_core::LayerReport {
    let facts = dra_node()
        .facts()
        .with_evidence(EvidenceIndex::new(Some(std::slice::from_ref(s)), None).for_node(NODE));
    gpuready_core::evaluate(&spec(profile), &facts, now())
}

#[test]
fn list_typed_numa_node_is_read_and_shown() {
    let s = slice("dra-h200-8gpu-numa-ints.yaml");
    let DraEvidence::Complete(pool) = DraEvidence::from_slices(NODE, &[&s]) else {
        panic!("a complete pool");
    };
    let (per_node, unplaced) = pool.gpus_per_numa_node();
    assert_eq!(per_node.into_iter().collect::<Vec<_>>(), [(0, 4), (1, 4)]);
    assert!(unplaced.is_empty());
    let r = judge_slice("gpu: {count: 8}", &s);
    let fd = r.expect(
        Layer::FeatureDiscovery,
        Status::Ready,
        reasons::DRA_ATTRIBUTES,
    );
    fd.mentions(&[
        "resource.kubernetes.io/numaNode 0 ×4 GPU(s), 1 ×4 GPU(s) (read from ints lists)",
    ]);
    assert_eq!(fd.evidence, Source::ResourceSlices);
    // The scalar form reads the same, without the note.
    let scalar = judge_slice("gpu: {count: 8}", &slice("dra-h200-8gpu.yaml"));
    let fd = scalar.expect(
        Layer::FeatureDiscovery,
        Status::Ready,
        reasons::DRA_ATTRIBUTES,
    );
    fd.mentions(&["resource.kubernetes.io/numaNode 0 ×4 GPU(s), 1 ×4 GPU(s)"]);
    assert!(!fd.message.contains("ints"), "{}", fd.message);
}

#[test]
fn gpus_per_numa_node_rule_in_both_forms() {
    let rule = "gpu: {count: 8, maxGpusPerNumaNode: 4}";
    for fixture in ["dra-h200-8gpu.yaml", "dra-h200-8gpu-numa-ints.yaml"] {
        judge_slice(rule, &slice(fixture))
            .expect(Layer::Profile, Status::Ready, "ProfileMatches")
            .mentions(&["GPUs per NUMA node at most 4 (NUMA node 0: 4, NUMA node 1: 4)"]);
    }
    let collapsed = judge_slice(rule, &slice("dra-h200-8gpu-numa-collapsed.yaml"));
    let p = collapsed.expect(
        Layer::Profile,
        Status::NotReady,
        reasons::TOO_MANY_GPUS_PER_NUMA_NODE,
    );
    p.mentions(&[
        "NUMA node 0 holds 8 GPU(s), more than the 4",
        "resource.kubernetes.io/numaNode",
        "BIOS",
    ]);
    assert_eq!(p.evidence, Source::ResourceSlices);
    assert!(!collapsed.ready());

    // A driver that publishes no NUMA node (v0.4.x): the rule cannot be checked.
    let mut bare = slice("dra-h200-8gpu.yaml");
    for d in &mut bare.spec.devices {
        d.attributes.remove(dra::ATTR_NUMA_NODE);
    }
    judge_slice(rule, &bare)
        .expect(
            Layer::Profile,
            Status::Unknown,
            reasons::DRA_ATTRIBUTE_MISSING,
        )
        .mentions(&["resource.kubernetes.io/numaNode", "gpu-0"]);

    // A device-plugin node: GFD publishes no NUMA placement; said, not failed.
    judge("gpu: {maxGpusPerNumaNode: 4}", &NodeBuilder::gpu("n"))
        .expect(Layer::Profile, Status::Ready, "ProfileMatches")
        .mentions(&["GPUs per NUMA node not judged"]);
}

#[test]
fn partition_type_attribute_and_one_element_lists_are_read() {
    let mut s = slice("dra-h200-mig.yaml");
    s.spec.partition_type_attribute = Some("gpu.nvidia.com/profile".into());
    // One-element lists read as the value (a driver with list forms on).
    for d in &mut s.spec.devices {
        let product = d.attributes.remove(dra::ATTR_PRODUCT).expect("productName");
        d.attributes.insert(
            dra::ATTR_PRODUCT.into(),
            DeviceAttribute {
                strings: product.string.map(|p| vec![p]),
                ..DeviceAttribute::default()
            },
        );
    }
    let r = judge_slice("gpu: {products: [NVIDIA-H200]}", &s);
    r.expect(Layer::Profile, Status::Ready, "ProfileMatches")
        .mentions(&["NVIDIA-H200"]);
    r.expect(
        Layer::FeatureDiscovery,
        Status::Ready,
        reasons::DRA_ATTRIBUTES,
    )
    .mentions(&["partition types (partitionTypeAttribute): 1g.18gb ×2, 2g.35gb ×1, 3g.71gb ×1"]);
}

#[test]
fn every_list_form_survives_a_round_trip() {
    let json = serde_json::json!({
        "metadata": {"name": "s"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": NODE,
            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "partitionTypeAttribute": "gpu.nvidia.com/profile",
            "devices": [{"name": "gpu-0", "attributes": {
                "resource.kubernetes.io/numaNode": {"ints": [0, 1]},
                "a": {"bools": [true, false]}, "b": {"strings": ["x", "y"]},
                "c": {"versions": ["1.0.0", "2.0.0"]}}}]}
    });
    let s: ResourceSlice = serde_json::from_value(json.clone()).expect("parses");
    assert_eq!(serde_json::to_value(&s).expect("serializes"), json);
    let DraEvidence::Complete(pool) = DraEvidence::from_slices(NODE, &[&s]) else {
        panic!("a complete pool");
    };
    assert_eq!(pool.devices[0].numa_nodes, [0, 1]);
    assert!(pool.devices[0].numa_listed);
}
