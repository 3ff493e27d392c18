//! The Health layer: the report of `gpuready probe` (NVML read on the node)
//! judged against the profile and cross-checked with GFD's labels. Pure: the
//! report is an input, time is an input.

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::keys::health_reasons as r;
use gpuready_api::probe::ProbeReport;
use gpuready_api::profile::{ProbeExpectation, ProbePolicy};
use jiff::Timestamp;

use crate::facts::NodeFacts;
// The report as an input lives in `probe`; it is re-exported here, where
// callers have always found it.
pub use crate::probe::{ProbeEvidence, ReportError, parse_report};
use crate::report::Status;

mod compute;
mod findings;
mod gpus;

use compute::compute_findings;
pub use findings::HealthVerdict;
use findings::{Findings, rank, verdict};
use gpus::{count_findings, event_findings, gpu_findings, label_contradictions};

/// Whether the Health layer is judged for this node at all: a report (or an
/// unreadable carrier) exists, or the profile does not ignore a missing one.
pub fn applies(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> bool {
    facts.probe.is_some()
        || spec
            .probe
            .as_ref()
            .is_some_and(|p| p.when_missing != ProbePolicy::Ignore)
}

/// Judges the node's probe report; `None` when the layer does not apply.
pub fn judge(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    now: Timestamp,
) -> Option<HealthVerdict> {
    let defaults = ProbeExpectation::default();
    let rules = spec.probe.as_ref().unwrap_or(&defaults);
    let report = match &facts.probe {
        None => {
            let status = match rules.when_missing {
                ProbePolicy::Ignore => return None,
                ProbePolicy::Unknown => Status::Unknown,
                ProbePolicy::Blocking => Status::NotReady,
            };
            return Some(verdict(
                status,
                r::PROBE_MISSING,
                format!(
                    "no report from gpuready probe for this node (ConfigMap {}{}): install the chart with probe.enabled=true and check that the probe pod runs on this node",
                    gpuready_api::probe::PROBE_CONFIGMAP_PREFIX,
                    facts.name
                ),
            ));
        }
        Some(ProbeEvidence::Invalid(why)) => {
            return Some(verdict(
                Status::Unknown,
                r::PROBE_REPORT_INVALID,
                format!("the probe report cannot be read: {why}"),
            ));
        }
        Some(ProbeEvidence::Report(report)) => report,
    };
    if let Some(node) = &report.node
        && *node != facts.name
    {
        return Some(verdict(
            Status::Unknown,
            r::PROBE_REPORT_INVALID,
            format!(
                "the report names node {node}, not this one: only the probe on a node may publish its report"
            ),
        ));
    }
    let Ok(generated) = report.generated_at.parse::<Timestamp>() else {
        return Some(verdict(
            Status::Unknown,
            r::PROBE_REPORT_INVALID,
            format!(
                "generatedAt {:?} is not an RFC 3339 time",
                report.generated_at
            ),
        ));
    };
    // Paused while the node is in maintenance: expected, whatever its age (a
    // probe pod the DaemonSet controller removed published it on its way out).
    let maintenance = crate::lifecycle::gpu_clients_paused(&facts.labels);
    if let Some(pause) = &report.paused
        && !maintenance.is_empty()
    {
        return Some(verdict(
            Status::Unknown,
            r::PROBE_PAUSED,
            format!(
                "the probe released the GPUs at {} because the node is in maintenance ({}): it holds no NVML handle, so the driver can unload and MIG can change; it reads the GPUs again when the maintenance ends",
                pause.since,
                maintenance.join(", ")
            ),
        ));
    }
    let mut recheck = None;
    if rules.max_report_age_seconds > 0 {
        let max = i64::from(rules.max_report_age_seconds);
        let age = now.as_second() - generated.as_second();
        if age > max {
            // The message names the report's time, never the age: it ends up in
            // node conditions, and a clock-driven message would rewrite them.
            return Some(verdict(
                if rules.when_missing == ProbePolicy::Blocking {
                    Status::NotReady
                } else {
                    Status::Unknown
                },
                r::PROBE_REPORT_STALE,
                format!(
                    "the probe's last report is from {generated}, older than the {max}s limit: is the gpuready probe pod on this node running?"
                ),
            ));
        }
        recheck = Some(u64::try_from(max - age.max(0) + 1).unwrap_or(1));
    }
    // Paused outside maintenance: the maintenance just ended and the probe
    // has not resumed yet (or disagrees). Never healthy: Unknown until a fresh
    // report, stale like any other report once it passes the limit.
    if let Some(pause) = &report.paused {
        let mut v = verdict(
            Status::Unknown,
            r::PROBE_PAUSED,
            format!(
                "the probe's report says it released the GPUs at {} for maintenance ({}), but the node is in maintenance no more: the GPUs are not judged until the probe reads them again, which it does within one interval of seeing the node back (a probe pod the DaemonSet controller removed is recreated first); if it stays so, look at the probe pod on this node",
                pause.since,
                if pause.labels.is_empty() {
                    "no label named".to_owned()
                } else {
                    pause.labels.join(", ")
                }
            ),
        );
        v.recheck_after_seconds = recheck;
        return Some(v);
    }
    let mut v = judge_report(spec, rules, facts, report, now);
    v.recheck_after_seconds = match (recheck, compute_recheck(rules, report, now)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Some(v)
}

/// Seconds until the latest compute check passes `maxAgeSeconds`, when the
/// profile judges its age: the controller schedules a re-check then.
fn compute_recheck(rules: &ProbeExpectation, report: &ProbeReport, now: Timestamp) -> Option<u64> {
    let cc = rules.compute_check.as_ref()?;
    if cc.max_age_seconds == 0 || cc.when_stale == ProbePolicy::Ignore {
        return None;
    }
    let ran = report
        .compute_check
        .as_ref()?
        .ran_at
        .as_deref()?
        .parse::<Timestamp>()
        .ok()?;
    let left = i64::from(cc.max_age_seconds) - (now.as_second() - ran.as_second());
    (left >= 0).then(|| u64::try_from(left + 1).unwrap_or(1))
}

fn judge_report(
    spec: &GpuNodeProfileSpec,
    rules: &ProbeExpectation,
    facts: &NodeFacts,
    report: &ProbeReport,
    now: Timestamp,
) -> HealthVerdict {
    if !report.nvml.usable {
        return verdict(
            Status::NotReady,
            r::NVML_UNUSABLE,
            format!(
                "NVML cannot be used in the probe's container ({}): check the node's NVIDIA driver (nvidia-smi on the host), the probe's RuntimeClass and NVIDIA_VISIBLE_DEVICES",
                report.nvml.error.as_deref().unwrap_or("no error given")
            ),
        );
    }
    let mut findings = Findings::default();
    compute_findings(rules, report, now, &mut findings);
    count_findings(spec, facts, report, &mut findings);
    for gpu in &report.gpus {
        gpu_findings(gpu, &mut findings);
    }
    let other_xids = event_findings(rules, report, &mut findings);
    if rules.check_labels {
        for m in label_contradictions(facts, report) {
            findings.fault(rank::LABELS, r::LABELS_CONTRADICT_PROBE, m);
        }
    }
    findings.verdict(report, &other_xids)
}
