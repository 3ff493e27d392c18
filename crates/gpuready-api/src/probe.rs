//! The probe report: what `gpuready probe` read from the GPUs through NVML on one
//! node, as the probe publishes it and the engine reads it. Versioned by
//! [`PROBE_REPORT_API_VERSION`]; every field but the version is optional or
//! defaulted, so a report from an older or newer probe of the same version still
//! parses (unknown fields are ignored).

use serde::{Deserialize, Serialize};

/// `apiVersion` of the report. A new major shape gets a new version; the engine
/// refuses versions it does not know rather than misreading them.
pub const PROBE_REPORT_API_VERSION: &str = "gpuready.io/probe-report/v1";

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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    /// Always [`PROBE_REPORT_API_VERSION`] for this shape.
    pub api_version: String,
    /// Node the probe runs on (`spec.nodeName` through the downward API); `None`
    /// for `gpuready probe --once` outside a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// Highest CUDA version the driver supports (`nvmlSystemGetCudaDriverVersion`), e.g. `13.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_version: Option<String>,
    /// `nvmlDeviceGetCount`: GPUs NVML enumerates, including ones whose details
    /// could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuState>,
    /// Critical events (XIDs, double-bit ECC) seen since `probeStartedAt`.
    #[serde(default)]
    pub events: EventLog,
}

/// NVML initialisation result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NvmlState {
    pub usable: bool,
    /// The library that was loaded, e.g. `libnvidia-ml.so.1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// NVML's own version string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why NVML is unusable (every library tried, with its error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One GPU as NVML reports it. A field NVML could not read is `None`; when the
/// reason was an error (not "not supported on this GPU") it is listed in `errors`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuState {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// NVML product name, e.g. `NVIDIA H200` (GFD writes it with `-` for spaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Total framebuffer in MiB (what GFD's `nvidia.com/gpu.memory` holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// `major.minor`, e.g. `9.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence_mode: Option<bool>,
    /// MIG mode currently enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc: Option<EccState>,
    /// Dynamic page retirement (GPUs before Ampere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_pages: Option<RetiredPages>,
    /// Row remapping (Ampere and later data-center GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_remapping: Option<RowRemapping>,
    /// Active clock event ("throttle") reasons, e.g. `GpuIdle`, `HwThermalSlowdown`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle_reasons: Vec<String>,
    /// Queries that failed, as `field: error`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// ECC mode and uncorrectable error counts (`NVML_MEMORY_ERROR_TYPE_UNCORRECTED`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EccState {
    /// ECC is enabled now.
    pub enabled: bool,
    /// ECC mode after the next reboot, when it differs from `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_enabled: Option<bool>,
    /// Since the driver last loaded (cleared by a GPU reset or reboot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volatile_uncorrectable: Option<u64>,
    /// Over the GPU's lifetime (kept in the InfoROM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLog {
    /// The event set is registered and being read. False for `--once` and when
    /// registration failed (then `error` says why): no events does not mean none
    /// happened.
    pub monitored: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

/// Occurrences of one kind of critical event on one GPU.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    /// GPU UUID (or `index:N` when the UUID could not be read).
    pub gpu: String,
    pub kind: EventKind,
    /// The XID number, for `kind: Xid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
