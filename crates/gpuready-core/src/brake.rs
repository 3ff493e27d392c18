//! The safety brake: when a large share of a profile's nodes turn not-ready at
//! once (a GFD or NFD outage, a bad driver rollout), tainting them all would
//! drain the fleet for what is likely one shared cause. Engages on the rate of
//! ready→not-ready turns within a window; releases on the level, once the share
//! of not-ready nodes is back under the threshold.

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::keys::brake_reasons;
use jiff::Timestamp;

/// Brake settings.
#[derive(Clone, Copy, Debug)]
pub struct BrakeConfig {
    /// Share of matched nodes (0..=1) that must turn not-ready within the window.
    /// 1.0 or more disables the brake.
    pub threshold: f64,
    pub window_seconds: i64,
    /// Fewer turns than this never engage the brake (small pools).
    pub min_nodes: usize,
}

/// The `SafetyBrake` condition a profile carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrakeCondition {
    pub engaged: bool,
    pub reason: String,
    pub message: String,
}

impl BrakeConfig {
    /// The condition for a brake that is (or is not) engaged, in words a
    /// person reading the profile can act on.
    pub fn condition(&self, engaged: bool) -> BrakeCondition {
        if engaged {
            BrakeCondition {
                engaged,
                reason: brake_reasons::TOO_MANY_NODES_TURNED_NOT_READY.into(),
                message: format!(
                    "more than {:.0}% of the nodes turned not-ready within {}s: new taints are held back (existing ones stay) until the share of not-ready nodes falls back under the threshold; likely a shared cause such as a GFD/NFD outage or a driver rollout",
                    self.threshold * 100.0,
                    self.window_seconds
                ),
            }
        } else {
            BrakeCondition {
                engaged,
                reason: brake_reasons::RELEASED.into(),
                message: "taints are applied normally".into(),
            }
        }
    }
}

/// Per-profile brake memory.
#[derive(Clone, Debug, Default)]
pub struct BrakeState {
    /// Node → when it was last seen turning from ready to not ready.
    turns: BTreeMap<String, Timestamp>,
    /// The same turns ordered by time, so [`BrakeState::update`] drops only
    /// those past the window. (A scan of `turns` there made every reconcile
    /// of a fleet-wide burst cost O(nodes turned): O(n²) over the burst.)
    by_time: BTreeSet<(Timestamp, String)>,
    engaged: bool,
}

impl BrakeState {
    /// Records a node turning from ready to not ready.
    pub fn record_turn(&mut self, node: &str, now: Timestamp) {
        if let Some(before) = self.turns.insert(node.to_owned(), now) {
            self.by_time.remove(&(before, node.to_owned()));
        }
        self.by_time.insert((now, node.to_owned()));
    }

    /// Forgets a node (recovered or gone).
    pub fn forget(&mut self, node: &str) {
        if let Some(at) = self.turns.remove(node) {
            self.by_time.remove(&(at, node.to_owned()));
        }
    }

    pub fn engaged(&self) -> bool {
        self.engaged
    }

    /// Updates and returns whether the brake is engaged, given the profile's
    /// matched and currently not-ready node counts.
    pub fn update(
        &mut self,
        cfg: &BrakeConfig,
        matched: usize,
        not_ready: usize,
        now: Timestamp,
    ) -> bool {
        let horizon = now.as_second() - cfg.window_seconds;
        while let Some((at, node)) = self.by_time.first().cloned() {
            if at.as_second() >= horizon {
                break;
            }
            self.by_time.pop_first();
            self.turns.remove(&node);
        }
        if cfg.threshold >= 1.0 || matched == 0 {
            self.engaged = false;
            return false;
        }
        let share = |n: usize| n as f64 / matched as f64;
        let recent = self.turns.len();
        if !self.engaged {
            self.engaged = recent >= cfg.min_nodes && share(recent) > cfg.threshold;
        } else if share(not_ready) <= cfg.threshold {
            self.engaged = false;
        }
        self.engaged
    }

    /// Number of turns inside the window (after the last `update`).
    pub fn recent_turns(&self) -> usize {
        self.turns.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    const CFG: BrakeConfig = BrakeConfig {
        threshold: 0.5,
        window_seconds: 300,
        min_nodes: 3,
    };

    #[test]
    fn engages_on_a_burst_and_releases_when_nodes_recover() {
        let mut b = BrakeState::default();
        for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
            b.record_turn(n, at(i as i64));
        }
        assert!(b.update(&CFG, 6, 4, at(10)));
        // Still 4 of 6 not ready after the window: stays engaged (level, not rate).
        assert!(b.update(&CFG, 6, 4, at(1000)));
        // Recovered below the threshold: released.
        assert!(!b.update(&CFG, 6, 2, at(1001)));
    }

    #[test]
    fn slow_failures_never_engage() {
        let mut b = BrakeState::default();
        for i in 0..6 {
            b.record_turn(&format!("n{i}"), at(i * 400));
            assert!(!b.update(&CFG, 6, (i + 1) as usize, at(i * 400)));
        }
    }

    #[test]
    fn small_pools_and_disabled_brake() {
        let mut b = BrakeState::default();
        b.record_turn("a", at(0));
        b.record_turn("b", at(0));
        assert!(!b.update(&CFG, 2, 2, at(1)), "below min_nodes");
        let off = BrakeConfig {
            threshold: 1.0,
            ..CFG
        };
        for n in ["c", "d", "e"] {
            b.record_turn(n, at(0));
        }
        assert!(!b.update(&off, 5, 5, at(1)));
    }

    #[test]
    fn the_window_drops_old_turns_and_keeps_a_node_once() {
        let mut b = BrakeState::default();
        b.record_turn("a", at(0));
        b.record_turn("b", at(100));
        // "a" turns again later: counted once, at its latest turn.
        b.record_turn("a", at(200));
        b.update(&CFG, 10, 2, at(250));
        assert_eq!(b.recent_turns(), 2);
        // Past b's window, inside a's.
        b.update(&CFG, 10, 2, at(450));
        assert_eq!(b.recent_turns(), 1);
        b.forget("a");
        b.update(&CFG, 10, 0, at(451));
        assert_eq!(b.recent_turns(), 0);
        assert!(b.by_time.is_empty() && b.turns.is_empty());
        // A turn forgotten before the window passes leaves nothing behind.
        b.record_turn("c", at(500));
        b.forget("c");
        assert!(b.by_time.is_empty() && b.turns.is_empty());
    }
}
