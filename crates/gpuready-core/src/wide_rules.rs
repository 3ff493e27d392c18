//! DeviceTaintRules, anyone's, whose `NoExecute` taint reaches across the
//! cluster: a selector that names no pool taints the devices it matches on
//! every node, so Kubernetes' device taint eviction evicts every pod using
//! them, in every namespace and at every priority (kubernetes #141422, open).
//! gpuready only reports such a rule (`check`, a metric, an alert): it never
//! refuses or edits another writer's rule. Pure: the rules are inputs.
//!
//! The selector's meaning is the API's (`resource.k8s.io/v1`
//! `DeviceTaintSelector`): every field that is set must match, so an empty
//! selector (`deviceSelector: {}`) matches every device of every driver, and
//! one naming only a driver every device of that driver; a rule without a
//! selector matches no device (the eviction controller's `ruleMatchesDevice`;
//! Kubernetes 1.37.0's scheduler still read an omitted selector as "every
//! device" for `NoSchedule`, kubernetes #141620, fixed by PR #141648).

use gpuready_api::device_taint_rule::{self, DeviceTaintRule};
use serde::Serialize;

/// The upstream issue the words name.
pub const CLUSTER_WIDE_RULE_ISSUE: &str = "kubernetes #141422";

/// How far a rule's selector reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Reach {
    /// `deviceSelector: {}`: every device of every driver.
    EveryDevice,
    /// Only a driver: every device of that driver.
    EveryDeviceOfDriver,
    /// A device name and no pool: that device name in every pool.
    DeviceInEveryPool,
}

/// A `NoExecute` DeviceTaintRule whose selector names no pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WideRule {
    pub name: String,
    pub reach: Reach,
    /// One of gpuready's own (it never writes one: its rules name driver,
    /// pool and device; listed so a tampered rule is not hidden).
    pub gpuready_owned: bool,
    /// What it taints and what follows, in words.
    pub message: String,
}

/// The rule, when it is a `NoExecute` rule whose selector names no pool.
pub fn wide_rule(rule: &DeviceTaintRule) -> Option<WideRule> {
    if rule.spec.taint.effect != "NoExecute" {
        return None;
    }
    // No selector: no device (the API's reading).
    let sel = rule.spec.device_selector.as_ref()?;
    if set(&sel.pool).is_some() {
        return None;
    }
    let (reach, what) = match (set(&sel.driver), set(&sel.device)) {
        (None, None) => (
            Reach::EveryDevice,
            "every device of every driver (an empty deviceSelector)".to_owned(),
        ),
        (Some(d), None) => (
            Reach::EveryDeviceOfDriver,
            format!("every device of driver {d} (its deviceSelector names only the driver)"),
        ),
        (driver, Some(dev)) => (
            Reach::DeviceInEveryPool,
            format!(
                "device {dev} in every pool{} (its deviceSelector names no pool)",
                driver
                    .map(|d| format!(" of driver {d}"))
                    .unwrap_or_default()
            ),
        ),
    };
    let name = rule.metadata.name.clone().unwrap_or_default();
    let taint = &rule.spec.taint;
    Some(WideRule {
        message: format!(
            "DeviceTaintRule {name} taints {what} with {}{}:NoExecute: Kubernetes evicts every pod using those devices, in every namespace and at every priority, until the rule goes ({CLUSTER_WIDE_RULE_ISSUE}); give it a pool (the node's name for the NVIDIA DRA driver) and a device, or effect None to see what it would evict",
            taint.key,
            taint
                .value
                .as_deref()
                .map(|v| format!("={v}"))
                .unwrap_or_default(),
        ),
        gpuready_owned: device_taint_rule::is_owned(rule),
        name,
        reach,
    })
}

/// A selector field that is set to something.
fn set(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

/// Every such rule among `rules`, sorted by name.
pub fn wide_rules<'a>(rules: impl IntoIterator<Item = &'a DeviceTaintRule>) -> Vec<WideRule> {
    let mut out: Vec<WideRule> = rules.into_iter().filter_map(wide_rule).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}
