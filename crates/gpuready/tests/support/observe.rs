//! Reading back what gpuready left: a node's taints, labels, annotations and
//! conditions, a profile's status and Events, and every version of a node as a
//! watch delivers them (to prove a value never flickered, not only that it
//! ended right).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use gpuready_api::GpuNodeProfile;
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use kube::{Client, ResourceExt};

use super::eventually;

// ---------------------------------------------------------------- nodes

pub async fn get_node(client: &Client, name: &str) -> Node {
    Api::<Node>::all(client.clone())
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("getting node {name}: {e}"))
}

pub fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

pub fn taint_keys(node: &Node) -> Vec<String> {
    taints(node).into_iter().map(|t| t.key).collect()
}

pub fn has_taint(node: &Node, key: &str) -> bool {
    taints(node).iter().any(|t| t.key == key)
}

/// Whether gpuready's readiness taint (the default key) is on the node.
pub fn gated(node: &Node) -> bool {
    has_taint(node, gpuready_api::keys::DEFAULT_TAINT_KEY)
}

/// Taint keys gpuready does not own, in order.
pub fn foreign_taints(node: &Node) -> Vec<String> {
    taint_keys(node)
        .into_iter()
        .filter(|k| !k.starts_with("gpuready.io/") && k != gpuready_api::keys::DEFAULT_TAINT_KEY)
        .collect()
}

pub fn label(node: &Node, key: &str) -> Option<String> {
    node.labels().get(key).cloned()
}

pub fn annotation(node: &Node, key: &str) -> Option<String> {
    node.annotations().get(key).cloned()
}

/// `(status, reason)` of the node's `GpuReady` condition.
pub fn gpu_ready(node: &Node) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "GpuReady")
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// The message of the node's `GpuReady` condition (empty when it has none).
pub fn gpu_ready_message(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "GpuReady"))
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
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
            .filter(|t| {
                t.key.starts_with("gpuready.io/") || t.key == gpuready_api::keys::DEFAULT_TAINT_KEY
            })
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

// ---------------------------------------------------------------- profiles

pub async fn get_profile(client: &Client, name: &str) -> GpuNodeProfile {
    Api::<GpuNodeProfile>::all(client.clone())
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("getting profile {name}: {e}"))
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

/// A profile's status, once written.
pub async fn profile_status(
    client: &Client,
    profile: &str,
) -> Option<gpuready_api::GpuNodeProfileStatus> {
    get_profile(client, profile).await.status
}

/// `(matched, ready, not ready)` from a profile's status.
pub async fn profile_counts(client: &Client, profile: &str) -> Option<(i32, i32, i32)> {
    let s = get_profile(client, profile).await.status?;
    Some((s.matched_nodes, s.ready_nodes, s.not_ready_nodes))
}

// ---------------------------------------------------------------- events

/// The Events recorded about the object named `name` (any kind). Events about
/// cluster-scoped objects (nodes, profiles) land in `default`.
pub async fn events_about(client: &Client, name: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&Default::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

/// Reasons of the Events recorded about the object named `name`.
pub async fn event_reasons(client: &Client, name: &str) -> Vec<String> {
    events_about(client, name)
        .await
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

// ---------------------------------------------------------------- history

/// Every version of one node, as a watch delivers them, recorded in the
/// background until the returned handle is dropped.
pub struct NodeHistory {
    pub versions: Arc<Mutex<Vec<Node>>>,
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
    let versions: Arc<Mutex<Vec<Node>>> = Arc::default();
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

/// The HTTP status of an API error (403 refused, 404 absent…), `None` for
/// errors that never reached the API server.
pub fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Waits until gpuready has labelled the node with its verdict and the taint
/// agrees: tainted and `ready=false` (`want`), or untainted and `ready=true`.
pub async fn wait_gated(client: &Client, name: &str, want: bool, secs: u64) {
    eventually(secs, &format!("{name} gated = {want}"), || async {
        let n = get_node(client, name).await;
        let ready = label(&n, gpuready_api::keys::LABEL_READY);
        (gated(&n) == want && ready.as_deref() == Some(if want { "false" } else { "true" }))
            .then_some(())
    })
    .await;
}
