//! Shared helpers for the controller tests: a control plane with the CRD, nodes
//! created the way kubelet would (object, then status), profiles, and an
//! in-process controller whose API requests are counted.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gpuready::controller::{self, Health, Metrics, RunArgs};
use gpuready_api::GpuNodeProfile;
use gpuready_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn now_s() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A fresh control plane (controllers are cluster-wide, so each test owns one)
/// with the GpuNodeProfile CRD installed and Established.
pub async fn env_with_crd() -> TestEnv {
    let env = TestEnv::start().await.expect("test control plane");
    let client = env.client().expect("client");
    let text =
        std::fs::read_to_string(repo_root().join("deploy/crds/gpunodeprofiles.gpuready.io.yaml"))
            .expect("CRD file");
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(text.split("---\n").nth(1).expect("one document")).expect("CRD");
    let api: Api<CustomResourceDefinition> = Api::all(client);
    api.patch(
        &crd.name_any(),
        &PatchParams::apply("test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply CRD");
    gpuready_testenv::crds::wait_established(&Client::from(api), &[&crd.name_any()])
        .await
        .expect("CRD Established");
    env
}

/// GFD labels of a healthy RTX 3090 on driver 580.178.04, timestamped now.
pub fn gfd_3090() -> BTreeMap<String, String> {
    [
        ("nvidia.com/gfd.timestamp", now_s().to_string()),
        ("nvidia.com/gpu.product", "NVIDIA-GeForce-RTX-3090".into()),
        ("nvidia.com/gpu.memory", "24576".into()),
        ("nvidia.com/gpu.compute.major", "8".into()),
        ("nvidia.com/gpu.compute.minor", "6".into()),
        ("nvidia.com/gpu.family", "ampere".into()),
        ("nvidia.com/gpu.count", "1".into()),
        ("nvidia.com/cuda.driver-version.full", "580.178.04".into()),
        ("nvidia.com/cuda.runtime-version.full", "13.0".into()),
        (
            "feature.node.kubernetes.io/pci-0300_10de.present",
            "true".into(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Creates a node like kubelet: the object, then its status.
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
        .expect("create node");
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
        .expect("node status");
}

pub async fn set_labels(client: &Client, name: &str, labels: Value) {
    let api: Api<Node> = Api::all(client.clone());
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "metadata": { "labels": labels } })),
    )
    .await
    .expect("label node");
}

pub async fn apply_profile(client: &Client, yaml: &str) -> GpuNodeProfile {
    let p: GpuNodeProfile = serde_yaml_ng::from_str(yaml).expect("profile YAML");
    let api: Api<GpuNodeProfile> = Api::all(client.clone());
    api.patch(
        &p.name_any(),
        &PatchParams::apply("test").force(),
        &Patch::Apply(&p),
    )
    .await
    .expect("apply profile")
}

pub async fn delete_profile(client: &Client, name: &str) {
    let api: Api<GpuNodeProfile> = Api::all(client.clone());
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete profile");
}

/// A controller running in this process, with its own counted client.
pub struct Running {
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    pub stop: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), controller::Error>>,
}

impl Running {
    pub async fn stop(self) -> Result<(), controller::Error> {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("controller stops in time")
            .expect("controller task")
    }

    pub fn writes(&self, kind: &str) -> u64 {
        self.metrics
            .encode()
            .lines()
            .find(|l| {
                l.starts_with("gpuready_writes_total{") && l.contains(&format!("kind=\"{kind}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Writes to nodes: the one merge patch on the node (taint, labels,
    /// annotations) and the condition patch on its status.
    pub fn node_writes(&self) -> u64 {
        self.writes("node") + self.writes("conditions")
    }
}

pub fn test_args() -> RunArgs {
    let mut args = RunArgs::for_tests();
    args.identity = Some(format!("test-{}", std::process::id()));
    args
}

/// Logs from the controller under test (RUST_LOG, default info), shown for failed tests.
pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn")),
        )
        .with_test_writer()
        .try_init();
}

pub fn start_controller(env: &TestEnv, args: RunArgs) -> Running {
    start_controller_with(env.config(), args)
}

/// Runs gpuready in-process with a counted client built from `config` (e.g. one
/// impersonating the chart's ServiceAccount).
pub fn start_controller_with(config: kube::Config, args: RunArgs) -> Running {
    init_logs();
    let metrics = Arc::new(Metrics::default());
    let health = Arc::new(Health::default());
    let client =
        controller::requests::counted_client(config, metrics.clone()).expect("counted client");
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller::run(
        client,
        args,
        metrics.clone(),
        health.clone(),
        stop.clone(),
    ));
    Running {
        metrics,
        health,
        stop,
        task,
    }
}

/// Polls `check` until it returns `Some`, or panics with `what` after `secs`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn get_node(client: &Client, name: &str) -> Node {
    Api::<Node>::all(client.clone())
        .get(name)
        .await
        .expect("get node")
}

pub fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| t.iter().map(|t| t.key.clone()).collect())
        .unwrap_or_default()
}

pub fn gpu_ready(node: &Node) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "GpuReady")
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

// ---------------------------------------------------------------------------
// Scenario helpers (controller_scenarios.rs, controller_resilience.rs,
// controller_requests.rs).
// ---------------------------------------------------------------------------

/// The label that puts a node in the pool a scenario profile selects.
pub const POOL: &str = "pool";

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

/// GFD labels of a healthy RTX 3090, in `pool`.
pub fn rtx3090_in(pool: &str) -> BTreeMap<String, String> {
    let mut labels = gfd_3090();
    labels.insert(POOL.into(), pool.into());
    labels
}

pub fn taints(node: &Node) -> Vec<k8s_openapi::api::core::v1::Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

pub fn has_taint(node: &Node, key: &str) -> bool {
    taints(node).iter().any(|t| t.key == key)
}

/// Whether gpuready's readiness taint (the default key) is on the node.
pub fn gated(node: &Node) -> bool {
    has_taint(node, gpuready_api::keys::DEFAULT_TAINT_KEY)
}

pub fn label(node: &Node, key: &str) -> Option<String> {
    node.labels().get(key).cloned()
}

pub fn annotation(node: &Node, key: &str) -> Option<String> {
    node.annotations().get(key).cloned()
}

/// Every label, annotation, taint and node condition gpuready could have left.
pub fn gpuready_traces(node: &Node) -> Vec<String> {
    let mut out: Vec<String> = node
        .labels()
        .keys()
        .chain(node.annotations().keys())
        .filter(|k| k.starts_with("gpuready.io/") || *k == "example.org/gpu")
        .cloned()
        .collect();
    out.extend(
        taints(node)
            .into_iter()
            .filter(|t| t.key.starts_with("gpuready.io/"))
            .map(|t| format!("taint {}", t.key)),
    );
    out.extend(
        node.status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .filter(|c| c.type_.starts_with("GpuReady"))
            .map(|c| format!("condition {}", c.type_)),
    );
    out
}

/// Taint keys gpuready does not own, in order.
pub fn foreign_taints(node: &Node) -> Vec<String> {
    taint_keys(node)
        .into_iter()
        .filter(|k| !k.starts_with("gpuready.io/"))
        .collect()
}

pub async fn get_profile(client: &Client, name: &str) -> GpuNodeProfile {
    Api::<GpuNodeProfile>::all(client.clone())
        .get(name)
        .await
        .expect("get profile")
}

/// `(status, reason)` of a profile condition.
pub async fn profile_condition(
    client: &Client,
    profile: &str,
    type_: &str,
) -> Option<(String, String)> {
    get_profile(client, profile)
        .await
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.reason))
}

/// `(matched, ready, not ready)` from a profile's status.
pub async fn profile_counts(client: &Client, profile: &str) -> Option<(i32, i32, i32)> {
    let s = get_profile(client, profile).await.status?;
    Some((s.matched_nodes, s.ready_nodes, s.not_ready_nodes))
}

/// Reasons of the Events recorded about the object named `name` (any kind).
pub async fn event_reasons(client: &Client, name: &str) -> Vec<String> {
    use k8s_openapi::api::events::v1::Event;
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&Default::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

impl Running {
    /// A sample from /metrics, e.g. `gpuready_safety_brake_engaged{profile="x"}`.
    pub fn metric(&self, series: &str) -> Option<f64> {
        self.metrics
            .encode()
            .lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    /// Like [`Running::metric`], 0 when the series is absent.
    pub fn sample(&self, series: &str) -> f64 {
        self.metric(series).unwrap_or(0.0)
    }

    pub fn is_leader(&self) -> bool {
        self.metrics.leader.get() == 1
    }

    /// Requests sent so far, by method (`GET`, `LIST`... as the metric labels them).
    pub fn requests_by_method(&self) -> BTreeMap<String, u64> {
        self.metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("gpuready_api_requests_total{"))
            .filter_map(|l| {
                let method = l.split("method=\"").nth(1)?.split('"').next()?;
                let n = l.rsplit(' ').next()?.parse().ok()?;
                Some((method.to_owned(), n))
            })
            .collect()
    }
}

/// The engine's report over the live nodes and profiles, now (what `gpuready
/// check` prints against a cluster).
pub async fn live_report(client: &Client) -> gpuready::check::CheckReport {
    let nodes = Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list nodes")
        .items;
    let profiles = Api::<GpuNodeProfile>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list profiles")
        .items;
    let extra = gpuready::check::read_live_evidence(client)
        .await
        .expect("list evidence");
    gpuready::check::run_engine(&nodes, &profiles, &extra, jiff::Timestamp::now()).expect("engine")
}

/// The nodes on which gpuready would still change something, judged by the same
/// engine over the live objects (heartbeats ignored): empty once converged.
pub async fn pending_changes(client: &Client) -> Vec<String> {
    live_report(client)
        .await
        .nodes
        .into_iter()
        .filter(|a| !a.changes.is_empty())
        .map(|a| a.name)
        .collect()
}

/// Every version of one node, as a watch delivers them, recorded in the
/// background until the returned handle is dropped or stopped.
pub struct NodeHistory {
    pub versions: Arc<std::sync::Mutex<Vec<Node>>>,
    task: tokio::task::JoinHandle<()>,
}

impl NodeHistory {
    pub fn snapshot(&self) -> Vec<Node> {
        self.versions.lock().expect("history lock").clone()
    }
}

impl Drop for NodeHistory {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts recording `name` and returns once the watch is established (the first
/// version is in).
pub async fn record_node(client: &Client, name: &str) -> NodeHistory {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let versions: Arc<std::sync::Mutex<Vec<Node>>> = Arc::default();
    let api: Api<Node> = Api::all(client.clone());
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let sink = versions.clone();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(api, cfg).applied_objects());
        while let Some(item) = stream.next().await {
            if let Ok(node) = item {
                let mut v = sink.lock().expect("history lock");
                if v.last().map(|n| n.resource_version()) != Some(node.resource_version()) {
                    v.push(node);
                }
            }
        }
    });
    let history = NodeHistory { versions, task };
    eventually(30, "the node watch delivers its first version", || async {
        (!history.snapshot().is_empty()).then_some(())
    })
    .await;
    history
}

/// Counts how often a predicate over consecutive versions flips.
pub fn transitions(versions: &[Node], f: impl Fn(&Node) -> bool) -> usize {
    versions.windows(2).filter(|w| f(&w[0]) != f(&w[1])).count()
}
