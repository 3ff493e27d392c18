//! The floor: the least a controller could send to taint (or untaint) every
//! node — one list, then one resourceVersion-locked merge patch per node carrying
//! the whole taint list, re-read and retried on 409 — at the same client limits
//! and concurrency as gpuready. It uses its own taint key so it never meets
//! gpuready's. For the DRA rows, each node's patch follows the write of its
//! ResourceSlice; for the join-storm rows, a watch untaints each node that
//! joins with the floor's taint.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::error::Error;

pub const FLOOR_TAINT: &str = "bench.example.com/floor";

pub struct FloorRun {
    pub elapsed: Duration,
    pub writes: usize,
    pub conflicts: usize,
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// What the floor keeps of a node: enough to write its taint list.
#[derive(Clone)]
struct Slim {
    name: String,
    resource_version: Option<String>,
    taints: Vec<Taint>,
}

fn slim(node: &Node) -> Slim {
    Slim {
        name: node.name_any(),
        resource_version: node.resource_version(),
        taints: taints(node),
    }
}

/// Every node, listed in pages of 500 (as kube's watcher lists) and kept slim:
/// one unpaged LIST of 100,000 full nodes is close to a gigabyte of JSON.
async fn list_slim(api: &Api<Node>) -> Result<Vec<Slim>, Error> {
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        out.extend(page.items.iter().map(slim));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}

impl FloorRun {
    /// The run since `started`, from each node's (writes, conflicts).
    fn of(started: Instant, results: &[(usize, usize)]) -> FloorRun {
        FloorRun {
            elapsed: started.elapsed(),
            writes: results.iter().map(|r| r.0).sum(),
            conflicts: results.iter().map(|r| r.1).sum(),
        }
    }
}

/// Adds (`taint`) or removes the floor's taint on every node.
pub async fn run(client: &Client, concurrency: usize, taint: bool) -> Result<FloorRun, Error> {
    each_node(client, concurrency, move |api, node| async move {
        set_taint(&api, node, taint).await
    })
    .await
}

/// One fleet-wide floor phase: every node listed, then `one` for each,
/// `concurrency` in flight, each returning its (writes, conflicts).
async fn each_node<Fut>(
    client: &Client,
    concurrency: usize,
    one: impl Fn(Api<Node>, Slim) -> Fut,
) -> Result<FloorRun, Error>
where
    Fut: std::future::Future<Output = Result<(usize, usize), Error>>,
{
    let started = Instant::now();
    let api: Api<Node> = Api::all(client.clone());
    let nodes = list_slim(&api).await?;
    let results: Vec<(usize, usize)> = futures::stream::iter(nodes)
        .map(|node| one(api.clone(), node))
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await?;
    Ok(FloorRun::of(started, &results))
}

/// The floor of the DRA rows: for each of nodes `0..m`, its ResourceSlice
/// published (`broken` or healthy, as the bench's driver does for gpuready),
/// then the floor's taint put on (`broken`) or taken off that node: the two
/// writes a slice change and the node's reaction to it cost at least, each
/// node's pair in order, `concurrency` nodes in flight.
pub async fn run_after_slices(
    client: &Client,
    concurrency: usize,
    m: usize,
    broken: bool,
) -> Result<FloorRun, Error> {
    let started = Instant::now();
    let api: Api<Node> = Api::all(client.clone());
    let slices = crate::fleet::slice_api(client);
    let wanted: std::collections::BTreeMap<String, usize> =
        (0..m).map(|i| (crate::fleet::node_name(i), i)).collect();
    let nodes: Vec<(usize, Slim)> = list_slim(&api)
        .await?
        .into_iter()
        .filter_map(|n| Some((*wanted.get(&n.name)?, n)))
        .collect();
    let results: Vec<(usize, usize)> = futures::stream::iter(nodes)
        .map(|(i, node)| {
            let (api, slices) = (api.clone(), slices.clone());
            async move {
                crate::fleet::put_slice(&slices, i, broken).await?;
                let (w, c) = set_taint(&api, node, broken).await?;
                Ok::<_, Error>((w + 1, c))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await?;
    Ok(FloorRun::of(started, &results))
}

/// Puts the floor's taint on `node` (or takes it off): one resourceVersion-
/// locked merge patch, re-read and retried on 409. Returns (writes, conflicts).
async fn set_taint(api: &Api<Node>, node: Slim, taint: bool) -> Result<(usize, usize), Error> {
    set_taint_with(api, node, taint, None).await
}

/// [`set_taint`], the patch carrying `labels` too (the floor's labels and
/// annotation, as [`floor_labels`] gives them) when it is sent.
async fn set_taint_with(
    api: &Api<Node>,
    node: Slim,
    taint: bool,
    labels: Option<&serde_json::Value>,
) -> Result<(usize, usize), Error> {
    let (written, conflicts) = taint_locked(api, node, taint, labels).await?;
    Ok((usize::from(written.is_some()), conflicts))
}

/// [`set_taint_with`]'s write. Returns the node as written (`None`: nothing
/// to write) and the conflicts met.
async fn taint_locked(
    api: &Api<Node>,
    node: Slim,
    taint: bool,
    labels: Option<&serde_json::Value>,
) -> Result<(Option<Node>, usize), Error> {
    locked(api, node, |node| {
        let mut list = node.taints.clone();
        let has = list.iter().any(|t| t.key == FLOOR_TAINT);
        if has == taint {
            return None;
        }
        if taint {
            list.push(Taint {
                key: FLOOR_TAINT.into(),
                value: Some("broken".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            });
        } else {
            list.retain(|t| t.key != FLOOR_TAINT);
        }
        let mut metadata = labels.cloned().unwrap_or_else(|| json!({}));
        metadata["resourceVersion"] = json!(node.resource_version);
        Some(json!({ "metadata": metadata, "spec": { "taints": taint_list(&list) } }))
    })
    .await
}

/// A taint list as a merge patch writes it: `null` for none.
fn taint_list(list: &[Taint]) -> serde_json::Value {
    if list.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::to_value(list).unwrap_or(serde_json::Value::Null)
    }
}

/// One resourceVersion-locked merge patch of `node`, planned by `plan` from
/// the node as last read (`None`: nothing to write), and on 409 read again
/// and planned again. Returns the node as written (`None` when there was
/// nothing to write) and the conflicts met.
async fn locked(
    api: &Api<Node>,
    node: Slim,
    plan: impl Fn(&Slim) -> Option<serde_json::Value>,
) -> Result<(Option<Node>, usize), Error> {
    let mut node = node;
    let mut conflicts = 0;
    loop {
        let Some(patch) = plan(&node) else {
            return Ok((None, conflicts));
        };
        match api
            .patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => return Ok((Some(written), conflicts)),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                conflicts += 1;
                node = slim(&api.get(&node.name).await?);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// One resourceVersion-locked strategic merge patch of `node`'s conditions
/// (`conditions`: the list's items, keyed by type) on the status
/// subresource, locked to `version`; on 409 the version is read again.
/// Returns the conflicts met.
async fn locked_conditions(
    api: &Api<Node>,
    name: &str,
    version: Option<String>,
    conditions: serde_json::Value,
) -> Result<usize, Error> {
    let mut version = version;
    let mut conflicts = 0;
    loop {
        let patch = json!({
            "metadata": { "resourceVersion": version },
            "status": { "conditions": conditions },
        });
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => return Ok(conflicts),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                conflicts += 1;
                version = api.get(name).await?.resource_version();
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The floor's own keys for [`converge`] and [`untaint_with_labels`]: three
/// labels, an annotation and a condition type, the shape of what gpuready
/// writes on a healthy node (its verdict and profile labels and the profile's
/// `readyLabels`, the annotation that lists the last, `GpuReady`), so they
/// cost the API server what gpuready's do and never meet them.
const FLOOR_READY_LABEL: &str = "bench.example.com/floor-ready";
const FLOOR_PROFILE_LABEL: &str = "bench.example.com/floor-profile";
const FLOOR_POOL_LABEL: &str = "bench.example.com/floor-gpu";
const FLOOR_LABELS_ANNOTATION: &str = "bench.example.com/floor-labels";
const FLOOR_CONDITION: &str = "BenchFloorReady";

/// The floor's labels and annotation as a merge patch sets them (`undo`:
/// takes them off).
fn floor_labels(undo: bool) -> serde_json::Value {
    if undo {
        json!({
            "labels": { FLOOR_READY_LABEL: null, FLOOR_PROFILE_LABEL: null, FLOOR_POOL_LABEL: null },
            "annotations": { FLOOR_LABELS_ANNOTATION: null },
        })
    } else {
        json!({
            "labels": { FLOOR_READY_LABEL: "true", FLOOR_PROFILE_LABEL: "bench", FLOOR_POOL_LABEL: "rtx3090" },
            "annotations": { FLOOR_LABELS_ANNOTATION: FLOOR_POOL_LABEL },
        })
    }
}

/// The floor of gpuready's first verdict on a healthy node registered
/// tainted: the floor's taint off together with its labels and annotation, in
/// one resourceVersion-locked merge patch a node (409 → re-read, again),
/// `concurrency` in flight. [`unlabel`] takes the labels off again (setup).
pub async fn untaint_with_labels(client: &Client, concurrency: usize) -> Result<FloorRun, Error> {
    let labels = &floor_labels(false);
    each_node(client, concurrency, move |api, node| async move {
        set_taint_with(&api, node, false, Some(labels)).await
    })
    .await
}

/// The floor of a start-up on a healthy fleet: what gpuready must write to
/// converge a node it has not seen, nothing more — with `untaint` (a fleet
/// registered tainted), first its taint off alone, as gpuready's first verdict
/// goes while other nodes' taints are pending; then one resourceVersion-locked
/// merge patch of the labels and the annotation, then one strategic merge
/// patch of the condition on the status subresource, each locked to the
/// version the one before returned (409 → re-read, again) — each node's
/// writes in order, `concurrency` nodes in flight. `undo` takes the labels and
/// the condition off again the same way (setup for the next phase, not a
/// measured floor).
pub async fn converge(
    client: &Client,
    concurrency: usize,
    undo: bool,
    untaint: bool,
) -> Result<FloorRun, Error> {
    each_node(client, concurrency, move |api, node| async move {
        converge_one(&api, node, undo, untaint).await
    })
    .await
}

/// The floor's labels and annotation put on `node` (`undo`: taken off), one
/// locked merge patch. Returns the node as written and the conflicts met.
async fn label_one(
    api: &Api<Node>,
    node: Slim,
    undo: bool,
) -> Result<(Option<Node>, usize), Error> {
    locked(api, node, |node| {
        let mut metadata = floor_labels(undo);
        metadata["resourceVersion"] = json!(node.resource_version);
        Some(json!({ "metadata": metadata }))
    })
    .await
}

/// Takes the floor's labels and annotation off every node, one write a node
/// (setup after [`untaint_with_labels`]).
pub async fn unlabel(client: &Client, concurrency: usize) -> Result<FloorRun, Error> {
    each_node(client, concurrency, |api, node| async move {
        let (written, conflicts) = label_one(&api, node, true).await?;
        Ok((usize::from(written.is_some()), conflicts))
    })
    .await
}

/// One node's writes for [`converge`]. Returns (writes, conflicts).
async fn converge_one(
    api: &Api<Node>,
    node: Slim,
    undo: bool,
    untaint: bool,
) -> Result<(usize, usize), Error> {
    let name = node.name.clone();
    let (node, untainted, before) = if untaint {
        let (written, conflicts) = taint_locked(api, node.clone(), false, None).await?;
        let wrote = written.is_some();
        (
            written.as_ref().map_or(node, slim),
            usize::from(wrote),
            conflicts,
        )
    } else {
        (node, 0, 0)
    };
    let (written, first) = label_one(api, node, undo).await?;
    let now = jiff::Timestamp::now().to_string();
    let condition = if undo {
        json!({ "type": FLOOR_CONDITION, "$patch": "delete" })
    } else {
        json!({
            "type": FLOOR_CONDITION, "status": "True", "reason": "Ready",
            "message": "every gating layer is Ready under GpuNodeProfile rtx3090",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        })
    };
    let version = written.and_then(|n| n.resource_version());
    let second = locked_conditions(api, &name, version, json!([condition])).await?;
    Ok((untainted + 2, before + first + second))
}

/// Takes back everything gpuready wrote to every node — its labels, its
/// annotations, its conditions — and, with `taint`, puts its readiness taint
/// back as kubelet's `--register-with-taints` put it: the fleet as gpuready
/// first met it, for the next start-up (setup, not a measured floor; gpuready
/// is stopped meanwhile). Two writes a node, `concurrency` nodes in flight.
pub async fn forget_gpuready(
    client: &Client,
    concurrency: usize,
    taint: Option<&str>,
) -> Result<FloorRun, Error> {
    use gpuready_api::keys;
    let labels: serde_json::Map<String, serde_json::Value> = keys::NODE_LABELS_WRITTEN
        .iter()
        .copied()
        .chain([crate::fleet::READY_LABEL])
        .map(|k| (k.to_owned(), serde_json::Value::Null))
        .collect();
    let annotations: serde_json::Map<String, serde_json::Value> = keys::NODE_ANNOTATIONS_WRITTEN
        .iter()
        .map(|k| ((*k).to_owned(), serde_json::Value::Null))
        .collect();
    let conditions: Vec<serde_json::Value> =
        [keys::CONDITION_GPU_READY, keys::CONDITION_PROBE_HEALTHY]
            .iter()
            .map(|t| json!({ "type": t, "$patch": "delete" }))
            .collect();
    let (labels, annotations, conditions) = (&labels, &annotations, &conditions);
    each_node(client, concurrency, move |api, node| async move {
        let name = node.name.clone();
        let (written, first) = locked(&api, node, |node| {
            let mut list: Vec<Taint> = node
                .taints
                .iter()
                .filter(|t| taint.is_none_or(|k| t.key != k))
                .cloned()
                .collect();
            if let Some(key) = taint {
                list.push(Taint {
                    key: key.into(),
                    value: Some("true".into()),
                    effect: "NoSchedule".into(),
                    time_added: None,
                });
            }
            Some(json!({
                "metadata": {
                    "resourceVersion": node.resource_version,
                    "labels": labels,
                    "annotations": annotations,
                },
                "spec": { "taints": taint_list(&list) },
            }))
        })
        .await?;
        let version = written.and_then(|n| n.resource_version());
        let second = locked_conditions(&api, &name, version, json!(conditions)).await?;
        Ok((2, first + second))
    })
    .await
}

/// The floor of the join-storm rows: a watch on every Node that takes the
/// floor's taint off each node that carries it (one resourceVersion-locked
/// patch, `concurrency` in flight), until aborted. `listed` fires once the
/// watch's first list is in: nodes created after it are seen as they join.
pub async fn untaint_joiners(
    client: Client,
    concurrency: usize,
    listed: tokio::sync::oneshot::Sender<()>,
    spent: std::sync::Arc<WriteTime>,
) -> Result<(), Error> {
    use kube::runtime::{WatchStreamExt, watcher};
    let api: Api<Node> = Api::all(client);
    let mut listed = Some(listed);
    let joined = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .filter_map(|e| {
            let node = match e {
                Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => Some(n),
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                    None
                }
                _ => None,
            };
            let tainted = node.filter(|n| taints(n).iter().any(|t| t.key == FLOOR_TAINT));
            std::future::ready(tainted.map(|n| slim(&n)))
        })
        .map(|node| {
            let (api, spent) = (api.clone(), spent.clone());
            async move {
                let began = Instant::now();
                let done = set_taint(&api, node, false).await;
                spent.add(began.elapsed());
                done
            }
        })
        .buffer_unordered(concurrency.max(1));
    let mut joined = std::pin::pin!(joined);
    while let Some(result) = joined.next().await {
        result?;
    }
    Ok(())
}

/// The time the floor's untaints took, each from its first request to its
/// last answer, summed, and how many there were.
#[derive(Debug, Default)]
pub struct WriteTime {
    micros: std::sync::atomic::AtomicU64,
    count: std::sync::atomic::AtomicU64,
}

impl WriteTime {
    fn add(&self, d: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.micros
            .fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    /// The mean untaint.
    pub fn mean(&self) -> Duration {
        use std::sync::atomic::Ordering::Relaxed;
        Duration::from_micros(self.micros.load(Relaxed) / self.count.load(Relaxed).max(1))
    }
}
