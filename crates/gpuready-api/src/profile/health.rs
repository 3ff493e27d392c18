//! The profile's `probe` block: the Health layer's rules for the node agent's
//! probe report (its XID lists, the compute check, a missing report).

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The Health layer's rules for the probe report.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProbeExpectation {
    /// What a node without a probe report is: `Ignore` (default: the Health layer
    /// is left out, as before the probe existed), `Unknown` (not ready, status
    /// Unknown), or `Blocking` (not ready).
    #[serde(default)]
    pub when_missing: ProbePolicy,

    /// Oldest acceptable report (its `generatedAt`), in seconds; an older one is
    /// `ProbeReportStale`. 0 disables the check. The probe reports every 60 s by default.
    #[serde(default = "default_max_report_age")]
    #[schemars(range(min = 0, max = 86400))]
    pub max_report_age_seconds: u32,

    /// XIDs that make the node not ready when the probe saw one since it started.
    /// Default: 48, 61, 62, 64, 74, 79, 95, 119, 120, 140, 154 (NVIDIA's Xid
    /// catalog: reset the GPU or reboot). The application XIDs 13, 31, 43, 45, 68
    /// and 109 cannot be listed: they follow a faulty workload, not the GPU.
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.all(x, x >= 1 && x <= 65535)").message("probe.fatalXids must be XID numbers from 1 to 65535"))]
    #[x_kube(validation = Rule::new("self.all(x, !(x in [13, 31, 43, 45, 68, 109]))").message("probe.fatalXids must not list the application XIDs 13, 31, 43, 45, 68 or 109: they follow a faulty workload, not a faulty GPU"))]
    pub fatal_xids: Option<Vec<u32>>,

    /// Compare NVML's product, memory, compute capability and driver with GFD's
    /// labels and fail on a contradiction (labels left stale by a driver or
    /// hardware change). Default true.
    #[serde(default = "default_true")]
    pub check_labels: bool,

    /// How the CUDA compute check of the probe (report v2) gates. Absent: a
    /// failed check gates, a skipped or stale one is only reported.
    pub compute_check: Option<ComputeCheckRules>,
}

/// The Health layer's rules for the probe's compute check. A failed check
/// (CUDA error, wrong result) always makes the node not ready; these choose what
/// a check that could not run, or ran on another stack or too long ago, means.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ComputeCheckRules {
    /// No check has run in the probe because it was skipped (GPUs busy,
    /// exclusive compute mode, MIG): `Ignore` (default: reported in the message,
    /// not gating), `Unknown` or `Blocking`.
    #[serde(default)]
    pub when_skipped: ProbePolicy,
    /// The latest check ran on another stack (driver version, boot ID, GPU set)
    /// or longer ago than `maxAgeSeconds`: `Ignore` (default), `Unknown` or `Blocking`.
    #[serde(default)]
    pub when_stale: ProbePolicy,
    /// Age in seconds after which a check is stale. 0 (default): never by age
    /// alone (a stack change still makes it stale).
    #[serde(default)]
    #[schemars(range(min = 0, max = 31536000))]
    pub max_age_seconds: u32,
}

fn default_max_report_age() -> u32 {
    300
}

fn default_true() -> bool {
    true
}

impl Default for ProbeExpectation {
    fn default() -> Self {
        ProbeExpectation {
            when_missing: ProbePolicy::default(),
            max_report_age_seconds: default_max_report_age(),
            fatal_xids: None,
            check_labels: true,
            compute_check: None,
        }
    }
}

/// XIDs that are fatal for a node unless the profile lists its own: those NVIDIA's
/// Xid catalog resolves by a GPU reset or a reboot (48 double-bit ECC, 61/62
/// micro-controller breakpoint/halt, 64 row-remapper or page-retirement failure,
/// 74 NVLink, 79 fallen off the bus, 95 uncontained ECC, 119/120 GSP timeout or
/// error, 140 unrecovered ECC, 154 recovery action changed).
pub const DEFAULT_FATAL_XIDS: &[u32] = &[48, 61, 62, 64, 74, 79, 95, 119, 120, 140, 154];

/// XIDs caused by the workload, not the GPU (the device plugin's and DRA driver's
/// ignore list): never fatal.
pub const APPLICATION_XIDS: &[u32] = &[13, 31, 43, 45, 68, 109];

/// What a missing probe report means for the Health layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ProbePolicy {
    /// Leave the Health layer out when there is no report.
    #[default]
    Ignore,
    /// Health is Unknown without a report (the node is not ready).
    Unknown,
    /// Health is NotReady without a report.
    Blocking,
}
