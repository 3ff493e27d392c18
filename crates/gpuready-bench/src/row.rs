//! Everything measured at one fleet size: what the phases fill in and the
//! table reads, in a module of its own so that neither imports the other.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::controller::Channels;
use crate::dra::DraRow;
use crate::server::{NodeBytes, ServerMemory};
use crate::{fault, join, startup};

/// Everything measured at one fleet size.
#[derive(Debug, Default)]
pub struct Row {
    pub nodes: usize,
    /// The empty control plane's start-up (etcd, then the API server ready).
    pub server_start_empty: Duration,
    /// Creating the fleet (setup concurrency, not a measured client).
    pub create: Duration,
    /// The API server killed and started again with the fleet in etcd, until
    /// `/readyz` and a first LIST of one node answered.
    pub server_restart_with_fleet: Duration,
    /// A paged LIST of every node (500 a page), as a watcher's first list.
    pub server_list_all: Duration,
    /// The control plane after the fleet was created (and the restart).
    pub mem_created: ServerMemory,
    /// The control plane at the end (after every burst), with its peaks.
    pub mem_end: ServerMemory,
    /// The floor's own time (its client alone, no watch on the fleet).
    pub floor_taint: Duration,
    pub floor_untaint: Duration,
    /// The floor timed as gpuready is: the observer running, until it sees
    /// every node (un)tainted. The ratios use these.
    pub floor_taint_seen: Vec<Duration>,
    pub floor_untaint_seen: Vec<Duration>,
    pub floor_writes: usize,
    pub floor_cpu: f64,
    /// The start-up pairs (`--startup-repeats`), gpuready's and the floor's
    /// halves by pair.
    pub startup: Vec<startup::GpureadyStart>,
    pub startup_floor: Vec<startup::FloorStart>,
    pub taint_all: Vec<Duration>,
    /// From the profile change until the observer saw the first taint.
    pub first_taint: Vec<Duration>,
    /// gpuready's writes other than node patches sent before the last taint
    /// was seen (the gate holds conditions and Events back during a burst).
    pub writes_before_last_taint: BTreeMap<String, u64>,
    /// gpuready's API requests by method, and its reconciles, until the last
    /// taint was seen (first run).
    pub requests_before_last_taint: BTreeMap<String, u64>,
    pub reconciles_before_last_taint: u64,
    /// gpuready's CPU from the profile change until the last taint was seen.
    pub cpu_until_last_taint: Vec<f64>,
    pub untaint_all: Vec<Duration>,
    pub writes_taint_phase: BTreeMap<String, u64>,
    pub writes_untaint_phase: BTreeMap<String, u64>,
    pub cpu_taint_phase: Vec<f64>,
    pub cpu_untaint_phase: Vec<f64>,
    pub rss_rest_kib: u64,
    pub rss_peak_kib: u64,
    pub cpu_per_change_ms: f64,
    pub reaction_p50: Duration,
    pub reaction_p99: Duration,
    pub rest_writes: u64,
    /// gpuready's writes at rest by kind (`gpuready_writes_total`).
    pub rest_writes_by_kind: BTreeMap<String, u64>,
    pub rest_window: Duration,
    /// gpuready's CPU over the rest window (the fleet converged, nothing changing).
    pub rest_cpu: f64,
    /// Samples in one scrape at rest: all, and the per-node families'.
    pub rest_series: (usize, usize),
    /// The channels' deepest and overflows: at rest (start-up, the rounds and
    /// single changes of that process), and after the last join storm.
    pub channels_rest: Channels,
    pub channels_storm: Channels,
    pub dra: Option<DraRow>,
    /// One per `--joins` size.
    pub joins: Vec<join::JoinRow>,
    /// `--faults`.
    pub faults: Option<fault::FaultRow>,
    /// One node's JSON as the API server serves it: as created, ready after
    /// gpuready's start-up, not ready after its first taint phase.
    pub node_bytes_created: NodeBytes,
    pub node_bytes_ready: NodeBytes,
    pub node_bytes_not_ready: NodeBytes,
    /// etcd's database file grown over gpuready's first taint and untaint
    /// phases (both bursts).
    pub etcd_growth_burst: u64,
}
