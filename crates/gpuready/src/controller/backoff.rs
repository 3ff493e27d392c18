//! How long gpuready waits before trying again: the watches after an error, and
//! a node whose reconcile failed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube::runtime::utils::Backoff;

/// Exponential backoff for the watches: from 200 ms, doubling, capped at 2 s,
/// with ±20 % jitter; reset by the first event that gets through.
///
/// kube-runtime's default (client-go's 0.8 s doubling to 30 s, reset only after
/// two quiet minutes) kept gpuready blind for up to half a minute after an API
/// server restart: each failed attempt during the outage doubled the next wait.
/// One controller retrying a watch every 2 s is no load for a server that is
/// coming back, and API Priority and Fairness protects it from the rest.
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
}

const WATCH_MIN: Duration = Duration::from_millis(200);
const WATCH_MAX: Duration = Duration::from_secs(2);

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff { next: WATCH_MIN }
    }
}

/// A factor in [0.8, 1.2) from the clock's nanoseconds: enough to keep two
/// replicas from retrying in lockstep, without a random-number crate.
fn jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    0.8 + 0.4 * f64::from(nanos % 1000) / 1000.0
}

impl Iterator for WatchBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(WATCH_MAX);
        Some(now.mul_f64(jitter()))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = WATCH_MIN;
    }
}

/// Per-node exponential backoff for failed reconciles: 1 s, 2 s, 4 s … up to
/// 5 minutes, forgotten at the node's first success or deletion. A node that
/// keeps failing (a webhook refusing it, RBAC) no longer costs a request every
/// 5 s forever, and one bad node never slows the others.
#[derive(Debug, Default)]
pub struct ErrorBackoff {
    failures: Mutex<HashMap<String, u32>>,
}

const ERROR_MIN: Duration = Duration::from_secs(1);
const ERROR_MAX: Duration = Duration::from_secs(300);

impl ErrorBackoff {
    /// Records one more failure of `key` and returns how long to wait.
    pub fn failed(&self, key: &str) -> Duration {
        let n = self
            .failures
            .lock()
            .map(|mut f| {
                let n = f.entry(key.to_owned()).or_default();
                *n = n.saturating_add(1);
                *n
            })
            .unwrap_or(1);
        let exp = n.saturating_sub(1).min(16);
        ERROR_MIN
            .saturating_mul(1 << exp)
            .min(ERROR_MAX)
            .mul_f64(jitter())
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
        assert!(waits[0] < Duration::from_millis(250), "{waits:?}");
        assert!(
            waits.iter().all(|w| *w <= Duration::from_millis(2400)),
            "{waits:?}"
        );
        b.reset();
        assert!(b.next().is_some_and(|w| w < Duration::from_millis(250)));
    }

    #[test]
    fn error_backoff_grows_per_node_and_forgets_on_success() {
        let b = ErrorBackoff::default();
        let first = b.failed("a");
        let _ = b.failed("a");
        let third = b.failed("a");
        assert!(third > first * 2, "{first:?} then {third:?}");
        assert!(
            b.failed("b") < Duration::from_millis(1300),
            "other nodes start fresh"
        );
        for _ in 0..30 {
            assert!(b.failed("a") <= Duration::from_secs(360));
        }
        b.forget("a");
        assert!(b.failed("a") < Duration::from_millis(1300));
        assert_eq!(b.failures.lock().unwrap().len(), 2, "a and b are tracked");
    }
}
