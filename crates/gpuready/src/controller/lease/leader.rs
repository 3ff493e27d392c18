//! Leader election on a coordination.k8s.io Lease (kube-lease-manager: a
//! maintained crate that acquires and renews the Lease and tolerates clock
//! skew). Only the holder runs the reconcilers, and only while its renewals are
//! fresh: the crate hides renewal errors (it logs and retries, its state stays
//! "leader"), so [`guard`] watches the Lease itself and feeds the write
//! [`Fence`] from the renewals it sees.
//!
//! Each replica claims the Lease under a field manager of its own
//! ([`lease_field_manager`]). The crate claims a free Lease with a server-side
//! apply that is neither forced nor sent with a resourceVersion: what makes the
//! second of two claimants fail (409) is only server-side apply's ownership of
//! `holderIdentity` by *another* manager. Under one shared manager both claims
//! succeeded, the later one silently replacing the first, and two replicas
//! started together both became leader for a moment.
//!
//! Transient API errors must not cost the lease: every Lease request goes
//! through [`persistent_client`], which retries 5xx, 429 and connection errors
//! within a second or two, the renewal is attempted every 2 s (client-go's
//! retry period) against a 10 s renew deadline, and a failure to start the
//! lease manager is retried with backoff instead of ending the process.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease as LeaseObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::fence::Fence;
use crate::controller::config::RunArgs;
use crate::controller::error::Error;
use crate::controller::metrics::Metrics;

/// Lease timing from `--lease-duration`: at the default 15 s, client-go's own
/// defaults (15 s lease, 10 s renew deadline, 2 s retry period). The renewal
/// every 2 s leaves four more attempts before the deadline (each retried
/// within [`persistent_client`] too); renewing every third of the lease, as
/// before, lost it after two failed renewals in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long a holder blocks others after its last renewal.
    pub duration_s: u64,
    /// The holder renews this long before the lease would expire (the crate's
    /// "grace"), i.e. every `duration − grace` seconds.
    pub grace_s: u64,
    /// Writes stop this long after the last renewal seen: a third of the
    /// duration before others may take over, which absorbs clock skew between
    /// replicas and a watch event's delay.
    pub renew_deadline: Duration,
}

impl LeaseTiming {
    pub fn new(lease_duration_seconds: u64) -> LeaseTiming {
        let duration_s = lease_duration_seconds.max(2);
        // Renew every 2 s (client-go's retry period), or every third of a
        // lease shorter than 6 s.
        let interval = (duration_s / 3).clamp(1, RENEW_PERIOD_S);
        LeaseTiming {
            duration_s,
            grace_s: duration_s - interval,
            renew_deadline: Duration::from_millis(duration_s * 2000 / 3),
        }
    }
}

/// client-go's `RetryPeriod`: how often the holder renews.
const RENEW_PERIOD_S: u64 = 2;

/// How often one Lease request is tried before its error reaches the lease
/// manager, and the wait before the first retry (doubling: 0.1 + 0.2 + 0.4 +
/// 0.8 s = 1.5 s in all, well inside one renew period's slack).
const LEASE_ATTEMPTS: u32 = 5;
const LEASE_RETRY_FIRST: Duration = Duration::from_millis(100);

/// A client for the Lease whose requests are retried on what is transient —
/// a 5xx, a 429, a connection error — a few times within 1.5 s. gpuready's
/// general retry covers 429/503/504 only; a 500 from an etcd hiccup went
/// straight to the lease manager, which waits a second or more before trying
/// again. Sending one of the crate's Lease writes twice does what sending it
/// once does: a renewal sets `renewTime` to the same value again, and a claim
/// applied after all is re-applied by the same field manager with the same
/// values, which is no conflict (the crate sends none of them with a
/// resourceVersion).
pub fn persistent_client(client: Client) -> Client {
    let namespace = client.default_namespace().to_owned();
    Client::new(Persistent { inner: client }, namespace)
}

#[derive(Clone)]
struct Persistent {
    inner: Client,
}

fn transient(status: http::StatusCode) -> bool {
    status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS
}

impl tower::Service<http::Request<kube::client::Body>> for Persistent {
    type Response = http::Response<kube::client::Body>;
    type Error = tower::BoxError;
    type Future =
        std::pin::Pin<Box<dyn Future<Output = Result<Self::Response, tower::BoxError>> + Send>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), tower::BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let client = self.inner.clone();
        Box::pin(async move {
            let mut wait = LEASE_RETRY_FIRST;
            let mut req = req;
            for attempt in 1..=LEASE_ATTEMPTS {
                // A body that cannot be replayed (a watch) gets one attempt.
                let again = (attempt < LEASE_ATTEMPTS)
                    .then(|| copy_request(&req))
                    .flatten();
                let result = client.send(req).await;
                let Some(next) = again else {
                    return result.map_err(|e| Box::new(e) as tower::BoxError);
                };
                match &result {
                    Ok(r) if !transient(r.status()) => return result.map_err(Into::into),
                    Ok(r) => {
                        debug!(status = %r.status(), attempt, "Lease request failed; retrying")
                    }
                    Err(e) => debug!(error = %e, attempt, "Lease request failed; retrying"),
                }
                tokio::time::sleep(wait).await;
                wait *= 2;
                req = next;
            }
            Err(Box::new(Error::LostLeadership) as tower::BoxError)
        })
    }
}

fn copy_request(
    req: &http::Request<kube::client::Body>,
) -> Option<http::Request<kube::client::Body>> {
    let body = req.body().try_clone()?;
    let mut copy = http::Request::new(body);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    Some(copy)
}

/// The field manager this replica's Lease writes go under: one per identity
/// (see the module's documentation for why it must differ between replicas).
/// `--identity` is at most [`crate::controller::config::IDENTITY_MAX_LEN`] characters, so
/// this stays within the API server's 128.
pub fn lease_field_manager(identity: &str) -> String {
    format!("{}-lease-{identity}", gpuready_api::keys::FIELD_MANAGER)
}

/// A held lease. Dropping the receiver and awaiting the task releases it.
pub struct Lease {
    pub receiver: watch::Receiver<bool>,
    task: JoinHandle<kube_lease_manager::Result<LeaseManager>>,
}

impl Lease {
    /// Hands the lease back so a successor need not wait for it to expire.
    pub async fn release(self) {
        drop(self.receiver);
        match tokio::time::timeout(Duration::from_secs(10), self.task).await {
            Ok(Ok(Ok(_))) => info!("leader lease released"),
            Ok(Ok(Err(e))) => warn!(error = %e, "releasing the lease failed"),
            Ok(Err(e)) => warn!(error = %e, "lease task failed"),
            Err(_) => warn!("releasing the lease timed out"),
        }
    }
}

/// Waits until this replica holds the lease. `None` when stopped first.
/// Errors of the API server while waiting (a 500 on the first request, the
/// lease manager giving up) are retried with backoff: a candidate that exits
/// on one turns a blip into a CrashLoopBackOff.
pub async fn acquire(
    client: &Client,
    args: &RunArgs,
    stop: &CancellationToken,
) -> Result<Option<Lease>, Error> {
    let timing = LeaseTiming::new(args.lease_duration_seconds);
    let client = persistent_client(client.clone());
    let mut backoff = crate::controller::backoff::WatchBackoff::default();
    info!(lease = %args.lease_name, namespace = %args.lease_namespace, "waiting for the leader lease");
    loop {
        let built = LeaseManagerBuilder::new(client.clone(), &args.lease_name)
            .with_namespace(&args.lease_namespace)
            .with_identity(args.identity())
            .with_duration(timing.duration_s)
            .with_grace(timing.grace_s)
            .with_field_manager(lease_field_manager(&args.identity()))
            .build()
            .await;
        let why = match built {
            Ok(manager) => match wait_for_lock(manager, stop).await {
                Waited::Held(lease) => {
                    info!("acquired the leader lease");
                    return Ok(Some(lease));
                }
                Waited::Stopped => return Ok(None),
                Waited::Ended(why) => why,
            },
            Err(e) => e.to_string(),
        };
        let wait = backoff.next().unwrap_or(Duration::from_secs(2));
        warn!(error = %why, retry_in = ?wait, "leader election: the API server refused the lease request; retrying");
        tokio::select! {
            _ = stop.cancelled() => return Ok(None),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

enum Waited {
    Held(Lease),
    Stopped,
    /// The lease manager's task ended (an error it gave up on).
    Ended(String),
}

async fn wait_for_lock(manager: LeaseManager, stop: &CancellationToken) -> Waited {
    let (mut receiver, task) = manager.watch().await;
    loop {
        if *receiver.borrow_and_update() {
            return Waited::Held(Lease { receiver, task });
        }
        tokio::select! {
            changed = receiver.changed() => {
                if changed.is_err() {
                    return Waited::Ended(match task.await {
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(_)) => "the lease manager stopped".into(),
                        Err(e) => e.to_string(),
                    });
                }
            }
            _ = stop.cancelled() => {
                Lease { receiver, task }.release().await;
                return Waited::Stopped;
            }
        }
    }
}

/// Why the guard closed the fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// No renewal seen within the renew deadline.
    RenewDeadline,
    /// The Lease names another holder (or none).
    HeldByOther,
    /// The lease manager reports the lease lost, or stopped.
    Manager,
}

/// Keeps the write fence in step with the Lease: opens it until
/// `renewTime + renew deadline` each time the Lease shows this replica as holder
/// with a newer renewal, and on the first sign of loss — the deadline passing
/// without a renewal, another holder, or the lease manager giving up — closes it
/// for good, sets `gpuready_leader` to 0 and cancels `work`. Returns why.
///
/// `renewTime` is written by this process's own clock (the lease manager stamps
/// it), so comparing it with this process's clock needs no skew allowance; the
/// allowance is between replicas, in the deadline being shorter than the lease.
pub async fn guard(
    client: Client,
    args: RunArgs,
    mut manager: watch::Receiver<bool>,
    fence: Arc<Fence>,
    work: CancellationToken,
    metrics: Arc<Metrics>,
) -> Loss {
    let timing = LeaseTiming::new(args.lease_duration_seconds);
    let identity = args.identity();
    let api: Api<LeaseObject> = Api::namespaced(client, &args.lease_namespace);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={}", args.lease_name));
    let mut leases = watcher(api, cfg)
        .default_backoff()
        .applied_objects()
        .boxed();
    let loss = loop {
        let expiry = fence
            .valid_until()
            .map_or_else(tokio::time::Instant::now, tokio::time::Instant::from_std);
        let opened = fence.valid_until().is_some();
        tokio::select! {
            event = leases.next() => match event {
                Some(Ok(lease)) => {
                    let spec = lease.spec.unwrap_or_default();
                    if spec.holder_identity.as_deref() != Some(identity.as_str()) {
                        break Loss::HeldByOther;
                    }
                    if let Some(renewed) = spec.renew_time {
                        let renewed: SystemTime = renewed.0.into();
                        let age = SystemTime::now()
                            .duration_since(renewed)
                            .unwrap_or(Duration::ZERO);
                        if let Some(left) = timing.renew_deadline.checked_sub(age) {
                            debug!(valid_for = ?left, "lease renewal seen; writes allowed");
                            fence.extend_to(Instant::now() + left);
                        }
                    }
                }
                // Errors (RBAC removed, API down): the watcher retries; meanwhile
                // no renewal is seen and the deadline does its work.
                Some(Err(e)) => debug!(error = %e, "watching the leader lease"),
                None => break Loss::Manager,
            },
            _ = tokio::time::sleep_until(expiry), if opened => {
                if !fence.is_open() {
                    break Loss::RenewDeadline;
                }
            }
            changed = manager.changed() => {
                if changed.is_err() || !*manager.borrow_and_update() {
                    break Loss::Manager;
                }
            }
            _ = work.cancelled() => return Loss::Manager,
        }
    };
    fence.revoke();
    metrics.leader.set(0);
    warn!(
        ?loss,
        renew_deadline = ?timing.renew_deadline,
        "lost the leader lease: writes are fenced off; stopping the reconcilers"
    );
    work.cancel();
    loss
}

#[cfg(test)]
mod tests;
