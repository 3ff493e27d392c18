//! NodeFeatureGroup: a named set of rules whose matching nodes nfd-master lists in
//! the object's status (NFD v0.16+).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::matcher::{FeatureMatcherTerm, MatchAnyElem};

/// Rules selecting a group of nodes; nfd-master writes the members into status.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
// Which API: the group, version and kind, as a manifest's apiVersion and kind.
#[kube(
    group = "nfd.k8s-sigs.io",
    version = "v1alpha1",
    kind = "NodeFeatureGroup"
)]
#[kube(plural = "nodefeaturegroups", shortname = "nfg", namespaced)]
#[kube(
    status = "NodeFeatureGroupStatus",
    doc = "NodeFeatureGroup selects a group of nodes by their features; nfd-master lists the matching nodes in status."
)]
#[serde(rename_all = "camelCase")]
pub struct NodeFeatureGroupSpec {
    /// Rules a node must match (any of them) to be a member of the group.
    pub feature_group_rules: Vec<GroupRule>,
}

/// One group rule: like a NodeFeatureRule rule, but it only selects nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupRule {
    /// Rule name.
    pub name: String,

    /// Variables to set when the rule matches, for later rules (NFD v0.18+).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, String>,

    /// Template producing more variables, one `name[=value]` per line (NFD v0.18+).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vars_template: String,

    /// Terms that must all match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_features: Vec<FeatureMatcherTerm>,

    /// Alternatives of which at least one must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_any: Vec<MatchAnyElem>,
}

/// Members of the group, as computed by nfd-master.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NodeFeatureGroupStatus {
    /// Nodes matching the group's rules; a list keyed by node name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub nodes: Vec<FeatureGroupNode>,
}

/// One member node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct FeatureGroupNode {
    /// Node name.
    pub name: String,
}
