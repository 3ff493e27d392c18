//! Helpers shared by the install-path tests (`chart.rs`, `flux.rs`): running helm
//! and kubectl against a test control plane, rendering the chart, creating the
//! example nodes the way kubelet would, and running gpuready in-process with a
//! client of a chosen identity.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use gpuready_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

pub const CRD_NAME: &str = "gpunodeprofiles.gpuready.io";
/// The example the install tests converge (3 nodes, 1 profile).
pub const EXAMPLE: &str = "deploy/examples/rtx3090-rtx4070tis";

// Re-exported, not redefined: the controller harness lives in tests/support.
#[allow(unused_imports)]
pub use crate::support::{
    Running, eventually, gpu_ready, repo_root, start_controller_with as start_controller,
    taint_keys,
};

pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/gpuready")
}

/// Output of a finished command.
pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs a command (helm, kubectl) without blocking the runtime, feeding `stdin`
/// (through a temporary file: the workspace's tokio has no io-util).
pub async fn run(command: Command, stdin: Option<&str>) -> Out {
    let input = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(input.path(), stdin.unwrap_or_default()).expect("write stdin file");
    let mut command = tokio::process::Command::from(command);
    command.stdin(std::fs::File::open(input.path()).expect("open stdin file"));
    let out = command.output().await.expect("run command");
    Out {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a command that must succeed; returns its stdout.
pub async fn must(command: Command, stdin: Option<&str>, what: &str) -> String {
    let shown = format!("{command:?}");
    let out = run(command, stdin).await;
    assert!(
        out.ok,
        "{what} failed: {shown}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out.stdout
}

/// `helm <args>` against `env`.
pub fn helm(env: &TestEnv, args: &[&str]) -> Command {
    let mut c = env.helm();
    c.args(args);
    c
}

/// `kubectl <args>` against `env`.
pub fn kubectl(env: &TestEnv, args: &[&str]) -> Command {
    let mut c = env.kubectl();
    c.args(args);
    c
}

/// `helm template <release> charts/gpuready -n <namespace> <extra>`.
pub async fn render(env: &TestEnv, release: &str, namespace: &str, extra: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        release,
        chart.to_str().expect("utf-8 path"),
        "--namespace",
        namespace,
    ];
    args.extend_from_slice(extra);
    must(helm(env, &args), None, "helm template").await
}

/// The documents of a YAML stream, empty ones left out.
pub fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| <Value as serde::Deserialize>::deserialize(doc).expect("YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

/// The one document of `kind` (and `name`, when given).
pub fn find_doc<'a>(docs: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && name.is_none_or(|n| d["metadata"]["name"] == n))
        .unwrap_or_else(|| panic!("no {kind} {name:?} in the rendered chart"))
}

/// Server-side applies CRDs from a YAML file (repo-relative) and waits until they
/// are Established.
pub async fn install_crds(env: &TestEnv, rel: &str, manager: &str) {
    let text = std::fs::read_to_string(repo_root().join(rel))
        .unwrap_or_else(|e| panic!("reading {rel}: {e}"));
    let api: Api<CustomResourceDefinition> = Api::all(env.client().expect("client"));
    for doc in yaml_documents(&text) {
        let crd: CustomResourceDefinition = serde_json::from_value(doc).expect("a CRD");
        api.patch(
            &crd.name_any(),
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} from {rel}: {e}", crd.name_any()));
        wait_established(&api, &crd.name_any()).await;
    }
}

/// The shared test-support wait, for callers holding an `Api` of CRDs.
pub async fn wait_established(api: &Api<CustomResourceDefinition>, name: &str) {
    gpuready_testenv::crds::wait_established(&kube::Client::from(api.clone()), &[name])
        .await
        .expect("CRD Established");
}

/// The admin config of `env`, impersonating service account `namespace/name`
/// with the groups a token of that account carries (as
/// `TestEnv::client_as_service_account` does), for a client built differently.
pub fn service_account_config(env: &TestEnv, namespace: &str, name: &str) -> kube::Config {
    let mut config = env.config();
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:{name}"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".into(),
    ]);
    config
}

/// The nodes of `deploy/examples/<name>/nodes.json`, with the GFD timestamps
/// moved so the newest is now (the example's relative ages, e.g. a node whose
/// labels are days stale, hold).
pub fn example_nodes(example: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(repo_root().join(example).join("nodes.json"))
        .expect("example nodes.json");
    let list: Value = serde_json::from_str(&text).expect("nodes.json");
    let mut items = list["items"].as_array().expect("a List").clone();
    let key = "nvidia.com/gfd.timestamp";
    let ts = |n: &Value| {
        n["metadata"]["labels"][key]
            .as_str()
            .and_then(|s| s.parse::<i64>().ok())
    };
    let newest = items.iter().filter_map(ts).max().unwrap_or(0);
    let shift = jiff::Timestamp::now().as_second() - newest;
    for item in &mut items {
        if let Some(t) = ts(item) {
            item["metadata"]["labels"][key] = json!((t + shift).to_string());
        }
    }
    items
}

/// Creates a node from a Node JSON as kubelet would (the object, then its
/// status, conditions stamped now). Returns its name.
pub async fn create_node(client: &Client, item: &Value) -> String {
    let api: Api<Node> = Api::all(client.clone());
    let name = item["metadata"]["name"].as_str().expect("name").to_owned();
    let labels: BTreeMap<String, String> =
        serde_json::from_value(item["metadata"]["labels"].clone()).unwrap_or_default();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": name, "labels": labels },
        "spec": item["spec"],
    }))
    .expect("node");
    api.create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
    let mut status = item["status"].clone();
    let now = jiff::Timestamp::now().to_string();
    if let Some(conds) = status["conditions"].as_array_mut() {
        for c in conds {
            c["lastHeartbeatTime"] = json!(now);
            c["lastTransitionTime"] = json!(now);
        }
    }
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": status })),
    )
    .await
    .unwrap_or_else(|e| panic!("setting the status of node {name}: {e}"));
    name
}

/// Creates every node of an example (see [`example_nodes`]); returns their names.
pub async fn create_example_nodes(client: &Client, example: &str) -> Vec<String> {
    let mut names = Vec::new();
    for item in example_nodes(example) {
        names.push(create_node(client, &item).await);
    }
    names
}

/// Server-side applies every GpuNodeProfile of `deploy/examples/<name>/profiles.yaml`
/// as the admin; returns their names.
pub async fn apply_example_profiles(client: &Client, example: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join(example).join("profiles.yaml"))
        .expect("example profiles.yaml");
    let mut names = Vec::new();
    for doc in yaml_documents(&text) {
        names.push(apply_profile(client, doc).await);
    }
    names
}

/// Server-side applies one GpuNodeProfile given as JSON; returns its name.
pub async fn apply_profile(client: &Client, doc: Value) -> String {
    let p: gpuready_api::GpuNodeProfile = serde_json::from_value(doc).expect("a GpuNodeProfile");
    let api: Api<gpuready_api::GpuNodeProfile> = Api::all(client.clone());
    api.patch(
        &p.name_any(),
        &PatchParams::apply("gpuready-tests").force(),
        &Patch::Apply(&p),
    )
    .await
    .unwrap_or_else(|e| panic!("applying profile {}: {e}", p.name_any()));
    p.name_any()
}
