//! The node reconciler: the only place gpuready writes to Nodes. Judges the node
//! with the pure engine, then writes only what differs — the taint by an
//! optimistic-lock merge patch, labels and conditions by server-side apply.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuready_api::GpuNodeProfile;
use gpuready_api::keys;
use gpuready_core::{GovernanceKind, NodeAssessment, NodeChanges, NodeFacts, PlanOptions, assess};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Selector;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tracing::{Instrument, debug, info, info_span, warn};

use super::Context;
use super::error::{Error, is_conflict};
use super::prune::prune_node;

/// Attempts at the optimistic-lock taint write before giving the node back to
/// the queue (which retries with backoff).
const MAX_CONFLICT_RETRIES: usize = 5;

/// Profiles with their parsed selectors. A profile whose selector cannot be
/// parsed selects nothing (the schema prevents it; its status says so).
pub fn profiles_with_selectors(
    profiles: &[Arc<GpuNodeProfile>],
) -> Vec<(Arc<GpuNodeProfile>, Selector)> {
    profiles
        .iter()
        .filter_map(|p| match gpuready_core::select::profile_selector(p) {
            Ok(s) => Some((p.clone(), s)),
            Err(e) => {
                warn!(profile = %p.name_any(), error = %e, "ignoring profile with an invalid selector");
                None
            }
        })
        .collect()
}

/// The engine over one node. `hold_new_taints` only changes the planned taint
/// (the safety brake), never the verdict, so a caller that reads only verdicts
/// passes `false`.
pub fn assess_node(
    ctx: &Context,
    facts: &NodeFacts,
    profiles: &[(Arc<GpuNodeProfile>, Selector)],
    now: Timestamp,
    hold_new_taints: bool,
) -> NodeAssessment {
    let pairs: Vec<(&GpuNodeProfile, &Selector)> =
        profiles.iter().map(|(p, s)| (p.as_ref(), s)).collect();
    let opts = PlanOptions {
        now,
        heartbeat_seconds: i64::try_from(ctx.args.heartbeat.as_secs()).unwrap_or(i64::MAX),
        hold_new_taints,
    };
    assess(facts, &pairs, &opts)
}

pub async fn reconcile(node: Arc<Node>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = node.name_any();
    let span = info_span!("reconcile", node = %name, profile = tracing::field::Empty);
    let started = Instant::now();
    let result = reconcile_inner(node, &ctx).instrument(span).await;
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    if let Err(e) = &result {
        ctx.metrics
            .reconcile_errors
            .get_or_create(&super::metrics::Kind {
                kind: e.kind().to_owned(),
            })
            .inc();
    }
    ctx.status_dirty.notify_one();
    result
}

async fn reconcile_inner(cached: Arc<Node>, ctx: &Context) -> Result<Action, Error> {
    let synced = tokio::time::timeout(Duration::from_secs(30), ctx.wait_for_caches())
        .await
        .map_err(|_| Error::CacheNotReady("caches not synced after 30s".into()))?;
    if !synced {
        return Err(Error::CacheNotReady("the cache sync task ended".into()));
    }
    ctx.evidence.wait_settled(Duration::from_secs(30)).await;
    let api: Api<Node> = Api::all(ctx.client.clone());
    let name = cached.name_any();
    let mut node: Node = (*cached).clone();
    // The cache may not show gpuready's own last write yet (the PATCH response can
    // beat its watch event): planning from the older copy would send the same
    // labels and conditions again and repeat the transition Event.
    if ctx.cache_may_be_behind(&name, cached.resource_version().as_deref()) {
        debug!("the cache predates our last write; reading the node");
        node = api.get(&name).await?;
        prune_node(&mut node);
    }

    for attempt in 0..MAX_CONFLICT_RETRIES {
        let now = Timestamp::now();
        let profiles = profiles_with_selectors(&ctx.profiles.state());
        // The turn is counted before the brake is consulted, so the turn that
        // trips the brake is held back too: a burst taints at most
        // floor(threshold × matched) nodes, not one more.
        let facts = ctx.facts_of(&node);
        let unheld = assess_node(ctx, &facts, &profiles, now, false);
        ctx.record_turn(&facts, &unheld, now);
        let assessment = match &unheld.profile {
            Some(p) if ctx.brake_engaged(p) => assess_node(ctx, &facts, &profiles, now, true),
            _ => unheld,
        };
        // Recorded once: a span field recorded again is printed again.
        if attempt == 0
            && let Some(p) = &assessment.profile
        {
            tracing::Span::current().record("profile", p.as_str());
        }

        match write_changes(ctx, &api, &node, &assessment.changes).await {
            Ok(written) => {
                let wrote = written.is_some();
                if let Some(rv) = written {
                    ctx.note_write(&name, rv);
                    publish_transition(ctx, &node, &facts, &assessment).await;
                    super::evidence::publish_deadline(ctx, &node, &facts, &assessment).await;
                }
                debug!(ready = ?assessment.ready, reason = %assessment.reason, wrote, "reconciled");
                return Ok(next_check(ctx, &assessment));
            }
            Err(Error::Kube(e)) if is_conflict(&e) => {
                debug!("taint write conflicted; re-reading the node");
                node = api.get(&name).await?;
                prune_node(&mut node);
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::TooManyConflicts(name, MAX_CONFLICT_RETRIES))
}

/// When to look at the node again without any change to it: before the GFD
/// timestamp goes stale, and in time to refresh the condition heartbeat.
fn next_check(ctx: &Context, a: &NodeAssessment) -> Action {
    // Just past the heartbeat, so the condition written now counts as due then
    // (at exactly the heartbeat it would still be fresh and wait a second round).
    let heartbeat = ctx.args.heartbeat + Duration::from_secs(1);
    match a.recheck_after_seconds {
        Some(s) => Action::requeue(Duration::from_secs(s).min(heartbeat)),
        None if a.governance == GovernanceKind::Ungoverned => Action::await_change(),
        None => Action::requeue(heartbeat),
    }
}

/// Sends the planned writes. Returns the node's resourceVersion after the last
/// one, `None` when nothing needed writing.
async fn write_changes(
    ctx: &Context,
    api: &Api<Node>,
    node: &Node,
    changes: &NodeChanges,
) -> Result<Option<String>, Error> {
    if changes.is_empty() {
        return Ok(None);
    }
    let mut written = None;
    let name = node.name_any();
    if let Some(t) = &changes.taint {
        // The whole list is replaced (merge patches replace lists), so the
        // resourceVersion precondition is what keeps a concurrent writer's
        // taint from being lost: on 409 the caller re-reads and re-plans.
        let annotations: BTreeMap<&str, &Option<String>> =
            t.annotations.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let taints = if t.taints.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::to_value(&t.taints)?
        };
        let patch = json!({
            "metadata": {
                "resourceVersion": node.resource_version(),
                "annotations": annotations,
            },
            "spec": { "taints": taints },
        });
        let after = api
            .patch(
                &name,
                &PatchParams {
                    field_manager: Some(keys::TAINT_FIELD_MANAGER.to_owned()),
                    ..PatchParams::default()
                },
                &Patch::Merge(&patch),
            )
            .await?;
        written = after.resource_version();
        ctx.metrics.count_write("taint");
        info!(change = %t.summary, "taint updated");
    }
    let apply = PatchParams::apply(keys::FIELD_MANAGER).force();
    if let Some(labels) = &changes.labels {
        let mut meta = json!({ "name": name });
        if !labels.is_empty() {
            meta["labels"] = serde_json::to_value(labels)?;
        }
        let body = json!({ "apiVersion": "v1", "kind": "Node", "metadata": meta });
        let after = api.patch(&name, &apply, &Patch::Apply(&body)).await?;
        written = after.resource_version();
        ctx.metrics.count_write("labels");
    }
    if let Some(conditions) = &changes.conditions {
        let mut body = json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": name } });
        if !conditions.is_empty() {
            body["status"] = json!({ "conditions": conditions });
        }
        let after = api
            .patch_status(&name, &apply, &Patch::Apply(&body))
            .await?;
        written = after.resource_version();
        ctx.metrics.count_write("conditions");
    }
    Ok(Some(written.unwrap_or_default()))
}

/// An Event on the node when its GpuReady verdict changes status.
async fn publish_transition(ctx: &Context, node: &Node, facts: &NodeFacts, a: &NodeAssessment) {
    let Some(new) = a
        .changes
        .conditions
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.type_ == keys::CONDITION_GPU_READY))
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
        "True" => (EventType::Normal, "GpuReady".to_owned()),
        _ => (
            EventType::Warning,
            format!(
                "GpuNotReady{}",
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
    if let Err(e) = ctx.recorder.publish(&ev, &node.object_ref(&())).await {
        warn!(error = %e, "publishing node event failed");
    } else {
        ctx.metrics.count_write("event");
    }
}
