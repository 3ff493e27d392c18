//! How the problems found in a fresh probe report add up to the Health layer's
//! verdict: each finding's rank, the first one's reason, and the Ready message
//! when nothing was found.

use gpuready_api::keys::health_reasons as r;
use gpuready_api::probe::{ProbeReport, RecoveryAction};

use crate::report::Status;

/// The Health layer's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthVerdict {
    pub status: Status,
    pub reason: &'static str,
    pub message: String,
    /// Seconds until the report goes stale if nothing new arrives.
    pub recheck_after_seconds: Option<u64>,
}

pub(super) fn verdict(
    status: Status,
    reason: &'static str,
    message: impl Into<String>,
) -> HealthVerdict {
    HealthVerdict {
        status,
        reason,
        message: message.into(),
        recheck_after_seconds: None,
    }
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
pub(super) mod rank {
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
pub(super) struct Findings {
    found: Vec<Finding>,
    pub(super) notes: Vec<String>,
}

impl Findings {
    /// A fault: NotReady whatever the profile says.
    pub(super) fn fault(&mut self, rank: u8, reason: &'static str, message: String) {
        self.gate(rank, reason, message, Status::NotReady);
    }

    /// A finding with the status the profile gives it.
    pub(super) fn gate(&mut self, rank: u8, reason: &'static str, message: String, status: Status) {
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
    pub(super) fn verdict(mut self, report: &ProbeReport, other_xids: &[String]) -> HealthVerdict {
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
