//! The Health layer: the report of `gpuready probe` (NVML read on the node)
//! judged against the profile and cross-checked with GFD's labels. Pure: the
//! report is an input, time is an input.

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::keys::health_reasons as r;
use gpuready_api::keys::nvidia;
use gpuready_api::probe::{
    ComputeCheck, ComputeOutcome, ComputeStack, EventKind, FabricPhase, GpuState, ProbeReport,
    RecoveryAction,
};
use gpuready_api::profile::{ComputeCheckRules, DEFAULT_FATAL_XIDS, ProbeExpectation, ProbePolicy};
use jiff::Timestamp;

use crate::facts::NodeFacts;
use crate::field::Field;
// The report as an input lives in `probe`; it is re-exported here, where
// callers have always found it.
pub use crate::probe::{ProbeEvidence, ReportError, parse_report};
use crate::product;
use crate::report::Status;
use crate::version::{DriverVersion, MajorMinor};

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
    // Paused while the node is in maintenance: expected, whatever its age (a
    // probe pod the DaemonSet controller removed published it on its way out).
    let maintenance = crate::lifecycle::gpu_clients_paused(&facts.labels);
    if let Some(pause) = &report.paused
        && !maintenance.is_empty()
    {
        return Some(verdict(
            Status::Unknown,
            r::PROBE_PAUSED,
            format!(
                "the probe released the GPUs at {} because the node is in maintenance ({}): it holds no NVML handle, so the driver can unload and MIG can change; it reads the GPUs again when the maintenance ends",
                pause.since,
                maintenance.join(", ")
            ),
        ));
    }
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
    // Paused outside maintenance: the maintenance just ended and the probe
    // has not resumed yet (or disagrees). Never healthy: Unknown until a fresh
    // report, stale like any other report once it passes the limit.
    if let Some(pause) = &report.paused {
        let mut v = verdict(
            Status::Unknown,
            r::PROBE_PAUSED,
            format!(
                "the probe's report says it released the GPUs at {} for maintenance ({}), but the node is in maintenance no more: the GPUs are not judged until the probe reads them again, which it does within one interval of seeing the node back (a probe pod the DaemonSet controller removed is recreated first); if it stays so, look at the probe pod on this node",
                pause.since,
                if pause.labels.is_empty() {
                    "no label named".to_owned()
                } else {
                    pause.labels.join(", ")
                }
            ),
        );
        v.recheck_after_seconds = recheck;
        return Some(v);
    }
    let mut v = judge_report(spec, rules, facts, report, now);
    v.recheck_after_seconds = match (recheck, compute_recheck(rules, report, now)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Some(v)
}

/// Seconds until the latest compute check passes `maxAgeSeconds`, when the
/// profile judges its age: the controller schedules a re-check then.
fn compute_recheck(rules: &ProbeExpectation, report: &ProbeReport, now: Timestamp) -> Option<u64> {
    let cc = rules.compute_check.as_ref()?;
    if cc.max_age_seconds == 0 || cc.when_stale == ProbePolicy::Ignore {
        return None;
    }
    let ran = report
        .compute_check
        .as_ref()?
        .ran_at
        .as_deref()?
        .parse::<Timestamp>()
        .ok()?;
    let left = i64::from(cc.max_age_seconds) - (now.as_second() - ran.as_second());
    (left >= 0).then(|| u64::try_from(left + 1).unwrap_or(1))
}

/// A problem found in a fresh report, in the order of the reason it gives.
struct Finding {
    rank: u8,
    reason: &'static str,
    message: String,
    /// NotReady for faults; Unknown where the profile says a skipped or stale
    /// compute check is `Unknown`.
    status: Status,
}

/// Ranks: the first finding's reason names the verdict. Missing GPUs and device
/// nodes, the fabric and CUDA's initialisation explain everything after them.
mod rank {
    pub const GPUS_MISSING: u8 = 0;
    pub const DEVICE_NODE: u8 = 1;
    pub const FABRIC: u8 = 2;
    pub const CUDA_INIT: u8 = 3;
    /// The driver's own verdict on what a GPU needs says what to do best.
    pub const RECOVERY_ACTION: u8 = 4;
    pub const ECC: u8 = 5;
    pub const REMAP_FAILED: u8 = 6;
    pub const REMAP_PENDING: u8 = 7;
    pub const FATAL_XID: u8 = 8;
    pub const COMPUTE_MISMATCH: u8 = 9;
    pub const COMPUTE_FAILED: u8 = 10;
    pub const LABELS: u8 = 11;
    pub const COMPUTE_STALE: u8 = 12;
    pub const COMPUTE_SKIPPED: u8 = 13;
}

/// The findings of a fresh report in the order they were found (the sort by
/// rank is stable, so that order breaks ties), and the notes for a Ready
/// message.
#[derive(Default)]
struct Findings {
    found: Vec<Finding>,
    notes: Vec<String>,
}

impl Findings {
    /// A fault: NotReady whatever the profile says.
    fn fault(&mut self, rank: u8, reason: &'static str, message: String) {
        self.gate(rank, reason, message, Status::NotReady);
    }

    /// A finding with the status the profile gives it.
    fn gate(&mut self, rank: u8, reason: &'static str, message: String, status: Status) {
        self.found.push(Finding {
            rank,
            reason,
            message,
            status,
        });
    }

    /// Healthy with the notes when nothing was found; otherwise the first
    /// ranked finding's reason, NotReady when any finding is a fault, and
    /// every finding's message in rank order.
    fn verdict(mut self, report: &ProbeReport, other_xids: &[String]) -> HealthVerdict {
        if self.found.is_empty() {
            let mut msg = healthy_message(report, other_xids);
            for n in &self.notes {
                msg.push_str("; ");
                msg.push_str(n);
            }
            return verdict(Status::Ready, r::PROBE_HEALTHY, msg);
        }
        self.found.sort_by_key(|f| f.rank);
        let reason = self.found[0].reason;
        let status = if self.found.iter().any(|f| f.status == Status::NotReady) {
            Status::NotReady
        } else {
            Status::Unknown
        };
        let message = self
            .found
            .iter()
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        verdict(status, reason, message)
    }
}

fn judge_report(
    spec: &GpuNodeProfileSpec,
    rules: &ProbeExpectation,
    facts: &NodeFacts,
    report: &ProbeReport,
    now: Timestamp,
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
    let mut findings = Findings::default();
    compute_findings(rules, report, now, &mut findings);
    count_findings(spec, facts, report, &mut findings);
    for gpu in &report.gpus {
        gpu_findings(gpu, &mut findings);
    }
    let other_xids = event_findings(rules, report, &mut findings);
    if rules.check_labels {
        for m in label_contradictions(facts, report) {
            findings.fault(rank::LABELS, r::LABELS_CONTRADICT_PROBE, m);
        }
    }
    findings.verdict(report, &other_xids)
}

/// GPU count: NVML's enumeration against the profile, GFD's label and NFD's
/// PCI scan. Under MIG the profile and GFD count slices while NVML counts
/// physical GPUs: those two are not compared.
fn count_findings(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    report: &ProbeReport,
    out: &mut Findings,
) {
    let mig = under_mig(facts, report);
    let seen = report
        .device_count
        .unwrap_or(u32::try_from(report.gpus.len()).unwrap_or(u32::MAX));
    if seen == 0 {
        out.fault(
            rank::GPUS_MISSING,
            r::GPUS_MISSING,
            "NVML initialised but enumerates no GPU: the driver lost its devices (XID 79?) or the container sees none; check nvidia-smi on the host".into(),
        );
    } else if let Some(want) = spec.gpu.count
        && !mig
        && seen < want
    {
        out.fault(
            rank::GPUS_MISSING,
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
        out.fault(
            rank::GPUS_MISSING,
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
        out.fault(
            rank::GPUS_MISSING,
            r::GPUS_MISSING,
            format!(
                "NVML sees {seen} GPU(s) but NFD finds {} NVIDIA GPU(s) on the PCI bus ({}): the driver lost or never initialised one; check the kernel log for XID 79 or a driver load error, then reboot or service the node",
                bus.gpus,
                bus.objects.join(", ")
            ),
        );
    }
}

/// One GPU's own state: the driver's recovery action, uncorrectable ECC
/// errors, row remapping and page retirement.
fn gpu_findings(gpu: &GpuState, out: &mut Findings) {
    let id = gpu_id(gpu);
    if let Some((reason, what)) = gpu.recovery_action.and_then(crate::recovery::finding) {
        out.fault(
            rank::RECOVERY_ACTION,
            reason,
            format!("{id}: the driver's recovery action is {what}"),
        );
    }
    if let Some(ecc) = &gpu.ecc
        && let Some(n) = ecc.volatile_uncorrectable
        && n > 0
    {
        out.fault(
            rank::ECC,
            r::UNCORRECTABLE_ECC,
            format!(
                "{id}: {n} uncorrectable ECC error(s) since the driver loaded: drain the node and reset the GPU (or reboot); if they come back, run field diagnostics and RMA"
            ),
        );
    }
    if let Some(rr) = &gpu.row_remapping {
        if rr.failure {
            out.fault(
                rank::REMAP_FAILED,
                r::ROW_REMAP_FAILED,
                format!(
                    "{id}: row remapping failed (no spare rows left): the memory is failing; take the GPU out of service and RMA it"
                ),
            );
        } else if rr.pending {
            out.fault(
                rank::REMAP_PENDING,
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
        out.fault(
            rank::REMAP_PENDING,
            r::ROW_REMAP_PENDING,
            format!(
                "{id}: a page retirement is pending: drain the node and reload the driver (reboot) to apply it"
            ),
        );
    }
}

/// The recorded events: double-bit ECC and the profile's fatal XIDs are
/// faults; the other XIDs are returned for the Ready message.
fn event_findings(
    rules: &ProbeExpectation,
    report: &ProbeReport,
    out: &mut Findings,
) -> Vec<String> {
    let fatal: &[u32] = rules.fatal_xids.as_deref().unwrap_or(DEFAULT_FATAL_XIDS);
    let mut other_xids = Vec::new();
    for e in &report.events.records {
        match (e.kind, e.xid) {
            (EventKind::DoubleBitEcc, _) => out.fault(
                rank::ECC,
                r::UNCORRECTABLE_ECC,
                format!(
                    "{}: {} double-bit ECC event(s) since {}: drain the node and reset the GPU (or reboot)",
                    e.gpu, e.count, e.first_seen
                ),
            ),
            (EventKind::Xid, Some(x)) if u32::try_from(x).is_ok_and(|x| fatal.contains(&x)) => out.fault(
                rank::FATAL_XID,
                r::FATAL_XID,
                format!(
                    "{}: XID {x} ×{} (first {}, last {}): {}; after fixing it, mark the repair on the Node (annotation gpuready.io/repaired-at, an RFC 3339 time) or restart the probe pod to clear the record",
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
    other_xids
}

/// What the v2 fields (device nodes, fabric, compute check) add: findings that
/// gate, and notes for the Ready message (a skipped or stale check the profile
/// ignores). A v1 report has none of these fields and gets neither.
fn compute_findings(
    rules: &ProbeExpectation,
    report: &ProbeReport,
    now: Timestamp,
    out: &mut Findings,
) {
    device_node_findings(report, out);
    for gpu in &report.gpus {
        fabric_finding(gpu, out);
    }
    let Some(cc) = &report.compute_check else {
        return;
    };
    let defaults = ComputeCheckRules::default();
    let cr = rules.compute_check.as_ref().unwrap_or(&defaults);
    let ran = cc.ran_at.as_deref().unwrap_or("an unknown time");
    if cc.outcome == ComputeOutcome::Failed {
        compute_failures(cc, report, ran, out);
    }
    let skip_text = cc.skipped.as_ref().map(|s| {
        format!(
            "{} check skipped since {} ({:?}): {}",
            trigger_name(s.due),
            s.since,
            s.reason,
            s.message
        )
    });
    let skip_text = skip_text.as_deref();
    match cc.outcome {
        ComputeOutcome::Skipped => skipped_finding(cr, skip_text, out),
        ComputeOutcome::Disabled => out
            .notes
            .push("the compute check is switched off in the probe".into()),
        ComputeOutcome::Passed | ComputeOutcome::Failed => {
            let stale = stale_because(cr, report, cc.stack.as_ref(), cc.ran_at.as_deref(), now);
            if let Some(why) = stale {
                stale_finding(cr, ran, &why, skip_text, out);
            } else if cc.outcome == ComputeOutcome::Passed {
                out.notes.push(passed_note(cc, report, ran, skip_text));
            }
        }
    }
}

/// Device nodes missing in the probe's container. /dev/nvidia-uvm-tools
/// serves profilers and debuggers: on the H200 a check passed without it
/// (libcuda re-created only nvidia-uvm), so its absence alone is a note, not
/// a fault.
fn device_node_findings(report: &ProbeReport, out: &mut Findings) {
    const TOOLS: &str = "/dev/nvidia-uvm-tools";
    let missing: Vec<&str> = report
        .device_nodes
        .iter()
        .filter(|d| !d.present)
        .map(|d| d.path.as_str())
        .collect();
    if missing == [TOOLS] {
        out.notes.push(format!(
            "{TOOLS} is missing (CUDA runs without it; profilers and debuggers need it)"
        ));
    } else if !missing.is_empty() {
        let uvm = missing.iter().any(|p| p.starts_with("/dev/nvidia-uvm"));
        out.fault(
            rank::DEVICE_NODE,
            r::DEVICE_NODE_MISSING,
            format!(
                "device node(s) missing in the probe's container: {}: {}",
                missing.join(", "),
                if uvm {
                    "CUDA needs /dev/nvidia-uvm (the nvidia-uvm kernel module): on the host run `modprobe nvidia-uvm` (or nvidia-modprobe -u -c=0) and check the driver installation creates the node at boot; then restart the probe pod"
                } else {
                    "the container runtime did not inject the GPU's device nodes: check the RuntimeClass (nvidia), the NVIDIA container toolkit and that the driver is loaded (nvidia-smi on the host)"
                }
            ),
        );
    }
}

/// A GPU's NVSwitch fabric registration, when NVML reports a fabric: it must
/// have completed with success.
fn fabric_finding(gpu: &GpuState, out: &mut Findings) {
    let Some(f) = &gpu.fabric else { return };
    let id = gpu_id(gpu);
    match f.state {
        FabricPhase::Completed => {
            if let Some(status) = f.status.as_deref()
                && status != "Success"
            {
                out.fault(
                    rank::FABRIC,
                    r::FABRIC_NOT_READY,
                    format!(
                        "{id}: NVSwitch fabric registration failed ({status}): check nvidia-fabricmanager on the node (systemctl status nvidia-fabricmanager, its log) and the NVSwitches; CUDA returns CUDA_ERROR_SYSTEM_NOT_READY until it succeeds"
                    ),
                );
            }
        }
        phase => out.fault(
            rank::FABRIC,
            r::FABRIC_NOT_READY,
            format!(
                "{id}: NVSwitch fabric registration {}: start or fix nvidia-fabricmanager (its version must equal the driver's); CUDA returns CUDA_ERROR_SYSTEM_NOT_READY until the fabric is up",
                if phase == FabricPhase::InProgress {
                    "still in progress"
                } else {
                    "not started"
                }
            ),
        ),
    }
}

/// A failed compute check: CUDA's initialisation, then each GPU that
/// computed wrongly or failed a CUDA step.
fn compute_failures(cc: &ComputeCheck, report: &ProbeReport, ran: &str, out: &mut Findings) {
    if let Some(e) = &cc.error {
        out.fault(
            rank::CUDA_INIT,
            r::CUDA_INIT_FAILED,
            format!(
                "CUDA {} failed with {} ({}){} in the compute check at {ran}: {}",
                e.step,
                e.name,
                e.code,
                e.detail
                    .as_deref()
                    .map(|d| format!(" [{d}]"))
                    .unwrap_or_default(),
                cuda_action(&e.name)
            ),
        );
    }
    for gpu in &report.gpus {
        let Some(g) = &gpu.compute else { continue };
        if g.outcome != ComputeOutcome::Failed {
            continue;
        }
        let id = gpu_id(gpu);
        if let Some(m) = &g.mismatch {
            out.fault(
                rank::COMPUTE_MISMATCH,
                r::COMPUTE_MISMATCH,
                format!(
                    "{id}: wrong data in the compute check at {ran} ({m}): the GPU computes wrongly; drain the node, reset the GPU (nvidia-smi -r) or reboot, and if it recurs run field diagnostics (dcgmi diag -r 3) and RMA"
                ),
            );
        } else if let Some(e) = &g.error {
            out.fault(
                rank::COMPUTE_FAILED,
                r::COMPUTE_CHECK_FAILED,
                format!(
                    "{id}: CUDA {} failed with {} ({}) in the compute check at {ran}: {}",
                    e.step,
                    e.name,
                    e.code,
                    cuda_action(&e.name)
                ),
            );
        }
    }
}

/// The status a compute-check policy gives a skipped or stale check; `None`
/// (Ignore): only a note.
fn policy_status(policy: ProbePolicy) -> Option<Status> {
    match policy {
        ProbePolicy::Ignore => None,
        ProbePolicy::Unknown => Some(Status::Unknown),
        ProbePolicy::Blocking => Some(Status::NotReady),
    }
}

/// No compute check has run: a finding where `whenSkipped` gates on it, a
/// note otherwise.
fn skipped_finding(cr: &ComputeCheckRules, skip_text: Option<&str>, out: &mut Findings) {
    let message = format!(
        "no compute check has run on this node's GPUs{}",
        skip_text.map(|t| format!(": {t}")).unwrap_or_default()
    );
    match policy_status(cr.when_skipped) {
        Some(status) => out.gate(
            rank::COMPUTE_SKIPPED,
            r::COMPUTE_CHECK_SKIPPED,
            format!(
                "{message}; the profile's probe.computeCheck.whenSkipped gates on it: free the GPUs (drain the node) or let the check run when they are idle"
            ),
            status,
        ),
        None => out.notes.push(message),
    }
}

/// The latest check no longer vouches for the node (`why`): a finding where
/// `whenStale` gates on it, a note otherwise.
fn stale_finding(
    cr: &ComputeCheckRules,
    ran: &str,
    why: &str,
    skip_text: Option<&str>,
    out: &mut Findings,
) {
    let message = format!(
        "the compute check of {ran} is stale: {why}{}",
        skip_text.map(|t| format!("; {t}")).unwrap_or_default()
    );
    match policy_status(cr.when_stale) {
        Some(status) => out.gate(
            rank::COMPUTE_STALE,
            r::COMPUTE_CHECK_STALE,
            format!(
                "{message}; the profile's probe.computeCheck.whenStale gates on it: let the check run again (idle GPUs, or drain the node)"
            ),
            status,
        ),
        None => out.notes.push(message),
    }
}

/// The Ready message's note for a fresh check that passed.
fn passed_note(
    cc: &ComputeCheck,
    report: &ProbeReport,
    ran: &str,
    skip_text: Option<&str>,
) -> String {
    let timing = cc
        .millis
        .map(|m| format!(" in {m:.0} ms"))
        .unwrap_or_default();
    let mut note = format!(
        "CUDA compute check passed at {ran}{timing} on {} GPU(s)",
        report
            .gpus
            .iter()
            .filter(|g| g
                .compute
                .as_ref()
                .is_some_and(|c| c.outcome == ComputeOutcome::Passed))
            .count()
    );
    if let Some(t) = skip_text {
        note.push_str(&format!("; {t}"));
    }
    note
}

/// Why the latest check no longer vouches for the node: the stack changed
/// since it ran, or it is older than the profile's `maxAgeSeconds`.
fn stale_because(
    rules: &ComputeCheckRules,
    report: &ProbeReport,
    ran_on: Option<&ComputeStack>,
    ran_at: Option<&str>,
    now: Timestamp,
) -> Option<String> {
    if let Some(s) = ran_on {
        if let (Some(then), Some(now)) = (&s.driver_version, &report.driver_version)
            && then != now
        {
            return Some(format!("the driver changed from {then} to {now} since"));
        }
        if let (Some(then), Some(now)) = (&s.boot_id, &report.boot_id)
            && then != now
        {
            return Some("the node rebooted since (boot ID changed)".into());
        }
        let mut current: Vec<&str> = report
            .gpus
            .iter()
            .filter_map(|g| g.uuid.as_deref())
            .collect();
        current.sort_unstable();
        if !current.is_empty() && current != s.gpus.iter().map(String::as_str).collect::<Vec<_>>() {
            return Some("the set of GPUs changed since".into());
        }
    }
    if rules.max_age_seconds > 0
        && let Some(ran) = ran_at.and_then(|t| t.parse::<Timestamp>().ok())
        && now.as_second() - ran.as_second() > i64::from(rules.max_age_seconds)
    {
        return Some(format!(
            "older than probe.computeCheck.maxAgeSeconds ({}s)",
            rules.max_age_seconds
        ));
    }
    None
}

fn trigger_name(t: gpuready_api::probe::ComputeTrigger) -> &'static str {
    use gpuready_api::probe::ComputeTrigger as T;
    match t {
        T::FirstCheck => "the first",
        T::DriverChanged => "a driver-change",
        T::BootChanged => "a reboot",
        T::GpuSetChanged => "a GPU-set-change",
        T::Requested => "a requested",
        T::Periodic => "the periodic",
        T::Once => "the --once",
    }
}

/// What to do about a CUDA error of the compute check (NVIDIA's CUresult
/// documentation and the failures the GPU operator's validator meets).
fn cuda_action(name: &str) -> &'static str {
    match name {
        "CUDA_LIBRARY_UNAVAILABLE" => {
            "the probe's container has no libcuda.so.1: run it with NVIDIA_DRIVER_CAPABILITIES including compute (the chart sets compute,utility) under the nvidia RuntimeClass, and check the driver's user-space libraries on the host"
        }
        "CUDA_CHECK_TIMEOUT" => {
            "the compute check hung: a GPU or the driver does not answer; check the kernel log for XIDs, drain the node and reset the GPU or reboot"
        }
        "CUDA_CHECK_CRASHED" => {
            "the check's process died: killed by signal 9 it most likely hit the probe's memory limit (libcuda needs about 200 MB; raise probe.resources.limits.memory); otherwise a driver older than the probe's CUDA bindings (its stderr line is in the detail)"
        }
        "CUDA_CHECK_NOT_STARTED" => {
            "the probe could not start its check process: see the detail; the probe's image or its read-only root"
        }
        "CUDA_ERROR_SYSTEM_NOT_READY" => {
            "the system is not ready for CUDA: on NVSwitch systems nvidia-fabricmanager is down or still starting (systemctl status nvidia-fabricmanager; its version must equal the driver's)"
        }
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" => {
            "the kernel driver and the user-space libraries (libcuda) differ in version: reinstall the driver consistently or reboot after an upgrade"
        }
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" => {
            "a CUDA forward-compatibility package is in use on a GPU that does not support it: remove the cuda-compat libraries from the library path or upgrade the driver"
        }
        "CUDA_ERROR_NO_DEVICE" => {
            "CUDA sees no GPU although NVML does: check /dev/nvidia-uvm and the device nodes, CUDA_VISIBLE_DEVICES and the container runtime"
        }
        "CUDA_ERROR_INSUFFICIENT_DRIVER" => {
            "the driver is older than the CUDA library in use: upgrade the driver"
        }
        "CUDA_ERROR_UNKNOWN" | "CUDA_ERROR_NOT_INITIALIZED" => {
            "often a missing or stale /dev/nvidia-uvm (nvidia-uvm module not loaded): modprobe nvidia-uvm on the host, then restart the probe pod; otherwise the kernel log (dmesg) says why"
        }
        "CUDA_ERROR_DEVICES_UNAVAILABLE" | "CUDA_ERROR_DEVICE_UNAVAILABLE" => {
            "the GPU is in an exclusive compute mode and busy, or unavailable: check nvidia-smi -q (Compute Mode) and the processes on it"
        }
        "CUDA_ERROR_OUT_OF_MEMORY" => {
            "the GPU could not give a few MiB: a workload holds its memory, or the memory is faulty (check ECC and row remapping)"
        }
        "CUDA_ERROR_ECC_UNCORRECTABLE" => {
            "uncorrectable ECC error: drain the node and reset the GPU (or reboot); recurring: RMA"
        }
        "CUDA_ERROR_LAUNCH_FAILED"
        | "CUDA_ERROR_ILLEGAL_ADDRESS"
        | "CUDA_ERROR_HARDWARE_STACK_ERROR"
        | "CUDA_ERROR_ILLEGAL_INSTRUCTION"
        | "CUDA_ERROR_LAUNCH_TIMEOUT" => {
            "the GPU could not run a trivial kernel: drain the node, reset the GPU (nvidia-smi -r) or reboot; check the kernel log for XIDs"
        }
        "CUDA_ERROR_INVALID_PTX"
        | "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
        | "CUDA_ERROR_JIT_COMPILER_NOT_FOUND" => {
            "the driver could not JIT-compile the probe's PTX: the driver's JIT (libnvidia-ptxjitcompiler) is missing from the container, or the driver is too old"
        }
        _ => {
            "see NVIDIA's CUDA driver API documentation for this CUresult; drain the node and reset the GPU if it persists"
        }
    }
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
    // The recovery action, where the probe read it: none needed, or a driver
    // that does not answer (then sticky faults rest on XIDs alone).
    let actions: Vec<RecoveryAction> = report
        .gpus
        .iter()
        .filter_map(|g| g.recovery_action)
        .collect();
    if !actions.is_empty() {
        if actions.iter().all(|a| *a == RecoveryAction::None) {
            msg.push_str("; NVML recovery action: none needed");
        } else if actions.contains(&RecoveryAction::NotSupported) {
            msg.push_str("; NVML recovery action: not supported by this driver or GPU");
        }
    }
    // RECOVER_IMEX_DOMAIN is the fabric's business (the Fabric layer of a
    // profile with `fabric` judges it); here it is said, never judged.
    let imex = crate::recovery::imex_domain_gpus(report);
    if !imex.is_empty() {
        msg.push_str(&format!(
            "; NVML recovery action on {}: {} (not a fault of the GPU: judged by the Fabric layer of profiles with spec.fabric)",
            imex.join(", "),
            crate::recovery::IMEX_DOMAIN_WHAT_TO_DO
        ));
    }
    msg
}
