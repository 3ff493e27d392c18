//! The one place gpuready writes DeviceTaintRules: the changes the pure plan
//! made for a node's devices (device gating), sent before the node's own
//! patch, through the same fenced client as every other write. Exact
//! ownership: a rule is created by name (a name another writer holds is left
//! alone), updated only at the resourceVersion gpuready saw, and deleted only
//! with the uid gpuready saw — never by prefix, label selector or collection;
//! and gpuready's one condition in the status of a rule it holds, applied
//! server-side under its own field manager (kubernetes #141290's pods).

use gpuready_api::device_taint_rule::DeviceTaintRule;
use gpuready_api::keys;
use gpuready_core::devices::{DeviceRuleChange, RuleAction};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::EventType;
use tracing::{info, warn};

use super::events::publish_node_event;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::event::{event, profile_prefix};

/// Sends the planned rule changes. Returns the changes that took effect (for
/// Events); a create whose name another writer already holds is skipped.
pub async fn write(
    ctx: &Context,
    changes: &[DeviceRuleChange],
) -> Result<Vec<DeviceRuleChange>, Error> {
    let api: Api<DeviceTaintRule> = Api::all(ctx.client.clone());
    // gpuready's field manager, as on every other write (managedFields name it).
    let post = PostParams {
        field_manager: Some(keys::FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let mut done = Vec::with_capacity(changes.len());
    for c in changes {
        match c.action {
            RuleAction::Create => {
                let Some(rule) = &c.rule else { continue };
                match api.create(&post, rule).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        // gpuready's own, written a moment ago and not in the
                        // cache yet; or another writer's, left alone whatever it says.
                        let owned = api
                            .get_opt(&c.name)
                            .await?
                            .is_some_and(|r| gpuready_api::device_taint_rule::is_owned(&r));
                        if !owned {
                            warn!(rule = %c.name, device = %c.device, "a DeviceTaintRule of that name exists and is not gpuready's; leaving it alone");
                        }
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            RuleAction::Update => {
                let Some(rule) = &c.rule else { continue };
                let mut rule = rule.clone();
                rule.metadata.resource_version = c.resource_version.clone();
                rule.metadata.uid = c.uid.clone();
                api.replace(&c.name, &post, &rule).await?;
            }
            // After the node's own writes: `write_status`.
            RuleAction::Status => continue,
            RuleAction::Delete => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: c.uid.clone(),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(&c.name, &params).await {
                    Ok(_) => {}
                    // Gone already: nothing to take back.
                    Err(kube::Error::Api(s)) if s.code == 404 => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        ctx.metrics.count_write("devicetaintrule");
        info!(action = ?c.action, rule = %c.name, device = %c.device, reason = c.reason.as_deref().unwrap_or(""), "DeviceTaintRule written");
        done.push(c.clone());
    }
    Ok(done)
}

/// Sends the planned status writes (gpuready's condition on its rules),
/// after the node's own writes. A write the API server refuses (403: the
/// chart's RBAC rule missing, a site's policy; 422) is logged and left: the
/// node's condition, the profile status, the metric and `check` say the same.
pub async fn write_status(ctx: &Context, changes: &[DeviceRuleChange]) -> Result<(), Error> {
    let api: Api<DeviceTaintRule> = Api::all(ctx.client.clone());
    for c in changes.iter().filter(|c| c.action == RuleAction::Status) {
        if apply_status(&api, c).await? {
            ctx.metrics.count_write("devicetaintrule_status");
            info!(rule = %c.name, device = %c.device, reason = c.reason.as_deref().unwrap_or(""), "DeviceTaintRule status written");
        }
    }
    Ok(())
}

/// gpuready's one condition on one of its rules: a server-side apply of
/// `status.conditions[type=GpuReadyPodsNotEvicted]` on the status
/// subresource under gpuready's field manager, not forced, so no other
/// manager's field (the eviction controller's `EvictionInProgress`) is
/// touched, and a condition of that type another manager holds is left to
/// it (409, logged). The uid gpuready saw makes it apply to that rule only;
/// a rule gone meanwhile (404) is skipped. Returns whether it was written.
async fn apply_status(api: &Api<DeviceTaintRule>, c: &DeviceRuleChange) -> Result<bool, Error> {
    let Some(condition) = &c.condition else {
        return Ok(false);
    };
    let body = serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": keys::device_rules::KIND,
        "metadata": {"name": c.name, "uid": c.uid},
        "status": {"conditions": [condition]},
    });
    match api
        .patch_status(
            &c.name,
            &PatchParams::apply(keys::FIELD_MANAGER),
            &Patch::Apply(&body),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            warn!(rule = %c.name, error = %s.message, "another manager holds gpuready's condition on this DeviceTaintRule, or the rule was replaced; leaving it alone");
            Ok(false)
        }
        Err(kube::Error::Api(s)) if matches!(s.code, 403 | 422) => {
            warn!(rule = %c.name, error = %s.message, "the API server refused gpuready's condition on its DeviceTaintRule (RBAC `patch` on devicetaintrules/status, or a policy); the node's condition and the profile status still name the pods");
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// One Event on the node per rule created or deleted, naming the device
/// (none for gpuready's condition in a rule's status).
pub async fn publish(ctx: &Context, node: &Node, profile: Option<&str>, done: &[DeviceRuleChange]) {
    for c in done {
        let (type_, reason, note) = match c.action {
            RuleAction::Status => continue,
            RuleAction::Create | RuleAction::Update => (
                EventType::Warning,
                keys::event_reasons::DEVICE_TAINTED,
                format!(
                    "device {} (pool {}) tainted by DeviceTaintRule {}: {}: {}",
                    c.device,
                    c.pool,
                    c.name,
                    c.reason.as_deref().unwrap_or(""),
                    c.message.as_deref().unwrap_or("")
                ),
            ),
            RuleAction::Delete => (
                EventType::Normal,
                keys::event_reasons::DEVICE_TAINT_REMOVED,
                format!(
                    "device {} (pool {}): DeviceTaintRule {} deleted (the device recovered or is no longer gated)",
                    c.device, c.pool, c.name
                ),
            ),
        };
        let note = format!("{}{note}", profile_prefix(profile));
        let ev = event(type_, reason, "GateDevice", &note);
        publish_node_event(ctx, node, profile, &ev, "device taint").await;
    }
}
