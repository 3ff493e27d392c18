//! `gpuready probe` without a GPU (CI has none: NVML absent → the report says
//! so, exit code 1), and the controller against a real kube-apiserver driven by
//! probe reports published exactly as the probe publishes them (this test acts
//! as the agent): a fatal XID taints the node, a healthy report releases it, a
//! heartbeat alone writes nothing.

use crate::support;

use std::process::Command;
use std::time::Duration;

use gpuready::probe::publish::publish;
use gpuready_api::keys::{self, health_reasons as r};
use gpuready_api::probe::{
    ComputeCheck, ComputeOutcome, ComputeSkip, ComputeSkipReason, ComputeStack, ComputeTrigger,
    CudaError, DeviceNode, EccState, EventKind, EventLog, EventRecord, FabricPhase, FabricState,
    GpuCompute, GpuState, NvmlState, PROBE_REPORT_API_VERSION, ProbeReport, RowRemapping,
};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use serde_json::{Value, json};
use support::*;

#[test]
fn once_without_nvml_prints_an_unusable_report_and_exits_1() {
    let out = gpuready()
        .args([
            "probe",
            "--once",
            "--output",
            "json",
            "--nvml-library",
            "/nonexistent/libnvidia-ml.so.1",
        ])
        .output()
        .expect("run gpuready probe");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report on stdout");
    assert_eq!(report["apiVersion"], PROBE_REPORT_API_VERSION);
    assert_eq!(report["nvml"]["usable"], false);
    let error = report["nvml"]["error"].as_str().expect("error named");
    assert!(error.contains("/nonexistent/libnvidia-ml.so.1"), "{error}");
    assert_eq!(report["events"]["monitored"], false);
    assert!(report.get("gpus").is_none());
    // Without NVML the probe cannot tell whether a workload uses a GPU: the
    // compute check is skipped, never run blind.
    assert_eq!(report["computeCheck"]["outcome"], "Skipped");
    assert_eq!(report["computeCheck"]["skipped"]["reason"], "NvmlUnusable");
    assert_eq!(report["computeCheck"]["skipped"]["due"], "Once");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NVML is unusable"), "{stderr}");

    // The same report as YAML, and the default search (no driver on CI).
    let out = gpuready()
        .args(["probe", "--once", "--output", "yaml"])
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .output()
        .expect("run gpuready probe");
    if out.status.code() == Some(1) {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("usable: false"), "{text}");
        assert!(text.contains("libnvidia-ml.so.1"), "{text}");
    }
}

/// The compute check's child process on a machine without libcuda (CI): the
/// report names the missing library instead of panicking in cudarc's loader.
/// `--host-root`: the report says what the host's IMEX files show (here a
/// host laid out as a real one with the nvidia-imex package enabled); without
/// it, the report has no `imex` at all (not read, never "not installed").
#[test]
fn once_with_a_host_root_reports_the_host_imex_files() {
    let root = tempfile::tempdir().expect("temp dir");
    let etc = root.path().join("etc");
    std::fs::create_dir_all(etc.join("nvidia-imex")).expect("imex dir");
    std::fs::write(
        etc.join("nvidia-imex/config.cfg"),
        "IMEX_CMD_ENABLED=1\nIMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock\n",
    )
    .expect("config");
    let wants = etc.join("systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).expect("wants");
    std::os::unix::fs::symlink(
        "/usr/lib/systemd/system/nvidia-imex.service",
        wants.join("nvidia-imex.service"),
    )
    .expect("enable");
    let once = |host_root: Option<&std::path::Path>| {
        let mut cmd = gpuready();
        cmd.args([
            "probe",
            "--once",
            "--nvml-library",
            "/nonexistent/libnvidia-ml.so.1",
        ]);
        if let Some(r) = host_root {
            cmd.arg("--host-root").arg(r);
        }
        let out = cmd.output().expect("run gpuready probe");
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout).expect("JSON report")
    };
    let report = once(Some(root.path()));
    assert_eq!(
        report["imex"],
        json!({
            "config": {
                "present": true,
                "cmdEnabled": "1",
                "cmdUnixDomainPath": "/etc/nvidia-imex/imex_ctrl.sock",
            },
            "socket": { "path": "/etc/nvidia-imex/imex_ctrl.sock", "state": "Absent" },
            "unit": { "state": "Enabled", "wantedBy": ["multi-user.target"] },
        })
    );
    assert!(once(None).get("imex").is_none());
}

#[test]
fn the_compute_check_without_libcuda_reports_the_library_unavailable() {
    let out = gpuready()
        .args(["probe", "--compute-check-child"])
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .output()
        .expect("run the compute check");
    let result: Value = serde_json::from_slice(&out.stdout).expect("JSON result");
    if result["error"]["name"] == "CUDA_LIBRARY_UNAVAILABLE" {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(result["error"]["step"], "load");
        assert_eq!(result["devices"], json!([]));
    } else {
        eprintln!("NOT RUN: this machine has libcuda; the check answered {result}");
    }
    // Switched off: the report says so and lists no device nodes.
    let out = gpuready()
        .args([
            "probe",
            "--once",
            "--compute-check",
            "off",
            "--nvml-library",
            "/nonexistent/libnvidia-ml.so.1",
        ])
        .output()
        .expect("run gpuready probe");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["computeCheck"]["outcome"], "Disabled");
    assert!(report.get("deviceNodes").is_none());
}

#[test]
fn in_cluster_mode_without_its_node_is_a_usage_error() {
    let out = gpuready()
        .args(["probe"])
        .env_remove("NODE_NAME")
        .env_remove("POD_NAMESPACE")
        .output()
        .expect("run gpuready probe");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("NODE_NAME"));
}

/// What the probe reads on an RTX 3090 node labelled by `gfd_3090()`.
fn report(node: &str, events: Vec<EventRecord>) -> ProbeReport {
    ProbeReport {
        api_version: PROBE_REPORT_API_VERSION.into(),
        node: Some(node.into()),
        generated_at: jiff::Timestamp::now().to_string(),
        probe_started_at: "2026-11-30T12:00:00Z".into(),
        probe_version: "test".into(),
        nvml: NvmlState {
            usable: true,
            library: Some("libnvidia-ml.so.1".into()),
            ..NvmlState::default()
        },
        driver_version: Some("580.178.04".into()),
        cuda_driver_version: Some("13.0".into()),
        device_count: Some(1),
        gpus: vec![GpuState {
            index: 0,
            uuid: Some("GPU-3090".into()),
            name: Some("NVIDIA GeForce RTX 3090".into()),
            memory_mib: Some(24576),
            compute_capability: Some("8.6".into()),
            ecc: Some(EccState::default()),
            row_remapping: Some(RowRemapping::default()),
            ..GpuState::default()
        }],
        events: EventLog {
            monitored: true,
            records: events,
            ..EventLog::default()
        },
        ..ProbeReport::default()
    }
}

fn probe_healthy(node: &Node) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == keys::CONDITION_PROBE_HEALTHY)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[tokio::test]
async fn probe_reports_drive_the_taint_on_and_off() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let ns = env.create_namespace("gpuready").await.expect("namespace");
    create_node(&client, "gpu-1", rtx3090_in("probe"), 1, json!([])).await;
    apply_profile(
        &client,
        &rtx3090_profile("probe", "probe", "probe: {whenMissing: Blocking}"),
    )
    .await;
    let run = start_controller(&env, run_args(&[&format!("--probe-namespace={ns}")]));

    // No report yet: the profile blocks.
    eventually(60, "gpu-1 tainted for a missing probe", || async {
        let n = get_node(&client, "gpu-1").await;
        (gated(&n) && gpu_ready(&n).is_some_and(|(_, r)| r == keys::health_reasons::PROBE_MISSING))
            .then_some(())
    })
    .await;

    // The probe publishes a healthy report: released.
    publish(&client, &ns, "gpu-1", &report("gpu-1", vec![]))
        .await
        .expect("publish");
    eventually(60, "gpu-1 released by a healthy report", || async {
        let n = get_node(&client, "gpu-1").await;
        (!gated(&n)
            && gpu_ready(&n).is_some_and(|(s, _)| s == "True")
            && probe_healthy(&n) == Some(("True".into(), r::PROBE_HEALTHY.into())))
        .then_some(())
    })
    .await;

    // XID 79: the GPU fell off the bus. Tainted again, and the node says why.
    let xid79 = EventRecord {
        gpu: "GPU-3090".into(),
        kind: EventKind::Xid,
        xid: Some(79),
        count: 1,
        first_seen: jiff::Timestamp::now().to_string(),
        last_seen: jiff::Timestamp::now().to_string(),
    };
    publish(&client, &ns, "gpu-1", &report("gpu-1", vec![xid79]))
        .await
        .expect("publish");
    eventually(60, "gpu-1 tainted for XID 79", || async {
        let n = get_node(&client, "gpu-1").await;
        (gated(&n)
            && gpu_ready(&n).is_some_and(|(s, r)| s == "False" && r == r::FATAL_XID)
            && probe_healthy(&n) == Some(("False".into(), r::FATAL_XID.into())))
        .then_some(())
    })
    .await;

    // The probe restarted after the GPU was reset: healthy again, released.
    publish(&client, &ns, "gpu-1", &report("gpu-1", vec![]))
        .await
        .expect("publish");
    eventually(60, "gpu-1 released again", || async {
        let n = get_node(&client, "gpu-1").await;
        (!gated(&n) && gpu_ready(&n).is_some_and(|(s, _)| s == "True")).then_some(())
    })
    .await;

    // A heartbeat (same report, new generatedAt) makes no node write.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = run.node_writes();
    for _ in 0..3 {
        publish(&client, &ns, "gpu-1", &report("gpu-1", vec![]))
            .await
            .expect("publish");
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(run.node_writes(), before, "heartbeats wrote to the node");

    // A report published under another node's name is not taken for this one.
    publish(&client, &ns, "gpu-1", &report("gpu-2", vec![]))
        .await
        .expect("publish");
    eventually(60, "a report naming another node is unknown", || async {
        let n = get_node(&client, "gpu-1").await;
        (gated(&n) && probe_healthy(&n) == Some(("Unknown".into(), r::PROBE_REPORT_INVALID.into())))
            .then_some(())
    })
    .await;
    run.stop().await.expect("controller stops");
}

/// A v2 report of the RTX 3090 node after a passing compute check.
fn v2(node: &str) -> ProbeReport {
    let mut r = report(node, vec![]);
    r.boot_id = Some("boot-1".into());
    r.device_nodes = [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia0",
    ]
    .iter()
    .map(|p| DeviceNode {
        path: (*p).into(),
        present: true,
        gpu: p.ends_with('0').then_some(0),
    })
    .collect();
    r.gpus[0].compute_processes = Some(0);
    r.gpus[0].compute = Some(GpuCompute {
        outcome: ComputeOutcome::Passed,
        ..GpuCompute::default()
    });
    r.compute_check = Some(ComputeCheck {
        outcome: ComputeOutcome::Passed,
        ran_at: Some("2026-12-01T10:00:00Z".into()),
        trigger: Some(ComputeTrigger::FirstCheck),
        stack: Some(ComputeStack {
            driver_version: Some("580.178.04".into()),
            boot_id: Some("boot-1".into()),
            gpus: vec!["GPU-3090".into()],
        }),
        ..ComputeCheck::default()
    });
    r
}

fn failed(mut r: ProbeReport, step: &str, name: &str, code: u32, node_wide: bool) -> ProbeReport {
    let e = CudaError {
        name: name.into(),
        code,
        step: step.into(),
        detail: None,
    };
    let cc = r.compute_check.as_mut().expect("v2");
    cc.outcome = ComputeOutcome::Failed;
    if node_wide {
        cc.error = Some(e);
        r.gpus[0].compute = None;
    } else if let Some(g) = r.gpus[0].compute.as_mut() {
        g.outcome = ComputeOutcome::Failed;
        g.error = Some(e);
    }
    r
}

/// Each reason of report v2 drives the taint as docs/probe.md says: faults
/// (device node, fabric, CUDA init, wrong data, a failed call) always; a
/// skipped or stale check only under `whenSkipped`/`whenStale`, and the
/// default profile keeps such a node ready.
#[tokio::test]
async fn compute_check_reasons_drive_the_taint() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let ns = env.create_namespace("gpuready").await.expect("namespace");
    create_node(&client, "gpu-c", rtx3090_in("cc"), 1, json!([])).await;
    create_node(&client, "gpu-d", rtx3090_in("cd"), 1, json!([])).await;
    // gpu-c: a profile that gates on skipped and stale checks; gpu-d: defaults.
    apply_profile(
        &client,
        &rtx3090_profile(
            "cc",
            "cc",
            "probe: {whenMissing: Blocking, computeCheck: {whenSkipped: Blocking, whenStale: Blocking}}",
        ),
    )
    .await;
    apply_profile(
        &client,
        &rtx3090_profile("cd", "cd", "probe: {whenMissing: Blocking}"),
    )
    .await;
    let run = start_controller(&env, run_args(&[&format!("--probe-namespace={ns}")]));

    let expect = |node: &'static str, tainted: bool, reason: &'static str| {
        let client = client.clone();
        async move {
            eventually(
                60,
                &format!("{node}: tainted={tainted} for {reason}"),
                || async {
                    let n = get_node(&client, node).await;
                    (gated(&n) == tainted && probe_healthy(&n).is_some_and(|(_, r)| r == reason))
                        .then_some(())
                },
            )
            .await
        }
    };

    publish(&client, &ns, "gpu-c", &v2("gpu-c"))
        .await
        .expect("publish");
    expect("gpu-c", false, r::PROBE_HEALTHY).await;

    let mut r = v2("gpu-c");
    r.device_nodes[1].present = false;
    publish(&client, &ns, "gpu-c", &r).await.expect("publish");
    expect("gpu-c", true, r::DEVICE_NODE_MISSING).await;

    let mut r = v2("gpu-c");
    r.gpus[0].fabric = Some(FabricState {
        state: FabricPhase::InProgress,
        ..FabricState::default()
    });
    publish(&client, &ns, "gpu-c", &r).await.expect("publish");
    expect("gpu-c", true, r::FABRIC_NOT_READY).await;

    let r = failed(
        v2("gpu-c"),
        "init",
        "CUDA_ERROR_SYSTEM_NOT_READY",
        802,
        true,
    );
    publish(&client, &ns, "gpu-c", &r).await.expect("publish");
    expect("gpu-c", true, r::CUDA_INIT_FAILED).await;

    publish(&client, &ns, "gpu-c", &v2("gpu-c"))
        .await
        .expect("publish");
    expect("gpu-c", false, r::PROBE_HEALTHY).await;

    let mut r = failed(
        v2("gpu-c"),
        "launch",
        "CUDA_ERROR_LAUNCH_FAILED",
        719,
        false,
    );
    publish(&client, &ns, "gpu-c", &r).await.expect("publish");
    expect("gpu-c", true, r::COMPUTE_CHECK_FAILED).await;
    if let Some(g) = r.gpus[0].compute.as_mut() {
        g.error = None;
        g.mismatch = Some("kernel out[i] = in[i]*3+7: 1 of 4194304 words wrong".into());
    }
    publish(&client, &ns, "gpu-c", &r).await.expect("publish");
    expect("gpu-c", true, r::COMPUTE_MISMATCH).await;

    // A workload holds the GPU from the probe's start: skipped. Gated under
    // whenSkipped: Blocking, ready under the default.
    let skipped = |node: &str| {
        let mut r = v2(node);
        r.gpus[0].compute = None;
        r.gpus[0].compute_processes = Some(2);
        r.compute_check = Some(ComputeCheck {
            outcome: ComputeOutcome::Skipped,
            skipped: Some(ComputeSkip {
                reason: ComputeSkipReason::GpusBusy,
                due: ComputeTrigger::FirstCheck,
                message: "a workload holds GPU 0".into(),
                since: "2026-12-01T10:00:00Z".into(),
            }),
            ..ComputeCheck::default()
        });
        r
    };
    publish(&client, &ns, "gpu-c", &skipped("gpu-c"))
        .await
        .expect("publish");
    expect("gpu-c", true, r::COMPUTE_CHECK_SKIPPED).await;
    publish(&client, &ns, "gpu-d", &skipped("gpu-d"))
        .await
        .expect("publish");
    expect("gpu-d", false, r::PROBE_HEALTHY).await;

    // The node rebooted since the passing check and a workload took the GPU
    // before the probe could check again: stale.
    let stale = |node: &str| {
        let mut r = v2(node);
        r.boot_id = Some("boot-2".into());
        r
    };
    publish(&client, &ns, "gpu-c", &stale("gpu-c"))
        .await
        .expect("publish");
    expect("gpu-c", true, r::COMPUTE_CHECK_STALE).await;
    publish(&client, &ns, "gpu-d", &stale("gpu-d"))
        .await
        .expect("publish");
    // The default profile keeps gpu-d ready; the condition's message says why
    // the check no longer vouches for it.
    eventually(60, "gpu-d ready with a stale-check note", || async {
        let n = get_node(&client, "gpu-d").await;
        let message = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == keys::CONDITION_PROBE_HEALTHY))
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        (!gated(&n)
            && probe_healthy(&n).is_some_and(|(_, r)| r == r::PROBE_HEALTHY)
            && message.contains("is stale: the node rebooted"))
        .then_some(())
    })
    .await;
    run.stop().await.expect("controller stops");
}

#[tokio::test]
async fn the_api_server_refuses_application_xids_and_health_in_gating_layers_is_accepted() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let api: kube::Api<gpuready_api::GpuNodeProfile> = kube::Api::all(client.clone());
    let doc = |name: &str, probe: Value| {
        json!({
            "apiVersion": "gpuready.io/v1alpha1",
            "kind": "GpuNodeProfile",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"matchLabels": {"pool": "x"}},
                "gatingLayers": ["Node", "Hardware", "Driver", "DevicePlugin", "FeatureDiscovery", "Profile", "Compatibility", "Health"],
                "probe": probe,
            }
        })
    };
    let pp = kube::api::PatchParams::apply("test");
    let refused = api
        .patch(
            "app-xid",
            &pp,
            &kube::api::Patch::Apply(&doc("app-xid", json!({"fatalXids": [79, 31]}))),
        )
        .await
        .expect_err("XID 31 refused");
    assert!(
        refused
            .to_string()
            .contains("must not list the application XIDs"),
        "{refused}"
    );
    let ok = api
        .patch(
            "fatal",
            &pp,
            &kube::api::Patch::Apply(&doc(
                "fatal",
                json!({"fatalXids": [79], "whenMissing": "Blocking"}),
            )),
        )
        .await
        .expect("a valid probe section is accepted");
    let probe = ok.spec.probe.expect("probe kept");
    assert_eq!(probe.max_report_age_seconds, 300, "defaulted by the schema");
    assert!(probe.check_labels);

    // probe.computeCheck: the policies are the enum, the age is bounded.
    let refused = api
        .patch(
            "cc-bad",
            &pp,
            &kube::api::Patch::Apply(&doc(
                "cc-bad",
                json!({"computeCheck": {"whenSkipped": "Sometimes", "maxAgeSeconds": 40000000}}),
            )),
        )
        .await
        .expect_err("a bad computeCheck is refused")
        .to_string();
    assert!(
        refused.contains("whenSkipped") && refused.contains("maxAgeSeconds"),
        "{refused}"
    );
    let ok = api
        .patch(
            "cc",
            &pp,
            &kube::api::Patch::Apply(&doc(
                "cc",
                json!({"computeCheck": {"whenStale": "Blocking", "maxAgeSeconds": 86400}}),
            )),
        )
        .await
        .expect("a valid computeCheck is accepted");
    let cc = ok
        .spec
        .probe
        .and_then(|p| p.compute_check)
        .expect("computeCheck kept");
    assert_eq!(cc.when_stale, gpuready_api::ProbePolicy::Blocking);
    assert_eq!(cc.when_skipped, gpuready_api::ProbePolicy::Ignore);
    assert_eq!(cc.max_age_seconds, 86400);
}

/// The agent itself, in-cluster mode, on a machine without NVML (as in CI): it
/// publishes its node's report (NVML unusable, with why) on every interval, and
/// a SIGTERM stops it cleanly.
#[tokio::test]
async fn the_probe_process_publishes_its_report_and_stops_on_sigterm() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let env = gpuready_testenv::TestEnv::shared()
        .await
        .expect("test control plane");
    let client = env.client().expect("client");
    let ns = env
        .create_namespace("probe-agent")
        .await
        .expect("namespace");
    let mut child = tokio::process::Command::from({
        let mut c = gpuready_on(env);
        c.args(["probe", "--interval", "1s", "--log-format", "json"])
            .env("NODE_NAME", "agent-node")
            .env("POD_NAMESPACE", &ns)
            .env("GPUREADY_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    })
    .kill_on_drop(true)
    .spawn()
    .expect("start gpuready probe");
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(client, &ns);
    let first = eventually(60, "the probe publishes its report", || async {
        cms.get_opt("gpuready-probe-agent-node")
            .await
            .ok()
            .flatten()
    })
    .await;
    let report = match gpuready::controller::watch::probe_reports::evidence_of(&first) {
        gpuready_core::health::ProbeEvidence::Report(r) => r,
        other => panic!("not a report: {other:?}"),
    };
    assert_eq!(report.node.as_deref(), Some("agent-node"));
    assert!(!report.nvml.usable);
    // The agent's first check is due, and skipped: without NVML it cannot
    // tell whether a workload uses the GPUs.
    let cc = report.compute_check.as_ref().expect("computeCheck");
    assert_eq!(cc.outcome, ComputeOutcome::Skipped);
    let skip = cc.skipped.as_ref().expect("skipped");
    assert_eq!(
        (skip.reason, skip.due),
        (ComputeSkipReason::NvmlUnusable, ComputeTrigger::FirstCheck)
    );
    assert!(
        report
            .nvml
            .error
            .as_deref()
            .is_some_and(|e| e.contains("/nonexistent/libnvidia-ml.so.1")),
        "{:?}",
        report.nvml
    );
    assert_eq!(
        first
            .labels()
            .get(keys::LABEL_PROBE_REPORT)
            .map(String::as_str),
        Some("true")
    );
    // The heartbeat: a newer generatedAt within a few intervals.
    eventually(30, "a second report", || async {
        let cm = cms.get("gpuready-probe-agent-node").await.ok()?;
        match gpuready::controller::watch::probe_reports::evidence_of(&cm) {
            gpuready_core::health::ProbeEvidence::Report(r)
                if r.generated_at != report.generated_at =>
            {
                Some(())
            }
            _ => None,
        }
    })
    .await;
    let pid = child.id().expect("pid").to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill -TERM");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the probe stops within 20 s of SIGTERM")
        .expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

// ---- sitting out maintenance (docs/probe.md, "Sitting out maintenance")

const PAUSED_CLIENT: &str = "nvidia.com/gpu.deploy.client=paused-for-driver-upgrade";

/// The agent in-process: while its node is in maintenance it holds no NVML
/// handle and reports itself paused with no GPU device file open; back in
/// service it reads the GPUs again. Where NVML opens (a GPU machine) it also
/// proves the `/dev/nvidia*` files were open before and are closed after; in
/// CI, without NVML, the agent never holds a handle at all.
#[test]
fn the_agent_holds_no_nvml_handle_while_its_node_is_in_maintenance() {
    use gpuready::probe::agent::Agent;
    use gpuready::probe::compute::{ComputeCheckMode, Memory, Settings};
    use gpuready::probe::nvml::open_device_files;

    let checker = gpuready::probe::Checker {
        settings: Settings {
            mode: ComputeCheckMode::Off,
            min_interval: Duration::ZERO,
            every: Duration::ZERO,
            timeout: Duration::from_secs(60),
        },
        memory: Memory::default(),
        once: false,
    };
    let mut agent = Agent::new(std::env::var_os("GPUREADY_NVML_LIBRARY"), checker);
    let maintenance = vec![PAUSED_CLIENT.to_owned()];

    let reading = agent.report("n1", None, None, &[]);
    assert!(reading.paused.is_none());
    let gpu = reading.nvml.usable;
    assert_eq!(agent.holds_nvml(), gpu);
    let before = open_device_files().expect("/proc/self/fd");
    if gpu {
        assert!(
            !before.is_empty(),
            "NVML open and no /dev/nvidia* file open"
        );
        println!("NVML open: /dev/nvidia* files open {before:?}");
    } else {
        println!("NOT RUN on a GPU (NVML unusable here): the handle is never taken");
    }

    let paused = agent.report("n1", None, None, &maintenance);
    assert!(!agent.holds_nvml(), "NVML held while paused");
    let pause = paused.paused.clone().expect("a paused report");
    assert_eq!(pause.labels, maintenance);
    assert_eq!(pause.open_device_files, Some(Vec::new()), "{pause:?}");
    assert_eq!(open_device_files(), Some(Vec::new()));
    println!("paused: NVML released, /dev/nvidia* files open []");
    assert!(!paused.nvml.usable);
    assert!(
        paused
            .nvml
            .error
            .as_deref()
            .is_some_and(|e| e.contains("released NVML")),
        "{:?}",
        paused.nvml
    );
    assert!(paused.gpus.is_empty() && paused.device_count.is_none());
    assert!(paused.compute_check.is_none());
    // Still paused a report later: the same `since`, the labels as they are now.
    let later = agent.report(
        "n1",
        None,
        None,
        &["nvidia.com/gpu-driver-upgrade-state=pod-restart-required".to_owned()],
    );
    let later_pause = later.paused.expect("still paused");
    assert_eq!(later_pause.since, pause.since);
    assert_eq!(
        later_pause.labels,
        ["nvidia.com/gpu-driver-upgrade-state=pod-restart-required"]
    );

    let back = agent.report("n1", None, None, &[]);
    assert!(back.paused.is_none());
    assert_eq!(agent.holds_nvml(), gpu);
    if gpu {
        let again = open_device_files().expect("/proc/self/fd");
        println!("resumed: /dev/nvidia* files open {again:?}");
        assert!(!again.is_empty(), "resumed without reopening NVML");
    }
    // Events count afresh from the resume, as for a restarted probe.
    assert!(back.probe_started_at >= pause.since, "{back:?}");
    agent.release();
    assert!(!agent.holds_nvml());
}

/// The node watch fails open: an identity that may not read Nodes leaves the
/// view `Unread` (the probe then reads the GPUs as without it), and the read
/// on SIGTERM answers within its limit instead of blocking.
#[tokio::test]
async fn the_node_watch_fails_open_without_access_to_nodes() {
    use gpuready::probe::maintenance::{NodeView, read_now, watch_node};
    let env = gpuready_testenv::TestEnv::shared()
        .await
        .expect("test control plane");
    let nobody = env.client_as("nobody", &[]).expect("client");
    let (tx, rx) = tokio::sync::watch::channel(NodeView::Unread);
    let watch = tokio::spawn(watch_node(nobody.clone(), "n1".into(), tx));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(*rx.borrow(), NodeView::Unread);
    assert!(rx.borrow().maintenance().is_empty());
    let t = std::time::Instant::now();
    assert_eq!(read_now(&nobody, "n1", Duration::from_secs(5)).await, None);
    assert!(t.elapsed() < Duration::from_secs(6));
    watch.abort();
}

/// The agent process against a real kube-apiserver: its report turns paused
/// as soon as its Node's labels say maintenance (the interval is 30 s, so the
/// watch, not the heartbeat, triggers it), names the labels, holds no device
/// file, and turns back when the labels clear; on SIGTERM during maintenance
/// it publishes the paused report on its way out.
#[tokio::test]
async fn the_probe_process_sits_out_its_nodes_maintenance() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
    let env = gpuready_testenv::TestEnv::shared()
        .await
        .expect("test control plane");
    let client = env.client().expect("client");
    let ns = env
        .create_namespace("probe-maint")
        .await
        .expect("namespace");
    let node = gpuready_testenv::unique_name("maint");
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": node } })).expect("node"),
        )
        .await
        .expect("create node");
    let label = |labels: Value| {
        let nodes = nodes.clone();
        let node = node.clone();
        async move {
            nodes
                .patch(
                    &node,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({ "metadata": { "labels": labels } })),
                )
                .await
                .expect("label node");
        }
    };
    let mut child = tokio::process::Command::from({
        let mut c = gpuready_on(env);
        c.args(["probe", "--interval", "30s", "--compute-check", "off"])
            .env("NODE_NAME", &node)
            .env("POD_NAMESPACE", &ns)
            .env("GPUREADY_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    })
    .kill_on_drop(true)
    .spawn()
    .expect("start gpuready probe");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let name = format!("gpuready-probe-{node}");
    let report = |paused: bool| {
        let cms = cms.clone();
        let name = name.clone();
        async move {
            let cm = cms.get_opt(&name).await.ok()??;
            match gpuready::controller::watch::probe_reports::evidence_of(&cm) {
                gpuready_core::health::ProbeEvidence::Report(r) if r.paused.is_some() == paused => {
                    Some(r)
                }
                _ => None,
            }
        }
    };
    eventually(60, "the first report, not paused", || report(false)).await;

    let t = std::time::Instant::now();
    label(json!({ keys::lifecycle::DEPLOY_CLIENT: "paused-for-driver-upgrade" })).await;
    let paused = eventually(20, "the paused report", || report(true)).await;
    let took = t.elapsed();
    assert!(took < Duration::from_secs(20), "{took:?}");
    let pause = paused.paused.clone().expect("paused");
    assert_eq!(pause.labels, [PAUSED_CLIENT]);
    assert_eq!(pause.open_device_files, Some(Vec::new()));
    assert!(paused.gpus.is_empty() && !paused.nvml.usable);
    println!("paused report {:.1}s after the label", took.as_secs_f64());

    label(json!({
        keys::lifecycle::DEPLOY_CLIENT: "true",
        keys::lifecycle::DRIVER_UPGRADE_STATE: "upgrade-done",
    }))
    .await;
    eventually(20, "the report back in service", || report(false)).await;

    // SIGTERM in maintenance: the paused report is published on the way out
    // (deleted first, so only that publication can bring it back).
    label(json!({ keys::lifecycle::DRIVER_UPGRADE_STATE: "drain-required" })).await;
    eventually(20, "paused again", || report(true)).await;
    cms.delete(&name, &DeleteParams::default())
        .await
        .expect("delete the report");
    let pid = child.id().expect("pid").to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill -TERM");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the probe stops within 20 s of SIGTERM")
        .expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let last = report(true)
        .await
        .expect("the paused report published on SIGTERM");
    assert_eq!(
        last.paused.expect("paused").labels,
        ["nvidia.com/gpu-driver-upgrade-state=drain-required"]
    );
    nodes
        .delete(&node, &DeleteParams::default())
        .await
        .expect("delete node");
}
