//! The bench's command line, apart from `main.rs` so that every phase can
//! read its settings without importing the binary's root.

use std::path::PathBuf;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "gpuready against N nodes on a real API server, next to a floor client")]
pub struct Args {
    /// Fleet sizes, one control plane each.
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    pub nodes: Vec<usize>,
    /// Client-side limit for gpuready and the floor alike (gpuready's --client-qps).
    #[arg(long, default_value_t = 0)]
    pub client_qps: u32,
    /// gpuready's --client-burst, for the floor too.
    #[arg(long, default_value_t = 0)]
    pub client_burst: u32,
    /// gpuready's --concurrency, and the floor's requests in flight.
    #[arg(long, default_value_t = 8)]
    pub concurrency: u16,
    /// Single-node changes (each one a break and a repair) timed at the end.
    #[arg(long, default_value_t = 20)]
    pub flips: usize,
    /// Rounds of the fleet-wide phases: each round runs the floor and
    /// gpuready (taint, then untaint), alternating which goes first; the table
    /// gives the median and every run (the API server on a small machine
    /// drifts from one burst to the next).
    /// 0 skips them (start-up, single-node changes and rest only: for a
    /// quick look, as with --perf).
    #[arg(long, default_value_t = 3)]
    pub repeats: u16,
    /// Seconds the converged controller is watched at rest.
    #[arg(long, default_value_t = 75)]
    pub rest_seconds: u64,
    /// Extra arguments for `gpuready run` (repeat; e.g. --controller-arg=--heartbeat=60s).
    #[arg(long = "controller-arg", allow_hyphen_values = true)]
    pub controller_args: Vec<String>,
    /// The gpuready binary (default: built with `cargo build --release`).
    #[arg(long)]
    pub gpuready: Option<PathBuf>,
    /// Requests in flight while creating the fleet (setup, not measured).
    #[arg(long, default_value_t = 64)]
    pub setup_concurrency: usize,
    /// Only build each fleet and measure the API server (creation time, its
    /// start-up with the fleet, memory, a LIST): how far the control plane
    /// itself holds, before gpuready's rounds are worth their time.
    #[arg(long)]
    pub setup_only: bool,
    /// The DRA rows: after the rest of the run, one ResourceSlice is
    /// published per node, then this many of them change (a device taint on,
    /// then off again), timed until gpuready's taints follow, against a floor
    /// that writes each slice and then its node's taint; then the API server is
    /// restarted and gpuready's reconciles over the re-lists counted. 0 (the
    /// default) skips them.
    #[arg(long, default_value_t = 0)]
    pub dra_updates: usize,
    /// The join-storm rows: after the rest window, this many healthy nodes
    /// join at once, each registered with the readiness taint, timed from
    /// creation to untaint, gpuready's storm then the floor's (a watch that
    /// untaints); one storm per size given. 0 skips them.
    #[arg(long, value_delimiter = ',', default_value = "200,2000")]
    pub joins: Vec<usize>,
    /// After everything else, one more profile change breaks every node and
    /// only its first taint is timed; the run ends there, gpuready still
    /// tainting. For the largest fleets, where a whole round of the
    /// fleet-wide phases costs most of an hour: with `--repeats 0` it is the
    /// only first-taint figure in the table.
    #[arg(long)]
    pub first_taint_probe: bool,
    /// The fleet is registered with gpuready's readiness taint, as kubelet's
    /// `--register-with-taints` puts it: gpuready's start-up then has a first
    /// verdict to send for every node (its untaint), timed on its own against
    /// the floor's one write a node.
    #[arg(long)]
    pub startup_tainted: bool,
    /// Also time the floor of a start-up: the writes gpuready must send to
    /// converge a healthy node (with --startup-tainted its taint off alone,
    /// as gpuready's first verdict goes; a label patch; a condition on the
    /// status subresource), then undo them (setup, not timed) before
    /// gpuready starts.
    #[arg(long)]
    pub floor_converge: bool,
    /// With --startup-tainted, also time the floor sending the taint off
    /// together with the verdict labels and the annotation that lists them,
    /// one merge patch a node (on the floor's own keys), then take the labels
    /// back (setup): what gpuready's first verdict carried until it went
    /// alone (2026-12-05), kept to show what the labels cost the API server.
    #[arg(long, requires = "startup_tainted")]
    pub floor_verdict_write: bool,
    /// Start-up pairs: gpuready's start-up and the floor's halves (its one
    /// write a node, and with --floor-converge its start-up writes), this many
    /// times, alternating which half goes first; between gpuready's halves its
    /// writes are taken back (and, with --startup-tainted, its taint put back),
    /// so each start meets the fleet as created. The ratios divide the two
    /// halves of each pair.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub startup_repeats: u16,
    /// The fault → gate rows: after the rest window, the bench publishes a
    /// probe report with a fatal XID for this many nodes (one at a time, then
    /// all at once, `--fault-rounds` times), as the probe on each would, timed
    /// until the watch sees gpuready's taint, against the bench's own taint
    /// on the same nodes; gpuready runs with `--probe-namespace`. 0 (the
    /// default) skips them.
    #[arg(long, default_value_t = 0)]
    pub faults: usize,
    /// Rounds of the fault → gate rows.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    pub fault_rounds: u16,
    /// Record gpuready with `perf record` during the single-node changes, into
    /// `<DIR>/perf-<nodes>.data` (read it with `perf report -i …`).
    #[arg(long)]
    pub perf: Option<PathBuf>,
}

impl Args {
    /// The join storms asked for (`--joins`, zeros dropped).
    pub fn storms(&self) -> Vec<usize> {
        self.joins.iter().copied().filter(|j| *j > 0).collect()
    }
}
