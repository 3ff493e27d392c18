//! The Health layer on recorded probe reports: the H200 (driver 580.159.04,
//! CUDA 13.0) as nvidia-smi showed it and as `gpuready probe` captured it, and
//! fault cases built from NVIDIA's XID and ECC semantics (docs/probe.md cites them).

use crate::common;

use common::*;
use gpuready_api::Layer;
use gpuready_api::keys::{self, health_reasons as r, nvidia};
use gpuready_api::probe::{EventKind, EventRecord, ProbeReport};
use gpuready_core::NodeFacts;
use gpuready_core::evaluate::{LayerReport, Status};
use gpuready_core::health::{ProbeEvidence, parse_report};

const H200_SMI: &str = include_str!("../fixtures/probe/h200-nvidia-smi.json");
const H200_REAL: &str = include_str!("../fixtures/probe/h200-report.json");
const H200_REAL_EVENTS: &str = include_str!("../fixtures/probe/h200-report-events.json");

/// The H200 node as GFD labels it (values of a real GFD v0.20.0 capture on that GPU).
fn h200_node() -> NodeBuilder {
    NodeBuilder::h200("h200-a")
}

/// The nvidia-smi H200 report, refreshed 30 s before `NOW`.
fn h200_report() -> ProbeReport {
    let mut r = parse_report(H200_SMI).expect("fixture parses");
    r.generated_at = at(-30).to_string();
    r
}

fn facts_with(node: &NodeBuilder, report: &ProbeReport) -> NodeFacts {
    node.facts()
        .with_probe(Some(ProbeEvidence::Report(Box::new(report.clone()))))
}

fn judge_with(spec_yaml: &str, node: &NodeBuilder, report: &ProbeReport) -> LayerReport {
    gpuready_core::evaluate(&spec(spec_yaml), &facts_with(node, report), now())
}

fn xid(x: u64, count: u64) -> EventRecord {
    EventRecord {
        gpu: "GPU-72dbae72-2934-2a81-2c3a-c94870629f89".into(),
        kind: EventKind::Xid,
        xid: Some(x),
        count,
        first_seen: at(-120).to_string(),
        last_seen: at(-60).to_string(),
    }
}

#[test]
fn h200_from_nvidia_smi_is_healthy() {
    let report = judge_with("", &h200_node(), &h200_report());
    report
        .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
        .mentions(&[
            "driver 580.159.04",
            "1× NVIDIA H200 143771 MiB compute 9.0",
            "no uncorrectable ECC error",
            "fatal XID since the probe started",
        ]);
    assert!(report.ready());
    // The Health layer comes last, after the label layers it cross-checks.
    assert_eq!(report.layers.last().map(|l| l.layer), Some(Layer::Health));
}

/// The report `gpuready probe --once --output json` printed on the real H200
/// (2026-11-30, device machine). `--once` watches no events, which the
/// verdict says; everything else reads healthy and agrees with GFD's labels.
#[test]
fn h200_real_capture_is_healthy() {
    let mut real = parse_report(H200_REAL).expect("the captured report parses");
    assert_eq!(real.gpus.len(), 1);
    let gpu = &real.gpus[0];
    assert_eq!(gpu.name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(gpu.memory_mib, Some(143_771));
    assert_eq!(gpu.compute_capability.as_deref(), Some("9.0"));
    assert_eq!(real.driver_version.as_deref(), Some("580.159.04"));
    assert_eq!(real.cuda_driver_version.as_deref(), Some("13.0"));
    assert!(real.nvml.usable);
    real.node = Some("h200-a".into());
    real.generated_at = at(-30).to_string();
    let report = judge_with("", &h200_node(), &real);
    report
        .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
        .mentions(&[
            "1× NVIDIA H200 143771 MiB compute 9.0",
            "XIDs not monitored",
        ]);
    assert!(report.ready());
}

/// The same H200 with the NVML event set watched for 10 s: registration works
/// on the real driver, so the verdict vouches for "no fatal XID" too.
#[test]
fn h200_real_capture_with_events_is_healthy() {
    let mut real = parse_report(H200_REAL_EVENTS).expect("the captured report parses");
    assert!(real.events.monitored);
    assert_eq!(real.events.error, None);
    real.generated_at = at(-30).to_string();
    let mut profile = String::from("probe: {whenMissing: Blocking, maxReportAgeSeconds: 120}\n");
    profile.push_str("gpu: {products: [NVIDIA-H200], minMemoryMib: 143000, minComputeCapability: \"9.0\", count: 1}\n");
    profile.push_str("minDriverVersion: \"580.65.06\"\ncudaVersion: \"13.0\"");
    let report = judge_with(&profile, &h200_node(), &real);
    report
        .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
        .mentions(&["or fatal XID since the probe started"]);
    assert!(report.ready(), "{:?}", report.first_failure());
}

#[test]
fn no_report_and_no_probe_rules_judges_as_before() {
    let report = judge("", &h200_node());
    assert!(report.get(Layer::Health).is_none());
    assert_eq!(report.layers.len(), Layer::ALL.len());
    assert!(report.ready());
}

#[test]
fn missing_report_follows_the_profile() {
    judge("probe: {whenMissing: Unknown}", &h200_node())
        .expect(Layer::Health, Status::Unknown, r::PROBE_MISSING)
        .mentions(&["gpuready-probe-h200-a", "probe.enabled=true"]);
    let report = judge("probe: {whenMissing: Blocking}", &h200_node());
    report.expect(Layer::Health, Status::NotReady, r::PROBE_MISSING);
    assert!(!report.ready());
    // Not gating: reported, but the node stays ready.
    let report = judge(
        "probe: {whenMissing: Blocking}\ngatingLayers: [Node, Hardware, Driver, DevicePlugin, FeatureDiscovery, Profile, Compatibility]",
        &h200_node(),
    );
    report.expect(Layer::Health, Status::NotReady, r::PROBE_MISSING);
    assert!(report.ready());
}

#[test]
fn unreadable_reports_are_unknown() {
    let node = h200_node();
    for (text, fragment) in [
        ("not json", "not a probe report"),
        (
            r#"{"apiVersion": "gpuready.io/probe-report/v9"}"#,
            "probe-report/v9",
        ),
    ] {
        let facts = node
            .facts()
            .with_probe(Some(ProbeEvidence::from_json(text)));
        gpuready_core::evaluate(&spec(""), &facts, now())
            .expect(Layer::Health, Status::Unknown, r::PROBE_REPORT_INVALID)
            .mentions(&[fragment]);
    }
    let mut other = h200_report();
    other.node = Some("someone-else".into());
    judge_with("", &node, &other)
        .expect(Layer::Health, Status::Unknown, r::PROBE_REPORT_INVALID)
        .mentions(&["someone-else"]);
    let mut bad_time = h200_report();
    bad_time.generated_at = "yesterday".into();
    judge_with("", &node, &bad_time).expect(
        Layer::Health,
        Status::Unknown,
        r::PROBE_REPORT_INVALID,
    );
}

#[test]
fn unknown_fields_of_the_same_version_are_tolerated() {
    let text = H200_SMI.replacen("\"node\"", "\"futureField\": [1, 2], \"node\"", 1);
    assert_eq!(parse_report(&text).expect("parses").gpus.len(), 1);
}

#[test]
fn stale_report() {
    let node = h200_node();
    let mut old = h200_report();
    old.generated_at = at(-301).to_string();
    judge_with("", &node, &old)
        .expect(Layer::Health, Status::Unknown, r::PROBE_REPORT_STALE)
        .mentions(&["older than the 300s limit", &at(-301).to_string()]);
    judge_with("probe: {whenMissing: Blocking}", &node, &old).expect(
        Layer::Health,
        Status::NotReady,
        r::PROBE_REPORT_STALE,
    );
    judge_with("probe: {maxReportAgeSeconds: 0}", &node, &old).expect(
        Layer::Health,
        Status::Ready,
        r::PROBE_HEALTHY,
    );
    // A fresh report schedules the re-check for when it would go stale.
    let fresh = judge_with("probe: {maxReportAgeSeconds: 120}", &node, &h200_report());
    assert_eq!(fresh.recheck_after_seconds, Some(91));
}

#[test]
fn nvml_unusable() {
    let mut report = h200_report();
    report.nvml.usable = false;
    report.nvml.error = Some("libnvidia-ml.so.1: cannot open shared object file".into());
    report.gpus.clear();
    report.device_count = None;
    judge_with("", &h200_node(), &report)
        .expect(Layer::Health, Status::NotReady, r::NVML_UNUSABLE)
        .mentions(&["cannot open shared object file", "RuntimeClass"]);
}

#[test]
fn gpus_missing() {
    let node = h200_node();
    let mut none = h200_report();
    none.device_count = Some(0);
    none.gpus.clear();
    judge_with("", &node, &none)
        .expect(Layer::Health, Status::NotReady, r::GPUS_MISSING)
        .mentions(&["enumerates no GPU"]);

    // An 8-GPU node that lost one: XID 79, the label still says 8.
    let eight = node.clone().label(nvidia::GPU_COUNT, "8").gpus(8, 8);
    let mut seven = h200_report();
    seven.device_count = Some(7);
    judge_with("gpu: {count: 8}", &eight, &seven)
        .expect(Layer::Health, Status::NotReady, r::GPUS_MISSING)
        .mentions(&[
            "NVML sees 7 GPU(s), the profile expects at least 8",
            "nvidia.com/gpu.count=8",
        ]);
    // Without a profile count, the label alone tells.
    judge_with("", &eight, &seven)
        .expect(Layer::Health, Status::NotReady, r::GPUS_MISSING)
        .mentions(&["a GPU was lost since GFD last counted"]);
    // NFD's PCI scan (the evidence bundle) counts 8 GPUs on the bus; no profile
    // count and a label that already says 7: the bus still tells.
    let relabelled = node.clone().label(nvidia::GPU_COUNT, "7");
    let mut facts = facts_with(&relabelled, &seven);
    facts.evidence.bus = Some(gpuready_core::evidence::BusFacts {
        gpus: 8,
        objects: vec!["h200-a".into()],
        ..Default::default()
    });
    gpuready_core::evaluate(&spec(""), &facts, now())
        .expect(Layer::Health, Status::NotReady, r::GPUS_MISSING)
        .mentions(&["NFD finds 8 NVIDIA GPU(s) on the PCI bus (h200-a)"]);
    // Under MIG single, gpu.count counts slices (7 per H200): not compared.
    let mig = node
        .clone()
        .label(nvidia::MIG_STRATEGY, "single")
        .label(nvidia::GPU_COUNT, "7")
        .label(nvidia::GPU_PRODUCT, "NVIDIA-H200-MIG-1g.18gb")
        .label(nvidia::GPU_MEMORY, "16384")
        .gpus(7, 7);
    let mut one = h200_report();
    one.gpus[0].mig_enabled = Some(true);
    judge_with("gpu: {count: 7}", &mig, &one).expect(
        Layer::Health,
        Status::Ready,
        r::PROBE_HEALTHY,
    );
}

#[test]
fn uncorrectable_ecc() {
    let node = h200_node();
    let mut report = h200_report();
    if let Some(ecc) = report.gpus[0].ecc.as_mut() {
        ecc.volatile_uncorrectable = Some(2);
    }
    judge_with("", &node, &report)
        .expect(Layer::Health, Status::NotReady, r::UNCORRECTABLE_ECC)
        .mentions(&[
            "GPU 0 (GPU-72dbae72",
            "2 uncorrectable ECC error(s)",
            "reset the GPU",
        ]);

    // Lifetime (aggregate) errors alone were already handled by a reset: healthy.
    let mut past = h200_report();
    if let Some(ecc) = past.gpus[0].ecc.as_mut() {
        ecc.aggregate_uncorrectable = Some(5);
    }
    judge_with("", &node, &past).expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY);

    // The NVML double-bit ECC event counts too.
    let mut dbe = h200_report();
    dbe.events.records.push(EventRecord {
        kind: EventKind::DoubleBitEcc,
        xid: None,
        ..xid(0, 1)
    });
    judge_with("", &node, &dbe)
        .expect(Layer::Health, Status::NotReady, r::UNCORRECTABLE_ECC)
        .mentions(&["double-bit ECC event"]);
}

#[test]
fn row_remapping() {
    let node = h200_node();
    let mut pending = h200_report();
    if let Some(rr) = pending.gpus[0].row_remapping.as_mut() {
        rr.pending = true;
        rr.uncorrectable_rows = 1;
    }
    judge_with("", &node, &pending)
        .expect(Layer::Health, Status::NotReady, r::ROW_REMAP_PENDING)
        .mentions(&["nvidia-smi -r"]);
    let mut failed = pending.clone();
    if let Some(rr) = failed.gpus[0].row_remapping.as_mut() {
        rr.failure = true;
    }
    judge_with("", &node, &failed)
        .expect(Layer::Health, Status::NotReady, r::ROW_REMAP_FAILED)
        .mentions(&["RMA"]);
    // Pre-Ampere GPUs retire pages instead.
    let mut retired = h200_report();
    retired.gpus[0].row_remapping = None;
    retired.gpus[0].retired_pages = Some(gpuready_api::probe::RetiredPages {
        double_bit: 1,
        multiple_single_bit: 0,
        pending: true,
    });
    judge_with("", &node, &retired)
        .expect(Layer::Health, Status::NotReady, r::ROW_REMAP_PENDING)
        .mentions(&["page retirement is pending"]);
}

#[test]
fn fatal_and_benign_xids() {
    let node = h200_node();
    let mut off_bus = h200_report();
    off_bus.events.records.push(xid(79, 1));
    judge_with("", &node, &off_bus)
        .expect(Layer::Health, Status::NotReady, r::FATAL_XID)
        .mentions(&[
            "XID 79 ×1",
            "fallen off the bus",
            "gpuready.io/repaired-at",
            "restart the probe pod",
        ]);

    // XID 31 (page fault) and 13 (graphics exception) follow the workload.
    let mut app = h200_report();
    app.events.records.extend([xid(31, 4), xid(13, 1)]);
    judge_with("", &node, &app)
        .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
        .mentions(&["non-fatal XIDs seen: XID 31 ×4, XID 13 ×1"]);

    // The profile's own list replaces the default one.
    let mut both = h200_report();
    both.events.records.extend([xid(79, 1), xid(92, 3)]);
    judge_with("probe: {fatalXids: [92]}", &node, &both)
        .expect(Layer::Health, Status::NotReady, r::FATAL_XID)
        .mentions(&["XID 92 ×3", "listed as fatal by the profile"]);
    judge_with("probe: {fatalXids: [92]}", &node, &off_bus).expect(
        Layer::Health,
        Status::Ready,
        r::PROBE_HEALTHY,
    );
}

#[test]
fn application_xids_cannot_be_fatal() {
    let s: gpuready_api::GpuNodeProfileSpec = serde_yaml_ng::from_str(
        "nodeSelector: {}\nprobe: {fatalXids: [79, 31], maxReportAgeSeconds: 90000}",
    )
    .expect("parses");
    let errors: Vec<String> = s.validate().iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        vec![
            "spec.probe.maxReportAgeSeconds: 90000 must be at most 86400 (1 day)".to_owned(),
            "spec.probe.fatalXids: 31 is an application XID (13, 31, 43, 45, 68, 109): it follows a faulty workload, not a faulty GPU".to_owned(),
        ]
    );
}

#[test]
fn labels_contradicting_nvml() {
    let mut report = h200_report();
    report.driver_version = Some("580.172.08".into());
    // GFD still labels the card that was swapped out and the old driver.
    let stale = h200_node()
        .label(nvidia::GPU_PRODUCT, "NVIDIA-H100-80GB-HBM3")
        .label(nvidia::GPU_MEMORY, "81559");
    judge_with("", &stale, &report)
        .expect(Layer::Health, Status::NotReady, r::LABELS_CONTRADICT_PROBE)
        .mentions(&[
            "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 but NVML reports NVIDIA-H200",
            "nvidia.com/gpu.memory=81559 but NVML reports 143771 MiB",
            "nvidia.com/cuda.driver-version.full=580.159.04 but the loaded driver is 580.172.08",
            "restart gpu-feature-discovery",
        ]);
    let old_cc = h200_node().compute(8, 0);
    judge_with("", &old_cc, &h200_report())
        .expect(Layer::Health, Status::NotReady, r::LABELS_CONTRADICT_PROBE)
        .mentions(&["say 8.0 but NVML reports 9.0"]);
    judge_with("probe: {checkLabels: false}", &stale, &report).expect(
        Layer::Health,
        Status::Ready,
        r::PROBE_HEALTHY,
    );
    // Spellings GFD uses for the same card agree: no prefix, -SHARED suffix.
    let shared = h200_node().label(nvidia::GPU_PRODUCT, "H200-SHARED");
    judge_with("", &shared, &h200_report()).expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY);
    // Under MIG, GFD labels the slice: product and memory are not compared.
    let mig = h200_node()
        .label(nvidia::MIG_STRATEGY, "single")
        .label(nvidia::GPU_PRODUCT, "NVIDIA-H200-MIG-1g.18gb")
        .label(nvidia::GPU_MEMORY, "16384");
    judge_with("", &mig, &h200_report()).expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY);
}

#[test]
fn several_findings_name_the_worst_first() {
    let mut report = h200_report();
    report.events.records.push(xid(48, 1));
    if let Some(ecc) = report.gpus[0].ecc.as_mut() {
        ecc.volatile_uncorrectable = Some(1);
    }
    judge_with("", &h200_node(), &report)
        .expect(Layer::Health, Status::NotReady, r::UNCORRECTABLE_ECC)
        .mentions(&["1 uncorrectable ECC error(s)", "XID 48 ×1"]);
}

#[test]
fn node_down_makes_health_unknown() {
    let down = h200_node().kubelet_not_ready("container runtime is down");
    judge_with("", &down, &h200_report()).expect(
        Layer::Health,
        Status::Unknown,
        keys::reasons::NODE_NOT_READY,
    );
}

#[test]
fn probe_condition_on_the_node() {
    let node = h200_node();
    let mut broken = h200_report();
    broken.events.records.push(xid(79, 1));
    let profile = profile("h200", "");
    let facts = facts_with(&node, &broken);
    let selector = gpuready_core::select::profile_selector(&profile).expect("selector");
    let a = gpuready_core::assess(&facts, &[(&profile, &selector)], &opts());
    assert_eq!(a.reason, r::FATAL_XID);
    let conditions = a.changes.conditions.expect("conditions written");
    let probe = conditions
        .set
        .iter()
        .find(|c| c.type_ == keys::CONDITION_PROBE_HEALTHY)
        .expect("GpuReadyProbe written");
    assert_eq!(probe.status, "False");
    assert_eq!(probe.reason.as_deref(), Some(r::FATAL_XID));
    assert!(a.changes.taint.is_some(), "the node is tainted");

    // Without a report (and Ignore) the condition is not written at all.
    let a = gpuready_core::assess(&node.facts(), &[(&profile, &selector)], &opts());
    let conditions = a.changes.conditions.expect("conditions written");
    assert!(
        conditions
            .set
            .iter()
            .all(|c| c.type_ != keys::CONDITION_PROBE_HEALTHY)
    );
}

// ---- Report v2: device nodes, fabric, the CUDA compute check ----------------

use gpuready_api::probe::{
    ComputeCheck, ComputeOutcome, ComputeSkip, ComputeSkipReason, ComputeStack, ComputeStep,
    ComputeTrigger, CudaError, DeviceNode, FabricPhase, FabricState, GpuCompute,
};

const H200_UUID: &str = "GPU-72dbae72-2934-2a81-2c3a-c94870629f89";

fn nodes(uvm: bool) -> Vec<DeviceNode> {
    let node = |p: &str, present: bool, gpu: Option<u32>| DeviceNode {
        path: p.into(),
        present,
        gpu,
    };
    vec![
        node("/dev/nvidiactl", true, None),
        node("/dev/nvidia-uvm", uvm, None),
        node("/dev/nvidia-uvm-tools", uvm, None),
        node("/dev/nvidia0", true, Some(0)),
    ]
}

fn passed_gpu() -> GpuCompute {
    GpuCompute {
        outcome: ComputeOutcome::Passed,
        steps: vec![ComputeStep {
            name: "launch".into(),
            millis: 0.2,
            ok: true,
        }],
        bytes: 32 << 20,
        ..GpuCompute::default()
    }
}

/// The H200 report as a v2 probe writes it after a passing check 10 minutes ago.
fn v2_report() -> ProbeReport {
    let mut r = h200_report();
    r.api_version = gpuready_api::probe::PROBE_REPORT_API_VERSION.into();
    r.boot_id = Some("boot-1".into());
    r.device_nodes = nodes(true);
    r.gpus[0].compute_processes = Some(0);
    r.gpus[0].compute_mode = Some("Default".into());
    r.gpus[0].compute = Some(passed_gpu());
    r.compute_check = Some(ComputeCheck {
        outcome: ComputeOutcome::Passed,
        ran_at: Some(at(-600).to_string()),
        trigger: Some(ComputeTrigger::FirstCheck),
        stack: Some(ComputeStack {
            driver_version: Some("580.159.04".into()),
            boot_id: Some("boot-1".into()),
            gpus: vec![H200_UUID.into()],
        }),
        library: Some("libcuda.so".into()),
        cuda_version: Some("13.0".into()),
        init_millis: Some(150.0),
        millis: Some(420.0),
        ..ComputeCheck::default()
    });
    r
}

fn cc(r: &mut ProbeReport) -> &mut ComputeCheck {
    r.compute_check.as_mut().expect("v2 report")
}

#[test]
fn v2_passing_check_is_healthy_and_says_so() {
    let report = judge_with("", &h200_node(), &v2_report());
    report
        .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
        .mentions(&["CUDA compute check passed at", "in 420 ms on 1 GPU(s)"]);
    assert!(report.ready());
}

#[test]
fn v1_reports_are_still_read_and_judge_no_compute_fields() {
    let v1 = H200_SMI.replace("probe-report/v2", "probe-report/v1");
    let parsed = parse_report(&v1).expect("v1 parses");
    assert!(parsed.compute_check.is_none() && parsed.device_nodes.is_empty());
    let mut r = parsed;
    r.generated_at = at(-30).to_string();
    let report = judge_with(
        "probe: {computeCheck: {whenSkipped: Blocking, whenStale: Blocking}}",
        &h200_node(),
        &r,
    );
    report.expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY);
}

#[test]
fn a_missing_uvm_device_node_is_device_node_missing() {
    let mut r = v2_report();
    r.device_nodes = nodes(false);
    judge_with("", &h200_node(), &r)
        .expect(Layer::Health, Status::NotReady, r::DEVICE_NODE_MISSING)
        .mentions(&[
            "/dev/nvidia-uvm, /dev/nvidia-uvm-tools",
            "modprobe nvidia-uvm",
        ]);
    let mut r = v2_report();
    r.device_nodes[3].present = false;
    judge_with("", &h200_node(), &r)
        .expect(Layer::Health, Status::NotReady, r::DEVICE_NODE_MISSING)
        .mentions(&["/dev/nvidia0", "RuntimeClass"]);
}

#[test]
fn fabric_not_completed_or_failed_is_fabric_not_ready_and_absent_fabric_is_fine() {
    for (state, status, fragment) in [
        (FabricPhase::NotStarted, None, "not started"),
        (FabricPhase::InProgress, None, "still in progress"),
        (
            FabricPhase::Completed,
            Some("Uninitialized"),
            "registration failed (Uninitialized)",
        ),
    ] {
        let mut r = v2_report();
        r.gpus[0].fabric = Some(FabricState {
            state,
            status: status.map(str::to_owned),
            ..FabricState::default()
        });
        judge_with("", &h200_node(), &r)
            .expect(Layer::Health, Status::NotReady, r::FABRIC_NOT_READY)
            .mentions(&[fragment, "nvidia-fabricmanager"]);
    }
    let mut r = v2_report();
    r.gpus[0].fabric = Some(FabricState {
        state: FabricPhase::Completed,
        status: Some("Success".into()),
        clique_id: Some(1),
        ..FabricState::default()
    });
    judge_with("", &h200_node(), &r).expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY);
}

fn init_error(name: &str, code: u32) -> ProbeReport {
    let mut r = v2_report();
    r.gpus[0].compute = None;
    let c = cc(&mut r);
    c.outcome = ComputeOutcome::Failed;
    c.error = Some(CudaError {
        name: name.into(),
        code,
        step: "init".into(),
        detail: None,
    });
    r
}

#[test]
fn cuda_init_errors_are_named_with_what_to_do() {
    for (name, code, fragment) in [
        ("CUDA_ERROR_SYSTEM_NOT_READY", 802, "nvidia-fabricmanager"),
        (
            "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
            803,
            "user-space libraries",
        ),
        (
            "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
            804,
            "cuda-compat",
        ),
        ("CUDA_ERROR_UNKNOWN", 999, "/dev/nvidia-uvm"),
        ("CUDA_LIBRARY_UNAVAILABLE", 0, "NVIDIA_DRIVER_CAPABILITIES"),
        ("CUDA_CHECK_TIMEOUT", 0, "hung"),
        ("CUDA_CHECK_CRASHED", 0, "memory limit"),
    ] {
        judge_with("", &h200_node(), &init_error(name, code))
            .expect(Layer::Health, Status::NotReady, r::CUDA_INIT_FAILED)
            .mentions(&[&format!("{name} ({code})"), fragment]);
    }
}

#[test]
fn wrong_data_is_compute_mismatch_and_a_failed_call_is_compute_check_failed() {
    let mut r = v2_report();
    cc(&mut r).outcome = ComputeOutcome::Failed;
    let g = r.gpus[0].compute.as_mut().expect("result");
    g.outcome = ComputeOutcome::Failed;
    g.mismatch = Some("kernel out[i] = in[i]*3+7: 1 of 4194304 words wrong".into());
    judge_with("", &h200_node(), &r)
        .expect(Layer::Health, Status::NotReady, r::COMPUTE_MISMATCH)
        .mentions(&["1 of 4194304 words wrong", "RMA"]);

    let mut r = v2_report();
    cc(&mut r).outcome = ComputeOutcome::Failed;
    let g = r.gpus[0].compute.as_mut().expect("result");
    g.outcome = ComputeOutcome::Failed;
    g.error = Some(CudaError {
        name: "CUDA_ERROR_LAUNCH_FAILED".into(),
        code: 719,
        step: "launch".into(),
        detail: None,
    });
    judge_with("", &h200_node(), &r)
        .expect(Layer::Health, Status::NotReady, r::COMPUTE_CHECK_FAILED)
        .mentions(&["CUDA launch failed with CUDA_ERROR_LAUNCH_FAILED (719)"]);
}

fn skipped_report() -> ProbeReport {
    let mut r = v2_report();
    r.gpus[0].compute = None;
    r.gpus[0].compute_processes = Some(3);
    r.compute_check = Some(ComputeCheck {
        outcome: ComputeOutcome::Skipped,
        skipped: Some(ComputeSkip {
            reason: ComputeSkipReason::GpusBusy,
            due: ComputeTrigger::FirstCheck,
            message: "a workload holds GPU 0".into(),
            since: at(-900).to_string(),
        }),
        ..ComputeCheck::default()
    });
    r
}

#[test]
fn a_skipped_check_gates_only_when_the_profile_says() {
    let r = skipped_report();
    let report = judge_with("", &h200_node(), &r);
    report
        .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
        .mentions(&[
            "no compute check has run",
            "GpusBusy",
            "a workload holds GPU 0",
        ]);
    assert!(report.ready());
    judge_with(
        "probe: {computeCheck: {whenSkipped: Unknown}}",
        &h200_node(),
        &r,
    )
    .expect(Layer::Health, Status::Unknown, r::COMPUTE_CHECK_SKIPPED)
    .mentions(&["whenSkipped"]);
    let report = judge_with(
        "probe: {computeCheck: {whenSkipped: Blocking}}",
        &h200_node(),
        &r,
    );
    report.expect(Layer::Health, Status::NotReady, r::COMPUTE_CHECK_SKIPPED);
    assert!(!report.ready());
}

#[test]
fn a_check_on_another_stack_or_too_old_is_stale() {
    let node = h200_node();
    // The driver was upgraded since the check; the new one was skipped (busy).
    let mut r = v2_report();
    r.driver_version = Some("580.178.04".into());
    cc(&mut r).skipped = Some(ComputeSkip {
        reason: ComputeSkipReason::GpusBusy,
        due: ComputeTrigger::DriverChanged,
        message: "a workload holds GPU 0".into(),
        since: at(-60).to_string(),
    });
    let node_new = h200_node().driver("580.178.04");
    judge_with("", &node_new, &r)
        .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
        .mentions(&["is stale: the driver changed from 580.159.04 to 580.178.04"]);
    judge_with(
        "probe: {computeCheck: {whenStale: Blocking}}",
        &node_new,
        &r,
    )
    .expect(Layer::Health, Status::NotReady, r::COMPUTE_CHECK_STALE)
    .mentions(&["a driver-change check skipped"]);
    // A reboot.
    let mut r = v2_report();
    r.boot_id = Some("boot-2".into());
    judge_with("probe: {computeCheck: {whenStale: Unknown}}", &node, &r)
        .expect(Layer::Health, Status::Unknown, r::COMPUTE_CHECK_STALE)
        .mentions(&["rebooted"]);
    // Age: 600 s old against a 300 s limit; fresh against 3600 s, with the
    // re-check scheduled for when it would pass the limit.
    let r = v2_report();
    judge_with(
        "probe: {computeCheck: {whenStale: Blocking, maxAgeSeconds: 300}}",
        &node,
        &r,
    )
    .expect(Layer::Health, Status::NotReady, r::COMPUTE_CHECK_STALE)
    .mentions(&["older than probe.computeCheck.maxAgeSeconds (300s)"]);
    let fresh = judge_with(
        "probe: {maxReportAgeSeconds: 0, computeCheck: {whenStale: Blocking, maxAgeSeconds: 3600}}",
        &node,
        &r,
    );
    fresh.expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY);
    assert_eq!(fresh.recheck_after_seconds, Some(3001));
}

#[test]
fn a_disabled_check_is_reported_not_judged() {
    let mut r = v2_report();
    r.device_nodes.clear();
    r.gpus[0].compute = None;
    r.compute_check = Some(ComputeCheck {
        outcome: ComputeOutcome::Disabled,
        ..ComputeCheck::default()
    });
    judge_with(
        "probe: {computeCheck: {whenSkipped: Blocking, whenStale: Blocking}}",
        &h200_node(),
        &r,
    )
    .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
    .mentions(&["switched off"]);
}

#[test]
fn device_nodes_rank_before_the_cuda_error_they_cause() {
    let mut r = init_error("CUDA_ERROR_UNKNOWN", 999);
    r.device_nodes = nodes(false);
    judge_with("", &h200_node(), &r)
        .expect(Layer::Health, Status::NotReady, r::DEVICE_NODE_MISSING)
        .mentions(&["CUDA_ERROR_UNKNOWN (999)"]);
}

// ---- Report v2 as the probe wrote it on the real H200 (2026-12-01) -----------

const H200_V2_COMPUTE: &str = include_str!("../fixtures/probe/h200-report-v2-compute.json");
const H200_V2_NONROOT: &str =
    include_str!("../fixtures/probe/h200-report-v2-compute-uid65532.json");
const H200_V2_BUSY: &str = include_str!("../fixtures/probe/h200-report-v2-busy.json");
const H200_V2_UVM: &str = include_str!("../fixtures/probe/h200-report-v2-uvm-hidden.json");
const H200_V2_UVM_RO: &str =
    include_str!("../fixtures/probe/h200-report-v2-uvm-hidden-root-ro.json");

/// A captured report as fresh as the tests' clock.
fn real(text: &str) -> ProbeReport {
    let mut r = parse_report(text).expect("the captured report parses");
    r.generated_at = at(-30).to_string();
    r
}

#[test]
fn h200_v2_compute_check_passed_well_under_a_second() {
    for text in [H200_V2_COMPUTE, H200_V2_NONROOT] {
        let r = real(text);
        let cc = r.compute_check.as_ref().expect("compute check");
        assert_eq!(cc.outcome, ComputeOutcome::Passed);
        assert_eq!(cc.cuda_version.as_deref(), Some("13.0"));
        assert!(
            r.gpus[0].fabric.is_none(),
            "no fabric on a pass-through H200"
        );
        assert!(r.device_nodes.iter().all(|d| d.present));
        let gpu = r.gpus[0].compute.as_ref().expect("per-GPU result");
        let names: Vec<&str> = gpu.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "context",
                "alloc",
                "copyHtoD",
                "copyDtoH",
                "compare",
                "moduleLoad",
                "launch",
                "copyResult",
                "verify",
                "free"
            ]
        );
        assert!(gpu.steps.iter().all(|s| s.ok));
        let per_gpu: f64 = gpu.steps.iter().map(|s| s.millis).sum();
        assert!(per_gpu < 1000.0, "{per_gpu} ms");
        assert!(cc.millis.is_some_and(|m| m < 1000.0), "{:?}", cc.millis);
        let report = judge_with(
            "probe: {whenMissing: Blocking, computeCheck: {whenSkipped: Blocking, whenStale: Blocking}}",
            &h200_node(),
            &r,
        );
        report
            .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
            .mentions(&["CUDA compute check passed at", "on 1 GPU(s)"]);
        assert!(report.ready());
    }
}

#[test]
fn h200_v2_busy_gpu_was_not_checked() {
    let r = real(H200_V2_BUSY);
    assert_eq!(r.gpus[0].compute_processes, Some(1));
    let cc = r.compute_check.as_ref().expect("compute check");
    assert_eq!(cc.outcome, ComputeOutcome::Skipped);
    assert_eq!(
        cc.skipped.as_ref().map(|s| s.reason),
        Some(ComputeSkipReason::GpusBusy)
    );
    assert!(r.gpus[0].compute.is_none());
    judge_with("", &h200_node(), &r)
        .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
        .mentions(&["no compute check has run", "a workload holds GPU 0"]);
    judge_with(
        "probe: {computeCheck: {whenSkipped: Blocking}}",
        &h200_node(),
        &r,
    )
    .expect(Layer::Health, Status::NotReady, r::COMPUTE_CHECK_SKIPPED);
}

#[test]
fn h200_v2_without_nvidia_uvm_is_device_node_missing_with_the_cuda_error() {
    for text in [H200_V2_UVM, H200_V2_UVM_RO] {
        let r = real(text);
        let cc = r.compute_check.as_ref().expect("compute check");
        assert_eq!(cc.outcome, ComputeOutcome::Failed);
        let e = cc.error.as_ref().expect("cuInit error");
        assert_eq!(
            (e.name.as_str(), e.code, e.step.as_str()),
            ("CUDA_ERROR_UNKNOWN", 999, "init")
        );
        let report = judge_with("", &h200_node(), &r);
        report
            .expect(Layer::Health, Status::NotReady, r::DEVICE_NODE_MISSING)
            .mentions(&[
                "/dev/nvidia-uvm, /dev/nvidia-uvm-tools",
                "modprobe nvidia-uvm",
                "CUDA init failed with CUDA_ERROR_UNKNOWN (999)",
            ]);
        assert!(!report.ready());
        // Without the device-node list (a v2 probe of another build), the CUDA
        // error alone names the cause.
        let mut no_nodes = r.clone();
        no_nodes.device_nodes.clear();
        judge_with("", &h200_node(), &no_nodes)
            .expect(Layer::Health, Status::NotReady, r::CUDA_INIT_FAILED)
            .mentions(&["/dev/nvidia-uvm"]);
    }
}

/// Prints gpuready's verdict on each real v2 capture
/// (`cargo test -p gpuready-core --test engine health::real_h200_verdicts -- --nocapture`).
#[test]
fn real_h200_verdicts() {
    for (name, text) in [
        ("compute", H200_V2_COMPUTE),
        ("compute-uid65532", H200_V2_NONROOT),
        ("busy", H200_V2_BUSY),
        ("uvm-hidden", H200_V2_UVM),
        ("uvm-hidden-root-ro", H200_V2_UVM_RO),
    ] {
        let report = judge_with("", &h200_node(), &real(text));
        let h = report.get(Layer::Health).expect("Health judged");
        println!(
            "{name}: {:?} {} ready={}: {}",
            h.status,
            h.reason,
            report.ready(),
            h.message
        );
    }
}

#[test]
fn only_uvm_tools_missing_is_a_note() {
    let mut r = v2_report();
    r.device_nodes[2].present = false;
    judge_with("", &h200_node(), &r)
        .expect(Layer::Health, Status::Ready, r::PROBE_HEALTHY)
        .mentions(&["/dev/nvidia-uvm-tools is missing (CUDA runs without it"]);
}

// ---- the probe paused for maintenance (docs/probe.md, "Sitting out maintenance")

/// A report the probe publishes while it steps aside: NVML released, no GPU
/// read, `paused` since 4000 s before `NOW`; taken `secs_ago` before `NOW`.
fn paused_report(secs_ago: i64) -> ProbeReport {
    use gpuready_api::probe::{NvmlState, ProbePause};
    ProbeReport {
        api_version: gpuready_api::probe::PROBE_REPORT_API_VERSION.into(),
        node: Some("h200-a".into()),
        generated_at: at(-secs_ago).to_string(),
        probe_started_at: at(-7200).to_string(),
        nvml: NvmlState {
            usable: false,
            error: Some("released: the node is in maintenance".into()),
            ..NvmlState::default()
        },
        paused: Some(ProbePause {
            since: at(-4000).to_string(),
            labels: vec!["nvidia.com/gpu.deploy.client=paused-for-driver-upgrade".into()],
            open_device_files: Some(Vec::new()),
        }),
        ..ProbeReport::default()
    }
}

/// One row: the node's maintenance labels, the report (paused or the healthy
/// H200's, and its age), the profile, and the Health verdict with a phrase of
/// its message and the re-check it schedules.
struct PausedCase {
    what: &'static str,
    labels: &'static [(&'static str, &'static str)],
    paused: bool,
    age: i64,
    spec: &'static str,
    status: Status,
    reason: &'static str,
    mentions: &'static [&'static str],
    recheck: Option<u64>,
}

const DRIVER_PAUSED: (&str, &str) = (
    keys::lifecycle::DEPLOY_CLIENT,
    keys::lifecycle::PAUSED_FOR_DRIVER_UPGRADE,
);
const CLIENT_BACK: (&str, &str) = (keys::lifecycle::DEPLOY_CLIENT, "true");
const STATE: &str = keys::lifecycle::DRIVER_UPGRADE_STATE;

const PAUSED_CASES: &[PausedCase] = &[
    PausedCase {
        what: "paused while the client label is paused",
        labels: &[DRIVER_PAUSED],
        paused: true,
        age: 30,
        spec: "",
        status: Status::Unknown,
        reason: r::PROBE_PAUSED,
        mentions: &[
            "released the GPUs at 2026-",
            "in maintenance (nvidia.com/gpu.deploy.client=paused-for-driver-upgrade)",
        ],
        recheck: None,
    },
    PausedCase {
        what: "a long upgrade: the removed pod's last report is old, not stale",
        labels: &[DRIVER_PAUSED, (STATE, "pod-restart-required")],
        paused: true,
        age: 3600,
        spec: "probe: {whenMissing: Blocking}",
        status: Status::Unknown,
        reason: r::PROBE_PAUSED,
        mentions: &[
            "nvidia.com/gpu-driver-upgrade-state=pod-restart-required, nvidia.com/gpu.deploy.client=paused-for-driver-upgrade",
        ],
        recheck: None,
    },
    PausedCase {
        what: "an operator before 26.7: the upgrade state alone",
        labels: &[(STATE, "cordon-required")],
        paused: true,
        age: 30,
        spec: "",
        status: Status::Unknown,
        reason: r::PROBE_PAUSED,
        mentions: &["nvidia.com/gpu-driver-upgrade-state=cordon-required"],
        recheck: None,
    },
    PausedCase {
        what: "a MIG change",
        labels: &[(nvidia::MIG_CONFIG_STATE, "pending")],
        paused: true,
        age: 30,
        spec: "",
        status: Status::Unknown,
        reason: r::PROBE_PAUSED,
        mentions: &["nvidia.com/mig.config.state=pending"],
        recheck: None,
    },
    PausedCase {
        what: "in maintenance but the probe still reads: judged as ever",
        labels: &[(STATE, "cordon-required")],
        paused: false,
        age: 30,
        spec: "",
        status: Status::Ready,
        reason: r::PROBE_HEALTHY,
        mentions: &[],
        recheck: Some(271),
    },
    PausedCase {
        what: "in maintenance, a stale report that is not paused: stale as ever",
        labels: &[DRIVER_PAUSED],
        paused: false,
        age: 301,
        spec: "",
        status: Status::Unknown,
        reason: r::PROBE_REPORT_STALE,
        mentions: &[],
        recheck: None,
    },
    PausedCase {
        what: "maintenance just ended, the probe not back yet",
        labels: &[CLIENT_BACK, (STATE, "upgrade-done")],
        paused: true,
        age: 30,
        spec: "",
        status: Status::Unknown,
        reason: r::PROBE_PAUSED,
        mentions: &[
            "in maintenance no more",
            "(nvidia.com/gpu.deploy.client=paused-for-driver-upgrade)",
        ],
        recheck: Some(271),
    },
    PausedCase {
        what: "paused on a node never in maintenance",
        labels: &[],
        paused: true,
        age: 0,
        spec: "probe: {maxReportAgeSeconds: 120}",
        status: Status::Unknown,
        reason: r::PROBE_PAUSED,
        mentions: &["in maintenance no more"],
        recheck: Some(121),
    },
    PausedCase {
        what: "a failed upgrade is no maintenance the probe sits out",
        labels: &[(STATE, "upgrade-failed")],
        paused: true,
        age: 30,
        spec: "",
        status: Status::Unknown,
        reason: r::PROBE_PAUSED,
        mentions: &["in maintenance no more"],
        recheck: Some(271),
    },
    PausedCase {
        what: "paused past the limit after maintenance: stale",
        labels: &[CLIENT_BACK, (STATE, "upgrade-done")],
        paused: true,
        age: 301,
        spec: "",
        status: Status::Unknown,
        reason: r::PROBE_REPORT_STALE,
        mentions: &["older than the 300s limit"],
        recheck: None,
    },
    PausedCase {
        what: "… and NotReady where a missing report blocks",
        labels: &[CLIENT_BACK],
        paused: true,
        age: 301,
        spec: "probe: {whenMissing: Blocking}",
        status: Status::NotReady,
        reason: r::PROBE_REPORT_STALE,
        mentions: &[],
        recheck: None,
    },
    PausedCase {
        what: "without a staleness limit it stays Unknown, never healthy",
        labels: &[CLIENT_BACK],
        paused: true,
        age: 86_400,
        spec: "probe: {maxReportAgeSeconds: 0}",
        status: Status::Unknown,
        reason: r::PROBE_PAUSED,
        mentions: &["in maintenance no more"],
        recheck: None,
    },
];

#[test]
fn a_paused_probe_reads_as_maintenance_while_it_lasts_and_never_as_healthy() {
    for c in PAUSED_CASES {
        let mut node = h200_node();
        for (k, v) in c.labels {
            node = node.label(k, v);
        }
        let report = if c.paused {
            paused_report(c.age)
        } else {
            let mut r = h200_report();
            r.generated_at = at(-c.age).to_string();
            r
        };
        let judged = judge_with(c.spec, &node, &report);
        let health = judged.get(Layer::Health).expect("a Health layer");
        assert_eq!(
            (health.status, health.reason.as_str()),
            (c.status, c.reason),
            "{}: {}",
            c.what,
            health.message
        );
        health.mentions(c.mentions);
        if c.recheck.is_some() {
            assert_eq!(judged.recheck_after_seconds, c.recheck, "{}", c.what);
        }
        assert!(
            !c.paused || !judged.ready(),
            "{}: ready while paused",
            c.what
        );
    }
}

/// The paused verdict while maintenance lasts names the report's pause time,
/// never its age: the probe's heartbeats do not rewrite the node condition.
#[test]
fn paused_heartbeats_leave_the_message_alone() {
    let node = h200_node().label(DRIVER_PAUSED.0, DRIVER_PAUSED.1);
    let first = judge_with("", &node, &paused_report(50));
    let later = judge_with("", &node, &paused_report(5));
    let message = |r: &LayerReport| r.get(Layer::Health).map(|l| l.message.clone());
    assert_eq!(message(&first), message(&later));
    // The node itself reads as the maintenance it is.
    assert!(first.lifecycle.maintenance.is_some());
}
