//! The External layer: outside verdicts (a provider's GPU health agent,
//! node-problem-detector checks) read from Node conditions, per documented
//! preset (`fixtures/external/presets.yaml`), healthy and broken; a custom
//! condition, heartbeats that go stale, `Unknown`, and conditions the node
//! does not carry; nothing read unless a profile names it.

use crate::common;

use common::*;
use gpuready_api::Layer;
use gpuready_api::keys::external as r;
use gpuready_core::evaluate::Status;
use gpuready_core::evidence::Source;
use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;

#[derive(Deserialize)]
struct Table {
    cases: Vec<PresetCase>,
}

#[derive(Deserialize)]
struct PresetCase {
    preset: String,
    /// Empty for an agent that writes its condition only on a problem.
    healthy: Vec<Cond>,
    broken: Vec<Cond>,
    /// More the broken verdict's message must say.
    #[serde(default)]
    mentions: Vec<String>,
}

#[derive(Deserialize, Clone)]
struct Cond {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: String,
    message: String,
}

fn condition(c: &Cond, heartbeat_secs_ago: i64) -> NodeCondition {
    NodeCondition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        reason: Some(c.reason.clone()),
        message: Some(c.message.clone()),
        last_heartbeat_time: Some(Time(at(-heartbeat_secs_ago))),
        last_transition_time: Some(Time(at(-3600))),
    }
}

fn node_with(conds: &[Cond], heartbeat_secs_ago: i64) -> NodeBuilder {
    conds.iter().fold(NodeBuilder::gpu("n"), |b, c| {
        b.condition(condition(c, heartbeat_secs_ago))
    })
}

fn table() -> Table {
    let path = format!(
        "{}/tests/fixtures/external/presets.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_yaml_ng::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("table")
}

#[test]
fn each_preset_reads_its_documented_conditions_healthy_and_broken() {
    let t = table();
    assert_eq!(t.cases.len(), 6, "one case per preset");
    for case in &t.cases {
        let profile = format!("external: {{presets: [{}]}}", case.preset);
        let ok = judge(&profile, &node_with(&case.healthy, 30));
        let l = ok.expect(Layer::External, Status::Ready, r::HEALTHY);
        assert_eq!(l.evidence, Source::NodeConditions, "{}", case.preset);
        let first = case.healthy.first().unwrap_or(&case.broken[0]);
        l.mentions(&[&first.type_, &format!("(preset {})", case.preset)]);
        assert!(ok.ready(), "{}: {ok:?}", case.preset);

        let bad = judge(&profile, &node_with(&case.broken, 30));
        // The broken condition: the one whose status differs from its
        // healthy twin (or any, where the healthy node carries none).
        let broken = case
            .broken
            .iter()
            .find(|c| {
                !case
                    .healthy
                    .iter()
                    .any(|h| h.type_ == c.type_ && h.status == c.status)
            })
            .expect("a broken condition");
        let mut want = vec![format!("{}={}", broken.type_, broken.status)];
        if case.mentions.is_empty() {
            want.push(broken.reason.clone());
            want.push(broken.message.clone());
        }
        want.extend(case.mentions.iter().cloned());
        bad.expect(Layer::External, Status::NotReady, r::BROKEN)
            .mentions(&want.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(!bad.ready(), "{}", case.preset);
        assert_eq!(
            bad.first_failure().map(|l| l.layer),
            Some(Layer::External),
            "{}",
            case.preset
        );
    }
}

/// GKE's device plugin writes `XidCriticalError` only on a critical XID: a
/// node without it is healthy whatever `whenMissing` says, and a reason that
/// is not the plugin's JSON object is shown as written.
#[test]
fn gke_xids_are_listed_and_an_absent_condition_is_healthy() {
    let xid = |reason: &str, message: &str| Cond {
        type_: "XidCriticalError".into(),
        status: "True".into(),
        reason: reason.into(),
        message: message.into(),
    };
    let profile = "external: {presets: [GkeDevicePlugin], whenMissing: Blocking}";
    judge(profile, &NodeBuilder::gpu("n"))
        .expect(Layer::External, Status::Ready, r::HEALTHY)
        .mentions(&["not on the node, which means healthy", "XidCriticalError"]);
    for (reason, message, says) in [
        (
            r#"{"31":true}"#,
            "boot-1",
            "XidCriticalError=True (XID 31; recorded in boot boot-1",
        ),
        // Numbers in numeric order.
        (
            r#"{"119":true,"48":true,"79":true}"#,
            "",
            "(XIDs 48, 79, 119)",
        ),
        // A GPU's UUID, should a plugin write one.
        (r#"{"48":true}"#, "GPU-5f1c", "(XID 48 on GPU-5f1c)"),
        // Not the plugin's JSON: as written, never a panic.
        (
            "XidCriticalError",
            "GPU fell off the bus",
            "(XidCriticalError: GPU fell off the bus)",
        ),
        ("{not json", "", "({not json)"),
        ("{}", "boot-1", "({}: boot-1)"),
        (r#"{"48":false}"#, "", r#"({"48":false})"#),
        ("[48, 79]", "", "([48, 79])"),
    ] {
        judge(profile, &node_with(&[xid(reason, message)], 30))
            .expect(Layer::External, Status::NotReady, r::BROKEN)
            .mentions(&[says]);
    }
}

/// node-problem-detector writes a configured monitor's conditions `False`
/// from its start: one it does not write (an NPD before v0.8.21 has no CPER
/// rule, a setup without readonly-monitor.json) is judged by `whenMissing`.
#[test]
fn npd_conditions_an_older_npd_does_not_write_follow_when_missing() {
    let t = table();
    let npd = t
        .cases
        .iter()
        .find(|c| c.preset == "NodeProblemDetector")
        .expect("npd case");
    let without_cper: Vec<Cond> = npd
        .healthy
        .iter()
        .filter(|c| c.type_ != "CperHardwareErrorFatal")
        .cloned()
        .collect();
    judge(
        "external: {presets: [NodeProblemDetector]}",
        &node_with(&without_cper, 30),
    )
    .expect(Layer::External, Status::Ready, r::HEALTHY)
    .mentions(&["(ignored, external.whenMissing Ignore): node-problem-detector (preset NodeProblemDetector): CperHardwareErrorFatal"]);
    judge(
        "external: {presets: [NodeProblemDetector], whenMissing: Unknown}",
        &node_with(&without_cper, 30),
    )
    .expect(Layer::External, Status::Unknown, r::MISSING)
    .mentions(&["CperHardwareErrorFatal"]);
}

#[test]
fn nothing_outside_is_read_unless_the_profile_names_it() {
    let t = table();
    let broken = &t.cases[0].broken;
    let r = judge("", &node_with(broken, 30));
    assert!(r.get(Layer::External).is_none());
    assert!(r.ready());
}

#[test]
fn custom_conditions_heartbeats_unknown_and_missing() {
    let gpu_healthy = |status: &str| Cond {
        type_: "example.com/GpuHealthy".into(),
        status: status.into(),
        reason: "Checked".into(),
        message: "dcgmi diag -r 1".into(),
    };
    let profile = "external: {conditions: [{type: example.com/GpuHealthy, brokenWhen: \"False\"}], maxHeartbeatAgeSeconds: 600}";
    let ok = judge(profile, &node_with(&[gpu_healthy("True")], 30));
    ok.expect(Layer::External, Status::Ready, r::HEALTHY)
        .mentions(&["example.com/GpuHealthy=True", "external.conditions"]);
    // The next look falls when the heartbeat would pass the limit.
    assert_eq!(ok.recheck_after_seconds, Some(571));
    judge(profile, &node_with(&[gpu_healthy("False")], 30)).expect(
        Layer::External,
        Status::NotReady,
        r::BROKEN,
    );
    judge(profile, &node_with(&[gpu_healthy("True")], 601))
        .expect(Layer::External, Status::Unknown, r::STALE)
        .mentions(&["last heartbeat 601 s ago, limit 600 s"]);
    judge(profile, &node_with(&[gpu_healthy("Unknown")], 30)).expect(
        Layer::External,
        Status::Unknown,
        r::UNKNOWN,
    );
    // Not on the node: ignored by default, else as whenMissing says.
    judge(profile, &NodeBuilder::gpu("n"))
        .expect(Layer::External, Status::Ready, r::HEALTHY)
        .mentions(&["not on the node (ignored, external.whenMissing Ignore): external.conditions: example.com/GpuHealthy"]);
    judge(
        "external: {presets: [NebiusGpuHealthChecks], whenMissing: Blocking}",
        &NodeBuilder::gpu("n"),
    )
    .expect(Layer::External, Status::NotReady, r::MISSING)
    .mentions(&["NebiusGPUError"]);
    judge(
        "external: {presets: [NebiusGpuHealthChecks], whenMissing: Unknown}",
        &NodeBuilder::gpu("n"),
    )
    .expect(Layer::External, Status::Unknown, r::MISSING);
    // The profile's own entry for a preset's type says which status is broken.
    let eks_true = Cond {
        type_: "AcceleratedHardwareReady".into(),
        status: "True".into(),
        reason: "NvidiaGPUIsReady".into(),
        message: "m".into(),
    };
    judge(
        "external: {presets: [EksNodeMonitoringAgent], conditions: [{type: AcceleratedHardwareReady}]}",
        &node_with(&[eks_true], 30),
    )
    .expect(Layer::External, Status::NotReady, r::BROKEN);
}
