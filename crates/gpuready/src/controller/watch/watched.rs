//! A Node as the watch reads it: straight from the API server's JSON into the
//! fields the cache keeps (`prune.rs` says which), everything else walked past
//! without being built. Decoding every watch event into k8s-openapi's whole
//! `Node` — its images, node info, addresses and every manager's
//! managedFields as `serde_json::Value` trees — and then pruning most of it
//! away was about a tenth of gpuready's CPU in a 10,000-node start-up
//! (docs/performance.md). The result is the Node `prune_node` would have
//! left, so the cache, the relevance hash and the engine see exactly what
//! they saw before (the tests below compare the two ways field by field).

use std::collections::BTreeMap;
use std::fmt;

use gpuready_api::keys;
use gpuready_core::facts::is_read_annotation;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, ManagedFieldsEntry, ObjectMeta, Time,
};
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Reads one Node from its JSON into the shape `prune_node` leaves.
pub fn read_node<'de, D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
    WatchedNode::deserialize(d).map(WatchedNode::into_node)
}

#[derive(Deserialize)]
struct WatchedNode {
    // `null` reads as empty, as k8s-openapi reads it.
    metadata: Option<WatchedMeta>,
    spec: Option<WatchedSpec>,
    status: Option<WatchedStatus>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WatchedMeta {
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "own_annotations")]
    annotations: Option<BTreeMap<String, String>>,
    managed_fields: Option<Vec<WatchedEntry>>,
}

/// A managedFields entry: its fields set is kept as raw text and parsed only
/// for gpuready's own server-side apply entry (nodes written before 0.2).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WatchedEntry {
    manager: Option<String>,
    operation: Option<String>,
    api_version: Option<String>,
    time: Option<Time>,
    fields_type: Option<String>,
    fields_v1: Option<Box<RawValue>>,
    subresource: Option<String>,
}

#[derive(Deserialize)]
struct WatchedSpec {
    taints: Option<Vec<Taint>>,
    unschedulable: Option<bool>,
}

#[derive(Deserialize)]
struct WatchedStatus {
    #[serde(default, deserialize_with = "extended_resources")]
    capacity: Option<BTreeMap<String, Quantity>>,
    #[serde(default, deserialize_with = "extended_resources")]
    allocatable: Option<BTreeMap<String, Quantity>>,
    conditions: Option<Vec<NodeCondition>>,
}

impl WatchedNode {
    fn into_node(self) -> Node {
        let m = self.metadata.unwrap_or_default();
        let managed_fields = m.managed_fields.map(|entries| {
            entries
                .into_iter()
                .filter(|e| {
                    e.manager.as_deref() == Some(keys::FIELD_MANAGER)
                        && e.operation.as_deref() == Some("Apply")
                })
                .map(|e| ManagedFieldsEntry {
                    manager: e.manager,
                    operation: e.operation,
                    api_version: e.api_version,
                    time: e.time,
                    fields_type: e.fields_type,
                    // Raw text the API server wrote: it parses (unparsable, the
                    // entry reads as one without fields, as an absent one does).
                    fields_v1: e
                        .fields_v1
                        .and_then(|raw| serde_json::from_str(raw.get()).ok())
                        .map(FieldsV1),
                    subresource: e.subresource,
                })
                .collect()
        });
        Node {
            metadata: ObjectMeta {
                name: m.name,
                uid: m.uid,
                resource_version: m.resource_version,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                labels: m.labels,
                annotations: m.annotations,
                managed_fields,
                ..ObjectMeta::default()
            },
            spec: self.spec.map(|s| NodeSpec {
                taints: s.taints,
                unschedulable: s.unschedulable,
                ..NodeSpec::default()
            }),
            status: self.status.map(|s| NodeStatus {
                capacity: s.capacity,
                allocatable: s.allocatable,
                conditions: s.conditions,
                ..NodeStatus::default()
            }),
        }
    }
}

/// The entries of a JSON object whose key passes `keep`, the others' values
/// skipped unread; `null` reads as absent.
struct Filtered<V> {
    keep: fn(&str) -> bool,
    value: std::marker::PhantomData<V>,
}

impl<'de, V: Deserialize<'de>> Visitor<'de> for Filtered<V> {
    type Value = Option<BTreeMap<String, V>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            if (self.keep)(&k) {
                out.insert(k, map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Some(out))
    }
}

fn filtered<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
    d: D,
    keep: fn(&str) -> bool,
) -> Result<Option<BTreeMap<String, V>>, D::Error> {
    d.deserialize_option(Filtered {
        keep,
        value: std::marker::PhantomData,
    })
}

/// The annotations the engine reads: gpuready's own and other systems' marks
/// of a cordon (`is_read_annotation`); the rest (NFD's feature lists among
/// them) are not read.
fn own_annotations<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    filtered(d, is_read_annotation)
}

/// Extended resources only (keys with '/'): cpu, memory and the rest are not read.
fn extended_resources<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, Quantity>>, D::Error> {
    filtered(d, |k| k.contains('/'))
}

#[cfg(test)]
mod tests;
