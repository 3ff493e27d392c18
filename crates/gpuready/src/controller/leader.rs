//! Leader election on a coordination.k8s.io Lease (kube-lease-manager: a
//! maintained crate that acquires and renews the Lease and tolerates clock
//! skew). Only the holder runs the reconcilers, and only while its renewals are
//! fresh: the crate hides renewal errors (it logs and retries, its state stays
//! "leader"), so [`guard`] watches the Lease itself and feeds the write
//! [`Fence`] from the renewals it sees.

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

use super::config::RunArgs;
use super::error::Error;
use super::fence::Fence;
use super::metrics::Metrics;

/// Lease timing from `--lease-duration` (client-go's defaults have the same
/// shape: 15 s lease, 10 s renew deadline, renewal well before).
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
        // Renew every third of the duration, so two renewals may fail before
        // the renew deadline (two thirds) passes.
        let interval = (duration_s / 3).max(1);
        LeaseTiming {
            duration_s,
            grace_s: duration_s - interval,
            renew_deadline: Duration::from_millis(duration_s * 2000 / 3),
        }
    }
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
pub async fn acquire(
    client: &Client,
    args: &RunArgs,
    stop: &CancellationToken,
) -> Result<Option<Lease>, Error> {
    let timing = LeaseTiming::new(args.lease_duration_seconds);
    let manager = LeaseManagerBuilder::new(client.clone(), &args.lease_name)
        .with_namespace(&args.lease_namespace)
        .with_identity(args.identity())
        .with_duration(timing.duration_s)
        .with_grace(timing.grace_s)
        .with_field_manager(format!("{}-lease", gpuready_api::keys::FIELD_MANAGER))
        .build()
        .await?;
    let (mut receiver, task) = manager.watch().await;
    info!(lease = %args.lease_name, namespace = %args.lease_namespace, "waiting for the leader lease");
    loop {
        if *receiver.borrow_and_update() {
            info!("acquired the leader lease");
            return Ok(Some(Lease { receiver, task }));
        }
        tokio::select! {
            changed = receiver.changed() => {
                if changed.is_err() {
                    // The lease task ended (API errors it gave up on): surface it.
                    return match task.await {
                        Ok(Err(e)) => Err(e.into()),
                        _ => Err(Error::LostLeadership),
                    };
                }
            }
            _ = stop.cancelled() => {
                Lease { receiver, task }.release().await;
                return Ok(None);
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
mod tests {
    use super::*;

    #[test]
    fn renew_deadline_falls_between_renewals_and_expiry() {
        for d in [2, 4, 15, 60] {
            let t = LeaseTiming::new(d);
            let interval = Duration::from_secs(t.duration_s - t.grace_s);
            assert!(t.grace_s > 0 && t.grace_s < t.duration_s, "{t:?}");
            assert!(
                t.renew_deadline > interval,
                "{t:?}: deadline after a renewal is due"
            );
            assert!(
                t.renew_deadline < Duration::from_secs(t.duration_s),
                "{t:?}: writes stop before anyone else may take over"
            );
        }
        assert_eq!(LeaseTiming::new(15).renew_deadline, Duration::from_secs(10));
    }
}
