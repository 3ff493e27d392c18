//! NVML's GPU recovery action (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`) in the
//! words a person acts on: the reason and what to do. Shared by the Health
//! layer (the node) and device gating (the GPU's DeviceTaintRule), so both
//! say the same thing for the same reading.

use gpuready_api::keys::health_reasons as hr;
use gpuready_api::probe::RecoveryAction;

/// The Health reason and the words for a GPU recovery action NVML reports
/// (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`); `None` when it asks for nothing or
/// the driver does not answer it.
pub fn finding(action: RecoveryAction) -> Option<(&'static str, &'static str)> {
    Some(match action {
        RecoveryAction::None | RecoveryAction::NotSupported => return None,
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
        RecoveryAction::Unknown => (
            hr::RECOVERY_ACTION_REQUIRED,
            "a value this gpuready does not know (see the GPU's errors in the probe report): read nvidia-smi -q on the node",
        ),
    })
}
