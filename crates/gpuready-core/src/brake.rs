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
mod tests;
