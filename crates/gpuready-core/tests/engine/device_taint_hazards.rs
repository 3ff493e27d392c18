//! Kubernetes' own device-taint hazards, as tables: the pods a `NoExecute`
//! taint of gpuready's leaves running because they hold the device as a
//! DRA-backed extended resource (kubernetes #141290: the eviction controller
//! reads only `pod.spec.resourceClaims`), read from the claims the scheduler
//! makes for them; and anyone's `NoExecute` DeviceTaintRule whose selector
//! names no pool, which evicts across the cluster (kubernetes #141422).

use crate::common;

use common::*;
use gpuready_api::device_taint_rule::{self, DeviceTaintRule};
use gpuready_api::dra::ResourceSlice;
use gpuready_api::keys;
use gpuready_api::probe::{EventKind, EventRecord, GpuState, ProbeReport};
use gpuready_api::resource_claim::ResourceClaim;
use gpuready_core::devices::{RuleAction, escalation_rule_name, no_execute_devices};
use gpuready_core::evidence::EvidenceIndex;
use gpuready_core::health::ProbeEvidence;
use gpuready_core::wide_rules::{Reach, wide_rule};
use gpuready_core::{NodeAssessment, PlanOptions, TaintChangeKind, assess};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube_core::Selector;
use serde_json::{Value, json};

const NODE: &str = "gpu-h200-01";

fn read(dir: &str, name: &str) -> String {
    let path = format!("{}/tests/fixtures/{dir}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn slice() -> ResourceSlice {
    serde_yaml_ng::from_str(&read("evidence", "dra-h200-8gpu.yaml")).expect("a ResourceSlice")
}

/// The fixture's eight GPUs, healthy but for a fatal XID 79 on gpu-3.
fn report_xid_on_gpu3(s: &ResourceSlice) -> ProbeReport {
    let mut r: ProbeReport =
        serde_json::from_str(&read("h200-real", "probe-report.json")).expect("report");
    r.generated_at = "2026-11-29T11:59:30Z".into();
    r.probe_started_at = "2026-11-29T11:00:00Z".into();
    r.node = None;
    let uuid = |d: &str| {
        s.spec
            .devices
            .iter()
            .find(|x| x.name == d)
            .expect("device")
            .attributes["uuid"]
            .string
            .clone()
    };
    r.gpus = (0..8)
        .map(|i| GpuState {
            index: i,
            uuid: uuid(&format!("gpu-{i}")),
            ..r.gpus[0].clone()
        })
        .collect();
    r.device_count = Some(8);
    r.events.monitored = true;
    r.events.error = None;
    r.events.records.push(EventRecord {
        gpu: uuid("gpu-3").expect("uuid"),
        kind: EventKind::Xid,
        xid: Some(79),
        count: 1,
        first_seen: "2026-11-29T11:50:00Z".into(),
        last_seen: "2026-11-29T11:50:00Z".into(),
    });
    r
}

/// The claim the scheduler makes for a pod's `nvidia.com/gpu: 1` (KEP-5004).
fn extended_claim(pod: &str, device: &str, tolerations: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": format!("{pod}-extended-resources-abcde"),
            "namespace": "ml",
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod, "controller": true}]
        },
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "container-0-request-0", "driver": "gpu.nvidia.com",
                    "pool": NODE, "device": device, "tolerations": tolerations}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": pod}]
        }
    })
}

/// A claim of the pod's own (`spec.resourceClaims`): Kubernetes evicts it.
fn own_claim(pod: &str, device: &str) -> Value {
    let mut c = extended_claim(pod, device, json!([]));
    c["metadata"]["annotations"] = json!({});
    c
}

/// gpuready's escalation rule for gpu-3, created `age` seconds ago.
fn escalation_rule(age: i64, effect: &str) -> DeviceTaintRule {
    let mut metadata = device_taint_rule::owned_metadata(NODE, "h200", "FatalXid");
    metadata.name = Some(escalation_rule_name("gpu.nvidia.com", NODE, "gpu-3"));
    metadata.creation_timestamp = Some(Time(at(-age)));
    serde_json::from_value(json!({
        "metadata": serde_json::to_value(&metadata).expect("metadata"),
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-3"},
                 "taint": {"key": "gpuready.io/device-not-ready", "value": "FatalXid", "effect": effect}}
    }))
    .expect("rule")
}

const H200_8: &str = "gpu: {products: [NVIDIA-H200], count: 8}\n";

struct Case {
    what: &'static str,
    /// The profile's spec after the GPU expectation.
    spec: &'static str,
    /// gpuready's rules the API server holds for the node.
    rules: Vec<DeviceTaintRule>,
    /// `None`: ResourceClaims were not read.
    claims: Option<Vec<Value>>,
    /// The message on gpu-3, or none.
    want: Option<&'static str>,
    /// Pods left running under a taint that is `NoExecute` now.
    pods: usize,
}

fn assessed(c: &Case) -> NodeAssessment {
    assessed_on(c, &NodeBuilder::bare(NODE).label(POOL.0, POOL.1), &opts())
}

fn assessed_on(c: &Case, node: &NodeBuilder, opts: &PlanOptions) -> NodeAssessment {
    let s = slice();
    let claims: Option<Vec<ResourceClaim>> = c.claims.as_ref().map(|v| {
        v.iter()
            .map(|c| serde_json::from_value(c.clone()).expect("claim"))
            .collect()
    });
    let slices = [s.clone()];
    let index = EvidenceIndex::new(Some(&slices), None).with_resource_claims(claims.as_deref());
    let facts = node
        .facts()
        .with_evidence(
            index
                .for_node(NODE)
                .with_device_rules(Some(c.rules.clone())),
        )
        .with_probe(Some(ProbeEvidence::Report(Box::new(report_xid_on_gpu3(
            &s,
        )))));
    let p = profile("h200", &format!("{H200_8}{}", c.spec));
    let selector: Selector = gpuready_core::select::profile_selector(&p).expect("selector");
    assess(&facts, &[(&p, &selector)], opts)
}

#[test]
fn pods_holding_a_no_execute_device_as_an_extended_resource_are_named() {
    let escalating =
        "deviceGating: {minReadyGpus: 7}\nescalation: {reasons: [FatalXid], dryRunSeconds: 300}\n";
    let trainer = || Some(vec![extended_claim("trainer-0", "gpu-3", json!([]))]);
    let cases = vec![
        Case {
            what: "escalated: the eviction controller leaves the pod running",
            spec: escalating,
            rules: vec![escalation_rule(3600, "NoExecute")],
            claims: trainer(),
            want: Some(
                "1 pod(s) hold gpu-3 as a DRA extended resource and are not evicted by Kubernetes (kubernetes #141290): ml/trainer-0",
            ),
            pods: 1,
        },
        Case {
            what: "dry run: said before the taint turns",
            spec: escalating,
            rules: vec![escalation_rule(10, "None")],
            claims: trainer(),
            want: Some(
                "1 pod(s) hold gpu-3 as a DRA extended resource and will not be evicted by Kubernetes when the taint turns NoExecute (kubernetes #141290): ml/trainer-0",
            ),
            pods: 0,
        },
        Case {
            what: "the rule not created yet: a dry run to come",
            spec: escalating,
            rules: vec![],
            claims: trainer(),
            want: Some("will not be evicted by Kubernetes when the taint turns NoExecute"),
            pods: 0,
        },
        Case {
            what: "deviceGating.effect NoExecute: the device's own rule evicts at once",
            spec: "deviceGating: {minReadyGpus: 7, effect: NoExecute}\n",
            rules: vec![],
            claims: trainer(),
            want: Some("are not evicted by Kubernetes (kubernetes #141290): ml/trainer-0"),
            pods: 1,
        },
        Case {
            what: "Observe: a dry run forever",
            spec: "mode: Observe\ndeviceGating: {minReadyGpus: 7}\nescalation: {reasons: [FatalXid]}\n",
            rules: vec![escalation_rule(3600, "None")],
            claims: trainer(),
            want: Some("would not be evicted by Kubernetes under NoExecute"),
            pods: 0,
        },
        Case {
            what: "two pods share the device (time-slicing): both named",
            spec: escalating,
            rules: vec![escalation_rule(3600, "NoExecute")],
            claims: Some(vec![
                extended_claim("b-pod", "gpu-3", json!([])),
                extended_claim("a-pod", "gpu-3", json!([])),
            ]),
            want: Some(
                "2 pod(s) hold gpu-3 as a DRA extended resource and are not evicted by Kubernetes (kubernetes #141290): ml/a-pod, ml/b-pod",
            ),
            pods: 2,
        },
        Case {
            what: "NoSchedule only: pods are meant to stay",
            spec: "deviceGating: {minReadyGpus: 7}\n",
            rules: vec![],
            claims: trainer(),
            want: None,
            pods: 0,
        },
        Case {
            what: "the pod holds another GPU",
            spec: escalating,
            rules: vec![escalation_rule(3600, "NoExecute")],
            claims: Some(vec![extended_claim("trainer-0", "gpu-4", json!([]))]),
            want: None,
            pods: 0,
        },
        Case {
            what: "the pod's own claim: Kubernetes evicts it",
            spec: escalating,
            rules: vec![escalation_rule(3600, "NoExecute")],
            claims: Some(vec![own_claim("trainer-0", "gpu-3")]),
            want: None,
            pods: 0,
        },
        Case {
            what: "the allocation tolerates gpuready's taint",
            spec: escalating,
            rules: vec![escalation_rule(3600, "NoExecute")],
            claims: Some(vec![extended_claim(
                "trainer-0",
                "gpu-3",
                json!([{"key": "gpuready.io/device-not-ready", "operator": "Exists"}]),
            )]),
            want: None,
            pods: 0,
        },
        Case {
            what: "ResourceClaims not read: nothing counted",
            spec: escalating,
            rules: vec![escalation_rule(3600, "NoExecute")],
            claims: None,
            want: None,
            pods: 0,
        },
    ];
    for c in &cases {
        let a = assessed(c);
        assert_eq!(a.not_evicted_pods, c.pods, "{}: {a:#?}", c.what);
        match c.want {
            Some(want) => {
                assert_eq!(a.not_evicted.len(), 1, "{}: {:?}", c.what, a.not_evicted);
                assert!(
                    a.not_evicted[0].contains(want),
                    "{}: {}",
                    c.what,
                    a.not_evicted[0]
                );
                // The node's GpuReady message names them too.
                assert!(a.message.contains(want), "{}: {}", c.what, a.message);
                // And the escalation entry the profile status lists.
                if let Some(e) = a.escalations.first() {
                    assert!(
                        e.not_evicted.as_deref().is_some_and(|m| m.contains(want)),
                        "{}: {e:?}",
                        c.what
                    );
                }
            }
            None => assert!(a.not_evicted.is_empty(), "{}: {:?}", c.what, a.not_evicted),
        }
        // Device gating still holds the node as before: 7 of 8 GPUs serve.
        assert_eq!(a.ready, Some(true), "{}: {}", c.what, a.message);
    }
}

#[test]
fn a_long_list_of_pods_is_cut() {
    let claims = (0..8)
        .map(|i| extended_claim(&format!("p{i}"), "gpu-3", json!([])))
        .collect();
    let a = assessed(&Case {
        what: "eight pods",
        spec: "deviceGating: {minReadyGpus: 7, effect: NoExecute}\n",
        rules: vec![],
        claims: Some(claims),
        want: None,
        pods: 8,
    });
    assert_eq!(a.not_evicted_pods, 8);
    assert!(
        a.not_evicted[0].ends_with("ml/p0, ml/p1, ml/p2, ml/p3, ml/p4 and 3 more"),
        "{}",
        a.not_evicted[0]
    );
}

fn rule(name: &str, selector: Option<Value>, effect: &str, owned: bool) -> DeviceTaintRule {
    let mut r = json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"taint": {"key": "example.com/broken", "value": "true", "effect": effect}}
    });
    if let Some(s) = selector {
        r["spec"]["deviceSelector"] = s;
    }
    if owned {
        r["metadata"]["labels"] = json!({"gpuready.io/device-taint-rule": "true"});
    }
    serde_json::from_value(r).expect("rule")
}

#[test]
fn a_no_execute_rule_whose_selector_names_no_pool_is_reported() {
    let d = "gpu.nvidia.com";
    // (name, selector, effect, reach, words of the message)
    type Row = (
        &'static str,
        Option<Value>,
        &'static str,
        Option<Reach>,
        &'static str,
    );
    let cases: Vec<Row> = vec![
        (
            "empty",
            Some(json!({})),
            "NoExecute",
            Some(Reach::EveryDevice),
            "every device of every driver (an empty deviceSelector)",
        ),
        (
            "driver-only",
            Some(json!({"driver": d})),
            "NoExecute",
            Some(Reach::EveryDeviceOfDriver),
            "every device of driver gpu.nvidia.com",
        ),
        (
            "device-only",
            Some(json!({"device": "gpu-0"})),
            "NoExecute",
            Some(Reach::DeviceInEveryPool),
            "device gpu-0 in every pool (its",
        ),
        (
            "driver-device",
            Some(json!({"driver": d, "device": "gpu-0"})),
            "NoExecute",
            Some(Reach::DeviceInEveryPool),
            "device gpu-0 in every pool of driver gpu.nvidia.com",
        ),
        (
            "empty-strings",
            Some(json!({"driver": "", "pool": ""})),
            "NoExecute",
            Some(Reach::EveryDevice),
            "every device of every driver",
        ),
        // Scoped to one pool (one node for node-local drivers): not wide.
        ("pool", Some(json!({"pool": NODE})), "NoExecute", None, ""),
        (
            "one-device",
            Some(json!({"driver": d, "pool": NODE, "device": "gpu-3"})),
            "NoExecute",
            None,
            "",
        ),
        // No selector: no device, by the API's reading.
        ("no-selector", None, "NoExecute", None, ""),
        // Not NoExecute: nothing is evicted.
        ("empty-noschedule", Some(json!({})), "NoSchedule", None, ""),
        ("empty-none", Some(json!({})), "None", None, ""),
    ];
    for (name, sel, effect, reach, words) in cases {
        let got = wide_rule(&rule(name, sel, effect, false));
        assert_eq!(got.as_ref().map(|w| w.reach), reach, "{name}");
        if let Some(w) = got {
            assert!(w.message.contains(words), "{name}: {}", w.message);
            assert!(
                w.message.contains("kubernetes #141422"),
                "{name}: {}",
                w.message
            );
            assert!(
                w.message
                    .starts_with(&format!("DeviceTaintRule {name} taints ")),
                "{}",
                w.message
            );
            assert!(
                w.message.contains("example.com/broken=true:NoExecute"),
                "{}",
                w.message
            );
            assert!(!w.gpuready_owned);
        }
    }
    // A rule that looks like gpuready's and is wide is still reported.
    let w = wide_rule(&rule("gpuready-x", Some(json!({})), "NoExecute", true)).expect("wide");
    assert!(w.gpuready_owned);
    // Sorted by name.
    let all = [
        rule("b", Some(json!({})), "NoExecute", false),
        rule("a", Some(json!({"driver": d})), "NoExecute", false),
        rule("c", Some(json!({"pool": "p"})), "NoExecute", false),
    ];
    let names: Vec<String> = gpuready_core::wide_rules::wide_rules(&all)
        .into_iter()
        .map(|w| w.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn claims_are_kept_only_for_devices_gpuready_taints_no_execute() {
    let mut noschedule = escalation_rule(0, "NoSchedule");
    noschedule.metadata.name = Some("gpuready-gpu-h200-01-gpu-1".into());
    noschedule
        .spec
        .device_selector
        .as_mut()
        .expect("sel")
        .device = Some("gpu-1".into());
    let mut foreign = escalation_rule(0, "NoExecute");
    foreign.metadata.labels = None;
    let dry_run = escalation_rule(0, "None");
    let mut escalated = escalation_rule(0, "NoExecute");
    escalated.spec.device_selector.as_mut().expect("sel").device = Some("gpu-5".into());
    let set = no_execute_devices([&noschedule, &foreign, &dry_run, &escalated]);
    let devices: Vec<&str> = set.iter().map(|(_, _, d)| d.as_str()).collect();
    assert_eq!(
        devices,
        ["gpu-3", "gpu-5"],
        "NoSchedule and foreign rules left out"
    );
}

/// `escalation.extendedResourcePods: TaintNode`: while pods hold an escalated
/// device as a DRA extended resource, the node's own taint turns `NoExecute`
/// (the node-level path, which the taint manager enforces), planned like any
/// other node taint: the safety brake holds it when it would be new.
#[test]
fn taint_node_escalates_the_node_taint_while_such_pods_remain() {
    const TAINT_NODE: &str = "deviceGating: {minReadyGpus: 7}\nescalation: {reasons: [FatalXid], dryRunSeconds: 300, extendedResourcePods: TaintNode}\n";
    let case = |rules: Vec<DeviceTaintRule>, claims: Vec<Value>| Case {
        what: "",
        spec: TAINT_NODE,
        rules,
        claims: Some(claims),
        want: None,
        pods: 0,
    };
    let trainer = || vec![extended_claim("trainer-0", "gpu-3", json!([]))];
    let node = NodeBuilder::bare(NODE).label(POOL.0, POOL.1);
    let escalated_taint = format!("{}=true:NoExecute", keys::DEFAULT_TAINT_KEY);

    // Escalated and held: not ready, the node taint added as NoExecute.
    let a = assessed(&case(vec![escalation_rule(3600, "NoExecute")], trainer()));
    assert_eq!(a.ready, Some(false), "{}", a.message);
    assert_eq!(a.reason, keys::reasons::EXTENDED_RESOURCE_PODS_NOT_EVICTED);
    for words in [
        "pods hold gpu-3 (1 pod(s)) as a DRA extended resource",
        "Kubernetes does not evict such pods (kubernetes #141290)",
        "the taint escalated to NoExecute at 2026-11-29T11:05:00Z (ExtendedResourcePodsNotEvicted)",
    ] {
        assert!(a.message.contains(words), "{words:?} not in {}", a.message);
    }
    let t = a.changes.taint.as_ref().expect("node taint");
    assert_eq!(t.kind, TaintChangeKind::Add);
    assert_eq!(taint_strings(t.ours.as_slice()), [escalated_taint]);

    // The safety brake engaged: a new taint is held, NoExecute or not.
    let braked = PlanOptions {
        hold_new_taints: true,
        write_refused: false,
        ..opts()
    };
    let a = assessed_on(
        &case(vec![escalation_rule(3600, "NoExecute")], trainer()),
        &node,
        &braked,
    );
    assert!(a.changes.taint.is_none(), "{:?}", a.changes.taint);
    assert!(a.changes.taint_held_by_brake);

    // Still in the dry run, or nobody holds the device that way: ready, untainted.
    for (rules, claims) in [
        (vec![escalation_rule(10, "None")], trainer()),
        (vec![escalation_rule(3600, "NoExecute")], vec![]),
        (
            vec![escalation_rule(3600, "NoExecute")],
            vec![own_claim("trainer-0", "gpu-3")],
        ),
    ] {
        let a = assessed(&case(rules, claims));
        assert_eq!(a.ready, Some(true), "{}", a.message);
        assert!(a.changes.taint.is_none());
    }

    // The pods are gone (the node NoExecute evicted them; their claims went
    // with them): the node taint goes, the device's rule stays.
    let tainted = node
        .clone()
        .taint(keys::DEFAULT_TAINT_KEY, "true", "NoExecute")
        .annotate(
            keys::ANNOTATION_TAINT,
            &format!("{}:NoExecute", keys::DEFAULT_TAINT_KEY),
        );
    let a = assessed_on(
        &case(vec![escalation_rule(3600, "NoExecute")], vec![]),
        &tainted,
        &opts(),
    );
    assert_eq!(a.ready, Some(true), "{}", a.message);
    assert_eq!(
        a.changes.taint.as_ref().map(|t| t.kind),
        Some(TaintChangeKind::Remove)
    );
    // While they remain, nothing changes on a node already tainted NoExecute.
    let a = assessed_on(
        &case(vec![escalation_rule(3600, "NoExecute")], trainer()),
        &tainted,
        &opts(),
    );
    assert!(a.changes.taint.is_none(), "{:?}", a.changes.taint);

    // An Observe profile never taints.
    let observe = Case {
        spec: "mode: Observe\ndeviceGating: {minReadyGpus: 7}\nescalation: {reasons: [FatalXid], extendedResourcePods: TaintNode}\n",
        ..case(vec![escalation_rule(3600, "None")], trainer())
    };
    let a = assessed(&observe);
    assert_eq!(a.ready, Some(true), "{}", a.message);
}

/// `rule` with uid and gpuready's condition in its status, as the watch
/// keeps it (`None`: no condition of gpuready's).
fn held(mut rule: DeviceTaintRule, condition: Option<(&str, &str, &str)>) -> DeviceTaintRule {
    rule.metadata.uid = Some("uid-1".into());
    rule.status = Some(device_taint_rule::DeviceTaintRuleStatus {
        conditions: condition
            .map(|(status, reason, message)| Condition {
                type_: keys::device_rules::CONDITION_PODS_NOT_EVICTED.into(),
                status: status.into(),
                reason: reason.into(),
                message: message.into(),
                last_transition_time: Time(at(-600)),
                observed_generation: None,
            })
            .into_iter()
            // The eviction controller's own condition is left as it is.
            .chain(std::iter::once(Condition {
                type_: device_taint_rule::CONDITION_EVICTION_IN_PROGRESS.into(),
                status: "False".into(),
                reason: "Completed".into(),
                message: "0 pods evicted".into(),
                last_transition_time: Time(at(-600)),
                observed_generation: None,
            }))
            .collect(),
    });
    rule
}

/// gpu-3's own rule (deviceGating's NoSchedule): never carries the condition.
fn own_rule() -> DeviceTaintRule {
    let mut r = escalation_rule(3600, "NoSchedule");
    r.metadata.name = Some(device_taint_rule::rule_name(
        "gpu.nvidia.com",
        NODE,
        "gpu-3",
    ));
    r
}

#[test]
fn gpureadys_condition_on_its_rule_follows_the_pods() {
    use keys::device_rules::condition_reasons as r;
    const NOW_MSG: &str = "1 pod(s) hold gpu-3 as a DRA extended resource and are not evicted by Kubernetes (kubernetes #141290): ml/trainer-0";
    let escalating =
        "deviceGating: {minReadyGpus: 7}\nescalation: {reasons: [FatalXid], dryRunSeconds: 300}\n";
    let trainer = || Some(vec![extended_claim("trainer-0", "gpu-3", json!([]))]);
    let esc = escalation_rule_name("gpu.nvidia.com", NODE, "gpu-3");
    // (what, spec, rules, claims, the one status write: (status, reason, the
    // message contains, lastTransitionTime kept))
    type Want = Option<(&'static str, &'static str, &'static str, bool)>;
    type Row = (
        &'static str,
        &'static str,
        Vec<DeviceTaintRule>,
        Option<Vec<Value>>,
        Want,
    );
    let cases: Vec<Row> = vec![
        (
            "escalated, pods stay: True on the escalation rule, none on the NoSchedule rule",
            escalating,
            vec![
                held(own_rule(), None),
                held(escalation_rule(3600, "NoExecute"), None),
            ],
            trainer(),
            Some(("True", r::NOT_EVICTED, NOW_MSG, false)),
        ),
        (
            "already says so: no write",
            escalating,
            vec![held(
                escalation_rule(3600, "NoExecute"),
                Some(("True", r::NOT_EVICTED, NOW_MSG)),
            )],
            trainer(),
            None,
        ),
        (
            "another pod joins: the message moves, the transition time stays",
            escalating,
            vec![held(
                escalation_rule(3600, "NoExecute"),
                Some(("True", r::NOT_EVICTED, "1 pod(s) hold gpu-3 …: ml/other")),
            )],
            trainer(),
            Some(("True", r::NOT_EVICTED, NOW_MSG, true)),
        ),
        (
            "the pods are gone: False",
            escalating,
            vec![held(
                escalation_rule(3600, "NoExecute"),
                Some(("True", r::NOT_EVICTED, NOW_MSG)),
            )],
            Some(vec![]),
            Some((
                "False",
                r::NONE,
                "no pod holds gpu-3 as a DRA extended resource",
                false,
            )),
        ),
        (
            "never any such pod: nothing written",
            escalating,
            vec![held(escalation_rule(3600, "NoExecute"), None)],
            Some(vec![]),
            None,
        ),
        (
            "the pass that turns the rule NoExecute says so at once",
            escalating,
            vec![held(escalation_rule(3600, "None"), None)],
            trainer(),
            Some(("True", r::NOT_EVICTED, NOW_MSG, false)),
        ),
        (
            "dry run: True, would not be evicted",
            escalating,
            vec![held(escalation_rule(10, "None"), None)],
            trainer(),
            Some((
                "True",
                r::WOULD_NOT_BE_EVICTED,
                "when the taint turns NoExecute",
                false,
            )),
        ),
        (
            "deviceGating.effect NoExecute: on the device's own rule",
            "deviceGating: {minReadyGpus: 7, effect: NoExecute}\n",
            vec![held(
                {
                    let mut r = own_rule();
                    r.spec.taint.effect = "NoExecute".into();
                    r
                },
                None,
            )],
            trainer(),
            Some(("True", r::NOT_EVICTED, "ml/trainer-0", false)),
        ),
        (
            "ResourceClaims not read: the condition stays as it is",
            escalating,
            vec![held(
                escalation_rule(3600, "NoExecute"),
                Some(("True", r::NOT_EVICTED, NOW_MSG)),
            )],
            None,
            None,
        ),
        (
            "the rule not created yet: its condition waits for the watch's copy",
            escalating,
            vec![],
            trainer(),
            None,
        ),
    ];
    for (what, spec, rules, claims, want) in cases {
        let c = Case {
            what,
            spec,
            rules,
            claims,
            want: None,
            pods: 0,
        };
        let a = assessed(&c);
        let writes: Vec<_> = a
            .changes
            .device_taint_rules
            .iter()
            .filter(|w| w.action == RuleAction::Status)
            .collect();
        let Some((status, reason, message, kept)) = want else {
            assert!(writes.is_empty(), "{what}: {writes:#?}");
            continue;
        };
        assert_eq!(writes.len(), 1, "{what}: {writes:#?}");
        let w = writes[0];
        let cond = w.condition.as_ref().expect("a condition");
        let own = if spec.contains("NoExecute") {
            device_taint_rule::rule_name("gpu.nvidia.com", NODE, "gpu-3")
        } else {
            esc.clone()
        };
        assert_eq!(w.name, own, "{what}");
        assert_eq!(w.uid.as_deref(), Some("uid-1"), "{what}");
        assert_eq!(cond.type_, keys::device_rules::CONDITION_PODS_NOT_EVICTED);
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_str()),
            (status, reason),
            "{what}"
        );
        assert!(cond.message.contains(message), "{what}: {}", cond.message);
        let ltt = if kept { at(-600) } else { now() };
        assert_eq!(cond.last_transition_time, Time(ltt), "{what}");
    }
}
