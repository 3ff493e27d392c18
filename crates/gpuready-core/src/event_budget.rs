//! How many per-node Events a burst may post, pure: one token bucket per
//! GpuNodeProfile (a burst of [`BURST`], one more every [`REFILL_SECONDS`]),
//! and a count of the Events it held back, by reason, which the controller
//! posts as one summary Event on the profile at most every
//! [`SUMMARY_SECONDS`]. A fleet-wide transition of 100,000 nodes then writes
//! a few dozen Event objects instead of 100,000; each node's `GpuReady`
//! condition still says where it stands, and the summary says how many nodes
//! the held-back Events were about.
//!
//! Why a bucket per profile and not kube's event series: a series folds
//! repeats of one Event about one object; a burst is one Event about each of
//! many objects, so no two share a series key and nothing would fold.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;

/// Per-node Events a profile may post at once.
pub const BURST: u32 = 25;
/// One more per-node Event allowed every this many seconds.
pub const REFILL_SECONDS: i64 = 6;
/// A profile's summary of held-back Events is posted at most this often.
pub const SUMMARY_SECONDS: i64 = 60;

/// One profile's bucket.
#[derive(Debug, Clone)]
struct Bucket {
    tokens: u32,
    /// When `tokens` was last brought up to date.
    refilled: Timestamp,
    /// Held back since the last summary, by Event reason.
    held: BTreeMap<String, u64>,
    /// When the first Event now held back was.
    held_since: Option<Timestamp>,
    last_summary: Option<Timestamp>,
}

/// What one summary Event says: `held` per-node Events were not posted for
/// `profile` (by reason) between `since` and now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The profile's name; empty for Events about nodes no profile governs.
    pub profile: String,
    pub held: BTreeMap<String, u64>,
    pub since: Timestamp,
}

impl Summary {
    /// How many Events were held back in all.
    pub fn total(&self) -> u64 {
        self.held.values().sum()
    }

    /// The summary Event's note.
    pub fn note(&self, now: Timestamp) -> String {
        let reasons = self
            .held
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "{} per-node Events not posted in the last {} s, to keep Events bounded in a burst ({reasons}); each node's GpuReady condition says where it stands",
            self.total(),
            now.duration_since(self.since).as_secs().max(0),
        )
    }
}

/// The buckets of every profile (see the module comment).
#[derive(Debug, Default)]
pub struct EventBudget {
    buckets: HashMap<String, Bucket>,
}

impl EventBudget {
    /// Whether a per-node Event with `reason` for `profile` may be posted at
    /// `now`; if not, it is counted for the profile's next summary.
    pub fn admit(&mut self, profile: &str, reason: &str, now: Timestamp) -> bool {
        let b = self
            .buckets
            .entry(profile.to_owned())
            .or_insert_with(|| Bucket {
                tokens: BURST,
                refilled: now,
                held: BTreeMap::new(),
                held_since: None,
                last_summary: None,
            });
        let earned = now.duration_since(b.refilled).as_secs() / REFILL_SECONDS;
        if earned > 0 {
            let earned = u32::try_from(earned).unwrap_or(u32::MAX);
            b.tokens = b.tokens.saturating_add(earned).min(BURST);
            b.refilled = if b.tokens == BURST {
                now
            } else {
                b.refilled + jiff::SignedDuration::from_secs(i64::from(earned) * REFILL_SECONDS)
            };
        }
        if b.tokens > 0 {
            b.tokens -= 1;
            return true;
        }
        *b.held.entry(reason.to_owned()).or_default() += 1;
        b.held_since.get_or_insert(now);
        false
    }

    /// The summaries due at `now`: every profile with Events held back whose
    /// last summary is at least [`SUMMARY_SECONDS`] old. Each is taken: its
    /// count starts again from zero.
    pub fn due(&mut self, now: Timestamp) -> Vec<Summary> {
        let mut out = Vec::new();
        for (profile, b) in &mut self.buckets {
            let Some(since) = b.held_since else { continue };
            if b.last_summary
                .is_some_and(|t| now.duration_since(t).as_secs() < SUMMARY_SECONDS)
            {
                continue;
            }
            out.push(Summary {
                profile: profile.clone(),
                held: std::mem::take(&mut b.held),
                since,
            });
            b.held_since = None;
            b.last_summary = Some(now);
        }
        out.sort_by(|a, b| a.profile.cmp(&b.profile));
        out
    }

    /// Forgets the buckets of profiles that no longer exist (their held-back
    /// count goes with them: nothing is left to post it on).
    pub fn retain_profiles(&mut self, exists: impl Fn(&str) -> bool) {
        self.buckets.retain(|p, _| p.is_empty() || exists(p));
    }
}

#[cfg(test)]
mod tests;
