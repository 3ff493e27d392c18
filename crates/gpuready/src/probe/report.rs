//! One report assembled: what NVML gave (nothing when it is unusable), the
//! host's IMEX files, and the compute check run first when it is due. Shared
//! by `--once` and the long-running agent.

use std::time::Duration;

use gpuready_api::probe::{
    ComputeTrigger, EventLog, NvmlState, PROBE_REPORT_API_VERSION, ProbeReport,
};
use jiff::Timestamp;

use super::compute::{self, ComputeCheckMode, Memory, Settings};
use super::{imex, nvml};

/// The compute check's settings and what the probe remembers of it; `once`:
/// `--once`, where the check is due at once and no minimum interval applies.
pub struct Checker {
    pub settings: Settings,
    pub memory: Memory,
    pub once: bool,
}

/// Assembles a report from what NVML gave (nothing when it is unusable) and,
/// with a host root, the host's IMEX files, and runs the compute check first
/// when it is due and allowed (`once`: due now).
#[allow(clippy::too_many_arguments)]
pub fn build_report(
    node: Option<&str>,
    host_root: Option<&std::path::Path>,
    started: Timestamp,
    state: NvmlState,
    nvml: Option<&nvml_wrapper::Nvml>,
    events: EventLog,
    checker: &mut Checker,
    request: Option<String>,
) -> ProbeReport {
    let Checker {
        settings,
        memory,
        once,
    } = checker;
    let (settings, once) = (&*settings, *once);
    let snap = nvml.map(nvml::snapshot);
    let (driver_version, cuda_driver_version, device_count, mut gpus, minors) = match snap {
        Some(s) => (
            s.driver_version,
            s.cuda_driver_version,
            s.device_count,
            s.gpus,
            s.minors,
        ),
        None => (None, None, None, Vec::new(), Vec::new()),
    };
    let boot_id = compute::boot_id();
    let mut device_nodes = Vec::new();
    if settings.mode == ComputeCheckMode::Auto {
        device_nodes = compute::device_nodes(&minors);
        let now = Timestamp::now();
        let stack = compute::stack(driver_version.as_deref(), boot_id.as_deref(), &gpus);
        let trigger = if once {
            Some(ComputeTrigger::Once)
        } else {
            compute::due(memory, &stack, request.as_deref(), now, settings.every)
        };
        if let Some(trigger) = trigger {
            let min = if once {
                Duration::ZERO
            } else {
                settings.min_interval
            };
            match compute::blocker(state.usable, &gpus, memory, now, min) {
                None => {
                    tracing::info!(?trigger, "running the compute check");
                    compute::run(settings, memory, trigger, stack, request);
                }
                Some((reason, message)) => {
                    tracing::info!(?trigger, ?reason, "compute check due but skipped");
                    compute::note_skip(memory, trigger, reason, message, now);
                }
            }
        } else {
            memory.skipped = None;
        }
    }
    let compute_check = Some(compute::report_fields(settings, memory, &mut gpus));
    ProbeReport {
        api_version: PROBE_REPORT_API_VERSION.to_owned(),
        node: node.map(str::to_owned),
        generated_at: Timestamp::now().to_string(),
        probe_started_at: started.to_string(),
        probe_version: env!("CARGO_PKG_VERSION").to_owned(),
        nvml: state,
        driver_version,
        cuda_driver_version,
        device_count,
        gpus,
        events,
        boot_id,
        device_nodes,
        compute_check,
        imex: host_root.map(imex::read),
        paused: None,
    }
}
