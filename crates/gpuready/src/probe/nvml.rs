//! Reading the GPUs through NVML (`nvml-wrapper`, which loads libnvidia-ml at run
//! time): one snapshot per report, and a thread that records critical events.
//! The fabric state is read through nvml-wrapper's own library handle with
//! the raw binding (`nvml-wrapper-sys`), the one call it does not wrap.

use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use gpuready_api::probe::{
    EccState, EventKind, EventLog, EventRecord, FabricPhase, FabricState, GpuState,
    MAX_EVENT_RECORDS, NvmlState, RecoveryAction, RetiredPages, RowRemapping,
};
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::ComputeMode;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, RetirementCause};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper::structs::device::FieldId;
use tokio::sync::watch;

use super::urgent;

/// Where NVML is looked for, in order, when no `--nvml-library` is given. Drivers
/// install only the versioned `libnvidia-ml.so.1` (the unversioned name comes
/// with development packages), so it is tried first; the absolute paths are
/// where GKE (`/usr/local/nvidia`) and the GPU operator's driver container
/// (`/run/nvidia/driver`) put it when the loader's path does not include them.
pub const NVML_CANDIDATES: &[&str] = &[
    "libnvidia-ml.so.1",
    "libnvidia-ml.so",
    "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
    "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1",
];

/// Loads and initialises NVML from the first candidate that works. On failure
/// the error names every candidate tried and why it failed.
pub fn init(explicit: Option<&OsStr>) -> (Option<Nvml>, NvmlState) {
    let candidates: Vec<&OsStr> = match explicit {
        Some(p) => vec![p],
        None => NVML_CANDIDATES.iter().map(OsStr::new).collect(),
    };
    let mut errors = Vec::new();
    for c in candidates {
        match Nvml::builder().lib_path(c).init() {
            Ok(nvml) => {
                let state = NvmlState {
                    usable: true,
                    library: Some(c.to_string_lossy().into_owned()),
                    version: nvml.sys_nvml_version().ok(),
                    error: None,
                };
                return (Some(nvml), state);
            }
            Err(e) => errors.push(describe(c, &e)),
        }
    }
    (
        None,
        NvmlState {
            usable: false,
            library: None,
            version: None,
            error: Some(errors.join("; ")),
        },
    )
}

fn describe(library: &OsStr, e: &NvmlError) -> String {
    match e {
        // libloading's message is dlerror(), which already names the file
        // ("libnvidia-ml.so.1: cannot open shared object file").
        NvmlError::LibloadingError(inner) => inner.to_string(),
        other => format!("{}: {other}", library.to_string_lossy()),
    }
}

/// What one snapshot reads apart from the per-GPU state.
pub struct Snapshot {
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub device_count: Option<u32>,
    pub gpus: Vec<GpuState>,
    /// (NVML index, device minor number) of each GPU whose minor NVML gave.
    pub minors: Vec<(u32, u32)>,
}

/// Reads every GPU. A query a GPU does not support leaves its field empty; any
/// other failure is recorded in the GPU's `errors`, never fatal to the report.
pub fn snapshot(nvml: &Nvml) -> Snapshot {
    let cuda = nvml
        .sys_cuda_driver_version()
        .ok()
        .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
    let count = nvml.device_count().ok();
    let mut gpus = Vec::new();
    let mut minors = Vec::new();
    for i in 0..count.unwrap_or(0) {
        let (g, minor) = gpu(nvml, i);
        if let Some(m) = minor {
            minors.push((i, m));
        }
        gpus.push(g);
    }
    Snapshot {
        driver_version: nvml.sys_driver_version().ok(),
        cuda_driver_version: cuda,
        device_count: count,
        gpus,
        minors,
    }
}

/// Keeps a query's value; records a real failure (not "not supported").
fn keep<T>(errors: &mut Vec<String>, field: &str, r: Result<T, NvmlError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(NvmlError::NotSupported) => None,
        Err(e) => {
            errors.push(format!("{field}: {e}"));
            None
        }
    }
}

/// One GPU's state and its device minor number (`/dev/nvidia<minor>`).
fn gpu(nvml: &Nvml, index: u32) -> (GpuState, Option<u32>) {
    let mut errors = Vec::new();
    let device = match nvml.device_by_index(index) {
        Ok(d) => d,
        Err(e) => {
            let state = GpuState {
                index,
                errors: vec![format!("handle: {e}")],
                ..GpuState::default()
            };
            return (state, None);
        }
    };
    let e = &mut errors;
    let uuid = keep(e, "uuid", device.uuid());
    let name = keep(e, "name", device.name());
    let memory_mib = keep(e, "memory", device.memory_info()).map(|m| m.total / (1024 * 1024));
    let compute_capability = keep(e, "computeCapability", device.cuda_compute_capability())
        .map(|c| format!("{}.{}", c.major, c.minor));
    let pci_bus_id = keep(e, "pciBusId", device.pci_info()).map(|p| p.bus_id);
    let persistence_mode = keep(e, "persistenceMode", device.is_in_persistent_mode());
    let mig_enabled = keep(e, "migMode", device.mig_mode()).map(|m| m.current == 1);
    let ecc = keep(e, "eccMode", device.is_ecc_enabled()).map(|m| {
        let volatile = device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile);
        let aggregate = device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate);
        EccState {
            enabled: m.currently_enabled,
            pending_enabled: (m.pending_enabled != m.currently_enabled)
                .then_some(m.pending_enabled),
            volatile_uncorrectable: keep(e, "eccVolatileUncorrectable", volatile),
            aggregate_uncorrectable: keep(e, "eccAggregateUncorrectable", aggregate),
        }
    });
    let retired_pages = {
        let dbe = keep(
            e,
            "retiredPagesDoubleBit",
            device.retired_pages(RetirementCause::DoubleBitEccError),
        );
        let sbe = keep(
            e,
            "retiredPagesSingleBit",
            device.retired_pages(RetirementCause::MultipleSingleBitEccErrors),
        );
        let pending = keep(e, "retiredPagesPending", device.are_pages_pending_retired());
        (dbe.is_some() || sbe.is_some() || pending.is_some()).then(|| RetiredPages {
            double_bit: dbe.map_or(0, |p| p.len() as u64),
            multiple_single_bit: sbe.map_or(0, |p| p.len() as u64),
            pending: pending.unwrap_or(false),
        })
    };
    let row_remapping = row_remapping(&device, e);
    let throttle_reasons = keep(e, "throttleReasons", device.current_throttle_reasons())
        .map(throttle_names)
        .unwrap_or_default();
    let fabric = keep(e, "fabric", fabric(nvml, &device)).flatten();
    let compute_processes = keep(
        e,
        "computeProcesses",
        device.running_compute_processes_count(),
    );
    let compute_mode = keep(e, "computeMode", device.compute_mode()).map(|m| {
        match m {
            ComputeMode::Default => "Default",
            ComputeMode::ExclusiveThread => "ExclusiveThread",
            ComputeMode::Prohibited => "Prohibited",
            ComputeMode::ExclusiveProcess => "ExclusiveProcess",
        }
        .to_owned()
    });
    let recovery_action = Some(recovery_action(&device, e));
    let minor = keep(e, "minorNumber", device.minor_number());
    let state = GpuState {
        index,
        uuid,
        name,
        memory_mib,
        compute_capability,
        pci_bus_id,
        persistence_mode,
        mig_enabled,
        ecc,
        retired_pages,
        row_remapping,
        throttle_reasons,
        errors,
        fabric,
        compute_processes,
        compute_mode,
        compute: None,
        recovery_action,
    };
    (state, minor)
}

/// NVML field `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` (`nvml.h`; nvml-wrapper-sys
/// 0.10 predates it). Read as a field value: no `unsafe`.
const FI_GPU_RECOVERY_ACTION: u32 = 230;

/// What the driver says the GPU needs. "Not supported" (older drivers, some
/// GPUs) is reported as such; another failure is a query error.
fn recovery_action(device: &nvml_wrapper::Device<'_>, errors: &mut Vec<String>) -> RecoveryAction {
    let sample = device
        .field_values_for(&[FieldId(FI_GPU_RECOVERY_ACTION)])
        .map(|mut v| v.pop());
    match sample.map(|s| s.map(|s| s.and_then(|s| s.value))) {
        Ok(Some(Ok(v))) => match sample_u64(&v) {
            Some(n) => {
                let action = RecoveryAction::from_nvml(n);
                if action == RecoveryAction::Unknown {
                    errors.push(format!(
                        "recoveryAction: NVML value {n} is not one this gpuready knows"
                    ));
                }
                action
            }
            None => {
                errors.push(format!("recoveryAction: unexpected value type {v:?}"));
                RecoveryAction::Unknown
            }
        },
        Ok(Some(Err(NvmlError::NotSupported))) | Err(NvmlError::NotSupported) => {
            RecoveryAction::NotSupported
        }
        Ok(Some(Err(e))) | Err(e) => {
            errors.push(format!("recoveryAction: {e}"));
            RecoveryAction::Unknown
        }
        Ok(None) => {
            errors.push("recoveryAction: NVML returned no value".into());
            RecoveryAction::Unknown
        }
    }
}

/// NVSwitch fabric state (`nvmlDeviceGetGpuFabricInfo`): `None` where the GPU
/// has no fabric (PCIe, pass-through), which NVML reports as state
/// NOT_SUPPORTED or as NotSupported; a driver without the call answers
/// FunctionNotFound, kept as a query error.
fn fabric(
    nvml: &Nvml,
    device: &nvml_wrapper::Device<'_>,
) -> Result<Option<FabricState>, NvmlError> {
    use nvml_wrapper_sys::bindings::{
        NVML_GPU_FABRIC_STATE_COMPLETED, NVML_GPU_FABRIC_STATE_IN_PROGRESS,
        NVML_GPU_FABRIC_STATE_NOT_STARTED,
    };
    let info = super::ffi::gpu_fabric_info(nvml, device)?;
    let state = match u32::from(info.state) {
        NVML_GPU_FABRIC_STATE_NOT_STARTED => FabricPhase::NotStarted,
        NVML_GPU_FABRIC_STATE_IN_PROGRESS => FabricPhase::InProgress,
        NVML_GPU_FABRIC_STATE_COMPLETED => FabricPhase::Completed,
        _ => return Ok(None),
    };
    let status = (state == FabricPhase::Completed).then(|| match nvml_try(info.status) {
        Ok(()) => "Success".to_owned(),
        Err(e) => format!("{e:?}"),
    });
    let uuid = info.clusterUuid;
    Ok(Some(FabricState {
        state,
        status,
        clique_id: (state == FabricPhase::Completed).then_some(info.cliqueId),
        cluster_uuid: (uuid != [0; 16])
            .then(|| uuid.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }))
}

/// NVML field IDs of the row remapper (`nvml.h`: NVML_FI_DEV_REMAPPED_COR,
/// _UNC, _PENDING, _FAILURE). Read as field values because nvml-wrapper does not
/// wrap `nvmlDeviceGetRemappedRows`, and field values need no `unsafe`.
const FI_REMAPPED: [u32; 4] = [142, 143, 144, 145];

fn row_remapping(
    device: &nvml_wrapper::Device<'_>,
    errors: &mut Vec<String>,
) -> Option<RowRemapping> {
    let ids: Vec<FieldId> = FI_REMAPPED.iter().map(|&i| FieldId(i)).collect();
    let samples = keep(errors, "rowRemapping", device.field_values_for(&ids))?;
    let mut values = [None; 4];
    for (slot, sample) in values.iter_mut().zip(samples) {
        *slot = match sample.map(|s| s.value) {
            Ok(Ok(v)) => sample_u64(&v),
            // Not supported (GPUs without a row remapper) is the common answer.
            Ok(Err(NvmlError::NotSupported)) | Err(NvmlError::NotSupported) => None,
            Ok(Err(e)) | Err(e) => {
                errors.push(format!("rowRemapping: {e}"));
                None
            }
        };
    }
    let [cor, unc, pending, failure] = values;
    (cor.is_some() || unc.is_some() || pending.is_some() || failure.is_some()).then(|| {
        RowRemapping {
            correctable_rows: cor.unwrap_or(0),
            uncorrectable_rows: unc.unwrap_or(0),
            pending: pending.is_some_and(|v| v != 0),
            failure: failure.is_some_and(|v| v != 0),
        }
    })
}

fn sample_u64(v: &SampleValue) -> Option<u64> {
    match *v {
        SampleValue::U32(n) => Some(u64::from(n)),
        SampleValue::U64(n) => Some(n),
        SampleValue::I64(n) => u64::try_from(n).ok(),
        SampleValue::F64(_) => None,
    }
}

fn throttle_names(t: ThrottleReasons) -> Vec<String> {
    let names = [
        (ThrottleReasons::GPU_IDLE, "GpuIdle"),
        (
            ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
            "ApplicationsClocksSetting",
        ),
        (ThrottleReasons::SW_POWER_CAP, "SwPowerCap"),
        (ThrottleReasons::HW_SLOWDOWN, "HwSlowdown"),
        (ThrottleReasons::SYNC_BOOST, "SyncBoost"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "SwThermalSlowdown"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "HwThermalSlowdown"),
        (
            ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
            "HwPowerBrakeSlowdown",
        ),
        (
            ThrottleReasons::DISPLAY_CLOCK_SETTING,
            "DisplayClockSetting",
        ),
    ];
    names
        .iter()
        .filter(|(bit, _)| t.contains(*bit))
        .map(|(_, n)| (*n).to_owned())
        .collect()
}

/// Critical events recorded since the probe started, shared with the publisher.
#[derive(Default)]
pub struct Events {
    log: Mutex<EventLog>,
    /// Bumped on each new record of an event that may gate the node
    /// ([`urgent::is_critical`]): the agent's loop publishes ahead of its
    /// heartbeat. A watch channel: its sender works from this plain thread.
    signal: Option<watch::Sender<u64>>,
}

impl Events {
    /// Events that tell `signal` of each new critical record.
    pub fn signalling(signal: watch::Sender<u64>) -> Events {
        Events {
            signal: Some(signal),
            ..Events::default()
        }
    }

    pub fn snapshot(&self) -> EventLog {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn set_status(&self, monitored: bool, error: Option<String>) {
        if let Ok(mut l) = self.log.lock() {
            l.monitored = monitored;
            l.error = error;
        }
    }

    /// Counts one event into its (GPU, kind, XID) record.
    pub fn record(&self, gpu: String, kind: EventKind, xid: Option<u64>, at: &str) {
        let Ok(mut l) = self.log.lock() else {
            return;
        };
        if let Some(r) = l
            .records
            .iter_mut()
            .find(|r| r.gpu == gpu && r.kind == kind && r.xid == xid)
        {
            r.count += 1;
            r.last_seen = at.to_owned();
            return;
        }
        if l.records.len() >= MAX_EVENT_RECORDS {
            l.dropped += 1;
            return;
        }
        l.records.push(EventRecord {
            gpu,
            kind,
            xid,
            count: 1,
            first_seen: at.to_owned(),
            last_seen: at.to_owned(),
        });
        drop(l);
        // Only a new record: a repeat (a lost GPU fails every wait, once a
        // second) changes no verdict, and the heartbeat carries its count.
        if let Some(s) = &self.signal
            && urgent::is_critical(kind, xid)
        {
            s.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// Registers every GPU for critical XID and double-bit ECC events and records
/// them until `stop` is set. Runs on its own thread: NVML's wait blocks.
pub fn watch_events(nvml: &Nvml, events: &Arc<Events>, stop: &AtomicBool) {
    let wanted = EventTypes::CRITICAL_XID_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR;
    // NVML frees the set when a registration fails, so a GPU that refuses
    // events (not supported, lost) makes the set be built again without it.
    let count = nvml.device_count().unwrap_or(0);
    let mut accepted: Vec<u32> = Vec::new();
    let mut failures = Vec::new();
    let mut set = None;
    for i in 0..count {
        let mut candidates = accepted.clone();
        candidates.push(i);
        match register(nvml, &candidates, wanted) {
            Ok(s) => {
                set = Some(s);
                accepted = candidates;
            }
            Err(e) => failures.push(format!("GPU {i}: {e}")),
        }
    }
    let set = match set {
        Some(s) => s,
        None if count == 0 => {
            events.set_status(false, Some("NVML enumerates no GPU".into()));
            return;
        }
        None => {
            events.set_status(
                false,
                Some(format!(
                    "no GPU accepted event registration: {}",
                    failures.join("; ")
                )),
            );
            return;
        }
    };
    events.set_status(
        true,
        (!failures.is_empty()).then(|| format!("not monitored: {}", failures.join("; "))),
    );
    while !stop.load(Ordering::Relaxed) {
        match set.wait(1000) {
            Ok(data) => {
                let at = jiff::Timestamp::now().to_string();
                let gpu = data.device.uuid().unwrap_or_else(|_| {
                    format!("index:{}", data.device.index().unwrap_or(u32::MAX))
                });
                if data.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
                    let xid = match data.event_data {
                        Some(XidError::Value(x)) => Some(x),
                        _ => None,
                    };
                    tracing::warn!(%gpu, ?xid, "XID event");
                    events.record(gpu, EventKind::Xid, xid, &at);
                } else if data.event_type.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
                    tracing::warn!(%gpu, "double-bit ECC event");
                    events.record(gpu, EventKind::DoubleBitEcc, None, &at);
                }
            }
            Err(NvmlError::Timeout) => {}
            // A GPU that fell off the bus makes every wait fail: record it as the
            // XID the driver logs for it, once a second at most.
            Err(NvmlError::GpuLost) => {
                let at = jiff::Timestamp::now().to_string();
                events.record(
                    "unknown (NVML: GPU is lost)".into(),
                    EventKind::Xid,
                    Some(79),
                    &at,
                );
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            Err(e) => {
                events.set_status(false, Some(format!("waiting for NVML events: {e}")));
                return;
            }
        }
    }
}

/// An event set with the given GPUs registered for `wanted` (as far as each
/// supports them).
fn register<'n>(
    nvml: &'n Nvml,
    indices: &[u32],
    wanted: EventTypes,
) -> Result<nvml_wrapper::EventSet<'n>, NvmlError> {
    let mut set = nvml.create_event_set()?;
    for &i in indices {
        let device = nvml.device_by_index(i)?;
        let supported = device
            .supported_event_types()
            .map(|s| s & wanted)
            .unwrap_or(wanted);
        set = device
            .register_events(supported, set)
            .map_err(|e| e.error)?;
    }
    Ok(set)
}

/// NVML while the probe holds it: the library, and the thread reading its
/// critical events into `events`. [`Session::release`] stops the thread and
/// shuts NVML down (`nvmlShutdown`, then the library is closed), which closes
/// the probe's `/dev/nvidia*` files: the driver can then be unloaded and a
/// GPU's MIG mode changed (docs/probe.md, "Sitting out maintenance").
pub struct Session {
    /// `None` only once released (a session is consumed by its release).
    nvml: Option<Arc<Nvml>>,
    stop: Arc<AtomicBool>,
    watcher: Option<std::thread::JoinHandle<()>>,
}

impl Session {
    /// Initialises NVML (as [`init`]) and starts recording its events into
    /// `events`; `None` with the state saying why when NVML is unusable.
    pub fn open(explicit: Option<&OsStr>, events: &Arc<Events>) -> (Option<Session>, NvmlState) {
        let (nvml, state) = init(explicit);
        let Some(nvml) = nvml else {
            return (None, state);
        };
        let nvml = Arc::new(nvml);
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (nvml, events, stop) = (nvml.clone(), events.clone(), stop.clone());
            std::thread::Builder::new()
                .name("nvml-events".into())
                .spawn(move || watch_events(&nvml, &events, &stop))
        };
        let watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                events.set_status(false, Some(format!("starting the event thread: {e}")));
                None
            }
        };
        let session = Session {
            nvml: Some(nvml),
            stop,
            watcher,
        };
        (Some(session), state)
    }

    pub fn nvml(&self) -> Option<&Nvml> {
        self.nvml.as_deref()
    }

    /// Stops the event thread (its wait returns within a second) and shuts
    /// NVML down. Returns NVML's answer to the shutdown.
    pub fn release(mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(w) = self.watcher.take()
            && w.join().is_err()
        {
            tracing::warn!("the NVML event thread panicked");
        }
        // The thread held the only other reference, and it has ended.
        match self.nvml.take().map(Arc::try_unwrap) {
            Some(Ok(nvml)) => nvml.shutdown().map_err(|e| e.to_string()),
            Some(Err(_)) => {
                Err("NVML still referenced: dropped without an explicit shutdown".into())
            }
            None => Ok(()),
        }
    }
}

impl Drop for Session {
    /// A session dropped unreleased still ends its thread, whose reference
    /// is then the last: NVML's own drop shuts it down.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The `/dev/nvidia*` files this process has open, from `/proc/self/fd`:
/// empty after [`Session::release`] is the proof that the probe no longer
/// keeps the driver loaded. `None` when `/proc/self/fd` cannot be read.
pub fn open_device_files() -> Option<Vec<String>> {
    let mut out: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .ok()?
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p.starts_with("/dev/nvidia"))
        .collect();
    out.sort();
    out.dedup();
    Some(out)
}

#[cfg(test)]
mod tests;
