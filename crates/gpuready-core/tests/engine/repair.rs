//! Sticky faults and their lifecycle: NVML's GPU recovery action as Health
//! reasons that say what to do, and the operator's repair annotation — faults
//! recorded before it no longer count; a time in the future or before the node
//! existed is refused and changes nothing. On the H200's recorded report.

use crate::common;

use common::*;
use gpuready_api::Layer;
use gpuready_api::keys::{self, health_reasons as r, lifecycle as lc};
use gpuready_api::probe::{EventKind, EventRecord, ProbeReport, RecoveryAction};
use gpuready_core::evaluate::Status;
use gpuready_core::health::{ProbeEvidence, parse_report};
use gpuready_core::{NodeAssessment, NodeFacts};

const H200_SMI: &str = include_str!("../fixtures/probe/h200-nvidia-smi.json");
const H200_RECOVERY: &str = include_str!("../fixtures/probe/h200-report-v2-recovery-action.json");
const UUID: &str = "GPU-72dbae72-2934-2a81-2c3a-c94870629f89";

fn h200_node() -> NodeBuilder {
    NodeBuilder::h200("h200-a")
}

fn report() -> ProbeReport {
    let mut r = parse_report(H200_SMI).expect("fixture parses");
    r.generated_at = at(-30).to_string();
    r
}

/// XID 79 on the H200, last seen `secs_ago`.
fn with_xid79(mut r: ProbeReport, secs_ago: i64) -> ProbeReport {
    r.events.monitored = true;
    r.events.records.push(EventRecord {
        gpu: UUID.into(),
        kind: EventKind::Xid,
        xid: Some(79),
        count: 1,
        first_seen: at(-secs_ago).to_string(),
        last_seen: at(-secs_ago).to_string(),
    });
    r
}

fn facts(node: &NodeBuilder, report: &ProbeReport) -> NodeFacts {
    node.facts()
        .with_probe(Some(ProbeEvidence::Report(Box::new(report.clone()))))
}

fn assess(node: &NodeBuilder, report: &ProbeReport) -> NodeAssessment {
    let p = profile("p", "");
    let sel = gpuready_core::select::profile_selector(&p).expect("selector");
    gpuready_core::assess(&facts(node, report), &[(&p, &sel)], &opts())
}

/// NVML's number (`nvmlDeviceGpuRecoveryAction_t`; none for what the probe
/// reports without one), the action, and the Health layer's word on the node:
/// `Ok(fragment)` Ready with the reading in its message, `Err((reason,
/// fragment))` NotReady.
type RecoveryRow = (
    Option<u64>,
    RecoveryAction,
    Result<&'static str, (&'static str, &'static str)>,
);

const RECOVERY_ROWS: &[RecoveryRow] = &[
    (
        Some(0),
        RecoveryAction::None,
        Ok("NVML recovery action: none needed"),
    ),
    (
        None,
        RecoveryAction::NotSupported,
        Ok("not supported by this driver"),
    ),
    (
        Some(1),
        RecoveryAction::GpuReset,
        Err((r::GPU_RESET_REQUIRED, "nvidia-smi -r")),
    ),
    (
        Some(2),
        RecoveryAction::NodeReboot,
        Err((r::NODE_REBOOT_REQUIRED, "reboot it")),
    ),
    (
        Some(3),
        RecoveryAction::DrainP2p,
        Err((r::DRAIN_REQUIRED, "peer-to-peer")),
    ),
    (
        Some(4),
        RecoveryAction::DrainAndReset,
        Err((r::DRAIN_AND_RESET_REQUIRED, "reduced capacity")),
    ),
    // The IMEX domain's, not the GPU's: said, never judged here.
    (
        Some(5),
        RecoveryAction::RecoverImexDomain,
        Ok("RECOVER_IMEX_DOMAIN: the GPU's IMEX domain needs recovery, not the GPU"),
    ),
    (
        Some(6),
        RecoveryAction::BusReset,
        Err((r::BUS_RESET_REQUIRED, "reset its PCIe bus")),
    ),
    (
        Some(7),
        RecoveryAction::SystemReboot,
        Err((r::SYSTEM_REBOOT_REQUIRED, "power-cycle the system")),
    ),
    // A newer driver's value fails safe.
    (
        Some(8),
        RecoveryAction::Unknown,
        Err((r::RECOVERY_ACTION_REQUIRED, "nvidia-smi -q")),
    ),
    (
        Some(4_294_967_295),
        RecoveryAction::Unknown,
        Err((r::RECOVERY_ACTION_REQUIRED, "nvidia-smi -q")),
    ),
];

#[test]
fn every_recovery_action_is_a_reason_that_says_what_to_do() {
    for (nvml, action, want) in RECOVERY_ROWS {
        if let Some(n) = nvml {
            assert_eq!(RecoveryAction::from_nvml(*n), *action, "NVML value {n}");
        }
        let mut rep = report();
        rep.gpus[0].recovery_action = Some(*action);
        let judged = gpuready_core::evaluate(&spec(""), &facts(&h200_node(), &rep), now());
        let health = judged.get(Layer::Health).expect("Health");
        let (status, reason, words) = match want {
            Ok(words) => (Status::Ready, r::PROBE_HEALTHY, *words),
            Err((reason, words)) => (Status::NotReady, *reason, *words),
        };
        assert_eq!(
            (health.status, health.reason.as_str()),
            (status, reason),
            "{action:?}: {}",
            health.message
        );
        assert!(
            health.message.contains(words),
            "{action:?}: {}",
            health.message
        );
        assert_eq!(judged.ready(), status == Status::Ready, "{action:?}");
    }
}

/// The report's spelling of each action: what an older or newer controller
/// reads (an unknown name is `Unknown`, never an error).
#[test]
fn recovery_actions_are_spelt_in_the_report_as_their_names() {
    for (action, name) in [
        (RecoveryAction::RecoverImexDomain, "RecoverImexDomain"),
        (RecoveryAction::BusReset, "BusReset"),
        (RecoveryAction::SystemReboot, "SystemReboot"),
    ] {
        assert_eq!(
            serde_json::to_value(action).expect("serialises"),
            serde_json::json!(name)
        );
        let back: RecoveryAction = serde_json::from_value(serde_json::json!(name)).expect("parses");
        assert_eq!(back, action);
    }
    let later: RecoveryAction =
        serde_json::from_value(serde_json::json!("SomethingNewer")).expect("parses");
    assert_eq!(later, RecoveryAction::Unknown);
}

#[test]
fn a_repair_mark_clears_a_fatal_xid_recorded_before_it() {
    let rep = with_xid79(report(), 3600);
    // Without a mark the XID counts.
    let before = assess(&h200_node(), &rep);
    assert_eq!(before.reason, r::FATAL_XID, "{}", before.message);
    // Repaired 30 minutes ago, after the XID: it no longer counts.
    for mark in [
        at(-1800).to_string(),
        format!(r#"{{"{UUID}": "{}"}}"#, at(-1800)),
    ] {
        let node = h200_node().annotate(lc::ANNOTATION_REPAIRED_AT, &mark);
        let a = assess(&node, &rep);
        assert_eq!(a.ready, Some(true), "{mark}: {}", a.message);
        assert!(
            a.message.contains(
                "1 fault record(s) from before the repair (gpuready.io/repaired-at) no longer count"
            ),
            "{}",
            a.message
        );
    }
    // Another GPU's mark repairs nothing here.
    let other = h200_node().annotate(
        lc::ANNOTATION_REPAIRED_AT,
        &format!(
            r#"{{"GPU-00000000-0000-0000-0000-000000000000": "{}"}}"#,
            at(-1800)
        ),
    );
    assert_eq!(assess(&other, &rep).reason, r::FATAL_XID);
}

#[test]
fn a_fault_seen_again_after_the_repair_counts() {
    let rep = with_xid79(report(), 60);
    let node = h200_node().annotate(lc::ANNOTATION_REPAIRED_AT, &at(-1800).to_string());
    assert_eq!(assess(&node, &rep).reason, r::FATAL_XID);
}

#[test]
fn a_future_or_pre_creation_repair_is_refused_and_changes_nothing() {
    let rep = with_xid79(report(), 3600);
    let created = at(-86_400);
    let node = |mark: &str| {
        let mut n = h200_node()
            .annotate(lc::ANNOTATION_REPAIRED_AT, mark)
            .build();
        n.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            created,
        ));
        NodeBuilder::from_node(n)
    };
    for (mark, why) in [
        (at(3600).to_string(), "is in the future"),
        (at(-2 * 86_400).to_string(), "before the node was created"),
        ("last tuesday".to_owned(), "not an RFC 3339 time"),
    ] {
        let a = assess(&node(&mark), &rep);
        // Changes nothing: the fatal XID still counts.
        assert_eq!(a.reason, r::FATAL_XID, "{mark}");
        assert!(
            a.message.contains("is refused and changes nothing") && a.message.contains(why),
            "{mark}: {}",
            a.message
        );
        let refused = a
            .lifecycle
            .repair
            .as_ref()
            .and_then(|r| r.refused.as_deref());
        assert!(refused.is_some_and(|r| r.contains(why)), "{refused:?}");
        // Refused on a healthy node too: the condition says so.
        let healthy = assess(&node(&mark), &report());
        assert!(
            healthy.message.contains("is refused"),
            "{}",
            healthy.message
        );
        assert_eq!(healthy.ready, Some(true));
    }
    // The key is gpuready's domain, read but never written by gpuready.
    assert!(lc::ANNOTATION_REPAIRED_AT.starts_with(keys::KEY_PREFIX));
}

/// What NVML answered on the real H200 (driver 580.159.04): recovery action
/// 0, none needed, and the Health layer says so.
#[test]
fn the_real_h200_reads_recovery_action_none() {
    let mut rep = parse_report(H200_RECOVERY).expect("the captured report parses");
    assert_eq!(rep.gpus[0].recovery_action, Some(RecoveryAction::None));
    assert!(rep.gpus[0].errors.is_empty(), "{:?}", rep.gpus[0].errors);
    rep.generated_at = at(-30).to_string();
    let judged = gpuready_core::evaluate(&spec(""), &facts(&h200_node(), &rep), now());
    let health = judged.get(Layer::Health).expect("Health");
    assert_eq!(health.reason, r::PROBE_HEALTHY, "{}", health.message);
    assert!(
        health.message.contains("NVML recovery action: none needed"),
        "{}",
        health.message
    );
}
