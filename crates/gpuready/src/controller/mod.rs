//! `gpuready run`: watches Nodes and GpuNodeProfiles and keeps each node's
//! taint, labels and conditions in step with its verdict; aggregates profile
//! status; serves metrics and health; elects a leader so only one replica writes.

//!
//! This module only wires the tasks together; what they share is in
//! `context.rs` (and `health.rs`, `status_input.rs`), which imports none of
//! them, so no module here imports one that imports it back
//! (`tests/cli/module_graph.rs` checks this).

// Rooms by role: what is read and kept, what is written, what is reported,
// who may write; what every room shares stays here.
pub mod backoff;
pub mod clock_metrics;
pub mod config;
pub mod context;
pub mod crd_guard;
pub mod error;
pub mod event;
pub mod health;
pub mod lease;
pub mod ledger;
pub mod mailbox;
pub mod metrics;
pub mod node_resource;
pub mod profile_nodes;
pub mod requests;
pub mod status;
pub mod status_input;
pub mod triggers;
pub mod watch;
pub mod write;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use gpuready_api::GpuNodeProfile;
use gpuready_api::keys;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::utils::{Backoff, WatchStreamExt};
use kube::runtime::wait::{Condition, conditions};
use kube::runtime::{Controller, PredicateConfig, watcher};
use kube::{Client, ResourceExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::controller::mailbox::{RequeueReceiver, RequeueSender, StatusReceiver};
use backoff::WatchBackoff;
use crd_guard::CrdGuard;
use triggers::{ask_if_cached, cached_ref, drop_watch_errors, node_gone, profile_triggers};
use watch::cached::CachedNode;

pub use config::RunArgs;
pub use context::Context;
pub use error::Error;
pub use health::Health;
pub use metrics::Metrics;

/// Waits until the GpuNodeProfile CRD exists and is Established. API errors
/// (a server still starting, a dropped connection, 429/5xx) are retried with
/// backoff rather than ending the process: a controller that exits 1 on a
/// transient error at start-up turns a blip into a CrashLoopBackOff.
pub async fn wait_for_crd(client: &Client, stop: &CancellationToken) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd_guard::PROFILE_CRD;
    let mut warned = false;
    let mut retry = WatchBackoff::default();
    loop {
        let wait = match api.get_opt(name).await {
            Ok(crd) => {
                if conditions::is_crd_established().matches_object(crd.as_ref()) {
                    return Ok(());
                }
                if !warned {
                    warn!(
                        "CRD {name} is not installed or not established: install it with `gpuready crd | kubectl apply --server-side -f -` or the Helm chart; waiting"
                    );
                    warned = true;
                }
                retry.reset();
                Duration::from_secs(2)
            }
            Err(e) => {
                let wait = retry.next().unwrap_or(Duration::from_secs(2));
                warn!(error = %e, retry_in = ?wait, "reading the GpuNodeProfile CRD failed; retrying");
                wait
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return Err(Error::CrdMissing(name.into())),
            _ = tokio::time::sleep(wait) => {},
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
        return run_controllers(client, args, metrics, health, stop, None).await;
    }
    health.standby.store(true, Ordering::Relaxed);
    let Some(lease) = lease::leader::acquire(&client, &args, &stop).await? else {
        return Ok(());
    };
    let fence = lease::fence::Fence::new();
    let work = stop.child_token();
    // The lease is renewed through the plain client (the renewal must pass
    // even when the fence is closed); the guard opens the fence on the renewals
    // it sees and closes it for good on the first sign of loss.
    let guard = tokio::spawn(lease::leader::guard(
        client.clone(),
        args.clone(),
        lease.receiver.clone(),
        fence.clone(),
        work.clone(),
        metrics.clone(),
    ));
    let deadline = lease::leader::LeaseTiming::new(args.lease_duration_seconds).renew_deadline;
    let result = if fence.wait_open(deadline).await {
        metrics.leader.set(1);
        health.standby.store(false, Ordering::Relaxed);
        let writer = lease::fence::fenced_client(client, fence.clone());
        run_controllers(
            writer,
            args,
            metrics.clone(),
            health,
            work.clone(),
            Some(fence.clone()),
        )
        .await
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

/// The reconcilers, until `stop`. `fence` is the write fence under leader
/// election: once it is revoked (the lease is lost) nothing is finished, since
/// nothing more may be written.
async fn run_controllers(
    client: Client,
    args: RunArgs,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    stop: CancellationToken,
    fence: Option<Arc<lease::fence::Fence>>,
) -> Result<(), Error> {
    let lost = move || fence.as_ref().is_some_and(|f| f.is_revoked());
    let shared = shared(client, args, metrics, health.clone());
    let ctx = shared.ctx;
    let profile_stream = profile_stream(&ctx, shared.profiles);
    let node_stream = node_stream(&ctx, shared.nodes, shared.requeue.clone());
    let requeued = requeued_stream(&ctx, shared.requeued, shared.probe_triggers);
    let tasks = Tasks::spawn(
        &ctx,
        health,
        shared.requeue,
        shared.listed,
        shared.status,
        &stop,
    );
    let cut_short = cut_short(stop.clone(), ctx.caches.listed.clone(), lost.clone());
    info!(concurrency = ctx.args.concurrency, "controller starting");
    run_node_controller(node_stream, profile_stream, requeued, ctx, stop, cut_short).await;
    tasks.stop(lost()).await;
    info!("controller stopped");
    Ok(())
}

/// What the wiring builds before any watch or task starts: the state every
/// task shares (`Context`), and the other ends of its caches and channels
/// for the watches and tasks that fill or drain them.
struct Shared {
    ctx: Arc<Context>,
    profiles: reflector::store::Writer<GpuNodeProfile>,
    nodes: reflector::store::Writer<CachedNode>,
    listed: tokio::sync::watch::Sender<bool>,
    status: StatusReceiver,
    requeue: RequeueSender,
    requeued: RequeueReceiver,
    probe_triggers: BoxStream<'static, ObjectRef<CachedNode>>,
}

fn shared(client: Client, args: RunArgs, metrics: Arc<Metrics>, health: Arc<Health>) -> Shared {
    let identity = args.identity();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: keys::FIELD_MANAGER.into(),
            instance: Some(identity),
        },
    );
    let (status_tx, status_rx) =
        mailbox::mailbox(mailbox::STATUS_CAPACITY, metrics.channel("status"));
    let crd = Arc::new(CrdGuard::new(client.clone(), metrics.clone(), health));
    let (profile_reader, profile_writer) = reflector::store::<GpuNodeProfile>();
    // Nodes the other tasks want judged again without a change of theirs
    // (the evidence watches, fabric groups, the status pass).
    let (requeue, requeued) =
        mailbox::mailbox(mailbox::REQUEUE_CAPACITY, metrics.channel("requeue"));
    // The node book (write ledger and its queue, brakes, refusals, error
    // backoff): every trigger enters it, and it alone feeds kube, a node only
    // while a reconcile slot is free for it (ledger.rs).
    let ledger = Arc::new(ledger::Ledger::new(
        args.brake(),
        usize::from(args.concurrency),
    ));
    // Each Node is pruned and packed (cached.rs) before it enters the cache: the
    // cache holds what the engine reads, not the API type.
    let (node_reader, node_writer) = reflector::store::<CachedNode>();
    // Probe reports: a node's report changing in substance re-queues that node.
    let (probe_reports, probe_triggers) = match &args.probe_namespace {
        Some(ns) => {
            let (reports, triggers) = watch::probe_reports::watch(client.clone(), ns);
            (Some(reports), triggers.map(|r| cached_ref(&r)).boxed())
        }
        None => (None, futures::stream::pending().boxed()),
    };
    let (listed_tx, listed) = tokio::sync::watch::channel(false);
    let ctx = Arc::new(Context {
        client,
        args,
        metrics,
        events: context::Events {
            recorder,
            budget: Mutex::default(),
        },
        caches: context::Caches {
            profiles: profile_reader,
            nodes: node_reader,
            listed,
            evidence: Arc::default(),
            // fabric.groupByLabel groups follow every node event (groups.rs).
            groups: Arc::new(watch::groups::Groups::default()),
            probe_reports,
        },
        status: status_tx,
        crd,
        ledger,
    });
    Shared {
        ctx,
        profiles: profile_writer,
        nodes: node_writer,
        listed: listed_tx,
        status: status_rx,
        requeue,
        requeued,
        probe_triggers,
    }
}

/// The GpuNodeProfile watch, filling the profile cache: it passes on the
/// profiles whose change can change a node's verdict (`profile_triggers`).
fn profile_stream(
    ctx: &Context,
    writer: reflector::store::Writer<GpuNodeProfile>,
) -> impl futures::Stream<Item = Result<GpuNodeProfile, watcher::Error>> + use<> {
    // Untyped, then typed one by one: a profile that does not deserialize is
    // reported and skipped instead of failing the list (see profiles.rs).
    let stream = watch::profiles::typed(
        watcher(
            crate::readers::dynamic_api(ctx.client.clone()),
            watcher::Config::default(),
        )
        .backoff(WatchBackoff::default()),
        ctx.events.recorder.clone(),
        ctx.client.clone(),
    )
    .reflect(writer)
    .flat_map(profile_triggers(ctx.status.clone(), ctx.crd.clone()));
    drop_watch_errors("GpuNodeProfile", stream)
}

/// The Node watch, filling the node cache. It passes nothing on itself: each
/// node it would trigger is asked for at the book.
fn node_stream(
    ctx: &Context,
    writer: reflector::store::Writer<CachedNode>,
    requeue: RequeueSender,
) -> impl futures::Stream<Item = Result<CachedNode, watcher::Error>> + use<> {
    let mut node_cfg = watcher::Config::default();
    if let Some(sel) = &ctx.args.node_selector {
        node_cfg = node_cfg.labels(sel);
    }
    // Its first state streamed where the server can (initial_list.rs).
    // Read straight into the cache's form (watched.rs): what the cache does
    // not keep is never built.
    let node_watch = watch::initial_list::watch(
        Api::<CachedNode>::all(ctx.client.clone()),
        node_cfg,
        ctx.args.initial_list,
    );
    let node_stream = node_watch
        .backoff(WatchBackoff::default())
        .reflect(writer)
        .inspect({
            let groups = ctx.caches.groups.clone();
            move |e| {
                if let Ok(e) = e {
                    groups.on_event(e, &requeue);
                }
            }
        })
        .inspect(node_gone(
            ctx.status.clone(),
            ctx.ledger.clone(),
            ctx.caches.nodes.clone(),
        ))
        .applied_objects()
        .predicate_filter(
            |n: &CachedNode| Some(n.relevance()),
            PredicateConfig::default(),
        )
        // The book sees every trigger (taint work ahead of deferred writes);
        // the echo of gpuready's own write, for a node waiting at the gate,
        // queues nothing. The node stream, the profile mapping, the re-queues
        // and probe triggers ask the book and pass nothing on themselves:
        // kube reconciles what the book hands it (`Ledger::stream`).
        .inspect_ok({
            let ledger = ctx.ledger.clone();
            move |n| {
                ledger.ask(&n.name_any(), n.resource_version().as_deref());
            }
        })
        .try_filter(|_| std::future::ready(false));
    drop_watch_errors("Node", node_stream)
}

/// Re-queues (from the status pass, the evidence watches, fabric groups) and
/// probe triggers are asked for at the book too, for nodes in the cache (the
/// Controller drops the others, and they must not hold anyone). Like the
/// node stream, it passes nothing on itself.
fn requeued_stream(
    ctx: &Context,
    requeued: RequeueReceiver,
    probe_triggers: BoxStream<'static, ObjectRef<CachedNode>>,
) -> impl futures::Stream<Item = ObjectRef<CachedNode>> + use<> {
    let requeued = futures::stream::unfold(requeued, |mut rx| async move {
        rx.recv().await.map(|r| (cached_ref(&r), rx))
    });
    futures::stream::select(requeued, probe_triggers)
        .inspect(ask_if_cached(ctx.ledger.clone(), ctx.caches.nodes.clone()))
        .filter(|_| std::future::ready(false))
}

/// The tasks beside the controller: started with it, stopped after it.
struct Tasks {
    evidence: Vec<JoinHandle<()>>,
    synced: JoinHandle<()>,
    /// The status task stops after the node controller, so it sees every
    /// verdict of the last reconciles and writes the final profile status.
    status_stop: CancellationToken,
    aggregator: JoinHandle<()>,
    crd_watch: JoinHandle<()>,
    event_summaries: JoinHandle<()>,
    nfd_crds: Option<JoinHandle<()>>,
}

impl Tasks {
    fn spawn(
        ctx: &Arc<Context>,
        health: Arc<Health>,
        requeue: RequeueSender,
        listed: tokio::sync::watch::Sender<bool>,
        status: StatusReceiver,
        stop: &CancellationToken,
    ) -> Tasks {
        let (client, metrics) = (&ctx.client, &ctx.metrics);
        let mut evidence = watch::evidence::spawn(
            client.clone(),
            ctx.caches.evidence.clone(),
            metrics.clone(),
            requeue,
            stop.clone(),
        );
        evidence.push(watch::wide_rules::spawn(
            client.clone(),
            metrics.clone(),
            stop.clone(),
        ));
        let synced = tokio::spawn(caches_synced(
            ctx.caches.profiles.clone(),
            ctx.caches.nodes.clone(),
            health,
            listed,
        ));
        let status_stop = CancellationToken::new();
        // The NFD CRD reconciler hands its condition to the status task; with
        // --nfd-crds=off the sender is dropped and profiles carry no condition.
        let (nfd_tx, nfd_rx) = tokio::sync::watch::channel(None);
        let aggregator = tokio::spawn(status::task::run(
            ctx.clone(),
            status,
            nfd_rx,
            status_stop.clone(),
        ));
        let crd_watch = tokio::spawn(ctx.crd.clone().watch(stop.clone()));
        let event_summaries = tokio::spawn(write::events::summarize(ctx.clone()));
        // Only the leader gets here, so only one replica ever writes the NFD CRDs.
        let nfd_crds = (ctx.args.nfd_crds != config::NfdCrdMode::Off)
            .then(|| tokio::spawn(write::nfd::run(ctx.clone(), nfd_tx, stop.clone())));
        Tasks {
            evidence,
            synced,
            status_stop,
            aggregator,
            crd_watch,
            event_summaries,
            nfd_crds,
        }
    }

    /// Ends them once the controller has stopped; the status task writes the
    /// final profile status first unless the lease is `lost`.
    async fn stop(self, lost: bool) {
        self.synced.abort();
        self.crd_watch.abort();
        self.event_summaries.abort();
        for task in self.evidence {
            task.abort();
        }
        if let Some(task) = self.nfd_crds {
            task.abort();
        }
        if lost {
            // Its final status pass could only be refused.
            self.aggregator.abort();
        } else {
            self.status_stop.cancel();
            if tokio::time::timeout(Duration::from_secs(20), self.aggregator)
                .await
                .is_err()
            {
                warn!("the final profile status pass did not finish in 20 s");
            }
        }
    }
}

/// Marks the caches synced (health, `Caches::listed`) once both have
/// been listed.
async fn caches_synced(
    profiles: Store<GpuNodeProfile>,
    nodes: Store<CachedNode>,
    health: Arc<Health>,
    ready: tokio::sync::watch::Sender<bool>,
) {
    // The one task outside the controller's that polls the stores, and on
    // a short timer: a waker lost to another poller costs 100 ms at most.
    loop {
        let wait = Duration::from_millis(100);
        let p_ready = tokio::time::timeout(wait, profiles.wait_until_ready()).await;
        let n_ready = tokio::time::timeout(wait, nodes.wait_until_ready()).await;
        if matches!(p_ready, Ok(Ok(()))) && matches!(n_ready, Ok(Ok(()))) {
            health.caches_synced.store(true, Ordering::Relaxed);
            let _ = ready.send(true);
            info!("caches synced");
            return;
        }
    }
}

/// Stops the controller at once instead of gracefully when there is nothing
/// to finish: the lease is lost (every write would be refused), or the stop
/// came before the caches were first listed. kube's runner starts no
/// reconcile until its node cache is ready, and a graceful shutdown waits
/// for that too, but the shutdown also ends the watches that would fill the
/// cache: a replica deposed 70 ms after it won the lease waited forever,
/// neither exiting nor ready. Every reconcile waits for the caches before
/// its first request, so none has begun.
async fn cut_short(
    stop: CancellationToken,
    ready: tokio::sync::watch::Receiver<bool>,
    lost: impl Fn() -> bool,
) {
    stop.cancelled().await;
    if !lost() && *ready.borrow() {
        std::future::pending::<()>().await;
    }
    info!("stopping at once: the lease is lost, or the caches never synced");
}

/// kube's Controller over the node cache, fed by the book alone (which the
/// triggers and the profile mapping ask), until `stop` (gracefully) or
/// `cut_short` (at once).
async fn run_node_controller(
    nodes: impl futures::Stream<Item = Result<CachedNode, watcher::Error>> + Send + 'static,
    profiles: impl futures::Stream<Item = Result<GpuNodeProfile, watcher::Error>> + Send + 'static,
    requeued: impl futures::Stream<Item = ObjectRef<CachedNode>> + Send + 'static,
    ctx: Arc<Context>,
    stop: CancellationToken,
    cut_short: impl Future<Output = ()> + Send + 'static,
) {
    let (nodes_for_profile, ledger_for_profile) = (ctx.caches.nodes.clone(), ctx.ledger.clone());
    let stop_fut = async move { stop.cancelled().await };
    Controller::for_stream(nodes, ctx.caches.nodes.clone())
        .watches_stream(profiles, move |profile: GpuNodeProfile| {
            tokio::spawn(profile_nodes::queue_nodes_of(
                nodes_for_profile.clone(),
                ledger_for_profile.clone(),
                profile,
            ));
            Vec::new()
        })
        .reconcile_on(requeued)
        .reconcile_on(ctx.ledger.clone().stream())
        .with_config(ControllerConfig::default().concurrency(ctx.args.concurrency))
        .graceful_shutdown_on(stop_fut)
        .run(reconcile, error_policy, ctx.clone())
        .take_until(cut_short)
        .for_each(|r| {
            let ledger = ctx.ledger.clone();
            async move {
                if let Err(e) = r {
                    match e {
                        // A trigger for a node the cache no longer holds (one
                        // deleted during a watch gap): it reconciles nothing,
                        // so it must not stay queued at the gate, nor hold
                        // its place among kube's slots.
                        kube::runtime::controller::Error::ObjectNotFound(r) => {
                            ledger.forget(&r.name);
                        }
                        e => warn!(error = %e, "controller"),
                    }
                }
            }
        })
        .await;
}

/// The node reconciler, plus the book's one start and finish: the book
/// hears when the reconcile started, that it finished however it ended (the
/// guard), and that it passed (its error backoff starts over).
async fn reconcile(node: Arc<CachedNode>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = node.name_any();
    let running = ctx.ledger.start(&name);
    let result = write::node::reconcile(node, ctx.clone()).await;
    drop(running);
    if result.is_ok() {
        ctx.ledger.succeeded(&name);
    }
    result
}

fn error_policy(node: Arc<CachedNode>, err: &Error, ctx: Arc<Context>) -> Action {
    let name = node.name_any();
    if deleted_meanwhile(err, &name) {
        // Deleted while it was judged (a scale-down, a storm's clean-up):
        // nothing is left to write, and its deletion's event forgets it. Not
        // an error to log 2,000 times when 2,000 nodes go at once.
        debug!(node = %name, "the node was deleted while it was judged");
        ctx.ledger.succeeded(&name);
        return Action::await_change();
    }
    let mut delay = ctx.ledger.failed(&name);
    if matches!(err, Error::Kube(kube::Error::Api(s)) if s.code == 403)
        || matches!(err, Error::Refused { .. })
    {
        // Missing RBAC is not fixed by retrying soon.
        delay = delay.max(Duration::from_secs(60));
    }
    error!(node = %name, error = %err, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// The API server answered that this very Node no longer exists.
fn deleted_meanwhile(err: &Error, node: &str) -> bool {
    matches!(err, Error::Kube(kube::Error::Api(s))
        if s.code == 404
            && s.details.as_ref().is_some_and(|d| d.kind == "nodes" && d.name == node))
}

#[cfg(test)]
mod tests;
