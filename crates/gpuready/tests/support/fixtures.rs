//! What the tests put in a cluster: nodes created the way kubelet creates them
//! (the object, then its status through the status subresource, since a create
//! ignores status), GpuNodeProfiles, and the example clusters of
//! `deploy/examples` with their GFD timestamps moved to now.

use std::collections::BTreeMap;
use std::path::PathBuf;

use gpuready_api::GpuNodeProfile;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{now_s, repo_root, yaml_documents};

/// The field manager the tests apply profiles with.
pub const TEST_MANAGER: &str = "gpuready-tests";

/// The example the install tests converge (3 nodes, 1 profile).
pub const EXAMPLE: &str = "deploy/examples/rtx3090-rtx4070tis";

/// The foreign taint kube-apiserver's TaintNodesByCondition admission puts on
/// every new node (the node lifecycle controller, absent here, would lift it);
/// gpuready must never drop it.
pub const ADMISSION_TAINT: &str = "node.kubernetes.io/not-ready";

/// The label that puts a node in the pool a scenario profile selects.
pub const POOL: &str = "pool";

// ---------------------------------------------------------------- nodes

/// GFD labels of a healthy RTX 3090 on driver 580.178.04, timestamped now.
pub fn gfd_3090() -> BTreeMap<String, String> {
    gpuready_testenv::rtx3090::labels_at(now_s())
}

/// GFD labels of a healthy RTX 3090, in `pool`.
pub fn rtx3090_in(pool: &str) -> BTreeMap<String, String> {
    let mut labels = gfd_3090();
    labels.insert(POOL.into(), pool.into());
    labels
}

/// Creates a node like kubelet: the object (with `labels` and `taints`), then
/// its status with `gpus` GPUs and kubelet Ready.
pub async fn create_node(
    client: &Client,
    name: &str,
    labels: BTreeMap<String, String>,
    gpus: u32,
    taints: Value,
) {
    let api: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": name, "labels": labels },
        "spec": { "taints": taints },
    }))
    .expect("node");
    api.create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
    set_node_status(client, name, gpus, gpus, true).await;
}

/// Sets capacity/allocatable `nvidia.com/gpu` and kubelet's Ready condition.
pub async fn set_node_status(
    client: &Client,
    name: &str,
    capacity: u32,
    allocatable: u32,
    kubelet_ready: bool,
) {
    let api: Api<Node> = Api::all(client.clone());
    let now = jiff::Timestamp::now().to_string();
    let patch = json!({
        "status": {
            "capacity": { "cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": capacity.to_string() },
            "allocatable": { "cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": allocatable.to_string() },
            "conditions": [{
                "type": "Ready",
                "status": if kubelet_ready { "True" } else { "False" },
                "reason": if kubelet_ready { "KubeletReady" } else { "KubeletNotReady" },
                "message": "set by the test",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
        }
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap_or_else(|e| panic!("setting the status of node {name}: {e}"));
}

/// Merges `labels` into a node's labels (`null` removes one).
pub async fn set_labels(client: &Client, name: &str, labels: Value) {
    let api: Api<Node> = Api::all(client.clone());
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "metadata": { "labels": labels } })),
    )
    .await
    .unwrap_or_else(|e| panic!("labelling node {name}: {e}"));
}

/// Creates a node from a dump (a Node as `kubectl get -o json` prints it) as
/// kubelet would: the object with its labels, annotations and spec, then its
/// status with the conditions stamped now. Returns its name.
pub async fn create_dumped_node(client: &Client, dump: &Value) -> String {
    let api: Api<Node> = Api::all(client.clone());
    let name = dump["metadata"]["name"].as_str().expect("name").to_owned();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dump["metadata"]["labels"],
            "annotations": dump["metadata"]["annotations"],
        },
        "spec": dump["spec"],
    }))
    .unwrap_or_else(|e| panic!("node {name}: {e}"));
    api.create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
    let mut status = dump["status"].clone();
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

// ---------------------------------------------------------------- profiles

/// A profile for the RTX 3090 pool `pool` (product, memory, driver ≥ 570.0, one
/// ready label), with `extra` spec lines appended (YAML, two-space indented).
pub fn rtx3090_profile(name: &str, pool: &str, extra: &str) -> String {
    let extra: String = extra
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("  {}\n", l.trim_end()))
        .collect();
    format!(
        r#"apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata:
  name: {name}
spec:
  nodeSelector:
    matchLabels:
      {POOL}: {pool}
  gpu:
    products: ["NVIDIA-GeForce-RTX-3090"]
    minMemoryMib: 24000
  minDriverVersion: "570.0"
  readyLabels:
    example.org/gpu: "rtx3090"
{extra}"#
    )
}

/// Server-side applies a GpuNodeProfile as the admin, forcing ownership (the
/// test is the profile's author).
pub async fn apply_typed_profile(client: &Client, profile: &GpuNodeProfile) -> GpuNodeProfile {
    Api::<GpuNodeProfile>::all(client.clone())
        .patch(
            &profile.name_any(),
            &PatchParams::apply(TEST_MANAGER).force(),
            &Patch::Apply(profile),
        )
        .await
        .unwrap_or_else(|e| panic!("applying profile {}: {e}", profile.name_any()))
}

/// Applies a GpuNodeProfile given as YAML.
pub async fn apply_profile(client: &Client, yaml: &str) -> GpuNodeProfile {
    let p: GpuNodeProfile = serde_yaml_ng::from_str(yaml).expect("profile YAML");
    apply_typed_profile(client, &p).await
}

/// Applies a GpuNodeProfile given as JSON; returns its name.
pub async fn apply_profile_json(client: &Client, doc: Value) -> String {
    let p: GpuNodeProfile = serde_json::from_value(doc).expect("a GpuNodeProfile");
    apply_typed_profile(client, &p).await.name_any()
}

pub async fn delete_profile(client: &Client, name: &str) {
    Api::<GpuNodeProfile>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting profile {name}: {e}"));
}

// ---------------------------------------------------------------- examples

/// The example clusters (repo-relative folders under `deploy/examples` holding
/// a `nodes.json`), sorted.
pub fn examples() -> Vec<String> {
    let dir = repo_root().join("deploy/examples");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .expect("deploy/examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("nodes.json").is_file())
        .filter_map(|p| Some(format!("deploy/examples/{}", p.file_name()?.to_str()?)))
        .collect();
    found.sort();
    found
}

fn example_file(example: &str, file: &str) -> PathBuf {
    repo_root().join(example).join(file)
}

/// The nodes of `<example>/nodes.json`, with the GFD timestamps moved so the
/// newest is now (the example's relative ages, e.g. a node whose labels are
/// days stale, hold).
pub fn example_nodes(example: &str) -> Vec<Value> {
    let path = example_file(example, "nodes.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let list: Value = serde_json::from_str(&text).expect("nodes.json");
    let mut items = list["items"].as_array().expect("a List").clone();
    let key = "nvidia.com/gfd.timestamp";
    let ts = |n: &Value| {
        n["metadata"]["labels"][key]
            .as_str()
            .and_then(|s| s.parse::<i64>().ok())
    };
    let newest = items.iter().filter_map(ts).max().unwrap_or(0);
    let shift = now_s() - newest;
    for item in &mut items {
        if let Some(t) = ts(item) {
            item["metadata"]["labels"][key] = json!((t + shift).to_string());
        }
    }
    items
}

/// Creates every node of an example (see [`example_nodes`]); returns their names.
pub async fn create_example_nodes(client: &Client, example: &str) -> Vec<String> {
    let mut names = Vec::new();
    for item in example_nodes(example) {
        names.push(create_dumped_node(client, &item).await);
    }
    names
}

/// Applies every GpuNodeProfile of `<example>/profiles.yaml`; returns their names.
pub async fn apply_example_profiles(client: &Client, example: &str) -> Vec<String> {
    let path = example_file(example, "profiles.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut names = Vec::new();
    for doc in yaml_documents(&text) {
        names.push(apply_profile_json(client, doc).await);
    }
    names
}

// ---------------------------------------------------------------- RBAC

/// Server-side applies an RBAC object (`rbac.authorization.k8s.io/v1`, any
/// kind) as the admin.
pub async fn apply_rbac(client: &Client, v: Value) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let kind = v["kind"].as_str().expect("kind").to_owned();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "rbac.authorization.k8s.io",
        "v1",
        &kind,
    ));
    let api: Api<DynamicObject> = match v["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let name = v["metadata"]["name"].as_str().expect("name");
    api.patch(
        name,
        &PatchParams::apply(TEST_MANAGER).force(),
        &Patch::Apply(&v),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
}

/// A ClusterRole `name` with `rules`, bound to `subject` (a User or a
/// ServiceAccount, as an RBAC subject object) by a ClusterRoleBinding `name`.
pub async fn grant_cluster_role(client: &Client, name: &str, rules: Value, subject: Value) {
    apply_rbac(
        client,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": name },
            "rules": rules,
        }),
    )
    .await;
    apply_rbac(
        client,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": name },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
            "subjects": [subject],
        }),
    )
    .await;
}

/// A GpuNodeProfile as JSON named `name` with `spec`, e.g. for
/// [`create_raw_profile`].
pub fn raw_profile(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "gpuready.io/v1alpha1",
        "kind": "GpuNodeProfile",
        "metadata": { "name": name },
        "spec": spec,
    })
}

/// Creates a profile from raw JSON, untyped, so it can hold what the Rust
/// types cannot (a quantity past u32, a field a newer CRD has): the API server
/// alone decides. Returns the stored object as JSON.
pub async fn create_raw(client: &Client, object: &Value) -> Result<Value, kube::Error> {
    use kube::api::DynamicObject;
    let api = super::raw_profile_api(client);
    let object: DynamicObject = serde_json::from_value(object.clone()).expect("object");
    let created = api.create(&PostParams::default(), &object).await?;
    Ok(serde_json::to_value(created).expect("json"))
}

/// Like [`create_raw`], then reads the stored object back through the types
/// (what gpuready itself would see).
pub async fn create_raw_profile(
    client: &Client,
    object: &Value,
) -> Result<GpuNodeProfile, kube::Error> {
    let stored = create_raw(client, object).await?;
    Ok(serde_json::from_value(stored)
        .expect("the server's answer deserializes as a GpuNodeProfile"))
}

// ---------------------------------------------------------------- scenarios

/// The smallest governed pool, which many tests start from: node `gpu-1` (an
/// RTX 3090 in pool `a`; its one GPU allocatable when `healthy`, none
/// otherwise) and profile `rtx3090` selecting pool `a`.
pub async fn single_node_pool(client: &Client, healthy: bool) {
    create_node(client, "gpu-1", rtx3090_in("a"), 1, json!([])).await;
    if !healthy {
        set_node_status(client, "gpu-1", 1, 0, true).await;
    }
    apply_profile(client, &rtx3090_profile("rtx3090", "a", "")).await;
}

// ---------------------------------------------------------------- ResourceSlices

/// A ResourceSlice of the engine's fixtures
/// (`crates/gpuready-core/tests/fixtures/evidence/<file>`), published for `node`.
pub fn engine_slice(file: &str, node: &str) -> Value {
    let path = repo_root()
        .join("crates/gpuready-core/tests/fixtures/evidence")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("fixture");
    let mut v: Value = serde_yaml_ng::from_str(&text).expect("slice YAML");
    v["metadata"] = json!({ "name": format!("{node}-gpu.nvidia.com-test") });
    v["spec"]["nodeName"] = json!(node);
    v["spec"]["pool"]["name"] = json!(node);
    v
}

/// The ResourceSlice API as `client`.
pub fn slice_api(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &gpuready::readers::slice_resource())
}

/// Publishes a ResourceSlice as the DRA driver would (server-side apply) and
/// returns the object as the API server stored it.
pub async fn put_slice(client: &Client, slice: &Value) -> Value {
    let obj: DynamicObject = serde_json::from_value(slice.clone()).expect("slice");
    let stored = slice_api(client)
        .patch(
            obj.metadata.name.as_deref().expect("name"),
            &PatchParams::apply("test").force(),
            &Patch::Apply(&obj),
        )
        .await
        .expect("publishing the ResourceSlice");
    serde_json::to_value(stored).expect("json")
}
