//! Prometheus metrics, in the text exposition format on /metrics.

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
pub struct ProfileWrite {
    pub profile: String,
    /// `taint` (the node is not gated as its verdict says) or `other`.
    pub write: String,
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
pub struct Code {
    pub code: String,
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
    /// 0 while the GpuNodeProfile CRD is missing or being deleted (gpuready holds).
    pub profile_crd_present: Gauge,
    /// Responses by status code for the codes gpuready retries (429, 503, 504).
    pub retryable_responses: Family<Code, Counter>,
    pub nfd_crds: Family<CrdState, Gauge>,
    /// DeviceTaintRules gpuready holds (device gating), all nodes.
    pub device_taint_rules: Gauge,
    /// Devices gated by DeviceTaintRules, per profile (from the verdicts).
    pub tainted_devices: Family<Profile, Gauge>,
    /// Nodes whose last write the API server refused, by profile and by what
    /// it refused (`taint`, `other`).
    pub write_refused_nodes: Family<ProfileWrite, Gauge>,
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
            profile_crd_present: Gauge::default(),
            retryable_responses: Family::default(),
            nfd_crds: Family::default(),
            device_taint_rules: Gauge::default(),
            tainted_devices: Family::default(),
            write_refused_nodes: Family::default(),
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
            "Writes by kind (taint, labels, conditions, profile_status, crd, event, devicetaintrule)",
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
            "profile_crd_present",
            "1 while the GpuNodeProfile CRD exists and is established; 0 holds every node as it is",
            m.profile_crd_present.clone(),
        );
        registry.register(
            "api_retryable_responses",
            "Responses the client retries (429, 503, 504) by code; every retry is also counted in api_requests",
            m.retryable_responses.clone(),
        );
        registry.register(
            "nfd_crd_state",
            "NFD CRD state (missing, older, current, newer) as 1/0",
            m.nfd_crds.clone(),
        );
        registry.register(
            "device_taint_rules",
            "DeviceTaintRules gpuready holds for bad devices (device gating), all nodes",
            m.device_taint_rules.clone(),
        );
        registry.register(
            "tainted_devices",
            "Devices a profile's nodes have gated by gpuready's DeviceTaintRules",
            m.tainted_devices.clone(),
        );
        registry.register(
            "write_refused_nodes",
            "Nodes whose last write the API server refused (an admission policy, RBAC), by profile and write: taint (the node is not gated as its verdict says) or other (a label or annotation)",
            m.write_refused_nodes.clone(),
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

    /// Counts one request in `api_requests_total`: a watch as `WATCH`, anything
    /// else by its HTTP method (a LIST is a `GET`). Writes are every method but
    /// `GET` and `WATCH`; the tests and the benchmark sum them from /metrics, so
    /// what they measure is what an operator's dashboard shows.
    pub fn count_request(&self, method: &str, watch: bool) {
        let label = if watch { "WATCH" } else { method };
        self.requests
            .get_or_create(&Method {
                method: label.to_owned(),
            })
            .inc();
    }
}
