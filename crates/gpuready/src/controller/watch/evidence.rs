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
//! Why [`follow`] is not kube's reflector (as `probe_reports.rs` is): the
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

use futures::StreamExt;
use gpuready_api::compute_domain::ComputeDomainClique;
use gpuready_api::device_taint_rule::{self, DeviceTaintRule};
use gpuready_api::dra::ResourceSlice;
use gpuready_api::keys;
use gpuready_api::nfd::NodeFeature;
use gpuready_api::resource_claim::ResourceClaim;
use gpuready_core::Evidence;
use gpuready_core::devices::{DeviceKey, no_execute_devices};
use gpuready_core::evidence::{CliqueMembership, ExtendedResourceHold, node_feature_node};
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::controller::mailbox::RequeueSender;
use crate::readers::{slice_from_dynamic, slice_resource};

/// How often an absent API is looked for again (DRA enabled or NFD installed
/// after gpuready started).
/// One LIST a minute while absent: gpuready itself may install the NodeFeature
/// CRD (`--nfd-crds=apply`) just after it starts.
const REDISCOVER: Duration = Duration::from_secs(60);

/// One source's entries, per node, by object key, and the reverse map: for
/// each object, its resourceVersion and the nodes it names (one
/// ComputeDomainClique names many nodes). An update or deletion touches only
/// the nodes the object named or names, and a re-list only the nodes of the
/// objects that differ: the work of a change is O(what changed), never a walk
/// of the index.
#[derive(Debug)]
struct Index<T> {
    by_node: BTreeMap<String, BTreeMap<String, T>>,
    nodes_of: BTreeMap<String, Named>,
    /// Entries in all, kept as they come and go (the DeviceTaintRule gauge
    /// reads it after every change).
    entries: usize,
}

/// What the reverse map keeps of one object.
#[derive(Debug, Default, PartialEq, Eq)]
struct Named {
    /// The object's resourceVersion (`None` if the server sent none): equal
    /// at a re-list means the same object, so its nodes are not re-queued.
    version: Option<String>,
    nodes: BTreeSet<String>,
}

impl<T> Default for Index<T> {
    fn default() -> Self {
        Index {
            by_node: BTreeMap::new(),
            nodes_of: BTreeMap::new(),
            entries: 0,
        }
    }
}

impl<T> Index<T> {
    /// The object `key`, at resourceVersion `version`, now has these entries
    /// (none: it is gone, or names no node). Returns every node whose entries
    /// changed: those it named before and those it names now.
    fn put(
        &mut self,
        key: &str,
        version: Option<String>,
        entries: Vec<(String, T)>,
    ) -> BTreeSet<String> {
        let mut touched = self.nodes_of.remove(key).unwrap_or_default().nodes;
        for n in &touched {
            if let Some(objs) = self.by_node.get_mut(n) {
                if objs.remove(key).is_some() {
                    self.entries -= 1;
                }
                if objs.is_empty() {
                    self.by_node.remove(n);
                }
            }
        }
        let mut now = BTreeSet::new();
        for (n, e) in entries {
            if self
                .by_node
                .entry(n.clone())
                .or_default()
                .insert(key.to_owned(), e)
                .is_none()
            {
                self.entries += 1;
            }
            now.insert(n);
        }
        touched.extend(now.iter().cloned());
        if !now.is_empty() {
            self.nodes_of.insert(
                key.to_owned(),
                Named {
                    version,
                    nodes: now,
                },
            );
        }
        touched
    }

    /// Entries in all.
    fn len(&self) -> usize {
        self.entries
    }

    /// The nodes whose entries differ between `self` (before a re-list) and
    /// `fresh` (the re-list): the nodes of every object added, removed, or at
    /// another resourceVersion. One pass over both objects' maps, as the
    /// re-list's LIST is one pass over the objects; an unchanged object
    /// re-queues nothing.
    fn changed_in(&self, fresh: &Index<T>) -> BTreeSet<String> {
        let mut touched = BTreeSet::new();
        for (key, was) in &self.nodes_of {
            if fresh.nodes_of.get(key) != Some(was) {
                touched.extend(was.nodes.iter().cloned());
            }
        }
        for (key, now) in &fresh.nodes_of {
            if self.nodes_of.get(key) != Some(now) {
                touched.extend(now.nodes.iter().cloned());
            }
        }
        touched
    }
}

/// What a source's watch has established.
#[derive(Debug)]
enum SourceState<T> {
    /// Not listed yet.
    Pending,
    /// The API is not served (or not readable): "not read".
    Absent,
    Synced(Index<T>),
}

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

fn read<T: Clone>(state: &RwLock<SourceState<T>>, node: &str) -> Option<Vec<T>> {
    match &*state.read().ok()? {
        SourceState::Synced(idx) => Some(
            idx.by_node
                .get(node)
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default(),
        ),
        SourceState::Pending | SourceState::Absent => None,
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
    let w = watch.clone();
    let slices = tokio::spawn(async move {
        let api: Api<DynamicObject> = Api::all_with(w.client, &slice_resource());
        follow(
            "ResourceSlice",
            api,
            None,
            |o: &DynamicObject| o.name_any(),
            |o| one_node(slice_from_dynamic(o), |s| s.spec.node_name.clone()),
            &w.stores.slices,
            |a| w.stores.settled.send_modify(|s| s[0] = a),
            |_| {},
            None,
            w.requeue,
            w.stop,
        )
        .await;
    });
    let w = watch.clone();
    let rules = tokio::spawn(async move {
        let api: Api<DeviceTaintRule> = Api::all(w.client);
        follow(
            "DeviceTaintRule",
            api,
            owned_rule_selector(),
            |r: &DeviceTaintRule| r.name_any(),
            // Only rules with gpuready's label AND name prefix are gpuready's.
            |r: DeviceTaintRule| {
                one_node(device_taint_rule::is_owned(&r).then_some(r), |r| {
                    device_taint_rule::node_of(r).map(str::to_owned)
                })
            },
            &w.stores.rules,
            |a| w.stores.settled.send_modify(|s| s[2] = a),
            |idx| {
                metrics
                    .device_taint_rules
                    .set(i64::try_from(idx.len()).unwrap_or(i64::MAX));
                let devices = no_execute_devices(idx.by_node.values().flat_map(BTreeMap::values));
                w.stores.no_execute_devices.send_if_modified(|d| {
                    let changed = *d != devices;
                    *d = devices;
                    changed
                });
            },
            None,
            w.requeue,
            w.stop,
        )
        .await;
    });
    let w = watch.clone();
    let relist = Arc::new(Notify::new());
    let relister = tokio::spawn(relist_on_growth(
        w.stores.no_execute_devices.subscribe(),
        relist.clone(),
        w.stop.clone(),
    ));
    let claims = tokio::spawn(async move {
        let api: Api<ResourceClaim> = Api::all(w.client);
        let wanted = w.stores.no_execute_devices.subscribe();
        follow(
            "ResourceClaim",
            api,
            None,
            |c: &ResourceClaim| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()),
            |c| holds_on(&c, &wanted.borrow()),
            &w.stores.holds,
            // Not waited for at start-up: until listed, no pod is counted.
            |_| {},
            |_| {},
            Some(relist),
            w.requeue,
            w.stop,
        )
        .await;
    });
    let w = watch.clone();
    let features = tokio::spawn(async move {
        let api: Api<NodeFeature> = Api::all(w.client);
        follow(
            "NodeFeature",
            api,
            None,
            |f: &NodeFeature| format!("{}/{}", f.namespace().unwrap_or_default(), f.name_any()),
            |f| one_node(Some(f), |f| node_feature_node(f).map(str::to_owned)),
            &w.stores.features,
            |a| w.stores.settled.send_modify(|s| s[1] = a),
            |_| {},
            None,
            w.requeue,
            w.stop,
        )
        .await;
    });
    // One ComputeDomainClique names many nodes: indexed by each node it names.
    let w = watch;
    let cliques = tokio::spawn(async move {
        let api: Api<ComputeDomainClique> = Api::all(w.client);
        follow(
            "ComputeDomainClique",
            api,
            None,
            ComputeDomainClique::key,
            |c| CliqueMembership::of_clique(&c),
            &w.stores.cliques,
            |a| w.stores.settled.send_modify(|s| s[3] = a),
            |_| {},
            None,
            w.requeue,
            w.stop,
        )
        .await;
    });
    vec![slices, features, rules, cliques, claims, relister]
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

/// Finds out whether the API is served, then keeps `state` in step with the
/// watch, re-queuing the nodes whose objects changed.
#[allow(clippy::too_many_arguments)]
async fn follow<K, T>(
    kind: &'static str,
    api: Api<K>,
    labels: Option<String>,
    key: impl Fn(&K) -> String,
    entries: impl Fn(K) -> Vec<(String, T)>,
    state: &RwLock<SourceState<T>>,
    settled: impl Fn(bool),
    changed: impl Fn(&Index<T>),
    relist: Option<Arc<Notify>>,
    requeue: RequeueSender,
    stop: CancellationToken,
) where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let absent = || {
        set(state, SourceState::Absent);
        settled(true);
    };
    if !served(kind, &api, labels.as_deref(), absent, &stop).await {
        return;
    }
    info!(kind, "watching as evidence");
    let mut buffer: Index<T> = Index::default();
    let mut config = watcher::Config::default();
    if let Some(l) = &labels {
        config = config.labels(l);
    }
    let mut events = std::pin::pin!(watcher(api.clone(), config.clone()).default_backoff());
    loop {
        let ev = tokio::select! {
            _ = stop.cancelled() => return,
            () = asked(relist.as_deref()) => {
                // A fresh watcher lists again; its `InitDone` swaps the index
                // and re-queues the nodes whose entries differ.
                events.set(watcher(api.clone(), config.clone()).default_backoff());
                continue;
            }
            ev = events.next() => ev,
        };
        let Some(ev) = ev else { return };
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                warn!(kind, error = %e, "watch failed; the watcher retries with backoff");
                continue;
            }
        };
        let mut touched = BTreeSet::new();
        match ev {
            Event::Init => buffer = Index::default(),
            Event::InitApply(o) => {
                let (k, v) = (key(&o), o.resource_version());
                buffer.put(&k, v, entries(o));
            }
            Event::InitDone => {
                // A re-list: the nodes of the objects that differ. The first
                // list (or one after the API was absent): every node it names,
                // since a reconcile may have judged them without it.
                let fresh = std::mem::take(&mut buffer);
                if let Ok(mut s) = state.write() {
                    match &*s {
                        SourceState::Synced(old) => touched = old.changed_in(&fresh),
                        SourceState::Pending | SourceState::Absent => {
                            touched.extend(fresh.by_node.keys().cloned());
                        }
                    }
                    *s = SourceState::Synced(fresh);
                }
                settled(true);
            }
            // An object that moved to other nodes (or stopped naming one)
            // leaves the nodes it named before.
            Event::Apply(o) => {
                let (k, v) = (key(&o), o.resource_version());
                let e = entries(o);
                if let Ok(mut s) = state.write()
                    && let SourceState::Synced(idx) = &mut *s
                {
                    touched = idx.put(&k, v, e);
                }
            }
            Event::Delete(o) => {
                if let Ok(mut s) = state.write()
                    && let SourceState::Synced(idx) = &mut *s
                {
                    touched = idx.put(&key(&o), None, Vec::new());
                }
            }
        }
        if !touched.is_empty()
            && let Ok(SourceState::Synced(idx)) = state.read().as_deref()
        {
            changed(idx);
        }
        for n in touched {
            requeue.requeue(&n);
        }
    }
}

/// Waits until the API answers a LIST (of one object): `true` then, `false`
/// if stopped first. While it is not served or not readable (404, 403),
/// `absent` is called and the API is looked for again every [`REDISCOVER`].
pub(crate) async fn served<K>(
    kind: &'static str,
    api: &Api<K>,
    labels: Option<&str>,
    absent: impl Fn(),
    stop: &CancellationToken,
) -> bool
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut logged = false;
    loop {
        let mut probe = ListParams::default().limit(1);
        if let Some(l) = labels {
            probe = probe.labels(l);
        }
        match api.list(&probe).await {
            Ok(_) => return true,
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
                if !logged {
                    warn!(
                        kind,
                        code = s.code,
                        "not served or not readable: this evidence is Unknown; looking again every {}s",
                        REDISCOVER.as_secs()
                    );
                    logged = true;
                }
                absent();
            }
            Err(e) => {
                debug!(kind, error = %e, "probing the API failed; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return false,
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
                continue;
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(REDISCOVER) => {}
        }
    }
}

/// Resolves when `relist` is notified; never without one.
async fn asked(relist: Option<&Notify>) {
    match relist {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

fn set<T>(state: &RwLock<SourceState<T>>, new: SourceState<T>) {
    if let Ok(mut s) = state.write() {
        *s = new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(pod: &str, devices: &[&str], extended: bool) -> ResourceClaim {
        let results: Vec<serde_json::Value> = devices
            .iter()
            .map(|d| serde_json::json!({"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": d}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{pod}-extended-resources-x"), "namespace": "ml",
                "annotations": if extended {
                    serde_json::json!({"resource.kubernetes.io/extended-resource-claim": "true"})
                } else { serde_json::json!({}) }},
            "status": {"allocation": {"devices": {"results": results}},
                "reservedFor": [{"resource": "pods", "name": pod, "uid": "u"}]}
        }))
        .expect("claim")
    }

    fn key(device: &str) -> DeviceKey {
        ("gpu.nvidia.com".into(), "n1".into(), device.into())
    }

    #[test]
    fn only_extended_resource_claims_on_wanted_devices_are_kept_one_entry_per_node() {
        let wanted: BTreeSet<DeviceKey> = [key("gpu-3"), key("gpu-5")].into();
        // Two wanted devices of one claim: one entry for the node, both holds.
        let kept = holds_on(&claim("p", &["gpu-3", "gpu-5", "gpu-6"], true), &wanted);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].0, "n1", "the pool names the node");
        let devices: Vec<&str> = kept[0].1.iter().map(|h| h.device.as_str()).collect();
        assert_eq!(devices, ["gpu-3", "gpu-5"]);
        assert!(holds_on(&claim("p", &["gpu-6"], true), &wanted).is_empty());
        assert!(
            holds_on(&claim("p", &["gpu-3"], false), &wanted).is_empty(),
            "a pod's own claim"
        );
        assert!(holds_on(&claim("p", &["gpu-3"], true), &BTreeSet::new()).is_empty());
    }

    #[tokio::test]
    async fn the_claim_watch_lists_again_only_when_a_device_joins() {
        let (tx, rx) = watch::channel(BTreeSet::from([key("gpu-3")]));
        let relist = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let task = tokio::spawn(relist_on_growth(rx, relist.clone(), stop.clone()));
        let asked = |ms| {
            let r = relist.clone();
            async move {
                tokio::time::timeout(Duration::from_millis(ms), r.notified())
                    .await
                    .is_ok()
            }
        };
        // A device leaves: nothing to list.
        tx.send_replace(BTreeSet::new());
        assert!(!asked(RELIST_DELAY.as_millis() as u64 + 500).await);
        // Two join at once: one list, after the delay.
        tx.send_replace(BTreeSet::from([key("gpu-3"), key("gpu-4")]));
        assert!(asked(RELIST_DELAY.as_millis() as u64 + 2000).await);
        assert!(!asked(300).await, "asked once");
        stop.cancel();
        task.await.expect("task ends");
    }

    fn names(s: BTreeSet<String>) -> Vec<String> {
        s.into_iter().collect()
    }

    /// Entries of an object naming these nodes.
    fn on(nodes: &[&str]) -> Vec<(String, u8)> {
        nodes.iter().map(|n| ((*n).to_owned(), 1)).collect()
    }

    fn v(rv: &str) -> Option<String> {
        Some(rv.to_owned())
    }

    #[test]
    fn an_object_naming_many_nodes_touches_exactly_the_nodes_it_named_or_names() {
        let mut idx: Index<u8> = Index::default();
        assert_eq!(
            names(idx.put("ns/clique", v("1"), on(&["a", "b"]))),
            ["a", "b"]
        );
        assert_eq!(names(idx.put("ns/slice", v("2"), on(&["c"]))), ["c"]);
        // b leaves the clique, d joins: a, b and d, never c.
        assert_eq!(
            names(idx.put("ns/clique", v("3"), on(&["a", "d"]))),
            ["a", "b", "d"]
        );
        assert!(!idx.by_node.contains_key("b"));
        assert_eq!(idx.len(), 3);
        // Deleted: the nodes it named last.
        assert_eq!(names(idx.put("ns/clique", None, Vec::new())), ["a", "d"]);
        assert_eq!(idx.by_node.keys().collect::<Vec<_>>(), ["c"]);
        assert_eq!(idx.len(), 1);
        assert!(idx.put("ns/gone", None, Vec::new()).is_empty());
    }

    /// A fleet of slices, one per node, as a DRA driver publishes them.
    fn fleet(n: usize) -> Index<u8> {
        let mut idx = Index::default();
        for i in 0..n {
            let node = format!("node-{i}");
            idx.put(&format!("slice-{i}"), v("1"), on(&[&node]));
        }
        idx
    }

    #[test]
    fn a_slice_added_touches_only_its_node() {
        let mut idx = fleet(1000);
        let touched = idx.put("slice-new", v("5"), on(&["node-7"]));
        assert_eq!(names(touched), ["node-7"]);
        assert_eq!(idx.by_node["node-7"].len(), 2);
        assert_eq!(idx.len(), 1001);
        // Updated in place (a device taint added): its node only, counted once.
        assert_eq!(
            names(idx.put("slice-new", v("6"), on(&["node-7"]))),
            ["node-7"]
        );
        assert_eq!(idx.len(), 1001);
    }

    #[test]
    fn a_slice_moved_to_another_node_touches_the_old_node_and_the_new_one() {
        let mut idx = fleet(1000);
        let touched = idx.put("slice-3", v("2"), on(&["node-900"]));
        assert_eq!(names(touched), ["node-3", "node-900"]);
        assert!(!idx.by_node.contains_key("node-3"));
        assert_eq!(
            idx.by_node["node-900"].keys().collect::<Vec<_>>(),
            ["slice-3", "slice-900"]
        );
        assert_eq!(idx.len(), 1000);
    }

    #[test]
    fn a_slice_deleted_touches_only_its_node() {
        let mut idx = fleet(1000);
        assert_eq!(names(idx.put("slice-42", None, Vec::new())), ["node-42"]);
        assert!(!idx.by_node.contains_key("node-42"));
        assert!(!idx.nodes_of.contains_key("slice-42"));
        assert_eq!(idx.len(), 999);
        // A slice that names no node (not gpuready's, or no nodeName) touches nothing.
        assert!(idx.put("slice-shared", v("1"), Vec::new()).is_empty());
        assert_eq!(idx.len(), 999);
    }

    #[test]
    fn a_relist_touches_only_the_nodes_of_objects_that_differ() {
        let old = fleet(1000);
        let mut fresh = fleet(1000);
        // Unchanged: nothing to re-queue.
        assert!(old.changed_in(&fresh).is_empty());
        // During the gap: slice-1 updated, slice-2 moved to node-3, slice-4
        // deleted, slice-new created on node-5.
        fresh.put("slice-1", v("9"), on(&["node-1"]));
        fresh.put("slice-2", v("9"), on(&["node-3"]));
        fresh.put("slice-4", None, Vec::new());
        fresh.put("slice-new", v("9"), on(&["node-5"]));
        assert_eq!(
            names(old.changed_in(&fresh)),
            ["node-1", "node-2", "node-3", "node-4", "node-5"]
        );
    }
}
