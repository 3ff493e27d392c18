//! The part of a DRA `ResourceSlice` (`resource.k8s.io/v1`) gpuready reads.
//!
//! Kept as gpuready's own tolerant serde types rather than k8s-openapi's: the
//! workspace builds against the v1.33 API set, which has no `resource.k8s.io/v1`,
//! and only a handful of fields matter here. Field names follow k8s-openapi
//! 0.29's `v1_37` types (the newest API this gpuready reads). Unknown fields are ignored, every
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
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSliceSpec {
    #[serde(default)]
    pub driver: String,
    #[serde(default)]
    pub pool: ResourcePool,
    /// The node whose local devices the slice lists.
    pub node_name: Option<String>,
    /// Kubernetes 1.37: the fully qualified name of the string attribute that
    /// labels each device with its partition type (e.g. `Full` or `Half`).
    pub partition_type_attribute: Option<String>,
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

/// A typed attribute value: exactly one member is set. The list forms are
/// KEP-5491's (`DRAListTypeAttributes`, alpha in Kubernetes 1.36): members and
/// spellings as k8s-openapi 0.29's `v1_37::api::resource::v1::DeviceAttribute`
/// (`bools`, `ints`, `strings`, `versions`, each a non-empty list).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DeviceAttribute {
    pub string: Option<String>,
    pub version: Option<String>,
    pub int: Option<i64>,
    pub bool: Option<bool>,
    pub strings: Option<Vec<String>>,
    pub versions: Option<Vec<String>>,
    pub ints: Option<Vec<i64>>,
    pub bools: Option<Vec<bool>>,
}

impl DeviceAttribute {
    /// The string, or the only element of a one-string list: an attribute
    /// gpuready reads as one value means the same in either form.
    pub fn one_string(&self) -> Option<&str> {
        self.string
            .as_deref()
            .or_else(|| only(self.strings.as_deref()).map(String::as_str))
    }

    /// The version, or the only element of a one-version list.
    pub fn one_version(&self) -> Option<&str> {
        self.version
            .as_deref()
            .or_else(|| only(self.versions.as_deref()).map(String::as_str))
    }

    /// Every integer: `int` as one, `ints` as they are.
    pub fn all_ints(&self) -> Vec<i64> {
        match (&self.int, &self.ints) {
            (Some(i), _) => vec![*i],
            (None, Some(list)) => list.clone(),
            (None, None) => Vec::new(),
        }
    }

    /// The value in the list form (KEP-5491) rather than the scalar one.
    pub fn is_list(&self) -> bool {
        self.strings.is_some()
            || self.versions.is_some()
            || self.ints.is_some()
            || self.bools.is_some()
    }
}

fn only<T>(list: Option<&[T]>) -> Option<&T> {
    match list {
        Some([one]) => Some(one),
        _ => None,
    }
}

/// A capacity: a Kubernetes quantity such as `143771Mi`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DeviceCapacity {
    #[serde(default)]
    pub value: String,
}

/// A device taint set by the driver (health) or copied from a DeviceTaintRule.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DeviceTaint {
    #[serde(default)]
    pub key: String,
    pub value: Option<String>,
    /// `None`, `NoSchedule` or `NoExecute`; anything else reads as `None`.
    #[serde(default)]
    pub effect: String,
}
