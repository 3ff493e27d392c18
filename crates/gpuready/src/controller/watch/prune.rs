//! Keeping the node cache small and the work queue quiet: strip what the engine
//! never reads before a Node enters the cache (where `cached.rs` packs what is
//! left), and hash only what it does read so heartbeats and image churn trigger
//! no reconcile.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use gpuready_api::keys;
use gpuready_core::facts::{is_outside_condition, is_read_annotation};
use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus};

/// The kubelet condition the engine reads; the others (memory, disk, PID
/// pressure, network) are dropped from the cache.
pub(crate) const KUBELET_READY: &str = "Ready";

/// Keeps only what the engine judges from (`NodeFacts::from_node`) and what a
/// write needs (name, resourceVersion, uid for Events): labels (any of them may
/// be in a profile's selector), gpuready's annotations and the other systems'
/// ones that name a cordon's owner, gpuready's server-side apply managedFields entry,
/// taints, extended resources, and the conditions the engine reads: kubelet's
/// Ready, gpuready's own, and other writers' (the External layer's verdicts of
/// other judges; kubelet's pressure conditions are dropped). Images, nodeInfo,
/// addresses, foreign
/// annotations and managedFields, owner references and the rest of the spec
/// are dropped before the node enters the cache: memory follows what gpuready
/// reads, not what kubelet and other controllers write. The cache then holds the
/// rest packed (`CachedNode::from_node`); the 409 re-read and cache-behind
/// paths use the pruned `Node` as it is.
pub fn prune_node(node: &mut Node) {
    let meta = &mut node.metadata;
    if let Some(mf) = meta.managed_fields.as_mut() {
        // Only gpuready's server-side apply entries are read (label ownership of
        // nodes written before 0.2); its merge patches leave `Update` entries
        // the engine never reads, a few KB of JSON a node.
        mf.retain(|e| {
            e.manager.as_deref() == Some(keys::FIELD_MANAGER)
                && e.operation.as_deref() == Some("Apply")
        });
    }
    if let Some(a) = meta.annotations.as_mut() {
        a.retain(|k, _| is_read_annotation(k));
    }
    meta.owner_references = None;
    meta.generate_name = None;
    if let Some(spec) = node.spec.as_mut() {
        *spec = NodeSpec {
            taints: spec.taints.take(),
            unschedulable: spec.unschedulable,
            ..NodeSpec::default()
        };
    }
    if let Some(status) = node.status.as_mut() {
        let keep = |m: &mut Option<std::collections::BTreeMap<String, _>>| {
            if let Some(m) = m.as_mut() {
                m.retain(|k: &String, _| k.contains('/'));
            }
        };
        keep(&mut status.capacity);
        keep(&mut status.allocatable);
        if let Some(c) = status.conditions.as_mut() {
            c.retain(|c| {
                c.type_ == KUBELET_READY
                    || c.type_.starts_with(keys::CONDITION_GPU_READY)
                    || is_outside_condition(&c.type_)
            });
        }
        *status = NodeStatus {
            capacity: status.capacity.take(),
            allocatable: status.allocatable.take(),
            conditions: status.conditions.take(),
            ..NodeStatus::default()
        };
    }
}

/// A hash of everything the engine reads: labels, our annotations, taints,
/// extended resources, and each condition's type and status (plus reason and
/// message of gpuready's own, which it compares). Heartbeat times are left out.
pub fn node_relevance(node: &Node) -> Option<u64> {
    let mut h = DefaultHasher::new();
    node.metadata.labels.hash(&mut h);
    node.metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| is_read_annotation(k))
        .for_each(|kv| kv.hash(&mut h));
    node.metadata.deletion_timestamp.is_some().hash(&mut h);
    if let Some(spec) = &node.spec {
        for t in spec.taints.iter().flatten() {
            (&t.key, &t.value, &t.effect).hash(&mut h);
        }
        // A cordon is another readiness gate (WaitingForGate).
        spec.unschedulable.unwrap_or(false).hash(&mut h);
    }
    if let Some(status) = &node.status {
        for (k, v) in status
            .allocatable
            .iter()
            .flatten()
            .chain(status.capacity.iter().flatten())
        {
            if k.contains('/') {
                (k, &v.0).hash(&mut h);
            }
        }
        for c in status.conditions.iter().flatten() {
            (&c.type_, &c.status).hash(&mut h);
            if c.type_.starts_with(keys::CONDITION_GPU_READY) {
                (&c.reason, &c.message).hash(&mut h);
            }
        }
    }
    Some(h.finish())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use gpuready_core::NodeFacts;
    use serde_json::json;

    /// Every node of the example clusters (`deploy/examples/*/nodes.json`),
    /// as JSON; at least four, or the test that reads them fails.
    pub(crate) fn example_nodes() -> Vec<serde_json::Value> {
        let examples =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/examples");
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
}
