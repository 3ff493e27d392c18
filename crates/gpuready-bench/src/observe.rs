//! What the benchmark sees of the fleet: a watch that keeps, per node, whether
//! gpuready's taint (and the floor's) is on and what its GpuReady condition
//! says, and publishes the counts so a phase can wait for "every node tainted".
//! A deleted node leaves the counts (the join-storm rows delete their joiners).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gpuready_api::keys;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use crate::error::Error;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeSeen {
    pub tainted: bool,
    /// The floor client's taint (`floor::FLOOR_TAINT`) is on.
    pub floor_tainted: bool,
    /// The GpuReady condition's status: Some(true) True, Some(false) otherwise.
    pub gpu_ready: Option<bool>,
}

#[derive(Clone, Debug, Default)]
pub struct Counts {
    pub nodes: usize,
    pub tainted: usize,
    pub floor_tainted: usize,
    pub condition_true: usize,
    pub condition_false: usize,
    /// Each node's state as last seen.
    pub state: HashMap<String, NodeSeen>,
    /// When each node's taint last went on or off (the single-node reaction:
    /// the condition follows the taint and may wait for the gate).
    pub taint_changed: HashMap<String, Instant>,
    /// The same for the floor's taint (the join-storm rows).
    pub floor_taint_changed: HashMap<String, Instant>,
}

impl Counts {
    /// Moves the counts from `old` (absent: a new node) to `new` (absent:
    /// deleted), noting when either taint changed.
    fn shift(&mut self, name: &str, old: Option<NodeSeen>, new: Option<NodeSeen>) {
        for (v, up) in [(old, false), (new, true)] {
            let Some(v) = v else { continue };
            let bump = |n: &mut usize| *n = if up { *n + 1 } else { n.saturating_sub(1) };
            if v.tainted {
                bump(&mut self.tainted);
            }
            if v.floor_tainted {
                bump(&mut self.floor_tainted);
            }
            match v.gpu_ready {
                Some(true) => bump(&mut self.condition_true),
                Some(false) => bump(&mut self.condition_false),
                None => {}
            }
        }
        let Some(s) = new else {
            self.state.remove(name);
            self.taint_changed.remove(name);
            self.floor_taint_changed.remove(name);
            return;
        };
        let now = Instant::now();
        if old.is_none_or(|o| o.tainted != s.tainted) {
            self.taint_changed.insert(name.to_owned(), now);
        }
        if old.is_none_or(|o| o.floor_tainted != s.floor_tainted) {
            self.floor_taint_changed.insert(name.to_owned(), now);
        }
        self.state.insert(name.to_owned(), s);
    }
}

fn seen(node: &Node) -> NodeSeen {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let has = |key: &str| taints.iter().any(|t| t.key == key);
    NodeSeen {
        tainted: has(keys::DEFAULT_TAINT_KEY),
        floor_tainted: has(crate::floor::FLOOR_TAINT),
        gpu_ready: node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == keys::CONDITION_GPU_READY))
            .map(|c| c.status == "True"),
    }
}

/// Starts the watch; the receiver always holds the latest counts.
pub fn start(client: Client) -> (watch::Receiver<Counts>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(Counts::default());
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(
            watcher(Api::<Node>::all(client), watcher::Config::default()).default_backoff()
        );
        let mut state: HashMap<String, NodeSeen> = HashMap::new();
        while let Some(item) = stream.next().await {
            let (node, deleted) = match item {
                Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => (n, false),
                Ok(watcher::Event::Delete(n)) => (n, true),
                _ => continue,
            };
            let name = node.name_any();
            let new = (!deleted).then(|| seen(&node));
            if state.get(&name).copied() == new {
                continue;
            }
            let old = match new {
                Some(s) => state.insert(name.clone(), s),
                None => state.remove(&name),
            };
            // Counted incrementally: a pass over the fleet per event would make
            // the observer, on the same two cores, slower than what it observes.
            tx.send_modify(|c| {
                c.nodes = state.len();
                c.shift(&name, old, new);
            });
        }
    });
    (rx, task)
}

/// How long any one fleet-wide step may take before the bench gives up.
pub const LONG_WAIT: Duration = Duration::from_secs(3600);

/// Waits until `pred` holds for the observer's counts, printing the counts
/// every 15 s while it waits (a phase at 100,000 nodes takes minutes).
pub async fn wait_counts(
    rx: &mut watch::Receiver<Counts>,
    what: &str,
    limit: Duration,
    pred: impl Fn(&Counts) -> bool,
) -> Result<Instant, Error> {
    let began = Instant::now();
    loop {
        let left = limit.saturating_sub(began.elapsed());
        if left.is_zero() {
            return Err(Error::Timeout(format!("{what} within {limit:?}")));
        }
        let waited = tokio::time::timeout(left.min(PROGRESS), rx.wait_for(|c| pred(c)))
            .await
            .map(|r| r.map(|_| ()));
        match waited {
            Ok(Ok(())) => return Ok(Instant::now()),
            Ok(Err(_)) => return Err(Error::Other("the observer stopped".into())),
            Err(_) if began.elapsed() < limit => {
                let c = rx.borrow();
                eprintln!(
                    "  … waiting for {what} ({:.0?}): nodes {}, gpuready-tainted {}, floor-tainted {}, GpuReady True {} / False {}",
                    began.elapsed(),
                    c.nodes,
                    c.tainted,
                    c.floor_tainted,
                    c.condition_true,
                    c.condition_false
                );
            }
            Err(_) => return Err(Error::Timeout(format!("{what} within {limit:?}"))),
        }
    }
}

/// How often a long wait prints where it stands.
const PROGRESS: Duration = Duration::from_secs(15);
