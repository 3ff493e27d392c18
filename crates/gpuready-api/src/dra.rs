//! The part of a DRA `ResourceSlice` (`resource.k8s.io/v1`) gpuready reads.
//!
//! Kept as gpuready's own tolerant serde types rather than k8s-openapi's: the
//! workspace builds against the v1.33 API set, which has no `resource.k8s.io/v1`,
//! and only a handful of fields matter here. Unknown fields are ignored, every
//! field is optional, so a slice from a newer driver or API server still parses.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// One ResourceSlice: a part of a pool of devices published by one driver.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSlice {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ResourceSliceSpec,
}

/// `spec` of a ResourceSlice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSliceSpec {
    #[serde(default)]
    pub driver: String,
    #[serde(default)]
    pub pool: ResourcePool,
    /// The node whose local devices the slice lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
}

/// A pool: all slices of one generation together describe its devices.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePool {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub generation: i64,
    #[serde(default)]
    pub resource_slice_count: i64,
}

/// One device of a slice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, DeviceAttribute>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, DeviceCapacity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<DeviceTaint>,
}

/// A typed attribute value: exactly one member is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DeviceAttribute {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bool: Option<bool>,
}

/// A capacity: a Kubernetes quantity such as `143771Mi`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DeviceCapacity {
    #[serde(default)]
    pub value: String,
}

/// A device taint set by the driver (health) or copied from a DeviceTaintRule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DeviceTaint {
    #[serde(default)]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `None`, `NoSchedule` or `NoExecute`; anything else reads as `None`.
    #[serde(default)]
    pub effect: String,
}
