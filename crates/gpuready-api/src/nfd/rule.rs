//! NodeFeatureRule: cluster-wide rules that turn node features into labels,
//! annotations, taints, extended resources and variables.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::matcher::{FeatureMatcherTerm, MatchAnyElem};

/// A list of labelling rules evaluated by nfd-master against every node's features.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
// Which API: the group, version and kind, as a manifest's apiVersion and kind.
#[kube(
    group = "nfd.k8s-sigs.io",
    version = "v1alpha1",
    kind = "NodeFeatureRule"
)]
#[kube(plural = "nodefeaturerules", shortname = "nfr")]
#[kube(
    doc = "NodeFeatureRule holds rules that nfd-master evaluates against the features of every node to derive labels, annotations, taints, extended resources and variables."
)]
#[serde(rename_all = "camelCase")]
pub struct NodeFeatureRuleSpec {
    /// Rules to evaluate, in order; later rules may refer to earlier rules' variables.
    pub rules: Vec<Rule>,
}

/// One rule: matchers, and what to put on a node that they match.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Rule name, used in logs and to reference the rule.
    pub name: String,

    /// Node labels to set when the rule matches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,

    /// Template producing more labels, one `name[=value]` per line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub labels_template: String,

    /// Node annotations to set when the rule matches (NFD v0.15+).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,

    /// Variables to set when the rule matches. They never reach the node; later
    /// rules can match on them (feature `rule.matched`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, String>,

    /// Template producing more variables, one `name[=value]` per line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vars_template: String,

    /// Node taints to set when the rule matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "taint_list_schema")]
    pub taints: Vec<Taint>,

    /// Extended resources to advertise on the node when the rule matches, by
    /// resource name; a value is a quantity or a `@feature.element` reference.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extended_resources: BTreeMap<String, String>,

    /// Terms that must all match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_features: Vec<FeatureMatcherTerm>,

    /// Alternatives of which at least one must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_any: Vec<MatchAnyElem>,
}

// The field keeps Kubernetes' own Taint type, but its schema is spelled out here:
// k8s-openapi's schema carries Kubernetes' description texts and we describe the
// fields in our own words.
fn taint_list_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Node taints to set when the rule matches.",
        "type": "array",
        "items": {
            "description": "A core/v1 node taint.",
            "type": "object",
            "properties": {
                "key": {
                    "description": "Taint key.",
                    "type": "string",
                },
                "value": {
                    "description": "Taint value.",
                    "type": "string",
                },
                "effect": {
                    "description": "NoSchedule, PreferNoSchedule or NoExecute.",
                    "type": "string",
                },
                "timeAdded": {
                    "description": "When the taint was added (NoExecute taints only).",
                    "type": "string",
                    "format": "date-time",
                },
            },
            "required": ["effect", "key"],
        },
    })
}
