//! The Events gpuready publishes on Nodes: the `GpuReady` transition and the
//! first pass of the not-ready deadline. Called by the node reconciler after
//! its writes; an Event never fails the reconcile that wrote the node. Each
//! profile's per-node Events pass its Event budget
//! (`gpuready_core::event_budget`); what a burst holds back, [`summarize`]
//! posts as one Event on the profile.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use gpuready_api::GpuNodeProfile;
use gpuready_api::keys;
use gpuready_core::event_budget::Summary;
use gpuready_core::{NodeAssessment, NodeFacts};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use crate::controller::context::Context;
use crate::controller::event::{event, profile_prefix};

/// An Event on the node when its GpuReady verdict changes status.
pub async fn publish_transition(ctx: &Context, node: &Node, facts: &NodeFacts, a: &NodeAssessment) {
    let Some(new) = a
        .changes
        .conditions
        .as_ref()
        .and_then(|c| c.set.iter().find(|c| c.type_ == keys::CONDITION_GPU_READY))
    else {
        return;
    };
    let old = facts
        .gpu_conditions
        .iter()
        .find(|c| c.type_ == keys::CONDITION_GPU_READY);
    if old.is_some_and(|o| o.status == new.status) {
        return;
    }
    let (type_, reason) = match new.status.as_str() {
        "True" => (EventType::Normal, keys::event_reasons::GPU_READY.to_owned()),
        _ => (
            EventType::Warning,
            format!(
                "{}{}",
                keys::event_reasons::GPU_NOT_READY_PREFIX,
                a.reason.chars().take(100).collect::<String>()
            ),
        ),
    };
    let note = format!("{}{}", profile_prefix(a.profile.as_deref()), a.message);
    let ev = event(type_, &reason, "Evaluate", &note);
    publish_node_event(ctx, node, a.profile.as_deref(), &ev, "GpuReady transition").await;
}

/// A Warning Event on the node when the API server refused gpuready's write
/// to it (an admission policy, RBAC): `sentence` says what was refused (its
/// taint, or another write), `why` the server's reason.
pub async fn publish_refusal(
    ctx: &Context,
    node: &Node,
    profile: Option<&str>,
    sentence: &str,
    why: &str,
) {
    let ev = event(
        EventType::Warning,
        keys::event_reasons::WRITE_REFUSED,
        "Write",
        &format!("{sentence}: {why}"),
    );
    publish_node_event(ctx, node, profile, &ev, "write refusal").await;
}

/// Sends one Event about `node` and counts it as a write, if `profile`'s
/// Event budget admits it (else it is counted for the profile's summary); a
/// failure is logged, never returned, because an Event must not fail the
/// reconcile that wrote the node. `what` names the Event in that log line.
///
/// Created directly rather than through kube's `Recorder`: the Recorder keeps a
/// copy of every Event it sent for six minutes (to patch a repeat into a
/// series), keyed by the regarding object's reference *with* its
/// resourceVersion. A node's Events follow a write to it, so no key ever
/// repeats: the copies were never used, yet after a fleet-wide transition they
/// held a full `Event` (about 2 KB with its hash-map slot) per node, the largest
/// per-node cost left once the node cache was packed. The Event sent is the
/// one the Recorder would create (same name scheme, fields and namespace).
pub(super) async fn publish_node_event(
    ctx: &Context,
    node: &Node,
    profile: Option<&str>,
    ev: &Event,
    what: &str,
) {
    let now = Timestamp::now();
    let admitted = ctx
        .events
        .budget
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .admit(profile.unwrap_or_default(), &ev.reason, now);
    if !admitted {
        ctx.metrics.events_held.inc();
        return;
    }
    let event = node_event(ctx, node, ev, now);
    let api: Api<K8sEvent> = Api::namespaced(ctx.client.clone(), EVENT_NAMESPACE);
    if let Err(e) = api.create(&PostParams::default(), &event).await {
        warn!(error = %e, what, "publishing a node event failed");
    } else {
        ctx.metrics.count_write("event");
    }
}

/// How often the budget is asked for summaries that are due.
const SUMMARY_TICK: Duration = Duration::from_secs(10);

/// Posts, for each profile whose burst held per-node Events back, one Event on
/// the profile that counts them (at most one per profile per
/// `event_budget::SUMMARY_SECONDS`), until aborted. Budgets of deleted
/// profiles are dropped here too. Writes through the fenced client, so a
/// replica that lost its lease posts nothing.
pub async fn summarize(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(SUMMARY_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = Timestamp::now();
        let due = {
            let mut budget = ctx
                .events
                .budget
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            budget.retain_profiles(|p| ctx.caches.profiles.get(&ObjectRef::new(p)).is_some());
            budget.due(now)
        };
        for summary in due {
            publish_summary(&ctx, &summary, now).await;
        }
    }
}

/// One summary Event on its profile (Events about nodes no profile governs
/// have nothing to be posted on: their summary is logged).
async fn publish_summary(ctx: &Context, summary: &Summary, now: Timestamp) {
    let note = summary.note(now);
    let Some(profile) = ctx.caches.profiles.get(&ObjectRef::new(&summary.profile)) else {
        info!(
            held = summary.total(),
            note, "per-node Events held back (no profile)"
        );
        return;
    };
    let ev = event(
        EventType::Normal,
        keys::event_reasons::NODE_EVENTS_HELD,
        "Summarize",
        &note,
    );
    publish_profile_event(ctx, &ev, &profile, "summary of held-back node events").await;
}

/// Sends one Event about a GpuNodeProfile through kube's Recorder and counts
/// it as a write; a failure is logged (`what` names the Event), never
/// returned: an Event must not fail the work it reports on.
pub async fn publish_profile_event(
    ctx: &Context,
    ev: &Event,
    profile: &GpuNodeProfile,
    what: &str,
) {
    match ctx
        .events
        .recorder
        .publish(ev, &profile.object_ref(&()))
        .await
    {
        Ok(()) => ctx.metrics.count_write("event"),
        Err(e) => {
            warn!(profile = %profile.name_any(), error = %e, what, "publishing a profile event failed")
        }
    }
}

/// Where Events about cluster-scoped objects go (as kube's `Recorder` does).
const EVENT_NAMESPACE: &str = "default";

/// The `events.k8s.io/v1` Event about `node`.
fn node_event(ctx: &Context, node: &Node, ev: &Event, now: Timestamp) -> K8sEvent {
    let regarding = node.object_ref(&());
    // The reporting controller the Recorder (profile Events) also names.
    let controller = keys::FIELD_MANAGER.to_owned();
    K8sEvent {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}.{:x}",
                regarding.name.as_deref().unwrap_or(&controller),
                now.as_nanosecond()
            )),
            namespace: Some(EVENT_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        action: Some(ev.action.clone()),
        reason: Some(ev.reason.clone()),
        note: ev.note.clone(),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding),
        related: ev.secondary.clone(),
        reporting_instance: Some(ctx.args.identity()),
        reporting_controller: Some(controller),
        type_: Some(
            match ev.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_owned(),
        ),
        ..K8sEvent::default()
    }
}

/// An Event on the node when it first passes its profile's not-ready deadline
/// (the written `GpuReady` reason turns to `NotReadyDeadlineExceeded`). The
/// condition, the `past_deadline` metric and the optional label carry the state;
/// the Event marks the moment. gpuready never deletes, drains or cordons.
pub async fn publish_deadline(ctx: &Context, node: &Node, facts: &NodeFacts, a: &NodeAssessment) {
    let Some(d) = &a.deadline_passed else {
        return;
    };
    if !gpu_ready_turns(facts, a, |c| {
        c.reason.as_deref() == Some(keys::reasons::NOT_READY_DEADLINE_EXCEEDED)
    }) {
        return;
    }
    let note = format!(
        "GpuNodeProfile {}: {}; remediation is left to other systems",
        a.profile.as_deref().unwrap_or("-"),
        d.describe()
    );
    let reason = keys::reasons::NOT_READY_DEADLINE_EXCEEDED;
    let ev = event(EventType::Warning, reason, "Evaluate", &note);
    publish_node_event(ctx, node, a.profile.as_deref(), &ev, "not-ready deadline").await;
}

/// Whether the `GpuReady` condition this assessment writes is `matches` and
/// the node's own was not: a node Event marks that moment once, not every
/// reconcile while it lasts.
fn gpu_ready_turns(
    facts: &NodeFacts,
    a: &NodeAssessment,
    matches: impl Fn(&NodeCondition) -> bool,
) -> bool {
    let any = |cs: &[NodeCondition]| {
        cs.iter()
            .any(|c| c.type_ == keys::CONDITION_GPU_READY && matches(c))
    };
    let was = any(&facts.gpu_conditions);
    let now = a.changes.conditions.as_ref().is_some_and(|cs| any(&cs.set));
    now && !was
}

/// A Warning Event on the node when gpuready first refuses its repair
/// annotation (a time in the future, before the node existed, or unreadable):
/// the written `GpuReady` message gains the refusal, the old one lacked it.
/// The refused annotation changes nothing; the Event says so once.
pub async fn publish_repair_refusal(
    ctx: &Context,
    node: &Node,
    facts: &NodeFacts,
    a: &NodeAssessment,
) {
    let Some(note) = a
        .lifecycle
        .repair
        .as_ref()
        .filter(|r| r.refused.is_some())
        .and_then(|r| r.note())
    else {
        return;
    };
    if !gpu_ready_turns(facts, a, |c| {
        c.message.as_ref().is_some_and(|m| m.contains(&note))
    }) {
        return;
    }
    let reason = keys::lifecycle::EVENT_REPAIR_REFUSED;
    let ev = event(EventType::Warning, reason, "Evaluate", &note);
    publish_node_event(ctx, node, a.profile.as_deref(), &ev, "repair refusal").await;
}
