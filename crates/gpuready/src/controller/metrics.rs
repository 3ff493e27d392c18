//! Prometheus metrics, in the text exposition format on /metrics.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::clock_metrics::ClockMetrics;
use super::mailbox::ChannelGauges;
use gpuready_core::clocks::GateSource;
use gpuready_core::timeline::ReadyRecord;

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
pub struct ProfileNoExecute {
    pub profile: String,
    /// `nodes` or `devices`.
    pub kind: String,
    /// `escalated` (under `NoExecute` now), `held` (due, held back by the
    /// safety brake or the budget) or `limit` (the most that may be).
    pub state: String,
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
pub struct Channel {
    pub channel: String,
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

/// One not-ready node of a profile: `state` is the `gpuready_nodes` state it is
/// counted under, `mode` the profile's (`Enforce` or `Observe`), `layer` and
/// `reason` the summary of its verdict.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct NodeNotReady {
    pub profile: String,
    pub node: String,
    pub mode: String,
    pub state: String,
    pub layer: String,
    pub reason: String,
}

/// One layer that is not Ready on one node of a profile.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct NodeLayer {
    pub profile: String,
    pub node: String,
    pub layer: String,
    pub reason: String,
}

/// One node of a profile.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ProfileNode {
    pub profile: String,
    pub node: String,
}

/// The per-node series of one profile, as last exported.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct NodeSeries {
    pub not_ready: BTreeSet<NodeNotReady>,
    pub layers: BTreeSet<NodeLayer>,
    /// Node → devices gated by gpuready's DeviceTaintRules.
    pub tainted_devices: BTreeMap<ProfileNode, i64>,
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
    /// Anyone's `NoExecute` DeviceTaintRules whose selector names no pool:
    /// they evict across the cluster (kubernetes #141422).
    pub cluster_wide_device_taint_rules: Gauge,
    /// Pods that hold a device gpuready taints `NoExecute` as a DRA-backed
    /// extended resource, per profile: Kubernetes does not evict them
    /// (kubernetes #141290).
    pub not_evicted_pods: Family<Profile, Gauge>,
    /// The `NoExecute` budget of profiles with `escalation`: nodes and
    /// devices escalated, held, and the limit.
    pub no_execute: Family<ProfileNoExecute, Gauge>,
    /// Devices gated by DeviceTaintRules, per profile (from the verdicts).
    pub tainted_devices: Family<Profile, Gauge>,
    /// 1 for each not-ready node (only those: a healthy fleet exports none).
    pub node_not_ready: Family<NodeNotReady, Gauge>,
    /// 1 for each layer that is not Ready on a node.
    pub node_layer_not_ready: Family<NodeLayer, Gauge>,
    /// Devices of a node gated by gpuready's DeviceTaintRules (nodes with any).
    pub node_tainted_devices: Family<ProfileNode, Gauge>,
    /// What the three per-node families hold, by profile: a change removes the
    /// series that went away and sets the rest, so a scrape never sees a node
    /// vanish and come back (which would restart an alert's `for`).
    node_series: Mutex<HashMap<String, NodeSeries>>,
    /// Nodes whose last write the API server refused, by profile and by what
    /// it refused (`taint`, `other`).
    pub write_refused_nodes: Family<ProfileWrite, Gauge>,
    /// Per-node Events not posted because a burst spent its profile's budget
    /// (`gpuready_core::event_budget`); a summary Event counts them.
    pub events_held: Counter,
    /// Time to ready and time to gate (`clock_metrics`).
    pub clocks: ClockMetrics,
    /// The controller's mailboxes (`mailbox.rs`): depth now, the deepest
    /// since start, messages coalesced over capacity.
    channel_depth: Family<Channel, Gauge>,
    channel_depth_peak: Family<Channel, Gauge>,
    channel_overflows: Family<Channel, Counter>,
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
            cluster_wide_device_taint_rules: Gauge::default(),
            not_evicted_pods: Family::default(),
            no_execute: Family::default(),
            tainted_devices: Family::default(),
            node_not_ready: Family::default(),
            node_layer_not_ready: Family::default(),
            node_tainted_devices: Family::default(),
            node_series: Mutex::default(),
            write_refused_nodes: Family::default(),
            events_held: Counter::default(),
            clocks: ClockMetrics::register(&mut registry),
            channel_depth: Family::default(),
            channel_depth_peak: Family::default(),
            channel_overflows: Family::default(),
            registry: Registry::default(),
        };
        m.register_node_counts(&mut registry);
        m.register_work(&mut registry);
        m.register_devices(&mut registry);
        m.register_per_node(&mut registry);
        m.register_channels(&mut registry);
        m.zero_counters();
        registry.register(
            "write_refused_nodes",
            "Nodes whose last write the API server refused (an admission policy, RBAC), by profile and write: taint (the node is not gated as its verdict says) or other (a label or annotation)",
            m.write_refused_nodes.clone(),
        );
        Metrics { registry, ..m }
    }
}

/// Registration, by family group, in the order /metrics lists them.
impl Metrics {
    /// The per-profile node counts: by state, by Ready layer, and the brake.
    fn register_node_counts(&self, registry: &mut Registry) {
        registry.register(
            "nodes",
            "Matched nodes by profile and state (ready; not_ready: failures only; maintenance: a driver upgrade, MIG change or paused operands; waiting_for_gate: GPU stack ready, another readiness gate holds the node; conflict; past_deadline: not ready past the profile's notReadyDeadline)",
            self.nodes.clone(),
        );
        registry.register(
            "layer_ready_nodes",
            "Governed nodes whose layer is Ready, by profile and layer",
            self.layer_ready.clone(),
        );
        registry.register(
            "safety_brake_engaged",
            "1 while the safety brake holds new taints for a profile",
            self.brake.clone(),
        );
    }

    /// The controller's own work: reconciles, writes, held Events, API requests, and what it holds on (the lease, the CRDs).
    fn register_work(&self, registry: &mut Registry) {
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one node reconcile",
            self.reconcile_duration.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciles by error kind",
            self.reconcile_errors.clone(),
        );
        registry.register(
            "writes",
            "Writes by kind (taint, labels, conditions, profile_status, crd, event, devicetaintrule, devicetaintrule_status)",
            self.writes.clone(),
        );
        registry.register(
            "events_held",
            "Per-node Events not posted because a burst spent its profile's Event budget; a summary Event on the profile counts them",
            self.events_held.clone(),
        );
        registry.register(
            "api_requests",
            "Requests sent to the API server by method",
            self.requests.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease",
            self.leader.clone(),
        );
        registry.register(
            "profile_crd_present",
            "1 while the GpuNodeProfile CRD exists and is established; 0 holds every node as it is",
            self.profile_crd_present.clone(),
        );
        registry.register(
            "api_retryable_responses",
            "Responses the client retries (429, 503, 504) by code; every retry is also counted in api_requests",
            self.retryable_responses.clone(),
        );
        registry.register(
            "nfd_crd_state",
            "NFD CRD state (missing, older, current, newer) as 1/0",
            self.nfd_crds.clone(),
        );
    }

    /// Device gating and NoExecute escalation.
    fn register_devices(&self, registry: &mut Registry) {
        registry.register(
            "device_taint_rules",
            "DeviceTaintRules gpuready holds for bad devices (device gating), all nodes",
            self.device_taint_rules.clone(),
        );
        registry.register(
            "cluster_wide_device_taint_rules",
            "DeviceTaintRules in the cluster, anyone's, whose NoExecute taint has a selector naming no pool (empty, only a driver, or a device name in every pool): each evicts every pod using the devices it matches, cluster-wide (kubernetes #141422)",
            self.cluster_wide_device_taint_rules.clone(),
        );
        registry.register(
            "not_evicted_pods",
            "Pods that hold a device gpuready taints NoExecute as a DRA-backed extended resource, which Kubernetes does not evict (kubernetes #141290), by profile",
            self.not_evicted_pods.clone(),
        );
        registry.register(
            "no_execute",
            "A profile's NoExecute budget (escalation.maxNoExecutePercent), by kind (nodes, devices) and state: escalated (under NoExecute now), held (due, held back by the safety brake or the budget), limit (the most that may be escalated)",
            self.no_execute.clone(),
        );
        registry.register(
            "tainted_devices",
            "Devices a profile's nodes have gated by gpuready's DeviceTaintRules",
            self.tainted_devices.clone(),
        );
    }

    /// The per-node families (bounded per profile; `set_node_series` keeps them).
    fn register_per_node(&self, registry: &mut Registry) {
        registry.register(
            "node_not_ready",
            "1 for each matched node that is gated (at most 200 per profile and state, the first by name; gpuready_nodes counts them all), by profile, node, the profile's mode, state (not_ready, conflict, maintenance, waiting_for_gate) and the verdict's layer and reason",
            self.node_not_ready.clone(),
        );
        registry.register(
            "node_layer_not_ready",
            "1 for each layer that is not Ready on a matched node (at most 200 nodes per profile and layer, the first by name), by profile, node, layer and reason (Health: the probe's report)",
            self.node_layer_not_ready.clone(),
        );
        registry.register(
            "node_tainted_devices",
            "Devices of a node gated by gpuready's DeviceTaintRules, for nodes with any (at most 200 per profile, the first by name)",
            self.node_tainted_devices.clone(),
        );
    }

    /// The mailboxes between the controller's tasks (`mailbox.rs`).
    fn register_channels(&self, registry: &mut Registry) {
        registry.register(
            "channel_depth",
            "Messages waiting in one of the controller's channels (status: verdicts for the status task; requeue: nodes to judge again), queued and coalesced",
            self.channel_depth.clone(),
        );
        registry.register(
            "channel_depth_peak",
            "The most messages that ever waited in the channel since the process started",
            self.channel_depth_peak.clone(),
        );
        registry.register(
            "channel_overflows",
            "Messages that found the channel full and waited coalesced, the latest per node or profile kept (none lost)",
            self.channel_overflows.clone(),
        );
    }

    /// A channel's gauges, for `mailbox::mailbox`.
    pub fn channel(&self, name: &str) -> ChannelGauges {
        let label = Channel {
            channel: name.to_owned(),
        };
        ChannelGauges {
            depth: self.channel_depth.get_or_create(&label).clone(),
            peak: self.channel_depth_peak.get_or_create(&label).clone(),
            overflows: self.channel_overflows.get_or_create(&label).clone(),
        }
    }

    /// Counters the alerts take rates of start at 0 (see `Error::KINDS`).
    fn zero_counters(&self) {
        for kind in crate::controller::error::Error::KINDS {
            self.reconcile_errors
                .get_or_create(&Kind {
                    kind: kind.to_owned(),
                })
                .inc_by(0);
        }
        for code in ["429", "503", "504"] {
            self.retryable_responses
                .get_or_create(&Code {
                    code: code.to_owned(),
                })
                .inc_by(0);
        }
    }
}

impl Metrics {
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Replaces the per-node series of `profile` with `new`.
    pub fn set_node_series(&self, profile: &str, new: NodeSeries) {
        let mut all = self
            .node_series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = all.remove(profile).unwrap_or_default();
        self.swap_node_series(&old, &new);
        if new != NodeSeries::default() {
            all.insert(profile.to_owned(), new);
        }
    }

    /// Drops the per-node series of every profile `keep` rejects.
    pub fn retain_node_series(&self, keep: impl Fn(&str) -> bool) {
        let mut all = self
            .node_series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let gone: Vec<String> = all.keys().filter(|p| !keep(p)).cloned().collect();
        for p in gone {
            if let Some(old) = all.remove(&p) {
                self.swap_node_series(&old, &NodeSeries::default());
            }
        }
    }

    fn swap_node_series(&self, old: &NodeSeries, new: &NodeSeries) {
        for s in old.not_ready.difference(&new.not_ready) {
            self.node_not_ready.remove(s);
        }
        for s in &new.not_ready {
            self.node_not_ready.get_or_create(s).set(1);
        }
        for s in old.layers.difference(&new.layers) {
            self.node_layer_not_ready.remove(s);
        }
        for s in &new.layers {
            self.node_layer_not_ready.get_or_create(s).set(1);
        }
        for s in old.tainted_devices.keys() {
            if !new.tainted_devices.contains_key(s) {
                self.node_tainted_devices.remove(s);
            }
        }
        for (s, n) in &new.tainted_devices {
            self.node_tainted_devices.get_or_create(s).set(*n);
        }
    }

    /// A node's finished wait (`gpuready_time_to_ready_seconds`, and for a
    /// join `gpuready_layer_ready_seconds`).
    pub fn observe_wait(&self, profile: &str, r: &ReadyRecord) {
        self.clocks.observe_wait(profile, r);
    }

    /// A gate placed `seconds` after its fault's evidence.
    pub fn observe_gate(&self, profile: &str, source: GateSource, seconds: f64) {
        self.clocks.observe_gate(profile, source, seconds);
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

#[cfg(test)]
mod tests;
