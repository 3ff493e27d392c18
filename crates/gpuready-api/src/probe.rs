//! The probe report: what `gpuready probe` read from the GPUs through NVML (and,
//! since v2, the CUDA driver API) on one node, as the probe publishes it and the
//! engine reads it. Versioned by [`PROBE_REPORT_API_VERSION`]; v2 only adds
//! optional fields to v1, so one type reads both ([`PROBE_REPORT_READ_VERSIONS`]);
//! every field but the version is optional or defaulted, and unknown fields are
//! ignored.

use serde::{Deserialize, Serialize};

/// `apiVersion` of the report this gpuready writes. A new shape gets a new
/// version; the engine refuses versions it does not know rather than misreading them.
pub const PROBE_REPORT_API_VERSION: &str = "gpuready.io/probe-report/v2";

/// The first version: NVML only (no compute check, fabric or device nodes).
pub const PROBE_REPORT_API_VERSION_V1: &str = "gpuready.io/probe-report/v1";

/// Versions the engine reads: v1 is v2 without the compute check, fabric state
/// and device nodes, which then read as absent (not judged).
pub const PROBE_REPORT_READ_VERSIONS: &[&str] =
    &[PROBE_REPORT_API_VERSION, PROBE_REPORT_API_VERSION_V1];

/// Key of the report inside the carrier ConfigMap's `data`.
pub const PROBE_REPORT_DATA_KEY: &str = "report.json";

/// Prefix of the carrier ConfigMap's name; the node name follows.
pub const PROBE_CONFIGMAP_PREFIX: &str = "gpuready-probe-";

/// Most critical-event records a report carries (the rest are counted in
/// [`EventLog::dropped`]), so a flapping GPU cannot grow the carrier without bound.
pub const MAX_EVENT_RECORDS: usize = 64;

/// Name of the carrier ConfigMap of a node, or `None` when the node name is too
/// long for an object name with the prefix (253 characters at most).
pub fn configmap_name(node: &str) -> Option<String> {
    let name = format!("{PROBE_CONFIGMAP_PREFIX}{node}");
    (name.len() <= 253).then_some(name)
}

/// One probe's view of its node's GPUs.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    /// Always [`PROBE_REPORT_API_VERSION`] for this shape.
    pub api_version: String,
    /// Node the probe runs on (`spec.nodeName` through the downward API); `None`
    /// for `gpuready probe --once` outside a cluster.
    pub node: Option<String>,
    /// RFC 3339 time this report was taken: the probe's heartbeat.
    #[serde(default)]
    pub generated_at: String,
    /// RFC 3339 time the probe started: events are counted from here.
    #[serde(default)]
    pub probe_started_at: String,
    /// gpuready version of the probe.
    #[serde(default)]
    pub probe_version: String,
    /// Whether NVML could be loaded and initialised.
    #[serde(default)]
    pub nvml: NvmlState,
    /// NVML's driver version string, e.g. `580.159.04`.
    pub driver_version: Option<String>,
    /// Highest CUDA version the driver supports (`nvmlSystemGetCudaDriverVersion`), e.g. `13.0`.
    pub cuda_driver_version: Option<String>,
    /// `nvmlDeviceGetCount`: GPUs NVML enumerates, including ones whose details
    /// could not be read.
    pub device_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuState>,
    /// Critical events (XIDs, double-bit ECC) seen since `probeStartedAt`.
    #[serde(default)]
    pub events: EventLog,
    /// v2: the node's boot ID (`/proc/sys/kernel/random/boot_id`): a change means
    /// a reboot, which re-validates the compute check.
    pub boot_id: Option<String>,
    /// v2: the device nodes a container needs, and whether each exists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<DeviceNode>,
    /// v2: the CUDA compute check (absent in v1 reports: not judged).
    pub compute_check: Option<ComputeCheck>,
    /// v2, optional: the host's `nvidia-imex` service as its files show it
    /// (`gpuready probe --host-root`). Absent: not read (a probe without the
    /// host's `/etc`, or an older one), which the Fabric layer says.
    pub imex: Option<ImexHost>,
    /// v2, optional: the probe stepped aside because its node is in GPU
    /// maintenance. It holds no NVML handle and runs no compute check then, so
    /// `nvml` says why it is not used and the GPU fields are empty. Absent: the
    /// probe reads the GPUs (or is older than this field).
    pub paused: Option<ProbePause>,
}

/// Why, and since when, the probe leaves the GPUs alone.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbePause {
    /// RFC 3339 time the probe released NVML; kept while it stays paused.
    pub since: String,
    /// The node's labels that call for it, as `key=value`
    /// (`nvidia.com/gpu.deploy.client=paused-for-driver-upgrade`,
    /// `nvidia.com/gpu-driver-upgrade-state=drain-required`, …), as the probe
    /// last read them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The `/dev/nvidia*` files the probe's process still had open when it
    /// wrote this report (`/proc/self/fd`): empty is the proof that it keeps
    /// no GPU device open. Absent when `/proc/self/fd` could not be read.
    pub open_device_files: Option<Vec<String>>,
}

/// The IMEX daemon's configuration file, at the path the NVIDIA DRA driver's
/// prerequisites name.
pub const IMEX_CONFIG_PATH: &str = "/etc/nvidia-imex/config.cfg";

/// The host's IMEX systemd unit.
pub const IMEX_UNIT: &str = "nvidia-imex.service";

/// Where `systemctl enable` and `systemctl mask` write their links.
pub const SYSTEMD_UNIT_DIR: &str = "/etc/systemd/system";

/// The control socket the NVIDIA DRA driver's host-managed IMEX mode reads
/// by default (its `imex.hostSocketPath`); the host sets it as
/// `IMEX_CMD_UNIX_DOMAIN_PATH` in [`IMEX_CONFIG_PATH`].
pub const IMEX_DEFAULT_SOCKET: &str = "/etc/nvidia-imex/imex_ctrl.sock";

/// The host's `nvidia-imex` service as its files show it. Files only: the
/// probe does not see whether the daemon runs (no host PID namespace, no
/// systemd bus); docs/fabric.md says what each field means and misses.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImexHost {
    /// [`IMEX_CONFIG_PATH`].
    pub config: ImexConfig,
    /// The control socket the config names (`IMEX_CMD_UNIX_DOMAIN_PATH`);
    /// absent when it names none.
    pub socket: Option<ImexSocket>,
    /// [`IMEX_UNIT`] under [`SYSTEMD_UNIT_DIR`].
    pub unit: ImexUnit,
}

/// What [`IMEX_CONFIG_PATH`] says.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImexConfig {
    /// The file exists: the `nvidia-imex` package is installed (or someone
    /// wrote the file).
    pub present: bool,
    /// `IMEX_CMD_ENABLED` as written (the last assignment); absent when the
    /// file does not set it. `1` turns the daemon's command service on.
    pub cmd_enabled: Option<String>,
    /// `IMEX_CMD_UNIX_DOMAIN_PATH`; absent when unset or empty.
    pub cmd_unix_domain_path: Option<String>,
    /// Why the file (or the host's `/etc`) could not be read: then nothing
    /// above is known.
    pub error: Option<String>,
}

/// The IMEX control socket on the host.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImexSocket {
    /// The host path, as the config names it.
    pub path: String,
    pub state: SocketState,
}

/// Whether a socket file exists at a host path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SocketState {
    /// A Unix socket is there: the daemon created it when it started (the
    /// file stays if the daemon dies without removing it).
    Present,
    /// Nothing is there: the daemon is not running with this setting.
    #[default]
    Absent,
    /// Something other than a socket is there.
    NotASocket,
    /// The path is outside what the probe sees of the host (only `/etc`),
    /// relative, or not readable.
    NotVisible,
}

/// [`IMEX_UNIT`]'s links under [`SYSTEMD_UNIT_DIR`].
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImexUnit {
    pub state: UnitState,
    /// The targets whose `.wants/` or `.requires/` holds the unit (what
    /// `systemctl enable` links it into, e.g. `multi-user.target`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wanted_by: Vec<String>,
    /// Why the unit directory could not be read (`state` is `Unread`).
    pub error: Option<String>,
}

/// The unit's enablement as `/etc/systemd/system` shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnitState {
    /// A target wants or requires it: systemd starts it at boot.
    Enabled,
    /// Linked to `/dev/null` (or an empty file): systemd cannot start it.
    Masked,
    /// Neither: disabled, or not installed (the package's unit file, under
    /// `/usr/lib`, is not visible). Whether it runs now is not visible.
    #[default]
    NotEnabled,
    /// The directory could not be read (`error`).
    Unread,
}

/// NVML initialisation result.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NvmlState {
    pub usable: bool,
    /// The library that was loaded, e.g. `libnvidia-ml.so.1`.
    pub library: Option<String>,
    /// NVML's own version string.
    pub version: Option<String>,
    /// Why NVML is unusable (every library tried, with its error).
    pub error: Option<String>,
}

/// One GPU as NVML reports it. A field NVML could not read is `None`; when the
/// reason was an error (not "not supported on this GPU") it is listed in `errors`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuState {
    pub index: u32,
    pub uuid: Option<String>,
    /// NVML product name, e.g. `NVIDIA H200` (GFD writes it with `-` for spaces).
    pub name: Option<String>,
    /// Total framebuffer in MiB (what GFD's `nvidia.com/gpu.memory` holds).
    pub memory_mib: Option<u64>,
    /// `major.minor`, e.g. `9.0`.
    pub compute_capability: Option<String>,
    pub pci_bus_id: Option<String>,
    pub persistence_mode: Option<bool>,
    /// MIG mode currently enabled.
    pub mig_enabled: Option<bool>,
    pub ecc: Option<EccState>,
    /// Dynamic page retirement (GPUs before Ampere).
    pub retired_pages: Option<RetiredPages>,
    /// Row remapping (Ampere and later data-center GPUs).
    pub row_remapping: Option<RowRemapping>,
    /// Active clock event ("throttle") reasons, e.g. `GpuIdle`, `HwThermalSlowdown`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle_reasons: Vec<String>,
    /// Queries that failed, as `field: error`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// v2: NVSwitch fabric state (`nvmlDeviceGetGpuFabricInfo`); absent on GPUs
    /// without one (PCIe cards, pass-through VMs): that is not an error.
    pub fabric: Option<FabricState>,
    /// v2: compute processes NVML lists on this GPU now (CUDA contexts of any
    /// container: the driver reports host PIDs whatever the PID namespace).
    pub compute_processes: Option<u32>,
    /// v2: NVML compute mode (`Default`, `ExclusiveProcess`, `Prohibited`).
    pub compute_mode: Option<String>,
    /// v2: this GPU's result in the latest compute check that ran (its time and
    /// trigger are in the report's `computeCheck`).
    pub compute: Option<GpuCompute>,
    /// v2 (optional, added with the lifecycle): what the driver says the GPU
    /// needs, NVML field `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` (230). Absent
    /// from probes that do not read it; `NotSupported` where the driver or
    /// GPU does not answer it (a fact, not a failure).
    pub recovery_action: Option<RecoveryAction>,
}

/// NVML's GPU recovery action (`nvmlDeviceGpuRecoveryAction_t`), which
/// supersedes the deprecated fields `NVML_FI_DEV_RESET_STATUS` (226) and
/// `NVML_FI_DEV_DRAIN_AND_RESET_STATUS` (227).
///
/// The numbers: 0 to 5 as `nvml.h` in the `github.com/NVIDIA/go-nvml` Go module
/// spells them (`pkg/nvml/nvml.h`, synced with CUDA 13.3); 6 and 7 were added
/// in NVML 615 (NVML API reference, change log "Changes between NVML v610 and
/// v615") and are not in that header yet: their values are those of the
/// `cuda-bindings` package's `cuda.bindings.nvml.DeviceGpuRecoveryAction`,
/// which is generated from `nvml.h` (docs/probe.md, "The GPU recovery action").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecoveryAction {
    /// 0: nothing to do.
    None,
    /// 1: a fault needs a GPU reset to clear.
    GpuReset,
    /// 2: the fault may have left the OS inconsistent: reboot the node.
    NodeReboot,
    /// 3: peer-to-peer traffic must be quiesced; NVML then names the next action.
    DrainP2p,
    /// 4: the GPU runs at reduced capacity; running work is safe, new work
    /// should wait for a reset.
    DrainAndReset,
    /// 5: the GPU's IMEX domain needs recovery: an action at the fabric's
    /// scope, not the GPU's (the NVIDIA DRA driver keeps scheduling the GPU).
    RecoverImexDomain,
    /// 6: reset the GPU's PCIe bus (more than a GPU reset).
    BusReset,
    /// 7: reboot the system.
    SystemReboot,
    /// The driver or GPU does not answer the field.
    NotSupported,
    /// A value this gpuready does not know (a newer driver): the probe lists
    /// the number in the GPU's `errors`.
    #[serde(other)]
    Unknown,
}

impl RecoveryAction {
    /// The action for NVML's value, `Unknown` for one this gpuready does not know.
    pub fn from_nvml(value: u64) -> RecoveryAction {
        match value {
            0 => RecoveryAction::None,
            1 => RecoveryAction::GpuReset,
            2 => RecoveryAction::NodeReboot,
            3 => RecoveryAction::DrainP2p,
            4 => RecoveryAction::DrainAndReset,
            5 => RecoveryAction::RecoverImexDomain,
            6 => RecoveryAction::BusReset,
            7 => RecoveryAction::SystemReboot,
            _ => RecoveryAction::Unknown,
        }
    }
}

/// A device node and whether it exists (`/dev/nvidiactl`, `/dev/nvidia-uvm`,
/// `/dev/nvidia-uvm-tools`, `/dev/nvidia<minor>` per GPU).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceNode {
    pub path: String,
    pub present: bool,
    /// The GPU (NVML index) this node belongs to; `None` for node-wide ones.
    pub gpu: Option<u32>,
}

/// NVSwitch fabric registration of one GPU, as NVML reports it.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FabricState {
    pub state: FabricPhase,
    /// NVML's result of the registration once `Completed` (`Success` or an
    /// NVML error name such as `NVML_ERROR_...`).
    pub status: Option<String>,
    pub clique_id: Option<u32>,
    pub cluster_uuid: Option<String>,
}

/// `NVML_GPU_FABRIC_STATE_*` (NotSupported is reported as no `fabric` at all).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FabricPhase {
    /// The fabric manager has not started registering this GPU.
    #[default]
    NotStarted,
    /// Registration is under way: CUDA returns `CUDA_ERROR_SYSTEM_NOT_READY` until done.
    InProgress,
    /// Registration finished; `status` says whether it succeeded.
    Completed,
}

/// A CUDA driver API error, by name and number (`CUresult`), and the step it
/// came from.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CudaError {
    /// e.g. `CUDA_ERROR_SYSTEM_NOT_READY`, or `CUDA_LIBRARY_UNAVAILABLE` when
    /// libcuda could not be loaded at all (no CUresult exists then).
    pub name: String,
    /// The `CUresult` number, e.g. 802; 0 for `CUDA_LIBRARY_UNAVAILABLE`.
    pub code: u32,
    /// The step that failed (`load`, `init`, `context`, `alloc`, `copy`, `launch`, ...).
    pub step: String,
    /// Extra detail (the loader's message, the driver's error string).
    pub detail: Option<String>,
}

/// One timed step of a GPU's compute check.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComputeStep {
    /// `context`, `alloc`, `copyHtoD`, `copyDtoH`, `compare`, `moduleLoad`,
    /// `launch`, `verify`, `free`.
    pub name: String,
    /// Wall time of the step in milliseconds.
    pub millis: f64,
    pub ok: bool,
}

/// A GPU's result in a compute check.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuCompute {
    pub outcome: ComputeOutcome,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<ComputeStep>,
    /// The CUDA error that stopped the check on this GPU.
    pub error: Option<CudaError>,
    /// Wrong data: what was expected and what came back.
    pub mismatch: Option<String>,
    /// Bytes the check allocated on this GPU.
    #[serde(default)]
    pub bytes: u64,
}

/// Result of a compute check, node-wide or per GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ComputeOutcome {
    /// Every step passed and the data came back right.
    Passed,
    /// A CUDA error (`error`) or wrong data (`mismatch`).
    Failed,
    /// No check has run in this probe: it was due and `skipped` says why.
    #[default]
    Skipped,
    /// The compute check is switched off (`--compute-check=off`).
    Disabled,
}

/// What made a compute check run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ComputeTrigger {
    /// The probe's first check since it started.
    FirstCheck,
    /// The driver version differs from the last check's.
    DriverChanged,
    /// The node's boot ID differs from the last check's (a reboot).
    BootChanged,
    /// The set of GPU UUIDs differs from the last check's.
    GpuSetChanged,
    /// A new value of the probe pod's request annotation.
    Requested,
    /// The periodic re-check (`--compute-check-every`).
    Periodic,
    /// `gpuready probe --once`.
    Once,
}

/// Why a due compute check did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ComputeSkipReason {
    /// A GPU has compute processes (a workload holds it): never taken from it.
    GpusBusy,
    /// A GPU is in an exclusive or prohibited compute mode: a context of the
    /// probe could lock a workload out.
    ExclusiveComputeMode,
    /// MIG is enabled on a GPU: CUDA reaches MIG instances only, not checked.
    MigEnabled,
    /// NVML is unusable, so the probe cannot tell whether the GPUs are in use.
    NvmlUnusable,
    /// The last check ran less than `--compute-check-min-interval` ago.
    MinInterval,
}

/// The stack a compute check ran on: when it changes, the check is re-run.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComputeStack {
    pub driver_version: Option<String>,
    pub boot_id: Option<String>,
    /// GPU UUIDs, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
}

/// A due check that did not run, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComputeSkip {
    pub reason: ComputeSkipReason,
    /// What was due (the trigger that would have run it).
    pub due: ComputeTrigger,
    pub message: String,
    /// RFC 3339: first time this due check was skipped.
    pub since: String,
}

/// The node's compute check: the latest run of this probe (if any) and, when a
/// due check could not run, why.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComputeCheck {
    /// Of the latest run (`Passed`/`Failed`); `Skipped` when none has run yet,
    /// `Disabled` when switched off. Per-GPU results are in `gpus[].compute`.
    pub outcome: ComputeOutcome,
    /// RFC 3339 start of the latest run.
    pub ran_at: Option<String>,
    pub trigger: Option<ComputeTrigger>,
    /// The stack the latest run saw.
    pub stack: Option<ComputeStack>,
    /// The CUDA library loaded, e.g. `libcuda.so.1`.
    pub library: Option<String>,
    /// `cuDriverGetVersion`, e.g. `13.0`.
    pub cuda_version: Option<String>,
    /// A node-wide failure (library missing, `cuInit`, device enumeration).
    pub error: Option<CudaError>,
    /// Wall time of `cuInit`, in milliseconds.
    pub init_millis: Option<f64>,
    /// Wall time of the whole run (child process included), in milliseconds.
    pub millis: Option<f64>,
    /// A check that was due and did not run (the latest run, if any, stays).
    pub skipped: Option<ComputeSkip>,
    /// The value of the request annotation the latest run served.
    pub request: Option<String>,
}

/// ECC mode and uncorrectable error counts (`NVML_MEMORY_ERROR_TYPE_UNCORRECTED`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EccState {
    /// ECC is enabled now.
    pub enabled: bool,
    /// ECC mode after the next reboot, when it differs from `enabled`.
    pub pending_enabled: Option<bool>,
    /// Since the driver last loaded (cleared by a GPU reset or reboot).
    pub volatile_uncorrectable: Option<u64>,
    /// Over the GPU's lifetime (kept in the InfoROM).
    pub aggregate_uncorrectable: Option<u64>,
}

/// Retired framebuffer pages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetiredPages {
    pub double_bit: u64,
    pub multiple_single_bit: u64,
    /// A page waits to be retired: takes effect at the next driver reload.
    pub pending: bool,
}

/// Row-remapper state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RowRemapping {
    pub correctable_rows: u64,
    pub uncorrectable_rows: u64,
    /// A remapping waits for a GPU reset to take effect.
    pub pending: bool,
    /// A remapping failed: the GPU ran out of spare rows.
    pub failure: bool,
}

/// Critical events seen by the probe's NVML event set since it started.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLog {
    /// The event set is registered and being read. False for `--once` and when
    /// registration failed (then `error` says why): no events does not mean none
    /// happened.
    pub monitored: bool,
    pub error: Option<String>,
    /// One record per (GPU, kind, XID), at most [`MAX_EVENT_RECORDS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<EventRecord>,
    /// Events not recorded because the list was full.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Occurrences of one kind of critical event on one GPU (docs/probe.md,
/// "Critical-event records", says what each field holds and how the Health
/// layer reads it).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    /// GPU UUID (or `index:N` when the UUID could not be read).
    pub gpu: String,
    pub kind: EventKind,
    /// The XID number, for `kind: Xid`.
    pub xid: Option<u64>,
    pub count: u64,
    /// RFC 3339.
    pub first_seen: String,
    /// RFC 3339.
    pub last_seen: String,
}

/// Kinds of critical NVML events the probe records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    /// `nvmlEventTypeXidCriticalError`: an XID error.
    #[default]
    Xid,
    /// `nvmlEventTypeDoubleBitEccError`: an uncorrectable memory error.
    DoubleBitEcc,
}
