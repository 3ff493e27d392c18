//! Tests of `watched`, in their own file beside it.

use super::*;
use crate::controller::watch::prune::{node_relevance, prune_node};
use serde_json::json;

/// The node read here and the node read whole and pruned are the same
/// object, field by field.
fn assert_reads_as_pruned(json: &serde_json::Value) {
    let mut whole: Node = serde_json::from_value(json.clone()).expect("whole");
    prune_node(&mut whole);
    let mut watched = read_node(json.clone()).expect("watched");
    // `prune_node` keeps what the cache holds; the watched form may keep
    // a little more only where prune drops it again (conditions).
    prune_node(&mut watched);
    assert_eq!(watched, whole, "{}", json["metadata"]["name"]);
    assert_eq!(node_relevance(&watched), node_relevance(&whole));
}

#[test]
fn the_prune_tests_full_node_reads_as_pruned() {
    let full = serde_json::to_value(super::super::prune::tests::full_node()).expect("json");
    assert_reads_as_pruned(&full);
}

#[test]
fn every_example_clusters_node_reads_as_pruned() {
    for item in super::super::prune::tests::example_nodes() {
        assert_reads_as_pruned(&item);
    }
}

#[test]
fn absent_and_null_parts_read_as_absent() {
    for json in [
        json!({}),
        json!({ "metadata": null, "spec": null, "status": null }),
        json!({ "metadata": { "name": "n", "labels": null, "annotations": null, "managedFields": null },
                "status": { "capacity": null, "allocatable": {}, "conditions": [] } }),
        json!({ "metadata": { "name": "n", "annotations": { "a": "b" } },
                "spec": { "taints": [] }, "status": { "capacity": { "cpu": "1" } } }),
    ] {
        assert_reads_as_pruned(&json);
    }
}

#[test]
fn only_gpureadys_apply_entry_keeps_its_fields() {
    let json = json!({
        "metadata": { "name": "n", "managedFields": [
            { "manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
              "fieldsV1": { "f:status": { "f:images": {} } } },
            { "manager": keys::FIELD_MANAGER, "operation": "Apply", "apiVersion": "v1",
              "time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1",
              "fieldsV1": { "f:metadata": { "f:labels": { "f:gpuready.io/ready": {} } } } },
        ]},
    });
    assert_reads_as_pruned(&json);
    let n = read_node(json).expect("node");
    let mf = n.metadata.managed_fields.expect("kept");
    assert_eq!(mf.len(), 1);
    assert_eq!(
        mf[0].fields_v1.as_ref().map(|f| &f.0),
        Some(&json!({ "f:metadata": { "f:labels": { "f:gpuready.io/ready": {} } } }))
    );
}

#[test]
fn other_systems_cordon_marks_are_kept_and_their_other_annotations_dropped() {
    let json = json!({
        "metadata": { "name": "n", "annotations": {
            "nodewright.nvidia.com/runtimeRequiredCordon": "true",
            "nodewright.nvidia.com/cordon_gpu-tuning": "true",
            "nodewright.nvidia.com/status_gpu-tuning": "complete",
            "example.com/note": "x",
        }},
        "spec": { "unschedulable": true },
    });
    assert_reads_as_pruned(&json);
    let n = read_node(json).expect("node");
    let kept: Vec<String> = n
        .metadata
        .annotations
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        kept,
        [
            "nodewright.nvidia.com/cordon_gpu-tuning",
            "nodewright.nvidia.com/runtimeRequiredCordon"
        ]
    );
}

#[test]
fn a_malformed_node_is_an_error_not_a_guess() {
    for bad in [
        json!({ "metadata": { "labels": { "a": 1 } } }),
        json!({ "metadata": { "annotations": { "gpuready.io/taint": 1 } } }),
        json!({ "status": { "allocatable": { "nvidia.com/gpu": [] } } }),
        json!({ "spec": { "taints": "x" } }),
    ] {
        assert!(read_node(bad.clone()).is_err(), "{bad}");
        assert!(
            serde_json::from_value::<Node>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}
