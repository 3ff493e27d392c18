//! Evidence read beside the Nodes: DRA ResourceSlices (`resource.k8s.io/v1`),
//! NFD NodeFeatures, gpuready's own DeviceTaintRules, the NVIDIA DRA
//! driver's ComputeDomainCliques (`resource.nvidia.com/v1beta1`) and the
//! scheduler's extended-resource ResourceClaims on devices gpuready taints
//! `NoExecute` (kubernetes #141290: Kubernetes does not evict their pods), each
//! kept in a per-node index by its own watch. The claim watch keeps nothing
//! else of a cluster's claims, and lists again when a device joins that set. A change re-queues only the nodes it
//! names (a ComputeDomainClique names every node of its clique). A source whose API is not served
//! (no DRA, NFD's CRD not installed) is logged once and reads as "not read":
//! the engine turns that into Unknown evidence, and nothing else waits on it.
//!
//! Why `follow` (in `evidence_follow.rs`) is not kube's reflector (as `probe_reports.rs` is): the
//! reconciler reads a source *per node*, and kube's `Store` is keyed by object
//! name only (a ResourceSlice's name is generated, not the node's), so reading
//! one node from it means scanning every object — O(fleet) per reconcile. The
//! per-node index is therefore ours either way, and it must switch at a
//! re-list exactly when the objects do (the re-list's `InitDone`, naming the
//! nodes of every object added, removed or at another resourceVersion, so
//! they alone are re-queued); a reflector beside it would
//! keep a second copy of every object for nothing. `follow` keeps the index
//! with kube's watcher and backoff under it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use gpuready_api::compute_domain::ComputeDomainClique;
use gpuready_api::device_taint_rule::{self, DeviceTaintRule};
use gpuready_api::dra::ResourceSlice;
use gpuready_api::keys;
use gpuready_api::nfd::NodeFeature;
use gpuready_api::resource_claim::ResourceClaim;
use gpuready_core::Evidence;
use gpuready_core::devices::{DeviceKey, no_execute_devices};
use gpuready_core::evidence::{CliqueMembership, ExtendedResourceHold, node_feature_node};
use kube::api::{Api, DynamicObject};
use kube::{Client, ResourceExt};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::controller::mailbox::RequeueSender;
use crate::controller::watch::evidence_follow::follow;
use crate::controller::watch::evidence_index::{Index, SourceState, read};
use crate::readers::{slice_from_dynamic, slice_resource};

/// Evidence indexes the node reconciler reads.
pub struct EvidenceStores {
    slices: RwLock<SourceState<ResourceSlice>>,
    features: RwLock<SourceState<NodeFeature>>,
    /// gpuready's own DeviceTaintRules (label-selected, ownership checked),
    /// per node they were written for.
    rules: RwLock<SourceState<DeviceTaintRule>>,
    /// The DRA driver's ComputeDomainClique entries, per node they name.
    cliques: RwLock<SourceState<CliqueMembership>>,
    /// The devices pods hold as DRA-backed extended resources, per node: only
    /// claims on devices in `no_execute_devices` are kept.
    holds: RwLock<SourceState<Vec<ExtendedResourceHold>>>,
    /// The devices gpuready taints, or is to taint, `NoExecute` (from its own
    /// rules); the claim watch lists again when a device joins.
    no_execute_devices: watch::Sender<BTreeSet<DeviceKey>>,
    /// True once each source (slices, NodeFeatures, rules, cliques) is synced
    /// or known absent.
    settled: watch::Sender<[bool; 4]>,
}

impl Default for EvidenceStores {
    fn default() -> Self {
        EvidenceStores {
            slices: RwLock::new(SourceState::Pending),
            features: RwLock::new(SourceState::Pending),
            rules: RwLock::new(SourceState::Pending),
            cliques: RwLock::new(SourceState::Pending),
            holds: RwLock::new(SourceState::Pending),
            no_execute_devices: watch::Sender::new(BTreeSet::new()),
            settled: watch::Sender::new([false; 4]),
        }
    }
}

impl EvidenceStores {
    /// The evidence bundle of one node, from what the watches hold now.
    pub fn for_node(&self, node: &str) -> Evidence {
        let slices: Option<Vec<ResourceSlice>> = read(&self.slices, node);
        let features: Option<Vec<NodeFeature>> = read(&self.features, node);
        let slice_refs: Option<Vec<&ResourceSlice>> = slices.as_ref().map(|v| v.iter().collect());
        let feature_refs: Option<Vec<&NodeFeature>> = features.as_ref().map(|v| v.iter().collect());
        let mut e = Evidence::for_node(node, slice_refs.as_deref(), feature_refs.as_deref())
            .with_device_rules(read(&self.rules, node))
            .with_extended_resource_holds(
                read(&self.holds, node).map(|h| h.into_iter().flatten().collect()),
            );
        e.compute_domains = read(&self.cliques, node);
        e
    }

    /// Waits (bounded) until every source is listed or known absent, so a DRA
    /// node is not judged by the device plugin's rules at start-up and tainted
    /// for a moment.
    pub async fn wait_settled(&self, limit: Duration) {
        let mut rx = self.settled.subscribe();
        if tokio::time::timeout(limit, rx.wait_for(|s| s.iter().all(|x| *x)))
            .await
            .is_err()
        {
            warn!("DRA/NFD evidence not listed after {limit:?}; judging with what is known");
            // Once: later reconciles must not each wait for a source that
            // cannot be listed (it still counts as "not read" until it is).
            self.settled.send_modify(|s| *s = [true; 4]);
        }
    }
}

/// What every evidence watch task holds: one clone each.
#[derive(Clone)]
struct Watch {
    client: Client,
    stores: Arc<EvidenceStores>,
    requeue: RequeueSender,
    stop: CancellationToken,
}

/// A source's index in [`EvidenceStores`]: a plain function, so each task
/// reaches it through its own clone of the stores.
type StateOf<T> = fn(&EvidenceStores) -> &RwLock<SourceState<T>>;

/// How a source's object becomes its per-node entries.
type Entries<K, T> = Box<dyn Fn(K) -> Vec<(String, T)> + Send + Sync>;

/// What a source does after its index changed, beyond re-queuing.
type OnChange<T> = Box<dyn Fn(&Index<T>) + Send + Sync>;

/// What one evidence watch does differently from the others; `Watch::start`
/// supplies the rest, so the five watches are started one way.
struct Source<K, T> {
    kind: &'static str,
    api: Api<K>,
    labels: Option<String>,
    key: fn(&K) -> String,
    entries: Entries<K, T>,
    state: StateOf<T>,
    /// Its slot in `settled`; `None` where start-up does not wait for it.
    settled: Option<usize>,
    changed: OnChange<T>,
    relist: Option<Arc<Notify>>,
}

impl<K, T> Source<K, T> {
    /// A source nothing waits for at start-up, unfiltered, with nothing to do
    /// on a change but re-queue: the builders below add what differs.
    fn new(
        kind: &'static str,
        api: Api<K>,
        key: fn(&K) -> String,
        entries: impl Fn(K) -> Vec<(String, T)> + Send + Sync + 'static,
        state: StateOf<T>,
    ) -> Self {
        Source {
            kind,
            api,
            labels: None,
            key,
            entries: Box::new(entries),
            state,
            settled: None,
            changed: Box::new(|_| {}),
            relist: None,
        }
    }

    fn labels(mut self, labels: Option<String>) -> Self {
        self.labels = labels;
        self
    }

    fn settles(mut self, slot: usize) -> Self {
        self.settled = Some(slot);
        self
    }

    fn on_change(mut self, changed: impl Fn(&Index<T>) + Send + Sync + 'static) -> Self {
        self.changed = Box::new(changed);
        self
    }

    fn relist(mut self, relist: Arc<Notify>) -> Self {
        self.relist = Some(relist);
        self
    }
}

impl Watch {
    /// Spawns `follow` for one source with this watch's clones.
    fn start<K, T>(&self, s: Source<K, T>) -> tokio::task::JoinHandle<()>
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
        K: Send + Sync + 'static,
        T: Send + Sync + 'static,
    {
        let w = self.clone();
        tokio::spawn(async move {
            let stores = &w.stores;
            let settle = |a| {
                if let Some(i) = s.settled {
                    stores.settled.send_modify(|x| x[i] = a);
                }
            };
            follow(
                s.kind,
                s.api,
                s.labels,
                s.key,
                s.entries,
                (s.state)(stores),
                settle,
                s.changed,
                s.relist,
                w.requeue,
                w.stop,
            )
            .await;
        })
    }
}

/// Starts the evidence watches. Each node whose evidence changes is sent on
/// `requeue`; each watch marks its slot of `settled` (0 slices, 1 NodeFeatures,
/// 2 DeviceTaintRules, 3 ComputeDomainCliques).
pub fn spawn(
    client: Client,
    stores: Arc<EvidenceStores>,
    metrics: Arc<crate::controller::metrics::Metrics>,
    requeue: RequeueSender,
    stop: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let watch = Watch {
        client,
        stores,
        requeue,
        stop,
    };
    let slices = watch.start(
        Source::new(
            "ResourceSlice",
            Api::all_with(watch.client.clone(), &slice_resource()),
            |o: &DynamicObject| o.name_any(),
            |o| one_node(slice_from_dynamic(o), |s| s.spec.node_name.clone()),
            |s| &s.slices,
        )
        .settles(0),
    );
    let rules = watch.start(rules_source(&watch, metrics));
    let relist = Arc::new(Notify::new());
    let relister = tokio::spawn(relist_on_growth(
        watch.stores.no_execute_devices.subscribe(),
        relist.clone(),
        watch.stop.clone(),
    ));
    let wanted = watch.stores.no_execute_devices.subscribe();
    // Not waited for at start-up: until listed, no pod is counted.
    let claims = watch.start(
        Source::new(
            "ResourceClaim",
            Api::all(watch.client.clone()),
            |c: &ResourceClaim| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()),
            move |c| holds_on(&c, &wanted.borrow()),
            |s| &s.holds,
        )
        .relist(relist),
    );
    let features = watch.start(
        Source::new(
            "NodeFeature",
            Api::all(watch.client.clone()),
            |f: &NodeFeature| format!("{}/{}", f.namespace().unwrap_or_default(), f.name_any()),
            |f| one_node(Some(f), |f| node_feature_node(f).map(str::to_owned)),
            |s| &s.features,
        )
        .settles(1),
    );
    // One ComputeDomainClique names many nodes: indexed by each node it names.
    let cliques = watch.start(
        Source::new(
            "ComputeDomainClique",
            Api::all(watch.client.clone()),
            ComputeDomainClique::key,
            |c| CliqueMembership::of_clique(&c),
            |s| &s.cliques,
        )
        .settles(3),
    );
    vec![slices, features, rules, cliques, claims, relister]
}

/// gpuready's own DeviceTaintRules: each change also updates the rule gauge
/// and the set of devices tainted `NoExecute`.
fn rules_source(
    watch: &Watch,
    metrics: Arc<crate::controller::metrics::Metrics>,
) -> Source<DeviceTaintRule, DeviceTaintRule> {
    let stores = watch.stores.clone();
    Source::new(
        "DeviceTaintRule",
        Api::all(watch.client.clone()),
        |r: &DeviceTaintRule| r.name_any(),
        // Only rules with gpuready's label AND name prefix are gpuready's.
        |r: DeviceTaintRule| {
            one_node(device_taint_rule::is_owned(&r).then_some(r), |r| {
                device_taint_rule::node_of(r).map(str::to_owned)
            })
        },
        |s| &s.rules,
    )
    .labels(owned_rule_selector())
    .settles(2)
    .on_change(move |idx| {
        metrics
            .device_taint_rules
            .set(i64::try_from(idx.len()).unwrap_or(i64::MAX));
        let devices = no_execute_devices(idx.by_node.values().flat_map(BTreeMap::values));
        stores.no_execute_devices.send_if_modified(|d| {
            let changed = *d != devices;
            *d = devices;
            changed
        });
    })
}

/// The holds of an extended-resource claim on devices in `wanted`, per node
/// (one entry per node and claim: the index keeps one entry per object and
/// node): any other claim, most of a cluster's, is dropped as it arrives.
fn holds_on(
    c: &ResourceClaim,
    wanted: &BTreeSet<DeviceKey>,
) -> Vec<(String, Vec<ExtendedResourceHold>)> {
    if !c.is_extended_resource_claim() || wanted.is_empty() {
        return Vec::new();
    }
    let mut by_node: BTreeMap<String, Vec<ExtendedResourceHold>> = BTreeMap::new();
    for (node, h) in ExtendedResourceHold::of_claim(c) {
        if wanted.contains(&(h.driver.clone(), h.pool.clone(), h.device.clone())) {
            by_node.entry(node).or_default().push(h);
        }
    }
    by_node.into_iter().collect()
}

/// How long the claim watch waits after a device joins the `NoExecute` set
/// before it lists again, so a burst of new escalation rules costs one list.
const RELIST_DELAY: Duration = Duration::from_secs(2);

/// Asks the claim watch to list again whenever a device joins the set of
/// devices gpuready taints `NoExecute`: the claims on it were dropped as they
/// arrived, before the device was in the set. A device leaving needs nothing
/// (its entries go with the next list; the engine reads holds only on bad
/// devices).
async fn relist_on_growth(
    mut devices: watch::Receiver<BTreeSet<DeviceKey>>,
    relist: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut known = devices.borrow_and_update().clone();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            r = devices.changed() => if r.is_err() { return },
        }
        let now = devices.borrow_and_update().clone();
        if now.is_subset(&known) {
            known = now;
            continue;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(RELIST_DELAY) => {}
        }
        known = devices.borrow_and_update().clone();
        debug!(
            devices = known.len(),
            "a device joined gpuready's NoExecute set: listing ResourceClaims again"
        );
        relist.notify_one();
    }
}

/// The entry of a source whose object names one node (`None`: it is not one
/// gpuready reads, or names no node).
fn one_node<T>(o: Option<T>, node_of: impl Fn(&T) -> Option<String>) -> Vec<(String, T)> {
    o.and_then(|o| Some((node_of(&o)?, o)))
        .into_iter()
        .collect()
}

/// The label selector of gpuready's DeviceTaintRules (the watch reads no other).
fn owned_rule_selector() -> Option<String> {
    Some(format!(
        "{}={}",
        keys::device_rules::LABEL_OWNED,
        keys::device_rules::LABEL_OWNED_VALUE
    ))
}

#[cfg(test)]
mod tests;
