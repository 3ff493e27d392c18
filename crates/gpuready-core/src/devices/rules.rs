//! The DeviceTaintRules gpuready wants for a node's bad devices, the changes
//! against the rules it owns, and the status conditions it writes on them.

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::device_taint_rule::{
    self, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector,
};
use gpuready_api::dra::DeviceTaint;
use gpuready_api::keys;
use gpuready_api::{GpuNodeProfileSpec, Mode};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;

use super::report::{
    BadDevice, DeviceGatingReport, EXTENDED_RESOURCE_EVICTION_ISSUE, EscalationState,
};

/// One device as a DeviceTaintRule selects it: driver, pool, device.
pub type DeviceKey = (String, String, String);

/// The devices gpuready taints, or is to taint, `NoExecute`: those of its own
/// rules whose effect is not `NoSchedule` (an escalation rule in its dry run
/// or escalated, a `deviceGating.effect: NoExecute` rule, an `Observe`
/// profile's rule). Only claims on these devices can hold a pod that a
/// `NoExecute` taint of gpuready's leaves running, so the controller keeps
/// no other ResourceClaim.
pub fn no_execute_devices<'a>(
    owned: impl IntoIterator<Item = &'a DeviceTaintRule>,
) -> BTreeSet<DeviceKey> {
    owned
        .into_iter()
        .filter(|r| device_taint_rule::is_owned(r) && r.spec.taint.effect != "NoSchedule")
        .filter_map(|r| {
            let s = r.spec.device_selector.as_ref()?;
            Some((s.driver.clone()?, s.pool.clone()?, s.device.clone()?))
        })
        .collect()
}

/// The name of a device's escalation rule: its own rule's with `-noexecute`.
pub fn escalation_rule_name(driver: &str, pool: &str, device: &str) -> String {
    device_taint_rule::rule_name(driver, pool, &format!("{device}-noexecute"))
}

/// One DeviceTaintRule change gpuready would make.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    Create,
    Update,
    Delete,
    /// gpuready's own condition in the rule's `status.conditions`
    /// ([`keys::device_rules::CONDITION_PODS_NOT_EVICTED`]), applied on the
    /// status subresource of a rule gpuready already holds.
    Status,
}

/// A DeviceTaintRule to create, update or delete: one entry per device rule
/// in a node's `changes` (`check --output json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRuleChange {
    pub action: RuleAction,
    pub name: String,
    pub pool: String,
    pub device: String,
    /// Why the device is bad (`None` for a delete: it recovered or left the profile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the device is bad, in words (create, update).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The rule to write (create, update).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<DeviceTaintRule>,
    /// The observed rule's resourceVersion (update) and uid (delete): the
    /// write applies to exactly the object gpuready saw, or fails with 409.
    #[serde(skip)]
    pub resource_version: Option<String>,
    #[serde(skip)]
    pub uid: Option<String>,
    /// The condition to apply (status).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<Condition>,
}

impl DeviceRuleChange {
    /// The rule written taints the device (`NoSchedule` or `NoExecute`, not
    /// a dry run's `None`).
    pub fn taints(&self) -> bool {
        self.rule
            .as_ref()
            .is_some_and(|r| r.spec.taint.effect != "None")
    }
}

/// The rule gpuready wants for one bad device, written for `profile`.
pub fn desired_rule(
    node: &str,
    profile: &str,
    bad: &BadDevice,
    spec: &GpuNodeProfileSpec,
) -> DeviceTaintRule {
    let effect = match (spec.mode, &spec.device_gating) {
        (Mode::Observe, _) | (_, None) => "None",
        (Mode::Enforce, Some(g)) => g.effect.as_str(),
    };
    let name = device_taint_rule::rule_name(&bad.driver, &bad.pool, &bad.device);
    device_rule(node, profile, bad, name, effect)
}

/// The escalation rule of a bad device: the same taint as its own rule, with
/// the escalation's effect (`None` during the dry run, then `NoExecute`).
pub fn escalation_rule(
    node: &str,
    profile: &str,
    bad: &BadDevice,
    e: &EscalationState,
) -> DeviceTaintRule {
    let name = escalation_rule_name(&bad.driver, &bad.pool, &bad.device);
    device_rule(node, profile, bad, name, e.effect)
}

/// A rule of gpuready's named `name`, for `profile`, tainting exactly `bad`'s
/// device with its reason and `effect`.
fn device_rule(
    node: &str,
    profile: &str,
    bad: &BadDevice,
    name: String,
    effect: &str,
) -> DeviceTaintRule {
    let mut metadata = device_taint_rule::owned_metadata(node, profile, &bad.reason);
    metadata.name = Some(name);
    DeviceTaintRule {
        metadata,
        spec: DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: Some(bad.driver.clone()),
                pool: Some(bad.pool.clone()),
                device: Some(bad.device.clone()),
            }),
            taint: DeviceTaint {
                key: keys::device_rules::TAINT_KEY.to_owned(),
                value: Some(bad.reason.clone()),
                effect: effect.to_owned(),
            },
        },
        status: None,
    }
}

/// Whether an owned rule already is what gpuready wants (spec and ownership
/// metadata; the server's own fields such as `timeAdded` do not count).
fn same(current: &DeviceTaintRule, want: &DeviceTaintRule) -> bool {
    let ann = |r: &DeviceTaintRule, k: &str| {
        r.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k).cloned())
    };
    let profile = |r: &DeviceTaintRule| {
        r.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::LABEL_PROFILE).cloned())
    };
    current.spec == want.spec
        && profile(current) == profile(want)
        && ann(current, keys::device_rules::ANNOTATION_NODE)
            == ann(want, keys::device_rules::ANNOTATION_NODE)
        && ann(current, keys::device_rules::ANNOTATION_REASON)
            == ann(want, keys::device_rules::ANNOTATION_REASON)
}

/// The changes that bring the node's owned rules to `want`, the gating
/// report with the governing profile's name and spec (`None`: delete all).
pub fn rule_changes(
    node: &str,
    owned: &[DeviceTaintRule],
    want: Option<(&DeviceGatingReport, &str, &GpuNodeProfileSpec)>,
) -> Vec<DeviceRuleChange> {
    let desired: BTreeMap<String, (DeviceTaintRule, &BadDevice)> = want
        .map(|(g, profile, spec)| {
            g.bad
                .iter()
                .flat_map(|b| {
                    let escalation = b
                        .escalation
                        .as_ref()
                        .map(|e| escalation_rule(node, profile, b, e));
                    std::iter::once(desired_rule(node, profile, b, spec))
                        .chain(escalation)
                        .map(move |r| (r.metadata.name.clone().unwrap_or_default(), (r, b)))
                })
                .collect()
        })
        .unwrap_or_default();
    let current: BTreeMap<String, &DeviceTaintRule> = owned
        .iter()
        .filter(|r| device_taint_rule::is_owned(r))
        .map(|r| (r.metadata.name.clone().unwrap_or_default(), r))
        .collect();
    let mut out = Vec::new();
    for (name, (rule, bad)) in &desired {
        let (action, seen) = match current.get(name) {
            None => (RuleAction::Create, None),
            Some(c) if !same(c, rule) => (RuleAction::Update, Some(*c)),
            Some(_) => continue,
        };
        out.push(DeviceRuleChange {
            action,
            name: name.clone(),
            pool: bad.pool.clone(),
            device: bad.device.clone(),
            reason: Some(bad.reason.clone()),
            message: Some(bad.message.clone()),
            rule: Some(rule.clone()),
            resource_version: seen.and_then(|c| c.metadata.resource_version.clone()),
            uid: seen.and_then(|c| c.metadata.uid.clone()),
            condition: None,
        });
    }
    for (name, rule) in &current {
        if desired.contains_key(name) {
            continue;
        }
        let sel = rule.spec.device_selector.clone().unwrap_or_default();
        out.push(DeviceRuleChange {
            action: RuleAction::Delete,
            name: name.clone(),
            pool: sel.pool.unwrap_or_default(),
            device: sel.device.unwrap_or_default(),
            reason: None,
            message: None,
            rule: None,
            resource_version: rule.metadata.resource_version.clone(),
            uid: rule.metadata.uid.clone(),
            condition: None,
        });
    }
    out
}

/// The condition gpuready wants in the `status` of one of its rules: `True`
/// while pods hold the rule's device as a DRA-backed extended resource under
/// a taint that is, or is to turn, `NoExecute` (the rule's effect is not
/// `NoSchedule`); `False` once a rule that said so has none left. `None`:
/// gpuready writes nothing (a `NoSchedule` rule, or no such pod ever seen).
fn wanted_condition(
    rule: &DeviceTaintRule,
    bad: &BadDevice,
    current: Option<&Condition>,
) -> Option<(&'static str, &'static str, String)> {
    use keys::device_rules::condition_reasons as r;
    if rule.spec.taint.effect == "NoSchedule" {
        return None;
    }
    match &bad.not_evicted {
        Some(n) => {
            // The device's taint as the plan has it, not the cached rule's
            // effect: the pass that turns a rule NoExecute says so at once.
            let reason = if n.no_execute_now {
                r::NOT_EVICTED
            } else {
                r::WOULD_NOT_BE_EVICTED
            };
            Some(("True", reason, n.message.clone()))
        }
        None => current.map(|_| {
            (
                "False",
                r::NONE,
                format!(
                    "no pod holds {} as a DRA extended resource ({EXTENDED_RESOURCE_EVICTION_ISSUE})",
                    bad.device
                ),
            )
        }),
    }
}

/// The status writes that bring gpuready's condition on its rules for the
/// node to what the gating report says, `now` the judgement's time. Only
/// rules gpuready already holds (seen with their uid) and keeps: a rule just
/// created gets its condition on the next pass, from the watch's copy. A
/// condition already as wanted (status, reason, message) is not rewritten;
/// `lastTransitionTime` moves only with the status.
pub fn status_changes(
    owned: &[DeviceTaintRule],
    gating: &DeviceGatingReport,
    now: Timestamp,
) -> Vec<DeviceRuleChange> {
    let ty = keys::device_rules::CONDITION_PODS_NOT_EVICTED;
    let mut out = Vec::new();
    for rule in owned.iter().filter(|r| device_taint_rule::is_owned(r)) {
        let Some(sel) = &rule.spec.device_selector else {
            continue;
        };
        let Some(bad) = gating.bad.iter().find(|b| {
            sel.driver.as_deref() == Some(b.driver.as_str())
                && sel.pool.as_deref() == Some(b.pool.as_str())
                && sel.device.as_deref() == Some(b.device.as_str())
        }) else {
            continue;
        };
        let current = rule
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == ty));
        let Some((status, reason, message)) = wanted_condition(rule, bad, current) else {
            continue;
        };
        if current.is_some_and(|c| c.status == status && c.reason == reason && c.message == message)
        {
            continue;
        }
        let transition = current
            .filter(|c| c.status == status)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or(Time(now));
        out.push(DeviceRuleChange {
            action: RuleAction::Status,
            name: rule.metadata.name.clone().unwrap_or_default(),
            pool: bad.pool.clone(),
            device: bad.device.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message.clone()),
            rule: None,
            resource_version: None,
            uid: rule.metadata.uid.clone(),
            condition: Some(Condition {
                type_: ty.to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message,
                last_transition_time: transition,
                observed_generation: None,
            }),
        });
    }
    out
}
