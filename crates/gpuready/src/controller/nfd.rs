//! The NFD CRD reconciler: keeps NodeFeature, NodeFeatureGroup and
//! NodeFeatureRule at least as new as the set gpuready carries, because Helm
//! installs a chart's `crds/` once and never upgrades them.
//!
//! At start and on every watch event of the three CRDs it reads them, classifies
//! them with [`gpuready_core::nfd_crds::plan`], and, per `--nfd-crds`:
//!
//! * **apply** (default): Missing or Older → server-side apply of gpuready's CRD
//!   under [`keys::FIELD_MANAGER`] **with force**, so that fields a previous Helm
//!   install or `kubectl apply` owned are taken over instead of conflicting; then
//!   wait until Established. Current → no write at all. Newer → left alone and
//!   reported. gpuready never deletes a CRD and never downgrades one.
//! * **check**: the same reading, no writes; the condition says what apply would do.
//! * **off**: not started; profiles carry no `NfdCrds` condition.
//!
//! # Reporting
//!
//! * The `NfdCrds` condition on every GpuNodeProfile (through [`Context::nfd`],
//!   written by the status aggregator). **True** means the CRDs are fine as they
//!   are for NFD and for gpuready: `Current`, `Installed`, `Upgraded`, or
//!   `NewerLeftAlone` (a newer NFD installed them; nothing to do). **False** means
//!   a person should look: `CheckOnlyWouldChange`, `Missing` / `Outdated` (the
//!   apply failed), `NotEstablished`, `ApplyDidNotConverge`, `ReadFailed`. After
//!   gpuready installs or upgrades, `Installed` / `Upgraded` stays until something
//!   else changes, so the profile tells what gpuready did, not only that all is
//!   well now.
//! * An **Event on each GpuNodeProfile** when gpuready changes the CRDs, fails
//!   to, or (check mode) finds that it would. Profiles are where the condition
//!   is and where `kubectl describe` looks; a CRD is not namespaced and its
//!   Events would land in `default`, where nobody looks for them. Without any
//!   profile there is nothing to describe, so the change is only logged.
//! * The `gpuready_nfd_crd_state{crd,state}` gauge (1 for the CRD's current
//!   state, 0 for the other three) and `gpuready_writes_total{kind="crd"}`.
//!
//! # Access
//!
//! Watches use a `metadata.name` field selector per CRD, so the cache holds
//! nothing and RBAC can name the three CRDs in `resourceNames`: `get`, `list`,
//! `watch`, `patch` and `create` on `customresourcedefinitions`
//! (apiextensions.k8s.io). An apply that creates a missing CRD is authorised as
//! `create` too, by name (tests/nfd_reconciler.rs checks this role). Check mode
//! needs only `get`, `list` and `watch`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, stream};
use gpuready_api::crd::nfd_crds;
use gpuready_api::keys::{self, nfd_crd_reasons as reasons};
use gpuready_api::nfd::{
    NODE_FEATURE_CRD, NODE_FEATURE_GROUP_CRD, NODE_FEATURE_RULE_CRD, NfdCrdRelease,
};
use gpuready_core::nfd_crds::{CrdClass, CrdVerdict, NfdCrdPlan, plan};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::Context;
use super::config::NfdCrdMode;

/// The NFD CRDs gpuready manages, in the order it applies them.
pub const NFD_CRD_NAMES: [&str; 3] = [
    NODE_FEATURE_CRD,
    NODE_FEATURE_GROUP_CRD,
    NODE_FEATURE_RULE_CRD,
];

/// How long an applied CRD may take to become Established. The API server
/// usually needs well under a second; a minute covers a loaded control plane.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// Watch events often come in bursts (the apply, then the status update that
/// sets Established); one pass after the burst is enough.
const DEBOUNCE: Duration = Duration::from_millis(500);
/// First retry after a failed pass; doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(10);
const MAX_RETRY: Duration = Duration::from_secs(300);
/// How long Events wait for the profile cache at start.
const PROFILE_CACHE_WAIT: Duration = Duration::from_secs(30);

/// Event reasons (the condition reasons are in [`keys::nfd_crd_reasons`]).
pub mod event_reasons {
    pub const INSTALLED: &str = "NfdCrdsInstalled";
    pub const UPGRADED: &str = "NfdCrdsUpgraded";
    pub const WOULD_CHANGE: &str = "NfdCrdsWouldChange";
    pub const APPLY_FAILED: &str = "NfdCrdsApplyFailed";
}

/// A failed read, apply or wait, naming the CRD.
#[derive(Debug, thiserror::Error)]
pub enum NfdCrdError {
    #[error("reading CRD {name}: {source}")]
    Read { name: String, source: kube::Error },
    #[error("applying CRD {name}: {source}")]
    Apply { name: String, source: kube::Error },
    #[error(
        "CRD {name} was applied but is not Established after {}s ({conditions})",
        waited.as_secs()
    )]
    NotEstablished {
        name: String,
        waited: Duration,
        conditions: String,
    },
}

impl NfdCrdError {
    /// What a person can do about it.
    pub fn hint(&self) -> &'static str {
        let code = match self {
            NfdCrdError::Read { source, .. } | NfdCrdError::Apply { source, .. } => match source {
                kube::Error::Api(s) => Some(s.code),
                _ => None,
            },
            NfdCrdError::NotEstablished { .. } => {
                return "see the CRD's status conditions (`kubectl get crd <name> -o yaml`); \
                        NamesAccepted=False means another CRD claims the same names";
            }
        };
        match code {
            Some(401 | 403) => {
                "the identity in use needs get, list, watch, patch and create on \
                 customresourcedefinitions (apiextensions.k8s.io), at least for the three \
                 *.nfd.k8s-sigs.io names; or set --nfd-crds=check (read only) or off"
            }
            Some(409 | 422) => {
                "the API server refused gpuready's CRD; `gpuready nfd-crds diff` shows how the \
                 installed one differs (please report this as a gpuready bug)"
            }
            _ => "check that the API server is reachable; the controller retries with backoff",
        }
    }
}

/// Reads the installed NFD CRDs: one GET each, absent ones left out.
pub async fn read_installed(
    api: &Api<CustomResourceDefinition>,
) -> Result<Vec<CustomResourceDefinition>, NfdCrdError> {
    let mut found = Vec::with_capacity(NFD_CRD_NAMES.len());
    for name in NFD_CRD_NAMES {
        let crd = api
            .get_opt(name)
            .await
            .map_err(|source| NfdCrdError::Read {
                name: name.to_owned(),
                source,
            })?;
        found.extend(crd);
    }
    Ok(found)
}

/// Reads the installed NFD CRDs and classifies them against gpuready's.
pub async fn read_plan(api: &Api<CustomResourceDefinition>) -> Result<NfdCrdPlan, NfdCrdError> {
    let installed = read_installed(api).await?;
    Ok(plan(&nfd_crds(), &installed))
}

/// gpuready's CRD named `name`.
pub fn desired(name: &str) -> Option<CustomResourceDefinition> {
    nfd_crds()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
}

/// Server-side applies gpuready's CRD with force: conflicts with the managers
/// of an earlier Helm or kubectl install are resolved in gpuready's favour,
/// which is the point (the plan has already ruled out downgrades).
pub async fn apply_crd(
    api: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
) -> Result<CustomResourceDefinition, NfdCrdError> {
    let name = crd.name_any();
    api.patch(
        &name,
        &PatchParams::apply(keys::FIELD_MANAGER).force(),
        &Patch::Apply(crd),
    )
    .await
    .map_err(|source| NfdCrdError::Apply { name, source })
}

/// Waits until the CRD is Established (its resources are served).
pub async fn wait_established(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    timeout: Duration,
) -> Result<(), NfdCrdError> {
    let cond = await_condition(api.clone(), name, conditions::is_crd_established());
    match tokio::time::timeout(timeout, cond).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(NfdCrdError::NotEstablished {
            name: name.to_owned(),
            waited: timeout,
            conditions: format!("watching it failed: {e}"),
        }),
        Err(_) => {
            let conditions = match api.get_opt(name).await {
                Ok(Some(crd)) => crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .map(|c| {
                        format!(
                            "{}={} {}",
                            c.type_,
                            c.status,
                            c.message.as_deref().unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                Ok(None) => "it no longer exists".to_owned(),
                Err(e) => format!("reading its status failed: {e}"),
            };
            Err(NfdCrdError::NotEstablished {
                name: name.to_owned(),
                waited: timeout,
                conditions,
            })
        }
    }
}

/// `missing`, `older`, `current` or `newer`: the metric's `state` label.
pub fn state_label(class: &CrdClass) -> &'static str {
    match class {
        CrdClass::Missing => "missing",
        CrdClass::Older { .. } => "older",
        CrdClass::Current => "current",
        CrdClass::Newer { .. } => "newer",
    }
}

/// `v0.15`, or a phrase when the installed set matched no known release.
pub fn release_name(r: Option<NfdCrdRelease>) -> String {
    r.map_or_else(|| "an unrecognised release".to_owned(), |r| r.to_string())
}

/// `v0.18 (NFD v0.18.x-v0.19.x)`.
pub fn carried() -> String {
    let r = NfdCrdRelease::CARRIED;
    format!("{r} ({})", r.nfd_releases())
}

/// The reconciler loop; returns when `stop` is cancelled. Does nothing in Off
/// mode (the caller does not spawn it then either).
pub async fn run(ctx: Arc<Context>, stop: CancellationToken) {
    let mode = ctx.args.nfd_crds;
    if mode == NfdCrdMode::Off {
        return;
    }
    let api: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    // One watch per name: the API server sends only these three objects, and
    // events are only triggers (each pass reads the CRDs fresh), so nothing is
    // cached between passes.
    let mut triggers = stream::select_all(NFD_CRD_NAMES.map(|name| {
        watcher(
            api.clone(),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        )
        .default_backoff()
        .filter_map(move |event| async move {
            match event {
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
                Ok(_) => Some(()),
                Err(e) => {
                    warn!(crd = name, error = %e, "watching the NFD CRD failed; retrying");
                    None
                }
            }
        })
        .boxed()
    }));
    let mut memo = Memo::default();
    info!(mode = ?mode, carried = %carried(), "NFD CRD reconciler starting");
    loop {
        let retry = if pass(&ctx, mode, &api, &mut memo).await {
            memo.failures = 0;
            None
        } else {
            let delay = FIRST_RETRY
                .saturating_mul(1 << memo.failures.min(5))
                .min(MAX_RETRY);
            memo.failures = memo.failures.saturating_add(1);
            Some(delay)
        };
        let retry_sleep = tokio::time::sleep(retry.unwrap_or(Duration::MAX / 4));
        tokio::select! {
            _ = stop.cancelled() => return,
            next = triggers.next() => if next.is_none() { return },
            _ = retry_sleep, if retry.is_some() => {},
        }
        let debounce = tokio::time::sleep(DEBOUNCE);
        tokio::pin!(debounce);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = &mut debounce => break,
                _ = triggers.next() => {},
            }
        }
    }
}

/// What the loop remembers between passes.
#[derive(Default)]
struct Memo {
    /// CRDs whose apply did not converge: `(uid, generation)` right after our
    /// apply. Not re-applied while the CRD is unchanged, so a server-side
    /// mutation we cannot match does not become a write loop.
    not_converged: BTreeMap<String, (String, i64)>,
    failures: u32,
}

/// `(uid, generation)` of an installed CRD.
fn identity(crd: &CustomResourceDefinition) -> (String, i64) {
    (
        crd.metadata.uid.clone().unwrap_or_default(),
        crd.metadata.generation.unwrap_or_default(),
    )
}

/// One pass; false when it failed and should be retried.
async fn pass(
    ctx: &Context,
    mode: NfdCrdMode,
    api: &Api<CustomResourceDefinition>,
    memo: &mut Memo,
) -> bool {
    let installed = match read_installed(api).await {
        Ok(i) => i,
        Err(e) => {
            warn!(error = %e, "reading the NFD CRDs failed");
            set_condition(
                ctx,
                (
                    false,
                    reasons::READ_FAILED.into(),
                    format!("{e}; {}", e.hint()),
                ),
            );
            return false;
        }
    };
    let before = plan(&nfd_crds(), &installed);
    debug!(plan = %before, "NFD CRD pass");
    record_metrics(ctx, &before);

    if mode == NfdCrdMode::Check {
        let cond = check_condition(&before);
        if set_condition(ctx, cond.clone()) && !cond.0 {
            publish(
                ctx,
                EventType::Warning,
                event_reasons::WOULD_CHANGE,
                &cond.2,
            )
            .await;
        }
        return true;
    }

    // Forget non-convergence once the CRD has changed (someone edited it, or it
    // was re-created): then gpuready may try again.
    memo.not_converged.retain(|name, id| {
        installed
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .is_some_and(|c| identity(c) == *id)
    });
    let to_apply: Vec<&CrdVerdict> = before
        .verdicts
        .iter()
        .filter(|v| v.class.needs_apply() && !memo.not_converged.contains_key(&v.name))
        .collect();
    if to_apply.is_empty() {
        if !memo.not_converged.is_empty() {
            // Already reported when it happened; keep that condition.
            return true;
        }
        let rest = resting_condition(&before);
        let keep_action = rest.1 == reasons::CURRENT
            && ctx.nfd_condition().is_some_and(|(ok, reason, _)| {
                ok && (reason == reasons::INSTALLED || reason == reasons::UPGRADED)
            });
        if !keep_action {
            set_condition(ctx, rest);
        }
        return true;
    }

    for v in &to_apply {
        let Some(crd) = desired(&v.name) else {
            continue;
        };
        info!(crd = %v.name, state = state_label(&v.class), "applying gpuready's NFD CRD");
        if let Err(e) = apply_crd(api, &crd).await {
            failed(ctx, &to_apply, &e).await;
            return false;
        }
        ctx.metrics.count_write("crd");
    }
    for v in &to_apply {
        if let Err(e) = wait_established(api, &v.name, ESTABLISH_TIMEOUT).await {
            failed(ctx, &to_apply, &e).await;
            return false;
        }
    }

    // Read back: the applied CRDs must now be Current (or something we do not
    // understand is going on, and re-applying would only loop).
    let after_installed = match read_installed(api).await {
        Ok(i) => i,
        Err(e) => {
            warn!(error = %e, "reading the NFD CRDs after applying failed");
            return false;
        }
    };
    let after = plan(&nfd_crds(), &after_installed);
    record_metrics(ctx, &after);
    let stuck: Vec<&CrdVerdict> = after
        .verdicts
        .iter()
        .filter(|v| v.class.needs_apply() && to_apply.iter().any(|a| a.name == v.name))
        .collect();
    if !stuck.is_empty() {
        for v in &stuck {
            if let Some(c) = after_installed
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(v.name.as_str()))
            {
                memo.not_converged.insert(v.name.clone(), identity(c));
            }
        }
        let message = format!(
            "applied gpuready's CRDs, yet the API server's copy still differs: {}; gpuready \
             will not re-apply until the CRD changes (a mutating admission webhook may be \
             rewriting it; please report this as a gpuready bug)",
            stuck
                .iter()
                .map(|v| describe_verdict(v))
                .collect::<Vec<_>>()
                .join("; ")
        );
        warn!(%message, "NFD CRDs did not converge");
        if set_condition(
            ctx,
            (
                false,
                reasons::APPLY_DID_NOT_CONVERGE.into(),
                message.clone(),
            ),
        ) {
            publish(
                ctx,
                EventType::Warning,
                event_reasons::APPLY_FAILED,
                &message,
            )
            .await;
        }
        return true;
    }

    let upgraded = to_apply
        .iter()
        .any(|v| matches!(v.class, CrdClass::Older { .. }));
    let message = applied_message(&before, &to_apply);
    info!(%message, "NFD CRDs applied");
    let (reason, event_reason) = if upgraded {
        (reasons::UPGRADED, event_reasons::UPGRADED)
    } else {
        (reasons::INSTALLED, event_reasons::INSTALLED)
    };
    set_condition(ctx, (true, reason.into(), message.clone()));
    publish(ctx, EventType::Normal, event_reason, &message).await;
    true
}

/// Reports a failed apply or wait; the Event only when the condition changes,
/// so retries do not repeat it.
async fn failed(ctx: &Context, to_apply: &[&CrdVerdict], e: &NfdCrdError) {
    warn!(error = %e, "applying the NFD CRDs failed");
    let reason = if to_apply.iter().any(|v| v.class == CrdClass::Missing) {
        reasons::MISSING
    } else {
        reasons::OUTDATED
    };
    let (reason, what) = match e {
        NfdCrdError::NotEstablished { .. } => (reasons::NOT_ESTABLISHED, "applied, but"),
        _ => (reason, "could not create or upgrade them:"),
    };
    let message = format!(
        "NFD CRDs to create or upgrade: {}; {what} {e}; {}",
        to_apply
            .iter()
            .map(|v| format!("{} ({})", v.name, state_label(&v.class)))
            .collect::<Vec<_>>()
            .join(", "),
        e.hint()
    );
    if set_condition(ctx, (false, reason.into(), message.clone())) {
        publish(
            ctx,
            EventType::Warning,
            event_reasons::APPLY_FAILED,
            &message,
        )
        .await;
    }
}

/// The condition when nothing needs applying: Current, or NewerLeftAlone.
fn resting_condition(plan: &NfdCrdPlan) -> (bool, String, String) {
    let newer: Vec<String> = plan
        .newer()
        .map(|(name, reason)| format!("{name}: {reason}"))
        .collect();
    if newer.is_empty() {
        (
            true,
            reasons::CURRENT.into(),
            format!(
                "the NFD CRDs match release {} that gpuready carries",
                carried()
            ),
        )
    } else {
        (
            true,
            reasons::NEWER_LEFT_ALONE.into(),
            format!(
                "newer than release {} that gpuready carries, left alone: {}",
                carried(),
                newer.join("; ")
            ),
        )
    }
}

/// Check mode: what apply would do, or the resting condition.
pub fn check_condition(plan: &NfdCrdPlan) -> (bool, String, String) {
    let changes: Vec<String> = plan
        .verdicts
        .iter()
        .filter(|v| v.class.needs_apply())
        .map(describe_verdict)
        .collect();
    if changes.is_empty() {
        return resting_condition(plan);
    }
    let newer: Vec<String> = plan
        .newer()
        .map(|(name, reason)| format!("; left alone: {name}: {reason}"))
        .collect();
    (
        false,
        reasons::CHECK_ONLY_WOULD_CHANGE.into(),
        format!(
            "--nfd-crds=check, nothing written; to reach release {} gpuready would {}{}. Run \
             `gpuready nfd-crds apply` or set --nfd-crds=apply",
            carried(),
            changes.join("; "),
            newer.concat()
        ),
    )
}

/// `create X` or `upgrade X from v0.15 (changes: …)`, for messages.
pub fn describe_verdict(v: &CrdVerdict) -> String {
    match &v.class {
        CrdClass::Missing => format!("create {}", v.name),
        CrdClass::Older {
            installed_release,
            changes,
        } => format!(
            "upgrade {} from {} ({})",
            v.name,
            release_name(*installed_release),
            changes.join("; ")
        ),
        CrdClass::Current => format!("{}: current", v.name),
        CrdClass::Newer { reason } => format!("{}: newer, left alone: {reason}", v.name),
    }
}

/// What an apply pass did, for the condition and the Event. Deliberately free of
/// per-field detail and times, so that the same outcome gives the same text.
fn applied_message(before: &NfdCrdPlan, applied: &[&CrdVerdict]) -> String {
    let names = |f: fn(&CrdClass) -> bool| {
        applied
            .iter()
            .filter(|v| f(&v.class))
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>()
    };
    let created = names(|c| *c == CrdClass::Missing);
    let upgraded = names(|c| matches!(c, CrdClass::Older { .. }));
    let mut parts = Vec::new();
    if !upgraded.is_empty() {
        parts.push(format!(
            "upgraded {} from {}",
            upgraded.join(", "),
            release_name(before.installed_release)
        ));
    }
    if !created.is_empty() {
        parts.push(format!("created {}", created.join(", ")));
    }
    let mut message = format!(
        "{} to release {}; Established",
        parts.join(" and "),
        carried()
    );
    for (name, reason) in before.newer() {
        message.push_str(&format!("; left alone: {name}: {reason}"));
    }
    message
}

/// Sets the condition; true (and a status pass is requested) when it changed.
fn set_condition(ctx: &Context, cond: (bool, String, String)) -> bool {
    let Ok(mut current) = ctx.nfd.lock() else {
        return false;
    };
    if current.as_ref() == Some(&cond) {
        return false;
    }
    info!(status = cond.0, reason = %cond.1, message = %cond.2, "NfdCrds condition");
    *current = Some(cond);
    drop(current);
    ctx.refresh_status();
    true
}

fn record_metrics(ctx: &Context, plan: &NfdCrdPlan) {
    for v in &plan.verdicts {
        let now = state_label(&v.class);
        for state in ["missing", "older", "current", "newer"] {
            ctx.metrics
                .nfd_crds
                .get_or_create(&super::metrics::CrdState {
                    crd: v.name.clone(),
                    state: state.to_owned(),
                })
                .set(i64::from(state == now));
        }
    }
}

/// An Event on every GpuNodeProfile, or a log line when there is none.
async fn publish(ctx: &Context, type_: EventType, reason: &str, message: &str) {
    // At start the profile cache may still be filling; Events on a partial list
    // would miss profiles. Wait on the controller's readiness channel, never on
    // Store::wait_until_ready (its single waker would be stolen from others).
    let _ = tokio::time::timeout(PROFILE_CACHE_WAIT, ctx.wait_for_caches()).await;
    let profiles = ctx.profiles.state();
    if profiles.is_empty() {
        info!(
            reason,
            message, "no GpuNodeProfile to attach the NFD CRD Event to; logged only"
        );
        return;
    }
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(message.chars().take(1000).collect()),
        action: "ReconcileNfdCrds".into(),
        secondary: None,
    };
    for p in profiles {
        match ctx.recorder.publish(&ev, &p.object_ref(&())).await {
            Ok(()) => ctx.metrics.count_write("event"),
            Err(e) => warn!(profile = %p.name_any(), error = %e, "publishing NFD CRD event failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(name: &str, class: CrdClass) -> CrdVerdict {
        CrdVerdict {
            name: name.into(),
            class,
        }
    }

    fn plan_of(verdicts: Vec<CrdVerdict>) -> NfdCrdPlan {
        NfdCrdPlan {
            carried: NfdCrdRelease::CARRIED,
            installed_release: Some(NfdCrdRelease::V0_15),
            verdicts,
        }
    }

    #[test]
    fn check_names_each_difference_and_is_false() {
        let p = plan_of(vec![
            verdict(NODE_FEATURE_CRD, CrdClass::Current),
            verdict(NODE_FEATURE_GROUP_CRD, CrdClass::Missing),
            verdict(
                NODE_FEATURE_RULE_CRD,
                CrdClass::Older {
                    installed_release: Some(NfdCrdRelease::V0_15),
                    changes: vec!["op.enum: (only gpuready: [Ge])".into()],
                },
            ),
        ]);
        let (ok, reason, message) = check_condition(&p);
        assert!(!ok);
        assert_eq!(reason, reasons::CHECK_ONLY_WOULD_CHANGE);
        assert!(message.contains("create nodefeaturegroups"), "{message}");
        assert!(
            message.contains("upgrade nodefeaturerules.nfd.k8s-sigs.io from v0.15 (op.enum"),
            "{message}"
        );
    }

    #[test]
    fn newer_is_true_and_says_why() {
        let p = plan_of(vec![
            verdict(NODE_FEATURE_CRD, CrdClass::Current),
            verdict(
                NODE_FEATURE_RULE_CRD,
                CrdClass::Newer {
                    reason: "has v1alpha2".into(),
                },
            ),
        ]);
        for cond in [check_condition(&p), resting_condition(&p)] {
            assert!(cond.0);
            assert_eq!(cond.1, reasons::NEWER_LEFT_ALONE);
            assert!(
                cond.2
                    .contains("nodefeaturerules.nfd.k8s-sigs.io: has v1alpha2")
            );
        }
    }

    #[test]
    fn applied_message_is_stable_and_names_both_kinds() {
        let nfg = verdict(NODE_FEATURE_GROUP_CRD, CrdClass::Missing);
        let nfr = verdict(
            NODE_FEATURE_RULE_CRD,
            CrdClass::Older {
                installed_release: Some(NfdCrdRelease::V0_15),
                changes: vec![],
            },
        );
        let p = plan_of(vec![nfg.clone(), nfr.clone()]);
        let m = applied_message(&p, &[&nfg, &nfr]);
        assert_eq!(
            m,
            "upgraded nodefeaturerules.nfd.k8s-sigs.io from v0.15 and created \
             nodefeaturegroups.nfd.k8s-sigs.io to release v0.18 (NFD v0.18.x-v0.19.x); Established"
        );
    }

    #[test]
    fn hints_tell_what_to_do() {
        let forbidden = NfdCrdError::Apply {
            name: NODE_FEATURE_CRD.into(),
            source: kube::Error::Api(
                kube::core::Status::failure("forbidden", "Forbidden")
                    .with_code(403)
                    .boxed(),
            ),
        };
        assert!(
            forbidden
                .hint()
                .contains("patch and create on customresourcedefinitions")
        );
    }
}
