//! Every DeviceTaintRule in the cluster, anyone's, watched for one thing: a
//! `NoExecute` taint whose selector names no pool, which evicts every pod
//! using the devices it matches on every node (kubernetes #141422). A second
//! watch beside the evidence watch of gpuready's own rules (which selects them
//! by label): DeviceTaintRules are few, and this one keeps only the wide
//! rules' words. Reported — a warning in the log, the
//! `gpuready_cluster_wide_device_taint_rules` gauge and its alert — never
//! touched: gpuready changes no one else's rule.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpuready_api::device_taint_rule::DeviceTaintRule;
use gpuready_core::wide_rules::{WideRule, wide_rule};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::controller::metrics::Metrics;
use crate::controller::watch::evidence_follow::served;
use crate::controller::watch::next_or_stop;

/// Starts the watch; it ends when `stop` is cancelled.
pub fn spawn(
    client: Client,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<DeviceTaintRule> = Api::all(client);
        let gauge = |n: usize| {
            metrics
                .cluster_wide_device_taint_rules
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        };
        if !served("DeviceTaintRule", &api, None, || gauge(0), &stop).await {
            return;
        }
        let mut wide = WideRules::default();
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        while let Some(ev) = next_or_stop(&mut events, &stop).await {
            match ev {
                Ok(ev) => {
                    wide.apply(ev);
                    gauge(wide.now.len());
                }
                Err(e) => {
                    warn!(error = %e, "DeviceTaintRule watch failed; the watcher retries with backoff")
                }
            }
        }
    })
}

/// The wide rules by name, and the next list's while it comes in.
#[derive(Default)]
struct WideRules {
    now: BTreeMap<String, WideRule>,
    listing: Option<BTreeMap<String, WideRule>>,
}

impl WideRules {
    fn apply(&mut self, ev: Event<DeviceTaintRule>) {
        match ev {
            Event::Init => self.listing = Some(BTreeMap::new()),
            Event::InitApply(r) => {
                if let (Some(l), Some(w)) = (self.listing.as_mut(), wide_rule(&r)) {
                    l.insert(w.name.clone(), w);
                }
            }
            Event::InitDone => {
                let fresh = self.listing.take().unwrap_or_default();
                for w in fresh.values().filter(|w| !self.now.contains_key(&w.name)) {
                    warn!(rule = %w.name, "{}", w.message);
                }
                self.now = fresh;
            }
            Event::Apply(r) => match wide_rule(&r) {
                Some(w) => {
                    if self.now.get(&w.name) != Some(&w) {
                        warn!(rule = %w.name, "{}", w.message);
                    }
                    self.now.insert(w.name.clone(), w);
                }
                None => {
                    if self.now.remove(&r.name_any()).is_some() {
                        info!(rule = %r.name_any(), "DeviceTaintRule no longer evicts across the cluster");
                    }
                }
            },
            Event::Delete(r) => {
                if self.now.remove(&r.name_any()).is_some() {
                    info!(rule = %r.name_any(), "DeviceTaintRule that evicted across the cluster deleted");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
