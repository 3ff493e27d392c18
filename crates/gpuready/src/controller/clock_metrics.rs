//! Both clocks of a gate as histograms without node names: time to ready
//! (per profile and kind of wait; per step for joins) and time to gate (per
//! profile and source). Every series of a profile is created when its status
//! is first written and goes with the profile, so the series count is a
//! fixed number per profile (345), whatever the fleet size.

use std::collections::BTreeSet;
use std::sync::Mutex;

use gpuready_core::clocks::GateSource;
use gpuready_core::timeline::{EpisodeKind, ReadyRecord, Step};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Seconds a wait may take, from a warm node's seconds to a driver compile's
/// hour: 18 buckets.
pub const WAIT_BUCKETS: [f64; 18] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 450.0, 600.0, 900.0, 1200.0,
    1800.0, 3600.0, 7200.0,
];

/// Seconds from a fault's evidence to the gate: the target is under one.
pub const GATE_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileKind {
    pub profile: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileStep {
    pub profile: String,
    pub layer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileSource {
    pub profile: String,
    pub source: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn wait_histogram() -> Histogram {
    Histogram::new(WAIT_BUCKETS)
}

fn gate_histogram() -> Histogram {
    Histogram::new(GATE_BUCKETS)
}

/// The three histogram families and the profiles they hold series for.
pub struct ClockMetrics {
    pub time_to_ready: Histograms<ProfileKind>,
    pub layer_ready: Histograms<ProfileStep>,
    pub time_to_gate: Histograms<ProfileSource>,
    profiles: Mutex<BTreeSet<String>>,
}

impl ClockMetrics {
    pub fn register(registry: &mut Registry) -> ClockMetrics {
        let m = ClockMetrics {
            time_to_ready: Family::new_with_constructor(wait_histogram),
            layer_ready: Family::new_with_constructor(wait_histogram),
            time_to_gate: Family::new_with_constructor(gate_histogram),
            profiles: Mutex::default(),
        };
        registry.register(
            "time_to_ready_seconds",
            "Seconds a node waited to be Ready (GpuReady=True), by profile and kind: join (from the Node's registration), maintenance (from the end of a driver upgrade or MIG change), repair (from the repair annotation's time), fault (from GpuReady turning False)",
            m.time_to_ready.clone(),
        );
        registry.register(
            "layer_ready_seconds",
            "Seconds from a joining node's registration until each layer first turned Ready (Gates: until other readiness gates let go), by profile and layer",
            m.layer_ready.clone(),
        );
        registry.register(
            "time_to_gate_seconds",
            "Seconds from a fault's evidence (the probe report's time, another judge's condition's transition) to gpuready's taint or DeviceTaintRule written, by profile and source",
            m.time_to_gate.clone(),
        );
        m
    }

    /// Creates every series of the profile (at 0), once.
    pub fn start(&self, profile: &str) {
        let mut started = self.lock();
        if !started.insert(profile.to_owned()) {
            return;
        }
        for_each_series(
            profile,
            |k| {
                let _ = self.time_to_ready.get_or_create(&k);
            },
            |s| {
                let _ = self.layer_ready.get_or_create(&s);
            },
            |g| {
                let _ = self.time_to_gate.get_or_create(&g);
            },
        );
    }

    /// Drops the series of every profile `keep` rejects.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut started = self.lock();
        let gone: Vec<String> = started.iter().filter(|p| !keep(p)).cloned().collect();
        for p in gone {
            started.remove(&p);
            for_each_series(
                &p,
                |k| {
                    self.time_to_ready.remove(&k);
                },
                |s| {
                    self.layer_ready.remove(&s);
                },
                |g| {
                    self.time_to_gate.remove(&g);
                },
            );
        }
    }

    /// A finished wait: its total, and for a join each step.
    pub fn observe_wait(&self, profile: &str, r: &ReadyRecord) {
        self.time_to_ready
            .get_or_create(&ProfileKind {
                profile: profile.to_owned(),
                kind: r.kind.as_str().to_owned(),
            })
            .observe(r.seconds as f64);
        if r.kind != EpisodeKind::Join {
            return;
        }
        for (step, seconds) in &r.steps {
            self.layer_ready
                .get_or_create(&ProfileStep {
                    profile: profile.to_owned(),
                    layer: step.as_str().to_owned(),
                })
                .observe(*seconds as f64);
        }
    }

    /// A gate placed `seconds` after the fault's evidence.
    pub fn observe_gate(&self, profile: &str, source: GateSource, seconds: f64) {
        self.time_to_gate
            .get_or_create(&ProfileSource {
                profile: profile.to_owned(),
                source: source.as_str().to_owned(),
            })
            .observe(seconds);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.profiles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Every series one profile has, by family.
fn for_each_series(
    profile: &str,
    mut kind: impl FnMut(ProfileKind),
    mut step: impl FnMut(ProfileStep),
    mut source: impl FnMut(ProfileSource),
) {
    for k in EpisodeKind::ALL {
        kind(ProfileKind {
            profile: profile.to_owned(),
            kind: k.as_str().to_owned(),
        });
    }
    for s in Step::every() {
        step(ProfileStep {
            profile: profile.to_owned(),
            layer: s.as_str().to_owned(),
        });
    }
    for g in GateSource::ALL {
        source(ProfileSource {
            profile: profile.to_owned(),
            source: g.as_str().to_owned(),
        });
    }
}

#[cfg(test)]
mod tests;
