//! `gpuready check` as a user runs it: the built binary over the shipped examples
//! and over temporary files, its exit codes (0 ready, 1 not ready, 2 bad input),
//! its JSON/YAML shape and its error messages.

use crate::support;

use std::path::PathBuf;
use std::process::Output;

use serde_json::{Value, json};
use support::*;

const EXAMPLES: [&str; 3] = ["pascal-maxwell", "rtx3090-rtx4070tis", "talos-rtx3050"];

fn example(dir: &str, file: &str) -> PathBuf {
    repo_root().join("deploy/examples").join(dir).join(file)
}

fn all_examples(extra: &[&str]) -> Output {
    let nodes: Vec<PathBuf> = EXAMPLES.iter().map(|d| example(d, "nodes.json")).collect();
    let profiles: Vec<PathBuf> = EXAMPLES
        .iter()
        .map(|d| example(d, "profiles.yaml"))
        .collect();
    offline_check(&nodes, &profiles, extra)
}

#[track_caller]
fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(o),
        stderr(o)
    );
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

fn node<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["nodes"]
        .as_array()
        .expect("nodes array")
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("node {name} not in the report"))
}

/// The first gating layer that is not Ready: (layer, reason).
fn first_failure(node: &Value) -> Option<(String, String)> {
    node["layers"]
        .as_array()
        .expect("layers array")
        .iter()
        .find(|l| l["gating"] == true && l["status"] != "Ready")
        .map(|l| {
            (
                l["layer"].as_str().unwrap_or_default().to_owned(),
                l["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

const BROKEN: [(&str, &str, &str); 6] = [
    ("gpu-3090-b", "FeatureDiscovery", "GfdLabelsStale"),
    ("gpu-4070tis", "DevicePlugin", "DevicesUnhealthy"),
    ("gtx1070-cuda13", "Compatibility", "CudaDropsArchitecture"),
    ("gtx1070-down", "Node", "KubeletNotReady"),
    ("gtx1070-old-driver", "Driver", "DriverTooOld"),
    ("quadro-m5000", "Profile", "FamilyExcluded"),
];
const READY: [&str; 3] = ["gpu-3090", "gtx1070-a", "talos-gpu-1"];

// ---- The shipped examples ----

#[test]
fn examples_exit_1_and_the_table_names_each_broken_node_and_reason() {
    let o = all_examples(&[]);
    assert_exit(&o, 1);
    let out = stdout(&o);
    for (name, layer, reason) in BROKEN {
        let row = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no summary row for {name}:\n{out}"));
        assert!(
            row.contains(" NO ") && row.trim_end().ends_with(reason),
            "{row}"
        );
        // The per-node detail shows the failing layer with its reason.
        let detail = out
            .split("\n\n")
            .find(|block| block.starts_with(&format!("{name}: NOT READY")))
            .unwrap_or_else(|| panic!("no detail block for {name}:\n{out}"));
        assert!(
            detail.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() >= 3 && cols[0] == layer && cols[1] == "NotReady" && cols[2] == reason
            }),
            "{name}: no `{layer} NotReady {reason}` line in\n{detail}"
        );
    }
    for name in READY {
        let cols: Vec<&str> = out
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|cols| cols.first() == Some(&name))
            .unwrap_or_else(|| panic!("no summary row for {name}:\n{out}"));
        assert_eq!(cols[2..], ["yes", "Ready"], "{name}");
    }
    assert!(out.contains("cpu-1: ungoverned"), "{out}");
    assert!(
        out.contains("9 governed node(s): 3 ready, 6 not ready; 0 conflict(s); 1 ungoverned"),
        "{out}"
    );
}

#[test]
fn examples_as_json_name_the_first_failing_layer_and_reason() {
    let o = all_examples(&["--output", "json"]);
    assert_exit(&o, 1);
    let report = json(&o);
    for (name, layer, reason) in BROKEN {
        let n = node(&report, name);
        assert_eq!(n["ready"], false, "{name}");
        assert_eq!(n["reason"], reason, "{name}");
        assert_eq!(
            first_failure(n),
            Some((layer.to_owned(), reason.to_owned())),
            "{name}"
        );
    }
    for name in READY {
        let n = node(&report, name);
        assert_eq!(n["ready"], true, "{name}");
        assert_eq!(first_failure(n), None, "{name}");
    }
    let cpu = node(&report, "cpu-1");
    assert_eq!(cpu["ready"], Value::Null);
    assert_eq!(cpu["profile"], Value::Null);
    // Observe mode: reported, never written.
    let observed = node(&report, "gtx1070-cuda13");
    assert_eq!(observed["changes"], serde_json::json!({}));
}

#[test]
fn json_output_has_the_documented_shape() {
    let o = all_examples(&["-o", "json"]);
    let report = json(&o);
    let nodes = report["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 10);
    let names: Vec<&str> = nodes.iter().filter_map(|n| n["name"].as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "nodes are sorted by name");
    for n in nodes {
        for key in ["name", "profile", "ready", "layers", "changes"] {
            assert!(n.get(key).is_some(), "{key} missing in {n}");
        }
        assert!(n["changes"].is_object(), "{n}");
        for l in n["layers"].as_array().expect("layers") {
            for key in ["layer", "status", "reason", "message"] {
                assert!(l[key].is_string(), "{key} missing in {l}");
            }
            assert!(
                ["Ready", "NotReady", "Unknown"].contains(&l["status"].as_str().unwrap_or("")),
                "{l}"
            );
        }
    }
    let governed = node(&report, "gpu-3090-b");
    assert_eq!(governed["profile"], "ampere-ada");
    let layers: Vec<&str> = governed["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .filter_map(|l| l["layer"].as_str())
        .collect();
    assert_eq!(
        layers,
        [
            "Node",
            "Hardware",
            "Driver",
            "DevicePlugin",
            "FeatureDiscovery",
            "Profile",
            "Compatibility"
        ]
    );
    // A not-ready node in Enforce mode: the full taint list it would get, its
    // foreign taint (karpenter's) kept first.
    let changes = &governed["changes"];
    assert_eq!(changes["taint"]["kind"], "add");
    assert_eq!(
        changes["taint"]["taints"],
        serde_json::json!([
            {"effect": "NoSchedule", "key": "karpenter.sh/disrupted"},
            {"effect": "NoSchedule", "key": "readiness.k8s.io/gpuready-not-ready", "value": "true"},
        ])
    );
    assert_eq!(changes["labels"]["gpuready.io/ready"], "false");
    assert_eq!(changes["conditions"]["set"][0]["type"], "GpuReady");
    assert_eq!(report["summary"]["notReady"], 6);
}

#[test]
fn yaml_output_parses_to_the_same_report_as_json() {
    let as_json = json(&all_examples(&["-o", "json"]));
    let o = all_examples(&["-o", "yaml"]);
    assert_exit(&o, 1);
    let as_yaml: Value = serde_yaml_ng::from_str(&stdout(&o)).expect("YAML output parses");
    assert_eq!(as_yaml, as_json);
}

#[test]
fn a_file_of_ready_nodes_exits_0() {
    let o = offline_check(
        &[example("talos-rtx3050", "nodes.json")],
        &[example("talos-rtx3050", "profiles.yaml")],
        &[],
    );
    assert_exit(&o, 0);
    assert!(stdout(&o).contains("1 governed node(s): 1 ready, 0 not ready"));

    // The ready nodes of the other examples, picked out into one file.
    let mut items = Vec::new();
    for dir in EXAMPLES {
        let text = std::fs::read_to_string(example(dir, "nodes.json")).expect("example");
        let list: Value = serde_json::from_str(&text).expect("example JSON");
        items.extend(
            list["items"]
                .as_array()
                .expect("items")
                .iter()
                .filter(|n| READY.contains(&n["metadata"]["name"].as_str().unwrap_or("")))
                .cloned(),
        );
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let (_d, nodes) = temp_file("ready.json", list.to_string());
    let profiles: Vec<PathBuf> = EXAMPLES
        .iter()
        .map(|d| example(d, "profiles.yaml"))
        .collect();
    let o = offline_check(&[nodes], &profiles, &["-o", "json"]);
    assert_exit(&o, 0);
    let report = json(&o);
    assert_eq!(report["nodes"].as_array().map(Vec::len), Some(3));
}

#[test]
fn kubectl_get_nodes_o_yaml_list_works() {
    // `kubectl get nodes -o yaml` prints a `kind: List` whose quantities and
    // label values are quoted strings.
    let text = std::fs::read_to_string(example("pascal-maxwell", "nodes.json")).expect("example");
    let list: Value = serde_json::from_str(&text).expect("example JSON");
    let yaml = serde_yaml_ng::to_string(&list).expect("to YAML");
    assert!(yaml.contains("kind: List"));
    let (_d, nodes) = temp_file("nodes.yaml", &yaml);
    let from_yaml = offline_check(
        &[nodes],
        &[example("pascal-maxwell", "profiles.yaml")],
        &["-o", "json"],
    );
    let from_json = offline_check(
        &[example("pascal-maxwell", "nodes.json")],
        &[example("pascal-maxwell", "profiles.yaml")],
        &["-o", "json"],
    );
    assert_exit(&from_yaml, 1);
    assert_eq!(json(&from_yaml), json(&from_json));
}

#[test]
fn several_node_documents_in_one_yaml_stream_work() {
    let text =
        std::fs::read_to_string(example("rtx3090-rtx4070tis", "nodes.json")).expect("example");
    let list: Value = serde_json::from_str(&text).expect("example JSON");
    let docs: Vec<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| serde_yaml_ng::to_string(n).expect("to YAML"))
        .collect();
    let (_d, nodes) = temp_file("nodes.yaml", docs.join("---\n"));
    let o = offline_check(
        &[nodes],
        &[example("rtx3090-rtx4070tis", "profiles.yaml")],
        &["-o", "json"],
    );
    assert_exit(&o, 1);
    assert_eq!(json(&o)["nodes"].as_array().map(Vec::len), Some(3));
}

// ---- Bad input: exit 2, naming file, document and field ----

const NODE: &str = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n";
const PROFILE_HEAD: &str = "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    matchLabels: {gpu-pool: a}\n";

#[test]
fn broken_yaml_is_refused_with_file_document_and_position() {
    let (_d, nodes) = temp_file(
        "broken.yaml",
        format!("{NODE}---\napiVersion: v1\nkind: Node\nmetadata:\n  labels: [unclosed\n"),
    );
    let o = offline_check(&[nodes], &[good_profiles()], &[]);
    assert_refused(&o, &["broken.yaml", "document 2", "not valid YAML", "line"]);
}

#[test]
fn broken_json_is_refused() {
    let (_d, nodes) = temp_file(
        "nodes.json",
        "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [",
    );
    let o = offline_check(&[nodes], &[good_profiles()], &[]);
    assert_refused(&o, &["nodes.json", "document 1", "not valid YAML or JSON"]);
}

#[test]
fn node_with_capacity_of_the_wrong_type_is_refused() {
    let (_d, nodes) = temp_file(
        "nodes.yaml",
        format!(
            "{NODE}---\napiVersion: v1\nkind: Node\nmetadata:\n  name: bad\nstatus:\n  capacity: [1, 2]\n"
        ),
    );
    let o = offline_check(&[nodes], &[good_profiles()], &[]);
    assert_refused(
        &o,
        &[
            "nodes.yaml",
            "document 2",
            "Node bad",
            "status.capacity",
            "invalid type",
        ],
    );
}

#[test]
fn node_in_a_list_with_a_bad_field_names_the_item() {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ok"}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bad", "labels": {"nvidia.com/gpu.count": 1}}},
    ]});
    let (_d, nodes) = temp_file("nodes.json", list.to_string());
    let o = offline_check(&[nodes], &[good_profiles()], &[]);
    assert_refused(
        &o,
        &[
            "nodes.json",
            "document 1",
            "items[1]",
            "Node bad",
            "metadata.labels",
        ],
    );
}

#[test]
fn profile_with_a_one_part_compute_capability_is_refused() {
    let (_d, profiles) = temp_file(
        "profiles.yaml",
        format!("{PROFILE_HEAD}  gpu:\n    minComputeCapability: \"8\"\n"),
    );
    let o = offline_check(&[good_nodes()], &[profiles], &[]);
    assert_refused(
        &o,
        &[
            "profiles.yaml",
            "document 1",
            "GpuNodeProfile p",
            "spec.gpu.minComputeCapability",
            "8.6",
        ],
    );
}

#[test]
fn profile_with_a_kubernetes_taint_key_is_refused() {
    let (_d, profiles) = temp_file(
        "profiles.yaml",
        format!("{PROFILE_HEAD}  taint:\n    key: node.kubernetes.io/foo\n"),
    );
    let o = offline_check(&[good_nodes()], &[profiles], &[]);
    assert_refused(
        &o,
        &[
            "profiles.yaml",
            "document 1",
            "spec.taint.key",
            "node.kubernetes.io/foo",
            "in a namespace other systems own",
        ],
    );
}

#[test]
fn profile_with_an_unknown_mode_is_refused() {
    let (_d, profiles) = temp_file(
        "profiles.yaml",
        format!("{PROFILE_HEAD}  mode: Enforcing\n"),
    );
    let o = offline_check(&[good_nodes()], &[profiles], &[]);
    assert_refused(
        &o,
        &[
            "profiles.yaml",
            "spec.mode",
            "Enforcing",
            "Enforce",
            "Observe",
        ],
    );
}

#[test]
fn profile_with_a_bad_selector_is_refused() {
    let (_d, profiles) = temp_file(
        "profiles.yaml",
        "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    matchExpressions:\n      - {key: gpu-pool, operator: Near, values: [a]}\n",
    );
    let o = offline_check(&[good_nodes()], &[profiles], &[]);
    assert_refused(&o, &["profiles.yaml", "document 1", "spec.nodeSelector"]);
}

#[test]
fn a_profile_file_given_as_nodes_is_refused() {
    let o = offline_check(&[good_profiles()], &[good_profiles()], &[]);
    assert_refused(
        &o,
        &[
            "profiles.yaml",
            "document 1",
            "kind",
            "expected Node",
            "GpuNodeProfile",
        ],
    );
}

#[test]
fn document_numbers_count_empty_documents_too() {
    // An empty document (a disabled entry, a comment between separators) is still
    // a document: the number in the message must match what the file shows.
    let (_d, profiles) = temp_file(
        "profiles.yaml",
        format!(
            "---\n# staging, disabled for now\n---\n{PROFILE_HEAD}---\n{}  mode: Enforcing\n",
            PROFILE_HEAD.replace("name: p", "name: q")
        ),
    );
    let o = offline_check(&[good_nodes()], &[profiles], &[]);
    assert_refused(
        &o,
        &[
            "profiles.yaml",
            "document 3",
            "GpuNodeProfile q",
            "spec.mode",
        ],
    );
}

#[test]
fn a_missing_nodes_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nodes.json");
    let o = offline_check(&[missing], &[good_profiles()], &[]);
    assert_refused(&o, &["nodes.json", "No such file"]);
}

#[test]
fn an_empty_nodes_file_is_refused() {
    let (_d, nodes) = temp_file("nodes.yaml", "# nothing yet\n");
    let o = offline_check(&[nodes], &[good_profiles()], &[]);
    assert_refused(&o, &["nodes.yaml", "no Node objects"]);
}

#[test]
fn the_table_names_a_custom_readiness_taint() {
    let text = std::fs::read_to_string(example("talos-rtx3050", "nodes.json")).expect("example");
    let mut list: Value = serde_json::from_str(&text).expect("example JSON");
    let node = &mut list["items"][0];
    node["status"]["allocatable"]["nvidia.com/gpu"] = "0".into();
    node["spec"].as_object_mut().expect("spec").remove("taints");
    let (_d, nodes) = temp_file("nodes.json", list.to_string());
    let (_p, profiles) = temp_file(
        "profiles.yaml",
        "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    matchLabels: {gpu-pool: talos-rtx3050}\n  taint: {key: example.com/gpu-not-ready}\n",
    );
    let o = offline_check(&[nodes], &[profiles], &[]);
    assert_exit(&o, 1);
    let out = stdout(&o);
    assert!(
        out.contains("would: add taint example.com/gpu-not-ready=true:NoSchedule;"),
        "{out}"
    );
}

#[test]
fn profile_with_a_misspelt_field_is_refused() {
    let (_d, profiles) = temp_file(
        "profiles.yaml",
        format!("{PROFILE_HEAD}  gpu:\n    products: []\n    minMemoryMiB: 8000\n"),
    );
    let o = offline_check(&[good_nodes()], &[profiles], &[]);
    assert_refused(
        &o,
        &[
            "profiles.yaml",
            "document 1",
            "spec.gpu.minMemoryMiB",
            "unknown field",
        ],
    );
}

#[test]
fn free_form_maps_of_a_profile_are_not_unknown_fields() {
    let (_d, profiles) = temp_file(
        "profiles.yaml",
        format!(
            "{PROFILE_HEAD}  readyLabels:\n    example.org/pool: a\n  resources:\n    nvidia.com/gpu: 1\n"
        ),
    );
    let o = offline_check(&[good_nodes()], &[profiles], &[]);
    assert!(o.status.code() != Some(2), "{}", stderr(&o));
}

#[test]
fn check_words_adoption_and_leaves_an_ungoverned_bootstrap_taint_alone() {
    // A not-ready node registered with gpuready's bootstrap taint.
    let text = std::fs::read_to_string(example("talos-rtx3050", "nodes.json")).expect("example");
    let mut list: Value = serde_json::from_str(&text).expect("example JSON");
    let node = &mut list["items"][0];
    node["status"]["allocatable"]["nvidia.com/gpu"] = "0".into();
    node["spec"]["taints"] = serde_json::json!([
        { "key": "readiness.k8s.io/gpuready-not-ready", "value": "true", "effect": "NoSchedule" }
    ]);
    let (_d, nodes) = temp_file("nodes.json", list.to_string());
    // No profile selects it: nothing to do, the taint stays.
    let (_p, elsewhere) = temp_file(
        "profiles.yaml",
        "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    matchLabels: {gpu-pool: elsewhere}\n",
    );
    let o = offline_check(std::slice::from_ref(&nodes), &[elsewhere], &[]);
    let out = stdout(&o);
    assert!(!out.contains("would:"), "{out}");
    // A profile selects it: gpuready adopts the taint already there.
    let (_q, governing) = temp_file(
        "profiles.yaml",
        "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    matchLabels: {gpu-pool: talos-rtx3050}\n",
    );
    let o = offline_check(&[nodes], &[governing], &[]);
    assert_exit(&o, 1);
    let out = stdout(&o);
    assert!(
        out.contains(
            "would: adopt the taint readiness.k8s.io/gpuready-not-ready:NoSchedule already on the node;"
        ),
        "{out}"
    );
}

// ---- Evidence beside the Nodes: ResourceSlices and NodeFeatures ----

const DRA_NODES: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Node",
   "metadata": {"name": "gpu-h200-01", "labels": {"pool": "h200",
     "feature.node.kubernetes.io/pci-0302_10de.present": "true"}},
   "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
]}"#;

const DRA_PROFILE: &str = r#"apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata: { name: h200 }
spec:
  nodeSelector: { matchLabels: { pool: h200 } }
  gpu: { products: [NVIDIA-H200], count: 1 }
  minDriverVersion: "580.159.04"
  cudaVersion: "13.0"
"#;

fn slice_fixture() -> PathBuf {
    repo_root().join("crates/gpuready-core/tests/fixtures/evidence/dra-h200-1gpu.yaml")
}

#[test]
fn resource_slices_and_node_features_offline() {
    let (_d1, nodes) = temp_file("nodes.json", DRA_NODES);
    let (_d2, profiles) = temp_file("profiles.yaml", DRA_PROFILE);
    // Without slices: the device plugin's rules; no GFD labels, no nvidia.com/gpu.
    let o = offline_check(
        std::slice::from_ref(&nodes),
        std::slice::from_ref(&profiles),
        &["-o", "json"],
    );
    assert_exit(&o, 1);
    assert_eq!(
        first_failure(node(&json(&o), "gpu-h200-01")),
        Some(("Driver".into(), "NoGfdLabels".into()))
    );
    // The kubectl List form of the slices: ready, judged from ResourceSlices.
    let slice: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(slice_fixture()).expect("fixture"))
            .expect("slice YAML");
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [slice]});
    let (_d3, slices) = temp_file("slices.json", list.to_string());
    let s = slices.to_str().expect("utf-8");
    let o = offline_check(
        std::slice::from_ref(&nodes),
        std::slice::from_ref(&profiles),
        &["-o", "json", "--resource-slices", s],
    );
    assert_exit(&o, 0);
    let report = json(&o);
    let layers = node(&report, "gpu-h200-01")["layers"]
        .as_array()
        .expect("layers")
        .clone();
    let dp = layers
        .iter()
        .find(|l| l["layer"] == "DevicePlugin")
        .expect("DevicePlugin");
    assert_eq!(dp["evidence"], "ResourceSlices", "{dp}");
    assert_eq!(dp["reason"], "DraDevicesAvailable", "{dp}");
    // The table shows the evidence column.
    let o = offline_check(
        std::slice::from_ref(&nodes),
        std::slice::from_ref(&profiles),
        &["--resource-slices", s],
    );
    assert_exit(&o, 0);
    assert!(stdout(&o).contains("EVIDENCE"), "{}", stdout(&o));
    assert!(stdout(&o).contains("ResourceSlices"), "{}", stdout(&o));

    // NFD sees two H200s, the DRA driver publishes one.
    let nf = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [{
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {"name": "gpu-h200-01", "namespace": "node-feature-discovery",
                     "labels": {"nfd.node.kubernetes.io/node-name": "gpu-h200-01"}},
        "spec": {"features": {"instances": {"pci.device": {"elements": [
            {"attributes": {"class": "0302", "vendor": "10de", "device": "2335"}},
            {"attributes": {"class": "0302", "vendor": "10de", "device": "2335"}}]}}}}
    }]});
    let (_d4, features) = temp_file("nf.json", nf.to_string());
    let f = features.to_str().expect("utf-8");
    let o = offline_check(
        std::slice::from_ref(&nodes),
        std::slice::from_ref(&profiles),
        &["-o", "json", "--resource-slices", s, "--node-features", f],
    );
    assert_exit(&o, 1);
    assert_eq!(
        first_failure(node(&json(&o), "gpu-h200-01")),
        Some(("DevicePlugin".into(), "GpuNotAdvertised".into()))
    );

    // A NodeFeature that names no node is bad input, with the field.
    let bad = nf
        .to_string()
        .replace("nfd.node.kubernetes.io/node-name", "other");
    let (_d5, badf) = temp_file("bad.json", &bad);
    let o = offline_check(
        &[nodes],
        &[profiles],
        &["--node-features", badf.to_str().expect("utf-8")],
    );
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("nfd.node.kubernetes.io/node-name"),
        "{}",
        stderr(&o)
    );
}

// ---- The Kubemoot GPU worker example ----

/// GPU workers carry the guide's `nvidia.com/gpu=present:NoSchedule`; gpuready's
/// taint goes beside it on a broken worker and the guide's is never touched.
#[test]
fn kubemoot_workers_get_gpureadys_taint_beside_the_guides() {
    let dir = "kubemoot-gpu-workers";
    let o = offline_check(
        &[example(dir, "nodes.json")],
        &[example(dir, "profiles.yaml")],
        &["-o", "json"],
    );
    assert_exit(&o, 1);
    let report = json(&o);
    let guide =
        serde_json::json!({"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"});
    let ours = serde_json::json!({"effect": "NoSchedule", "key": "readiness.k8s.io/gpuready-not-ready", "value": "true"});

    let ready = node(&report, "gpu-worker-1");
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["profile"], "kubemoot-gpu-workers");
    assert!(
        ready["changes"].get("taint").is_none(),
        "a ready worker keeps the guide's taint as it is: {}",
        ready["changes"]
    );
    for (name, reason) in [
        ("gpu-worker-2", "NoGfdLabels"),
        ("gpu-worker-3", "DevicesUnhealthy"),
    ] {
        let n = node(&report, name);
        assert_eq!(n["reason"], reason, "{name}");
        assert_eq!(
            n["changes"]["taint"]["taints"],
            serde_json::json!([guide, ours]),
            "{name}: the guide's taint first and unchanged, gpuready's beside it"
        );
    }
    let cpu = node(&report, "cpu-worker-1");
    assert_eq!(cpu["ready"], Value::Null, "no gpu-node label: ungoverned");
}

/// Like the API server, which lists every problem of an object, offline check
/// names every problem of a profile file, one `error:` line each, not only the
/// first.
#[test]
fn every_problem_of_a_profile_file_is_reported() {
    let second = PROFILE_HEAD.replace("name: p\n", "name: q\n");
    let (_d, profiles) = temp_file(
        "profiles.yaml",
        format!(
            "{PROFILE_HEAD}  gpu:\n    minComputeCapability: \"8\"\n    minMemoryMb: 8000\n  cudaVersion: \"13\"\n---\n{second}  minDriverVersion: \"580\"\n"
        ),
    );
    let o = offline_check(&[good_nodes()], &[profiles], &[]);
    assert_refused(
        &o,
        &[
            "document 1 (GpuNodeProfile p): spec.gpu.minComputeCapability",
            "document 1 (GpuNodeProfile p): spec.gpu.minMemoryMb: unknown field",
            "document 1 (GpuNodeProfile p): spec.cudaVersion",
            "document 2 (GpuNodeProfile q): spec.minDriverVersion",
        ],
    );
    let err = stderr(&o);
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error: ")).count(),
        4,
        "one line per problem:\n{err}"
    );
}

// ---- Probe reports offline (`--probe-report`) ----

/// The reports `gpuready probe --once` printed on the real H200 (2026-12-01),
/// judged offline for the Kubemoot example's H200 worker (same GPU, driver and
/// GFD labels): the passing compute check leaves it ready, the report taken
/// with /dev/nvidia-uvm hidden makes Health NotReady, DeviceNodeMissing.
#[test]
fn real_h200_probe_reports_judged_offline() {
    let fixture = |f: &str| {
        repo_root()
            .join("crates/gpuready-core/tests/fixtures/probe")
            .join(f)
    };
    let nodes = [example("kubemoot-gpu-workers", "nodes.json")];
    let profiles = [example("kubemoot-gpu-workers", "profiles.yaml")];
    let health = |file: &str| {
        let arg = format!("gpu-worker-1={}", fixture(file).display());
        let o = offline_check(
            &nodes,
            &profiles,
            &["--output", "json", "--probe-report", &arg],
        );
        let report = json(&o);
        let n = node(&report, "gpu-worker-1").clone();
        let h = n["layers"]
            .as_array()
            .expect("layers")
            .iter()
            .find(|l| l["layer"] == "Health")
            .cloned()
            .expect("Health judged with a report");
        (n["ready"].clone(), h)
    };
    let (ready, h) = health("h200-report-v2-compute.json");
    assert_eq!(ready, true, "{h}");
    assert_eq!(h["reason"], "ProbeHealthy");
    assert!(
        h["message"]
            .as_str()
            .is_some_and(|m| m.contains("CUDA compute check passed")),
        "{h}"
    );
    let (ready, h) = health("h200-report-v2-uvm-hidden.json");
    assert_eq!(ready, false, "{h}");
    assert_eq!(
        (h["status"].as_str(), h["reason"].as_str()),
        (Some("NotReady"), Some("DeviceNodeMissing"))
    );
    assert!(
        h["message"]
            .as_str()
            .is_some_and(|m| m.contains("CUDA_ERROR_UNKNOWN (999)")),
        "{h}"
    );
    // A --once report names no node: say how to give one.
    let o = offline_check(
        &nodes,
        &profiles,
        &[
            "--probe-report",
            &fixture("h200-report-v2-compute.json").display().to_string(),
        ],
    );
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("pass it as NODE=FILE"),
        "{}",
        stderr(&o)
    );
}

/// `--probe-reports` reads the report ConfigMaps as `kubectl get configmaps -o
/// yaml` prints them (a List) and as `gpuready run` selects them: by label,
/// for the node the name names. A bare `--probe-report` wins for its node; a
/// file of other objects is refused naming it.
#[test]
fn probe_report_configmaps_judged_offline_as_run_reads_them() {
    let report = |f: &str| {
        let path = repo_root()
            .join("crates/gpuready-core/tests/fixtures/probe")
            .join(f);
        let mut r: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
        r["node"] = json!("gpu-worker-1");
        r.to_string()
    };
    let cm = |node: &str, labelled: bool, text: &str| {
        let labels = if labelled {
            json!({ "gpuready.io/probe-report": "true" })
        } else {
            json!({})
        };
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": format!("gpuready-probe-{node}"), "namespace": "gpuready-system", "labels": labels },
            "data": { "report.json": text },
        })
    };
    let list = json!({ "apiVersion": "v1", "kind": "List", "items": [
        cm("gpu-worker-1", true, &report("h200-report-v2-uvm-hidden.json")),
        // Not labelled: the controller's watch never sees it, nor does check.
        cm("gpu-worker-2", false, "{not json"),
    ]});
    let (_d, cms) = temp_file(
        "reports.yaml",
        serde_yaml_ng::to_string(&list).expect("yaml"),
    );
    let nodes = [example("kubemoot-gpu-workers", "nodes.json")];
    let profiles = [example("kubemoot-gpu-workers", "profiles.yaml")];
    let health = |extra: &[&str]| {
        let mut args = vec![
            "--output",
            "json",
            "--probe-reports",
            cms.to_str().expect("path"),
        ];
        args.extend(extra);
        let report = json(&offline_check(&nodes, &profiles, &args));
        let of = |n: &str| {
            node(&report, n)["layers"]
                .as_array()
                .expect("layers")
                .iter()
                .find(|l| l["layer"] == "Health")
                .map(|l| l["reason"].as_str().unwrap_or_default().to_owned())
        };
        (of("gpu-worker-1"), of("gpu-worker-2"))
    };
    let (w1, w2) = health(&[]);
    assert_eq!(w1.as_deref(), Some("DeviceNodeMissing"));
    assert_ne!(
        w2.as_deref(),
        Some("ProbeReportInvalid"),
        "the unlabelled one was read"
    );
    let (_d2, bare) = temp_file("r.json", report("h200-report-v2-compute.json"));
    let arg = format!("gpu-worker-1={}", bare.display());
    let (w1, _) = health(&["--probe-report", &arg]);
    assert_eq!(w1.as_deref(), Some("ProbeHealthy"), "--probe-report wins");

    let o = offline_check(
        &nodes,
        &profiles,
        &["--probe-reports", nodes[0].to_str().expect("path")],
    );
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("nodes.json"), "{}", stderr(&o));
}

/// NVML's recovery actions 5 to 7 (and values this gpuready does not know) in
/// a probe report ConfigMap, judged offline for the Kubemoot example's H200
/// worker (no `fabric` in its profile): BUS_RESET and SYSTEM_REBOOT hold the
/// node with their own reasons, RECOVER_IMEX_DOMAIN is said in Health's
/// message and holds nothing, an unknown name fails safe.
#[test]
fn recovery_actions_of_newer_drivers_judged_offline() {
    let base: Value =
        serde_json::from_str(
            &std::fs::read_to_string(repo_root().join(
                "crates/gpuready-core/tests/fixtures/probe/h200-report-v2-recovery-action.json",
            ))
            .expect("fixture"),
        )
        .expect("json");
    let nodes = [example("kubemoot-gpu-workers", "nodes.json")];
    let profiles = [example("kubemoot-gpu-workers", "profiles.yaml")];
    // (recoveryAction as the probe writes it, ready, Health's reason, words).
    let rows = [
        ("BusReset", false, "BusResetRequired", "reset its PCIe bus"),
        (
            "SystemReboot",
            false,
            "SystemRebootRequired",
            "power-cycle the system",
        ),
        (
            "RecoverImexDomain",
            true,
            "ProbeHealthy",
            "RECOVER_IMEX_DOMAIN",
        ),
        ("Unknown", false, "RecoveryActionRequired", "nvidia-smi -q"),
        // A name of a probe newer than this controller.
        (
            "RecoverSomethingNewer",
            false,
            "RecoveryActionRequired",
            "nvidia-smi -q",
        ),
    ];
    for (action, ready, reason, words) in rows {
        let mut report = base.clone();
        report["node"] = json!("gpu-worker-1");
        report["gpus"][0]["recoveryAction"] = json!(action);
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "gpuready-probe-gpu-worker-1", "namespace": "gpuready-system",
                         "labels": {"gpuready.io/probe-report": "true"}},
            "data": {"report.json": report.to_string()},
        }]});
        let (_d, cms) = temp_file("reports.json", list.to_string());
        let cms = cms.to_str().expect("path");
        let o = offline_check(
            &nodes,
            &profiles,
            &["--output", "json", "--probe-reports", cms],
        );
        let r = json(&o);
        let n = node(&r, "gpu-worker-1");
        let h = n["layers"]
            .as_array()
            .expect("layers")
            .iter()
            .find(|l| l["layer"] == "Health")
            .expect("Health");
        assert_eq!(n["ready"], ready, "{action}: {h}");
        assert_eq!(h["reason"], reason, "{action}: {h}");
        assert!(
            h["message"].as_str().is_some_and(|m| m.contains(words)),
            "{action}: {h}"
        );
        // The table says the same.
        let o = offline_check(&nodes, &profiles, &["--probe-reports", cms]);
        let table = stdout(&o);
        let own = table
            .split("\n\n")
            .find(|b| b.starts_with("gpu-worker-1:"))
            .unwrap_or_else(|| panic!("{action}: gpu-worker-1 not in\n{table}"));
        if !ready {
            assert!(own.contains(reason), "{action}:\n{own}");
            assert!(own.contains(words), "{action}:\n{own}");
        }
    }
}

/// The recipe of docs/evidence.md on a cluster without DRA slices, NFD
/// NodeFeatures or probe reports: each `kubectl get … -o json` writes an empty
/// List, which is no objects, not bad input. The List as kubectl prints it in
/// JSON and YAML, and as the API lists it (`ResourceSliceList`), all read
/// alike. A file that holds no document (the command that wrote it failed), or
/// an empty list of another kind, is still refused, naming the file.
#[test]
fn empty_evidence_lists_are_no_objects() {
    let kubectl_json =
        json!({"apiVersion": "v1", "items": [], "kind": "List", "metadata": {"resourceVersion": ""}})
            .to_string();
    let kubectl_yaml =
        "apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: \"\"\n";
    let (_d1, slices) = temp_file("slices.json", &kubectl_json);
    let (_d2, features) = temp_file("nodefeatures.yaml", kubectl_yaml);
    let (_d3, reports) = temp_file("reports.json", &kubectl_json);
    let typed = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList",
                       "metadata": {"resourceVersion": "12"}, "items": []});
    let (_d4, typed) = temp_file("slicelist.json", typed.to_string());
    let path = |p: &PathBuf| p.to_str().expect("path").to_owned();
    let without = offline_check(&[good_nodes()], &[good_profiles()], &["-o", "json"]);
    assert_exit(&without, 0);
    for slices in [&slices, &typed] {
        let o = offline_check(
            &[good_nodes()],
            &[good_profiles()],
            &[
                "-o",
                "json",
                "--resource-slices",
                &path(slices),
                "--node-features",
                &path(&features),
                "--probe-reports",
                &path(&reports),
            ],
        );
        assert_exit(&o, 0);
        assert_eq!(
            json(&o)["nodes"].as_array().map(Vec::len),
            json(&without)["nodes"].as_array().map(Vec::len),
        );
    }
    // An empty list of nodes is no nodes: nothing to judge, nothing wrong.
    let (_d5, no_nodes) = temp_file("nodes.json", &kubectl_json);
    let o = offline_check(&[no_nodes], &[good_profiles()], &["-o", "json"]);
    assert_exit(&o, 0);
    assert_eq!(json(&o)["nodes"], json!([]));

    // What is still refused: a file with no document at all, an empty list
    // of another kind, a list of other objects.
    let (_d6, empty) = temp_file("slices.json", "");
    let o = offline_check(
        &[good_nodes()],
        &[good_profiles()],
        &["--resource-slices", &path(&empty)],
    );
    assert_refused(
        &o,
        &[
            "slices.json",
            "no ResourceSlice objects found",
            "holds no document",
        ],
    );
    let node_list = json!({"apiVersion": "v1", "kind": "NodeList", "items": []});
    let (_d7, wrong) = temp_file("slices.json", node_list.to_string());
    let o = offline_check(
        &[good_nodes()],
        &[good_profiles()],
        &["--resource-slices", &path(&wrong)],
    );
    assert_refused(
        &o,
        &[
            "slices.json",
            "document 1",
            "kind",
            "an empty list of kind NodeList: expected List or ResourceSliceList",
        ],
    );
    let o = offline_check(
        &[good_nodes()],
        &[good_profiles()],
        &["--node-features", &path(&good_nodes())],
    );
    assert_refused(&o, &["nodes.json", "expected NodeFeature"]);
}

/// `check --output json` lists one entry per DeviceTaintRule in the node's
/// `changes`, and the table says it in words.
#[test]
fn device_gating_shows_one_rule_per_bad_device_in_the_plan() {
    let (_d1, nodes) = temp_file("nodes.json", DRA_NODES);
    let profile = DRA_PROFILE.replace(
        "gpu: { products: [NVIDIA-H200], count: 1 }",
        "gpu: { products: [NVIDIA-H200], count: 8 }\n  deviceGating: { minReadyGpus: 6 }",
    );
    let (_d2, profiles) = temp_file("profiles.yaml", profile);
    let path = repo_root().join("crates/gpuready-core/tests/fixtures/evidence/dra-h200-8gpu.yaml");
    let mut slice: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("slice");
    for i in [2, 6] {
        slice["spec"]["devices"][i]["attributes"]["productName"] =
            serde_json::json!({"string": "NVIDIA H100 80GB HBM3"});
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [slice]});
    let (_d3, slices) = temp_file("slices.json", list.to_string());
    let s = slices.to_str().expect("utf-8");
    let o = offline_check(
        std::slice::from_ref(&nodes),
        std::slice::from_ref(&profiles),
        &["-o", "json", "--resource-slices", s],
    );
    assert_exit(&o, 0);
    let report = json(&o);
    let rules = node(&report, "gpu-h200-01")["changes"]["deviceTaintRules"]
        .as_array()
        .expect("deviceTaintRules")
        .clone();
    let entries: Vec<(String, String, String)> = rules
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap_or_default().to_owned(),
                r["device"].as_str().unwrap_or_default().to_owned(),
                r["rule"]["spec"]["taint"]["value"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("create".into(), "gpu-2".into(), "ProductMismatch".into()),
            ("create".into(), "gpu-6".into(), "ProductMismatch".into()),
        ]
    );
    assert_eq!(rules[0]["name"], "gpuready-gpu-h200-01-gpu-2");
    assert_eq!(
        rules[0]["rule"]["spec"]["deviceSelector"],
        serde_json::json!({"driver": "gpu.nvidia.com", "pool": "gpu-h200-01", "device": "gpu-2"})
    );
    let o = offline_check(
        std::slice::from_ref(&nodes),
        std::slice::from_ref(&profiles),
        &["--resource-slices", s],
    );
    assert!(
        stdout(&o).contains("create DeviceTaintRule gpuready-gpu-h200-01-gpu-2 (ProductMismatch:NoSchedule) for device gpu-2"),
        "{}",
        stdout(&o)
    );
}

/// Kubernetes' device-taint hazards offline (issue 48): with the cluster's
/// DeviceTaintRules (`--device-taint-rules`) and ResourceClaims
/// (`--resource-claims`), `check` names the pods an escalated `NoExecute`
/// device taint leaves running because they hold the GPU as a DRA extended
/// resource (kubernetes #141290), and every `NoExecute` rule of anyone's whose
/// selector names no pool (kubernetes #141422). Reported only: the node is
/// ready (7 of 8 GPUs serve) and the exit code stays 0.
#[test]
fn device_taint_hazards_are_reported_offline() {
    let (_d1, nodes) = temp_file("nodes.json", DRA_NODES);
    let profile = DRA_PROFILE.replace(
        "gpu: { products: [NVIDIA-H200], count: 1 }",
        "gpu: { products: [NVIDIA-H200], count: 8 }\n  deviceGating: { minReadyGpus: 7 }\n  escalation: { reasons: [ProductMismatch], dryRunSeconds: 60 }",
    );
    let (_d2, profiles) = temp_file("profiles.yaml", profile);
    let path = repo_root().join("crates/gpuready-core/tests/fixtures/evidence/dra-h200-8gpu.yaml");
    let mut slice: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("slice");
    slice["spec"]["devices"][2]["attributes"]["productName"] =
        json!({"string": "NVIDIA H100 80GB HBM3"});
    let (_d3, slices) = temp_file(
        "slices.json",
        json!({"apiVersion": "v1", "kind": "List", "items": [slice]}).to_string(),
    );
    // gpuready's two rules for gpu-2 as the controller wrote them (the
    // escalation's dry run long over), and three of an admin's.
    let ours = |name: &str, effect: &str| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"gpuready.io/device-taint-rule": "true", "gpuready.io/profile": "h200"},
                "annotations": {"gpuready.io/node": "gpu-h200-01", "gpuready.io/reason": "ProductMismatch"}},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "gpu-h200-01", "device": "gpu-2"},
                "taint": {"key": "gpuready.io/device-not-ready", "value": "ProductMismatch", "effect": effect}}})
    };
    let admins = |name: &str, selector: Value| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": {"key": "example.com/drain", "effect": "NoExecute"}}})
    };
    let rules = json!({"apiVersion": "v1", "kind": "List", "items": [
        ours("gpuready-gpu-h200-01-gpu-2", "NoSchedule"),
        ours("gpuready-gpu-h200-01-gpu-2-noexecute", "NoExecute"),
        admins("drain-everything", json!({})),
        admins("drain-nvidia", json!({"driver": "gpu.nvidia.com"})),
        admins("drain-one-node", json!({"driver": "gpu.nvidia.com", "pool": "gpu-h200-02"})),
    ]});
    let (_d4, rules) = temp_file("rules.json", rules.to_string());
    // The scheduler's claim for trainer-0's `nvidia.com/gpu: 1`, and a pod's own claim.
    let claim = |name: &str, pod: &str, extended: bool| {
        let annotations = if extended {
            json!({"resource.kubernetes.io/extended-resource-claim": "true"})
        } else {
            json!({})
        };
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml", "annotations": annotations,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod}]},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": "gpu.nvidia.com", "pool": "gpu-h200-01", "device": "gpu-2"}]}},
                "reservedFor": [{"resource": "pods", "name": pod, "uid": pod}]}})
    };
    let claims = json!({"apiVersion": "v1", "kind": "List", "items": [
        claim("trainer-0-extended-resources-x7k2p", "trainer-0", true),
        claim("notebook-gpu", "notebook", false),
    ]});
    let (_d5, claims) = temp_file("claims.json", claims.to_string());
    let args = [
        "--resource-slices",
        slices.to_str().expect("utf-8"),
        "--device-taint-rules",
        rules.to_str().expect("utf-8"),
        "--resource-claims",
        claims.to_str().expect("utf-8"),
    ];
    let mut with_json = vec!["-o", "json"];
    with_json.extend(args);
    let o = offline_check(
        std::slice::from_ref(&nodes),
        std::slice::from_ref(&profiles),
        &with_json,
    );
    assert_exit(&o, 0);
    let report = json(&o);
    let n = node(&report, "gpu-h200-01");
    let words = "1 pod(s) hold gpu-2 as a DRA extended resource and are not evicted by Kubernetes (kubernetes #141290): ml/trainer-0";
    assert_eq!(n["notEvicted"], json!([words]), "{n:#}");
    assert_eq!(n["notEvictedPods"], 1);
    assert_eq!(n["escalations"][0]["effect"], "NoExecute");
    assert_eq!(n["escalations"][0]["notEvicted"], words);
    // gpuready's rules from the file are already as wanted; the escalation
    // rule's status does not carry gpuready's condition yet: one status write.
    let changes: Vec<(&str, &str, &str)> = n["changes"]["deviceTaintRules"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["action"].as_str().unwrap_or_default(),
                c["name"].as_str().unwrap_or_default(),
                c["condition"]["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [("status", "gpuready-gpu-h200-01-gpu-2-noexecute", "True")],
        "{n:#}"
    );
    assert_eq!(
        n["changes"]["deviceTaintRules"][0]["condition"]["message"],
        words
    );
    let wide: Vec<(&str, &str)> = report["clusterWideDeviceTaintRules"]
        .as_array()
        .expect("clusterWideDeviceTaintRules")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default(),
                r["reach"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        wide,
        [
            ("drain-everything", "everyDevice"),
            ("drain-nvidia", "everyDeviceOfDriver")
        ]
    );
    // The table says the same in words.
    let o = offline_check(
        std::slice::from_ref(&nodes),
        std::slice::from_ref(&profiles),
        &args,
    );
    assert_exit(&o, 0);
    let table = stdout(&o);
    for line in [
        format!("  not evicted: {words}"),
        format!("set GpuReadyPodsNotEvicted=True (ExtendedResourcePodsNotEvicted) on DeviceTaintRule gpuready-gpu-h200-01-gpu-2-noexecute: {words}"),
        "2 DeviceTaintRule(s) evict across the cluster (reported only; gpuready changes no one else's rule):".to_owned(),
        "  DeviceTaintRule drain-everything taints every device of every driver (an empty deviceSelector) with example.com/drain:NoExecute: Kubernetes evicts every pod using those devices, in every namespace and at every priority, until the rule goes (kubernetes #141422)".to_owned(),
    ] {
        assert!(table.contains(&line), "missing {line:?} in:\n{table}");
    }
}

/// Issue 32: the offline check writes its report as it judges (each node's
/// part spilled, one small row per node kept). The report must be byte for
/// byte the one the library renders from the whole `CheckReport`: every
/// example, every output, the nodes given out of name order (the rows are
/// sorted), and a file with a node refused its taint beside an ungoverned one.
#[test]
fn the_streamed_report_is_the_whole_report_byte_for_byte() {
    let mut cases: Vec<(String, Vec<PathBuf>, Vec<PathBuf>)> = Vec::new();
    for d in gpuready_examples() {
        cases.push((
            d.clone(),
            vec![example(&d, "nodes.json")],
            vec![example(&d, "profiles.yaml")],
        ));
    }
    // Every example at once, the last first: out of name order.
    let mut nodes: Vec<PathBuf> = EXAMPLES.iter().map(|d| example(d, "nodes.json")).collect();
    nodes.reverse();
    cases.push((
        "all, reversed".into(),
        nodes,
        EXAMPLES
            .iter()
            .map(|d| example(d, "profiles.yaml"))
            .collect(),
    ));
    // A node whose GpuReady condition says its taint was refused.
    let refused = json!({ "apiVersion": "v1", "kind": "List", "items": [
        { "apiVersion": "v1", "kind": "Node", "metadata": { "name": "z-refused", "labels": { "pool": "a" } },
          "status": { "conditions": [{ "type": "GpuReady", "status": "False", "reason": "GpuMissing",
            "message": format!("no GPU; {}: (add readiness.k8s.io/gpuready-not-ready:NoSchedule) Forbidden", gpuready_api::keys::TAINT_REFUSED),
            "lastTransitionTime": "2026-12-01T00:00:00Z", "lastHeartbeatTime": "2026-12-01T00:00:00Z" }] } },
        { "apiVersion": "v1", "kind": "Node", "metadata": { "name": "a-plain" } },
    ]});
    let (_d1, refused_nodes) = temp_file("refused.json", refused.to_string());
    let (_d2, pool_a) = temp_file(
        "pool-a.yaml",
        "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata:\n  name: pool-a\nspec:\n  nodeSelector:\n    matchLabels: {pool: a}\n",
    );
    cases.push(("a refused taint".into(), vec![refused_nodes], vec![pool_a]));
    for (what, nodes, profiles) in &cases {
        for output in ["table", "json", "yaml"] {
            let o = offline_check(nodes, profiles, &["--output", output]);
            let mut flags: Vec<String> = vec!["--nodes".into()];
            flags.extend(nodes.iter().map(|p| p.display().to_string()));
            flags.push("--profiles".into());
            flags.extend(profiles.iter().map(|p| p.display().to_string()));
            flags.extend([
                "--output".into(),
                output.into(),
                "--now".into(),
                DUMPED_AT.into(),
            ]);
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            let args = check_args(&flags);
            let report = gpuready::check::check_files(&args).expect("the library's report");
            let mut whole = Vec::new();
            gpuready::check::render_to(&report, args.output, &mut whole).expect("render");
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&whole),
                "{what}, {output}: the streamed report differs"
            );
            assert_eq!(
                o.status.code(),
                Some(i32::from(report.exit_code())),
                "{what}, {output}: exit code"
            );
        }
    }
}

fn gpuready_examples() -> Vec<String> {
    examples()
        .into_iter()
        .map(|p| p.rsplit('/').next().unwrap_or_default().to_owned())
        .collect()
}
