//! `gpuready run`: watches Nodes and GpuNodeProfiles and keeps each node's
//! taint, labels and conditions in step with its verdict; aggregates profile
//! status; serves metrics and health; elects a leader so only one replica writes.

pub mod config;
pub mod error;
pub mod evidence;
pub mod fence;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod nfd;
pub mod node;
pub mod probe_reports;
pub mod profiles;
pub mod prune;
pub mod requests;
pub mod status;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use gpuready_api::GpuNodeProfile;
use gpuready_api::keys;
use gpuready_core::brake::BrakeState;
use gpuready_core::{GovernanceKind, NodeAssessment, NodeFacts};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::core::SelectorExt;
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::utils::WatchStreamExt;
use kube::runtime::{Controller, PredicateConfig, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use config::RunArgs;
pub use error::Error;
pub use metrics::Metrics;

/// Shared state of one running controller.
pub struct Context {
    pub client: Client,
    pub args: RunArgs,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub profiles: Store<GpuNodeProfile>,
    pub nodes: Store<Node>,
    /// Wakes the status aggregator after node reconciles.
    pub status_dirty: Notify,
    /// True once both caches have been listed. Tasks other than the controller's
    /// own wait on this, never on `Store::wait_until_ready`: kube-runtime's
    /// `DelayedInit` keeps a single waker, so of several tasks waiting on one
    /// store only the last to poll is woken and the others sleep until something
    /// else polls them (a node reconcile stalled until its 30 s timeout).
    pub caches_ready: watch::Receiver<bool>,
    brakes: Mutex<BTreeMap<String, BrakeState>>,
    /// Asks the controller to reconcile a node (see `status::pass`).
    pub requeue: mpsc::UnboundedSender<ObjectRef<Node>>,
    /// Node → resourceVersion gpuready's last write to it returned, until a
    /// reconcile finds the cache at that version.
    last_writes: Mutex<BTreeMap<String, String>>,
    /// The NFD CRD condition every profile carries (set by the NFD reconciler).
    pub nfd: Mutex<Option<(bool, String, String)>>,
    /// ResourceSlices and NodeFeatures per node (see `evidence`).
    pub evidence: Arc<evidence::EvidenceStores>,
    /// Reports of `gpuready probe`, when `--probe-namespace` is set.
    pub probe_reports: Option<probe_reports::ProbeReports>,
}

impl Context {
    pub fn brake_engaged(&self, profile: &str) -> bool {
        self.brakes
            .lock()
            .map(|b| b.get(profile).is_some_and(BrakeState::engaged))
            .unwrap_or(false)
    }

    /// Notes a node that was labelled ready and no longer is (the brake's input).
    pub fn record_turn(&self, facts: &NodeFacts, a: &NodeAssessment, now: Timestamp) {
        let (Some(profile), GovernanceKind::Governed) = (&a.profile, a.governance) else {
            return;
        };
        let Ok(mut brakes) = self.brakes.lock() else {
            return;
        };
        let b = brakes.entry(profile.clone()).or_default();
        if a.ready == Some(true) {
            b.forget(&facts.name);
        } else if facts.labels.get(keys::LABEL_READY).map(String::as_str) == Some("true") {
            b.record_turn(&facts.name, now);
            // Engage at once on a burst; the aggregator refines with fresh counts.
            let matched = self
                .profiles
                .find(|p| p.name_any() == *profile)
                .and_then(|p| {
                    p.status
                        .as_ref()
                        .map(|s| usize::try_from(s.matched_nodes).unwrap_or(0))
                })
                .unwrap_or(0);
            let not_ready = b.recent_turns();
            b.update(&self.args.brake(), matched, not_ready, now);
        }
    }

    pub fn update_brake(
        &self,
        profile: &str,
        matched: usize,
        not_ready: usize,
        now: Timestamp,
    ) -> bool {
        let cfg = self.args.brake();
        self.brakes
            .lock()
            .map(|mut b| {
                b.entry(profile.to_owned())
                    .or_default()
                    .update(&cfg, matched, not_ready, now)
            })
            .unwrap_or(false)
    }

    /// Remembers the resourceVersion gpuready's own write left the node at.
    pub fn note_write(&self, node: &str, resource_version: String) {
        if let Ok(mut w) = self.last_writes.lock() {
            w.insert(node.to_owned(), resource_version);
        }
    }

    /// Whether the cached copy of the node may predate gpuready's last write to
    /// it (it shows another version). Answers once per write: the caller reads
    /// the node from the API when true.
    pub fn cache_may_be_behind(&self, node: &str, cached: Option<&str>) -> bool {
        self.last_writes
            .lock()
            .ok()
            .and_then(|mut w| w.remove(node))
            .is_some_and(|rv| Some(rv.as_str()) != cached)
    }

    /// Waits until both caches have been listed once; false if they never will be.
    pub async fn wait_for_caches(&self) -> bool {
        self.caches_ready.clone().wait_for(|r| *r).await.is_ok()
    }

    /// The node's facts with the evidence read beside it attached: its
    /// ResourceSlices and NodeFeatures, and its probe report (when reports are read).
    pub fn facts_of(&self, node: &Node) -> NodeFacts {
        let name = node.name_any();
        let facts = NodeFacts::from_node(node).with_evidence(self.evidence.for_node(&name));
        let probe = self
            .probe_reports
            .as_ref()
            .and_then(|r| r.evidence(&facts.name));
        facts.with_probe(probe)
    }

    pub fn nfd_condition(&self) -> Option<(bool, String, String)> {
        self.nfd.lock().ok().and_then(|n| n.clone())
    }
}

/// Readiness of this replica, served on /readyz.
#[derive(Default)]
pub struct Health {
    pub crd_established: AtomicBool,
    pub caches_synced: AtomicBool,
    pub standby: AtomicBool,
}

impl Health {
    pub fn ready(&self) -> Result<(), &'static str> {
        if !self.crd_established.load(Ordering::Relaxed) {
            return Err("the GpuNodeProfile CRD is not established yet");
        }
        if self.standby.load(Ordering::Relaxed) || self.caches_synced.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("caches are not synced yet")
        }
    }
}

/// Waits until the GpuNodeProfile CRD exists and is Established.
pub async fn wait_for_crd(client: &Client, stop: &CancellationToken) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = "gpunodeprofiles.gpuready.io";
    let mut warned = false;
    loop {
        let established = api.get_opt(name).await?.is_some_and(|crd| {
            crd.status
                .and_then(|s| s.conditions)
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
        if established {
            return Ok(());
        }
        if !warned {
            warn!(
                "CRD {name} is not installed or not established: install it with `gpuready crd | kubectl apply --server-side -f -` or the Helm chart; waiting"
            );
            warned = true;
        }
        tokio::select! {
            _ = stop.cancelled() => return Err(Error::CrdMissing(name.into())),
            _ = tokio::time::sleep(Duration::from_secs(2)) => {},
        }
    }
}

/// Runs the controller until `stop` is cancelled: waits for the CRD, takes the
/// lease (if enabled), then reconciles through a fenced client — writes pass
/// only while the lease's renewals are fresh. Returns `LostLeadership` when the
/// lease is lost (renewals past the deadline, another holder), so the process
/// exits non-zero and restarts as a candidate with nothing left from its time as
/// leader.
pub async fn run(
    client: Client,
    args: RunArgs,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    stop: CancellationToken,
) -> Result<(), Error> {
    wait_for_crd(&client, &stop).await?;
    health.crd_established.store(true, Ordering::Relaxed);
    if !args.leader_elect {
        metrics.leader.set(1);
        return run_controllers(client, args, metrics, health, stop).await;
    }
    health.standby.store(true, Ordering::Relaxed);
    let Some(lease) = leader::acquire(&client, &args, &stop).await? else {
        return Ok(());
    };
    let fence = fence::Fence::new();
    let work = stop.child_token();
    // The lease is renewed through the plain client (the renewal must pass
    // even when the fence is closed); the guard opens the fence on the renewals
    // it sees and closes it for good on the first sign of loss.
    let guard = tokio::spawn(leader::guard(
        client.clone(),
        args.clone(),
        lease.receiver.clone(),
        fence.clone(),
        work.clone(),
        metrics.clone(),
    ));
    let deadline = leader::LeaseTiming::new(args.lease_duration_seconds).renew_deadline;
    let result = if fence.wait_open(deadline).await {
        metrics.leader.set(1);
        health.standby.store(false, Ordering::Relaxed);
        let writer = fence::fenced_client(client, fence.clone());
        run_controllers(writer, args, metrics.clone(), health, work.clone()).await
    } else {
        warn!("holding the lease but no fresh renewal seen within the renew deadline");
        fence.revoke();
        Ok(())
    };
    let lost_it = !stop.is_cancelled() && (work.is_cancelled() || fence.is_revoked());
    work.cancel();
    let _ = guard.await;
    fence.revoke();
    metrics.leader.set(0);
    lease.release().await;
    match result {
        Ok(()) if lost_it => Err(Error::LostLeadership),
        other => other,
    }
}

async fn run_controllers(
    client: Client,
    args: RunArgs,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    stop: CancellationToken,
) -> Result<(), Error> {
    let identity = args.identity();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "gpuready".into(),
            instance: Some(identity),
        },
    );

    let (profile_reader, profile_writer) = reflector::store::<GpuNodeProfile>();
    // Untyped, then typed one by one: a profile that does not deserialize is
    // reported and skipped instead of failing the list (see profiles.rs).
    let profile_stream = profiles::typed(
        watcher(
            profiles::dynamic_api(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff(),
        recorder.clone(),
    )
    .reflect(profile_writer)
    .filter_map(spec_changes());
    let profile_stream = drop_watch_errors("GpuNodeProfile", profile_stream);
    // Nodes the status pass wants judged again without a change of theirs (held
    // back by the safety brake until it released).
    let (requeue, requeued) = mpsc::unbounded_channel::<ObjectRef<Node>>();
    let requeued = futures::stream::unfold(requeued, |mut rx| async move {
        rx.recv().await.map(|r| (r, rx))
    });

    let mut node_cfg = watcher::Config::default();
    if let Some(sel) = &args.node_selector {
        node_cfg = node_cfg.labels(sel);
    }
    let (node_reader, node_writer) = reflector::store::<Node>();
    let node_stream = watcher(Api::<Node>::all(client.clone()), node_cfg)
        .default_backoff()
        .modify(prune::prune_node)
        .reflect(node_writer)
        .applied_objects()
        .predicate_filter(prune::node_relevance, PredicateConfig::default());
    let node_stream = drop_watch_errors("Node", node_stream);

    // Probe reports: a node's report changing in substance re-queues that node.
    let (probe_reports, probe_triggers) = match &args.probe_namespace {
        Some(ns) => {
            let (reports, triggers) = probe_reports::watch(client.clone(), ns);
            (Some(reports), triggers.boxed())
        }
        None => (None, futures::stream::pending().boxed()),
    };

    let (caches_ready_tx, caches_ready) = watch::channel(false);
    let ctx = Arc::new(Context {
        client: client.clone(),
        args: args.clone(),
        metrics: metrics.clone(),
        recorder,
        profiles: profile_reader.clone(),
        nodes: node_reader.clone(),
        status_dirty: Notify::new(),
        caches_ready,
        brakes: Mutex::default(),
        requeue,
        last_writes: Mutex::default(),
        nfd: Mutex::default(),
        evidence: Arc::default(),
        probe_reports,
    });
    let evidence_tasks = evidence::spawn(
        client.clone(),
        ctx.evidence.clone(),
        ctx.requeue.clone(),
        stop.clone(),
    );

    let synced = {
        let (p, n, health) = (profile_reader.clone(), node_reader.clone(), health.clone());
        tokio::spawn(async move {
            // The one task outside the controller's that polls the stores, and on
            // a short timer: a waker lost to another poller costs 100 ms at most.
            loop {
                let wait = Duration::from_millis(100);
                let p_ready = tokio::time::timeout(wait, p.wait_until_ready()).await;
                let n_ready = tokio::time::timeout(wait, n.wait_until_ready()).await;
                if matches!(p_ready, Ok(Ok(()))) && matches!(n_ready, Ok(Ok(()))) {
                    health.caches_synced.store(true, Ordering::Relaxed);
                    let _ = caches_ready_tx.send(true);
                    info!("caches synced");
                    return;
                }
            }
        })
    };
    let aggregator = tokio::spawn(status::run(ctx.clone(), stop.clone()));
    // Only the leader gets here, so only one replica ever writes the NFD CRDs.
    let nfd_crds = (args.nfd_crds != config::NfdCrdMode::Off)
        .then(|| tokio::spawn(nfd::run(ctx.clone(), stop.clone())));

    let nodes_for_profile = node_reader.clone();
    let stop_fut = {
        let stop = stop.clone();
        async move { stop.cancelled().await }
    };
    info!(concurrency = args.concurrency, "controller starting");
    Controller::for_stream(node_stream, node_reader)
        .watches_stream(profile_stream, move |profile: GpuNodeProfile| {
            nodes_of_profile(&nodes_for_profile, &profile)
        })
        .reconcile_on(requeued)
        .reconcile_on(probe_triggers)
        .with_config(ControllerConfig::default().concurrency(args.concurrency))
        .graceful_shutdown_on(stop_fut)
        .run(node::reconcile, error_policy, ctx.clone())
        .for_each(|r| async move {
            if let Err(e) = r {
                match e {
                    kube::runtime::controller::Error::ObjectNotFound(_) => {}
                    e => warn!(error = %e, "controller"),
                }
            }
        })
        .await;
    synced.abort();
    aggregator.abort();
    for task in evidence_tasks {
        task.abort();
    }
    if let Some(task) = nfd_crds {
        task.abort();
    }
    // A last status pass so the profile reflects the final writes.
    if let Err(e) = status::pass(&ctx).await {
        warn!(error = %e, "final status pass failed");
    }
    info!("controller stopped");
    Ok(())
}

/// Logs and drops watch errors once the watcher's own backoff has handled them.
/// Passed on, they would make the Controller back off *again* on its trigger
/// stream, pausing every watch at once (exponential up to 30 s, reset only after
/// two quiet minutes): after an API server restart a node change waited ~30 s
/// to be seen, the expected 410 re-list counting as one more failure.
fn drop_watch_errors<K>(
    kind: &'static str,
    stream: impl futures::Stream<Item = Result<K, watcher::Error>>,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> {
    stream.filter(move |r| {
        if let Err(e) = r {
            warn!(kind, error = %e, "watch failed; the watcher retries with backoff");
        }
        std::future::ready(r.is_ok())
    })
}

/// Profile events that can change a node's verdict: a new spec (generation),
/// deletion, or a profile seen for the first time. Status writes — gpuready's own,
/// after every burst of reconciles — are dropped, or each would re-queue every
/// node of the profile.
type ProfileEvent = Result<watcher::Event<GpuNodeProfile>, watcher::Error>;
type ProfileTrigger = std::future::Ready<Option<Result<GpuNodeProfile, watcher::Error>>>;

fn spec_changes() -> impl FnMut(ProfileEvent) -> ProfileTrigger {
    let mut seen: BTreeMap<String, (Option<i64>, bool)> = BTreeMap::new();
    move |event| {
        let out = match event {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                let key = (
                    p.metadata.generation,
                    p.metadata.deletion_timestamp.is_some(),
                );
                (seen.insert(p.name_any(), key) != Some(key)).then_some(Ok(p))
            }
            Ok(watcher::Event::Delete(p)) => {
                seen.remove(&p.name_any());
                Some(Ok(p))
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(e) => Some(Err(e)),
        };
        std::future::ready(out)
    }
}

/// The nodes a profile change can affect: those its selector matches now, and
/// those labelled with its name (which it may have just stopped selecting).
fn nodes_of_profile(nodes: &Store<Node>, profile: &GpuNodeProfile) -> Vec<ObjectRef<Node>> {
    let name = profile.name_any();
    let selector = gpuready_core::select::profile_selector(profile).ok();
    nodes
        .state()
        .iter()
        .filter(|n| {
            let labels = n.labels();
            labels.get(keys::LABEL_PROFILE) == Some(&name)
                || selector.as_ref().is_some_and(|s| s.matches(labels))
        })
        .map(|n| ObjectRef::from_obj(n.as_ref()))
        .collect()
}

fn error_policy(node: Arc<Node>, err: &Error, _ctx: Arc<Context>) -> Action {
    error!(node = %node.name_any(), error = %err, "reconcile failed");
    let delay = match err {
        Error::Kube(kube::Error::Api(s)) if s.code == 403 => Duration::from_secs(60),
        _ => Duration::from_secs(5),
    };
    Action::requeue(delay)
}
