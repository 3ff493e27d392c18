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
use kube::runtime::wait::{await_condition, conditions};
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
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(api, &crd.name_any(), conditions::is_crd_established()),
    )
    .await
    .expect("CRD established in time")
    .expect("watch CRD");
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

    pub fn node_writes(&self) -> u64 {
        self.writes("taint") + self.writes("labels") + self.writes("conditions")
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
    init_logs();
    let metrics = Arc::new(Metrics::default());
    let health = Arc::new(Health::default());
    let client = controller::requests::counted_client(env.config(), metrics.clone())
        .expect("counted client");
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
