//! DRA nodes judged on their own terms and gated device by device: the real
//! objects of an H200 run (`tests/fixtures/h200-real/`), the DRA driver's own
//! device taints, and profiles with `deviceGating` planning one DeviceTaintRule
//! per bad device (a fatal XID, uncorrectable ECC, a MIG device's bad parent, a
//! card of the wrong product on a mixed node).

use crate::common;

use common::*;
use gpuready_api::device_taint_rule::DeviceTaintRule;
use gpuready_api::dra::{DeviceAttribute, DeviceTaint, ResourceSlice};
use gpuready_api::keys::{self, health_reasons, reasons};
use gpuready_api::nfd::NodeFeature;
use gpuready_api::probe::{EventKind, EventRecord, GpuState, ProbeReport};
use gpuready_api::{GpuNodeProfile, Layer};
use gpuready_core::devices::RuleAction;
use gpuready_core::evaluate::Status;
use gpuready_core::evidence::{EvidenceIndex, Source};
use gpuready_core::health::ProbeEvidence;
use gpuready_core::{NodeAssessment, NodeFacts, assess};
use kube_core::Selector;

fn read(dir: &str, name: &str) -> String {
    let path = format!("{}/tests/fixtures/{dir}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn real_slice(name: &str) -> ResourceSlice {
    serde_yaml_ng::from_str(&read("h200-real", name)).expect("a ResourceSlice")
}

fn real_node_feature() -> NodeFeature {
    serde_yaml_ng::from_str(&read("h200-real", "nodefeature-nfd-v0.19.0.yaml"))
        .expect("a NodeFeature")
}

/// The probe's real report, its time moved to just before NOW.
fn real_report() -> ProbeReport {
    let mut r: ProbeReport =
        serde_json::from_str(&read("h200-real", "probe-report.json")).expect("report");
    r.generated_at = "2026-11-29T11:59:30Z".into();
    r.probe_started_at = "2026-11-29T11:00:00Z".into();
    r.node = None;
    r
}

fn slice(name: &str) -> ResourceSlice {
    serde_yaml_ng::from_str(&read("evidence", name)).expect("a ResourceSlice")
}

/// What the GPU operator's GPUCluster (DRA-only) stack leaves on a Node: no
/// GFD label, no `nvidia.com/gpu` in allocatable — only NFD's labels.
fn dra_only_node(name: &str) -> NodeBuilder {
    NodeBuilder::bare(name)
        .label(POOL.0, POOL.1)
        .label("feature.node.kubernetes.io/pci-0302_10de.present", "true")
}

fn facts(
    node: &NodeBuilder,
    name: &str,
    slices: &[ResourceSlice],
    nf: Option<&[NodeFeature]>,
    rules: Option<Vec<DeviceTaintRule>>,
    probe: Option<ProbeReport>,
) -> NodeFacts {
    let index = EvidenceIndex::new(Some(slices), nf);
    node.facts()
        .with_evidence(index.for_node(name).with_device_rules(rules))
        .with_probe(probe.map(|r| ProbeEvidence::Report(Box::new(r))))
}

fn assess_one(facts: &NodeFacts, p: &GpuNodeProfile) -> NodeAssessment {
    let selector: Selector = gpuready_core::select::profile_selector(p).expect("selector");
    assess(facts, &[(p, &selector)], &opts())
}

const H200: &str = r#"
gpu:
  products: [NVIDIA-H200]
  minMemoryMib: 140000
  minComputeCapability: "9.0"
  families: [hopper]
  count: 1
minDriverVersion: "580.159.04"
cudaVersion: "13.0"
"#;

#[test]
fn the_dra_only_stack_is_ready_from_its_real_slices_alone() {
    for file in [
        "slice-driver-main.yaml",
        "slice-driver-v25.12.0.yaml",
        "slice-consumable-memory.yaml",
    ] {
        let slices = [real_slice(file)];
        let nf = [real_node_feature()];
        let f = facts(
            &dra_only_node("vm"),
            "vm",
            &slices,
            Some(&nf),
            None,
            Some(real_report()),
        );
        let r = gpuready_core::evaluate(&spec(H200), &f, now());
        assert!(r.ready(), "{file}: {r:#?}");
        for l in &r.layers {
            // Every layer names the slice (or NFD's scan, the probe, kubelet):
            // never a GFD label or allocatable, which this stack has not.
            assert!(
                !matches!(l.evidence, Source::GfdLabels | Source::Allocatable),
                "{file}: {} rests on {}: {}",
                l.layer,
                l.evidence,
                l.message
            );
            assert!(
                !l.message.contains("nvidia.com/gpu") && !l.message.contains("allocatable"),
                "{file}: {} message names a label or allocatable: {}",
                l.layer,
                l.message
            );
        }
        r.expect(Layer::Hardware, Status::Ready, reasons::NVIDIA_GPUS_ON_BUS)
            .mentions(&["10de:2335 ×1"]);
        r.expect(
            Layer::DevicePlugin,
            Status::Ready,
            reasons::DRA_DEVICES_AVAILABLE,
        )
        .mentions(&[
            "1 GPU(s) usable",
            "pool vm/1",
            "matches the 1 GPU(s) on the PCI bus",
        ]);
        r.expect(Layer::Profile, Status::Ready, "ProfileMatches")
            .mentions(&["NVIDIA-H200", "143771 MiB", "1 GPU(s)"]);
        r.expect(Layer::Health, Status::Ready, health_reasons::PROBE_HEALTHY);
    }
}

#[test]
fn a_dra_only_node_short_of_gpus_names_the_slices_not_a_label() {
    let slices = [real_slice("slice-driver-main.yaml")];
    let f = facts(&dra_only_node("vm"), "vm", &slices, None, None, None);
    let r = gpuready_core::evaluate(&spec("gpu: {count: 2}"), &f, now());
    let p = r.expect(Layer::Profile, Status::NotReady, "TooFewGpus");
    assert_eq!(p.evidence, Source::ResourceSlices);
    p.mentions(&["the ResourceSlices of pool vm/1 reports 1 GPU(s) < 2 expected"]);
    assert!(!p.message.contains("nvidia.com/"), "{}", p.message);
    // An attribute the profile needs and the slice lacks is a DRA reason.
    let mut bare = real_slice("slice-driver-main.yaml");
    bare.spec.devices[0].capacity.clear();
    let f = facts(&dra_only_node("vm"), "vm", &[bare], None, None, None);
    let r = gpuready_core::evaluate(&spec("gpu: {minMemoryMib: 1000}"), &f, now());
    r.expect(
        Layer::Profile,
        Status::Unknown,
        reasons::DRA_ATTRIBUTE_MISSING,
    )
    .mentions(&["capacity.memory (pool vm/1) is missing"]);
}

fn taint_device(s: &mut ResourceSlice, device: &str, key: &str, value: Option<&str>, effect: &str) {
    let d = s
        .spec
        .devices
        .iter_mut()
        .find(|d| d.name == device)
        .expect("device");
    d.taints.push(DeviceTaint {
        key: key.into(),
        value: value.map(str::to_owned),
        effect: effect.into(),
    });
}

#[test]
fn the_drivers_own_device_taints_are_evidence() {
    let node = dra_only_node(NODE);
    let judge = |s: &ResourceSlice, profile: &str| {
        let f = facts(&node, NODE, std::slice::from_ref(s), None, None, None);
        gpuready_core::evaluate(&spec(profile), &f, now())
    };
    // A None taint (the ignored application XID 31) is reported, not counted.
    let mut s = slice("dra-h200-8gpu.yaml");
    taint_device(&mut s, "gpu-2", keys::dra::TAINT_XID, Some("31"), "None");
    let r = judge(&s, "gpu: {count: 8}");
    assert!(r.ready());
    r.expect(
        Layer::DevicePlugin,
        Status::Ready,
        reasons::DRA_DEVICES_AVAILABLE,
    )
    .mentions(&[
        "8 GPU(s) usable",
        "informational device taints: gpu-2: gpu.nvidia.com/xid=31:None",
    ]);
    // Unmonitored (None): ready, with its own reason.
    taint_device(&mut s, "gpu-4", keys::dra::TAINT_UNMONITORED, None, "None");
    let r = judge(&s, "gpu: {count: 8}");
    assert!(r.ready());
    r.expect(
        Layer::DevicePlugin,
        Status::Ready,
        reasons::DEVICES_UNMONITORED,
    )
    .mentions(&["cannot watch gpu-4 for XIDs"]);
    // A lost GPU: the driver taints every device gpu-lost (NoSchedule).
    let mut lost = slice("dra-h200-8gpu.yaml");
    for i in 0..8 {
        taint_device(
            &mut lost,
            &format!("gpu-{i}"),
            keys::dra::TAINT_GPU_LOST,
            None,
            "NoSchedule",
        );
    }
    let r = judge(&lost, "gpu: {count: 8}");
    r.expect(Layer::DevicePlugin, Status::NotReady, reasons::GPU_LOST)
        .mentions(&["0 of 8 GPU(s) usable", "gpu.nvidia.com/gpu-lost"]);
}

const NODE: &str = "gpu-h200-01";

/// A probe report of the 8-GPU fixture's GPUs, all healthy.
fn eight_gpu_report(s: &ResourceSlice) -> ProbeReport {
    let mut r = real_report();
    r.gpus = s
        .spec
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let uuid = d.attributes.get("uuid").and_then(|a| a.string.clone());
            GpuState {
                index: u32::try_from(i).expect("index"),
                uuid,
                ..r.gpus[0].clone()
            }
        })
        .collect();
    r.device_count = Some(8);
    r.events.monitored = true;
    r.events.error = None;
    r
}

fn uuid_of(s: &ResourceSlice, device: &str) -> String {
    let d = s
        .spec
        .devices
        .iter()
        .find(|d| d.name == device)
        .expect("device");
    let key = if d.attributes.contains_key("parentUUID") {
        "parentUUID"
    } else {
        "uuid"
    };
    d.attributes[key].string.clone().expect("uuid")
}

fn xid(uuid: &str, xid: u64) -> EventRecord {
    EventRecord {
        gpu: uuid.to_owned(),
        kind: EventKind::Xid,
        xid: Some(xid),
        count: 1,
        first_seen: "2026-11-29T11:50:00Z".into(),
        last_seen: "2026-11-29T11:50:00Z".into(),
    }
}

fn gated(min: u32) -> String {
    format!("{H200_8}\ndeviceGating: {{minReadyGpus: {min}}}\n")
}

const H200_8: &str = r#"
gpu:
  products: [NVIDIA-H200]
  minMemoryMib: 140000
  count: 8
"#;

#[test]
fn one_fatal_xid_gpu_gets_one_rule_and_the_node_stays_untainted_while_the_minimum_holds() {
    let s = slice("dra-h200-8gpu.yaml");
    let mut report = eight_gpu_report(&s);
    report.events.records.push(xid(&uuid_of(&s, "gpu-3"), 79));
    let f = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        Some(vec![]),
        Some(report.clone()),
    );

    let a = assess_one(&f, &profile("h200", &gated(7)));
    assert_eq!(a.ready, Some(true), "{}: {}", a.reason, a.message);
    assert!(
        a.changes.taint.is_none(),
        "no node taint: 7 good GPUs stay in service"
    );
    assert!(a.message.contains("gpu-3 (FatalXid)"), "{}", a.message);
    let rules = &a.changes.device_taint_rules;
    assert_eq!(rules.len(), 1, "{rules:#?}");
    assert_eq!(rules[0].action, RuleAction::Create);
    let rule = rules[0].rule.as_ref().expect("rule");
    assert_eq!(
        rule.metadata.name.as_deref(),
        Some("gpuready-gpu-h200-01-gpu-3")
    );
    let sel = rule.spec.device_selector.as_ref().expect("selector");
    assert_eq!(
        (
            sel.driver.as_deref(),
            sel.pool.as_deref(),
            sel.device.as_deref()
        ),
        (Some("gpu.nvidia.com"), Some(NODE), Some("gpu-3"))
    );
    assert_eq!(rule.spec.taint.key, keys::device_rules::TAINT_KEY);
    assert_eq!(
        rule.spec.taint.value.as_deref(),
        Some(health_reasons::FATAL_XID)
    );
    assert_eq!(rule.spec.taint.effect, "NoSchedule");
    // The Health layer judged the GPUs that stay in service.
    let h = a
        .layers
        .iter()
        .find(|l| l.layer == Layer::Health)
        .expect("health");
    assert_eq!(h.status, Status::Ready, "{}", h.message);

    // The rule is there: nothing more to write about it.
    let written = vec![rule.clone()];
    let f2 = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        Some(written.clone()),
        Some(report),
    );
    assert!(
        assess_one(&f2, &profile("h200", &gated(7)))
            .changes
            .device_taint_rules
            .is_empty()
    );

    // The minimum does not hold: the rule, and the node taint as well.
    let a = assess_one(&f2, &profile("h200", &gated(8)));
    assert_eq!(a.ready, Some(false));
    assert_eq!(a.reason, reasons::TOO_FEW_READY_DEVICES, "{}", a.message);
    assert!(a.changes.taint.is_some(), "node tainted too");
    assert!(
        a.changes.device_taint_rules.is_empty(),
        "the rule stays as it is"
    );

    // The GPU recovers (the probe restarted, no XID): the rule goes.
    let healthy = eight_gpu_report(&s);
    let f3 = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        Some(written.clone()),
        Some(healthy),
    );
    let a = assess_one(&f3, &profile("h200", &gated(7)));
    assert_eq!(a.changes.device_taint_rules.len(), 1);
    assert_eq!(a.changes.device_taint_rules[0].action, RuleAction::Delete);

    // The profile stops gating devices: the rule goes too.
    let f4 = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        Some(written),
        None,
    );
    let a = assess_one(&f4, &profile("h200", H200_8));
    assert_eq!(a.changes.device_taint_rules.len(), 1);
    assert_eq!(a.changes.device_taint_rules[0].action, RuleAction::Delete);
}

#[test]
fn without_readable_rules_the_whole_node_is_gated_as_before() {
    let s = slice("dra-h200-8gpu.yaml");
    let mut report = eight_gpu_report(&s);
    report.events.records.push(xid(&uuid_of(&s, "gpu-3"), 79));
    // DeviceTaintRules not served or not readable: `None`.
    let f = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        None,
        Some(report),
    );
    let a = assess_one(&f, &profile("h200", &gated(7)));
    assert_eq!(a.ready, Some(false));
    assert_eq!(a.reason, health_reasons::FATAL_XID);
    assert!(a.changes.taint.is_some());
    assert!(a.changes.device_taint_rules.is_empty());
}

#[test]
fn an_observe_profile_writes_device_rules_with_effect_none_and_nothing_on_the_node() {
    let s = slice("dra-h200-8gpu.yaml");
    let mut report = eight_gpu_report(&s);
    report.gpus[5]
        .ecc
        .as_mut()
        .expect("ecc")
        .volatile_uncorrectable = Some(2);
    let f = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        Some(vec![]),
        Some(report),
    );
    let a = assess_one(
        &f,
        &profile("h200", &format!("{}\nmode: Observe\n", gated(7))),
    );
    let rules = &a.changes.device_taint_rules;
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].device, "gpu-5");
    assert_eq!(
        rules[0].reason.as_deref(),
        Some(health_reasons::UNCORRECTABLE_ECC)
    );
    assert_eq!(
        rules[0].rule.as_ref().expect("rule").spec.taint.effect,
        "None"
    );
    assert!(!a.changes.patches_node() && a.changes.conditions.is_none());
}

#[test]
fn every_mig_device_of_a_bad_parent_gets_a_rule() {
    let s = slice("dra-h200-mig.yaml");
    let parent = uuid_of(&s, "gpu-0-mig-1g18gb-19-2");
    let mut report = real_report();
    report.gpus[0].uuid = Some(parent.clone());
    report.gpus[0].mig_enabled = Some(true);
    report.gpus[0].row_remapping.as_mut().expect("rr").failure = true;
    let f = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        Some(vec![]),
        Some(report),
    );
    let a = assess_one(&f, &profile("h200", "deviceGating: {}"));
    let devices: Vec<&str> = a
        .changes
        .device_taint_rules
        .iter()
        .map(|c| c.device.as_str())
        .collect();
    assert_eq!(
        devices,
        [
            "gpu-0-mig-1g18gb-19-2",
            "gpu-0-mig-1g18gb-19-3",
            "gpu-0-mig-2g35gb-14-0",
            "gpu-0-mig-3g71gb-9-4"
        ]
    );
    assert!(
        a.changes
            .device_taint_rules
            .iter()
            .all(|c| c.reason.as_deref() == Some(health_reasons::ROW_REMAP_FAILED))
    );
    // The only GPU is bad: fewer than one ready GPU, the node is tainted too.
    assert_eq!(a.ready, Some(false));
    assert!(a.changes.taint.is_some());
    assert!(
        a.message.contains(&format!("parent GPU {parent}")) || a.message.contains("RowRemapFailed"),
        "{}",
        a.message
    );
}

#[test]
fn a_card_of_another_product_on_a_mixed_node_is_gated_alone() {
    let mut s = slice("dra-h200-8gpu.yaml");
    let d = s
        .spec
        .devices
        .iter_mut()
        .find(|d| d.name == "gpu-7")
        .expect("gpu-7");
    d.attributes.insert(
        "productName".into(),
        DeviceAttribute {
            string: Some("NVIDIA H100 80GB HBM3".into()),
            ..DeviceAttribute::default()
        },
    );
    let f = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        Some(vec![]),
        None,
    );
    // Without device gating the odd card holds the whole node back.
    let whole = assess_one(&f, &profile("h200", H200_8));
    assert_eq!(whole.ready, Some(false), "{}", whole.message);
    assert_eq!(whole.reason, "ProductMismatch");
    let a = assess_one(&f, &profile("h200", &gated(7)));
    assert_eq!(a.ready, Some(true), "{}: {}", a.reason, a.message);
    let rules = &a.changes.device_taint_rules;
    assert_eq!(rules.len(), 1);
    assert_eq!(
        (rules[0].device.as_str(), rules[0].reason.as_deref()),
        ("gpu-7", Some("ProductMismatch"))
    );
}

#[test]
fn a_foreign_device_taint_rule_is_never_touched() {
    let s = slice("dra-h200-8gpu.yaml");
    // An admin's rule for the same device, and one named like gpuready's but
    // without its label: neither is gpuready's.
    let mut admin = DeviceTaintRule::default();
    admin.metadata.name = Some("maintenance-gpu-3".into());
    let mut lookalike = DeviceTaintRule::default();
    lookalike.metadata.name = Some("gpuready-gpu-h200-01-gpu-3".into());
    let f = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        Some(vec![admin, lookalike]),
        None,
    );
    let a = assess_one(&f, &profile("h200", &gated(7)));
    assert!(
        a.changes.device_taint_rules.is_empty(),
        "{:#?}",
        a.changes.device_taint_rules
    );
    // Released (no profile selects the node any more): still untouched.
    let ungoverned = NodeBuilder::bare(NODE)
        .facts()
        .with_evidence(f.evidence.clone());
    let a = assess_one(&ungoverned, &profile("h200", &gated(7)));
    assert!(a.changes.device_taint_rules.is_empty());
}

/// NFD's scan of `n` H200s beside the real VM's other devices.
fn bus_of(n: usize) -> NodeFeature {
    let mut nf = real_node_feature();
    let set = nf
        .spec
        .features
        .instances
        .get_mut("pci.device")
        .expect("pci.device");
    let gpu = set
        .elements
        .iter()
        .find(|e| e.attributes.get("vendor").map(String::as_str) == Some("10de"))
        .cloned()
        .expect("the H200");
    set.elements
        .retain(|e| e.attributes.get("vendor").map(String::as_str) != Some("10de"));
    set.elements.extend(std::iter::repeat_n(gpu, n));
    nf.metadata
        .labels
        .get_or_insert_default()
        .insert("nfd.node.kubernetes.io/node-name".into(), NODE.into());
    nf
}

#[test]
fn every_advertised_count_must_be_backed_by_the_bus_sharing_aware() {
    // Time-slicing: 8 GPUs × 4 replicas = 32 nvidia.com/gpu, gpu.count 8.
    let shared = NodeBuilder::gpu(NODE)
        .label("nvidia.com/gpu.count", "8")
        .label("nvidia.com/gpu.replicas", "4")
        .gpus(32, 32);
    let judge = |node: &NodeBuilder, bus: usize| {
        let nf = [bus_of(bus)];
        let f = node
            .facts()
            .with_evidence(EvidenceIndex::new(None, Some(&nf)).for_node(NODE));
        gpuready_core::evaluate(&spec("gpu: {count: 8}"), &f, now())
    };
    let r = judge(&shared, 8);
    r.expect(Layer::DevicePlugin, Status::Ready, "Allocatable")
        .mentions(&[
            "matches the 8 GPU(s) on the PCI bus",
            "nvidia.com/gpu capacity 32 / nvidia.com/gpu.replicas=4: 8",
            "nvidia.com/gpu.count: 8",
        ]);
    // One lost: both the label and the shared capacity claim a GPU the bus lacks.
    let r = judge(&shared, 7);
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::GPU_MISSING_FROM_BUS,
    )
    .mentions(&[
        "8 GPU(s) are advertised (nvidia.com/gpu.count)",
        "shows only 7",
    ]);
    // GFD relabelled after the loss (gpu.count 7) but the device plugin still
    // advertises 32 shares = 8 GPUs: the capacity is the phantom.
    let relabelled = shared.clone().label("nvidia.com/gpu.count", "7");
    let r = gpuready_core::evaluate(
        &spec("gpu: {count: 7}"),
        &relabelled
            .facts()
            .with_evidence(EvidenceIndex::new(None, Some(&[bus_of(7)])).for_node(NODE)),
        now(),
    );
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::GPU_MISSING_FROM_BUS,
    )
    .mentions(&["(nvidia.com/gpu capacity 32 / nvidia.com/gpu.replicas=4)"]);
    // The DRA pool above the bus, on a DRA-only node.
    let s = slice("dra-h200-8gpu.yaml");
    let nf = [bus_of(7)];
    let f = dra_only_node(NODE).facts().with_evidence(
        EvidenceIndex::new(Some(std::slice::from_ref(&s)), Some(&nf)).for_node(NODE),
    );
    let r = gpuready_core::evaluate(&spec("gpu: {count: 7}"), &f, now());
    r.expect(
        Layer::DevicePlugin,
        Status::NotReady,
        reasons::GPU_MISSING_FROM_BUS,
    )
    .mentions(&["(the DRA pool gpu-h200-01/1)"]);
}

#[test]
fn mig_config_state_other_than_success_is_not_ready_with_a_reason_per_state() {
    let profile = "mig: {config: all-balanced}";
    let node = |state: Option<&str>| {
        let b = NodeBuilder::a100_mig_mixed("a100").label("nvidia.com/mig.config", "all-balanced");
        match state {
            Some(s) => b.label("nvidia.com/mig.config.state", s),
            None => b,
        }
    };
    let r = judge(profile, &node(Some("success")));
    r.expect(Layer::Profile, Status::Ready, "ProfileMatches")
        .mentions(&["MIG config all-balanced applied"]);
    for (state, status, reason) in [
        (
            Some("pending"),
            Status::NotReady,
            reasons::MIG_CONFIG_PENDING,
        ),
        (
            Some("rebooting"),
            Status::NotReady,
            reasons::MIG_CONFIG_REBOOTING,
        ),
        (Some("failed"), Status::NotReady, reasons::MIG_CONFIG_FAILED),
        (
            Some("unknown-state"),
            Status::Unknown,
            reasons::MIG_CONFIG_STATE_UNKNOWN,
        ),
        (None, Status::Unknown, reasons::MIG_CONFIG_STATE_UNKNOWN),
    ] {
        let r = judge(profile, &node(state));
        assert!(!r.ready(), "{state:?}");
        let l = r.expect(Layer::Profile, status, reason);
        assert_eq!(l.evidence, Source::MigManagerLabels);
    }
    // Another layout than the pool needs, whatever its state.
    let r = judge(
        profile,
        &NodeBuilder::a100_mig_mixed("a100")
            .label("nvidia.com/mig.config", "all-1g.5gb")
            .label("nvidia.com/mig.config.state", "success"),
    );
    r.expect(
        Layer::Profile,
        Status::NotReady,
        reasons::MIG_CONFIG_MISMATCH,
    )
    .mentions(&["nvidia.com/mig.config=all-1g.5gb", "needs all-balanced"]);
    // A profile with only device counts still refuses a node mid-reconfiguration.
    let r = judge(
        "mig: {devices: {1g.5gb: 1}}",
        &NodeBuilder::a100_mig_mixed("a100").label("nvidia.com/mig.config.state", "rebooting"),
    );
    r.expect(
        Layer::Profile,
        Status::NotReady,
        reasons::MIG_CONFIG_REBOOTING,
    );
}

#[test]
fn mig_device_counts_from_gfd_mixed_single_and_the_dra_pool() {
    // Mixed strategy: nvidia.com/mig-<profile>.count.
    let mixed = NodeBuilder::a100_mig_mixed("a100");
    judge("mig: {devices: {1g.5gb: 1}}", &mixed).expect(
        Layer::Profile,
        Status::Ready,
        "ProfileMatches",
    );
    judge("mig: {devices: {1g.5gb: 7}}", &mixed)
        .expect(
            Layer::Profile,
            Status::NotReady,
            reasons::MIG_DEVICES_MISSING,
        )
        .mentions(&["GFD's MIG labels", "1g.5gb: 1 < 7"]);
    // Single strategy: GFD relabels gpu.product and gpu.count for the MIG devices.
    let single = NodeBuilder::gpu("a100")
        .label("nvidia.com/mig.strategy", "single")
        .label("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")
        .label("nvidia.com/gpu.count", "7");
    judge("mig: {devices: {1g.5gb: 7}}", &single).expect(
        Layer::Profile,
        Status::Ready,
        "ProfileMatches",
    );
    judge("mig: {devices: {2g.10gb: 1}}", &single).expect(
        Layer::Profile,
        Status::NotReady,
        reasons::MIG_DEVICES_MISSING,
    );
    // DRA: the pool's MIG devices (2g.35gb, 1g.18gb ×2, 3g.71gb).
    let s = slice("dra-h200-mig.yaml");
    let f = facts(
        &dra_only_node(NODE),
        NODE,
        std::slice::from_ref(&s),
        None,
        None,
        None,
    );
    let ok = gpuready_core::evaluate(&spec("mig: {devices: {1g.18gb: 2, 3g.71gb: 1}}"), &f, now());
    ok.expect(Layer::Profile, Status::Ready, "ProfileMatches")
        .mentions(&["MIG devices from the DRA pool", "1g.18gb ×2"]);
    let short = gpuready_core::evaluate(&spec("mig: {devices: {1g.18gb: 7}}"), &f, now());
    short
        .expect(
            Layer::Profile,
            Status::NotReady,
            reasons::MIG_DEVICES_MISSING,
        )
        .mentions(&["1g.18gb: 2 < 7"]);
}

/// NVML's recovery action on one GPU of eight, under device gating: the
/// actions at the GPU's or the node's scope take the GPU out with its own
/// rule (the node stays in service while the minimum holds); RECOVER_IMEX_DOMAIN
/// names the IMEX domain, not the GPU, and taints nothing (the NVIDIA DRA
/// driver treats it as non-fatal for GPU scheduling); a value this gpuready
/// does not know fails safe.
#[test]
fn a_gpus_recovery_action_gets_its_own_rule_except_the_imex_domains() {
    use gpuready_api::probe::RecoveryAction as A;
    let rows: &[(A, Option<&str>)] = &[
        (A::None, None),
        (A::NotSupported, None),
        (A::GpuReset, Some(health_reasons::GPU_RESET_REQUIRED)),
        (A::NodeReboot, Some(health_reasons::NODE_REBOOT_REQUIRED)),
        (A::DrainP2p, Some(health_reasons::DRAIN_REQUIRED)),
        (
            A::DrainAndReset,
            Some(health_reasons::DRAIN_AND_RESET_REQUIRED),
        ),
        (A::RecoverImexDomain, None),
        (A::BusReset, Some(health_reasons::BUS_RESET_REQUIRED)),
        (
            A::SystemReboot,
            Some(health_reasons::SYSTEM_REBOOT_REQUIRED),
        ),
        (A::Unknown, Some(health_reasons::RECOVERY_ACTION_REQUIRED)),
    ];
    let s = slice("dra-h200-8gpu.yaml");
    let uuid = uuid_of(&s, "gpu-3");
    for (action, want) in rows {
        let mut report = eight_gpu_report(&s);
        report
            .gpus
            .iter_mut()
            .find(|g| g.uuid.as_deref() == Some(uuid.as_str()))
            .expect("gpu-3 in the report")
            .recovery_action = Some(*action);
        let f = facts(
            &dra_only_node(NODE),
            NODE,
            std::slice::from_ref(&s),
            None,
            Some(vec![]),
            Some(report),
        );
        let a = assess_one(&f, &profile("h200", &gated(7)));
        assert_eq!(
            a.ready,
            Some(true),
            "{action:?}: {}: {}",
            a.reason,
            a.message
        );
        assert!(a.changes.taint.is_none(), "{action:?}: no node taint");
        let rules = &a.changes.device_taint_rules;
        match want {
            None => assert!(rules.is_empty(), "{action:?}: {rules:#?}"),
            Some(reason) => {
                assert_eq!(rules.len(), 1, "{action:?}: {rules:#?}");
                let rule = rules[0].rule.as_ref().expect("rule");
                assert_eq!(
                    rule.spec
                        .device_selector
                        .as_ref()
                        .and_then(|d| d.device.as_deref()),
                    Some("gpu-3"),
                    "{action:?}"
                );
                assert_eq!(rule.spec.taint.value.as_deref(), Some(*reason));
                assert!(
                    a.message.contains(&format!("gpu-3 ({reason})")),
                    "{action:?}: {}",
                    a.message
                );
            }
        }
        // The Health layer judges the GPUs that stay in service: ready.
        let h = a
            .layers
            .iter()
            .find(|l| l.layer == Layer::Health)
            .expect("health");
        assert_eq!(h.status, Status::Ready, "{action:?}: {}", h.message);
        if *action == A::RecoverImexDomain {
            assert!(h.message.contains("RECOVER_IMEX_DOMAIN"), "{}", h.message);
        }
    }
}
