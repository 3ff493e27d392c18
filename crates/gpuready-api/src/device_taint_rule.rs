//! `resource.k8s.io/v1` `DeviceTaintRule` (GA in Kubernetes 1.37): the object
//! gpuready writes to take one bad device of a DRA node out of service, and the
//! exact rules of which such objects are gpuready's.
//!
//! Hand-written rather than k8s-openapi's: the workspace builds k8s-openapi
//! 0.29 with the `v1_33` feature (the oldest Kubernetes minor gpuready
//! supports), whose `resource.k8s.io` has DeviceTaintRule only as `v1alpha3`;
//! the `v1` type exists only under the `v1_37` feature, which would drop every
//! older API server. The [`kube::Resource`] impl below is what kube's
//! `Api<DeviceTaintRule>` needs, so no DynamicObject round-trip is involved.
//! Unknown fields are ignored (`timeAdded`), so a newer server's object still
//! parses; `status` is read (escalation) and never sent with the object:
//! gpuready's one condition there goes by server-side apply on the status
//! subresource (`controller/write/device_rules.rs`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::dra::DeviceTaint;
use crate::keys;

/// One DeviceTaintRule: a taint on every device its selector matches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintRule {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DeviceTaintRuleSpec,
    /// Written by the API server's device taint eviction controller
    /// (`EvictionInProgress`, and for effect `None` what `NoExecute` would
    /// evict) and, on gpuready's own rules, gpuready's one condition
    /// (`keys::device_rules::CONDITION_PODS_NOT_EVICTED`), applied on the
    /// status subresource: never sent with the object.
    #[serde(default, skip_serializing)]
    pub status: Option<DeviceTaintRuleStatus>,
}

/// `status` of a DeviceTaintRule (`resource.k8s.io/v1`, Kubernetes 1.37).
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintRuleStatus {
    #[serde(default)]
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
}

/// The condition the eviction controller keeps on a rule: `True` while pods
/// wait to be evicted; its message counts the pods pending and evicted (for
/// effect `None`, once per spec change, what `NoExecute` would evict).
pub const CONDITION_EVICTION_IN_PROGRESS: &str = "EvictionInProgress";

/// `spec` of a DeviceTaintRule.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintRuleSpec {
    /// Without a selector no device matches; gpuready always sets all three
    /// of driver, pool and device, so a rule selects exactly one device.
    pub device_selector: Option<DeviceTaintSelector>,
    #[serde(default)]
    pub taint: DeviceTaint,
}

/// Which devices a rule taints: every set member must match.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintSelector {
    pub driver: Option<String>,
    pub pool: Option<String>,
    pub device: Option<String>,
}

crate::resource::static_resource!(
    DeviceTaintRule,
    kube::core::ClusterResourceScope,
    kind: keys::device_rules::KIND,
    group: keys::dra::API_GROUP,
    version: keys::dra::API_VERSION,
    plural: keys::device_rules::PLURAL,
);

/// Whether gpuready owns this rule: its name carries gpuready's prefix AND it
/// carries gpuready's ownership label. Both, never either: an admin's rule
/// named `gpuready-…` or labelled by mistake is left alone.
pub fn is_owned(rule: &DeviceTaintRule) -> bool {
    let named = rule
        .metadata
        .name
        .as_deref()
        .is_some_and(|n| n.starts_with(keys::device_rules::NAME_PREFIX));
    let labelled = rule
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::device_rules::LABEL_OWNED))
        .is_some_and(|v| v == keys::device_rules::LABEL_OWNED_VALUE);
    named && labelled
}

/// The node an owned rule was written for (its annotation).
pub fn node_of(rule: &DeviceTaintRule) -> Option<&str> {
    rule.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::device_rules::ANNOTATION_NODE))
        .map(String::as_str)
}

/// The name of gpuready's rule for one device: `gpuready-<pool>-<device>`,
/// readable in `kubectl get devicetaintrules`. Pool names are DNS subdomains
/// and device names DNS labels, so the name is a valid object name; one that
/// would be longer than 253 characters is cut and made unique by a hash.
pub fn rule_name(driver: &str, pool: &str, device: &str) -> String {
    let name = format!("{}{pool}-{device}", keys::device_rules::NAME_PREFIX);
    if name.len() <= 253 {
        return name;
    }
    // FNV-1a over the full identity: stable across releases and processes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{driver}/{pool}/{device}").bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut cut = 253 - 17;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = name[..cut].trim_end_matches(['-', '.']);
    format!("{head}-{h:016x}")
}

/// The labels and annotations every rule gpuready writes carries: its
/// ownership label, and the profile it gates for (`gpuready.io/profile`),
/// which the chart's admission policy holds the rule's effect to.
pub fn owned_metadata(node: &str, profile: &str, reason: &str) -> ObjectMeta {
    ObjectMeta {
        labels: Some(BTreeMap::from([
            (
                keys::device_rules::LABEL_OWNED.to_owned(),
                keys::device_rules::LABEL_OWNED_VALUE.to_owned(),
            ),
            (keys::LABEL_PROFILE.to_owned(), profile.to_owned()),
        ])),
        annotations: Some(BTreeMap::from([
            (
                keys::device_rules::ANNOTATION_NODE.to_owned(),
                node.to_owned(),
            ),
            (
                keys::device_rules::ANNOTATION_REASON.to_owned(),
                reason.to_owned(),
            ),
        ])),
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests;
