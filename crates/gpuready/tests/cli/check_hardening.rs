//! `gpuready check` against hostile or odd input: a multi-byte character where
//! a PCI class is parsed, deeply nested YAML flow, invalid UTF-8, UTF-16 and
//! byte-order marks, merge keys, non-finite numbers, names and fields the API
//! server would refuse, two profiles of one name, missing API versions, control
//! characters in node names. `check` reads files a user did not write (dumps,
//! other teams' profiles), so it must answer every one: exit 2 with a message
//! naming the file, the document and the field, or a verdict; never a panic
//! (exit 101), never a hang.

use crate::support;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use support::*;

/// `gpuready check` over one nodes file and one profiles file.
fn check(nodes: &Path, profiles: &Path, extra: &[&str]) -> Output {
    offline_check(&[nodes.to_owned()], &[profiles.to_owned()], extra)
}

#[track_caller]
fn assert_judged(o: &Output) {
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
}

const PROFILE: &str = "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    matchLabels: {gpu-pool: talos-rtx3050}\n";

fn profile_with(spec_lines: &str) -> String {
    format!("{PROFILE}{spec_lines}")
}

fn node_json(name: &str, labels: serde_json::Value) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "List", "items": [{
            "apiVersion": "v1", "kind": "Node",
            "metadata": { "name": name, "labels": labels },
            "status": { "conditions": [{ "type": "Ready", "status": "True" }] },
        }]
    })
    .to_string()
}

#[test]
fn multibyte_character_after_pci_prefix_does_not_panic() {
    let (_d, nodes) = temp_file(
        "nodes.json",
        node_json(
            "n",
            serde_json::json!({
                "gpu-pool": "talos-rtx3050",
                "feature.node.kubernetes.io/pci-aé1_10de.present": "true",
            }),
        )
        .as_bytes(),
    );
    assert_judged(&check(&nodes, &good_profiles(), &[]));
}

#[test]
fn deep_flow_nesting_fails_fast_with_a_clear_message() {
    for (name, text) in [
        ("nodes.yaml", format!("a: {}", "[".repeat(160_000))),
        ("nodes.yaml", format!("a: {}", "{a: ".repeat(40_000))),
    ] {
        let (_d, nodes) = temp_file(name, text.as_bytes());
        let started = Instant::now();
        let o = check(&nodes, &good_profiles(), &[]);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
        assert_refused(&o, &["nodes.yaml", "document 1", "nested deeper than 256"]);
    }
}

/// Issue 24: 19 MB of shallow flow lists took 52 s and 4.87 GB as YAML (the
/// parser held every event of a document first). Items are streamed now:
/// each is refused as it ends, and reading stops after 100 problems.
#[test]
fn dense_flow_collections_fail_fast() {
    let text = format!("items:\n{}", "- [[[[]]]]\n".repeat(400_000));
    let (_d, nodes) = temp_file("nodes.yaml", text.as_bytes());
    let started = Instant::now();
    let o = check(&nodes, &good_profiles(), &[]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_refused(
        &o,
        &[
            "nodes.yaml",
            "items[0]",
            "stopped reading after 100 problems",
        ],
    );
}

/// Issue 24: a valid dump whose annotation holds 300 `[` was refused as YAML
/// while its JSON form was read. Brackets inside a quoted scalar are text.
#[test]
fn brackets_inside_a_quoted_annotation_are_not_nesting() {
    let brackets = "[".repeat(300);
    let yaml = format!(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n    annotations:\n      example.com/note: '{brackets}'\n      example.com/other: \"{brackets}\"\n    labels:\n      gpu-pool: talos-rtx3050\n  status:\n    conditions:\n    - type: Ready\n      status: \"True\"\n"
    );
    let (_y, as_yaml) = temp_file("nodes.yaml", yaml.as_bytes());
    assert_judged(&check(&as_yaml, &good_profiles(), &[]));
}

/// Issue 24: kubectl reads YAML 1.1, where a plain `n`, `yes`, `on` is a
/// boolean: the server refuses such a name or label value, so `check` does
/// too, saying why; quoted, they are text.
#[test]
fn yaml_1_1_booleans_are_read_as_kubectl_reads_them() {
    let node = |name: &str, pool: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    gpu-pool: {pool}\nstatus:\n  conditions:\n  - type: Ready\n    status: \"True\"\n"
        )
    };
    let (_a, plain_name) = temp_file("nodes.yaml", node("n", "talos-rtx3050").as_bytes());
    assert_refused(
        &check(&plain_name, &good_profiles(), &[]),
        &[
            "metadata.name",
            "expected a string, found false",
            "YAML 1.1",
        ],
    );
    let (_b, plain_label) = temp_file("nodes.yaml", node("n1", "yes").as_bytes());
    assert_refused(
        &check(&plain_label, &good_profiles(), &[]),
        &["metadata.labels", "boolean", "quote it"],
    );
    let (_c, quoted) = temp_file("nodes.yaml", node("'n'", "'yes'").as_bytes());
    let o = check(&quoted, &good_profiles(), &[]);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Issue 24: YAML is bounded per object, not only per file: an item longer
/// than the API server would ever return is refused as soon as it passes the
/// bound, before it is built.
#[test]
fn a_yaml_object_over_3_mib_is_refused() {
    let text = format!(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: a\n    annotations:\n      x: [{}1]\n",
        "1, ".repeat(1_100_000)
    );
    let (_d, nodes) = temp_file("nodes.yaml", text.as_bytes());
    assert_refused(
        &check(&nodes, &good_profiles(), &[]),
        &[
            "nodes.yaml",
            "items[0] longer than 3145728 characters",
            "line 9",
        ],
    );
}

#[test]
fn invalid_utf8_names_the_byte_offset() {
    let mut bytes = b"apiVersion: v1\nkind: Node\nmetadata:\n  name: x".to_vec();
    bytes.extend([0xC3, 0x28]);
    let (_d, nodes) = temp_file("nodes.yaml", &bytes);
    assert_refused(
        &check(&nodes, &good_profiles(), &[]),
        &["nodes.yaml", "not valid UTF-8 at byte 45 (line 4)"],
    );
}

#[test]
fn utf16_and_utf8_bom_files_are_read_like_kubectl() {
    let text = std::fs::read_to_string(good_profiles()).expect("example");
    let mut le = vec![0xFF, 0xFE];
    le.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    let mut be = vec![0xFE, 0xFF];
    be.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
    let mut bom8 = vec![0xEF, 0xBB, 0xBF];
    bom8.extend(text.as_bytes());
    for bytes in [le, be, bom8] {
        let (_d, profiles) = temp_file("profiles.yaml", &bytes);
        assert_judged(&check(&good_nodes(), &profiles, &[]));
    }
}

#[test]
fn a_yaml_stream_may_start_with_a_json_document() {
    let nodes = std::fs::read_to_string(good_nodes()).expect("example");
    let one_line: serde_json::Value = serde_json::from_str(&nodes).expect("json");
    let text = format!("{one_line}\n---\n{one_line}\n");
    let (_d, path) = temp_file("nodes.yaml", text.as_bytes());
    assert_judged(&check(&path, &good_profiles(), &[]));
}

#[test]
fn yaml_merge_keys_are_applied() {
    let text = "base: &base\n  matchLabels: {gpu-pool: talos-rtx3050}\n---\napiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata: {name: p}\nspec:\n  nodeSelector:\n    <<: {matchLabels: {gpu-pool: talos-rtx3050}}\n  gpu:\n    count: 1\n";
    // The first document is no profile: only the second is used.
    let text = text.split_once("---\n").map(|(_, p)| p).unwrap_or(text);
    let (_d, profiles) = temp_file("profiles.yaml", text.as_bytes());
    let o = check(&good_nodes(), &profiles, &["-o", "json"]);
    assert_judged(&o);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(
        report["summary"]["governed"], 1,
        "the merged selector governs the node: {report}"
    );
}

#[test]
fn non_finite_numbers_are_refused_not_dropped() {
    for (lines, field) in [
        ("  gpu:\n    minMemoryMib: .nan\n", "spec.gpu.minMemoryMib"),
        ("  gpu:\n    count: .inf\n", "spec.gpu.count"),
        ("  maxLabelAgeSeconds: -.inf\n", "spec.maxLabelAgeSeconds"),
    ] {
        let (_d, profiles) = temp_file("profiles.yaml", profile_with(lines).as_bytes());
        assert_refused(
            &check(&good_nodes(), &profiles, &[]),
            &["profiles.yaml", "document 1", field, "not a number JSON"],
        );
    }
}

#[test]
fn profile_names_follow_the_api_server_rules() {
    for name in ["UPPER", "a/b", "'a b'", "été", "'\"\"'", "a_b", "-a"] {
        let text = PROFILE.replace("name: p", &format!("name: {name}"));
        let (_d, profiles) = temp_file("profiles.yaml", text.as_bytes());
        let o = check(&good_nodes(), &profiles, &[]);
        assert_refused(&o, &["profiles.yaml", "metadata.name"]);
    }
}

#[test]
fn unknown_fields_are_refused_even_when_empty() {
    for (lines, field) in [
        ("  gpu:\n    prodcts: []\n", "spec.gpu.prodcts"),
        ("  extra: {}\n", "spec.extra"),
        ("  taint:\n    keys: null\n", "spec.taint.keys"),
    ] {
        let (_d, profiles) = temp_file("profiles.yaml", profile_with(lines).as_bytes());
        assert_refused(
            &check(&good_nodes(), &profiles, &[]),
            &["profiles.yaml", field, "unknown field"],
        );
    }
}

#[test]
fn two_profiles_of_one_name_are_refused() {
    let text = format!("{PROFILE}---\n{PROFILE}");
    let (_d, profiles) = temp_file("profiles.yaml", text.as_bytes());
    assert_refused(
        &check(&good_nodes(), &profiles, &[]),
        &[
            "profiles.yaml",
            "document 2",
            "metadata.name",
            "document 1",
            "one object per name",
        ],
    );
}

#[test]
fn missing_and_wrong_api_versions_name_the_field() {
    let (_d, profiles) = temp_file(
        "profiles.yaml",
        PROFILE
            .replace("apiVersion: gpuready.io/v1alpha1\n", "")
            .as_bytes(),
    );
    assert_refused(
        &check(&good_nodes(), &profiles, &[]),
        &[
            "profiles.yaml",
            "apiVersion: required",
            "gpuready.io/v1alpha1",
        ],
    );
    let nodes = std::fs::read_to_string(good_nodes())
        .expect("example")
        .replace(
            "\"apiVersion\": \"v1\",\n      \"kind\": \"Node\"",
            "\"apiVersion\": \"v2\",\n      \"kind\": \"Node\"",
        );
    let mut v: serde_json::Value = serde_json::from_str(&nodes).expect("json");
    v["items"][0]["apiVersion"] = "v2".into();
    let (_d2, nodes) = temp_file("nodes.json", v.to_string().as_bytes());
    assert_refused(
        &check(&nodes, &good_profiles(), &[]),
        &[
            "nodes.json",
            "items[0]",
            "apiVersion: expected v1",
            "\"v2\"",
        ],
    );
}

#[test]
fn control_characters_in_node_names_are_escaped_in_the_table() {
    let (_d, nodes) = temp_file(
        "nodes.json",
        node_json(
            "evil\nfake-node  talos-rtx3050  yes  Ready\u{1b}[2J",
            serde_json::json!({ "gpu-pool": "talos-rtx3050" }),
        )
        .as_bytes(),
    );
    let o = check(&nodes, &good_profiles(), &[]);
    assert_judged(&o);
    let out = stdout(&o);
    assert!(
        !out.lines().any(|l| l.starts_with("fake-node")),
        "a forged row:\n{out}"
    );
    assert!(!out.contains('\u{1b}'), "a raw escape:\n{out}");
    assert!(out.contains("evil\\nfake-node"), "{out}");
}

#[test]
fn admission_rules_apply_offline() {
    for (lines, field, fragment) in [
        (
            "  gpu:\n    products: [\"NVIDIA-[RTX\"]\n",
            "spec.gpu.products",
            "not a valid pattern",
        ),
        (
            "  gpu:\n    products: [\"NVIDIA-**\"]\n",
            "spec.gpu.products",
            "not a valid pattern",
        ),
        (
            "  minDriverVersion: \"99999999999.1\"\n",
            "spec.minDriverVersion",
            "9 digits",
        ),
        (
            "  resources: {nvidia.com/gpu: 4294967296}\n",
            "spec.resources",
            "",
        ),
        (
            "  readyLabels: {kubernetes.io/hostname: x}\n",
            "spec.readyLabels",
            "other systems own",
        ),
        (
            "  readyLabels: {gpu-pool: x}\n",
            "spec.readyLabels",
            "nodeSelector",
        ),
        (
            "  taint: {key: nvidia.com/gpu}\n",
            "spec.taint.key",
            "other systems own",
        ),
    ] {
        let (_d, profiles) = temp_file("profiles.yaml", profile_with(lines).as_bytes());
        assert_refused(&check(&good_nodes(), &profiles, &[]), &[field, fragment]);
    }
    let selector = "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    matchExpressions:\n      - {key: gpu-pool, operator: In}\n";
    let (_d, profiles) = temp_file("profiles.yaml", selector.as_bytes());
    assert_refused(
        &check(&good_nodes(), &profiles, &[]),
        &[
            "spec.nodeSelector.matchExpressions[0].values",
            "needs at least one value",
        ],
    );
    for key in [
        "readiness.k8s.io/gpu",
        "startup-taint.cluster-autoscaler.kubernetes.io/gpu",
        "ignore-taint.cluster-autoscaler.kubernetes.io/gpu",
    ] {
        let (_d, profiles) = temp_file(
            "profiles.yaml",
            profile_with(&format!("  taint: {{key: {key}}}\n")).as_bytes(),
        );
        assert_judged(&check(&good_nodes(), &profiles, &[]));
    }
}
