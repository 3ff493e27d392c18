//! The Health layer: the report of `gpuready probe` (NVML read on the node)
//! judged against the profile and cross-checked with GFD's labels. Pure: the
//! report is an input, time is an input.

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::keys::health_reasons as r;
use gpuready_api::keys::nvidia;
use gpuready_api::probe::{EventKind, PROBE_REPORT_API_VERSION, ProbeReport};
use gpuready_api::profile::{DEFAULT_FATAL_XIDS, ProbeExpectation, ProbePolicy};
use jiff::Timestamp;

use crate::evaluate::Status;
use crate::facts::{Field, NodeFacts};
use crate::product;
use crate::version::{DriverVersion, MajorMinor};

/// What the controller (or `check`) found in the node's report carrier.
#[derive(Clone, Debug, PartialEq)]
pub enum ProbeEvidence {
    Report(Box<ProbeReport>),
    /// The carrier exists but holds no report this gpuready reads: why.
    Invalid(String),
}

/// Why a carrier's content is not a usable report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("not a probe report: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "apiVersion {0:?} is not {PROBE_REPORT_API_VERSION}: a probe newer or older than this gpuready; run the same version for both"
    )]
    Version(String),
}

/// Parses the JSON a probe published, refusing versions this gpuready does not know.
pub fn parse_report(json: &str) -> Result<ProbeReport, ReportError> {
    let report: ProbeReport = serde_json::from_str(json)?;
    if report.api_version != PROBE_REPORT_API_VERSION {
        return Err(ReportError::Version(report.api_version));
    }
    Ok(report)
}

impl ProbeEvidence {
    /// The evidence for a carrier's text: the report, or why it is unusable.
    pub fn from_json(json: &str) -> ProbeEvidence {
        match parse_report(json) {
            Ok(r) => ProbeEvidence::Report(Box::new(r)),
            Err(e) => ProbeEvidence::Invalid(e.to_string()),
        }
    }
}

/// The Health layer's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthVerdict {
    pub status: Status,
    pub reason: &'static str,
    pub message: String,
    /// Seconds until the report goes stale if nothing new arrives.
    pub recheck_after_seconds: Option<u64>,
}

fn verdict(status: Status, reason: &'static str, message: impl Into<String>) -> HealthVerdict {
    HealthVerdict {
        status,
        reason,
        message: message.into(),
        recheck_after_seconds: None,
    }
}

/// Whether the Health layer is judged for this node at all: a report (or an
/// unreadable carrier) exists, or the profile does not ignore a missing one.
pub fn applies(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> bool {
    facts.probe.is_some()
        || spec
            .probe
            .as_ref()
            .is_some_and(|p| p.when_missing != ProbePolicy::Ignore)
}

/// Judges the node's probe report; `None` when the layer does not apply.
pub fn judge(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    now: Timestamp,
) -> Option<HealthVerdict> {
    let defaults = ProbeExpectation::default();
    let rules = spec.probe.as_ref().unwrap_or(&defaults);
    let report = match &facts.probe {
        None => {
            let status = match rules.when_missing {
                ProbePolicy::Ignore => return None,
                ProbePolicy::Unknown => Status::Unknown,
                ProbePolicy::Blocking => Status::NotReady,
            };
            return Some(verdict(
                status,
                r::PROBE_MISSING,
                format!(
                    "no report from gpuready probe for this node (ConfigMap {}{}): install the chart with probe.enabled=true and check that the probe pod runs on this node",
                    gpuready_api::probe::PROBE_CONFIGMAP_PREFIX,
                    facts.name
                ),
            ));
        }
        Some(ProbeEvidence::Invalid(why)) => {
            return Some(verdict(
                Status::Unknown,
                r::PROBE_REPORT_INVALID,
                format!("the probe report cannot be read: {why}"),
            ));
        }
        Some(ProbeEvidence::Report(report)) => report,
    };
    if let Some(node) = &report.node
        && *node != facts.name
    {
        return Some(verdict(
            Status::Unknown,
            r::PROBE_REPORT_INVALID,
            format!(
                "the report names node {node}, not this one: only the probe on a node may publish its report"
            ),
        ));
    }
    let Ok(generated) = report.generated_at.parse::<Timestamp>() else {
        return Some(verdict(
            Status::Unknown,
            r::PROBE_REPORT_INVALID,
            format!(
                "generatedAt {:?} is not an RFC 3339 time",
                report.generated_at
            ),
        ));
    };
    let mut recheck = None;
    if rules.max_report_age_seconds > 0 {
        let max = i64::from(rules.max_report_age_seconds);
        let age = now.as_second() - generated.as_second();
        if age > max {
            // The message names the report's time, never the age: it ends up in
            // node conditions, and a clock-driven message would rewrite them.
            return Some(verdict(
                if rules.when_missing == ProbePolicy::Blocking {
                    Status::NotReady
                } else {
                    Status::Unknown
                },
                r::PROBE_REPORT_STALE,
                format!(
                    "the probe's last report is from {generated}, older than the {max}s limit: is the gpuready probe pod on this node running?"
                ),
            ));
        }
        recheck = Some(u64::try_from(max - age.max(0) + 1).unwrap_or(1));
    }
    let mut v = judge_report(spec, rules, facts, report);
    v.recheck_after_seconds = recheck;
    Some(v)
}

/// A problem found in a fresh report, in the order of the reason it gives.
struct Finding {
    rank: u8,
    reason: &'static str,
    message: String,
}

fn judge_report(
    spec: &GpuNodeProfileSpec,
    rules: &ProbeExpectation,
    facts: &NodeFacts,
    report: &ProbeReport,
) -> HealthVerdict {
    if !report.nvml.usable {
        return verdict(
            Status::NotReady,
            r::NVML_UNUSABLE,
            format!(
                "NVML cannot be used in the probe's container ({}): check the node's NVIDIA driver (nvidia-smi on the host), the probe's RuntimeClass and NVIDIA_VISIBLE_DEVICES",
                report.nvml.error.as_deref().unwrap_or("no error given")
            ),
        );
    }
    let mut findings: Vec<Finding> = Vec::new();
    let mut add = |rank: u8, reason: &'static str, message: String| {
        findings.push(Finding {
            rank,
            reason,
            message,
        })
    };

    // GPU count: NVML's enumeration against the profile and against GFD's label.
    // Under MIG both count slices while NVML counts physical GPUs: not compared.
    let mig = under_mig(facts, report);
    let seen = report
        .device_count
        .unwrap_or(u32::try_from(report.gpus.len()).unwrap_or(u32::MAX));
    if seen == 0 {
        add(
            0,
            r::GPUS_MISSING,
            "NVML initialised but enumerates no GPU: the driver lost its devices (XID 79?) or the container sees none; check nvidia-smi on the host".into(),
        );
    } else if let Some(want) = spec.gpu.count
        && !mig
        && seen < want
    {
        add(
            0,
            r::GPUS_MISSING,
            format!(
                "NVML sees {seen} GPU(s), the profile expects at least {want}: a GPU fell off the bus or failed to initialise; check nvidia-smi and the kernel log for XID 79, then reboot or service the node"
            ),
        );
    }
    if let Field::Present(labelled) = &facts.gfd.count
        && !mig
        && seen > 0
        && seen < *labelled
    {
        add(
            0,
            r::GPUS_MISSING,
            format!(
                "NVML sees {seen} GPU(s) but {}={labelled}: a GPU was lost since GFD last counted (XID 79, fallen off the bus); reboot or service the node",
                nvidia::GPU_COUNT
            ),
        );
    }

    // NFD's PCI scan (when the caller read the node's NodeFeature): GPUs on the
    // bus that NVML does not enumerate failed to initialise or were lost.
    if let Some(bus) = &facts.evidence.bus
        && seen > 0
        && seen < bus.gpus
    {
        add(
            0,
            r::GPUS_MISSING,
            format!(
                "NVML sees {seen} GPU(s) but NFD finds {} NVIDIA GPU(s) on the PCI bus ({}): the driver lost or never initialised one; check the kernel log for XID 79 or a driver load error, then reboot or service the node",
                bus.gpus,
                bus.objects.join(", ")
            ),
        );
    }

    for gpu in &report.gpus {
        let id = gpu_id(gpu);
        if let Some(ecc) = &gpu.ecc
            && let Some(n) = ecc.volatile_uncorrectable
            && n > 0
        {
            add(
                1,
                r::UNCORRECTABLE_ECC,
                format!(
                    "{id}: {n} uncorrectable ECC error(s) since the driver loaded: drain the node and reset the GPU (or reboot); if they come back, run field diagnostics and RMA"
                ),
            );
        }
        if let Some(rr) = &gpu.row_remapping {
            if rr.failure {
                add(
                    2,
                    r::ROW_REMAP_FAILED,
                    format!(
                        "{id}: row remapping failed (no spare rows left): the memory is failing; take the GPU out of service and RMA it"
                    ),
                );
            } else if rr.pending {
                add(
                    3,
                    r::ROW_REMAP_PENDING,
                    format!(
                        "{id}: a row remapping is pending: drain the node and reset the GPU (nvidia-smi -r) or reboot to apply it"
                    ),
                );
            }
        }
        if let Some(rp) = &gpu.retired_pages
            && rp.pending
        {
            add(
                3,
                r::ROW_REMAP_PENDING,
                format!(
                    "{id}: a page retirement is pending: drain the node and reload the driver (reboot) to apply it"
                ),
            );
        }
    }

    let fatal: &[u32] = rules.fatal_xids.as_deref().unwrap_or(DEFAULT_FATAL_XIDS);
    let mut other_xids = Vec::new();
    for e in &report.events.records {
        match (e.kind, e.xid) {
            (EventKind::DoubleBitEcc, _) => add(
                1,
                r::UNCORRECTABLE_ECC,
                format!(
                    "{}: {} double-bit ECC event(s) since {}: drain the node and reset the GPU (or reboot)",
                    e.gpu, e.count, e.first_seen
                ),
            ),
            (EventKind::Xid, Some(x)) if u32::try_from(x).is_ok_and(|x| fatal.contains(&x)) => add(
                4,
                r::FATAL_XID,
                format!(
                    "{}: XID {x} ×{} (first {}, last {}): {}; after fixing it, restart the probe pod to clear the record",
                    e.gpu,
                    e.count,
                    e.first_seen,
                    e.last_seen,
                    xid_action(x)
                ),
            ),
            (EventKind::Xid, Some(x)) => other_xids.push(format!("XID {x} ×{}", e.count)),
            (EventKind::Xid, None) => {}
        }
    }

    if rules.check_labels {
        for m in label_contradictions(facts, report) {
            add(5, r::LABELS_CONTRADICT_PROBE, m);
        }
    }

    if findings.is_empty() {
        return verdict(
            Status::Ready,
            r::PROBE_HEALTHY,
            healthy_message(report, &other_xids),
        );
    }
    findings.sort_by_key(|f| f.rank);
    let reason = findings[0].reason;
    let message = findings
        .iter()
        .map(|f| f.message.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    verdict(Status::NotReady, reason, message)
}

fn gpu_id(gpu: &gpuready_api::probe::GpuState) -> String {
    match (&gpu.uuid, &gpu.pci_bus_id) {
        (Some(u), Some(b)) => format!("GPU {} ({u}, {b})", gpu.index),
        (Some(u), None) => format!("GPU {} ({u})", gpu.index),
        _ => format!("GPU {}", gpu.index),
    }
}

/// NVIDIA's immediate action for the default fatal XIDs (Xid catalog).
fn xid_action(xid: u64) -> &'static str {
    match xid {
        79 => {
            "the GPU has fallen off the bus: reboot the node; if it recurs, reseat or service the GPU"
        }
        48 | 95 | 140 => "uncorrectable memory error: drain the node and reset the GPU",
        64 => "row remapping or page retirement failed: take the GPU out of service and RMA it",
        74 => "NVLink error: drain the node and reset the GPUs on the link",
        154 => {
            "the driver changed the GPU's recovery action (reset or reboot required): drain the node and follow it"
        }
        61 | 62 | 119 | 120 => {
            "GPU firmware (micro-controller or GSP) stopped answering: drain the node and reset the GPU"
        }
        _ => "listed as fatal by the profile: drain the node and reset the GPU",
    }
}

/// MIG is on (GFD's strategy, or NVML's mode on any GPU): GFD's product,
/// memory and count then describe slices, not the GPUs NVML enumerates.
fn under_mig(facts: &NodeFacts, report: &ProbeReport) -> bool {
    facts
        .gfd
        .mig_strategy
        .as_deref()
        .is_some_and(|s| s == "single" || s == "mixed")
        || report.gpus.iter().any(|g| g.mig_enabled == Some(true))
}

/// GFD labels NVML contradicts. Skipped under MIG, where GFD labels the slices.
fn label_contradictions(facts: &NodeFacts, report: &ProbeReport) -> Vec<String> {
    let gfd = &facts.gfd;
    let mig = under_mig(facts, report);
    let mut out = Vec::new();
    if report.gpus.is_empty() {
        return out;
    }
    if !mig {
        if let Some(label) = &gfd.product {
            let names: Vec<String> = report
                .gpus
                .iter()
                .filter_map(|g| g.name.as_deref())
                .map(|n| n.replace(' ', "-"))
                .collect();
            if !names.is_empty()
                && !names
                    .iter()
                    .any(|n| product::normalize(n).eq_ignore_ascii_case(product::normalize(label)))
            {
                out.push(format!(
                    "{}={label} but NVML reports {}: GFD's labels predate a hardware change; restart gpu-feature-discovery on the node",
                    nvidia::GPU_PRODUCT,
                    names.join(", ")
                ));
            }
        }
        if let Field::Present(label) = &gfd.memory_mib {
            let mems: Vec<u64> = report.gpus.iter().filter_map(|g| g.memory_mib).collect();
            if !mems.is_empty() && !mems.contains(label) {
                out.push(format!(
                    "{}={label} but NVML reports {} MiB: GFD's labels predate a hardware change; restart gpu-feature-discovery on the node",
                    nvidia::GPU_MEMORY,
                    mems.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    if let Field::Present(label) = &gfd.compute {
        let ccs: Vec<MajorMinor> = report
            .gpus
            .iter()
            .filter_map(|g| g.compute_capability.as_deref())
            .filter_map(|c| MajorMinor::parse(c).ok())
            .collect();
        if !ccs.is_empty() && !ccs.contains(label) {
            out.push(format!(
                "{}/.minor say {label} but NVML reports {}: GFD's labels predate a hardware change; restart gpu-feature-discovery on the node",
                nvidia::GPU_COMPUTE_MAJOR,
                ccs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if let (Field::Present(label), Some(actual)) = (&gfd.driver, report.driver_version.as_deref())
        && let Ok(actual) = DriverVersion::parse(actual)
        && actual != *label
    {
        out.push(format!(
            "{}={label} but the loaded driver is {actual}: the labels predate a driver upgrade; restart gpu-feature-discovery on the node (and the device plugin)",
            nvidia::DRIVER_FULL
        ));
    }
    out
}

fn healthy_message(report: &ProbeReport, other_xids: &[String]) -> String {
    let mut models: Vec<(String, usize)> = Vec::new();
    for g in &report.gpus {
        let name = format!(
            "{}{}{}",
            g.name.as_deref().unwrap_or("GPU"),
            g.memory_mib
                .map(|m| format!(" {m} MiB"))
                .unwrap_or_default(),
            g.compute_capability
                .as_deref()
                .map(|c| format!(" compute {c}"))
                .unwrap_or_default()
        );
        match models.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => models.push((name, 1)),
        }
    }
    let gpus = models
        .iter()
        .map(|(n, c)| format!("{c}× {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut msg = format!(
        "NVML {}: {}; no uncorrectable ECC error, pending or failed row remapping",
        report
            .driver_version
            .as_deref()
            .map(|d| format!("driver {d}"))
            .unwrap_or_else(|| "answers".into()),
        if gpus.is_empty() {
            "no GPU details".into()
        } else {
            gpus
        }
    );
    if report.events.monitored {
        msg.push_str(", or fatal XID since the probe started");
    } else {
        msg.push_str(&format!(
            "; XIDs not monitored{}",
            report
                .events
                .error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
    }
    if !other_xids.is_empty() {
        msg.push_str(&format!("; non-fatal XIDs seen: {}", other_xids.join(", ")));
    }
    msg
}
