//! The probe's compute check judged against the profile's `probe.computeCheck`:
//! a failure, a skipped or stale check, and the note a passed one leaves.

use gpuready_api::keys::health_reasons as r;
use gpuready_api::probe::{ComputeCheck, ComputeOutcome, ComputeStack, ProbeReport};
use gpuready_api::profile::{ComputeCheckRules, ProbeExpectation, ProbePolicy};
use jiff::Timestamp;

use crate::report::Status;

use super::findings::{Findings, rank};
use super::gpus::{device_node_findings, fabric_finding, gpu_id};

/// What the v2 fields (device nodes, fabric, compute check) add: findings that
/// gate, and notes for the Ready message (a skipped or stale check the profile
/// ignores). A v1 report has none of these fields and gets neither.
pub(super) fn compute_findings(
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

/// How a skipped or a stale check is judged where its policy gates: the
/// finding's rank and reason, and what the gating asks for. Named once per
/// case so both share `gate_or_note` without repeating its arguments.
struct CheckGate {
    rank: u8,
    reason: &'static str,
    gated: &'static str,
}

/// `probe.computeCheck.whenSkipped`.
const SKIPPED: CheckGate = CheckGate {
    rank: rank::COMPUTE_SKIPPED,
    reason: r::COMPUTE_CHECK_SKIPPED,
    gated: "the profile's probe.computeCheck.whenSkipped gates on it: free the GPUs (drain the node) or let the check run when they are idle",
};

/// `probe.computeCheck.whenStale`.
const STALE: CheckGate = CheckGate {
    rank: rank::COMPUTE_STALE,
    reason: r::COMPUTE_CHECK_STALE,
    gated: "the profile's probe.computeCheck.whenStale gates on it: let the check run again (idle GPUs, or drain the node)",
};

/// No compute check has run: a finding where `whenSkipped` gates on it, a
/// note otherwise.
fn skipped_finding(cr: &ComputeCheckRules, skip_text: Option<&str>, out: &mut Findings) {
    let message = format!(
        "no compute check has run on this node's GPUs{}",
        skip_suffix(": ", skip_text)
    );
    gate_or_note(out, cr.when_skipped, &SKIPPED, message);
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
        skip_suffix("; ", skip_text)
    );
    gate_or_note(out, cr.when_stale, &STALE, message);
}

/// Why the probe skipped the check (`skip_text`) after `sep`, or nothing:
/// every compute-check message ends with it alike.
fn skip_suffix(sep: &str, skip_text: Option<&str>) -> String {
    skip_text.map(|t| format!("{sep}{t}")).unwrap_or_default()
}

/// `message` as a finding (`gate`'s rank and reason) where `policy` gates on
/// it, with what the gating asks for; only a note where it is Ignore. A
/// skipped and a stale check are judged alike, each by its own policy.
fn gate_or_note(out: &mut Findings, policy: ProbePolicy, gate: &CheckGate, message: String) {
    match policy_status(policy) {
        Some(status) => out.gate(
            gate.rank,
            gate.reason,
            format!("{message}; {}", gate.gated),
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
    note.push_str(&skip_suffix("; ", skip_text));
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
