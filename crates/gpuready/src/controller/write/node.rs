//! The node reconciler: the only place gpuready writes to Nodes. Judges the node
//! with the pure engine, then writes only what differs, in at most two requests:
//! one resourceVersion-locked merge patch on the node (taint list, gpuready's
//! labels and annotations) and one strategic merge patch of gpuready's own
//! conditions on the status subresource — while other nodes' taint writes are
//! pending, the taint goes first alone and the rest when the gate hands the
//! node back (`gpuready_core::write_step`). Events only when `GpuReady` turns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuready_api::GpuNodeProfile;
use gpuready_api::keys;
use gpuready_core::clocks::{self, Observation};
use gpuready_core::devices::{DeviceRuleChange, RuleAction};
use gpuready_core::node_book::{PlannedWrite, RefusalNote, Turn};
use gpuready_core::plan::records_taint;
use gpuready_core::write_step::{WriteStep, needs_crd};
use gpuready_core::{
    ConditionChange, GovernanceKind, NodeAssessment, NodeChanges, NodeFacts, PlanOptions,
    TaintChangeKind, judge,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Selector;
use kube::runtime::controller::Action;
use serde_json::json;
use tracing::{Instrument, debug, info, info_span, warn};

use super::device_rules;
use super::events::{
    publish_deadline, publish_refusal, publish_repair_refusal, publish_transition,
};
use super::written::WrittenNode;
use crate::controller::context::Context;
use crate::controller::error::{Error, RefusedWrite, is_conflict};
use crate::controller::metrics::Kind;
use crate::controller::status_input::StatusInput;
use crate::controller::watch::cached::CachedNode;
use crate::controller::watch::prune::prune_node;
use crate::controller::watch::verdicts::profiles_with_selectors;

/// Attempts at the optimistic-lock taint write before giving the node back to
/// the queue (which retries with backoff).
const MAX_CONFLICT_RETRIES: usize = 5;

/// Plan options from the controller's flags.
fn plan_options(
    ctx: &Context,
    now: Timestamp,
    hold_new_taints: bool,
    write_refused: bool,
) -> PlanOptions {
    PlanOptions {
        now,
        heartbeat_seconds: i64::try_from(ctx.args.heartbeat.as_secs()).unwrap_or(i64::MAX),
        hold_new_taints,
        write_refused,
    }
}

pub async fn reconcile(node: Arc<CachedNode>, ctx: Arc<Context>) -> Result<Action, Error> {
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
            .get_or_create(&Kind {
                kind: e.kind().to_owned(),
            })
            .inc();
    }
    result
}

/// One reconcile in four blocks: the snapshot (caches; a GET only when the
/// cache is behind gpuready's last write), the decision (judge → turn → plan,
/// the write step asked once), the record (the verdict to the tally), and one
/// `match` of I/O whose arms end the reconcile — but a conflict, which reads
/// the node again and decides again.
async fn reconcile_inner(cached: Arc<CachedNode>, ctx: &Context) -> Result<Action, Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    let mut node = snapshot(ctx, &api, &cached).await?;
    for attempt in 0..MAX_CONFLICT_RETRIES {
        let (d, step) = decide(ctx, &node, Timestamp::now()).await;
        // Scale hook: the verdict goes to the status task's tally (O(1) here).
        ctx.tell(StatusInput::verdict(&d.facts.name, &d.verdict));
        // Recorded once: a span field recorded again is printed again.
        if attempt == 0
            && let Some(p) = &d.assessment.profile
        {
            tracing::Span::current().record("profile", p.as_str());
        }
        let (changes, rest_deferred) = match step {
            WriteStep::HoldByCrdGuard => {
                warn!("holding the node as it is: the GpuNodeProfile CRD is missing");
                return Ok(Action::requeue(Duration::from_secs(10)));
            }
            WriteStep::HoldByRefusal {
                retry_after_seconds,
            } => {
                debug!(
                    retry_after_seconds,
                    "the API server refused these changes; backing off before sending them again"
                );
                return Ok(Action::requeue(Duration::from_secs(retry_after_seconds)));
            }
            WriteStep::Defer => {
                debug!("taint writes are ahead; this node's labels and condition wait");
                return Ok(next_check(ctx, &d.assessment));
            }
            WriteStep::Nothing => (NodeChanges::default(), false),
            WriteStep::HoldByBrake { changes } => {
                debug!("the safety brake holds this node's new taint");
                (changes, false)
            }
            WriteStep::Write {
                changes,
                rest_deferred,
            } => (changes, rest_deferred),
        };
        // A taint the API server refused waits out its backoff: the rest
        // still says the refusal in `GpuReady`'s message.
        let held_refusal = (d.assessment.changes.taint.is_some() && changes.taint.is_none())
            .then(|| ctx.ledger.refusal(&d.facts.name))
            .flatten();
        match write_changes(ctx, &node, &changes, held_refusal).await {
            Ok(done) => {
                return Ok(written(ctx, &node, &d, done, rest_deferred, &changes).await);
            }
            Err(Error::Kube(e)) if is_conflict(&e) => {
                debug!("a write met a newer node (409); re-reading and planning again");
                node = read_node(&api, &d.facts.name).await?;
            }
            Err(Error::Refused { why, what, .. }) => {
                return Err(refused(ctx, &node, &d, why, what, Some(&changes)).await);
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::TooManyConflicts(
        cached.name_any(),
        MAX_CONFLICT_RETRIES,
    ))
}

/// The node as the reconcile decides from: the caches listed and the
/// evidence settled, then the cached copy — or, when the cache may not show
/// gpuready's own last write yet (the PATCH response can beat its watch
/// event), the node read from the API server: planning from the older copy
/// would send the same labels and conditions again and repeat the Event.
async fn snapshot(ctx: &Context, api: &Api<Node>, cached: &CachedNode) -> Result<Node, Error> {
    ctx.caches.ready_to_judge().await?;
    let name = cached.name_any();
    if ctx
        .ledger
        .cache_may_be_behind(&name, cached.resource_version().as_deref())
    {
        debug!("the cache predates our last write; reading the node");
        return read_node(api, &name).await;
    }
    // Expanded for the engine, which reads `&Node`; dropped when the reconcile ends.
    Ok(cached.to_node())
}

/// The node from the API server, pruned as the cache prunes it.
async fn read_node(api: &Api<Node>, name: &str) -> Result<Node, Error> {
    let mut node = api.get(name).await?;
    prune_node(&mut node);
    Ok(node)
}

/// What one pass of the reconcile judged: the facts, the verdict (for the
/// tally) and the plan.
struct Decision {
    facts: NodeFacts,
    verdict: NodeAssessment,
    assessment: NodeAssessment,
}

/// Judges the node once, records its turn for the brake before planning (so
/// the turn that trips the brake is held back too: a burst taints at most
/// floor(threshold × matched) nodes, not one more), plans once with the
/// brake's answer, and asks the book's write step once — with the CRD read
/// first only when the plan releases a node no profile governs. Returns the
/// judgement and the write step the book recorded.
async fn decide(ctx: &Context, node: &Node, now: Timestamp) -> (Decision, WriteStep) {
    let profiles = profiles_with_selectors(&ctx.caches.profiles.state());
    let pairs: Vec<(&GpuNodeProfile, &Selector)> =
        profiles.iter().map(|(p, s)| (p.as_ref(), s)).collect();
    let facts = ctx.caches.facts_of(node, &pairs);
    let mut judgement = judge(&facts, &pairs, now);
    let hold = ctx.ledger.turn(&Turn::of(&facts, &judgement.verdict), now);
    // After the turn, so an engaged brake holds this pass's escalations too.
    let ask = judgement.no_execute_ask(&facts);
    let grant = ctx
        .ledger
        .no_execute(&facts.name, ask.as_ref().map(|(p, a)| (p.as_str(), a)));
    judgement.hold_no_execute(&facts, &grant);
    let verdict = judgement.verdict.clone();
    let refused = ctx.ledger.is_refused(&facts.name);
    let mut assessment = judgement.plan(&facts, &plan_options(ctx, now, hold, refused));
    // The clock reads the plan: a node first seen Ready waited only if
    // gpuready's taint comes off now.
    let seen = Observation::of(&facts, &assessment, now);
    let finished_wait = ctx.ledger.clock(&facts.name, seen.as_ref(), now);
    assessment.record_wait(&facts, finished_wait.as_ref());
    let crd = ctx
        .crd
        .view_for(needs_crd(&assessment.changes, assessment.governance))
        .await;
    let step = ctx
        .ledger
        .step(PlannedWrite::of(&facts, &assessment), crd, now);
    (
        Decision {
            facts,
            verdict,
            assessment,
        },
        step,
    )
}

/// After the writes passed: the book notes them (ending a refusal), both
/// clocks are read (a finished wait on the node, a gate just placed), the
/// DeviceTaintRule changes and the transition Events are published — a
/// deferred condition brings its Event when it is written.
async fn written(
    ctx: &Context,
    node: &Node,
    d: &Decision,
    (version, rules_done): (Option<String>, Vec<DeviceRuleChange>),
    rest_deferred: bool,
    sent: &NodeChanges,
) -> Action {
    let wrote = version.is_some();
    let with_taint = sent.taint.is_some();
    if let Some(p) = ctx.ledger.written(&d.facts.name, version, with_taint) {
        ctx.tell(StatusInput::Profile(p));
    }
    let a = &d.assessment;
    read_clocks(ctx, d, sent, &rules_done);
    device_rules::publish(ctx, node, a.profile.as_deref(), &rules_done).await;
    if wrote && !rest_deferred {
        publish_transition(ctx, node, &d.facts, a).await;
        publish_deadline(ctx, node, &d.facts, a).await;
        publish_repair_refusal(ctx, node, &d.facts, a).await;
    }
    debug!(ready = ?a.ready, reason = %a.reason, wrote, "reconciled");
    next_check(ctx, a)
}

/// The two clocks, once a write passed: the node's finished wait is on it
/// (sent now, or already there) → `gpuready_time_to_ready_seconds` and, for
/// a join, every step's `gpuready_layer_ready_seconds`; a gate placed now
/// (taint added, a device rule created) → `gpuready_time_to_gate_seconds`
/// from the fault's evidence.
fn read_clocks(ctx: &Context, d: &Decision, sent: &NodeChanges, rules_done: &[DeviceRuleChange]) {
    let a = &d.assessment;
    let Some(profile) = a.profile.as_deref() else {
        return;
    };
    let wait_on_node = sent
        .annotations
        .as_ref()
        .is_some_and(|m| m.contains_key(keys::ANNOTATION_TIMELINE))
        || (a.ready == Some(true) && !a.writes_wait());
    if wait_on_node && let Some(r) = ctx.ledger.wait_written(&d.facts.name) {
        ctx.metrics.observe_wait(profile, &r);
    }
    // A node that was ready (a joining node's first taint answers no fault).
    let was_ready = d.facts.labels.get(keys::LABEL_READY).map(String::as_str) == Some("true");
    let node_gated = was_ready
        && sent
            .taint
            .as_ref()
            .is_some_and(|t| t.kind == TaintChangeKind::Add);
    let device_gated = rules_done
        .iter()
        .any(|r| r.action == RuleAction::Create && r.taints());
    if (node_gated || device_gated)
        && let Some((source, at)) = clocks::fault_evidence(&d.facts, &d.verdict, !node_gated)
    {
        let seconds = Timestamp::now().duration_since(at).as_secs_f64().max(0.0);
        ctx.metrics.observe_gate(profile, source, seconds);
    }
}

/// The API server refused part of the write: the book notes it for the
/// profile's status, the node gets a Warning Event, the reconcile fails.
async fn refused(
    ctx: &Context,
    node: &Node,
    d: &Decision,
    why: String,
    what: RefusedWrite,
    whole: Option<&NodeChanges>,
) -> Error {
    let profile = d.assessment.profile.clone().unwrap_or_default();
    let note = RefusalNote {
        profile: &profile,
        why: &why,
        what,
        changes: whole,
    };
    ctx.ledger.refused(&d.facts.name, note, Timestamp::now());
    if !profile.is_empty() {
        ctx.tell(StatusInput::Profile(profile));
    }
    publish_refusal(
        ctx,
        node,
        d.assessment.profile.as_deref(),
        what.sentence(),
        &why,
    )
    .await;
    Error::Refused {
        node: d.facts.name.clone(),
        why,
        what,
    }
}

/// When to look at the node again without any change to it: before the GFD
/// timestamp goes stale, and (only if a condition heartbeat is configured) in
/// time to refresh it. Otherwise node and profile changes wake it.
fn next_check(ctx: &Context, a: &NodeAssessment) -> Action {
    // Just past the heartbeat, so the condition written now counts as due then.
    let heartbeat = (!ctx.args.heartbeat.is_zero() && a.governance != GovernanceKind::Ungoverned)
        .then(|| ctx.args.heartbeat + Duration::from_secs(1));
    match (a.recheck_after_seconds, heartbeat) {
        (Some(s), Some(h)) => Action::requeue(Duration::from_secs(s).min(h)),
        (Some(s), None) => Action::requeue(Duration::from_secs(s)),
        (None, Some(h)) => Action::requeue(h),
        (None, None) => Action::await_change(),
    }
}

/// The one merge patch on the node: `spec.taints` (the whole list, when it
/// changes), gpuready's label and annotation changes, and the resourceVersion
/// the plan was made from — a merge patch replaces lists, so the precondition is
/// what keeps a concurrent writer's taint from being lost (409 → re-read,
/// re-plan). A label or annotation `null` deletes that key only.
pub(crate) fn node_patch(node: &Node, changes: &NodeChanges) -> Result<serde_json::Value, Error> {
    let mut meta = serde_json::Map::new();
    meta.insert("resourceVersion".into(), json!(node.resource_version()));
    if let Some(labels) = &changes.labels {
        meta.insert("labels".into(), serde_json::to_value(labels)?);
    }
    if let Some(annotations) = &changes.annotations {
        meta.insert("annotations".into(), serde_json::to_value(annotations)?);
    }
    let mut patch = json!({ "metadata": meta });
    if let Some(t) = &changes.taint {
        patch["spec"] = json!({
            "taints": if t.taints.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::to_value(&t.taints)?
            }
        });
    }
    Ok(patch)
}

/// The status patch: a strategic merge patch keyed by condition type (the
/// list's merge key), so it adds or replaces exactly gpuready's entries and
/// deletes exactly the types it no longer wants (`$patch: delete`); every other
/// condition — kubelet's, NPD's — is not part of the request. (A server-side
/// apply of `status.conditions` removed the kubelet's conditions on nodes
/// created with their status, whose items no manager owned.) Carries the
/// resourceVersion of the node as just written, so a verdict planned from an
/// older node is refused (409) and planned again.
pub(crate) fn condition_patch(
    resource_version: Option<String>,
    c: &ConditionChange,
) -> Result<serde_json::Value, Error> {
    let mut items = Vec::with_capacity(c.set.len() + c.remove.len());
    for cond in &c.set {
        items.push(serde_json::to_value(cond)?);
    }
    for t in &c.remove {
        items.push(json!({ "type": t, "$patch": "delete" }));
    }
    Ok(json!({
        "metadata": { "resourceVersion": resource_version },
        "status": { "conditions": items },
    }))
}

/// Sends the planned writes. Returns the node's resourceVersion after the last
/// one (`None` when nothing needed writing) and the DeviceTaintRule changes
/// that took effect.
async fn write_changes(
    ctx: &Context,
    node: &Node,
    changes: &NodeChanges,
    held_refusal: Option<(RefusedWrite, String)>,
) -> Result<(Option<String>, Vec<DeviceRuleChange>), Error> {
    if changes.is_empty() {
        return Ok((None, vec![]));
    }
    // Device rules first: they gate single devices, and the node patch that
    // may follow (its taint released while the minimum of ready GPUs holds)
    // must not open the node before its bad device is closed.
    let rules_done = if changes.device_taint_rules.is_empty() {
        vec![]
    } else {
        device_rules::write(ctx, &changes.device_taint_rules).await?
    };
    let name = node.name_any();
    // Answers read for their resourceVersion alone (written.rs).
    let api: Api<WrittenNode> = Api::all(ctx.client.clone());
    let params = PatchParams {
        field_manager: Some(keys::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let mut version = node.resource_version();
    let mut refused = None;
    if changes.patches_node() {
        // The gating write (taint) goes first: a workload scheduled between the
        // two writes is kept off a broken node by the taint already.
        let (after, refusal) = send_node_patch(&api, &params, node, changes).await?;
        if let Some((what, why)) = refusal {
            let why = match (what, &changes.taint) {
                (RefusedWrite::Taint, Some(t)) => format!("({}) {why}", taint_text(t)),
                _ => why,
            };
            warn!(reason = %why, refused = what.as_str(), "the API server refused gpuready's node write");
            refused = Some((what, why));
        }
        if let Some(after) = after {
            version = after.resource_version();
            ctx.metrics.count_write("node");
        }
        if let Some(t) = &changes.taint {
            info!(change = %t.kind, "taint updated");
        }
        if !changes.foreign_labels_left.is_empty() {
            warn!(labels = ?changes.foreign_labels_left, "labels set by another writer left alone");
        }
    }
    if let Some(c) = &changes.conditions {
        // A refused node write is said on the node's own condition too, when
        // that write passes (it is a separate request on nodes/status).
        let c = match refused.as_ref().or(held_refusal.as_ref()) {
            Some((what, why)) => with_refusal(c, what.sentence(), why),
            None => c.clone(),
        };
        let written = api
            .patch_status(
                &name,
                &params,
                &Patch::Strategic(condition_patch(version.clone(), &c)?),
            )
            .await;
        match written {
            Ok(after) => {
                version = after.resource_version();
                ctx.metrics.count_write("conditions");
            }
            Err(e) if refused.is_some() => {
                warn!(error = %e, "the condition write failed too");
            }
            Err(e) => return Err(e.into()),
        }
    }
    if let Some((what, why)) = refused {
        return Err(Error::Refused {
            node: name,
            why,
            what,
        });
    }
    // gpuready's condition in its rules' status last: it reports, it gates
    // nothing, so nothing above waits for it.
    device_rules::write_status(ctx, &changes.device_taint_rules).await?;
    Ok((Some(version.unwrap_or_default()), rules_done))
}

/// What passed of the node patch, and what the server refused of it. The
/// taint must never wait for anything else: a refused patch is sent again as
/// the taint alone, which passes whatever the server refused in the rest;
/// when the taint itself is refused, the rest still goes (the verdict
/// labels), without the annotations that would record the taint.
async fn send_node_patch(
    api: &Api<WrittenNode>,
    params: &PatchParams,
    node: &Node,
    changes: &NodeChanges,
) -> Result<(Option<WrittenNode>, Option<(RefusedWrite, String)>), Error> {
    let why = match merge_patch(api, params, node, changes).await? {
        Ok(after) => return Ok((Some(after), None)),
        Err(why) => why,
    };
    Ok(match taint_part(changes) {
        Some(taint) if taint != *changes => match merge_patch(api, params, node, &taint).await? {
            Ok(after) => (Some(after), Some((RefusedWrite::Other, why))),
            Err(why) => {
                let rest = match rest_part(changes) {
                    Some(rest) => merge_patch(api, params, node, &rest).await?.ok(),
                    None => None,
                };
                (rest, Some((RefusedWrite::Taint, why)))
            }
        },
        Some(_) => (None, Some((RefusedWrite::Taint, why))),
        None => (None, Some((RefusedWrite::Other, why))),
    })
}

/// One merge patch of the node: the node as written, or the server's reason
/// when it refused the write for what it is (any other failure is an error).
async fn merge_patch(
    api: &Api<WrittenNode>,
    params: &PatchParams,
    node: &Node,
    changes: &NodeChanges,
) -> Result<Result<WrittenNode, String>, Error> {
    let patch = node_patch(node, changes)?;
    match api
        .patch(&node.name_any(), params, &Patch::Merge(&patch))
        .await
    {
        Ok(after) => Ok(Ok(after)),
        Err(e) => refusal(&e).map(Err).ok_or_else(|| e.into()),
    }
}

/// The server's reason when it refused a write for what it is (admission, RBAC:
/// 403, 422), as opposed to a conflict or an outage. `None` otherwise.
fn refusal(e: &kube::Error) -> Option<String> {
    match e {
        kube::Error::Api(s) if matches!(s.code, 403 | 422) => {
            Some(format!("{} ({}): {}", s.reason, s.code, s.message))
        }
        _ => None,
    }
}

/// The taint change with the annotations that record it and gpuready's own
/// `gpuready.io/` labels, nothing else: what must pass even when the server
/// refuses a `readyLabels` label. `None` without a taint change.
fn taint_part(changes: &NodeChanges) -> Option<NodeChanges> {
    let taint = changes.taint.clone()?;
    let own = |k: &String| k.starts_with(keys::KEY_PREFIX) && k != keys::ANNOTATION_LABELS;
    let keep = |m: &Option<std::collections::BTreeMap<String, Option<String>>>| {
        m.as_ref()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| own(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<std::collections::BTreeMap<_, _>>()
            })
            .filter(|m| !m.is_empty())
    };
    Some(NodeChanges {
        taint: Some(taint),
        labels: keep(&changes.labels),
        annotations: keep(&changes.annotations),
        ..NodeChanges::default()
    })
}

/// The taint change a refusal names: `add readiness.k8s.io/…:NoSchedule`.
fn taint_text(t: &gpuready_core::plan::TaintChange) -> String {
    match &t.ours {
        Some(ours) => format!("{} {}:{}", t.kind, ours.key, ours.effect),
        None => t.kind.to_string(),
    }
}

/// The changes without the taint and the annotations that record it: what
/// still goes when the server refuses the taint itself. `None` when nothing
/// is left.
fn rest_part(changes: &NodeChanges) -> Option<NodeChanges> {
    let annotations = changes
        .annotations
        .as_ref()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !records_taint(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<std::collections::BTreeMap<_, _>>()
        })
        .filter(|m| !m.is_empty());
    let rest = NodeChanges {
        labels: changes.labels.clone(),
        annotations,
        ..NodeChanges::default()
    };
    rest.patches_node().then_some(rest)
}

/// The planned conditions, with the refusal (`sentence: why`) appended to
/// `GpuReady`'s message.
fn with_refusal(c: &ConditionChange, sentence: &str, why: &str) -> ConditionChange {
    let mut c = c.clone();
    for cond in c
        .set
        .iter_mut()
        .filter(|x| x.type_ == keys::CONDITION_GPU_READY)
    {
        let msg = cond.message.take().unwrap_or_default();
        cond.message = Some(
            format!("{msg}; {sentence}: {why}")
                .chars()
                .take(1024)
                .collect(),
        );
    }
    c
}

#[cfg(test)]
mod tests;
