//! Guards against a mass release when the GpuNodeProfile CRD goes away.
//!
//! Deleting the CRD deletes every profile, so the profile watch reports each one
//! deleted and every governed node would lose its taint within seconds. A taint
//! is released only after this guard has confirmed, by reading the CRD, that it
//! exists and is not being deleted — and a confirmation counts only when it is
//! newer than the last profile deletion seen (the API server marks the CRD
//! deleted before it deletes the profiles, so a read made after a profile's
//! deletion was observed sees the mark). While the CRD is missing, gpuready
//! holds: it writes nothing to any node, reports not ready on /readyz, sets
//! `gpuready_profile_crd_present` to 0 and logs; it recovers when the CRD returns.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpuready_core::write_step::CrdView;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::wait::{Condition, conditions};
use kube::runtime::watcher;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::controller::backoff::WatchBackoff;
use crate::controller::health::Health;
use crate::controller::metrics::Metrics;
use crate::controller::watch::next_or_stop;

pub const PROFILE_CRD: &str = "gpunodeprofiles.gpuready.io";

/// A "missing" answer is trusted this long before the CRD is read again, so a
/// fleet of held nodes costs one read per interval, not one per node.
const RECHECK_MISSING: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
struct State {
    /// When the CRD was last read and found healthy.
    confirmed: Option<Instant>,
    /// When a profile deletion was last observed.
    deletion_seen: Option<Instant>,
    /// When the CRD was last found missing or being deleted.
    missing_since_check: Option<Instant>,
}

pub struct CrdGuard {
    client: Client,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    state: Mutex<State>,
    /// One read at a time: concurrent reconciles wait for its answer.
    check: tokio::sync::Mutex<()>,
}

/// The CRD's state from one object: present, Established (kube's own
/// condition), not being deleted.
fn healthy(crd: &CustomResourceDefinition) -> bool {
    crd.metadata.deletion_timestamp.is_none()
        && conditions::is_crd_established().matches_object(Some(crd))
}

impl CrdGuard {
    pub fn new(client: Client, metrics: Arc<Metrics>, health: Arc<Health>) -> CrdGuard {
        metrics.profile_crd_present.set(1);
        CrdGuard {
            client,
            metrics,
            health,
            state: Mutex::default(),
            check: tokio::sync::Mutex::new(()),
        }
    }

    /// A profile was deleted (or vanished in a re-list): confirmations read
    /// before now no longer vouch for the CRD.
    pub fn note_profile_deletion(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.deletion_seen = Some(Instant::now());
        }
    }

    fn set_present(&self, present: bool) {
        let was = self
            .health
            .crd_established
            .swap(present, std::sync::atomic::Ordering::Relaxed);
        self.metrics.profile_crd_present.set(i64::from(present));
        if was && !present {
            warn!(
                crd = PROFILE_CRD,
                "the GpuNodeProfile CRD is missing or being deleted: holding every node as it is \
                 (no taint is released) until it returns; to uninstall gpuready, delete its \
                 Deployment before the CRD"
            );
        } else if !was && present {
            info!(crd = PROFILE_CRD, "the GpuNodeProfile CRD is back");
        }
    }

    /// What the guard knows without reading the CRD: confirmed after the last
    /// profile deletion seen, missing (recently enough to trust), or neither
    /// (`release_allowed` then reads it).
    pub fn view(&self) -> CrdView {
        let Ok(s) = self.state.lock() else {
            return CrdView::Unconfirmed;
        };
        let confirmed_fresh = match (s.confirmed, s.deletion_seen) {
            (Some(c), Some(d)) => c > d,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if confirmed_fresh {
            CrdView::Confirmed
        } else if s
            .missing_since_check
            .is_some_and(|m| m.elapsed() < RECHECK_MISSING)
        {
            CrdView::Missing
        } else {
            CrdView::Unconfirmed
        }
    }

    /// The view a write step decides with: for a plan that releases a node
    /// because no profile governs it (`needed`) an unknown CRD is read first;
    /// any other plan needs no read.
    pub async fn view_for(&self, needed: bool) -> CrdView {
        match self.view() {
            CrdView::Unconfirmed if needed => {
                if self.release_allowed().await {
                    CrdView::Confirmed
                } else {
                    CrdView::Missing
                }
            }
            view => view,
        }
    }

    /// Whether gpuready may release nodes because their profile is gone: only
    /// when the CRD is confirmed healthy after the last profile deletion seen.
    pub async fn release_allowed(&self) -> bool {
        let _one = self.check.lock().await;
        match self.view() {
            CrdView::Confirmed => return true,
            CrdView::Missing => return false,
            CrdView::Unconfirmed => {}
        }
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let read_at = Instant::now();
        let ok = match api.get_opt(PROFILE_CRD).await {
            Ok(Some(crd)) => healthy(&crd),
            Ok(None) => false,
            Err(e) => {
                // Unknown is treated as missing: holding is the safe side.
                warn!(error = %e, "reading the GpuNodeProfile CRD failed; holding releases");
                return false;
            }
        };
        if let Ok(mut s) = self.state.lock() {
            if ok {
                s.confirmed = Some(read_at);
                s.missing_since_check = None;
            } else {
                s.missing_since_check = Some(read_at);
            }
        }
        self.set_present(ok);
        ok
    }

    /// Watches the CRD so /readyz and the metric follow it even when no node
    /// needs releasing, and a returning CRD is noticed at once.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let mut stream = std::pin::pin!(
            watcher::watch_object(api, PROFILE_CRD).backoff(WatchBackoff::default())
        );
        while let Some(item) = next_or_stop(&mut stream, &stop).await {
            match item {
                Ok(crd) => {
                    let ok = crd.as_ref().is_some_and(healthy);
                    if let Ok(mut s) = self.state.lock() {
                        if ok {
                            s.missing_since_check = None;
                        } else {
                            s.confirmed = None;
                            s.missing_since_check = Some(Instant::now());
                        }
                    }
                    self.set_present(ok);
                }
                Err(e) => {
                    warn!(error = %e, "watching the GpuNodeProfile CRD failed; retrying")
                }
            }
        }
    }
}
