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
pub(super) mod tests;
