//! The External layer: outside verdicts (a provider's GPU health agent,
//! node-problem-detector checks) read from Node conditions, per documented
//! preset (`fixtures/external/presets.yaml`), healthy and broken; a custom
//! condition, heartbeats that go stale, `Unknown`, and conditions the node
//! does not carry; nothing read unless a profile names it.

mod common;

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
    healthy: Vec<Cond>,
    broken: Vec<Cond>,
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
    assert_eq!(t.cases.len(), 4, "one case per preset");
    for case in &t.cases {
        let profile = format!("external: {{presets: [{}]}}", case.preset);
        let ok = judge(&profile, &node_with(&case.healthy, 30));
        let l = ok.expect(Layer::External, Status::Ready, r::HEALTHY);
        assert_eq!(l.evidence, Source::NodeConditions, "{}", case.preset);
        l.mentions(&[&case.healthy[0].type_, &format!("(preset {})", case.preset)]);
        assert!(ok.ready(), "{}: {ok:?}", case.preset);

        let bad = judge(&profile, &node_with(&case.broken, 30));
        let broken = case
            .broken
            .iter()
            .find(|c| c.status != case.healthy[0].status || c.type_ != case.healthy[0].type_)
            .expect("a broken condition");
        bad.expect(Layer::External, Status::NotReady, r::BROKEN)
            .mentions(&[
                &format!("{}={}", broken.type_, broken.status),
                &broken.reason,
                &broken.message,
            ]);
        assert!(!bad.ready(), "{}", case.preset);
        assert_eq!(
            bad.first_failure().map(|l| l.layer),
            Some(Layer::External),
            "{}",
            case.preset
        );
    }
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
