//! The safety brake's bookkeeping, one [`BrakeState`] per profile: the node
//! reconciler feeds it turns (a node labelled ready that no longer is), which
//! may only engage it (at once, on a burst), and asks whether new taints are
//! held; the status task feeds it fresh counts from its tally, the only call
//! that may release it — and the one that re-queues the nodes it held. Every count it decides with is the tally's — the matched count between
//! two status passes arrives over the status task's `watch` channel
//! (`Context::matched`), never read back from the profile's status through the
//! API server. The decision itself is pure (`gpuready_core::brake`); this
//! module only keeps the state between calls, behind one mutex: its two
//! callers must not wait for each other (a burst is braked within the
//! reconcile that trips it, not at the status task's next pass).

use std::collections::BTreeMap;
use std::sync::Mutex;

use gpuready_api::keys;
use gpuready_core::brake::{BrakeConfig, BrakeState};
use gpuready_core::report::NodeState;
use gpuready_core::{GovernanceKind, NodeAssessment, NodeFacts};
use jiff::Timestamp;

/// Every profile's brake. Shared by the node reconciles and the status task,
/// hence the mutex; each call holds it for a map lookup and a small update.
#[derive(Debug)]
pub struct Brakes {
    cfg: BrakeConfig,
    state: Mutex<BTreeMap<String, BrakeState>>,
}

impl Brakes {
    pub fn new(cfg: BrakeConfig) -> Self {
        Brakes {
            cfg,
            state: Mutex::default(),
        }
    }

    /// The settings the brake decides with (for the condition's message).
    pub fn config(&self) -> &BrakeConfig {
        &self.cfg
    }

    /// Whether new taints are held back for `profile`.
    pub fn engaged(&self, profile: &str) -> bool {
        self.state
            .lock()
            .map(|b| b.get(profile).is_some_and(BrakeState::engaged))
            .unwrap_or(false)
    }

    /// Notes a node that was labelled ready and no longer is (the brake's
    /// input), or forgets one that is ready again. A turn may engage the brake
    /// at once, so a burst is braked before the status task's next pass, but
    /// never releases it (`BrakeState::turn`); `matched` gives the profile's
    /// matched node count (read only then).
    pub fn record_turn(
        &self,
        facts: &NodeFacts,
        a: &NodeAssessment,
        now: Timestamp,
        matched: impl FnOnce(&str) -> usize,
    ) {
        let (Some(profile), GovernanceKind::Governed) = (&a.profile, a.governance) else {
            return;
        };
        let Ok(mut brakes) = self.state.lock() else {
            return;
        };
        let b = brakes.entry(profile.clone()).or_default();
        // Only failures are turns: a node going into maintenance (an upgrade
        // wave) or held by another gate (a cordon) never engages the brake.
        if a.state != Some(NodeState::NotReady) {
            b.forget(&facts.name);
        } else if facts.labels.get(keys::LABEL_READY).map(String::as_str) == Some("true") {
            b.turn(&self.cfg, &facts.name, matched(profile), now);
        }
    }

    /// Updates `profile`'s brake from the tally's counts, the one call that
    /// may release it; returns whether it is engaged now.
    pub fn counts(&self, profile: &str, matched: usize, not_ready: usize, now: Timestamp) -> bool {
        self.state
            .lock()
            .map(|mut b| {
                b.entry(profile.to_owned())
                    .or_default()
                    .counts(&self.cfg, matched, not_ready, now)
            })
            .unwrap_or(false)
    }
}
