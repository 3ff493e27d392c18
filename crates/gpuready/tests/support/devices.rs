//! DRA GPU nodes as the NVIDIA DRA driver and gpuready's probe show them: the
//! real 8-GPU H200 ResourceSlice of the engine's fixtures published for a node,
//! the probe's report of those GPUs (optionally with XID 79 on some), a node
//! with NFD's PCI label only, and a profile for such a pool.

use gpuready_api::probe::{EventKind, EventRecord, GpuState, ProbeReport};
use kube::Client;
use serde_json::{Value, json};

use super::{POOL, create_node, engine_slice, repo_root};

/// The 8-GPU H200 slice of the engine's fixtures, published for `node`.
pub fn eight_gpu_slice(node: &str) -> Value {
    engine_slice("dra-h200-8gpu.yaml", node)
}

pub fn slice_uuid(slice: &Value, device: &str) -> String {
    slice["spec"]["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["name"] == device)
        .and_then(|d| d["attributes"]["uuid"]["string"].as_str())
        .expect("uuid")
        .to_owned()
}

/// The real H200's probe report (one GPU) for `node`, taken now, its event
/// watch working; with XID 79 recorded at `xid79_at` when given.
pub fn one_gpu_report(node: &str, xid79_at: Option<jiff::Timestamp>) -> ProbeReport {
    let mut r = real_report(node);
    r.events.monitored = true;
    r.events.error = None;
    let uuid = r.gpus[0].uuid.clone().expect("uuid");
    r.events.records = xid79_at
        .map(|t| EventRecord {
            gpu: uuid,
            kind: EventKind::Xid,
            xid: Some(79),
            count: 1,
            first_seen: t.to_string(),
            last_seen: t.to_string(),
        })
        .into_iter()
        .collect();
    r
}

/// The engine's fixture of the real H200's report, for `node`, taken now.
fn real_report(node: &str) -> ProbeReport {
    let mut r: ProbeReport = serde_json::from_str(
        &std::fs::read_to_string(
            repo_root().join("crates/gpuready-core/tests/fixtures/h200-real/probe-report.json"),
        )
        .expect("fixture"),
    )
    .expect("report");
    r.node = Some(node.into());
    r.generated_at = jiff::Timestamp::now().to_string();
    r
}

/// The probe's view of the slice's 8 GPUs; `xid79` names GPUs that threw XID 79.
pub fn h200_report(node: &str, slice: &Value, xid79: &[&str]) -> ProbeReport {
    let mut r = real_report(node);
    let base = r.gpus[0].clone();
    r.gpus = (0..8)
        .map(|i| GpuState {
            index: i,
            uuid: Some(slice_uuid(slice, &format!("gpu-{i}"))),
            ..base.clone()
        })
        .collect();
    r.device_count = Some(8);
    r.events.monitored = true;
    r.events.error = None;
    r.events.records = xid79
        .iter()
        .map(|d| EventRecord {
            gpu: slice_uuid(slice, d),
            kind: EventKind::Xid,
            xid: Some(79),
            count: 1,
            first_seen: jiff::Timestamp::now().to_string(),
            last_seen: jiff::Timestamp::now().to_string(),
        })
        .collect();
    r
}

/// A DRA-only node: NFD's label, no GFD label, no `nvidia.com/gpu`.
pub async fn dra_only_node(client: &Client, name: &str, pool: &str) {
    let labels = std::collections::BTreeMap::from([
        (POOL.to_owned(), pool.to_owned()),
        (
            "feature.node.kubernetes.io/pci-0302_10de.present".to_owned(),
            "true".to_owned(),
        ),
    ]);
    create_node(client, name, labels, 0, json!([])).await;
}

pub fn h200_profile(name: &str, pool: &str, extra: &str) -> String {
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
    products: [NVIDIA-H200]
    count: 8
{extra}"#
    )
}
