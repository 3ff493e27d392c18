//! The safety brake: when a large share of a profile's nodes turn not-ready at
//! once (a GFD or NFD outage, a bad driver rollout), tainting them all would
//! drain the fleet for what is likely one shared cause. Engages on the rate of
//! ready→not-ready turns within a window; releases on the level, once the share
//! of not-ready nodes is back under the threshold.
//!
//! Two calls, two rules: [`BrakeState::turn`] records a turn and may only
//! engage (a turn says nothing about how many nodes are not ready now), and
//! [`BrakeState::counts`] decides from the tally's level and may engage or
//! release. Only a caller holding the not-ready count may release.

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
    /// The same turns ordered by time, so `BrakeState::turn` drops only
    /// those past the window. (A scan of `turns` there made every reconcile
    /// of a fleet-wide burst cost O(nodes turned): O(n²) over the burst.)
    by_time: BTreeSet<(Timestamp, String)>,
    engaged: bool,
}

impl BrakeState {
    /// Records `node` turning from ready to not ready and engages the brake if
    /// the turns inside the window are now a burst. Never releases: the number
    /// of recent turns is not the number of nodes not ready, so an engaged
    /// brake stays engaged until [`BrakeState::counts`] says the level is back
    /// under the threshold. Returns whether the brake is engaged.
    pub fn turn(&mut self, cfg: &BrakeConfig, node: &str, matched: usize, now: Timestamp) -> bool {
        if let Some(before) = self.turns.insert(node.to_owned(), now) {
            self.by_time.remove(&(before, node.to_owned()));
        }
        self.by_time.insert((now, node.to_owned()));
        self.expire(cfg, now);
        if !self.engaged && !disabled(cfg, matched) {
            self.engaged = self.is_burst(cfg, matched);
        }
        self.engaged
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

    /// Decides from the profile's matched and currently not-ready node counts
    /// (the tally's level): engages on a burst of recent turns, releases once
    /// the share not ready is at or under the threshold. Returns whether the
    /// brake is engaged.
    pub fn counts(
        &mut self,
        cfg: &BrakeConfig,
        matched: usize,
        not_ready: usize,
        now: Timestamp,
    ) -> bool {
        self.expire(cfg, now);
        if disabled(cfg, matched) {
            self.engaged = false;
        } else if !self.engaged {
            self.engaged = self.is_burst(cfg, matched);
        } else if share(not_ready, matched) <= cfg.threshold {
            self.engaged = false;
        }
        self.engaged
    }

    /// Number of turns inside the window (after the last call).
    pub fn recent_turns(&self) -> usize {
        self.turns.len()
    }

    /// Drops the turns older than the window, oldest first.
    fn expire(&mut self, cfg: &BrakeConfig, now: Timestamp) {
        let horizon = now.as_second() - cfg.window_seconds;
        while let Some((at, node)) = self.by_time.first().cloned() {
            if at.as_second() >= horizon {
                break;
            }
            self.by_time.pop_first();
            self.turns.remove(&node);
        }
    }

    fn is_burst(&self, cfg: &BrakeConfig, matched: usize) -> bool {
        let recent = self.turns.len();
        recent >= cfg.min_nodes && share(recent, matched) > cfg.threshold
    }
}

/// A threshold of 1.0 or more, or a profile with no nodes, never brakes.
fn disabled(cfg: &BrakeConfig, matched: usize) -> bool {
    cfg.threshold >= 1.0 || matched == 0
}

fn share(n: usize, matched: usize) -> f64 {
    n as f64 / matched as f64
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
        let engaged: Vec<bool> = ["a", "b", "c", "d"]
            .iter()
            .enumerate()
            .map(|(i, n)| b.turn(&CFG, n, 6, at(i as i64)))
            .collect();
        // The fourth turn of six nodes is more than half: engaged at once.
        assert_eq!(engaged, [false, false, false, true]);
        assert!(b.counts(&CFG, 6, 4, at(10)));
        // Still 4 of 6 not ready after the window: stays engaged (level, not rate).
        assert!(b.counts(&CFG, 6, 4, at(1000)));
        // Recovered below the threshold: released.
        assert!(!b.counts(&CFG, 6, 2, at(1001)));
    }

    #[test]
    fn slow_failures_never_engage() {
        let mut b = BrakeState::default();
        for i in 0..6 {
            assert!(!b.turn(&CFG, &format!("n{i}"), 6, at(i * 400)));
            assert!(!b.counts(&CFG, 6, (i + 1) as usize, at(i * 400)));
        }
    }

    #[test]
    fn small_pools_and_disabled_brake() {
        let mut b = BrakeState::default();
        b.turn(&CFG, "a", 2, at(0));
        assert!(!b.turn(&CFG, "b", 2, at(0)), "below min_nodes");
        assert!(!b.counts(&CFG, 2, 2, at(1)), "below min_nodes");
        let off = BrakeConfig {
            threshold: 1.0,
            ..CFG
        };
        for n in ["c", "d", "e"] {
            assert!(!b.turn(&off, n, 5, at(0)));
        }
        assert!(!b.counts(&off, 5, 5, at(1)));
    }

    #[test]
    fn the_window_drops_old_turns_and_keeps_a_node_once() {
        let mut b = BrakeState::default();
        b.turn(&CFG, "a", 10, at(0));
        b.turn(&CFG, "b", 10, at(100));
        // "a" turns again later: counted once, at its latest turn.
        b.turn(&CFG, "a", 10, at(200));
        b.counts(&CFG, 10, 2, at(250));
        assert_eq!(b.recent_turns(), 2);
        // Past b's window, inside a's.
        b.counts(&CFG, 10, 2, at(450));
        assert_eq!(b.recent_turns(), 1);
        b.forget("a");
        b.counts(&CFG, 10, 0, at(451));
        assert_eq!(b.recent_turns(), 0);
        assert!(b.by_time.is_empty() && b.turns.is_empty());
        // A turn forgotten before the window passes leaves nothing behind.
        b.turn(&CFG, "c", 10, at(500));
        b.forget("c");
        assert!(b.by_time.is_empty() && b.turns.is_empty());
    }

    /// Issue 33's sequence: 60 of 100 nodes turn at once and engage the brake;
    /// the window passes with 60 still not ready (the counts keep it engaged);
    /// then one more node turns. One recent turn is not one node not ready:
    /// the turn must not release the brake while 61 % are not ready.
    #[test]
    fn a_turn_after_the_window_never_releases_an_engaged_brake() {
        let mut b = BrakeState::default();
        for i in 0..60 {
            b.turn(&CFG, &format!("n{i}"), 100, at(0));
        }
        assert!(b.engaged(), "60 of 100 turned at once");
        assert!(b.counts(&CFG, 100, 60, at(400)), "still 60 % not ready");
        assert_eq!(b.recent_turns(), 0, "the burst's turns left the window");
        assert!(
            b.turn(&CFG, "n60", 100, at(401)),
            "a late turn released the brake"
        );
        assert!(b.counts(&CFG, 100, 61, at(402)));
        // Only the level releases it.
        assert!(!b.counts(&CFG, 100, 50, at(403)));
    }
}
