//! Profile status, metrics and profile Events, aggregated over the node cache.
//! Runs after node reconciles (debounced) and on a slow timer; writes a profile's
//! status only when it differs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use gpuready_api::keys;
use gpuready_api::{GpuNodeProfile, GpuNodeProfileStatus, Layer};
use gpuready_core::status::{ExtraConditions, profile_status};
use gpuready_core::{GovernanceKind, NodeAssessment, Status};
use jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Context;
use super::metrics::{Profile, ProfileLayer, ProfileState};
use super::node::{profiles_with_selectors, verdict_of};

/// Coalesces bursts of node reconciles into one status pass.
const DEBOUNCE: Duration = Duration::from_millis(500);
/// Status is refreshed at least this often even when nothing triggers it.
const RESYNC: Duration = Duration::from_secs(30);

pub async fn run(ctx: Arc<Context>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ctx.status_dirty.notified() => {},
            _ = tokio::time::sleep(RESYNC) => {},
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(DEBOUNCE) => {},
        }
        if !ctx.wait_for_caches().await {
            return;
        }
        if let Err(e) = pass(&ctx).await {
            warn!(error = %e, "profile status pass failed");
        }
    }
}

/// One pass: assess every cached node, then update each profile.
pub async fn pass(ctx: &Context) -> Result<(), kube::Error> {
    let now = Timestamp::now();
    let profiles = ctx.profiles.state();
    let selectors = profiles_with_selectors(&profiles);
    let mut by_profile: BTreeMap<String, Vec<NodeAssessment>> = BTreeMap::new();
    for node in ctx.nodes.state() {
        // Verdicts only: the brake changes planned taints, not readiness.
        let a = verdict_of(&ctx.facts_of(&node), &selectors, now);
        match a.governance {
            GovernanceKind::Governed => {
                if let Some(p) = a.profile.clone() {
                    by_profile.entry(p).or_default().push(a);
                }
            }
            GovernanceKind::Conflict => {
                for p in a.conflicting_profiles.clone() {
                    by_profile.entry(p).or_default().push(a.clone());
                }
            }
            GovernanceKind::Ungoverned => {}
        }
    }

    ctx.metrics.nodes.clear();
    ctx.metrics.layer_ready.clear();
    ctx.metrics.brake.clear();
    let api: Api<GpuNodeProfile> = Api::all(ctx.client.clone());
    for profile in &profiles {
        let name = profile.name_any();
        let nodes: Vec<&NodeAssessment> = by_profile
            .get(&name)
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        let not_ready = nodes.iter().filter(|n| n.ready != Some(true)).count();
        let was_engaged = ctx.brake_engaged(&name);
        let engaged = ctx.update_brake(&name, nodes.len(), not_ready, now);
        if was_engaged && !engaged {
            // Nodes held back while the brake was on get their taint now: nothing
            // about them changed, so nothing else would reconcile them.
            for n in nodes.iter().filter(|n| n.ready != Some(true)) {
                let _ = ctx.requeue.send(ObjectRef::new(&n.name));
            }
        }
        record_metrics(ctx, &name, &nodes, engaged);

        let extra = ExtraConditions {
            brake: Some(brake_condition(ctx, engaged)),
            nfd_crds: ctx.nfd_condition(),
        };
        let new = profile_status(
            &name,
            profile.metadata.generation,
            &nodes,
            &extra,
            profile.status.as_ref(),
            now,
        );
        // A profile that got past admission yet breaks the CRD's rules says so.
        let new = match gpuready_core::status::profile_problem(profile) {
            Some(why) => gpuready_core::status::mark_invalid(
                new,
                &why,
                profile.metadata.generation,
                profile.status.as_ref(),
                now,
            ),
            None => new,
        };
        if profile.status.as_ref() == Some(&new) {
            continue;
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
    }
    Ok(())
}

fn record_metrics(ctx: &Context, profile: &str, nodes: &[&NodeAssessment], engaged: bool) {
    let state = |s: &str| ProfileState {
        profile: profile.to_owned(),
        state: s.to_owned(),
    };
    let count = |f: &dyn Fn(&NodeAssessment) -> bool| {
        i64::try_from(nodes.iter().filter(|n| f(n)).count()).unwrap_or(i64::MAX)
    };
    ctx.metrics
        .nodes
        .get_or_create(&state("ready"))
        .set(count(&|n| n.ready == Some(true)));
    ctx.metrics
        .nodes
        .get_or_create(&state("not_ready"))
        .set(count(&|n| {
            n.ready != Some(true) && n.governance == GovernanceKind::Governed
        }));
    ctx.metrics
        .nodes
        .get_or_create(&state("conflict"))
        .set(count(&|n| n.governance == GovernanceKind::Conflict));
    ctx.metrics
        .nodes
        .get_or_create(&state("past_deadline"))
        .set(count(&|n| n.deadline_passed.is_some()));
    for layer in Layer::ALL {
        ctx.metrics
            .layer_ready
            .get_or_create(&ProfileLayer {
                profile: profile.to_owned(),
                layer: layer.to_string(),
            })
            .set(count(&|n| {
                n.layers
                    .iter()
                    .any(|l| l.layer == layer && l.status == Status::Ready)
            }));
    }
    ctx.metrics
        .brake
        .get_or_create(&Profile {
            profile: profile.to_owned(),
        })
        .set(i64::from(engaged));
}

fn brake_condition(ctx: &Context, engaged: bool) -> (bool, String, String) {
    let cfg = ctx.args.brake();
    if engaged {
        (
            true,
            "TooManyNodesTurnedNotReady".into(),
            format!(
                "more than {:.0}% of the nodes turned not-ready within {}s: new taints are held back (existing ones stay) until the share of not-ready nodes falls back under the threshold; likely a shared cause such as a GFD/NFD outage or a driver rollout",
                cfg.threshold * 100.0,
                cfg.window_seconds
            ),
        )
    } else {
        (
            false,
            "Released".into(),
            "taints are applied normally".into(),
        )
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
            (keys::CONDITION_READY, "True") => (EventType::Normal, "ProfileReady"),
            (keys::CONDITION_READY, _) => (EventType::Warning, "ProfileNotReady"),
            (_, "True") => (EventType::Warning, "SafetyBrakeEngaged"),
            _ => (EventType::Normal, "SafetyBrakeReleased"),
        };
        info!(profile = %profile.name_any(), reason, "profile transition");
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(c.message.chars().take(1000).collect()),
            action: "Aggregate".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&ev, &profile.object_ref(&())).await {
            warn!(error = %e, "publishing profile event failed");
        } else {
            ctx.metrics.count_write("event");
        }
    }
}
