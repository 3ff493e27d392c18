//! How long gpuready waits before trying again: the watches after an error, and
//! a node whose reconcile failed. Both are kube's own watcher
//! [`ExponentialBackoff`] (from `backon`), with gpuready's bounds; only the
//! per-node map around the second is ours (kube's Controller has no per-object
//! error backoff).

use std::collections::HashMap;
use std::sync::Mutex;
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

/// Per-node exponential backoff for failed reconciles: 1–2 s, doubling, capped
/// at 2.5–5 minutes, forgotten at the node's first success or deletion. A node
/// that keeps failing (a webhook refusing it, RBAC) no longer costs a request
/// every 5 s forever, and one bad node never slows the others.
#[derive(Default)]
pub struct ErrorBackoff {
    failures: Mutex<HashMap<String, ExponentialBackoff>>,
}

const ERROR_MIN: Duration = Duration::from_secs(1);
const ERROR_MAX: Duration = Duration::from_secs(150);

fn error_backoff() -> ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(ERROR_MIN)
        .with_max_delay(ERROR_MAX)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into()
}

impl ErrorBackoff {
    /// Records one more failure of `key` and returns how long to wait.
    pub fn failed(&self, key: &str) -> Duration {
        self.failures
            .lock()
            .ok()
            .and_then(|mut f| f.entry(key.to_owned()).or_insert_with(error_backoff).next())
            .unwrap_or(ERROR_MIN)
    }

    pub fn forget(&self, key: &str) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_backoff_is_capped_and_resets() {
        let mut b = WatchBackoff::default();
        let waits: Vec<Duration> = (&mut b).take(8).collect();
        assert!(waits[0] < Duration::from_millis(200), "{waits:?}");
        assert!(
            waits.iter().all(|w| *w <= Duration::from_millis(2400)),
            "{waits:?}"
        );
        b.reset();
        assert!(b.next().is_some_and(|w| w < Duration::from_millis(200)));
    }

    #[test]
    fn error_backoff_grows_per_node_and_forgets_on_success() {
        let b = ErrorBackoff::default();
        let first = b.failed("a");
        for _ in 0..3 {
            let _ = b.failed("a");
        }
        let fifth = b.failed("a");
        // 16 s at least, against 2 s at most for the first.
        assert!(fifth > first * 4, "{first:?} then {fifth:?}");
        assert!(
            b.failed("b") < Duration::from_secs(2),
            "other nodes start fresh"
        );
        for _ in 0..30 {
            assert!(b.failed("a") <= Duration::from_secs(300));
        }
        b.forget("a");
        assert!(b.failed("a") < Duration::from_secs(2));
        assert_eq!(b.failures.lock().unwrap().len(), 2, "a and b are tracked");
    }
}
