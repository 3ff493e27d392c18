//! The part of a `resource.k8s.io/v1` `ResourceClaim` gpuready reads: which
//! devices a claim the scheduler made for a DRA-backed extended resource
//! (KEP-5004, `DRAExtendedResource`) holds, and for which pods.
//!
//! Why gpuready reads claims at all: Kubernetes' device taint eviction
//! controller reads only `pod.spec.resourceClaims`, so a pod that got its GPU
//! as an extended resource (`nvidia.com/gpu: 1` served by a DeviceClass with
//! `extendedResourceName`) is not evicted by a `NoExecute` DeviceTaintRule
//! (kubernetes/kubernetes #141290, open). The scheduler records such a pod's
//! devices in a claim it creates in the pod's namespace, annotated
//! [`keys::dra::ANNOTATION_EXTENDED_RESOURCE_CLAIM`] `"true"` and owned by the
//! pod (k8s.io/api `resource/v1` `ExtendedResourceClaimAnnotation`; the
//! scheduler's `dynamicresources` plugin), with the devices in
//! `status.allocation.devices.results[]` and the pod in `status.reservedFor`.
//!
//! Hand-written for the reason `dra.rs` is: the workspace builds k8s-openapi
//! with the `v1_33` API set, which has no `resource.k8s.io/v1`. Field names
//! follow k8s-openapi 0.29's `v1_37::api::resource::v1` types. Unknown fields
//! are ignored and every field is optional, so a newer server's claim parses.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::keys;

/// One ResourceClaim (only what gpuready reads of it).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaim {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub status: Option<ResourceClaimStatus>,
}

/// `status` of a ResourceClaim.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimStatus {
    pub allocation: Option<AllocationResult>,
    /// The consumers the claim is reserved for (pods, for these claims).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_for: Vec<ConsumerReference>,
}

/// `status.allocation`.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllocationResult {
    pub devices: Option<DeviceAllocationResult>,
    /// Where the devices are: for node-local devices one term matching the
    /// node by `metadata.name`.
    pub node_selector: Option<k8s_openapi::api::core::v1::NodeSelector>,
}

/// `status.allocation.devices`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationResult {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<DeviceRequestAllocationResult>,
}

/// One allocated device: driver, pool and device name as in the ResourceSlice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequestAllocationResult {
    #[serde(default)]
    pub request: String,
    #[serde(default)]
    pub driver: String,
    #[serde(default)]
    pub pool: String,
    #[serde(default)]
    pub device: String,
    /// The device taints this allocation tolerates (copied from the request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<DeviceToleration>,
}

/// A toleration of device taints (`resource.k8s.io/v1` `DeviceToleration`).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceToleration {
    pub key: Option<String>,
    /// `Exists` or `Equal` (the default).
    pub operator: Option<String>,
    pub value: Option<String>,
    /// Empty: every effect.
    pub effect: Option<String>,
}

impl DeviceToleration {
    /// Whether it tolerates the taint `key=value:effect`, by Kubernetes' rules
    /// for tolerations (an empty key with `Exists` tolerates every key; an
    /// empty effect every effect). `tolerationSeconds` is not read: a pod
    /// that tolerates a `NoExecute` taint for a while is evicted after it.
    pub fn tolerates(&self, key: &str, value: Option<&str>, effect: &str) -> bool {
        let effect_ok = self
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == effect);
        let exists = self.operator.as_deref() == Some("Exists");
        let key_ok = match self.key.as_deref() {
            None | Some("") => exists,
            Some(k) => k == key,
        };
        let value_ok = exists || self.value.as_deref().unwrap_or("") == value.unwrap_or("");
        effect_ok && key_ok && value_ok
    }
}

/// A consumer in `status.reservedFor`.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerReference {
    pub api_group: Option<String>,
    /// `pods` for a pod.
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
}

impl ResourceClaim {
    /// Made by the scheduler for a pod's DRA-backed extended resources: the
    /// annotation's single valid value is `"true"`.
    pub fn is_extended_resource_claim(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::dra::ANNOTATION_EXTENDED_RESOURCE_CLAIM))
            .is_some_and(|v| v == "true")
    }

    /// The allocated devices (none while the claim is not allocated).
    pub fn allocated(&self) -> &[DeviceRequestAllocationResult] {
        self.status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .map_or(&[], |d| d.results.as_slice())
    }

    /// The one node the allocation is on, when its node selector names it by
    /// `metadata.name` (as the scheduler writes it for node-local devices).
    pub fn allocated_node(&self) -> Option<&str> {
        let terms = &self
            .status
            .as_ref()?
            .allocation
            .as_ref()?
            .node_selector
            .as_ref()?
            .node_selector_terms;
        let mut names = terms
            .iter()
            .flat_map(|t| t.match_fields.iter().flatten())
            .filter(|r| r.key == "metadata.name" && r.operator == "In")
            .flat_map(|r| r.values.iter().flatten());
        match (names.next(), names.next()) {
            (Some(one), None) => Some(one.as_str()),
            _ => None,
        }
    }

    /// The pods holding the claim, `namespace/name`: those it is reserved for,
    /// else the pod that owns it (the scheduler makes the pod its owner).
    pub fn pods(&self) -> Vec<String> {
        let ns = self.metadata.namespace.as_deref().unwrap_or_default();
        let reserved: Vec<String> = self
            .status
            .iter()
            .flat_map(|s| s.reserved_for.iter())
            .filter(|c| c.resource == "pods" && c.api_group.as_deref().unwrap_or("").is_empty())
            .map(|c| format!("{ns}/{}", c.name))
            .collect();
        if !reserved.is_empty() {
            return reserved;
        }
        self.metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|o| o.kind == "Pod" && o.api_version == "v1")
            .map(|o| format!("{ns}/{}", o.name))
            .collect()
    }
}

crate::resource::static_resource!(
    ResourceClaim,
    kube::core::NamespaceResourceScope,
    kind: keys::dra::CLAIM_KIND,
    group: keys::dra::API_GROUP,
    version: keys::dra::API_VERSION,
    plural: keys::dra::CLAIM_PLURAL,
);

#[cfg(test)]
mod tests;
