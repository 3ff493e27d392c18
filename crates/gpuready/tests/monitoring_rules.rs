//! The chart's alerts, checked by a real Prometheus's own tool against series
//! gpuready really exports.
//!
//! `tests/monitoring/metrics-capture.prom` is the `/metrics` text of a real run:
//! gpuready's controller against the test API server with a ready node, a broken
//! one, a broken node of an `Observe` profile, two nodes whose probe report is
//! missing or stale, and a DRA node with one GPU gated by a DeviceTaintRule
//! (XID 79), with `--nfd-crds=check` (no NFD CRDs: `missing`). The first test
//! runs that scenario again and fails when what gpuready exports no longer
//! matches the capture (regenerate with
//! `UPDATE_METRICS_CAPTURE=1 cargo test -p gpuready --test monitoring_rules`).
//! The second renders the chart's PrometheusRule, runs `promtool check rules`
//! and `promtool test rules tests/monitoring/rules-test.yaml` on it (promtool
//! from tests/monitoring/build.sh), and checks that every alert the chart renders
//! has a case where it fires and one where it stays silent, and that every input
//! series of those cases has exactly the labels of a captured series plus the
//! target labels Prometheus adds when it scrapes through the chart's
//! ServiceMonitor (the live suite, monitoring_e2e, checks those on a real
//! Prometheus).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use gpuready::probe::publish::publish;
use gpuready_api::probe::ProbeReport;
use serde_json::{Value, json};
use support::*;

const CAPTURE: &str = "tests/monitoring/metrics-capture.prom";
const RULES_TEST: &str = "tests/monitoring/rules-test.yaml";
/// The namespace the rule tests' series and the rendered rules name.
const NAMESPACE: &str = "gpuready-system";

/// One sample line of the text format: metric name and labels.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Series {
    name: String,
    labels: BTreeMap<String, String>,
}

/// Parses `name{a="x",b="y"}` (a series selector as promtool's input takes it,
/// or a sample line without its value).
fn parse_series(text: &str) -> Series {
    let text = text.trim();
    let (name, rest) = text.split_once('{').unwrap_or((text, "}"));
    let body = rest.trim_end().strip_suffix('}').expect("closing brace");
    let mut labels = BTreeMap::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').expect("label=value");
        let after = after.trim_start().strip_prefix('"').expect("quoted value");
        let end = after.find('"').expect("closing quote");
        labels.insert(key.trim().to_owned(), after[..end].to_owned());
        rest = after[end + 1..].trim_start().trim_start_matches(',').trim();
    }
    Series {
        name: name.trim().to_owned(),
        labels,
    }
}

/// The series of an exposition text (comments and `# EOF` left out).
fn samples(text: &str) -> Vec<Series> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| parse_series(l.rsplit_once(' ').expect("sample value").0))
        .collect()
}

/// What must stay equal between a run and the capture: every gauge series
/// exactly (the node and profile gauges are deterministic once converged), and
/// for counters and histograms, whose series depend on timing, the name and
/// label names.
fn shape(text: &str) -> BTreeSet<String> {
    let counters: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter(|l| !l.ends_with(" gauge"))
        .filter_map(|l| l.split(' ').next())
        .collect();
    samples(text)
        .into_iter()
        .map(|s| {
            let family = counters.iter().find(|c| s.name.starts_with(*c)).copied();
            match family {
                Some(_) => format!(
                    "{}{{{}}}",
                    s.name,
                    s.labels
                        .keys()
                        .filter(|k| *k != "le")
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                None => format!("{}{:?}", s.name, s.labels),
            }
        })
        .collect()
}

/// A stale report: generated an hour ago.
fn stale_report(node: &str) -> ProbeReport {
    ProbeReport {
        api_version: gpuready_api::probe::PROBE_REPORT_API_VERSION.into(),
        node: Some(node.into()),
        generated_at: (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1)).to_string(),
        probe_started_at: "2026-11-30T12:00:00Z".into(),
        probe_version: "test".into(),
        ..ProbeReport::default()
    }
}

/// The scenario of the capture, converged; returns gpuready's /metrics text.
async fn capture_run() -> String {
    let env = shared_env_with_crds(&[CRD_FILE]).await;
    let client = env.client().expect("client");
    let ns = env.create_namespace("gpuready").await.expect("namespace");
    create_node(&client, "gpu-ready", rtx3090_in("enforce"), 1, json!([])).await;
    create_node(&client, "gpu-broken", rtx3090_in("enforce"), 1, json!([])).await;
    set_node_status(&client, "gpu-broken", 1, 0, true).await;
    apply_profile(&client, &rtx3090_profile("training", "enforce", "")).await;
    create_node(&client, "gpu-observed", rtx3090_in("observe"), 1, json!([])).await;
    set_node_status(&client, "gpu-observed", 1, 0, true).await;
    apply_profile(
        &client,
        &rtx3090_profile("canary", "observe", "mode: Observe"),
    )
    .await;
    create_node(&client, "gpu-no-report", rtx3090_in("probed"), 1, json!([])).await;
    create_node(
        &client,
        "gpu-stale-report",
        rtx3090_in("probed"),
        1,
        json!([]),
    )
    .await;
    apply_profile(
        &client,
        &rtx3090_profile(
            "inference",
            "probed",
            "probe: {whenMissing: Blocking, maxReportAgeSeconds: 300}",
        ),
    )
    .await;
    publish(
        &client,
        &ns,
        "gpu-stale-report",
        &stale_report("gpu-stale-report"),
    )
    .await
    .expect("publish the stale report");
    // A DRA node whose probe saw XID 79 on one of its 8 GPUs: that GPU is
    // gated by a DeviceTaintRule, the node stays ready with 7.
    dra_only_node(&client, "gpu-h200", "dra").await;
    let slice = eight_gpu_slice("gpu-h200");
    put_slice(&client, &slice).await;
    apply_profile(
        &client,
        &h200_profile("h200", "dra", "  deviceGating: {minReadyGpus: 7}"),
    )
    .await;
    publish(
        &client,
        &ns,
        "gpu-h200",
        &h200_report("gpu-h200", &slice, &["gpu-3"]),
    )
    .await
    .expect("publish the H200 report");
    let run = start_controller(
        env,
        run_args(&[&format!("--probe-namespace={ns}"), "--nfd-crds=check"]),
    );
    let want = [
        ("gpu-broken", "DevicesUnhealthy"),
        ("gpu-observed", "DevicesUnhealthy"),
        ("gpu-no-report", "ProbeMissing"),
        ("gpu-stale-report", "ProbeReportStale"),
    ];
    let text = eventually(
        90,
        "every broken node in gpuready_node_not_ready",
        || async {
            let text = run.metrics.encode();
            let done = want.iter().all(|(node, reason)| {
                samples(&text).iter().any(|s| {
                    s.name == "gpuready_node_not_ready"
                        && s.labels.get("node").map(String::as_str) == Some(*node)
                        && s.labels.get("reason").map(String::as_str) == Some(*reason)
                })
            }) && text
                .contains("gpuready_nodes{profile=\"training\",state=\"ready\"} 1")
                && text.contains(
                    "gpuready_node_tainted_devices{profile=\"h200\",node=\"gpu-h200\"} 1",
                )
                && text.contains("gpuready_nfd_crd_state{");
            done.then_some(text)
        },
    )
    .await;
    run.stop().await.expect("controller stops");
    text
}

#[tokio::test]
async fn the_metrics_capture_is_what_gpuready_exports_in_a_live_run() {
    let text = capture_run().await;
    let path = repo_root().join(CAPTURE);
    if std::env::var_os("UPDATE_METRICS_CAPTURE").is_some() {
        let header = "# The /metrics text of gpuready's controller in a real run against the test API\n\
# server (crates/gpuready/tests/monitoring_rules.rs). Regenerate with\n\
# UPDATE_METRICS_CAPTURE=1 cargo test -p gpuready --test monitoring_rules\n";
        std::fs::write(&path, format!("{header}{text}")).expect("write the capture");
    }
    let captured = std::fs::read_to_string(&path).expect("the metrics capture");
    let (now, then) = (shape(&text), shape(&captured));
    assert_eq!(
        now.difference(&then).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "series gpuready exports now and the capture lacks (regenerate with UPDATE_METRICS_CAPTURE=1)"
    );
    assert_eq!(
        then.difference(&now).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "series of the capture gpuready no longer exports (regenerate with UPDATE_METRICS_CAPTURE=1)"
    );
}

/// The chart's rules with every alert on, as a Prometheus rule file.
async fn chart_rules(env: &gpuready_testenv::TestEnv) -> Value {
    let text = render(
        env,
        "gpuready",
        NAMESPACE,
        &[
            "--set",
            "prometheusRule.enabled=true",
            // Off by default; on here so that it is tested like the others.
            "--set",
            "prometheusRule.timeToReadyHigh.enabled=true",
            "--show-only",
            "templates/prometheusrule.yaml",
        ],
    )
    .await;
    let docs = yaml_documents(&text);
    json!({ "groups": find_doc(&docs, "PrometheusRule", None)["spec"]["groups"] })
}

#[tokio::test]
async fn every_chart_alert_passes_promtool_with_cases_over_captured_series() {
    let env = shared_env_with_crds(&[CRD_FILE]).await;
    let promtool = promtool();
    let rules = chart_rules(env).await;
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml_ng::to_string(&rules).expect("rules YAML"),
    )
    .expect("write rules");
    let tests_text = std::fs::read_to_string(repo_root().join(RULES_TEST)).expect("rules test");
    std::fs::write(dir.path().join("rules-test.yaml"), &tests_text).expect("copy rules test");

    for args in [
        ["check", "rules", "rules.yaml"],
        ["test", "rules", "rules-test.yaml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("run promtool");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("promtool {}:\n{said}", args.join(" "));
        assert!(
            out.status.success(),
            "promtool {} failed:\n{said}",
            args.join(" ")
        );
    }

    // Every alert has a case where it fires and one where it stays silent.
    let tests: Value = serde_yaml_ng::from_str(&tests_text).expect("rules test YAML");
    let mut cases: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for t in tests["tests"].as_array().expect("tests") {
        for c in t["alert_rule_test"].as_array().into_iter().flatten() {
            let e = cases
                .entry(c["alertname"].as_str().expect("alertname").to_owned())
                .or_default();
            if c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()) {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }
    let alerts: Vec<String> = rules["groups"][0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|r| r["alert"].as_str().map(str::to_owned))
        .collect();
    eprintln!("{:<30} {:>6} {:>7}", "ALERT", "FIRES", "SILENT");
    for a in &alerts {
        let (fires, silent) = cases.get(a).copied().unwrap_or_default();
        eprintln!("{a:<30} {fires:>6} {silent:>7}");
        assert!(
            fires > 0 && silent > 0,
            "{a}: {fires} case(s) where it fires and {silent} where it stays silent in {RULES_TEST}"
        );
    }

    // Every input series is shaped like a captured one: the same metric, the
    // same label names plus the target labels, the captured profile and node.
    let captured = samples(&std::fs::read_to_string(repo_root().join(CAPTURE)).expect("capture"));
    for t in tests["tests"].as_array().expect("tests") {
        for input in t["input_series"].as_array().into_iter().flatten() {
            let s = parse_series(input["series"].as_str().expect("series"));
            let names: BTreeSet<&str> = s.labels.keys().map(String::as_str).collect();
            for l in TARGET_LABELS {
                assert!(names.contains(l), "{s:?} lacks the target label {l}");
            }
            assert_eq!(s.labels["namespace"], NAMESPACE, "{s:?}");
            if s.name == "up" {
                continue;
            }
            let own: BTreeSet<&str> = names
                .iter()
                .copied()
                .filter(|l| !TARGET_LABELS.contains(l))
                .collect();
            let like: Vec<&Series> = captured.iter().filter(|c| c.name == s.name).collect();
            assert!(
                !like.is_empty(),
                "{}: no such series in the capture (is it a metric gpuready exports?)",
                s.name
            );
            assert!(
                like.iter()
                    .any(|c| c.labels.keys().map(String::as_str).collect::<BTreeSet<_>>() == own),
                "{s:?}: no captured {} series has exactly these labels",
                s.name
            );
            for key in ["profile", "node"] {
                if let Some(v) = s.labels.get(key) {
                    assert!(
                        captured.iter().any(|c| c.labels.get(key) == Some(v)),
                        "{s:?}: {key} {v} is not in the capture"
                    );
                }
            }
        }
    }
}
