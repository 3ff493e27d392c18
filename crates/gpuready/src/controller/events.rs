//! The Events gpuready publishes on Nodes: the `GpuReady` transition and the
//! first pass of the not-ready deadline. Called by the node reconciler after
//! its writes; an Event never fails the reconcile that wrote the node.

use gpuready_api::keys;
use gpuready_core::{NodeAssessment, NodeFacts};
use k8s_openapi::api::core::v1::Node;
use kube::Resource;
use kube::runtime::events::{Event, EventType};
use tracing::warn;

use super::context::Context;

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
    let ev = Event {
        type_,
        reason: reason.chars().take(128).collect(),
        note: Some(
            format!(
                "{}{}",
                a.profile
                    .as_deref()
                    .map(|p| format!("GpuNodeProfile {p}: "))
                    .unwrap_or_default(),
                a.message
            )
            .chars()
            .take(1000)
            .collect(),
        ),
        action: "Evaluate".into(),
        secondary: None,
    };
    publish_node_event(ctx, node, &ev, "GpuReady transition").await;
}

/// Sends one Event about `node` and counts it as a write; a failure is logged,
/// never returned, because an Event must not fail the reconcile that wrote the
/// node. `what` names the Event in that log line.
async fn publish_node_event(ctx: &Context, node: &Node, ev: &Event, what: &str) {
    if let Err(e) = ctx.recorder.publish(ev, &node.object_ref(&())).await {
        warn!(error = %e, what, "publishing a node event failed");
    } else {
        ctx.metrics.count_write("event");
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
    let was_past = facts.gpu_conditions.iter().any(|c| {
        c.type_ == keys::CONDITION_GPU_READY
            && c.reason.as_deref() == Some(keys::reasons::NOT_READY_DEADLINE_EXCEEDED)
    });
    let now_past = a.changes.conditions.as_ref().is_some_and(|cs| {
        cs.set.iter().any(|c| {
            c.type_ == keys::CONDITION_GPU_READY
                && c.reason.as_deref() == Some(keys::reasons::NOT_READY_DEADLINE_EXCEEDED)
        })
    });
    if was_past || !now_past {
        return;
    }
    let ev = Event {
        type_: EventType::Warning,
        reason: keys::reasons::NOT_READY_DEADLINE_EXCEEDED.into(),
        note: Some(
            format!(
                "GpuNodeProfile {}: {}; remediation is left to other systems",
                a.profile.as_deref().unwrap_or("-"),
                d.describe()
            )
            .chars()
            .take(1000)
            .collect(),
        ),
        action: "Evaluate".into(),
        secondary: None,
    };
    publish_node_event(ctx, node, &ev, "not-ready deadline").await;
}
