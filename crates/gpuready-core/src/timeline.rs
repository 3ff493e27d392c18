//! A node's last wait for readiness, step by step, as the one compact
//! annotation gpuready writes when the wait ends (`gpuready.io/timeline`):
//! the record lives on the Node, so it survives a leader change without a new
//! object per Node — and the profile-wide figures read from those records
//! (p50 / p90 / max time to ready, the step that held the nodes longest).

use std::collections::BTreeMap;
use std::fmt;

use gpuready_api::Layer;
use jiff::Timestamp;
use serde::Serialize;

use crate::duration::human_seconds;

/// How far back profile status looks for joins (`status.timeToReady`).
pub const STATUS_WINDOW_SECONDS: i64 = 24 * 3600;

/// What a wait for readiness began with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EpisodeKind {
    /// From the Node's registration (`creationTimestamp`).
    Join,
    /// From the end of a driver upgrade or a MIG change (upgrade-done).
    Maintenance,
    /// From the operator's repair annotation (`gpuready.io/repaired-at`).
    Repair,
    /// From `GpuReady` turning False on a node that was ready.
    Fault,
}

impl EpisodeKind {
    /// Every kind, in the order metrics and docs list them.
    pub const ALL: [EpisodeKind; 4] = [
        EpisodeKind::Join,
        EpisodeKind::Maintenance,
        EpisodeKind::Repair,
        EpisodeKind::Fault,
    ];

    /// The `kind` label of `gpuready_time_to_ready_seconds` and the record's word.
    pub fn as_str(self) -> &'static str {
        match self {
            EpisodeKind::Join => "join",
            EpisodeKind::Maintenance => "maintenance",
            EpisodeKind::Repair => "repair",
            EpisodeKind::Fault => "fault",
        }
    }

    fn parse(s: &str) -> Option<EpisodeKind> {
        EpisodeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One step of a wait: a layer turning Ready, or the other readiness gates
/// letting go of a node whose GPU stack was ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Step {
    Layer(Layer),
    Gates,
}

impl Step {
    /// Every step, bottom-up: the layers, then the gates.
    pub fn every() -> impl Iterator<Item = Step> {
        Layer::every().map(Step::Layer).chain([Step::Gates])
    }

    /// The `layer` label of `gpuready_layer_ready_seconds` and the record's key.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Layer(l) => l.as_str(),
            Step::Gates => "Gates",
        }
    }

    fn parse(s: &str) -> Option<Step> {
        Step::every().find(|step| step.as_str() == s)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A finished wait: what began it, when, how long until the node was Ready,
/// and when (seconds after the start) each step first went Ready.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyRecord {
    pub kind: EpisodeKind,
    /// Whole seconds (the annotation keeps no fraction).
    pub started: Timestamp,
    pub seconds: u64,
    pub steps: BTreeMap<Step, u64>,
}

impl ReadyRecord {
    /// When the node turned Ready.
    pub fn ended(&self) -> Timestamp {
        let secs = i64::try_from(self.seconds).unwrap_or(i64::MAX);
        Timestamp::from_second(self.started.as_second().saturating_add(secs))
            .unwrap_or(self.started)
    }

    /// Each step with how long the node waited for it after the step before
    /// (in the order the steps went Ready; the first counts from the start).
    pub fn holds(&self) -> Vec<(Step, u64)> {
        let mut by_time: Vec<(Step, u64)> = self.steps.iter().map(|(s, t)| (*s, *t)).collect();
        by_time.sort_by_key(|(_, t)| *t);
        let mut before = 0;
        by_time
            .into_iter()
            .map(|(s, t)| {
                let hold = t.saturating_sub(before);
                before = before.max(t);
                (s, hold)
            })
            .collect()
    }

    /// The step that held the node longest (the first of equals).
    pub fn longest_hold(&self) -> Option<(Step, u64)> {
        self.holds()
            .into_iter()
            .fold(None, |best: Option<(Step, u64)>, (s, h)| match best {
                Some((_, b)) if b >= h => best,
                _ => Some((s, h)),
            })
    }

    /// One line for a person: `join of 9s (from 2026-…): Node +0s, Driver +3s,
    /// …; held longest by FeatureDiscovery (3s)`.
    pub fn describe(&self) -> String {
        let mut steps: Vec<(Step, u64)> = self.steps.iter().map(|(s, t)| (*s, *t)).collect();
        steps.sort_by_key(|(_, t)| *t);
        let steps: Vec<String> = steps
            .iter()
            .map(|(s, t)| format!("{s} +{}", human_seconds(secs(*t))))
            .collect();
        let longest = match self.longest_hold() {
            Some((s, h)) => format!("; held longest by {s} ({})", human_seconds(secs(h))),
            None => String::new(),
        };
        format!(
            "{} of {} (from {} to {}): {}{longest}",
            self.kind.as_str(),
            human_seconds(secs(self.seconds)),
            self.started,
            self.ended(),
            if steps.is_empty() {
                "no step recorded".to_owned()
            } else {
                steps.join(", ")
            },
        )
    }

    /// Reads the annotation; `None` for anything gpuready did not write
    /// (it is then ignored: the next finished wait writes it anew).
    pub fn parse(s: &str) -> Option<ReadyRecord> {
        let (mut kind, mut started, mut seconds) = (None, None, None);
        let mut steps = BTreeMap::new();
        for field in s.split_whitespace() {
            let (k, v) = field.split_once('=')?;
            match k {
                "kind" => kind = Some(EpisodeKind::parse(v)?),
                "started" => started = Some(v.parse::<Timestamp>().ok()?),
                "seconds" => seconds = Some(v.parse::<u64>().ok()?),
                // A step a later version records is skipped, not an error.
                step => {
                    if let Some(step) = Step::parse(step) {
                        steps.insert(step, v.parse::<u64>().ok()?);
                    }
                }
            }
        }
        Some(ReadyRecord {
            kind: kind?,
            started: started?,
            seconds: seconds?,
            steps,
        })
    }
}

/// The annotation's value: `kind=join started=… seconds=300 Node=0 …`.
impl fmt::Display for ReadyRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let started = Timestamp::from_second(self.started.as_second()).unwrap_or(self.started);
        write!(
            f,
            "kind={} started={started} seconds={}",
            self.kind.as_str(),
            self.seconds
        )?;
        for (s, t) in &self.steps {
            write!(f, " {s}={t}")?;
        }
        Ok(())
    }
}

fn secs(s: u64) -> i64 {
    i64::try_from(s).unwrap_or(i64::MAX)
}

/// What profile status keeps of one join: when it ended, how long it took,
/// and each step's hold — a few dozen bytes, not the whole record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinTime {
    pub ended: i64,
    pub seconds: u64,
    pub holds: Vec<(Step, u64)>,
}

impl ReadyRecord {
    /// The record as a join's figures (`None` for any other kind of wait).
    pub fn join_time(&self) -> Option<JoinTime> {
        (self.kind == EpisodeKind::Join).then(|| JoinTime {
            ended: self.ended().as_second(),
            seconds: self.seconds,
            holds: self.holds(),
        })
    }
}

/// A profile's joins of the last window, as its status shows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeToReady {
    pub joins: usize,
    pub p50_seconds: u64,
    pub p90_seconds: u64,
    pub max_seconds: u64,
    /// The step that held the window's joins longest, summed over them.
    pub slowest_step: Option<Step>,
}

/// The joins that ended within `window_seconds` before `now`: percentiles
/// by nearest rank (p90 of 10 joins is the 9th fastest, an observed value,
/// never an interpolation). `None` without any.
pub fn time_to_ready<'a>(
    joins: impl IntoIterator<Item = &'a JoinTime>,
    now: Timestamp,
    window_seconds: i64,
) -> Option<TimeToReady> {
    let since = now.as_second().saturating_sub(window_seconds);
    let recent: Vec<&JoinTime> = joins.into_iter().filter(|j| j.ended >= since).collect();
    let mut totals: Vec<u64> = recent.iter().map(|j| j.seconds).collect();
    totals.sort_unstable();
    let rank = |p: usize| totals[(totals.len() * p).div_ceil(100).max(1) - 1];
    let mut held: BTreeMap<Step, u64> = BTreeMap::new();
    for (s, h) in recent.iter().flat_map(|j| &j.holds) {
        *held.entry(*s).or_default() += h;
    }
    let slowest_step = held
        .iter()
        .fold(None, |best: Option<(Step, u64)>, (s, h)| match best {
            Some((_, b)) if b >= *h => best,
            _ => Some((*s, *h)),
        })
        .map(|(s, _)| s);
    let max_seconds = *totals.last()?;
    Some(TimeToReady {
        joins: totals.len(),
        p50_seconds: rank(50),
        p90_seconds: rank(90),
        max_seconds,
        slowest_step,
    })
}

#[cfg(test)]
mod tests;
