//! NodeFeature: the raw features and requested labels that an nfd-worker (or any
//! other feature source) publishes for one node.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// Features found on one node and labels requested for it. The target node is
/// named by the `nfd.node.kubernetes.io/node-name` label of the object.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
// Which API: the group, version and kind, as a manifest's apiVersion and kind.
#[kube(group = "nfd.k8s-sigs.io", version = "v1alpha1", kind = "NodeFeature")]
#[kube(plural = "nodefeatures", namespaced)]
#[kube(
    doc = "NodeFeature carries the features discovered on one node, as published by nfd-worker or another feature source."
)]
#[serde(rename_all = "camelCase")]
pub struct NodeFeatureSpec {
    /// Discovered features, by kind (flags, attributes, instances).
    #[serde(default, skip_serializing_if = "Features::is_empty")]
    pub features: Features,

    /// Node labels this source asks nfd-master to set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// All discovered features of a node, keyed by feature-set name
/// (e.g. `kernel.loadedmodule`, `cpu.model`, `pci.device`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Features {
    /// Feature sets whose elements are bare names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flags: BTreeMap<String, FlagFeatureSet>,

    /// Feature sets whose elements are name/value pairs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, AttributeFeatureSet>,

    /// Feature sets whose elements are instances (such as devices) with attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub instances: BTreeMap<String, InstanceFeatureSet>,
}

impl Features {
    pub fn is_empty(&self) -> bool {
        self.flags.is_empty() && self.attributes.is_empty() && self.instances.is_empty()
    }
}

/// A feature set of names without values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct FlagFeatureSet {
    /// The names present; each maps to an empty object.
    pub elements: BTreeMap<String, Nil>,
}

/// A feature set of name/value pairs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct AttributeFeatureSet {
    /// Feature values by name.
    pub elements: BTreeMap<String, String>,
}

/// A feature set of instances, each described by attributes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct InstanceFeatureSet {
    /// The instances found.
    pub elements: Vec<InstanceFeature>,
}

/// One instance of a complex feature, such as one PCI device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct InstanceFeature {
    /// Attribute values of this instance by name.
    pub attributes: BTreeMap<String, String>,
}

/// The empty value of a flag element. NFD keeps it an object (not `true`) for
/// wire compatibility with its former protobuf form.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Nil {}

// Written by hand: the derive would describe an object with an empty
// `properties`, while the upstream CRD says just `type: object`.
impl JsonSchema for Nil {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Nil".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Empty marker value of a flag element.",
            "type": "object",
        })
    }
}
