//! The node cache's own form of a Node: only what the engine judges from and a
//! write needs, tightly packed (one string buffer per map, no per-entry
//! `String`), expanded back into a `Node` for each reconcile.
//!
//! Why: a pruned `k8s_openapi` `Node` still costs about 13 KB of heap (30
//! labels as a `BTreeMap<String, String>` are 5.5 KB alone, `Node` itself is
//! 1.5 KB inline), and the cache holds one per node for the life of the
//! process. The pure engine keeps reading `&Node` (`NodeFacts::from_node`):
//! a reconcile allocating one `Node` for a moment costs nothing at rest.

use std::collections::BTreeMap;

use gpuready_api::keys;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};
use serde::{Deserialize, Deserializer};

use super::prune::{KUBELET_READY, node_relevance, prune_node};
use super::watched::read_node;
use crate::controller::node_resource::node_resource;

/// A string map packed into one buffer: keys and values one after another,
/// sorted by key, with the offset where each string starts (plus the end).
/// A map of n entries is two allocations instead of 2n + n tree nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedMap {
    text: Box<str>,
    /// `2n + 1` offsets: key i is `starts[2i]..starts[2i+1]`, its value
    /// `starts[2i+1]..starts[2i+2]`.
    starts: Box<[u32]>,
}

impl PackedMap {
    /// Packs the entries (a `BTreeMap`'s order: sorted by key, as `get` needs).
    /// `None` if the text does not fit u32 offsets (4 GiB: never for a Node,
    /// whose object the API server caps at 1.5 MB).
    fn pack<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>) -> Option<PackedMap> {
        let mut text = String::new();
        let mut starts = vec![0u32];
        for (k, v) in entries {
            for s in [k, v] {
                text.push_str(s);
                starts.push(u32::try_from(text.len()).ok()?);
            }
        }
        Some(PackedMap {
            text: text.into_boxed_str(),
            starts: starts.into_boxed_slice(),
        })
    }

    fn from_map<V: AsRef<str>>(m: &BTreeMap<String, V>) -> PackedMap {
        Self::pack(m.iter().map(|(k, v)| (k.as_str(), v.as_ref()))).unwrap_or_default()
    }

    fn str_at(&self, i: usize) -> &str {
        let at = |j: usize| self.starts.get(j).map_or(0, |&o| o as usize);
        self.text.get(at(i)..at(i + 1)).unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1) / 2
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key`, by binary search over the sorted keys.
    pub fn get(&self, key: &str) -> Option<&str> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.str_at(2 * mid).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.str_at(2 * mid + 1)),
            }
        }
        None
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        (0..self.len()).map(|i| (self.str_at(2 * i), self.str_at(2 * i + 1)))
    }

    /// Expanded into the map the API types use.
    pub fn to_map<V: From<String>>(&self) -> BTreeMap<String, V> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), V::from(v.to_owned())))
            .collect()
    }
}

/// A node condition: type, status, reason and message in one buffer. Every
/// field the planner compares is kept (times included); the kubelet's `Ready`
/// keeps only what `NodeFacts` reads of it.
#[derive(Clone, Debug, PartialEq)]
struct CachedCondition {
    /// type, status, reason, message one after another.
    text: Box<str>,
    /// End of type, of status, of reason (the message runs to the end).
    ends: [u32; 3],
    has_reason: bool,
    has_message: bool,
    last_heartbeat_time: Option<Time>,
    last_transition_time: Option<Time>,
}

impl CachedCondition {
    fn from_condition(c: NodeCondition, keep_times: bool) -> Option<CachedCondition> {
        let reason = c.reason.as_deref().unwrap_or_default();
        let message = c.message.as_deref().unwrap_or_default();
        let text = [c.type_.as_str(), &c.status, reason, message].concat();
        let ends = [
            u32::try_from(c.type_.len()).ok()?,
            u32::try_from(c.type_.len() + c.status.len()).ok()?,
            u32::try_from(c.type_.len() + c.status.len() + reason.len()).ok()?,
        ];
        Some(CachedCondition {
            text: text.into_boxed_str(),
            ends,
            has_reason: c.reason.is_some(),
            has_message: c.message.is_some(),
            last_heartbeat_time: c.last_heartbeat_time.filter(|_| keep_times),
            last_transition_time: c.last_transition_time.filter(|_| keep_times),
        })
    }

    fn part(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let end = self.ends.get(i).map_or(self.text.len(), |&e| e as usize);
        self.text.get(start..end).unwrap_or_default()
    }

    fn to_condition(&self) -> NodeCondition {
        NodeCondition {
            type_: self.part(0).to_owned(),
            status: self.part(1).to_owned(),
            reason: self.has_reason.then(|| self.part(2).to_owned()),
            message: self.has_message.then(|| self.part(3).to_owned()),
            last_heartbeat_time: self.last_heartbeat_time.clone(),
            last_transition_time: self.last_transition_time.clone(),
        }
    }
}

/// A taint, every field kept (a merge patch of `spec.taints` writes the whole
/// list back, `timeAdded` included).
#[derive(Clone, Debug, PartialEq)]
struct CachedTaint {
    key: Box<str>,
    value: Option<Box<str>>,
    effect: Box<str>,
    time_added: Option<Time>,
}

/// A Node as the cache holds it. Built only by [`CachedNode::from_node`], which
/// prunes first (`prune.rs`), so the cache holds exactly what a pruned Node
/// held, packed.
#[derive(Clone, Debug)]
pub struct CachedNode {
    /// name, uid, resourceVersion, creationTimestamp, deletionTimestamp only.
    meta: ObjectMeta,
    /// `None` when the node has no `labels` at all (kept apart from an empty
    /// map: the relevance hash tells them apart).
    labels: Option<PackedMap>,
    /// The annotations the engine reads (`is_read_annotation`; the others are pruned).
    annotations: PackedMap,
    /// gpuready's server-side apply entry, only on nodes written before 0.2.
    managed_fields: Option<Box<[ManagedFieldsEntry]>>,
    taints: Option<Box<[CachedTaint]>>,
    /// `spec.unschedulable` (a cordon: another readiness gate).
    unschedulable: Option<bool>,
    /// Extended resources only (keys with '/').
    capacity: PackedMap,
    allocatable: PackedMap,
    /// The kubelet's `Ready`, gpuready's own and other writers' (the External
    /// layer's), in the node's order.
    conditions: Box<[CachedCondition]>,
    /// `prune::node_relevance` of the pruned node, computed once here.
    relevance: u64,
}

impl CachedNode {
    /// Prunes the node and packs what is left.
    pub fn from_node(mut node: Node) -> CachedNode {
        prune_node(&mut node);
        let relevance = node_relevance(&node).unwrap_or_default();
        let m = node.metadata;
        let spec = node.spec.unwrap_or_default();
        let status = node.status.unwrap_or_default();
        let quantities = |q: Option<BTreeMap<String, Quantity>>| {
            PackedMap::pack(
                q.iter()
                    .flatten()
                    .filter(|(k, _)| k.contains('/'))
                    .map(|(k, v)| (k.as_str(), v.0.as_str())),
            )
            .unwrap_or_default()
        };
        CachedNode {
            meta: ObjectMeta {
                name: m.name,
                uid: m.uid,
                resource_version: m.resource_version,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                ..ObjectMeta::default()
            },
            labels: m.labels.as_ref().map(PackedMap::from_map),
            annotations: m
                .annotations
                .as_ref()
                .map(PackedMap::from_map)
                .unwrap_or_default(),
            managed_fields: m
                .managed_fields
                .filter(|mf| !mf.is_empty())
                .map(Vec::into_boxed_slice),
            taints: spec.taints.map(|ts| {
                ts.into_iter()
                    .map(|t| CachedTaint {
                        key: t.key.into_boxed_str(),
                        value: t.value.map(String::into_boxed_str),
                        effect: t.effect.into_boxed_str(),
                        time_added: t.time_added,
                    })
                    .collect()
            }),
            unschedulable: spec.unschedulable,
            capacity: quantities(status.capacity),
            allocatable: quantities(status.allocatable),
            conditions: status
                .conditions
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    let own = c.type_ != KUBELET_READY;
                    CachedCondition::from_condition(c, own)
                })
                .collect(),
            relevance,
        }
    }

    /// The Node the engine reads: what the cache holds, expanded.
    pub fn to_node(&self) -> Node {
        let quantities = |p: &PackedMap| {
            (!p.is_empty()).then(|| {
                p.iter()
                    .map(|(k, v)| (k.to_owned(), Quantity(v.to_owned())))
                    .collect()
            })
        };
        Node {
            metadata: ObjectMeta {
                labels: self.labels.as_ref().map(PackedMap::to_map),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.to_map()),
                managed_fields: self.managed_fields.as_ref().map(|mf| mf.to_vec()),
                ..self.meta.clone()
            },
            spec: Some(NodeSpec {
                taints: self.taints.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| Taint {
                            key: t.key.to_string(),
                            value: t.value.as_ref().map(|v| v.to_string()),
                            effect: t.effect.to_string(),
                            time_added: t.time_added.clone(),
                        })
                        .collect()
                }),
                unschedulable: self.unschedulable,
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: quantities(&self.capacity),
                allocatable: quantities(&self.allocatable),
                conditions: (!self.conditions.is_empty())
                    .then(|| self.conditions.iter().map(|c| c.to_condition()).collect()),
                ..NodeStatus::default()
            }),
        }
    }

    /// The node's labels, packed (`ResourceExt::labels` is empty here: the
    /// minimal `ObjectMeta` holds none).
    pub fn labels(&self) -> Option<&PackedMap> {
        self.labels.as_ref()
    }

    /// Whether gpuready may have written the label `key` to this node: a key
    /// of its own domain, one its labels annotation lists, or any key of a
    /// node it wrote with server-side apply before 0.2 (its managed fields
    /// are not read here). A cheap over-approximation of what
    /// `NodeFacts::owned` says, for callers that fall back to the facts.
    pub fn may_have_written_label(&self, key: &str) -> bool {
        gpuready_api::validate::is_owned_key(key)
            || self.managed_fields.is_some()
            || self
                .annotations
                .get(keys::ANNOTATION_LABELS)
                .is_some_and(|v| gpuready_core::facts::listed_labels(v).any(|k| k == key))
    }

    /// `prune::node_relevance` of the node as it entered the cache.
    pub fn relevance(&self) -> u64 {
        self.relevance
    }
}

// Resource identity of a Node: the cache, the controller's queue and its
// `ObjectRef`s treat a `CachedNode` as the Node it stands for.
node_resource!(CachedNode, meta);

/// The node watch reads `CachedNode`s straight from the API server's JSON:
/// only the fields the cache keeps are built (`watched.rs`), then packed.
impl<'de> Deserialize<'de> for CachedNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        read_node(d).map(CachedNode::from_node)
    }
}

#[cfg(test)]
mod tests;
