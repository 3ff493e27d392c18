//! Leader election on a coordination.k8s.io Lease (kube-lease-manager: a
//! maintained crate that renews with server-side apply and tolerates clock
//! skew). Only the holder runs the reconcilers; losing the lease stops them.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::config::RunArgs;
use super::error::Error;

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
    let duration = args.lease_duration_seconds.max(2);
    let manager = LeaseManagerBuilder::new(client.clone(), &args.lease_name)
        .with_namespace(&args.lease_namespace)
        .with_identity(args.identity())
        .with_duration(duration)
        .with_grace((duration / 3).max(1))
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

/// Cancels `work` when the lease is lost.
pub async fn watch_loss(mut receiver: watch::Receiver<bool>, work: CancellationToken) {
    loop {
        if receiver.changed().await.is_err() || !*receiver.borrow_and_update() {
            warn!("lost the leader lease: stopping the reconcilers");
            work.cancel();
            return;
        }
    }
}
