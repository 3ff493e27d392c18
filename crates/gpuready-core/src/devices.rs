//! Per-device verdicts on DRA nodes, for profiles with `deviceGating`: which
//! devices of the node's complete pool are bad by their own evidence (the
//! probe report's per-GPU state matched by UUID, the device's attributes
//! against the profile, the parent GPU of a MIG device), and the
//! DeviceTaintRules gpuready wants for them, and the pods a `NoExecute` taint
//! of gpuready's leaves running because they hold the device as a DRA-backed
//! extended resource (kubernetes #141290). Pure: the pool, the report, the
//! rules gpuready owns and the extended-resource claims are inputs.

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::device_taint_rule::{
    self, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector,
};
use gpuready_api::dra::DeviceTaint;
use gpuready_api::keys::{self, dra, health_reasons as hr};
use gpuready_api::probe::{EventKind, ProbeReport};
use gpuready_api::profile::{DEFAULT_FATAL_XIDS, DeviceTaintEffect, ProbeExpectation};
use gpuready_api::{GpuNodeProfileSpec, Mode};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;

use crate::evidence::{DeviceKind, DraDevice, DraPool, ExtendedResourceHold};
use crate::product;
use crate::version::MajorMinor;

/// One device gpuready takes out of service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BadDevice {
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// Machine reason (`FatalXid`, `ProductMismatch`, …): the value of the
    /// device taint gpuready writes.
    pub reason: String,
    pub message: String,
    /// The profile escalates this reason: the escalation rule's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<EscalationState>,
    /// Pods that hold this device as a DRA-backed extended resource while
    /// gpuready's taint on it is, or is to turn, `NoExecute`: Kubernetes'
    /// device taint eviction does not evict them (kubernetes #141290).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_evicted: Option<NotEvicted>,
}

/// The pods a `NoExecute` device taint of gpuready's leaves running because
/// they hold the device as a DRA-backed extended resource (KEP-5004): the
/// device taint eviction controller reads only `pod.spec.resourceClaims`
/// (kubernetes #141290, open; fix proposed in kubernetes PR #142289).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotEvicted {
    /// `namespace/name`, sorted.
    pub pods: Vec<String>,
    /// gpuready's taint on the device is `NoExecute` now (not a dry run, not
    /// an `Observe` profile's).
    pub no_execute_now: bool,
    /// In words, naming the device, the pods and the upstream issue.
    pub message: String,
}

/// The upstream issue every word about these pods names.
pub const EXTENDED_RESOURCE_EVICTION_ISSUE: &str = "kubernetes #141290";

/// Pod names a message lists before it says how many more.
const PODS_NAMED: usize = 5;

impl NotEvicted {
    fn new(device: &str, pods: Vec<String>, no_execute_now: bool, observe: bool) -> NotEvicted {
        let n = pods.len();
        let mut named = pods
            .iter()
            .take(PODS_NAMED)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if n > PODS_NAMED {
            named.push_str(&format!(" and {} more", n - PODS_NAMED));
        }
        let verb = if observe {
            "would not be evicted by Kubernetes under NoExecute"
        } else if no_execute_now {
            "are not evicted by Kubernetes"
        } else {
            "will not be evicted by Kubernetes when the taint turns NoExecute"
        };
        NotEvicted {
            message: format!(
                "{n} pod(s) hold {device} as a DRA extended resource and {verb} ({EXTENDED_RESOURCE_EVICTION_ISSUE}): {named}"
            ),
            pods,
            no_execute_now,
        }
    }
}

/// A bad device's escalation to `NoExecute`: a second rule of gpuready's
/// beside the device's own, effect `None` while its dry run lasts (counted
/// from the rule's creationTimestamp, which the API server sets), then
/// `NoExecute`. An `Observe` profile's stays `None`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EscalationState {
    /// The escalation rule's effect now: `None` or `NoExecute`.
    pub effect: &'static str,
    /// RFC 3339: when the dry run ends (or ended).
    pub no_execute_at: String,
    /// The rule's `EvictionInProgress` condition, `status: message`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction: Option<String>,
    /// Due, but held with effect `None`: the safety brake is engaged, or the
    /// profile's share of devices under `NoExecute` is at its limit
    /// (`crate::no_execute`), in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

/// The verdict over the devices of one node under device gating.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceGatingReport {
    /// Every bad device, sorted by device name.
    pub bad: Vec<BadDevice>,
    /// Physical GPUs with a usable device left: not bad, not tainted
    /// NoSchedule/NoExecute by the DRA driver.
    pub ready_gpus: usize,
    /// Below this many ready GPUs the node is tainted too.
    pub min_ready_gpus: usize,
    /// Seconds until an escalation's dry run ends.
    #[serde(skip)]
    pub recheck_after_seconds: Option<u64>,
    /// Devices in the node's pool: its share of the profile's `NoExecute`
    /// budget's denominator.
    #[serde(skip)]
    pub devices: usize,
}

impl DeviceGatingReport {
    /// `gpu-3 (FatalXid), gpu-5 (UncorrectableEccErrors)`.
    pub fn describe(&self) -> String {
        self.bad
            .iter()
            .map(|b| format!("{} ({})", b.device, b.reason))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why a physical GPU is bad, from the probe report (keyed by GPU UUID). The
/// first problem by the Health layer's order stands: ECC, row remapping, XID.
fn bad_gpus_from_probe(
    spec: &GpuNodeProfileSpec,
    report: &ProbeReport,
) -> BTreeMap<String, (u8, &'static str, String)> {
    let defaults = ProbeExpectation::default();
    let rules = spec.probe.as_ref().unwrap_or(&defaults);
    let fatal: &[u32] = rules.fatal_xids.as_deref().unwrap_or(DEFAULT_FATAL_XIDS);
    let mut bad: BTreeMap<String, (u8, &'static str, String)> = BTreeMap::new();
    let mut note = |uuid: &str, rank: u8, reason: &'static str, message: String| {
        let e = bad
            .entry(uuid.to_owned())
            .or_insert((rank, reason, message.clone()));
        if rank < e.0 {
            *e = (rank, reason, message);
        }
    };
    for g in &report.gpus {
        let Some(uuid) = g.uuid.as_deref() else {
            continue;
        };
        // The driver's own verdict first: it says what to do.
        if let Some((reason, what)) = g.recovery_action.and_then(crate::recovery::finding) {
            note(uuid, 0, reason, format!("recovery action {what}"));
        }
        if let Some(n) = g.ecc.as_ref().and_then(|e| e.volatile_uncorrectable)
            && n > 0
        {
            note(
                uuid,
                1,
                hr::UNCORRECTABLE_ECC,
                format!("{n} uncorrectable ECC error(s) since the driver loaded"),
            );
        }
        if g.row_remapping.as_ref().is_some_and(|r| r.failure) {
            note(
                uuid,
                2,
                hr::ROW_REMAP_FAILED,
                "row remapping failed (no spare rows left)".into(),
            );
        }
    }
    for e in &report.events.records {
        match (e.kind, e.xid) {
            (EventKind::DoubleBitEcc, _) => note(
                &e.gpu,
                1,
                hr::UNCORRECTABLE_ECC,
                format!("{} double-bit ECC event(s) since {}", e.count, e.first_seen),
            ),
            (EventKind::Xid, Some(x)) if u32::try_from(x).is_ok_and(|x| fatal.contains(&x)) => {
                note(
                    &e.gpu,
                    4,
                    hr::FATAL_XID,
                    format!("XID {x} ×{} (last {})", e.count, e.last_seen),
                )
            }
            _ => {}
        }
    }
    bad
}

/// Why a device's own attributes do not fit the profile (a mixed node).
fn attribute_mismatch(spec: &GpuNodeProfileSpec, d: &DraDevice) -> Option<(&'static str, String)> {
    if !matches!(d.kind, DeviceKind::Gpu | DeviceKind::Mig) {
        return None;
    }
    let g = &spec.gpu;
    if !g.products.is_empty()
        && let Some(p) = d.product.as_deref()
    {
        let p = product::from_nvml_name(p);
        if !product::matches_any(&g.products, &p) {
            return Some((
                "ProductMismatch",
                format!("{p} is not one of {}", g.products.join(", ")),
            ));
        }
    }
    if let Some(min) = g.min_memory_mib
        && d.kind == DeviceKind::Gpu
        && let Some(mib) = d.memory_mib
        && mib < u64::from(min)
    {
        return Some(("MemoryTooSmall", format!("{mib} MiB < {min} MiB required")));
    }
    if let Some(min) = g
        .min_compute_capability
        .as_deref()
        .and_then(|m| MajorMinor::parse(m).ok())
        && let Some(cc) = d.compute
        && cc < min
    {
        return Some((
            "ComputeCapabilityTooLow",
            format!("compute capability {cc} < {min} required"),
        ));
    }
    None
}

/// The escalation of one bad device, when the profile escalates its reason.
fn escalation(
    spec: &GpuNodeProfileSpec,
    bad: &BadDevice,
    owned: &[DeviceTaintRule],
    now: Timestamp,
) -> Option<EscalationState> {
    let rules = spec.escalation.as_ref()?;
    if !rules.reasons.contains(&bad.reason) {
        return None;
    }
    let name = escalation_rule_name(&bad.driver, &bad.pool, &bad.device);
    let rule = owned
        .iter()
        .find(|r| device_taint_rule::is_owned(r) && r.metadata.name.as_deref() == Some(&name));
    let dry_run = i64::from(rules.dry_run_seconds);
    let start = rule
        .and_then(|r| r.metadata.creation_timestamp.as_ref())
        .map_or(now, |t| t.0);
    let at = Timestamp::from_second(start.as_second().saturating_add(dry_run)).unwrap_or(start);
    // Only a rule the API server holds can have run its dry run.
    let escalated = spec.mode == Mode::Enforce && rule.is_some() && now >= at;
    let eviction = rule
        .and_then(|r| r.status.as_ref())
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == device_taint_rule::CONDITION_EVICTION_IN_PROGRESS)
        })
        .map(|c| format!("{}: {}", c.status, c.message));
    Some(EscalationState {
        effect: if escalated { "NoExecute" } else { "None" },
        no_execute_at: at.to_string(),
        eviction,
        held: None,
    })
}

/// The pods holding `bad`'s device as a DRA-backed extended resource that a
/// `NoExecute` taint of gpuready's on it leaves running: counted when the
/// device's taint is or is to turn `NoExecute` (an escalation, or
/// `deviceGating.effect: NoExecute`); an allocation that tolerates the taint
/// is not counted (Kubernetes would not evict it either).
fn not_evicted(
    spec: &GpuNodeProfileSpec,
    bad: &BadDevice,
    holds: &[ExtendedResourceHold],
) -> Option<NotEvicted> {
    let own_no_execute = spec
        .device_gating
        .as_ref()
        .is_some_and(|g| g.effect == DeviceTaintEffect::NoExecute);
    let escalated = bad
        .escalation
        .as_ref()
        .is_some_and(|e| e.effect == "NoExecute");
    if !own_no_execute && bad.escalation.is_none() {
        return None;
    }
    let key = keys::device_rules::TAINT_KEY;
    let pods: BTreeSet<&str> = holds
        .iter()
        .filter(|h| h.is_on(&bad.driver, &bad.pool, &bad.device))
        .filter(|h| !h.tolerates(key, Some(&bad.reason), "NoExecute"))
        .flat_map(|h| h.pods.iter().map(String::as_str))
        .collect();
    if pods.is_empty() {
        return None;
    }
    let observe = spec.mode == Mode::Observe;
    let now = !observe && (own_no_execute || escalated);
    Some(NotEvicted::new(
        &bad.device,
        pods.into_iter().map(str::to_owned).collect(),
        now,
        observe,
    ))
}

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

/// The bad devices of a complete pool; `owned` are gpuready's rules for the
/// node (their age and status drive escalations), `holds` the devices pods
/// hold as DRA-backed extended resources (`None`: not read), `now` the
/// judgement's time.
pub fn judge_devices(
    spec: &GpuNodeProfileSpec,
    pool: &DraPool,
    probe: Option<&ProbeReport>,
    owned: &[DeviceTaintRule],
    holds: Option<&[ExtendedResourceHold]>,
    now: Timestamp,
) -> DeviceGatingReport {
    let by_gpu = probe
        .map(|r| bad_gpus_from_probe(spec, r))
        .unwrap_or_default();
    let mut bad = Vec::new();
    for d in &pool.devices {
        let from_probe = d.gpu_uuid().and_then(|u| by_gpu.get(u).map(|b| (u, b)));
        let verdict = match from_probe {
            Some((uuid, (_, reason, message))) => Some((
                *reason,
                if d.kind == DeviceKind::Mig {
                    format!("parent GPU {uuid}: {message}")
                } else {
                    format!("{uuid}: {message}")
                },
            )),
            None => attribute_mismatch(spec, d),
        };
        if let Some((reason, message)) = verdict {
            let mut b = BadDevice {
                driver: dra::DRIVER.to_owned(),
                pool: d.pool.clone(),
                device: d.name.clone(),
                reason: reason.to_owned(),
                message,
                escalation: None,
                not_evicted: None,
            };
            b.escalation = escalation(spec, &b, owned, now);
            b.not_evicted = holds.and_then(|h| not_evicted(spec, &b, h));
            bad.push(b);
        }
    }
    let recheck_after_seconds = bad
        .iter()
        .filter_map(|b| b.escalation.as_ref())
        .filter(|e| e.effect == "None" && spec.mode == Mode::Enforce)
        .filter_map(|e| e.no_execute_at.parse::<Timestamp>().ok())
        .map(|at| {
            u64::try_from(at.as_second() - now.as_second())
                .unwrap_or(0)
                .max(1)
        })
        .min();
    bad.sort_by(|a, b| (&a.pool, &a.device).cmp(&(&b.pool, &b.device)));
    let names: BTreeSet<&str> = bad.iter().map(|b| b.device.as_str()).collect();
    let ready_gpus = pool.without(&names).physical_gpus(true);
    let min_ready_gpus = spec
        .device_gating
        .as_ref()
        .and_then(|g| g.min_ready_gpus)
        .or(spec.gpu.count)
        .unwrap_or(1);
    DeviceGatingReport {
        bad,
        ready_gpus,
        min_ready_gpus: usize::try_from(min_ready_gpus).unwrap_or(usize::MAX),
        recheck_after_seconds,
        devices: pool.devices.len(),
    }
}

/// The report with the bad GPUs left out (their entries and events; the
/// enumeration count kept), so the Health layer judges the GPUs that stay in
/// service: a bad GPU is handled by its own DeviceTaintRule.
pub fn report_without(
    report: &ProbeReport,
    gating: &DeviceGatingReport,
    pool: &DraPool,
) -> ProbeReport {
    let bad_devices: BTreeSet<&str> = gating.bad.iter().map(|b| b.device.as_str()).collect();
    let uuids: BTreeSet<&str> = pool
        .devices
        .iter()
        .filter(|d| bad_devices.contains(d.name.as_str()))
        .filter_map(DraDevice::gpu_uuid)
        .collect();
    let mut r = report.clone();
    let seen = r
        .device_count
        .unwrap_or(u32::try_from(r.gpus.len()).unwrap_or(u32::MAX));
    r.device_count = Some(seen);
    r.gpus
        .retain(|g| g.uuid.as_deref().is_none_or(|u| !uuids.contains(u)));
    r.events.records.retain(|e| !uuids.contains(e.gpu.as_str()));
    r
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
