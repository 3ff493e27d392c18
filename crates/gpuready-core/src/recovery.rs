//! NVML's GPU recovery action (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`) in the
//! words a person acts on: the reason and what to do. Shared by the Health
//! layer (the node) and device gating (the GPU's DeviceTaintRule), so both
//! say the same thing for the same reading; the one action at the fabric's
//! scope, RECOVER_IMEX_DOMAIN, is the Fabric layer's (and a note in Health's).

use gpuready_api::keys::health_reasons as hr;
use gpuready_api::probe::{GpuState, ProbeReport, RecoveryAction};

/// The Health reason and the words for a GPU recovery action NVML reports
/// (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`); `None` when it asks for nothing,
/// the driver does not answer it, or it is RECOVER_IMEX_DOMAIN: that one
/// names the GPU's IMEX domain, not the GPU, and the NVIDIA DRA driver keeps
/// scheduling the GPU under it, so it is judged at the fabric's scope
/// ([`imex_domain_gpus`]), never as a fault of the GPU or the node.
pub fn finding(action: RecoveryAction) -> Option<(&'static str, &'static str)> {
    Some(match action {
        RecoveryAction::None | RecoveryAction::NotSupported => return None,
        RecoveryAction::RecoverImexDomain => return None,
        RecoveryAction::GpuReset => (
            hr::GPU_RESET_REQUIRED,
            "GPU_RESET: drain the GPU's workloads and reset it (nvidia-smi -r -i <index>), or reboot the node",
        ),
        RecoveryAction::NodeReboot => (
            hr::NODE_REBOOT_REQUIRED,
            "NODE_REBOOT: a GPU reset is not enough (the fault may have left the OS inconsistent): drain the node and reboot it",
        ),
        RecoveryAction::DrainP2p => (
            hr::DRAIN_REQUIRED,
            "DRAIN_P2P: stop the workloads' peer-to-peer and NVLink traffic on the GPU (drain them); the driver then names the next action",
        ),
        RecoveryAction::DrainAndReset => (
            hr::DRAIN_AND_RESET_REQUIRED,
            "DRAIN_AND_RESET: the GPU runs at reduced capacity; running work is safe, new work waits: let it reach a checkpoint, drain, then reset the GPU",
        ),
        RecoveryAction::BusReset => (
            hr::BUS_RESET_REQUIRED,
            "BUS_RESET: a reset of the GPU alone is not enough, the GPU's PCIe bus must be reset: drain the GPU's workloads, then reset its PCIe bus, or reboot the node (a reboot resets the bus)",
        ),
        RecoveryAction::SystemReboot => (
            hr::SYSTEM_REBOOT_REQUIRED,
            "SYSTEM_REBOOT: the driver asks for the system to be rebooted (an action of its own, beside NODE_REBOOT): drain the node and reboot it; if the probe still reports the action after the reboot, power-cycle the system",
        ),
        RecoveryAction::Unknown => (
            hr::RECOVERY_ACTION_REQUIRED,
            "a value this gpuready does not know (see the GPU's errors in the probe report): read nvidia-smi -q on the node",
        ),
    })
}

/// What to do when a GPU's recovery action is RECOVER_IMEX_DOMAIN.
pub const IMEX_DOMAIN_WHAT_TO_DO: &str = "RECOVER_IMEX_DOMAIN: the GPU's IMEX domain needs recovery, not the GPU: work on this node's GPUs alone is unaffected (the NVIDIA DRA driver keeps scheduling them), multi-node jobs sharing GPU memory through the domain are affected until it recovers; to recover the IMEX domain, check the IMEX daemons of the domain's nodes (the host's nvidia-imex.service, or the ComputeDomain's daemon pods of the NVIDIA DRA driver) and their logs, and nvidia-fabricmanager";

/// The GPUs whose recovery action is RECOVER_IMEX_DOMAIN, by index and UUID.
pub fn imex_domain_gpus(report: &ProbeReport) -> Vec<String> {
    report
        .gpus
        .iter()
        .filter(|g| g.recovery_action == Some(RecoveryAction::RecoverImexDomain))
        .map(gpu_name)
        .collect()
}

fn gpu_name(g: &GpuState) -> String {
    match &g.uuid {
        Some(u) => format!("GPU {} ({u})", g.index),
        None => format!("GPU {}", g.index),
    }
}
