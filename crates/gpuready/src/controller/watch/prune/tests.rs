//! Tests of `prune`, in their own file beside it.

use super::*;
use gpuready_core::NodeFacts;
use serde_json::json;

/// Every node of the example clusters (`deploy/examples/*/nodes.json`),
/// as JSON; at least four, or the test that reads them fails.
pub(crate) fn example_nodes() -> Vec<serde_json::Value> {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/examples");
    let mut nodes = Vec::new();
    for dir in std::fs::read_dir(&examples).expect("deploy/examples") {
        let path = dir.expect("entry").path().join("nodes.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut list: serde_json::Value = serde_json::from_str(&text).expect("json");
        nodes.append(list["items"].as_array_mut().expect("items"));
    }
    assert!(nodes.len() >= 4, "only {} example nodes found", nodes.len());
    nodes
}

/// A node as kubelet, GFD, NFD and gpuready leave it.
pub(crate) fn full_node() -> Node {
    let cond = |t: &str, s: &str| {
        json!({ "type": t, "status": s, "reason": format!("{t}Reason"), "message": "m",
                "lastHeartbeatTime": "2026-11-30T10:00:00Z", "lastTransitionTime": "2026-11-30T10:00:00Z" })
    };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": "gpu-1", "uid": "u-1", "resourceVersion": "42",
            "labels": {
                "pool": "a", "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3090",
                "nvidia.com/gpu.memory": "24576", "nvidia.com/gfd.timestamp": "1764496800",
                "nvidia.com/cuda.driver-version.full": "580.178.04",
                "feature.node.kubernetes.io/pci-0300_10de.present": "true",
                "gpuready.io/ready": "false",
            },
            "annotations": {
                "gpuready.io/taint": "readiness.k8s.io/gpuready-not-ready:NoSchedule",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "ownerReferences": [{ "apiVersion": "v1", "kind": "Foo", "name": "x", "uid": "y" }],
            "managedFields": [
                { "manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                  "fieldsType": "FieldsV1", "fieldsV1": { "f:status": { "f:images": {} } } },
                { "manager": keys::FIELD_MANAGER, "operation": "Update", "apiVersion": "v1",
                  "fieldsType": "FieldsV1",
                  "fieldsV1": { "f:spec": { "f:taints": {} } } },
                { "manager": keys::FIELD_MANAGER, "operation": "Apply", "apiVersion": "v1",
                  "fieldsType": "FieldsV1",
                  "fieldsV1": { "f:metadata": { "f:labels": { "f:gpuready.io/ready": {} } } } },
            ],
        },
        "spec": {
            "podCIDR": "10.0.0.0/24", "providerID": "aws:///i-1",
            "taints": [{ "key": "readiness.k8s.io/gpuready-not-ready", "value": "x", "effect": "NoSchedule" }],
        },
        "status": {
            "capacity": { "cpu": "8", "nvidia.com/gpu": "1" },
            "allocatable": { "cpu": "8", "nvidia.com/gpu": "0" },
            "conditions": [
                cond("MemoryPressure", "False"), cond("DiskPressure", "False"),
                cond("Ready", "True"), cond("GpuReady", "False"),
                cond("XIDErrors", "False"),
            ],
            "addresses": [{ "type": "InternalIP", "address": "10.0.0.1" }],
            "nodeInfo": { "machineID": "m", "systemUUID": "s", "bootID": "b",
                "kernelVersion": "k", "osImage": "o", "containerRuntimeVersion": "c",
                "kubeletVersion": "v", "kubeProxyVersion": "", "operatingSystem": "linux",
                "architecture": "amd64" },
            "images": [{ "names": ["registry.example/a@sha256:0"], "sizeBytes": 1 }],
        },
    }))
    .expect("node")
}

#[test]
fn pruning_keeps_every_fact_the_engine_reads() {
    let full = full_node();
    let mut pruned = full.clone();
    prune_node(&mut pruned);
    assert_eq!(NodeFacts::from_node(&pruned), NodeFacts::from_node(&full));
    assert_eq!(node_relevance(&pruned), node_relevance(&prune_twice(&full)));
}

fn prune_twice(n: &Node) -> Node {
    let mut n = n.clone();
    prune_node(&mut n);
    prune_node(&mut n);
    n
}

#[test]
fn pruning_drops_what_the_engine_never_reads() {
    let mut n = full_node();
    let before = serde_json::to_vec(&n).expect("json").len();
    prune_node(&mut n);
    let after = serde_json::to_vec(&n).expect("json").len();
    let status = n.status.as_ref().expect("status");
    let types: Vec<&str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    // kubelet's pressure conditions go; another judge's verdict stays.
    assert_eq!(types, ["Ready", "GpuReady", "XIDErrors"]);
    assert!(status.images.is_none() && status.node_info.is_none());
    assert!(
        n.spec
            .as_ref()
            .is_some_and(|s| s.pod_cidr.is_none() && s.taints.is_some())
    );
    assert_eq!(n.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
    assert_eq!(n.metadata.annotations.as_ref().map(|a| a.len()), Some(1));
    assert!(after * 5 < before * 3, "{before} → {after} bytes");
    // What a write needs stays.
    assert_eq!(n.metadata.uid.as_deref(), Some("u-1"));
    assert_eq!(n.metadata.resource_version.as_deref(), Some("42"));
}
