//! The probe's view of its own Node: whether the GPU operator is taking it
//! through maintenance (a driver upgrade, a MIG change, GPU clients paused),
//! which the probe sits out by releasing NVML (docs/probe.md, "Sitting out
//! maintenance"). One metadata watch on one Node, narrowed by a field selector,
//! and one read on SIGTERM. Fails open: a Node never read leaves the probe
//! working as it does without this.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;

/// What the probe knows of its node's maintenance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NodeView {
    /// Not read yet, or never readable (no RBAC, no API): the probe reads
    /// the GPUs as if the node were in service.
    #[default]
    Unread,
    InService,
    /// The labels that call for GPU clients to leave, as `key=value`.
    Maintenance(Vec<String>),
}

impl NodeView {
    /// The view of a Node with these labels (the rule lives in the engine,
    /// which the Health layer shares).
    pub fn of(labels: &BTreeMap<String, String>) -> NodeView {
        let m = gpuready_core::lifecycle::gpu_clients_paused(labels);
        if m.is_empty() {
            NodeView::InService
        } else {
            NodeView::Maintenance(m)
        }
    }

    /// The labels to step aside for; empty: read the GPUs.
    pub fn maintenance(&self) -> &[String] {
        match self {
            NodeView::Maintenance(m) => m,
            NodeView::Unread | NodeView::InService => &[],
        }
    }
}

/// Keeps `tx` at `node`'s view until every receiver is gone. Errors (access
/// refused, API unreachable) are logged when they change and leave the last
/// view standing: a node the probe saw in maintenance stays so until it is
/// seen back, and one never read stays [`NodeView::Unread`].
pub async fn watch_node(client: Client, node: String, tx: watch::Sender<NodeView>) {
    // Metadata only: the labels are all it reads.
    let api: Api<PartialObjectMeta<Node>> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut last_error: Option<String> = None;
    while let Some(event) = events.next().await {
        let view = match event {
            Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                NodeView::of(&n.metadata.labels.unwrap_or_default())
            }
            Ok(watcher::Event::Delete(_)) => NodeView::InService,
            Ok(watcher::Event::Init | watcher::Event::InitDone) => continue,
            Err(e) => {
                let text = e.to_string();
                if last_error.as_ref() != Some(&text) {
                    tracing::warn!(error = %text, %node, "cannot read the probe's node: it keeps its last view of the node's maintenance (none read: in service); the chart's probe.maintenance.watchNode grants the read");
                    last_error = Some(text);
                }
                continue;
            }
        };
        if last_error.take().is_some() {
            tracing::info!(%node, "reading the probe's node again");
        }
        tx.send_if_modified(|v| {
            let changed = *v != view;
            if changed {
                tracing::info!(%node, maintenance = ?view.maintenance(), "node maintenance view changed");
                *v = view;
            }
            changed
        });
        if tx.is_closed() {
            return;
        }
    }
}

/// The node's view read now (on SIGTERM), within `limit`; `None` when it
/// cannot be read in time.
pub async fn read_now(client: &Client, node: &str, limit: Duration) -> Option<NodeView> {
    let api: Api<PartialObjectMeta<Node>> = Api::all(client.clone());
    match tokio::time::timeout(limit, api.get(node)).await {
        Ok(Ok(n)) => Some(NodeView::of(&n.metadata.labels.unwrap_or_default())),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, %node, "reading the node before stopping failed");
            None
        }
        Err(_) => {
            tracing::warn!(%node, ?limit, "reading the node before stopping timed out");
            None
        }
    }
}
