//! What the probe report says of the GPUs themselves: how many NVML sees, each
//! GPU's own state and fabric, its device nodes, the XID events, and where
//! GFD's labels contradict NVML.

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::keys::health_reasons as r;
use gpuready_api::keys::nvidia;
use gpuready_api::probe::{EventKind, FabricPhase, GpuState, ProbeReport};
use gpuready_api::profile::{DEFAULT_FATAL_XIDS, ProbeExpectation};

use crate::facts::NodeFacts;
use crate::field::Field;
use crate::product;
use crate::version::{DriverVersion, MajorMinor};

use super::findings::{Findings, rank};

/// GPU count: NVML's enumeration against the profile, GFD's label and NFD's
/// PCI scan. Under MIG the profile and GFD count slices while NVML counts
/// physical GPUs: those two are not compared.
pub(super) fn count_findings(
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
pub(super) fn gpu_findings(gpu: &GpuState, out: &mut Findings) {
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
pub(super) fn event_findings(
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

/// Device nodes missing in the probe's container. /dev/nvidia-uvm-tools
/// serves profilers and debuggers: on the H200 a check passed without it
/// (libcuda re-created only nvidia-uvm), so its absence alone is a note, not
/// a fault.
pub(super) fn device_node_findings(report: &ProbeReport, out: &mut Findings) {
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
pub(super) fn fabric_finding(gpu: &GpuState, out: &mut Findings) {
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

pub(super) fn gpu_id(gpu: &gpuready_api::probe::GpuState) -> String {
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
pub(super) fn label_contradictions(facts: &NodeFacts, report: &ProbeReport) -> Vec<String> {
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
