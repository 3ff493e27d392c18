//! One set of profile rules, offline and at admission: a profile file that
//! `gpuready check` accepts must be one the API server accepts, and the other
//! way round, or a user's dry run would lie. Every file of a corpus — hand-made
//! edge cases (non-finite numbers, names the API server refuses, unknown fields
//! with empty values, two objects of one name, a YAML stream starting with `{`,
//! merge keys, bad selectors, globs, reserved keys, numbers past what the engine
//! holds, YAML 1.1 scalars as kubectl reads them: `yes`, `On`, `n`, `0777`,
//! `0x2000`, `8_192`, merge order) and random mutations of the shipped example profiles with a fixed
//! seed — is refused by `gpuready check` exactly when `kubectl create -f` (field
//! validation Strict, what kubectl sends) is refused by a real API server. For a
//! sample of accepted mutated profiles, the live `gpuready check` gives the same
//! verdicts as the offline one over a dump of the same nodes.
//!
//! `GPUREADY_FUZZ_CASES` (default 40) sets how many mutations are tried.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::*;

use support::rng::Rng;

const HEAD: &str = "apiVersion: gpuready.io/v1alpha1\nkind: GpuNodeProfile\n";

fn with_name(name: &str, spec: &str) -> String {
    format!(
        "{HEAD}metadata:\n  name: {name}\nspec:\n  nodeSelector:\n    matchLabels: {{pool: a}}\n{spec}"
    )
}

/// Hand-made cases: (what, file bytes).
fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let mut add = |what: &str, text: String| out.push((what.to_owned(), text.into_bytes()));
    add("minimal", with_name("d-minimal", ""));
    add(
        "nan memory",
        with_name("d-nan", "  gpu:\n    minMemoryMib: .nan\n"),
    );
    add("inf count", with_name("d-inf", "  gpu:\n    count: .inf\n"));
    for (i, name) in [
        "UPPER", "a/b", "'a b'", "été", "'\"\"'", "a_b", "-a", "a.b-c",
    ]
    .iter()
    .enumerate()
    {
        add(
            &format!("name {name}"),
            with_name(name, "").replace("d-", &format!("d{i}-")),
        );
    }
    add(
        "unknown empty list",
        with_name("d-unknown1", "  gpu:\n    prodcts: []\n"),
    );
    add(
        "unknown empty map",
        with_name("d-unknown2", "  extra: {}\n"),
    );
    add("unknown null", with_name("d-unknown3", "  extra: null\n"));
    add(
        "two objects of one name",
        format!(
            "{}---\n{}",
            with_name("d-twice", ""),
            with_name("d-twice", "")
        ),
    );
    add(
        "YAML stream starting with {",
        format!(
            "{{\"apiVersion\": \"gpuready.io/v1alpha1\", \"kind\": \"GpuNodeProfile\", \"metadata\": {{\"name\": \"d-json1\"}}, \"spec\": {{\"nodeSelector\": {{}}}}}}\n---\n{}",
            with_name("d-json2", "")
        ),
    );
    add(
        "merge key",
        format!(
            "{HEAD}metadata:\n  name: d-merge\nspec:\n  nodeSelector:\n    <<: {{matchLabels: {{pool: a}}}}\n"
        ),
    );
    add(
        "In without values",
        format!(
            "{HEAD}metadata:\n  name: d-sel1\nspec:\n  nodeSelector:\n    matchExpressions: [{{key: pool, operator: In}}]\n"
        ),
    );
    add(
        "operator Foo",
        format!(
            "{HEAD}metadata:\n  name: d-sel2\nspec:\n  nodeSelector:\n    matchExpressions: [{{key: pool, operator: Foo, values: [a]}}]\n"
        ),
    );
    add(
        "bad selector key",
        format!(
            "{HEAD}metadata:\n  name: d-sel3\nspec:\n  nodeSelector:\n    matchLabels: {{\"-x\": a}}\n"
        ),
    );
    add(
        "glob [RTX",
        with_name("d-glob1", "  gpu:\n    products: [\"[RTX\"]\n"),
    );
    add(
        "glob **",
        with_name("d-glob2", "  gpu:\n    products: [\"NVIDIA-**\"]\n"),
    );
    // Issue 32: admitted by both sides before.
    for (what, name, products) in [
        ("glob [z-a]", "d-glob3", "[\"[z-a]\"]"),
        ("glob [9-0] inside", "d-glob4", "[\"RTX-30[9-0]0\"]"),
        ("glob [A-z] ascending", "d-glob5", "[\"RTX-[A-z]\"]"),
        ("glob [a-b-a]", "d-glob6", "[\"RTX-[a-b-a]\"]"),
    ] {
        add(
            what,
            with_name(name, &format!("  gpu:\n    products: {products}\n")),
        );
    }
    add(
        "families twice",
        with_name("d-fam2", "  gpu:\n    families: [ampere, ampere]\n"),
    );
    add(
        "excludedFamilies twice",
        with_name(
            "d-fam3",
            "  gpu:\n    excludedFamilies: [maxwell, hopper, maxwell]\n",
        ),
    );
    add(
        "glob class",
        with_name(
            "d-glob3",
            "  gpu:\n    products: [\"NVIDIA-RTX-[34]0[0-9]0\"]\n",
        ),
    );
    add(
        "driver past u32",
        with_name("d-drv", "  minDriverVersion: \"99999999999.1\"\n"),
    );
    add(
        "resources past u32",
        with_name("d-res", "  resources: {nvidia.com/gpu: 4294967296}\n"),
    );
    add(
        "resources at u32",
        with_name("d-res2", "  resources: {nvidia.com/gpu: 4294967295}\n"),
    );
    add(
        "ready label kubernetes.io",
        with_name("d-rl1", "  readyLabels: {kubernetes.io/hostname: x}\n"),
    );
    add(
        "ready label selector key",
        with_name("d-rl2", "  readyLabels: {pool: x}\n"),
    );
    add(
        "ready label own domain",
        with_name("d-rl3", "  readyLabels: {example.com/pool: x}\n"),
    );
    add(
        "taint nvidia.com/gpu",
        with_name("d-t1", "  taint: {key: nvidia.com/gpu}\n"),
    );
    add(
        "taint karpenter.sh",
        with_name("d-t2", "  taint: {key: karpenter.sh/x}\n"),
    );
    add(
        "taint readiness.k8s.io",
        with_name("d-t3", "  taint: {key: readiness.k8s.io/gpu}\n"),
    );
    add(
        "taint startup-taint",
        with_name(
            "d-t4",
            "  taint: {key: startup-taint.cluster-autoscaler.kubernetes.io/gpu}\n",
        ),
    );
    add(
        "taint subdomain of readiness",
        with_name("d-t5", "  taint: {key: a.readiness.k8s.io/gpu}\n"),
    );
    // Issue 24: where offline and the server disagreed, and what both admitted
    // though it means nothing.
    let prefix = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61)
    );
    add(
        "taint key of 317 bytes",
        with_name(
            "d-t6",
            &format!("  taint: {{key: {prefix}/{}}}\n", "n".repeat(63)),
        ),
    );
    add(
        "taint key with a 254-byte prefix",
        with_name("d-t7", &format!("  taint: {{key: {prefix}x/n}}\n")),
    );
    add(
        "integral float 1000.0",
        with_name("d-f1", "  gpu:\n    minMemoryMib: 1000.0\n"),
    );
    add(
        "integral float 1.5e7",
        with_name("d-f2", "  gpu:\n    minMemoryMib: 1.5e7\n"),
    );
    add(
        "fractional float 1000.5",
        with_name("d-f3", "  gpu:\n    minMemoryMib: 1000.5\n"),
    );
    add(
        "JSON integral float",
        "{\"apiVersion\": \"gpuready.io/v1alpha1\", \"kind\": \"GpuNodeProfile\", \"metadata\": {\"name\": \"d-f4\"}, \"spec\": {\"nodeSelector\": {}, \"gpu\": {\"count\": 2.0}}}".to_owned(),
    );
    // kubectl sends the last of duplicate JSON fields, as serde_json keeps it.
    add(
        "JSON duplicate field",
        "{\"apiVersion\": \"gpuready.io/v1alpha1\", \"kind\": \"GpuNodeProfile\", \"metadata\": {\"name\": \"d-dup1\"}, \"spec\": {\"nodeSelector\": {}, \"mode\": \"Enforce\", \"mode\": \"Observe\"}}".to_owned(),
    );
    // kubectl keeps the last of duplicate YAML keys too (offline refused them).
    add(
        "YAML duplicate field",
        with_name("d-dup3", "  mode: Enforce\n  mode: Observe\n"),
    );
    add(
        "YAML duplicate field, the last one bad",
        with_name("d-dup4", "  mode: Enforce\n  mode: Sometimes\n"),
    );
    add(
        "JSON duplicate top-level field",
        "{\"apiVersion\": \"gpuready.io/v1alpha1\", \"kind\": \"GpuNodeProfile\", \"metadata\": {\"name\": \"d-dup2\"}, \"spec\": {\"nodeSelector\": {}, \"mode\": \"Bad\"}, \"spec\": {\"nodeSelector\": {}}}".to_owned(),
    );
    // Issue 24: kubectl reads YAML 1.1 (sigs.k8s.io/yaml over go-yaml v2), so
    // these plain scalars are booleans or numbers on the server's side, and
    // offline read them as YAML 1.2 strings or other numbers.
    for (i, spec) in [
        "  perLayerNodeConditions: yes\n",
        "  perLayerNodeConditions: On\n",
        "  perLayerNodeConditions: n\n",
        "  perLayerNodeConditions: OFF\n",
        "  perLayerNodeConditions: yEs\n",
        "  perLayerNodeConditions: 'yes'\n",
        "  perLayerNodeConditions: !!bool true\n",
        "  readyLabels: {example.com/ready: yes}\n",
        "  readyLabels: {example.com/ready: 'yes'}\n",
        "  readyLabels: {example.com/ready: y}\n",
        "  readyLabels: {example.com/ready: Y}\n",
        "  readyLabels: {example.com/ready: on}\n",
        "  readyLabels: {example.com/ready: ~}\n",
        "  readyLabels: {example.com/ready: 0777}\n",
        "  readyLabels: {example.com/ready: !!str 0777}\n",
        "  gpu:\n    minMemoryMib: 0x2000\n",
        "  gpu:\n    minMemoryMib: 020000\n",
        "  gpu:\n    minMemoryMib: 0o20000\n",
        "  gpu:\n    minMemoryMib: 8_192\n",
        "  gpu:\n    minMemoryMib: +8192\n",
        "  gpu:\n    minMemoryMib: 08\n",
        "  gpu:\n    minMemoryMib: 1e3\n",
        "  gpu:\n    count: 0b10\n",
        "  gpu:\n    count: !!int '2'\n",
        "  cudaVersion: 13.0\n",
        "  on: true\n",
        "  mode: Observe\n  mode: yes\n",
    ]
    .iter()
    .enumerate()
    {
        add(
            &format!("YAML 1.1 {}", spec.trim()),
            with_name(&format!("d-y{i}"), spec),
        );
    }
    // The name and a selector value read as booleans: the server (or kubectl)
    // refuses both, offline must too.
    add(
        "YAML 1.1 name n",
        format!(
            "{HEAD}metadata:\n  name: n\nspec:\n  nodeSelector:\n    matchLabels: {{pool: a}}\n"
        ),
    );
    add(
        "YAML 1.1 selector value yes",
        format!(
            "{HEAD}metadata:\n  name: d-ysel\nspec:\n  nodeSelector:\n    matchLabels: {{pool: yes}}\n"
        ),
    );
    add(
        "YAML 1.1 merge order",
        format!(
            "{HEAD}metadata:\n  name: d-ymerge\nspec:\n  mode: Bad\n  <<: {{mode: Observe}}\n  nodeSelector:\n    matchLabels: {{pool: a}}\n"
        ),
    );
    for (i, spec) in [
        "  gpu:\n    families: [ampere]\n    excludedFamilies: [ampere]\n",
        "  cudaVersion: \"99.9\"\n",
        "  gpu:\n    minComputeCapability: \"0.0\"\n",
        "  gpu:\n    minComputeCapability: \"08.6\"\n",
        "  minDriverVersion: \"0580.065.06\"\n",
        "  gatingLayers: [Health]\n",
        "  gpu:\n    products: [\"?\"]\n",
        "  resources: {kubernetes.io/gpu: 1}\n",
        "  taint: {key: kubernetes.azure.com/scalesetpriority}\n",
        "  taint: {key: cloud.google.com/gke-nodepool}\n",
        "  taint: {key: eks.amazonaws.com/compute-type}\n",
        "  minDriverVersion: \"580.65.06\"\n",
        "  gatingLayers: [Driver, Health]\n",
        "  gpu:\n    products: [\"*\"]\n",
    ]
    .iter()
    .enumerate()
    {
        add(
            &format!("meaning {}", spec.trim()),
            with_name(&format!("d-m{i}"), spec),
        );
    }
    out
}

/// Random structural mutations of the example profiles, each with a unique name.
fn mutations(cases: usize, seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng(seed | 1);
    let files: Vec<PathBuf> = ["pascal-maxwell", "rtx3090-rtx4070tis", "talos-rtx3050"]
        .iter()
        .map(|d| {
            repo_root()
                .join("deploy/examples")
                .join(d)
                .join("profiles.yaml")
        })
        .collect();
    let docs: Vec<Value> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("example");
            serde_yaml_ng::Deserializer::from_str(&text)
                .filter_map(|d| serde::Deserialize::deserialize(d).ok())
                .filter(|v: &Value| !v.is_null())
                .collect::<Vec<_>>()
        })
        .collect();
    let replacements: Vec<Value> = vec![
        json!(""),
        json!("x y"),
        json!("é"),
        json!(-1),
        json!(0),
        json!(4294967296u64),
        json!(1.5),
        json!(null),
        json!([]),
        json!({}),
        json!(true),
        json!("99999999999.1"),
        json!("NVIDIA-[RTX"),
        json!("kubernetes.io/x"),
        json!("In"),
        json!("a".repeat(70)),
    ];
    (0..cases)
        .map(|i| {
            let mut doc = docs[rng.below(docs.len())].clone();
            let mut paths = Vec::new();
            collect(&doc["spec"], "/spec".into(), &mut paths);
            let path = paths[rng.below(paths.len())].clone();
            let value = replacements[rng.below(replacements.len())].clone();
            if let Some(slot) = doc.pointer_mut(&path) {
                *slot = value;
            }
            doc["metadata"]["name"] = json!(format!("m{i}"));
            let text = serde_yaml_ng::to_string(&doc).expect("yaml");
            (format!("mutation {i}: {path}"), text.into_bytes())
        })
        .collect()
}

fn collect(v: &Value, here: String, out: &mut Vec<String>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => m.iter().for_each(|(k, c)| {
            collect(
                c,
                format!("{here}/{}", k.replace('~', "~0").replace('/', "~1")),
                out,
            )
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| collect(c, format!("{here}/{i}"), out)),
        _ => {}
    }
}

/// `kubectl <args>` against `env`: whether it succeeded, and all it printed.
async fn kubectl_out(env: &gpuready_testenv::TestEnv, args: &[&str]) -> (bool, String) {
    let out = run(kubectl(env, args), None).await;
    (out.ok, format!("{}{}", out.stdout, out.stderr))
}

fn check(kubeconfig: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let out = gpuready_with_kubeconfig(kubeconfig)
        .args(["check", "--now", DUMPED_AT, "-o", "json"])
        .args(args)
        .output()
        .expect("gpuready");
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), report)
}

/// (node, profile, ready, reason) per node of a report.
fn verdicts(report: &Value) -> Vec<(String, String, String, String)> {
    report["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            (
                n["name"].to_string(),
                n["profile"].to_string(),
                n["ready"].to_string(),
                n["reason"].to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn offline_and_server_accept_the_same_profiles_and_judge_alike() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let cases: usize = std::env::var("GPUREADY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    // The nodes of one example, live, and a dump of them for the offline side.
    let example = repo_root().join("deploy/examples/rtx3090-rtx4070tis/nodes.json");
    let list: Value =
        serde_json::from_str(&std::fs::read_to_string(&example).expect("nodes")).expect("json");
    for n in list["items"].as_array().expect("items") {
        let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
        let mut node = n.clone();
        node["metadata"] =
            json!({ "name": n["metadata"]["name"], "labels": n["metadata"]["labels"] });
        let status = node.as_object_mut().and_then(|o| o.remove("status"));
        let typed = serde_json::from_value(node).expect("node");
        api.create(&Default::default(), &typed)
            .await
            .expect("create node");
        let name = n["metadata"]["name"].as_str().expect("name");
        api.patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({ "status": status })),
        )
        .await
        .expect("node status");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, dump) = kubectl_out(&env, &["get", "nodes", "-o", "json"]).await;
    assert!(ok, "{dump}");
    let dump_path = dir.path().join("nodes.json");
    std::fs::write(&dump_path, dump).expect("dump");
    let kubeconfig = env.kubeconfig_path().to_owned();

    let mut all = corpus();
    all.extend(mutations(cases, 0x6770_7572_6561_6479));
    let (mut agree, mut accepted, mut judged) = (0, 0, 0);
    let mut disagreements = Vec::new();
    let mut verdict_mismatches = Vec::new();
    for (i, (what, bytes)) in all.iter().enumerate() {
        let path = dir.path().join(format!("p{i}.yaml"));
        std::fs::write(&path, bytes).expect("write");
        let path_str = path.to_str().expect("utf-8 path");
        let offline = gpuready::input::read_all_profiles(std::slice::from_ref(&path));
        let (server, message) = kubectl_out(&env, &["create", "-f", path_str]).await;
        if offline.is_ok() == server {
            agree += 1;
        } else {
            disagreements.push(format!(
                "{what}: offline {}, server {}: {}\n{}",
                if offline.is_ok() {
                    "accepts"
                } else {
                    "refuses"
                },
                if server { "accepts" } else { "refuses" },
                offline
                    .as_ref()
                    .err()
                    .map(ToString::to_string)
                    .unwrap_or(message),
                String::from_utf8_lossy(bytes)
            ));
        }
        if server && offline.is_ok() {
            accepted += 1;
            // A sample of accepted profiles: live verdicts equal offline ones.
            if judged < 8 {
                judged += 1;
                let (live_code, live) = check(&kubeconfig, &[]);
                let (file_code, file) = check(
                    &kubeconfig,
                    &[
                        "--nodes",
                        dump_path.to_str().expect("path"),
                        "--profiles",
                        path_str,
                    ],
                );
                if live_code != file_code || verdicts(&live) != verdicts(&file) {
                    verdict_mismatches.push(format!(
                        "{what}: live exit {live_code:?} {:?}\noffline exit {file_code:?} {:?}",
                        verdicts(&live),
                        verdicts(&file)
                    ));
                }
            }
        }
        let _ = kubectl_out(
            &env,
            &[
                "delete",
                "-f",
                path_str,
                "--ignore-not-found",
                "--wait=false",
            ],
        )
        .await;
    }
    println!(
        "profile_differential: {} files, {agree} agree, {accepted} accepted by both, {} disagreements, {judged} judged live and offline, {} verdict mismatches",
        all.len(),
        disagreements.len(),
        verdict_mismatches.len()
    );
    assert!(
        disagreements.is_empty(),
        "offline and server disagree:\n{}",
        disagreements.join("\n\n")
    );
    assert!(
        verdict_mismatches.is_empty(),
        "{}",
        verdict_mismatches.join("\n")
    );
    assert!(judged > 0, "no accepted profile was judged");
}
