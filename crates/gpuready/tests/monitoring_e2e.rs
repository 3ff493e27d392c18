//! Monitoring for real: a real Prometheus (3.x, built from its Go module by
//! tests/monitoring/build.sh) runs as a Pod in the real single-node cluster of
//! tests/cluster and scrapes the chart's gpuready pods through the chart's
//! metrics Service exactly as the chart's ServiceMonitor describes it: the
//! ServiceMonitor and PrometheusRule are created by `helm install`, validated
//! by the Prometheus Operator's own CRDs (its released files), read back from
//! the API server and turned into the scrape job and rule file the Operator
//! generates from them (Kubernetes endpoints discovery, the same relabelling).
//! Then, with the alerts' `for` shortened by values:
//!
//! - a GPU node breaks: `GpuReadyNodeNotReady` goes pending, then firing, with
//!   its node and profile; repaired, it resolves (timestamps printed); a broken
//!   node of an `Observe` profile never alerts;
//! - a fatal XID in a ready node's probe report, gated and timed (the
//!   time-to-gate histogram in Prometheus);
//! - a node with no probe report and a node with a GPU held by a
//!   DeviceTaintRule fire their alerts;
//! - every metric docs/operations.md lists is in Prometheus with exactly the
//!   labels it lists (plus the scrape's target labels);
//! - the Grafana dashboard, read by the Grafana Foundation SDK's strict schema
//!   (tests/monitoring/dashboard-schema), has every panel's query parse and
//!   return series, and its variables resolve to the live values.
//!
//! Runs only with `GPUREADY_CLUSTER_E2E` set (tests/run.sh, as root), like
//! cluster_e2e; otherwise prints NOT RUN.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gpuready::probe::publish::publish;
use gpuready_api::keys;
use serde_json::{Value, json};
use support::cluster::{Cluster, ClusterImages, Heartbeat};
use support::*;

const NS: &str = "gpuready-system";
const MON: &str = "monitoring";
const WAIT: u64 = 180;
/// Keeps pods off the kubelet-less GPU nodes (as in cluster_e2e).
const NO_KUBELET: &str = "e2e.gpuready.test/no-kubelet";
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_real_prometheus_scrapes_gpuready_and_its_alerts_fire_and_resolve() {
    let Some(images) = ClusterImages::from_env(
        "a_real_prometheus_scrapes_gpuready_and_its_alerts_fire_and_resolve",
    ) else {
        return;
    };
    let mon = monitoring_dir();
    let prometheus_tar = mon.join("prometheus-server/prometheus.tar");
    assert!(
        prometheus_tar.is_file(),
        "{} is missing: run tests/monitoring/build.sh after tests/cluster/build.sh",
        prometheus_tar.display()
    );
    let mut tars = images.tarballs.clone();
    tars.push(prometheus_tar);
    let started = Instant::now();
    let cluster = Cluster::up(&tars).await;
    let (beat, beating) = Heartbeat::start(cluster.client.clone());
    let result = tokio::time::timeout(
        Duration::from_secs(900),
        suite(&cluster, &images, &beat, &mon),
    )
    .await;
    beating.abort();
    assert!(
        result.is_ok(),
        "the monitoring suite did not finish in 15 minutes"
    );
    let mut cluster = cluster;
    let down = cluster.down();
    say!(
        "cluster down in {:.1}s; whole suite {:.1}s",
        down.as_secs_f64(),
        since(started)
    );
}

async fn suite(c: &Cluster, images: &ClusterImages, beat: &Heartbeat, mon: &std::path::Path) {
    // ---- the Prometheus Operator's CRDs, as it releases them
    let crds = mon.join("operator-crds");
    for kind in ["servicemonitors", "prometheusrules"] {
        let file = crds.join(format!("{kind}.yaml"));
        c.must_kubectl(
            &[
                "apply",
                "--server-side",
                "-f",
                file.to_str().expect("utf-8"),
            ],
            None,
        )
        .await;
    }
    c.must_kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/servicemonitors.monitoring.coreos.com",
            "crd/prometheusrules.monitoring.coreos.com",
        ],
        None,
    )
    .await;

    // ---- the chart, with its ServiceMonitor and PrometheusRule
    c.restricted_namespace(NS).await;
    let (repo, tag) = images.operator.rsplit_once(':').expect("repo:tag");
    let (probe_repo, probe_tag) = images.probe.rsplit_once(':').expect("repo:tag");
    let sets = [
        format!("image.repository={repo}"),
        format!("image.tag={tag}"),
        // The controller reads probe reports; the probe itself runs only on
        // the real node (no NVIDIA runtime there), which no profile governs.
        "probe.enabled=true".to_owned(),
        format!("probe.image.repository={probe_repo}"),
        format!("probe.image.tag={probe_tag}"),
        "probe.runtimeClassName=".to_owned(),
        format!("probe.nodeSelector.kubernetes\\.io/hostname={}", c.node),
        "metrics.serviceMonitor.enabled=true".to_owned(),
        "metrics.serviceMonitor.interval=5s".to_owned(),
        "metrics.serviceMonitor.scrapeTimeout=4s".to_owned(),
        "prometheusRule.enabled=true".to_owned(),
        "prometheusRule.gpuNodeNotReady.for=30s".to_owned(),
        "prometheusRule.probeReportsMissing.for=30s".to_owned(),
        "prometheusRule.badGpus.for=30s".to_owned(),
        // Off by default; on here with a threshold every join passes.
        "prometheusRule.timeToReadyHigh.enabled=true".to_owned(),
        "prometheusRule.timeToReadyHigh.thresholdSeconds=1".to_owned(),
    ];
    let chart = repo_root().join("charts/gpuready");
    let chart = chart.to_str().expect("utf-8 path");
    let mut args = vec![
        "install",
        "gpuready",
        chart,
        "-n",
        NS,
        "--wait",
        "--timeout",
        "5m",
    ];
    for s in &sets {
        args.extend(["--set", s.as_str()]);
    }
    let t = Instant::now();
    c.must_helm(&args).await;
    say!(
        "helm install with the ServiceMonitor and PrometheusRule (admitted by the Operator's CRDs): {:.1}s",
        since(t)
    );
    real_crds_refuse_what_the_operator_would_not_read(c, chart, &sets).await;

    // ---- Prometheus, configured as the Operator configures it
    let sm = get_json(c, &["-n", NS, "get", "servicemonitor", "gpuready"]).await;
    let pr = get_json(c, &["-n", NS, "get", "prometheusrule", "gpuready"]).await;
    let job = scrape_job(&sm);
    let rules = json!({ "groups": pr["spec"]["groups"] });
    let prom_image = std::fs::read_to_string(mon.join("prometheus-server/prometheus.name"))
        .expect("prometheus.name");
    let t = Instant::now();
    deploy_prometheus(c, prom_image.trim(), &job, &rules).await;
    say!(
        "Prometheus Ready in {:.1}s; scrape job {}",
        since(t),
        job["job_name"]
    );
    let p = Prom { c };

    let up = eventually(WAIT, "both gpuready replicas up in Prometheus", || async {
        let r = p
            .query("up{namespace=\"gpuready-system\", job=\"gpuready\"} == 1")
            .await?;
        (r.len() == 2).then_some(r)
    })
    .await;
    say!("targets up: {}", up.len());
    let leader = p.series("gpuready_leader").await;
    let names: BTreeSet<String> = leader
        .iter()
        .flat_map(|s| s.keys().cloned())
        .filter(|k| k != "__name__")
        .collect();
    assert_eq!(
        names,
        TARGET_LABELS.iter().map(|s| (*s).to_owned()).collect(),
        "the target labels of a scraped gpuready series: {leader:?}"
    );
    say!("target labels of every scraped series: {names:?}");

    // ---- GPU nodes: an Enforce pool, an Observe one, a probed one, a DRA one
    let client = &c.client;
    for (name, pool) in [
        ("gpu-a", "e2e"),
        ("gpu-b", "e2e"),
        ("gpu-o", "observe"),
        ("gpu-p", "probed"),
    ] {
        create_node(client, name, rtx3090_in(pool), 1, no_kubelet()).await;
        beat.keep(name);
    }
    set_allocatable(c, "gpu-o", 0).await;
    let dra_labels = BTreeMap::from([
        (POOL.to_owned(), "dra".to_owned()),
        (
            "feature.node.kubernetes.io/pci-0302_10de.present".to_owned(),
            "true".to_owned(),
        ),
    ]);
    create_node(client, "gpu-d", dra_labels, 0, no_kubelet()).await;
    beat.keep("gpu-d");
    let slice = eight_gpu_slice("gpu-d");
    put_slice(client, &slice).await;
    publish(
        client,
        NS,
        "gpu-d",
        &h200_report("gpu-d", &slice, &["gpu-3"]),
    )
    .await
    .expect("publish gpu-d's report");
    for yaml in [
        rtx3090_profile("rtx3090", "e2e", ""),
        rtx3090_profile("canary", "observe", "mode: Observe"),
        rtx3090_profile("inference", "probed", "probe: {whenMissing: Blocking}"),
        h200_profile("h200", "dra", "  deviceGating: {minReadyGpus: 7}"),
    ] {
        c.must_kubectl(&["apply", "-f", "-"], Some(&strip_ready_labels(&yaml)))
            .await;
    }
    eventually(WAIT, "Prometheus sees rtx3090's two ready nodes", || async {
        let r = p
            .query("max(gpuready_nodes{namespace=\"gpuready-system\", profile=\"rtx3090\", state=\"ready\"}) == 2")
            .await?;
        (!r.is_empty()).then_some(())
    })
    .await;

    // ---- a node breaks: pending, firing; repaired: resolved
    let broke = Instant::now();
    let broke_at = jiff::Timestamp::now();
    set_allocatable(c, "gpu-b", 0).await;
    say!("gpu-b broken (no allocatable GPU) at {broke_at}");
    let mut pending_at = None;
    let firing = loop {
        assert!(
            broke.elapsed() < Duration::from_secs(WAIT),
            "GpuReadyNodeNotReady for gpu-b never fired"
        );
        let alerts = p.alerts().await;
        assert!(
            !alerts
                .iter()
                .any(|a| a["labels"]["alertname"] == "GpuReadyNodeNotReady"
                    && a["labels"]["node"] == "gpu-o"),
            "a node of an Observe profile alerted: {alerts:?}"
        );
        if let Some(a) = alerts.iter().find(|a| {
            a["labels"]["alertname"] == "GpuReadyNodeNotReady" && a["labels"]["node"] == "gpu-b"
        }) {
            match a["state"].as_str() {
                Some("pending") if pending_at.is_none() => {
                    pending_at = Some(jiff::Timestamp::now());
                    say!(
                        "{}: GpuReadyNodeNotReady pending after {:.1}s (activeAt {}), labels {}",
                        pending_at.expect("set"),
                        since(broke),
                        a["activeAt"],
                        a["labels"]
                    );
                }
                Some("firing") => break a.clone(),
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let fired_at = jiff::Timestamp::now();
    say!(
        "{fired_at}: GpuReadyNodeNotReady firing after {:.1}s, labels {}, description: {}",
        since(broke),
        firing["labels"],
        firing["annotations"]["description"]
    );
    assert!(pending_at.is_some(), "the alert was never seen pending");
    assert_eq!(firing["labels"]["profile"], "rtx3090", "{firing}");
    assert_eq!(firing["labels"]["severity"], "warning", "{firing}");
    assert!(
        firing["annotations"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("reason DevicesUnhealthy")),
        "{firing}"
    );
    let repaired = Instant::now();
    set_allocatable(c, "gpu-b", 1).await;
    eventually(WAIT, "GpuReadyNodeNotReady for gpu-b resolved", || async {
        let alerts = p.alerts().await;
        (!alerts.iter().any(|a| {
            a["labels"]["alertname"] == "GpuReadyNodeNotReady" && a["labels"]["node"] == "gpu-b"
        }))
        .then_some(())
    })
    .await;
    say!(
        "{}: GpuReadyNodeNotReady for gpu-b resolved {:.1}s after the repair",
        jiff::Timestamp::now(),
        since(repaired)
    );

    // ---- the other node alerts of this cluster
    for (alert, node) in [
        ("GpuReadyProbeReportMissing", "gpu-p"),
        ("GpuReadyBadGpus", "gpu-d"),
    ] {
        let a = eventually(WAIT, &format!("{alert} firing for {node}"), || async {
            p.alerts().await.into_iter().find(|a| {
                a["labels"]["alertname"] == alert
                    && a["labels"]["node"] == node
                    && a["state"] == "firing"
            })
        })
        .await;
        say!(
            "{alert} firing: labels {}, summary: {}",
            a["labels"],
            a["annotations"]["summary"]
        );
    }
    let silent: Vec<String> = p
        .alerts()
        .await
        .iter()
        .filter(|a| a["labels"]["node"] == "gpu-o")
        .map(|a| a["labels"].to_string())
        .collect();
    assert!(silent.is_empty(), "gpu-o (Observe) alerted: {silent:?}");

    joins_layer_by_layer(c, beat, &p).await;
    a_fatal_xid_is_gated(c, beat, &p).await;
    documented_metrics_are_in_prometheus(&p).await;
    dashboard_queries_return_series(&p, mon).await;
}

/// Two nodes join the rtx3090 pool layer by layer, each layer three seconds
/// after the one before (the PCI device, then the driver, then the device
/// plugin's GPU, then GFD's labels): Prometheus' histograms count both joins
/// and each layer, the per-layer medians come in the order the layers turned
/// Ready, the profile's status and the nodes' records say the same, and
/// GpuReadyTimeToReadyHigh (threshold 1 s here) fires for the profile.
async fn joins_layer_by_layer(c: &Cluster, beat: &Heartbeat, p: &Prom<'_>) {
    let client = &c.client;
    let gfd = rtx3090_in("e2e");
    let joiners = ["gpu-j1", "gpu-j2"];
    let began = Instant::now();
    for name in joiners {
        let first = BTreeMap::from([
            (POOL.to_owned(), "e2e".to_owned()),
            (
                "feature.node.kubernetes.io/pci-0300_10de.present".to_owned(),
                "true".to_owned(),
            ),
        ]);
        create_node(client, name, first, 0, no_kubelet()).await;
        beat.keep(name);
    }
    let pause = || tokio::time::sleep(Duration::from_secs(3));
    pause().await;
    let driver = "nvidia.com/cuda.driver-version.full";
    for name in joiners {
        set_labels(client, name, json!({ driver: gfd[driver] })).await;
    }
    pause().await;
    for name in joiners {
        set_allocatable(c, name, 1).await;
    }
    pause().await;
    for name in joiners {
        set_labels(client, name, json!(gfd)).await;
    }
    let joins = "sum(gpuready_time_to_ready_seconds_count{namespace=\"gpuready-system\", profile=\"rtx3090\", kind=\"join\"}) >= 2";
    eventually(WAIT, "Prometheus counts both joins", || async {
        let r = p.query(joins).await?;
        (!r.is_empty()).then_some(())
    })
    .await;
    say!(
        "both joins in Prometheus {:.1}s after the first node registered",
        since(began)
    );
    for name in joiners {
        let n = get_node(client, name).await;
        let text = annotation(&n, keys::ANNOTATION_TIMELINE).expect("the timeline record");
        let r = gpuready_core::timeline::ReadyRecord::parse(&text).expect("a record");
        let at = |l| r.steps[&gpuready_core::timeline::Step::Layer(l)];
        use gpuready_api::Layer::{DevicePlugin, Driver, FeatureDiscovery, Hardware};
        assert!(
            at(Hardware) < at(Driver) && at(Driver) < at(DevicePlugin),
            "{name}: {text}"
        );
        assert!(at(DevicePlugin) < at(FeatureDiscovery), "{name}: {text}");
        say!(
            "{name}: {text} ({} bytes)\n  check says: last wait: {}",
            text.len(),
            r.describe()
        );
    }
    let medians = p
        .must_query("histogram_quantile(0.5, sum by (layer, le) (increase(gpuready_layer_ready_seconds_bucket{namespace=\"gpuready-system\", profile=\"rtx3090\"}[1h])))")
        .await;
    let median = |layer: &str| -> f64 {
        medians
            .iter()
            .find(|m| m["metric"]["layer"] == layer)
            .and_then(|m| m["value"][1].as_str()?.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let order = ["Hardware", "Driver", "DevicePlugin", "FeatureDiscovery"];
    for l in order {
        say!(
            "layer {l:<16} median {:.1}s after registration (Prometheus)",
            median(l)
        );
    }
    // The records order the layers to the second; Prometheus sees them
    // through buckets (5 to 10 s is one), so two layers may share a median:
    // never out of order, and the first before the last.
    for w in order.windows(2) {
        assert!(
            median(w[0]) <= median(w[1]),
            "{} not after {} in Prometheus' medians: {medians:?}",
            w[0],
            w[1]
        );
    }
    assert!(
        median(order[0]) < median(order[3]),
        "Hardware before FeatureDiscovery in Prometheus' medians: {medians:?}"
    );
    let status = eventually(WAIT, "rtx3090's status has the joins", || async {
        let s = get_json(c, &["get", "gpunodeprofile", "rtx3090"]).await;
        (s["status"]["timeToReady"]["joins"].as_i64()? >= 2).then_some(s)
    })
    .await;
    say!(
        "rtx3090 status.timeToReady: {}",
        status["status"]["timeToReady"]
    );
    let wide = c.must_kubectl(&["get", "gnp", "-o", "wide"], None).await;
    say!("kubectl get gnp -o wide:\n{wide}");
    let a = eventually(
        WAIT,
        "GpuReadyTimeToReadyHigh firing for rtx3090",
        || async {
            p.alerts().await.into_iter().find(|a| {
                a["labels"]["alertname"] == "GpuReadyTimeToReadyHigh"
                    && a["labels"]["profile"] == "rtx3090"
                    && a["state"] == "firing"
            })
        },
    )
    .await;
    say!(
        "GpuReadyTimeToReadyHigh firing: labels {}, description: {}",
        a["labels"],
        a["annotations"]["description"]
    );
}

/// A fatal XID on the real cluster: a ready node's probe report gains XID 79,
/// written as the probe writes it, and gpuready's taint follows, timed from
/// the report's write; Prometheus' time-to-gate histogram counts the gate.
async fn a_fatal_xid_is_gated(c: &Cluster, beat: &Heartbeat, p: &Prom<'_>) {
    let client = &c.client;
    let node = "gpu-x";
    create_node(client, node, rtx3090_in("xid"), 1, no_kubelet()).await;
    beat.keep(node);
    publish(client, NS, node, &one_gpu_report(node, None))
        .await
        .expect("gpu-x's healthy report");
    // The report is the real H200's; the node is labelled as a 3090.
    let profile = rtx3090_profile("xid", "xid", "probe: { checkLabels: false }");
    c.must_kubectl(&["apply", "-f", "-"], Some(&strip_ready_labels(&profile)))
        .await;
    eventually(WAIT, "gpu-x ready", || async {
        let n = get_node(client, node).await;
        (label(&n, keys::LABEL_READY).as_deref() == Some("true")).then_some(())
    })
    .await;
    let sent = Instant::now();
    let xid = one_gpu_report(node, Some(jiff::Timestamp::now()));
    publish(client, NS, node, &xid)
        .await
        .expect("gpu-x's report with XID 79");
    let written = since(sent);
    let gated = loop {
        if has_taint(&get_node(client, node).await, keys::DEFAULT_TAINT_KEY) {
            break since(sent);
        }
        assert!(
            sent.elapsed() < Duration::from_secs(WAIT),
            "gpu-x never gated"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    say!(
        "gpu-x: XID 79's report written in {written:.2}s; gpuready's taint seen {gated:.2}s after the write was sent ({:.2}s after it returned)",
        gated - written
    );
    let counted = "sum(gpuready_time_to_gate_seconds_count{namespace=\"gpuready-system\", profile=\"xid\", source=\"probe\"}) >= 1";
    eventually(WAIT, "Prometheus counts gpu-x's gate", || async {
        let r = p.query(counted).await?;
        (!r.is_empty()).then_some(())
    })
    .await;
    let mean = p
        .must_query("sum(gpuready_time_to_gate_seconds_sum{namespace=\"gpuready-system\", profile=\"xid\"}) / sum(gpuready_time_to_gate_seconds_count{namespace=\"gpuready-system\", profile=\"xid\"})")
        .await;
    say!(
        "gpuready_time_to_gate_seconds{{profile=\"xid\", source=\"probe\"}}: one gate, {}s from the report's generatedAt to the taint's write",
        mean.first()
            .map_or("?".into(), |m| m["value"][1].to_string())
    );
    // The target is a second; a loaded CI machine gets some slack.
    assert!(gated < 10.0, "gpu-x gated {gated:.2}s after its report");
}

fn no_kubelet() -> Value {
    json!([{ "key": NO_KUBELET, "value": "true", "effect": "NoSchedule" }])
}

/// The chart's admission policy admits only ready labels of the profiles it
/// reads; the suite's profiles need none.
fn strip_ready_labels(yaml: &str) -> String {
    let mut out = Vec::new();
    let mut skip = false;
    for l in yaml.lines() {
        if l.trim_start().starts_with("readyLabels:") {
            skip = true;
            continue;
        }
        if skip && l.starts_with("    ") {
            continue;
        }
        skip = false;
        out.push(l);
    }
    out.join("\n")
}

async fn set_allocatable(c: &Cluster, name: &str, gpus: u32) {
    set_node_status(&c.client, name, 1, gpus, true).await;
}

async fn get_json(c: &Cluster, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&c.must_kubectl(&all, None).await).expect("kubectl JSON")
}

/// The Prometheus Operator's CRDs refuse what the Operator could not read: a
/// misspelt ServiceMonitor field and a rule duration that is not one.
async fn real_crds_refuse_what_the_operator_would_not_read(
    c: &Cluster,
    chart: &str,
    sets: &[String],
) {
    let mut args = vec!["template", "gpuready", chart, "-n", NS];
    for s in sets {
        args.extend(["--set", s.as_str()]);
    }
    let rendered = c.must_helm(&args).await;
    let docs: Vec<&str> = rendered
        .split("\n---")
        .filter(|d| d.contains("kind: ServiceMonitor") || d.contains("kind: PrometheusRule"))
        .collect();
    assert_eq!(docs.len(), 2, "{rendered}");
    for (from, to, said) in [
        (
            "scrapeTimeout:",
            "scrapeTimout:",
            "unknown field \"spec.endpoints[0].scrapeTimout\"",
        ),
        ("for: 30s", "for: 30 seconds", "spec.groups[0].rules[0].for"),
    ] {
        let bad = docs.join("\n---").replacen(from, to, 1);
        let out = run(
            c.kubectl(&["apply", "--dry-run=server", "-f", "-"]),
            Some(&bad),
        )
        .await;
        assert!(
            !out.ok && out.stderr.contains(said),
            "{to}: expected the API server to refuse it naming {said}:\n{}{}",
            out.stdout,
            out.stderr
        );
        let why = out
            .stderr
            .lines()
            .find_map(|l| l.find(said).map(|i| &l[i..]))
            .unwrap_or_default();
        say!("the Operator's CRDs refuse `{to}`: {why}");
    }
}

/// prometheus-operator's label name sanitising (`__meta_kubernetes_service_label_<name>`).
fn sanitize(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The scrape job prometheus-operator generates for the ServiceMonitor's one
/// endpoint (role `endpoints`, its relabelling in its order). Fields this
/// translation does not know fail the suite, so a chart change cannot go
/// untested.
fn scrape_job(sm: &Value) -> Value {
    let spec = &sm["spec"];
    for k in spec.as_object().expect("spec").keys() {
        assert!(
            ["jobLabel", "namespaceSelector", "selector", "endpoints"].contains(&k.as_str()),
            "the suite does not translate ServiceMonitor field spec.{k}"
        );
    }
    let endpoints = spec["endpoints"].as_array().expect("endpoints");
    assert_eq!(endpoints.len(), 1, "one endpoint");
    let ep = &endpoints[0];
    for k in ep.as_object().expect("endpoint").keys() {
        assert!(
            ["port", "path", "interval", "scrapeTimeout"].contains(&k.as_str()),
            "the suite does not translate ServiceMonitor field spec.endpoints[0].{k}"
        );
    }
    assert!(spec["selector"].get("matchExpressions").is_none());
    let ns = sm["metadata"]["namespace"].as_str().expect("namespace");
    let name = sm["metadata"]["name"].as_str().expect("name");
    let port = ep["port"].as_str().expect("port");
    let mut relabel =
        vec![json!({"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"})];
    let labels = spec["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels");
    for (k, v) in labels {
        relabel.push(json!({
            "action": "keep",
            "source_labels": [
                format!("__meta_kubernetes_service_label_{}", sanitize(k)),
                format!("__meta_kubernetes_service_labelpresent_{}", sanitize(k)),
            ],
            "regex": format!("({});true", v.as_str().expect("label value")),
        }));
    }
    relabel.extend([
        json!({"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": port}),
        json!({"source_labels": ["__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name"],
               "separator": ";", "regex": "Node;(.*)", "replacement": "${1}", "target_label": "node"}),
        json!({"source_labels": ["__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name"],
               "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"}),
        json!({"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"}),
        json!({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"}),
        json!({"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"}),
        json!({"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"}),
        json!({"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"}),
        json!({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"}),
    ]);
    if let Some(job_label) = spec["jobLabel"].as_str() {
        relabel.push(json!({
            "source_labels": [format!("__meta_kubernetes_service_label_{}", sanitize(job_label))],
            "target_label": "job", "regex": "(.+)", "replacement": "${1}",
        }));
    }
    relabel.push(json!({"target_label": "endpoint", "replacement": port}));
    let names: Vec<&Value> = spec["namespaceSelector"]["matchNames"]
        .as_array()
        .expect("namespaceSelector.matchNames")
        .iter()
        .collect();
    json!({
        "job_name": format!("serviceMonitor/{ns}/{name}/0"),
        "honor_labels": false,
        "kubernetes_sd_configs": [{ "role": "endpoints", "namespaces": { "names": names } }],
        "scrape_interval": ep["interval"],
        "scrape_timeout": ep["scrapeTimeout"],
        "metrics_path": ep["path"],
        "scheme": "http",
        "relabel_configs": relabel,
    })
}

/// Prometheus in namespace `monitoring`, with the RBAC the Operator gives it
/// in the watched namespace, the generated config and the rule file.
async fn deploy_prometheus(c: &Cluster, image: &str, job: &Value, rules: &Value) {
    c.restricted_namespace(MON).await;
    let config = json!({
        "global": { "scrape_interval": "5s", "evaluation_interval": "5s" },
        "rule_files": ["/etc/prometheus/rules.yaml"],
        "scrape_configs": [job],
    });
    let objects = json!({ "apiVersion": "v1", "kind": "List", "items": [
        { "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "prometheus", "namespace": MON } },
        { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
          "metadata": { "name": "prometheus", "namespace": NS },
          "rules": [
            { "apiGroups": [""], "resources": ["services", "endpoints", "pods"], "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"] },
          ] },
        { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
          "metadata": { "name": "prometheus", "namespace": NS },
          "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "prometheus" },
          "subjects": [{ "kind": "ServiceAccount", "name": "prometheus", "namespace": MON }] },
        { "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "prometheus", "namespace": MON },
          "data": {
            "prometheus.yml": serde_yaml_ng::to_string(&config).expect("config YAML"),
            "rules.yaml": serde_yaml_ng::to_string(rules).expect("rules YAML"),
          } },
        { "apiVersion": "v1", "kind": "Pod",
          "metadata": { "name": "prometheus", "namespace": MON, "labels": { "app": "prometheus" } },
          "spec": {
            "serviceAccountName": "prometheus",
            "nodeSelector": { "kubernetes.io/hostname": c.node },
            "securityContext": { "runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534, "fsGroup": 65534,
                                 "seccompProfile": { "type": "RuntimeDefault" } },
            "containers": [{
              "name": "prometheus", "image": image, "imagePullPolicy": "Never",
              "args": ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus",
                       "--web.listen-address=:9090", "--storage.tsdb.retention.time=2h"],
              "ports": [{ "name": "web", "containerPort": 9090 }],
              "readinessProbe": { "httpGet": { "path": "/-/ready", "port": 9090 }, "periodSeconds": 2 },
              "securityContext": { "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                   "capabilities": { "drop": ["ALL"] } },
              "volumeMounts": [{ "name": "config", "mountPath": "/etc/prometheus" },
                               { "name": "data", "mountPath": "/prometheus" }],
            }],
            "volumes": [{ "name": "config", "configMap": { "name": "prometheus" } },
                        { "name": "data", "emptyDir": {} }],
          } },
        { "apiVersion": "v1", "kind": "Service", "metadata": { "name": "prometheus", "namespace": MON },
          "spec": { "selector": { "app": "prometheus" }, "ports": [{ "name": "web", "port": 9090, "targetPort": 9090 }] } },
    ]});
    c.must_kubectl(&["apply", "-f", "-"], Some(&objects.to_string()))
        .await;
    c.must_kubectl(
        &[
            "-n",
            MON,
            "wait",
            "--for=condition=Ready",
            "pod/prometheus",
            "--timeout=180s",
        ],
        None,
    )
    .await;
}

/// Prometheus's HTTP API through the API server's service proxy.
struct Prom<'a> {
    c: &'a Cluster,
}

impl Prom<'_> {
    async fn get(&self, path: &str, params: &[(&str, &str)]) -> Result<Value, String> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        let url = format!(
            "/api/v1/namespaces/{MON}/services/prometheus:9090/proxy/api/v1/{path}?{query}"
        );
        let req = http::Request::get(url)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let text = self
            .c
            .client
            .request_text(req)
            .await
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        if v["status"] != "success" {
            return Err(v.to_string());
        }
        Ok(v["data"].clone())
    }

    /// An instant query's result vector; `None` while Prometheus cannot answer.
    async fn query(&self, q: &str) -> Option<Vec<Value>> {
        self.get("query", &[("query", q)])
            .await
            .ok()
            .and_then(|d| d["result"].as_array().cloned())
    }

    /// An instant query that must parse and run: its result vector.
    async fn must_query(&self, q: &str) -> Vec<Value> {
        let d = self
            .get("query", &[("query", q)])
            .await
            .unwrap_or_else(|e| panic!("query {q}: {e}"));
        d["result"].as_array().cloned().unwrap_or_default()
    }

    /// The label sets of every series matching `selector`.
    async fn series(&self, selector: &str) -> Vec<BTreeMap<String, String>> {
        let d = self
            .get("series", &[("match[]", selector)])
            .await
            .unwrap_or_else(|e| panic!("series {selector}: {e}"));
        serde_json::from_value(d).expect("series label sets")
    }

    async fn label_values(&self, label: &str, selector: &str) -> Vec<String> {
        let d = self
            .get(&format!("label/{label}/values"), &[("match[]", selector)])
            .await
            .unwrap_or_else(|e| panic!("label values {label} of {selector}: {e}"));
        serde_json::from_value(d).expect("label values")
    }

    async fn alerts(&self) -> Vec<Value> {
        match self.get("alerts", &[]).await {
            Ok(d) => d["alerts"].as_array().cloned().unwrap_or_default(),
            Err(e) => {
                say!("alerts: {e}");
                Vec::new()
            }
        }
    }
}

/// Every metric of docs/operations.md's list (the backticked `name{labels}` of
/// its Metrics item, prefix `gpuready_` left out there), with exactly those labels.
async fn documented_metrics_are_in_prometheus(p: &Prom<'_>) {
    let doc =
        std::fs::read_to_string(repo_root().join("docs/operations.md")).expect("operations.md");
    let start = doc
        .find("- **Metrics** (prefix `gpuready_`)")
        .expect("the Metrics item");
    let item = &doc[start..];
    let item = &item[..item[2..].find("\n- **").map_or(item.len(), |i| i + 2)];
    let mut documented: Vec<(String, BTreeSet<String>)> = Vec::new();
    for token in item.split('`').skip(1).step_by(2) {
        let (name, labels) = token.split_once('{').unwrap_or((token, "}"));
        if name.is_empty()
            || !name.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_')
            || name == "gpuready_"
        {
            continue;
        }
        let labels: BTreeSet<String> = labels
            .trim_end_matches('}')
            .split(',')
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        // A later mention (`api_requests_total` in an example) is not a new entry.
        if !documented
            .iter()
            .any(|(n, _)| n == &format!("gpuready_{name}"))
        {
            documented.push((format!("gpuready_{name}"), labels));
        }
    }
    assert!(
        documented.len() >= 16,
        "the Metrics item lists {documented:?}"
    );
    let targets: BTreeSet<String> = TARGET_LABELS.iter().map(|s| (*s).to_owned()).collect();
    for (name, labels) in &documented {
        // A histogram is listed by its name: its series are _bucket/_sum/_count.
        let (selector, mut want) = if name.ends_with("_seconds") {
            (format!("{name}_bucket"), BTreeSet::from(["le".to_owned()]))
        } else {
            (name.clone(), BTreeSet::new())
        };
        want.extend(labels.iter().cloned());
        want.extend(targets.iter().cloned());
        let series = p.series(&format!("{selector}{{namespace=\"{NS}\"}}")).await;
        assert!(!series.is_empty(), "{name}: documented, not in Prometheus");
        for s in &series {
            let got: BTreeSet<String> = s.keys().filter(|k| *k != "__name__").cloned().collect();
            assert_eq!(got, want, "{name}: the labels of {s:?}");
        }
        say!("{name}: {} series, labels as documented", series.len());
    }
}

/// Every panel's queries, read by the Grafana Foundation SDK's schema, run
/// against the live Prometheus with the dashboard's variables resolved.
async fn dashboard_queries_return_series(p: &Prom<'_>, mon: &std::path::Path) {
    let dashboard = repo_root().join("deploy/grafana/gpuready-dashboard.json");
    let out = std::process::Command::new(mon.join("dashboard-schema"))
        .arg(&dashboard)
        .output()
        .expect("dashboard-schema");
    assert!(
        out.status.success(),
        "the dashboard does not match the Grafana Foundation SDK's schema:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("dashboard-schema JSON");

    // Variables, as Grafana resolves label_values(selector, label).
    let mut vars: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in summary["variables"].as_array().expect("variables") {
        let name = v["name"].as_str().expect("name").to_owned();
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"].as_str().expect("query");
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable {name}: not label_values(): {q}"));
        let (selector, label) = inner.rsplit_once(',').expect("selector, label");
        let values = p
            .label_values(label.trim(), &substitute(selector.trim()))
            .await;
        assert!(
            !values.is_empty(),
            "variable {name} ({q}) resolves to nothing"
        );
        say!("variable {name}: {values:?}");
        vars.insert(name, values);
    }
    assert!(vars["namespace"].contains(&NS.to_owned()), "{vars:?}");
    for profile in ["rtx3090", "canary", "inference", "h200"] {
        assert!(vars["profile"].contains(&profile.to_owned()), "{vars:?}");
    }
    for node in ["gpu-o", "gpu-p", "gpu-d"] {
        assert!(vars["node"].contains(&node.to_owned()), "{vars:?}");
    }

    let mut empty = Vec::new();
    for panel in summary["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap_or_default();
        for q in panel["queries"].as_array().expect("queries") {
            let expr = substitute(q["expr"].as_str().expect("expr"));
            let result = p.must_query(&expr).await;
            say!(
                "panel {:>2} {title:<44} {}: {} series",
                panel["id"],
                q["refId"].as_str().unwrap_or(""),
                result.len()
            );
            if result.is_empty() {
                empty.push(format!("{title} ({expr})"));
            }
        }
    }
    assert!(
        empty.is_empty(),
        "panels whose query returned no series: {empty:?}"
    );
}

/// Grafana's variables as a viewer with "All" selected would send them.
fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$namespace", ".*")
        .replace("$profile", ".*")
        .replace("$node", ".*")
}
