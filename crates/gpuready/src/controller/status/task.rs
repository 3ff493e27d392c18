//! Profile status, metrics and profile Events from a running tally of node
//! verdicts. Node reconciles send each verdict through a typed channel; this task
//! owns the tally, never judges a node itself on the hot path, and writes a
//! profile's status only when it differs. The tally's counts go to the node
//! book's brakes (`Ledger::counts`: the matched count is the brake's
//! denominator, the not-ready count the one input that may release it).
//!
//! Every node is judged here once, at start-up, for the first tally; after
//! that the tally follows messages only. There used to be a recount every
//! 5 minutes as well (every cached node judged again, inline on the async
//! runtime: over a second each time at 100,000 nodes), kept only to catch
//! deletions missed in a watch gap. It is gone, not moved off the runtime:
//! nothing else needed it. The node stream now turns a deletion missed in a
//! gap into `NodeGone` at the re-list's `InitDone` (`node_gone` in `mod.rs`),
//! a verdict changing with time (stale GFD labels, a deadline) comes from the
//! reconcile that requeued itself for it, and a verdict that reaches this task
//! after its node left the cache (a reconcile that judged it just before its
//! Delete) is counted as the node gone, not kept as a ghost.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use gpuready_api::keys::{self, event_reasons};
use gpuready_api::{GpuNodeProfile, GpuNodeProfileStatus, Layer, Mode};
use gpuready_core::nfd_crds::NfdCrdCondition;
use gpuready_core::no_execute::BudgetView;
use gpuready_core::report::NodeState;
use gpuready_core::status::{ExtraConditions, status_from_tally};
use gpuready_core::tally::{NodeVerdict, ProfileTally, Tally};
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::controller::config::NfdCrdMode;
use crate::controller::context::Context;
use crate::controller::error::RefusedWrite;
use crate::controller::event::event;
use crate::controller::mailbox::StatusReceiver;
use crate::controller::metrics::{
    NodeLayer, NodeNotReady, NodeSeries, Profile, ProfileLayer, ProfileNoExecute, ProfileNode,
    ProfileState, ProfileWrite,
};
use crate::controller::status_input::StatusInput;
use crate::controller::watch::cached::CachedNode;
use crate::controller::watch::verdicts::{profiles_with_selectors, verdict_of};
use crate::controller::write::events::publish_profile_event;

/// Coalesces bursts of verdicts into one status write per profile.
const DEBOUNCE: Duration = Duration::from_millis(500);
/// Every profile's status and metrics are refreshed at least this often (the
/// brake window moves with time; no node needs judging for it).
const RESYNC: Duration = Duration::from_secs(30);
/// How long a due status pass waits behind taint work at most: a join storm
/// or a fleet-wide flip sends every taint first (issue 35), yet a fleet whose
/// taint work never ends still gets its profile status.
const MAX_HOLD: Duration = Duration::from_secs(10);

/// Which profiles a pass writes.
#[derive(Debug, Default)]
struct Dirty {
    all: bool,
    profiles: BTreeSet<String>,
}

impl Dirty {
    /// `nodes` is the node cache: a verdict for a node no longer in it was
    /// judged just before the node's Delete (whose `NodeGone` may already be
    /// counted), so it counts as gone. The recount that used to drop such
    /// ghosts every 5 minutes is gone (see the module's comment).
    fn apply(&mut self, tally: &mut Tally, input: StatusInput, nodes: &Store<CachedNode>) {
        match input {
            StatusInput::Verdict { node, verdict } => {
                let verdict = verdict
                    .filter(|_| nodes.get(&ObjectRef::new(&node)).is_some())
                    .map(|v| *v);
                self.profiles.extend(tally.set(&node, verdict));
            }
            StatusInput::NodeGone(node) => self.profiles.extend(tally.set(&node, None)),
            StatusInput::Profile(p) => {
                self.profiles.insert(p);
            }
        }
    }

    fn is_empty(&self) -> bool {
        !self.all && self.profiles.is_empty()
    }
}

/// The status task: runs until `stop`, then drains what reconciles sent and
/// makes one last pass so the profiles reflect the final writes. `nfd` carries
/// the NFD CRD reconciler's latest condition (its sender is dropped when that
/// reconciler does not run); a new value makes every profile dirty.
pub async fn run(
    ctx: Arc<Context>,
    mut input: StatusReceiver,
    mut nfd: watch::Receiver<Option<NfdCrdCondition>>,
    stop: CancellationToken,
) {
    tokio::select! {
        _ = stop.cancelled() => return,
        ready = ctx.caches.wait_listed() => if !ready { return },
    }
    // The brake's denominators are known before the first status write: a
    // burst at start-up is braked too. The only full count: from here on the
    // tally follows messages (see the module's comment).
    let mut tally = initial_count(&ctx);
    brake_counts(&ctx, &tally);
    // The first pass carries the NFD condition when the NFD reconciler will
    // set one: writing the status without it first would cost a second write
    // (and a restart on a converged cluster must write nothing).
    if ctx.args.nfd_crds != NfdCrdMode::Off {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::timeout(Duration::from_secs(10), nfd.wait_for(Option::is_some)) => {},
        }
    }
    let mut nfd_open = true;
    let mut dirty = Dirty {
        all: true,
        ..Dirty::default()
    };
    let mut next_resync = Instant::now() + RESYNC;
    loop {
        // A new NFD condition concerns every profile, even when it arrived
        // during a burst of verdicts for a few.
        if matches!(nfd.has_changed(), Ok(true)) {
            dirty.all = true;
        }
        if !dirty.is_empty() {
            brake_counts(&ctx, &tally);
            // Behind every pending taint write, as nodes' conditions and
            // Events are: the verdicts that come meanwhile are counted. Cut
            // short by `stop` (or the senders gone), the select below ends
            // the task, with its last pass.
            if hold_for_taint_work(&ctx, &mut input, &mut dirty, &mut tally, &stop).await {
                brake_counts(&ctx, &tally);
                let nfd_now = nfd.borrow_and_update().clone();
                pass(&ctx, &tally, &dirty, nfd_now.as_ref()).await;
                dirty = Dirty::default();
            }
        }
        tokio::select! {
            _ = stop.cancelled() => {
                while let Some(m) = input.try_recv() {
                    dirty.apply(&mut tally, m, &ctx.caches.nodes);
                }
                dirty.all = true;
                let nfd_now = nfd.borrow().clone();
                pass(&ctx, &tally, &dirty, nfd_now.as_ref()).await;
                return;
            }
            changed = nfd.changed(), if nfd_open => {
                // The NFD condition changed: every profile carries it. A closed
                // channel (the NFD reconciler stopped) keeps the last value.
                match changed {
                    Ok(()) => dirty.all = true,
                    Err(_) => nfd_open = false,
                }
            }
            m = input.recv() => {
                let Some(m) = m else { return };
                dirty.apply(&mut tally, m, &ctx.caches.nodes);
                if dirty.is_empty() {
                    // A verdict equal to the recorded one: nothing to write.
                    continue;
                }
                // Collect the rest of the burst before writing.
                let until = Instant::now() + DEBOUNCE;
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep_until(until) => break,
                        m = input.recv() => match m {
                            Some(m) => dirty.apply(&mut tally, m, &ctx.caches.nodes),
                            None => break,
                        },
                    }
                }
            }
            _ = tokio::time::sleep_until(next_resync) => {
                dirty.all = true;
                next_resync = Instant::now() + RESYNC;
            }
        }
    }
}

/// Waits while taint work is pending, at most [`MAX_HOLD`], counting the
/// verdicts that come meanwhile. `false` when the pass should not go now:
/// `stop` came (the loop's stop branch makes the last pass) or the senders
/// are gone (the loop ends).
async fn hold_for_taint_work(
    ctx: &Context,
    input: &mut StatusReceiver,
    dirty: &mut Dirty,
    tally: &mut Tally,
    stop: &CancellationToken,
) -> bool {
    let deadline = tokio::time::sleep(MAX_HOLD);
    let done = ctx.ledger.taint_work_done();
    tokio::pin!(deadline, done);
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => return false,
            _ = &mut done => return true,
            _ = &mut deadline => return true,
            m = input.recv() => match m {
                Some(m) => dirty.apply(tally, m, &ctx.caches.nodes),
                None => return false,
            },
        }
    }
}

/// Hands every profile's counts to its brake, which may engage or release
/// on them (a release re-queues the nodes it held); the brakes of profiles
/// that are gone are forgotten.
fn brake_counts(ctx: &Context, tally: &Tally) {
    let now = Timestamp::now();
    let profiles = ctx.caches.profiles.state();
    let empty = ProfileTally::default();
    for p in &profiles {
        let name = p.name_any();
        let t = tally.profile(&name).unwrap_or(&empty);
        ctx.ledger
            .counts(&name, t.matched(), t.not_ready.len(), now);
    }
    let names: BTreeSet<String> = profiles.iter().map(|p| p.name_any()).collect();
    ctx.ledger.retain_profiles(|p| names.contains(p));
}

/// Every cached node judged: the tally at start-up, once. (Messages sent
/// before it are superseded by it; those sent after it are newer and apply on
/// top.)
fn initial_count(ctx: &Context) -> Tally {
    let now = Timestamp::now();
    let selectors = profiles_with_selectors(&ctx.caches.profiles.state());
    let pairs: Vec<(&GpuNodeProfile, &kube::core::Selector)> =
        selectors.iter().map(|(p, s)| (p.as_ref(), s)).collect();
    let mut tally = Tally::default();
    for node in ctx.caches.nodes.state() {
        // Verdicts only: the brake changes planned taints, not readiness.
        let facts = ctx.caches.facts_of(&node.to_node(), &pairs);
        let a = verdict_of(&facts, &selectors, now);
        tally.set(&a.name, NodeVerdict::of(&a));
    }
    debug!(nodes = tally.nodes(), "counted every node's verdict");
    tally
}

/// Writes the status of the dirty profiles (all of them on a resync). A failed
/// write is logged and the pass goes on: one profile never holds back another.
async fn pass(ctx: &Context, tally: &Tally, dirty: &Dirty, nfd: Option<&NfdCrdCondition>) {
    let now = Timestamp::now();
    let profiles = ctx.caches.profiles.state();
    if dirty.all {
        // Rebuilt from scratch so series of deleted profiles disappear.
        ctx.metrics.nodes.clear();
        ctx.metrics.layer_ready.clear();
        ctx.metrics.brake.clear();
        ctx.metrics.not_evicted_pods.clear();
        ctx.metrics.no_execute.clear();
        let names: BTreeSet<String> = profiles.iter().map(|p| p.name_any()).collect();
        ctx.metrics.retain_node_series(|p| names.contains(p));
        ctx.metrics.clocks.retain(|p| names.contains(p));
        ctx.metrics.write_refused_nodes.clear();
    }
    let api: Api<GpuNodeProfile> = Api::all(ctx.client.clone());
    let empty = ProfileTally::default();
    for profile in &profiles {
        let name = profile.name_any();
        if !dirty.all && !dirty.profiles.contains(&name) {
            continue;
        }
        let t = tally.profile(&name).unwrap_or(&empty);
        if let Err(e) = update_profile(ctx, &api, profile, t, nfd, now).await {
            warn!(profile = %name, error = %e, "writing the profile status failed; retried on the next pass");
        }
    }
}

async fn update_profile(
    ctx: &Context,
    api: &Api<GpuNodeProfile>,
    profile: &GpuNodeProfile,
    t: &ProfileTally,
    nfd: Option<&NfdCrdCondition>,
    now: Timestamp,
) -> Result<(), kube::Error> {
    let name = profile.name_any();
    // Decided by `brake_counts` just before this pass, from the same tally.
    let engaged = ctx.ledger.engaged(&name);
    // Gauges for every profile (all 0 without `escalation`), status only
    // where there is a budget.
    let view = ctx.ledger.no_execute_of(&name).unwrap_or_default();
    record_metrics(ctx, &name, t, engaged);
    record_budget(ctx, &name, &view);
    ctx.metrics.clocks.start(&name);
    let budget = profile.spec.escalation.as_ref().map(|_| view);
    ctx.metrics
        .set_node_series(&name, node_series(&name, profile.spec.mode, t));

    let extra = ExtraConditions {
        brake: Some(ctx.ledger.brake_config().condition(engaged)),
        nfd_crds: nfd.cloned(),
    };
    let new = gpuready_core::status::with_no_execute(
        status_from_tally(
            &name,
            profile.metadata.generation,
            t,
            &extra,
            profile.status.as_ref(),
            now,
        ),
        budget.as_ref(),
    );
    let new = gpuready_core::status::with_time_to_ready(new, t, now);
    // A profile that got past admission yet breaks the CRD's rules says so.
    // So does one whose selector reads a label another profile sets.
    let problem = gpuready_core::status::profile_problem(profile).or_else(|| {
        gpuready_core::status::selector_feedback(profile, &ctx.caches.profiles.state())
    });
    let new = match problem {
        Some(why) => gpuready_core::status::mark_invalid(
            new,
            &why,
            profile.metadata.generation,
            profile.status.as_ref(),
            now,
        ),
        None => new,
    };
    let refused = ctx.ledger.refusals_of(&name, |n| {
        ctx.caches.nodes.get(&ObjectRef::new(n)).is_some()
    });
    for (write, n) in [
        (RefusedWrite::Taint, refused.as_ref().map_or(0, |r| r.taint)),
        (RefusedWrite::Other, refused.as_ref().map_or(0, |r| r.other)),
    ] {
        ctx.metrics
            .write_refused_nodes
            .get_or_create(&ProfileWrite {
                profile: name.clone(),
                write: write.as_str().to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    let new = match refused {
        Some(r) => gpuready_core::status::mark_refused(
            new,
            r.taint + r.other,
            &r.first,
            &r.why,
            profile.metadata.generation,
            profile.status.as_ref(),
            now,
        ),
        None => new,
    };
    if profile.status.as_ref() == Some(&new) {
        return Ok(());
    }
    let body = json!({
        "apiVersion": "gpuready.io/v1alpha1",
        "kind": "GpuNodeProfile",
        "metadata": { "name": name },
        "status": new,
    });
    api.patch_status(
        &name,
        &PatchParams::apply(keys::FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    ctx.metrics.count_write("profile_status");
    publish_profile_transitions(ctx, profile, profile.status.as_ref(), &new).await;
    Ok(())
}

fn record_metrics(ctx: &Context, profile: &str, t: &ProfileTally, engaged: bool) {
    let state = |s: &str| ProfileState {
        profile: profile.to_owned(),
        state: s.to_owned(),
    };
    let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    for (label, n) in [
        (NodeState::Ready, t.counts.ready),
        (NodeState::NotReady, t.counts.not_ready),
        (NodeState::Maintenance, t.counts.maintenance),
        (NodeState::WaitingForGate, t.counts.waiting_for_gate),
    ]
    .map(|(s, n)| (s.metric_label(), n))
    .into_iter()
    .chain([
        // Not node states: a node in conflict has none, and past-deadline
        // nodes are also counted as not ready.
        ("conflict", t.counts.conflicts),
        ("past_deadline", t.past_deadline),
    ]) {
        ctx.metrics.nodes.get_or_create(&state(label)).set(gauge(n));
    }
    ctx.metrics
        .tainted_devices
        .get_or_create(&Profile {
            profile: profile.to_owned(),
        })
        .set(gauge(t.tainted_device_count()));
    ctx.metrics
        .not_evicted_pods
        .get_or_create(&Profile {
            profile: profile.to_owned(),
        })
        .set(gauge(t.not_evicted_pods));
    for layer in Layer::ALL {
        ctx.metrics
            .layer_ready
            .get_or_create(&ProfileLayer {
                profile: profile.to_owned(),
                layer: layer.to_string(),
            })
            .set(gauge(t.layer_ready(layer)));
    }
    ctx.metrics
        .brake
        .get_or_create(&Profile {
            profile: profile.to_owned(),
        })
        .set(i64::from(engaged));
}

/// The profile's `NoExecute` budget as gauges.
fn record_budget(ctx: &Context, profile: &str, b: &BudgetView) {
    let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    for (kind, state, n) in [
        ("nodes", "escalated", b.nodes),
        ("nodes", "held", b.nodes_held),
        ("nodes", "limit", b.node_limit),
        ("devices", "escalated", b.devices),
        ("devices", "held", b.devices_held),
        ("devices", "limit", b.device_limit),
    ] {
        ctx.metrics
            .no_execute
            .get_or_create(&ProfileNoExecute {
                profile: profile.to_owned(),
                kind: kind.to_owned(),
                state: state.to_owned(),
            })
            .set(gauge(n));
    }
}

/// Nodes a profile exports per-node series for, per state (and per layer,
/// and for gated devices): the first by name. A whole broken fleet would
/// otherwise be hundreds of thousands of series (100,000 nodes × their
/// failing layers), and one alert per node past a few hundred helps no one:
/// `gpuready_nodes` counts them all.
pub const MAX_NODE_SERIES: usize = 200;

/// The per-node series of one profile: its not-ready nodes, their failing
/// layers and their gated devices, straight from the tally, at most
/// [`MAX_NODE_SERIES`] of each.
fn node_series(profile: &str, mode: Mode, t: &ProfileTally) -> NodeSeries {
    let mode = match mode {
        Mode::Enforce => "Enforce",
        Mode::Observe => "Observe",
    };
    // One series a gated node, in the states of `gpuready_nodes`: the chart's
    // not-ready alert reads "not_ready" only, GpuReadyMaintenanceTooLong reads
    // "maintenance"; a node waiting for another gate is neither.
    let failing = t.not_ready.iter().take(MAX_NODE_SERIES).map(|(node, e)| {
        let state = if t.conflicts.contains(node) {
            "conflict"
        } else {
            "not_ready"
        };
        (node, state, &e.layer, &e.reason)
    });
    let in_maintenance = t
        .maintenance
        .iter()
        .take(MAX_NODE_SERIES)
        .map(|(node, e)| (node, "maintenance", &e.layer, &e.reason));
    let waiting = t
        .waiting_for_gate
        .iter()
        .take(MAX_NODE_SERIES)
        .map(|(node, e)| (node, "waiting_for_gate", &e.layer, &e.reason));
    let not_ready = failing
        .chain(in_maintenance)
        .chain(waiting)
        .map(|(node, state, layer, reason)| NodeNotReady {
            profile: profile.to_owned(),
            node: node.clone(),
            mode: mode.to_owned(),
            state: state.to_owned(),
            layer: layer.clone(),
            reason: reason.clone(),
        })
        .collect();
    let layers = t
        .layers
        .iter()
        .flat_map(|(layer, lt)| {
            lt.failing
                .iter()
                .take(MAX_NODE_SERIES)
                .map(move |(node, reason)| NodeLayer {
                    profile: profile.to_owned(),
                    node: node.clone(),
                    layer: layer.to_string(),
                    reason: reason.clone(),
                })
        })
        .collect();
    let tainted_devices = t
        .tainted_devices
        .iter()
        .take(MAX_NODE_SERIES)
        .map(|(node, devices)| {
            (
                ProfileNode {
                    profile: profile.to_owned(),
                    node: node.clone(),
                },
                i64::try_from(devices.len()).unwrap_or(i64::MAX),
            )
        })
        .collect();
    NodeSeries {
        not_ready,
        layers,
        tainted_devices,
    }
}

/// Events on the profile when its Ready or SafetyBrake condition changes status.
async fn publish_profile_transitions(
    ctx: &Context,
    profile: &GpuNodeProfile,
    old: Option<&GpuNodeProfileStatus>,
    new: &GpuNodeProfileStatus,
) {
    for c in &new.conditions {
        if c.type_ != keys::CONDITION_READY && c.type_ != keys::CONDITION_SAFETY_BRAKE {
            continue;
        }
        let before = old.and_then(|o| o.conditions.iter().find(|p| p.type_ == c.type_));
        if before.is_some_and(|b| b.status == c.status)
            || (before.is_none() && c.status == "False" && c.type_ == keys::CONDITION_SAFETY_BRAKE)
        {
            continue;
        }
        let (type_, reason) = match (c.type_.as_str(), c.status.as_str()) {
            (keys::CONDITION_READY, "True") => (EventType::Normal, event_reasons::PROFILE_READY),
            (keys::CONDITION_READY, _) => (EventType::Warning, event_reasons::PROFILE_NOT_READY),
            (_, "True") => (EventType::Warning, event_reasons::SAFETY_BRAKE_ENGAGED),
            _ => (EventType::Normal, event_reasons::SAFETY_BRAKE_RELEASED),
        };
        info!(profile = %profile.name_any(), reason, "profile transition");
        let ev = event(type_, reason, "Aggregate", &c.message);
        publish_profile_event(ctx, &ev, profile, "profile transition").await;
    }
    publish_no_execute_held(ctx, profile, old, new).await;
}

/// A Warning Event on the profile when escalations to `NoExecute` start to
/// be held back (by the safety brake or the budget): the moment a person
/// should know that bad nodes or devices keep their pods for now.
async fn publish_no_execute_held(
    ctx: &Context,
    profile: &GpuNodeProfile,
    old: Option<&GpuNodeProfileStatus>,
    new: &GpuNodeProfileStatus,
) {
    let held = |s: Option<&GpuNodeProfileStatus>| {
        s.and_then(|s| s.no_execute)
            .map_or(0, |b| b.nodes_held + b.devices_held)
    };
    let Some(b) = new
        .no_execute
        .filter(|_| held(old) == 0 && held(Some(new)) > 0)
    else {
        return;
    };
    let why = if ctx.ledger.engaged(&profile.name_any()) {
        "the safety brake is engaged"
    } else {
        "the profile's NoExecute budget (escalation.maxNoExecutePercent) is spent"
    };
    let note = format!(
        "escalations to NoExecute held: {why}; {} node(s) and {} device(s) wait with the taint's own effect ({} of at most {} nodes, {} of at most {} devices escalated)",
        b.nodes_held, b.devices_held, b.nodes, b.node_limit, b.devices, b.device_limit
    );
    let ev = event(
        EventType::Warning,
        event_reasons::NO_EXECUTE_HELD,
        "Aggregate",
        &note,
    );
    publish_profile_event(ctx, &ev, profile, "escalations held").await;
}
