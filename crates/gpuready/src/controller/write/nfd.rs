//! The NFD CRD reconciler: keeps NodeFeature, NodeFeatureGroup and
//! NodeFeatureRule at least as new as the set gpuready carries, because Helm
//! installs a chart's `crds/` once and never upgrades them.
//!
//! At start and on every watch event of the three CRDs it reads them, classifies
//! them with [`gpuready_core::nfd_crds::plan`], and, per `--nfd-crds`:
//!
//! * **apply** (default): Missing or Older → server-side apply of gpuready's CRD
//!   under `keys::FIELD_MANAGER` **with force**, so that fields a previous Helm
//!   install or `kubectl apply` owned are taken over instead of conflicting; then
//!   wait until Established and read back (all of it in [`crate::nfd_io`], which
//!   `gpuready nfd-crds apply` runs too). Current → no write at all. Newer → left alone and
//!   reported. gpuready never deletes a CRD and never downgrades one.
//! * **check**: the same reading, no writes; the condition says what apply would do.
//! * **off**: not started; profiles carry no `NfdCrds` condition.
//!
//! # Reporting
//!
//! * The `NfdCrds` condition on every GpuNodeProfile (handed to the status task
//!   through a `watch` channel; the status task writes it; its words come from
//!   `gpuready_core::nfd_crds::words`). **True** means the CRDs are fine as they
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
//! `create` too, by name (tests/api/nfd_reconciler.rs checks this role). Check mode
//! needs only `get`, `list` and `watch`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, stream};
use gpuready_api::keys::nfd_crd_event_reasons as event_reasons;
use gpuready_api::keys::nfd_crd_reasons as reasons;
use gpuready_core::nfd_crds::words::{self, state_label};
use gpuready_core::nfd_crds::{CrdVerdict, NfdCrdCondition, NfdCrdPlan};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::ExponentialBackoff;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::controller::config::NfdCrdMode;
use crate::controller::context::Context;
use crate::controller::event::event;
use crate::controller::metrics::CrdState;
use crate::controller::write::events::publish_profile_event;
use crate::nfd_io::{
    self, ESTABLISH_TIMEOUT, NFD_CRD_NAMES, NfdCrdError, ReadBack, apply_and_read_back,
};

/// Watch events often come in bursts (the apply, then the status update that
/// sets Established); one pass after the burst is enough.
const DEBOUNCE: Duration = Duration::from_millis(500);
/// First retry after a failed pass; doubles up to [`MAX_RETRY`] (kube's
/// watcher backoff, reset by a pass that succeeds). No jitter: one leader runs
/// this loop.
const FIRST_RETRY: Duration = Duration::from_secs(10);
const MAX_RETRY: Duration = Duration::from_secs(300);

fn retry_backoff() -> ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(FIRST_RETRY)
        .with_max_delay(MAX_RETRY)
        .with_factor(2.0)
        .without_max_times()
        .into()
}
/// How long Events wait for the profile cache at start.
const PROFILE_CACHE_WAIT: Duration = Duration::from_secs(30);

/// The condition's sending side: the latest value is the one profiles carry.
pub type ConditionSender = watch::Sender<Option<NfdCrdCondition>>;

/// The reconciler loop; returns as soon as `stop` is cancelled, in the middle
/// of a pass too. Does nothing in Off mode (the caller does not spawn it then
/// either).
pub async fn run(ctx: Arc<Context>, condition: ConditionSender, stop: CancellationToken) {
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
    let mut backoff = retry_backoff();
    info!(mode = ?mode, carried = %words::carried(), "NFD CRD reconciler starting");
    loop {
        // Stopped (the lease lost, or a shutdown) in the middle of a pass: the
        // pass is dropped there, so it plans and sends nothing more.
        let passed = tokio::select! {
            _ = stop.cancelled() => return,
            passed = pass(&ctx, &condition, mode, &api, &mut memo) => passed,
        };
        let retry = if passed {
            backoff.reset();
            None
        } else {
            Some(backoff.next().unwrap_or(MAX_RETRY))
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
    condition: &ConditionSender,
    mode: NfdCrdMode,
    api: &Api<CustomResourceDefinition>,
    memo: &mut Memo,
) -> bool {
    let ReadBack {
        installed,
        plan: before,
    } = match nfd_io::read_back(api).await {
        Ok(r) => r,
        Err(e) => {
            warn!(error = %e, "reading the NFD CRDs failed");
            set_condition(
                condition,
                words::read_failed_condition(&e.to_string(), e.hint()),
            );
            return false;
        }
    };
    debug!(plan = %before, "NFD CRD pass");
    record_metrics(ctx, &before);

    if mode == NfdCrdMode::Check {
        let cond = words::check_condition(&before);
        if cond.ready {
            set_condition(condition, cond);
        } else {
            set_and_warn(ctx, condition, cond, event_reasons::WOULD_CHANGE).await;
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
        let rest = words::resting_condition(&before);
        // After an install or upgrade the condition keeps saying what gpuready
        // did, rather than turning to Current on the next pass.
        let keep_action = rest.reason == reasons::CURRENT
            && condition.borrow().as_ref().is_some_and(|c| {
                c.ready && (c.reason == reasons::INSTALLED || c.reason == reasons::UPGRADED)
            });
        if !keep_action {
            set_condition(condition, rest);
        }
        return true;
    }

    let applied = apply_and_read_back(api, &to_apply, ESTABLISH_TIMEOUT, |step| match step {
        words::ApplyStep::Applying(v) => {
            info!(crd = %v.name, state = state_label(&v.class), "applying gpuready's NFD CRD");
        }
        words::ApplyStep::Applied(_) => ctx.metrics.count_write("crd"),
        _ => {}
    })
    .await;
    let after = match applied {
        Ok(read) => read,
        Err(e @ NfdCrdError::Read { .. }) => {
            warn!(error = %e, "reading the NFD CRDs after applying failed");
            return false;
        }
        Err(e) => {
            failed(ctx, condition, &to_apply, &e).await;
            return false;
        }
    };

    // Read back: the applied CRDs must now be Current (or something we do not
    // understand is going on, and re-applying would only loop).
    record_metrics(ctx, &after.plan);
    let stuck: Vec<&CrdVerdict> = after
        .plan
        .verdicts
        .iter()
        .filter(|v| v.class.needs_apply() && to_apply.iter().any(|a| a.name == v.name))
        .collect();
    if !stuck.is_empty() {
        for v in &stuck {
            if let Some(c) = after
                .installed
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(v.name.as_str()))
            {
                memo.not_converged.insert(v.name.clone(), identity(c));
            }
        }
        let cond = words::not_converged_condition(&stuck);
        warn!(message = %cond.message, "NFD CRDs did not converge");
        set_and_warn(ctx, condition, cond, event_reasons::APPLY_FAILED).await;
        return true;
    }

    let cond = words::applied_condition(&before, &to_apply);
    let message = cond.message.clone();
    info!(%message, "NFD CRDs applied");
    let event_reason = if cond.reason == reasons::UPGRADED {
        event_reasons::UPGRADED
    } else {
        event_reasons::INSTALLED
    };
    set_condition(condition, cond);
    publish(ctx, EventType::Normal, event_reason, &message).await;
    true
}

/// Reports a failed apply or wait; the Event only when the condition changes,
/// so retries do not repeat it.
async fn failed(
    ctx: &Context,
    condition: &ConditionSender,
    to_apply: &[&CrdVerdict],
    e: &NfdCrdError,
) {
    warn!(error = %e, "applying the NFD CRDs failed");
    let not_established = matches!(e, NfdCrdError::NotEstablished { .. });
    let cond = words::apply_failed_condition(to_apply, not_established, &e.to_string(), e.hint());
    set_and_warn(ctx, condition, cond, event_reasons::APPLY_FAILED).await;
}

/// Sets the condition and, only when that changed it, posts its message as
/// a Warning Event: a retry that finds the same trouble repeats nothing.
async fn set_and_warn(
    ctx: &Context,
    condition: &ConditionSender,
    cond: NfdCrdCondition,
    reason: &str,
) {
    let message = cond.message.clone();
    if set_condition(condition, cond) {
        publish(ctx, EventType::Warning, reason, &message).await;
    }
}

/// Hands the condition to the status task; true when it changed (receivers
/// are woken only then).
fn set_condition(condition: &ConditionSender, cond: NfdCrdCondition) -> bool {
    condition.send_if_modified(|current| {
        if current.as_ref() == Some(&cond) {
            return false;
        }
        info!(status = cond.ready, reason = %cond.reason, message = %cond.message, "NfdCrds condition");
        *current = Some(cond);
        true
    })
}

fn record_metrics(ctx: &Context, plan: &NfdCrdPlan) {
    for v in &plan.verdicts {
        let now = state_label(&v.class);
        for state in words::STATES {
            ctx.metrics
                .nfd_crds
                .get_or_create(&CrdState {
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
    let _ = tokio::time::timeout(PROFILE_CACHE_WAIT, ctx.caches.wait_listed()).await;
    let profiles = ctx.caches.profiles.state();
    if profiles.is_empty() {
        info!(
            reason,
            message, "no GpuNodeProfile to attach the NFD CRD Event to; logged only"
        );
        return;
    }
    let ev = event(type_, reason, "ReconcileNfdCrds", message);
    for p in profiles {
        publish_profile_event(ctx, &ev, &p, "NFD CRD event").await;
    }
}
