//! The chart's Grafana dashboard and Prometheus alerts query only metrics
//! gpuready exports, the names read from its metric registry, so a renamed
//! metric fails here rather than in an empty panel. How the alerts fire is
//! `monitoring_rules.rs`.

use crate::support;

use std::collections::BTreeSet;

use serde_json::Value;
use support::*;

/// Sample names gpuready exports, from the metric registry's `# TYPE` lines (a
/// family only shows up once it has a sample, so each gets one).
fn exported_samples() -> BTreeSet<String> {
    use gpuready::controller::metrics::{
        CrdState, Kind, NodeLayer, NodeNotReady, NodeSeries, Profile, ProfileLayer,
        ProfileNoExecute, ProfileNode, ProfileState,
    };
    let m = gpuready::controller::Metrics::default();
    let (profile, s) = ("p".to_owned(), "s".to_owned());
    m.nodes
        .get_or_create(&ProfileState {
            profile: profile.clone(),
            state: s.clone(),
        })
        .set(1);
    m.layer_ready
        .get_or_create(&ProfileLayer {
            profile: profile.clone(),
            layer: s.clone(),
        })
        .set(1);
    m.brake
        .get_or_create(&Profile {
            profile: profile.clone(),
        })
        .set(1);
    m.no_execute
        .get_or_create(&ProfileNoExecute {
            profile: profile.clone(),
            kind: s.clone(),
            state: s.clone(),
        })
        .set(1);
    m.tainted_devices
        .get_or_create(&Profile {
            profile: profile.clone(),
        })
        .set(1);
    m.not_evicted_pods
        .get_or_create(&Profile {
            profile: profile.clone(),
        })
        .set(1);
    // The clocks' histograms: every series of a profile, as its status creates them.
    m.clocks.start(&profile);
    // The per-node families, from one not-ready node with a gated GPU.
    let node = |s: &str| s.to_owned();
    m.set_node_series(
        "p",
        NodeSeries {
            not_ready: [NodeNotReady {
                profile: node("p"),
                node: node("n"),
                mode: node("Enforce"),
                state: node("not_ready"),
                layer: node("Health"),
                reason: node("ProbeMissing"),
            }]
            .into(),
            layers: [NodeLayer {
                profile: node("p"),
                node: node("n"),
                layer: node("Health"),
                reason: node("ProbeMissing"),
            }]
            .into(),
            tainted_devices: [(
                ProfileNode {
                    profile: node("p"),
                    node: node("n"),
                },
                1,
            )]
            .into(),
        },
    );
    m.reconcile_errors
        .get_or_create(&Kind { kind: s.clone() })
        .inc();
    m.count_write("labels");
    m.count_request("GET", false);
    m.nfd_crds
        .get_or_create(&CrdState {
            crd: s.clone(),
            state: s,
        })
        .set(1);
    let text = m.encode();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// Every `gpuready_*` metric name in the PromQL strings of a JSON/YAML tree.
fn used_metrics(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(i) = rest.find("gpuready_") {
                let tail = &rest[i..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                    .unwrap_or(tail.len());
                out.insert(tail[..end].to_owned());
                rest = &tail[end..];
            }
        }
        Value::Array(a) => a.iter().for_each(|x| used_metrics(x, out)),
        Value::Object(o) => o.values().for_each(|x| used_metrics(x, out)),
        _ => {}
    }
}

#[tokio::test]
async fn dashboard_and_alerts_use_only_metrics_gpuready_exports() {
    let env = chart_env().await;
    let exported = exported_samples();
    assert!(exported.contains("gpuready_nodes"), "{exported:?}");

    let text = std::fs::read_to_string(repo_root().join("deploy/grafana/gpuready-dashboard.json"))
        .expect("dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut exprs = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        used_metrics(&panel["targets"], &mut exprs);
    }
    used_metrics(&dashboard["templating"], &mut exprs);
    // A name regex (`__name__=~"gpuready_node_.*"`) leaves its prefix: it must
    // match an exported metric.
    let unknown: Vec<_> = exprs
        .difference(&exported)
        .filter(|m| !(m.ends_with('_') && exported.iter().any(|e| e.starts_with(m.as_str()))))
        .collect();
    assert!(
        unknown.is_empty(),
        "the dashboard queries unknown metrics {unknown:?}"
    );
    for needed in [
        "gpuready_nodes",
        "gpuready_layer_ready_nodes",
        "gpuready_reconcile_duration_seconds_bucket",
        "gpuready_reconcile_errors_total",
        "gpuready_writes_total",
        "gpuready_safety_brake_engaged",
        "gpuready_leader",
        "gpuready_nfd_crd_state",
        "gpuready_node_not_ready",
        "gpuready_node_layer_not_ready",
        "gpuready_node_tainted_devices",
        "gpuready_tainted_devices",
        "gpuready_time_to_ready_seconds_bucket",
        "gpuready_layer_ready_seconds_bucket",
        "gpuready_time_to_gate_seconds_bucket",
    ] {
        assert!(
            exprs.contains(needed),
            "the dashboard does not show {needed}"
        );
    }

    let rules = render(
        env,
        RELEASE,
        "default",
        &[
            "--set",
            "prometheusRule.enabled=true",
            // Off by default: on, so that its metric is checked too.
            "--set",
            "prometheusRule.timeToReadyHigh.enabled=true",
        ],
    )
    .await;
    let docs = yaml_documents(&rules);
    let mut alerts = BTreeSet::new();
    used_metrics(
        &find_doc(&docs, "PrometheusRule", None)["spec"],
        &mut alerts,
    );
    let unknown: Vec<_> = alerts.difference(&exported).collect();
    assert!(
        unknown.is_empty(),
        "the alerts use unknown metrics {unknown:?}"
    );
}
