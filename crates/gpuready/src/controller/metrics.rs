//! Prometheus metrics, in the text exposition format on /metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileState {
    pub profile: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileLayer {
    pub profile: String,
    pub layer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Profile {
    pub profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Kind {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Method {
    pub method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CrdState {
    pub crd: String,
    pub state: String,
}

/// Every metric gpuready exports.
pub struct Metrics {
    registry: Registry,
    pub nodes: Family<ProfileState, Gauge>,
    pub layer_ready: Family<ProfileLayer, Gauge>,
    pub brake: Family<Profile, Gauge>,
    pub reconcile_duration: Histogram,
    pub reconcile_errors: Family<Kind, Counter>,
    pub writes: Family<Kind, Counter>,
    pub requests: Family<Method, Counter>,
    pub leader: Gauge,
    pub nfd_crds: Family<CrdState, Gauge>,
    /// Write requests (anything but GET/LIST/WATCH), for tests and closing notes.
    pub write_requests: Arc<AtomicU64>,
    pub read_requests: Arc<AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("gpuready");
        let m = Metrics {
            nodes: Family::default(),
            layer_ready: Family::default(),
            brake: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            reconcile_errors: Family::default(),
            writes: Family::default(),
            requests: Family::default(),
            leader: Gauge::default(),
            nfd_crds: Family::default(),
            write_requests: Arc::default(),
            read_requests: Arc::default(),
            registry: Registry::default(),
        };
        registry.register(
            "nodes",
            "Matched nodes by profile and state (ready, not_ready, conflict, past_deadline: not ready past the profile's notReadyDeadline)",
            m.nodes.clone(),
        );
        registry.register(
            "layer_ready_nodes",
            "Governed nodes whose layer is Ready, by profile and layer",
            m.layer_ready.clone(),
        );
        registry.register(
            "safety_brake_engaged",
            "1 while the safety brake holds new taints for a profile",
            m.brake.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one node reconcile",
            m.reconcile_duration.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciles by error kind",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "writes",
            "Writes by kind (taint, labels, conditions, profile_status, crd, event)",
            m.writes.clone(),
        );
        registry.register(
            "api_requests",
            "Requests sent to the API server by method",
            m.requests.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease",
            m.leader.clone(),
        );
        registry.register(
            "nfd_crd_state",
            "NFD CRD state (missing, older, current, newer) as 1/0",
            m.nfd_crds.clone(),
        );
        Metrics { registry, ..m }
    }
}

impl Metrics {
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    pub fn count_write(&self, kind: &str) {
        self.writes
            .get_or_create(&Kind {
                kind: kind.to_owned(),
            })
            .inc();
    }

    pub fn count_request(&self, method: &str, watch: bool) {
        let label = if watch { "WATCH" } else { method };
        self.requests
            .get_or_create(&Method {
                method: label.to_owned(),
            })
            .inc();
        let counter = match method {
            "GET" => &self.read_requests,
            _ => &self.write_requests,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn writes_sent(&self) -> u64 {
        self.write_requests.load(Ordering::Relaxed)
    }

    pub fn reads_sent(&self) -> u64 {
        self.read_requests.load(Ordering::Relaxed)
    }
}
