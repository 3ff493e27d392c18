//! Per-device verdicts on DRA nodes, for profiles with `deviceGating`: which
//! devices of the node's complete pool are bad by their own evidence (the
//! probe report's per-GPU state matched by UUID, the device's attributes
//! against the profile, the parent GPU of a MIG device), and the
//! DeviceTaintRules gpuready wants for them, and the pods a `NoExecute` taint
//! of gpuready's leaves running because they hold the device as a DRA-backed
//! extended resource (kubernetes #141290). Pure: the pool, the report, the
//! rules gpuready owns and the extended-resource claims are inputs.

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::device_taint_rule::{self, DeviceTaintRule};
use gpuready_api::keys::{self, dra, health_reasons as hr};
use gpuready_api::probe::{EventKind, ProbeReport};
use gpuready_api::profile::{DEFAULT_FATAL_XIDS, DeviceTaintEffect, ProbeExpectation};
use gpuready_api::{GpuNodeProfileSpec, Mode};
use jiff::Timestamp;

use crate::evidence::{DeviceKind, DraDevice, DraPool, ExtendedResourceHold};
use crate::product;
use crate::version::MajorMinor;

mod report;
mod rules;

pub use report::{
    BadDevice, DeviceGatingReport, EXTENDED_RESOURCE_EVICTION_ISSUE, EscalationState, NotEvicted,
};
pub use rules::{
    DeviceKey, DeviceRuleChange, RuleAction, desired_rule, escalation_rule, escalation_rule_name,
    no_execute_devices, rule_changes, status_changes,
};

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
