//! Keeping the node cache small and the work queue quiet: strip what the engine
//! never reads before a Node enters the cache, and hash only what it does read
//! so heartbeats and image churn trigger no reconcile.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use gpuready_api::keys;
use k8s_openapi::api::core::v1::{Node, NodeStatus};

/// Drops images, nodeInfo, addresses, volumes, foreign annotations and every
/// managedFields entry but gpuready's own (which tells what gpuready owns).
pub fn prune_node(node: &mut Node) {
    let meta = &mut node.metadata;
    if let Some(mf) = meta.managed_fields.as_mut() {
        mf.retain(|e| e.manager.as_deref() == Some(keys::FIELD_MANAGER));
    }
    if let Some(a) = meta.annotations.as_mut() {
        a.retain(|k, _| k.starts_with(keys::KEY_PREFIX));
    }
    if let Some(status) = node.status.as_mut() {
        let keep = |m: &mut Option<std::collections::BTreeMap<String, _>>| {
            if let Some(m) = m.as_mut() {
                m.retain(|k: &String, _| k.contains('/'));
            }
        };
        keep(&mut status.capacity);
        keep(&mut status.allocatable);
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
        .filter(|(k, _)| k.starts_with(keys::KEY_PREFIX))
        .for_each(|kv| kv.hash(&mut h));
    node.metadata.deletion_timestamp.is_some().hash(&mut h);
    if let Some(spec) = &node.spec {
        for t in spec.taints.iter().flatten() {
            (&t.key, &t.value, &t.effect).hash(&mut h);
        }
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
