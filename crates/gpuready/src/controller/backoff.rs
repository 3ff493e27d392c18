//! How long gpuready's watches wait before trying again after an error: kube's
//! own watcher [`ExponentialBackoff`] (from `backon`), with gpuready's bounds.
//! (A node whose reconcile failed is backed off by the node book:
//! `gpuready_core::node_book::error_backoff`.)

use std::time::Duration;

use backon::ExponentialBuilder;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::ExponentialBackoff;

/// Exponential backoff for the watches: from 100–200 ms, doubling, capped at
/// 1.2–2.4 s (backon's jitter adds up to the delay itself); reset by the first
/// event that gets through.
///
/// kube-runtime's default (client-go's 0.8 s doubling to 30 s, reset only after
/// two quiet minutes) kept gpuready blind for up to half a minute after an API
/// server restart: each failed attempt during the outage doubled the next wait.
/// One controller retrying a watch every 2 s is no load for a server that is
/// coming back, and API Priority and Fairness protects it from the rest. The
/// jitter keeps two replicas from retrying in lockstep.
pub struct WatchBackoff(ExponentialBackoff);

const WATCH_MIN: Duration = Duration::from_millis(100);
const WATCH_MAX: Duration = Duration::from_millis(1200);

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff(
            ExponentialBuilder::default()
                .with_min_delay(WATCH_MIN)
                .with_max_delay(WATCH_MAX)
                .with_factor(2.0)
                .with_jitter()
                .without_max_times()
                .into(),
        )
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        self.0.next()
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.0.reset();
    }
}

#[cfg(test)]
mod tests;
