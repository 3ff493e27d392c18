//! Evidence beyond GFD labels: DRA ResourceSlices, NFD's PCI scan, passthrough
//! and vGPU nodes, and the not-ready deadline, judged by the pure engine over
//! the fixtures in `tests/fixtures/evidence/` and cases built from them.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use gpuready_api::dra::{DeviceTaint, ResourceSlice};
use gpuready_api::keys::{self, nvidia, reasons};
use gpuready_api::nfd::NodeFeature;
use gpuready_api::{GpuNodeProfile, Layer};
use gpuready_core::evaluate::{LayerReport, Status};
use gpuready_core::evidence::{DraEvidence, Evidence, EvidenceIndex, Source};
use gpuready_core::{NodeFacts, assess};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_core::Selector;
use serde_json::json;

const NODE: &str = "gpu-h200-01";

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/evidence/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn slice(name: &str) -> ResourceSlice {
    serde_yaml_ng::from_str(&fixture(name)).expect("fixture is a ResourceSlice")
}

/// The real GFD v0.20.0 labels of an H200, timestamp moved to 45 s before NOW.
fn gfd_h200_labels() -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> =
        serde_yaml_ng::from_str(&fixture("gfd-h200-labels.yaml")).expect("label map");
    l.insert(nvidia::GFD_TIMESTAMP.into(), seconds_ago(45));
    l
}

/// An H200 node in the test pool, kubelet Ready, NFD labels, nothing else: what
/// a DRA node without GFD (GPU operator GPUCluster) shows.
fn dra_node() -> NodeBuilder {
    NodeBuilder::bare(NODE)
        .label(POOL.0, POOL.1)
        .label("feature.node.kubernetes.io/pci-0302_10de.present", "true")
}

/// The same H200 under the device plugin with the real GFD labels.
fn gfd_node() -> NodeBuilder {
    let mut b = dra_node();
    for (k, v) in gfd_h200_labels() {
        b = b.label(&k, &v);
    }
    b.gpus(1, 1)
}

fn with(
    node: &NodeBuilder,
    slices: Option<&[ResourceSlice]>,
    nf: Option<&[NodeFeature]>,
) -> NodeFacts {
    let index = EvidenceIndex::new(slices, nf);
    node.facts().with_evidence(index.for_node(NODE))
}

fn judge_facts(spec_yaml: &str, facts: &NodeFacts) -> LayerReport {
    gpuready_core::evaluate(&spec(spec_yaml), facts, now())
}

/// An nfd-worker NodeFeature for the node: `gpus` NVIDIA devices of `device`
/// (class 0302) beside a host bridge and a NIC.
fn node_feature(models: &[(&str, u32)]) -> NodeFeature {
    let mut elements = vec![
        json!({"attributes": {"class": "0600", "vendor": "8086", "device": "29c0"}}),
        json!({"attributes": {"class": "0200", "vendor": "1af4", "device": "1041"}}),
    ];
    for (device, n) in models {
        for _ in 0..*n {
            elements
                .push(json!({"attributes": {"class": "0302", "vendor": "10de", "device": device}}));
        }
    }
    serde_json::from_value(json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": NODE,
            "namespace": "node-feature-discovery",
            "labels": {"nfd.node.kubernetes.io/node-name": NODE}
        },
        "spec": {"features": {"instances": {"pci.device": {"elements": elements}}}}
    }))
    .expect("NodeFeature")
}

/// The H200's full profile, with the driver minimum in GFD's spelling.
const H200_PROFILE: &str = r#"
gpu:
  products: [NVIDIA-H200]
  minMemoryMib: 140000
  minComputeCapability: "9.0"
  families: [hopper]
minDriverVersion: "580.159.04"
cudaVersion: "13.0"
"#;

#[test]
fn one_profile_judges_dra_attributes_and_gfd_labels_alike() {
    let slices = [slice("dra-h200-1gpu.yaml")];
    let dra = judge_facts(H200_PROFILE, &with(&dra_node(), Some(&slices), None));
    assert!(dra.ready(), "{dra:#?}");
    let dp = dra.expect(
        Layer::DevicePlugin,
        Status::Ready,
        reasons::DRA_DEVICES_AVAILABLE,
    );
    assert_eq!(dp.evidence, Source::ResourceSlices);
    dp.mentions(&["1 GPU(s) usable", "gpu-h200-01/1"]);
    // 580.159.4 (semver, as the DRA driver writes it) is 580.159.04.
    let drv = dra.expect(Layer::Driver, Status::Ready, "DriverVersionOk");
    assert_eq!(drv.evidence, Source::ResourceSlices);
    drv.mentions(&["580.159.4", "580.159.04"]);
    dra.expect(
        Layer::FeatureDiscovery,
        Status::Ready,
        reasons::DRA_ATTRIBUTES,
    );
    dra.expect(Layer::Profile, Status::Ready, "ProfileMatches")
        .mentions(&["NVIDIA-H200", "143771 MiB", "compute 9.0", "hopper"]);
    dra.expect(Layer::Compatibility, Status::Ready, "Compatible");

    let gfd = judge_facts(H200_PROFILE, &gfd_node().facts());
    assert!(gfd.ready(), "{gfd:#?}");
    let dp = gfd.expect(Layer::DevicePlugin, Status::Ready, "Allocatable");
    assert_eq!(dp.evidence, Source::Allocatable);
    assert_eq!(
        gfd.get(Layer::Profile).map(|l| l.evidence),
        Some(Source::GfdLabels)
    );
}

#[test]
fn auto_falls_back_to_the_device_plugin_without_slices() {
    // Slices read, none for this node: the device plugin's rules, as before.
    let r = judge_facts(H200_PROFILE, &with(&dra_node(), Some(&[]), None));
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        "ResourceNotAdvertised",
    );
    // Not read at all: same.
    let r = judge_facts(H200_PROFILE, &dra_node().facts());
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        "ResourceNotAdvertised",
    );
}

#[test]
fn dra_expected_but_absent() {
    let r = judge_facts("evidence: DRA", &with(&gfd_node(), Some(&[]), None));
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::NO_RESOURCE_SLICE,
    )
    .mentions(&["gpu.nvidia.com"]);
    let r = judge_facts("evidence: DRA", &gfd_node().facts());
    r.expect(
        Layer::DevicePlugin,
        Status::Unknown,
        reasons::DRA_EVIDENCE_UNAVAILABLE,
    );
    // DevicePlugin evidence ignores slices even where they exist.
    let slices = [slice("dra-h200-1gpu.yaml")];
    let r = judge_facts(
        "evidence: DevicePlugin",
        &with(&dra_node(), Some(&slices), None),
    );
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        "ResourceNotAdvertised",
    );
}

#[test]
fn mig_devices_count_their_parent_gpu() {
    let slices = [slice("dra-h200-mig.yaml")];
    let facts = with(&dra_node(), Some(&slices), None);
    let pool = facts.evidence.dra.complete().expect("complete pool");
    assert_eq!(pool.physical_gpus(false), 1);
    assert_eq!(pool.devices.len(), 4);
    let r = judge_facts(
        "gpu: {products: [NVIDIA-H200], count: 1}\ncudaVersion: \"13.0\"",
        &facts,
    );
    assert!(r.ready(), "{r:#?}");
    r.expect(
        Layer::DevicePlugin,
        Status::Ready,
        reasons::DRA_DEVICES_AVAILABLE,
    )
    .mentions(&["0 full GPU, 4 MIG"]);
    // Two GPUs expected, one (in MIG mode) published.
    let r = judge_facts("gpu: {count: 2}", &facts);
    r.expect(Layer::DevicePlugin, Status::NotReady, "TooFewDevices");
}

fn taint_device(s: &mut ResourceSlice, device: &str, key: &str, value: &str, effect: &str) {
    let d = s
        .spec
        .devices
        .iter_mut()
        .find(|d| d.name == device)
        .expect("device");
    d.taints.push(DeviceTaint {
        key: key.into(),
        value: Some(value.into()),
        effect: effect.into(),
    });
}

#[test]
fn a_device_taint_makes_that_gpu_unusable() {
    let mut s = slice("dra-h200-8gpu.yaml");
    let facts = with(&dra_node(), Some(std::slice::from_ref(&s)), None);
    let r = judge_facts("gpu: {count: 8}", &facts);
    r.expect(
        Layer::DevicePlugin,
        Status::Ready,
        reasons::DRA_DEVICES_AVAILABLE,
    )
    .mentions(&["8 GPU(s) usable"]);
    // XID 31 is on the driver's ignore list: effect None, informational only.
    taint_device(&mut s, "gpu-2", "gpu.nvidia.com/xid", "31", "None");
    let r = judge_facts(
        "gpu: {count: 8}",
        &with(&dra_node(), Some(std::slice::from_ref(&s)), None),
    );
    assert!(r.ready());
    // XID 79 (fallen off the bus): NoSchedule.
    taint_device(&mut s, "gpu-5", "gpu.nvidia.com/xid", "79", "NoSchedule");
    let facts = with(&dra_node(), Some(std::slice::from_ref(&s)), None);
    let r = judge_facts("gpu: {count: 8}", &facts);
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::DEVICES_TAINTED,
    )
    .mentions(&["7 of 8", "gpu-5: gpu.nvidia.com/xid=79:NoSchedule"]);
    // A profile needing fewer GPUs still fits on the untainted ones.
    assert!(judge_facts("gpu: {count: 7}", &facts).ready());
    // The condition message names the evidence.
    let profile = profile("h200", "gpu: {count: 8}");
    let a = assess_one(&facts, &profile);
    assert_eq!(a.reason, reasons::DEVICES_TAINTED);
    assert!(
        a.message.contains("DevicePlugin (from ResourceSlices)"),
        "{}",
        a.message
    );
}

fn assess_one(facts: &NodeFacts, p: &GpuNodeProfile) -> gpuready_core::NodeAssessment {
    let sel: Selector = gpuready_core::select::profile_selector(p).expect("selector");
    assess(facts, &[(p, &sel)], &opts())
}

/// A second generation of the 8-GPU pool that is published in two slices.
fn generation(
    base: &ResourceSlice,
    generation: i64,
    count: i64,
    devices: std::ops::Range<usize>,
    suffix: &str,
) -> ResourceSlice {
    let mut s = base.clone();
    s.metadata.name = Some(format!("gen{generation}-{suffix}"));
    s.spec.pool.generation = generation;
    s.spec.pool.resource_slice_count = count;
    s.spec.devices = base.spec.devices[devices].to_vec();
    s
}

#[test]
fn only_the_newest_complete_generation_counts() {
    let g1 = slice("dra-h200-8gpu.yaml");
    // Mid-update: generation 2 announces two slices, one is there so far.
    let g2a = generation(&g1, 2, 2, 0..4, "a");
    let facts = with(&dra_node(), Some(&[g1.clone(), g2a.clone()]), None);
    assert!(matches!(
        facts.evidence.dra,
        DraEvidence::Incomplete {
            generation: 2,
            have: 1,
            want: 2,
            ..
        }
    ));
    let r = judge_facts("gpu: {count: 8}", &facts);
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::RESOURCE_POOL_INCOMPLETE,
    )
    .mentions(&["generation 2: 1 of 2"]);
    // FeatureDiscovery does not blame GFD for a pool in flight.
    r.expect(
        Layer::FeatureDiscovery,
        Status::Unknown,
        reasons::DRA_ATTRIBUTES,
    );
    // Generation 2 complete with 7 GPUs: generation 1's 8 no longer count.
    let g2b = generation(&g1, 2, 2, 4..7, "b");
    let facts = with(&dra_node(), Some(&[g1, g2a, g2b]), None);
    assert_eq!(
        facts
            .evidence
            .dra
            .complete()
            .map(|p| p.physical_gpus(false)),
        Some(7)
    );
    let r = judge_facts("gpu: {count: 8}", &facts);
    r.expect(Layer::DevicePlugin, Status::NotReady, "TooFewDevices");
}

#[test]
fn slices_of_other_drivers_and_nodes_do_not_count() {
    let mut other = slice("dra-h200-1gpu.yaml");
    other.spec.driver = "compute-domain.nvidia.com".into();
    let mut elsewhere = slice("dra-h200-8gpu.yaml");
    elsewhere.spec.node_name = Some("gpu-h200-02".into());
    let facts = with(&dra_node(), Some(&[other, elsewhere]), None);
    assert_eq!(facts.evidence.dra, DraEvidence::NoSlices);
}

/// An 8-GPU device-plugin node: gpu.count 8, allocatable 8.
fn eight_gpu_node() -> NodeBuilder {
    gfd_node().label(nvidia::GPU_COUNT, "8").gpus(8, 8)
}

#[test]
fn pci_bus_count_finds_a_lost_gpu_the_stack_still_advertises() {
    let node = eight_gpu_node();
    // No NodeFeature: the bus check is Unknown, never a failure.
    let r = judge_facts("gpu: {count: 8}", &node.facts());
    assert!(r.ready(), "{r:#?}");
    // NFD sees all 8: Ready, and Hardware names the NodeFeature.
    let nf = [node_feature(&[("2335", 8)])];
    let r = judge_facts("gpu: {count: 8}", &with(&node, None, Some(&nf)));
    assert!(r.ready(), "{r:#?}");
    let hw = r.expect(Layer::Hardware, Status::Ready, reasons::NVIDIA_GPUS_ON_BUS);
    assert_eq!(hw.evidence, Source::NodeFeature);
    hw.mentions(&["8 NVIDIA GPU(s)", "10de:2335 ×8"]);
    r.expect(Layer::DevicePlugin, Status::Ready, "Allocatable")
        .mentions(&["matches the 8 GPU(s) on the PCI bus"]);
    // One fell off the bus; labels and allocatable still say 8.
    let nf = [node_feature(&[("2335", 7)])];
    let r = judge_facts("gpu: {count: 8}", &with(&node, None, Some(&nf)));
    let dp = r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::GPU_MISSING_FROM_BUS,
    );
    assert_eq!(dp.evidence, Source::NodeFeature);
    dp.mentions(&["8 GPU(s) are advertised", "shows only 7"]);
    r.expect(Layer::Profile, Status::NotReady, "TooFewGpus");
    // Nine on the bus, eight advertised: one the stack does not serve.
    let nf = [node_feature(&[("2335", 9)])];
    let r = judge_facts("gpu: {count: 8}", &with(&node, None, Some(&nf)));
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::GPU_NOT_ADVERTISED,
    );
}

#[test]
fn pci_bus_count_against_dra_devices() {
    let slices = [slice("dra-h200-8gpu.yaml")];
    let nf = [node_feature(&[("2335", 7)])];
    let r = judge_facts(
        "gpu: {count: 8}",
        &with(&dra_node(), Some(&slices), Some(&nf)),
    );
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::GPU_MISSING_FROM_BUS,
    );
}

#[test]
fn two_gpu_models_on_one_node_are_named() {
    let node = gfd_node().label(nvidia::GPU_COUNT, "2").gpus(2, 2);
    let nf = [node_feature(&[("2335", 1), ("2330", 1)])];
    let r = judge_facts(
        "gpu: {products: [NVIDIA-H200]}",
        &with(&node, None, Some(&nf)),
    );
    assert!(r.ready(), "{r:#?}");
    r.expect(Layer::Hardware, Status::Ready, reasons::NVIDIA_GPUS_ON_BUS)
        .mentions(&["2 GPU models", "GFD labels only one"]);
    r.expect(Layer::Profile, Status::Ready, "ProfileMatches")
        .mentions(&["10de:2330 ×1, 10de:2335 ×1"]);
}

#[test]
fn a_node_feature_without_a_pci_scan_is_no_evidence() {
    let mut gfd_own = node_feature(&[]);
    gfd_own.spec.features = Default::default();
    let facts = with(&eight_gpu_node(), None, Some(&[gfd_own]));
    assert_eq!(facts.evidence.bus, None);
}

/// GFD forced to the vfio discovery strategy on a passthrough host
/// (values from GFD's vfio manager: compute -1, driver unknown, CUDA 0.0).
fn vfio_gfd_node() -> NodeBuilder {
    dra_node()
        .label(nvidia::GFD_TIMESTAMP, &seconds_ago(30))
        .label(nvidia::GPU_PRODUCT, "GH100-H200-SXM-141GB")
        .label(nvidia::GPU_COUNT, "1")
        .label(nvidia::GPU_COMPUTE_MAJOR, "-1")
        .label(nvidia::GPU_COMPUTE_MINOR, "-1")
        .label(nvidia::GPU_FAMILY, "undefined")
        .label(nvidia::DRIVER_MAJOR, "unknown")
        .label(nvidia::DRIVER_MINOR, "unknown")
        .label(nvidia::DRIVER_REVISION, "unknown")
        .label(nvidia::DRIVER_FULL, "unknown.unknown.unknown")
        .label(nvidia::RUNTIME_FULL, "0.0")
        .label("nvidia.com/mig.capable", "false")
}

#[test]
fn vfio_mode_gfd_values_get_their_own_reason() {
    let r = judge(
        "minDriverVersion: \"580.65.06\"\ncudaVersion: \"13.0\"",
        &vfio_gfd_node(),
    );
    let d = r.expect(Layer::Driver, Status::NotReady, reasons::GFD_VFIO_MODE);
    d.mentions(&["vfio-pci", "VmPassthrough"]);
    r.expect(
        Layer::FeatureDiscovery,
        Status::NotReady,
        reasons::GFD_VFIO_MODE,
    );
    assert!(
        r.layers
            .iter()
            .all(|l| l.reason != reasons::MALFORMED_LABEL),
        "{r:#?}"
    );
}

#[test]
fn passthrough_nodes_are_judged_by_sandbox_resources() {
    let node = vfio_gfd_node()
        .label(nvidia::WORKLOAD_CONFIG, "vm-passthrough")
        .resource("nvidia.com/GH100_H200_SXM_141GB", "1", "1");
    let spec = "workload: VmPassthrough\nminDriverVersion: \"580.65.06\"\ncudaVersion: \"13.0\"";
    let r = judge(spec, &node);
    assert!(r.ready(), "{r:#?}");
    let dp = r.expect(
        Layer::DevicePlugin,
        Status::Ready,
        reasons::SANDBOX_RESOURCES,
    );
    assert_eq!(dp.evidence, Source::SandboxResources);
    dp.mentions(&["nvidia.com/GH100_H200_SXM_141GB=1"]);
    for layer in [
        Layer::Driver,
        Layer::FeatureDiscovery,
        Layer::Profile,
        Layer::Compatibility,
    ] {
        r.expect(layer, Status::Ready, reasons::NOT_APPLICABLE_TO_WORKLOAD);
    }
    // Named resources: another model does not count.
    let r = judge(
        "workload: VmPassthrough\nsandboxResources: [nvidia.com/GH100_H200_NVL]",
        &node,
    );
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::SANDBOX_RESOURCE_MISSING,
    )
    .mentions(&["nvidia.com/GH100_H200_NVL"]);
    // The sandbox plugin not (yet) running.
    let bare = vfio_gfd_node().label(nvidia::WORKLOAD_CONFIG, "vm-passthrough");
    judge("workload: VmPassthrough", &bare).expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::SANDBOX_RESOURCE_MISSING,
    );
    // The bus backs the passthrough count.
    let nf = [node_feature(&[("2335", 2)])];
    let index = EvidenceIndex::new(None, Some(&nf));
    let facts = node.facts().with_evidence(index.for_node(NODE));
    judge_facts("workload: VmPassthrough", &facts).expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::GPU_NOT_ADVERTISED,
    );
}

#[test]
fn the_workload_label_must_match_the_profile() {
    let node = gfd_node().label(nvidia::WORKLOAD_CONFIG, "vm-passthrough");
    judge("", &node).expect(
        Layer::Hardware,
        Status::NotReady,
        reasons::WORKLOAD_MISMATCH,
    );
    // A passthrough node without GFD labels: the mismatch is the first failure.
    let bare = dra_node().label(nvidia::WORKLOAD_CONFIG, "vm-passthrough");
    let r = judge("", &bare);
    assert_eq!(
        r.first_failure().map(|l| l.reason.as_str()),
        Some(reasons::WORKLOAD_MISMATCH)
    );
    let node = gfd_node().label(nvidia::WORKLOAD_CONFIG, "container");
    assert!(judge("", &node).ready());
}

#[test]
fn a_vgpu_guest_driver_must_match_the_host_branch() {
    let guest = gfd_node()
        .label(nvidia::VGPU_PRESENT, "true")
        .label(nvidia::VGPU_HOST_VERSION, "550.54.16")
        .label(nvidia::VGPU_HOST_BRANCH, "r550_40");
    judge("", &guest)
        .expect(
            Layer::Driver,
            Status::NotReady,
            reasons::VGPU_BRANCH_MISMATCH,
        )
        .mentions(&["R580", "r550_40"]);
    let matched = guest.clone().driver("550.54.15");
    judge("", &matched).expect(Layer::Driver, Status::Ready, "DriverVersionOk");
}

fn created(node: NodeBuilder, secs_ago: i64) -> NodeBuilder {
    let mut n = node.build();
    n.metadata.creation_timestamp = Some(Time(at(-secs_ago)));
    NodeBuilder::from_node(n)
}

#[test]
fn never_ready_deadline_counts_from_creation() {
    let spec_yaml = "notReadyDeadline: {seconds: 3600, label: true}";
    let broken = created(dra_node(), 7200);
    let r = judge(spec_yaml, &broken);
    let d = r.deadline.as_ref().expect("past the deadline");
    assert!(d.label);
    let p = profile("h200", spec_yaml);
    let a = assess_one(&broken.facts(), &p);
    assert_eq!(a.reason, reasons::NOT_READY_DEADLINE_EXCEEDED);
    assert!(a.message.contains("1h deadline"), "{}", a.message);
    assert!(a.message.contains("(NoGfdLabels)"), "{}", a.message);
    let labels = a.changes.labels.expect("labels");
    assert_eq!(
        labels
            .get(keys::LABEL_DEADLINE_EXCEEDED)
            .and_then(|v| v.as_deref()),
        Some("true")
    );
    // Young node: no verdict yet, a recheck at the deadline.
    let young = created(dra_node(), 600);
    let r = judge(spec_yaml, &young);
    assert_eq!(r.deadline, None);
    assert!(r.recheck_after_seconds.is_some_and(|s| s <= 3000), "{r:?}");
    // Without `label`, no label; ready nodes are never past a deadline.
    let a = assess_one(
        &broken.facts(),
        &profile("h200", "notReadyDeadline: {seconds: 3600}"),
    );
    assert!(
        !a.changes
            .labels
            .expect("labels")
            .contains_key(keys::LABEL_DEADLINE_EXCEEDED)
    );
    assert_eq!(judge(spec_yaml, &created(gfd_node(), 7200)).deadline, None);
}

#[test]
fn last_ready_deadline_counts_from_the_condition_transition() {
    let spec_yaml = "notReadyDeadline: {seconds: 1800, since: LastReady}";
    let cond = |status: &str, secs_ago: i64| k8s_openapi::api::core::v1::NodeCondition {
        type_: keys::CONDITION_GPU_READY.into(),
        status: status.into(),
        reason: Some("ResourceNotAdvertised".into()),
        last_transition_time: Some(Time(at(-secs_ago))),
        ..Default::default()
    };
    // Old node, not ready for 10 minutes: within the deadline.
    let node = created(dra_node(), 86_400).condition(cond("False", 600));
    let r = judge(spec_yaml, &node);
    assert_eq!(r.deadline, None);
    assert_eq!(r.recheck_after_seconds, Some(1200));
    // Not ready for an hour: past it.
    let node = created(dra_node(), 86_400).condition(cond("False", 3600));
    assert!(judge(spec_yaml, &node).deadline.is_some());
    // Was True until now: the clock starts now.
    let node = created(dra_node(), 86_400).condition(cond("True", 3600));
    assert_eq!(judge(spec_yaml, &node).deadline, None);
}

#[test]
fn evidence_bundle_defaults_to_not_read() {
    let facts = dra_node().facts();
    assert_eq!(facts.evidence, Evidence::default());
    assert_eq!(facts.evidence.dra, DraEvidence::NotRead);
}

#[test]
fn offline_validation_of_the_evidence_fields() {
    let bad: gpuready_api::GpuNodeProfileSpec = serde_yaml_ng::from_str(
        r#"
nodeSelector: {}
notReadyDeadline: {seconds: 10}
sandboxResources: [GH100_H200_SXM_141GB]
"#,
    )
    .expect("parses");
    let fields: Vec<String> = bad.validate().into_iter().map(|e| e.field).collect();
    assert_eq!(
        fields,
        ["spec.sandboxResources", "spec.notReadyDeadline.seconds"]
    );
    let s = spec("evidence: DRA\nworkload: VmVgpu\nsandboxResources: [nvidia.com/GRID_A100-40C]");
    assert_eq!(s.evidence, gpuready_api::EvidenceMode::Dra);
    assert_eq!(s.workload, gpuready_api::Workload::VmVgpu);
}
