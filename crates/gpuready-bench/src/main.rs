//! `gpuready-bench`: gpuready at fleet scale against a real kube-apiserver, side
//! by side with a floor client, in one run per fleet size. Prints a markdown
//! table (docs/performance.md explains every row).
//!
//! ```text
//! cargo run --release -p gpuready-bench -- --nodes 1000,5000
//! ```

mod error;
mod fault;
mod fleet;
mod floor;
mod join;
mod observe;
mod process;
mod startup;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use gpuready::controller::Metrics;
use gpuready::controller::requests;
use gpuready_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::sync::watch;

use error::Error;
use observe::Counts;

#[derive(Debug, Parser)]
#[command(about = "gpuready against N nodes on a real API server, next to a floor client")]
struct Args {
    /// Fleet sizes, one control plane each.
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    nodes: Vec<usize>,
    /// Client-side limit for gpuready and the floor alike (gpuready's --client-qps).
    #[arg(long, default_value_t = 0)]
    client_qps: u32,
    /// gpuready's --client-burst, for the floor too.
    #[arg(long, default_value_t = 0)]
    client_burst: u32,
    /// gpuready's --concurrency, and the floor's requests in flight.
    #[arg(long, default_value_t = 8)]
    concurrency: u16,
    /// Single-node changes (each one a break and a repair) timed at the end.
    #[arg(long, default_value_t = 20)]
    flips: usize,
    /// Rounds of the fleet-wide phases: each round runs the floor and
    /// gpuready (taint, then untaint), alternating which goes first; the table
    /// gives the median and every run (the API server on a small machine
    /// drifts from one burst to the next).
    /// 0 skips them (start-up, single-node changes and rest only: for a
    /// quick look, as with --perf).
    #[arg(long, default_value_t = 3)]
    repeats: u16,
    /// Seconds the converged controller is watched at rest.
    #[arg(long, default_value_t = 75)]
    rest_seconds: u64,
    /// Extra arguments for `gpuready run` (repeat; e.g. --controller-arg=--heartbeat=60s).
    #[arg(long = "controller-arg", allow_hyphen_values = true)]
    controller_args: Vec<String>,
    /// The gpuready binary (default: built with `cargo build --release`).
    #[arg(long)]
    gpuready: Option<PathBuf>,
    /// Requests in flight while creating the fleet (setup, not measured).
    #[arg(long, default_value_t = 64)]
    setup_concurrency: usize,
    /// Only build each fleet and measure the API server (creation time, its
    /// start-up with the fleet, memory, a LIST): how far the control plane
    /// itself holds, before gpuready's rounds are worth their time.
    #[arg(long)]
    setup_only: bool,
    /// The DRA rows: after the rest of the run, one ResourceSlice is
    /// published per node, then this many of them change (a device taint on,
    /// then off again), timed until gpuready's taints follow, against a floor
    /// that writes each slice and then its node's taint; then the API server is
    /// restarted and gpuready's reconciles over the re-lists counted. 0 (the
    /// default) skips them.
    #[arg(long, default_value_t = 0)]
    dra_updates: usize,
    /// The join-storm rows: after the rest window, this many healthy nodes
    /// join at once, each registered with the readiness taint, timed from
    /// creation to untaint, gpuready's storm then the floor's (a watch that
    /// untaints); one storm per size given. 0 skips them.
    #[arg(long, value_delimiter = ',', default_value = "200,2000")]
    joins: Vec<usize>,
    /// After everything else, one more profile change breaks every node and
    /// only its first taint is timed; the run ends there, gpuready still
    /// tainting. For the largest fleets, where a whole round of the
    /// fleet-wide phases costs most of an hour: with `--repeats 0` it is the
    /// only first-taint figure in the table.
    #[arg(long)]
    first_taint_probe: bool,
    /// The fleet is registered with gpuready's readiness taint, as kubelet's
    /// `--register-with-taints` puts it: gpuready's start-up then has a first
    /// verdict to send for every node (its untaint), timed on its own against
    /// the floor's one write a node.
    #[arg(long)]
    startup_tainted: bool,
    /// Also time the floor of a start-up: the writes gpuready must send to
    /// converge a healthy node (with --startup-tainted its taint off alone,
    /// as gpuready's first verdict goes; a label patch; a condition on the
    /// status subresource), then undo them (setup, not timed) before
    /// gpuready starts.
    #[arg(long)]
    floor_converge: bool,
    /// With --startup-tainted, also time the floor sending the taint off
    /// together with the verdict labels and the annotation that lists them,
    /// one merge patch a node (on the floor's own keys), then take the labels
    /// back (setup): what gpuready's first verdict carried until it went
    /// alone (2026-12-05), kept to show what the labels cost the API server.
    #[arg(long, requires = "startup_tainted")]
    floor_verdict_write: bool,
    /// Start-up pairs: gpuready's start-up and the floor's halves (its one
    /// write a node, and with --floor-converge its start-up writes), this many
    /// times, alternating which half goes first; between gpuready's halves its
    /// writes are taken back (and, with --startup-tainted, its taint put back),
    /// so each start meets the fleet as created. The ratios divide the two
    /// halves of each pair.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    startup_repeats: u16,
    /// The fault → gate rows: after the rest window, the bench publishes a
    /// probe report with a fatal XID for this many nodes (one at a time, then
    /// all at once, `--fault-rounds` times), as the probe on each would, timed
    /// until the watch sees gpuready's taint, against the bench's own taint
    /// on the same nodes; gpuready runs with `--probe-namespace`. 0 (the
    /// default) skips them.
    #[arg(long, default_value_t = 0)]
    faults: usize,
    /// Rounds of the fault → gate rows.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    fault_rounds: u16,
    /// Record gpuready with `perf record` during the single-node changes, into
    /// `<DIR>/perf-<nodes>.data` (read it with `perf report -i …`).
    #[arg(long)]
    perf: Option<PathBuf>,
}

impl Args {
    /// The join storms asked for (`--joins`, zeros dropped).
    fn storms(&self) -> Vec<usize> {
        self.joins.iter().copied().filter(|j| *j > 0).collect()
    }
}

/// The control plane's flags for the benchmark, the same for the floor and
/// gpuready at every size. The API server's in-flight limits are raised from
/// 400 + 200 (a test cluster's defaults; the benchmark's admin user is exempt
/// from priority and fairness anyway), etcd's backend quota from 2 GiB (100,000
/// nodes with the history of a fleet-wide burst come near it) and the API
/// server compacts etcd every minute instead of every five, so history of
/// earlier bursts does not pile up in etcd's memory.
fn tuning() -> gpuready_testenv::Tuning {
    gpuready_testenv::Tuning {
        etcd: vec![format!("--quota-backend-bytes={}", 8u64 << 30)],
        apiserver: vec![
            "--max-requests-inflight=2000".into(),
            "--max-mutating-requests-inflight=1000".into(),
            "--etcd-compaction-interval=1m".into(),
        ],
        // Started again over 100,000 nodes on two busy cores, kube-apiserver
        // took more than the harness's 120 s to fill its watch cache.
        ready_timeout: Some(Duration::from_secs(1800)),
    }
}

/// Memory of the control plane's two processes, in KiB: (current, peak).
#[derive(Clone, Copy, Debug, Default)]
struct ServerMemory {
    apiserver: (u64, u64),
    etcd: (u64, u64),
}

fn server_memory(env: &TestEnv) -> ServerMemory {
    ServerMemory {
        apiserver: env
            .apiserver_pid()
            .map(process::rss_kib)
            .unwrap_or_default(),
        etcd: process::rss_kib(env.etcd_pid()),
    }
}

/// Everything measured at one fleet size.
#[derive(Debug, Default)]
struct Row {
    nodes: usize,
    /// The empty control plane's start-up (etcd, then the API server ready).
    server_start_empty: Duration,
    /// Creating the fleet (setup concurrency, not a measured client).
    create: Duration,
    /// The API server killed and started again with the fleet in etcd, until
    /// `/readyz` and a first LIST of one node answered.
    server_restart_with_fleet: Duration,
    /// A paged LIST of every node (500 a page), as a watcher's first list.
    server_list_all: Duration,
    /// The control plane after the fleet was created (and the restart).
    mem_created: ServerMemory,
    /// The control plane at the end (after every burst), with its peaks.
    mem_end: ServerMemory,
    /// The floor's own time (its client alone, no watch on the fleet).
    floor_taint: Duration,
    floor_untaint: Duration,
    /// The floor timed as gpuready is: the observer running, until it sees
    /// every node (un)tainted. The ratios use these.
    floor_taint_seen: Vec<Duration>,
    floor_untaint_seen: Vec<Duration>,
    floor_writes: usize,
    floor_cpu: f64,
    /// The start-up pairs (`--startup-repeats`), gpuready's and the floor's
    /// halves by pair.
    startup: Vec<startup::GpureadyStart>,
    startup_floor: Vec<startup::FloorStart>,
    taint_all: Vec<Duration>,
    /// From the profile change until the observer saw the first taint.
    first_taint: Vec<Duration>,
    /// gpuready's writes other than node patches sent before the last taint
    /// was seen (the gate holds conditions and Events back during a burst).
    writes_before_last_taint: BTreeMap<String, u64>,
    /// gpuready's API requests by method, and its reconciles, until the last
    /// taint was seen (first run).
    requests_before_last_taint: BTreeMap<String, u64>,
    reconciles_before_last_taint: u64,
    /// gpuready's CPU from the profile change until the last taint was seen.
    cpu_until_last_taint: Vec<f64>,
    untaint_all: Vec<Duration>,
    writes_taint_phase: BTreeMap<String, u64>,
    writes_untaint_phase: BTreeMap<String, u64>,
    cpu_taint_phase: Vec<f64>,
    cpu_untaint_phase: Vec<f64>,
    rss_rest_kib: u64,
    rss_peak_kib: u64,
    cpu_per_change_ms: f64,
    reaction_p50: Duration,
    reaction_p99: Duration,
    rest_writes: u64,
    /// gpuready's writes at rest by kind (`gpuready_writes_total`).
    rest_writes_by_kind: BTreeMap<String, u64>,
    rest_window: Duration,
    /// gpuready's CPU over the rest window (the fleet converged, nothing changing).
    rest_cpu: f64,
    /// Samples in one scrape at rest: all, and the per-node families'.
    rest_series: (usize, usize),
    dra: Option<DraRow>,
    /// One per `--joins` size.
    joins: Vec<join::JoinRow>,
    /// `--faults`.
    faults: Option<fault::FaultRow>,
    /// One node's JSON as the API server serves it: as created, ready after
    /// gpuready's start-up, not ready after its first taint phase.
    node_bytes_created: NodeBytes,
    node_bytes_ready: NodeBytes,
    node_bytes_not_ready: NodeBytes,
    /// etcd's database file grown over gpuready's first taint and untaint
    /// phases (both bursts).
    etcd_growth_burst: u64,
}

/// The size of etcd's database file (bbolt grows it as it needs pages and
/// never shrinks it without a defragmentation).
fn etcd_db_bytes(env: &TestEnv) -> u64 {
    std::fs::metadata(env.dir().join("etcd/member/snap/db")).map_or(0, |m| m.len())
}

/// The size of one Node object's JSON, and of its managedFields entries by
/// gpuready's field managers within it.
#[derive(Clone, Copy, Debug, Default)]
struct NodeBytes {
    total: usize,
    gpuready_managed_fields: usize,
}

async fn node_bytes(client: &Client, name: &str) -> Result<NodeBytes, Error> {
    let node = Api::<Node>::all(client.clone()).get(name).await?;
    let managed = node
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.manager
                .as_deref()
                .is_some_and(|m| m.starts_with("gpuready"))
        })
        .map(|m| serde_json::to_vec(m).map(|v| v.len()).unwrap_or(0))
        .sum();
    Ok(NodeBytes {
        total: serde_json::to_vec(&node)?.len(),
        gpuready_managed_fields: managed,
    })
}

/// The DRA rows of one fleet size (`--dra-updates`).
#[derive(Debug, Default)]
struct DraRow {
    /// Slices changed (at most one a node).
    updates: usize,
    /// One slice a node published (setup concurrency).
    publish: Duration,
    /// From the first slice published until gpuready went quiet, every node
    /// judged from its slice (and still ready).
    settle: Duration,
    taint: Duration,
    untaint: Duration,
    floor_taint: Duration,
    floor_untaint: Duration,
    /// The bench's slice writes alone, within gpuready's taint phase.
    slices_sent: Duration,
    /// gpuready's reconciles from the first update until every changed node
    /// had GpuReady=False.
    reconciles_taint: u64,
    /// gpuready's CPU over both phases, per slice update.
    cpu_per_update_ms: f64,
    /// Over the 20 s after the API server was restarted (nothing changed).
    relist_reconciles: u64,
    relist_cpu: f64,
}

/// How long any one fleet-wide step may take before the bench gives up.
const LONG_WAIT: Duration = Duration::from_secs(3600);

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn self_cpu() -> f64 {
    process::cpu_seconds(std::process::id())
}

/// CPU seconds of kube-apiserver and etcd together: what a phase cost the
/// control plane, whose two cores the client under test shares.
fn server_cpu(env: &TestEnv) -> f64 {
    env.apiserver_pid().map_or(0.0, process::cpu_seconds) + process::cpu_seconds(env.etcd_pid())
}

/// Waits until kube-apiserver and etcd are idle — under a tenth of a core
/// over two seconds — for at most a minute, and says how long it waited. A
/// timed half that starts while the control plane still works off the last
/// burst (etcd's compaction, the Go runtime's collection of the burst's
/// garbage) would carry that work: gpuready's start right after the bench
/// took its writes back cost the API server 56.6 s of CPU where the floor's
/// untaint before it cost 38.9 s (2026-12-05, 10,000 nodes).
async fn quiet_server(env: &TestEnv) {
    let began = Instant::now();
    let mut last = server_cpu(env);
    while began.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = server_cpu(env);
        if now - last < 0.2 {
            break;
        }
        last = now;
    }
    if began.elapsed() > Duration::from_secs(3) {
        eprintln!(
            "  (the control plane went quiet after {:.0?})",
            began.elapsed()
        );
    }
}

/// The release binary, built now unless given.
fn gpuready_binary(args: &Args) -> Result<PathBuf, Error> {
    if let Some(p) = &args.gpuready {
        return Ok(p.clone());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("building gpuready (release)…");
    let status = Command::new(cargo)
        .current_dir(repo_root())
        .args([
            "build",
            "--release",
            "--locked",
            "-p",
            "gpuready",
            "--bin",
            "gpuready",
        ])
        .status()?;
    if !status.success() {
        return Err(Error::Other("cargo build of gpuready failed".into()));
    }
    Ok(repo_root().join("target/release/gpuready"))
}

fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until `pred` holds for the observer's counts, printing the counts
/// every 15 s while it waits (a phase at 100,000 nodes takes minutes).
async fn wait_counts(
    rx: &mut watch::Receiver<Counts>,
    what: &str,
    limit: Duration,
    pred: impl Fn(&Counts) -> bool,
) -> Result<Instant, Error> {
    let began = Instant::now();
    loop {
        let left = limit.saturating_sub(began.elapsed());
        if left.is_zero() {
            return Err(Error::Timeout(format!("{what} within {limit:?}")));
        }
        let waited = tokio::time::timeout(left.min(PROGRESS), rx.wait_for(|c| pred(c)))
            .await
            .map(|r| r.map(|_| ()));
        match waited {
            Ok(Ok(())) => return Ok(Instant::now()),
            Ok(Err(_)) => return Err(Error::Other("the observer stopped".into())),
            Err(_) if began.elapsed() < limit => {
                let c = rx.borrow();
                eprintln!(
                    "  … waiting for {what} ({:.0?}): nodes {}, gpuready-tainted {}, floor-tainted {}, GpuReady True {} / False {}",
                    began.elapsed(),
                    c.nodes,
                    c.tainted,
                    c.floor_tainted,
                    c.condition_true,
                    c.condition_false
                );
            }
            Err(_) => return Err(Error::Timeout(format!("{what} within {limit:?}"))),
        }
    }
}

/// How often a long wait prints where it stands.
const PROGRESS: Duration = Duration::from_secs(15);

/// gpuready's counters, read from one scrape of its metrics.
struct Sample {
    writes: BTreeMap<String, u64>,
    requests: BTreeMap<String, u64>,
    reconciles: u64,
    /// Seconds spent in reconciles, all together.
    reconcile_seconds: f64,
    /// Failed reconciles by error kind.
    errors: BTreeMap<String, u64>,
    /// `gpuready_time_to_ready_seconds{kind="join"}`'s buckets, every profile.
    join_buckets: Vec<(f64, u64)>,
    /// Samples in the scrape: all, and the per-node families'.
    series: (usize, usize),
}

fn sample(port: u16) -> Sample {
    let text = process::scrape(port).unwrap_or_default();
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Sample {
        writes: process::family(&text, "gpuready_writes_total", "kind"),
        requests: process::family(&text, "gpuready_api_requests_total", "method"),
        reconciles: value("gpuready_reconcile_duration_seconds_count") as u64,
        reconcile_seconds: value("gpuready_reconcile_duration_seconds_sum"),
        errors: process::family(&text, "gpuready_reconcile_errors_total", "kind"),
        join_buckets: process::buckets(&text, "gpuready_time_to_ready_seconds", "kind=\"join\""),
        series: process::series(&text),
    }
}

fn diff(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.saturating_sub(before.get(k).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, v)| *v > 0)
        .collect()
}

struct Controller {
    child: Child,
    port: u16,
}

impl Controller {
    fn start(bin: &Path, env: &TestEnv, args: &Args) -> Result<Controller, Error> {
        let port = free_port()?;
        let child = Command::new(bin)
            .arg("run")
            .args(["--http-addr", &format!("127.0.0.1:{port}")])
            .args(["--nfd-crds", "off", "--leader-elect", "false"])
            // Every node breaks at once on purpose: the safety brake would
            // (rightly) hold the taints back.
            .arg("--brake-threshold=1")
            .args(["--client-qps", &args.client_qps.to_string()])
            .args(["--client-burst", &args.client_burst.to_string()])
            .args(["--concurrency", &args.concurrency.to_string()])
            .args((args.faults > 0).then(|| format!("--probe-namespace={}", fault::NAMESPACE)))
            .args(&args.controller_args)
            .env("KUBECONFIG", env.kubeconfig_path())
            // GPUREADY_BENCH_RUST_LOG: gpuready's own log filter, to trace a
            // run (its log goes to the bench's stderr).
            .env(
                "RUST_LOG",
                std::env::var("GPUREADY_BENCH_RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Controller { child, port })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn cpu(&self) -> f64 {
        process::cpu_seconds(self.pid())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn set_product(client: &Client, node: &str, product: &str) -> Result<(), Error> {
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({ "metadata": { "labels": { "nvidia.com/gpu.product": product } } }),
            ),
        )
        .await?;
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[derive(Clone, Copy)]
enum Side {
    Floor,
    Gpuready,
}

impl Side {
    /// The order of round `index` of `count`: alternating which side goes
    /// first, so drift over minutes does not land on one side, and the last
    /// round ends with gpuready (whose controller the run goes on with).
    fn ending_with_gpuready(index: usize, count: usize) -> [Side; 2] {
        if (count - 1 - index) % 2 == 1 {
            [Side::Gpuready, Side::Floor]
        } else {
            [Side::Floor, Side::Gpuready]
        }
    }
}

/// The floor taints every node, then untaints it, each timed until the
/// observer has seen all of it.
async fn floor_round(
    client: &Client,
    args: &Args,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    row: &mut Row,
) -> Result<(), Error> {
    let began = Instant::now();
    floor::run(client, usize::from(args.concurrency), true).await?;
    let at = wait_counts(counts, "every node floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == n
    })
    .await?;
    row.floor_taint_seen.push(at - began);
    let began = Instant::now();
    floor::run(client, usize::from(args.concurrency), false).await?;
    let at = wait_counts(counts, "no node floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == 0
    })
    .await?;
    row.floor_untaint_seen.push(at - began);
    eprintln!(
        "[{n}] floor, seen by the observer: taint {:.1?}, untaint {:.1?}",
        row.floor_taint_seen.last().copied().unwrap_or_default(),
        at - began,
    );
    Ok(())
}

/// gpuready started again on the converged fleet, returned once it has judged
/// every node and gone quiet (its reconcile count stopped moving).
async fn restart(bin: &Path, env: &TestEnv, args: &Args, n: usize) -> Result<Controller, Error> {
    let began = Instant::now();
    let ctl = Controller::start(bin, env, args)?;
    let mut last = None;
    loop {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let reconciles = sample(ctl.port).reconciles;
        if reconciles >= n as u64 && last == Some(reconciles) {
            break;
        }
        if began.elapsed() > LONG_WAIT {
            return Err(Error::Timeout("gpuready settling after a restart".into()));
        }
        last = Some(reconciles);
    }
    eprintln!(
        "[{n}] gpuready: restarted and settled in {:.1?}",
        began.elapsed()
    );
    Ok(ctl)
}

/// gpuready taints every node (one profile change breaks them all), then
/// untaints it (the profile fixed), each timed until the observer has seen all
/// of it. The first round also records writes and requests by kind.
async fn gpuready_round(
    ctl: &Controller,
    env: &TestEnv,
    admin: &Client,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    round: usize,
    row: &mut Row,
) -> Result<(), Error> {
    let before = sample(ctl.port);
    let db_before = etcd_db_bytes(env);
    // Break: the driver minimum above every node's.
    let cpu0 = ctl.cpu();
    let broke = Instant::now();
    fleet::apply_profile(admin, "999.0").await?;
    let first = wait_counts(counts, "a node tainted", LONG_WAIT, |c| c.tainted > 0).await?;
    row.first_taint.push(first - broke);
    let at = wait_counts(counts, "every node tainted", LONG_WAIT, |c| c.tainted == n).await?;
    row.taint_all.push(at - broke);
    row.cpu_until_last_taint.push(ctl.cpu() - cpu0);
    if round == 0 {
        let now = sample(ctl.port);
        row.requests_before_last_taint = diff(&now.requests, &before.requests);
        row.reconciles_before_last_taint = now.reconciles.saturating_sub(before.reconciles);
        row.writes_before_last_taint = diff(&now.writes, &before.writes)
            .into_iter()
            .filter(|(k, _)| k != "node")
            .collect();
    }
    wait_counts(counts, "every GpuReady=False", LONG_WAIT, |c| {
        c.condition_false == n
    })
    .await?;
    if round == 0 {
        row.node_bytes_not_ready = node_bytes(admin, &fleet::node_name(0)).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    row.cpu_taint_phase.push(ctl.cpu() - cpu0);
    let tainted = sample(ctl.port).writes;
    if round == 0 {
        row.writes_taint_phase = diff(&tainted, &before.writes);
    }
    eprintln!("[{n}] gpuready: tainted all in {:.1?}", at - broke);

    // Repair: the profile fixed makes every node ready.
    let cpu1 = ctl.cpu();
    let repaired = Instant::now();
    fleet::apply_profile(admin, "570.0").await?;
    let at = wait_counts(counts, "every node untainted", LONG_WAIT, |c| {
        c.tainted == 0
    })
    .await?;
    row.untaint_all.push(at - repaired);
    wait_counts(counts, "every GpuReady=True", LONG_WAIT, |c| {
        c.condition_true == n
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    row.cpu_untaint_phase.push(ctl.cpu() - cpu1);
    if round == 0 {
        row.writes_untaint_phase = diff(&sample(ctl.port).writes, &tainted);
        row.etcd_growth_burst = etcd_db_bytes(env).saturating_sub(db_before);
    }
    eprintln!("[{n}] gpuready: untainted all in {:.1?}", at - repaired);
    Ok(())
}

/// Starts the control plane, creates the fleet, and measures the API server
/// with it: start-up again with the fleet in etcd, a full paged LIST, memory.
async fn build_fleet(n: usize, args: &Args, row: &mut Row) -> Result<TestEnv, Error> {
    let mut env = TestEnv::start_with(&tuning()).await?;
    row.server_start_empty = env.startup_time();
    let admin = env.client()?;
    fleet::install_crd(&admin, &repo_root()).await?;
    fleet::apply_profile(&admin, "999.0").await?;
    let started = Instant::now();
    let taint = args
        .startup_tainted
        .then_some(gpuready_api::keys::DEFAULT_TAINT_KEY);
    fleet::create_nodes(&admin, n, args.setup_concurrency, taint).await?;
    row.create = started.elapsed();
    row.node_bytes_created = node_bytes(&admin, &fleet::node_name(0)).await?;
    eprintln!("[{n}] {n} nodes created in {:.1?}", row.create);
    drop(admin);

    let began = Instant::now();
    env.restart_apiserver().await?;
    let admin = env.client()?;
    let nodes: Api<Node> = Api::all(admin.clone());
    nodes.list_metadata(&ListParams::default().limit(1)).await?;
    row.server_restart_with_fleet = began.elapsed();
    let began = Instant::now();
    let mut params = ListParams::default().limit(500);
    let mut listed = 0;
    loop {
        let page = nodes.list(&params).await?;
        listed += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    row.server_list_all = began.elapsed();
    row.mem_created = server_memory(&env);
    eprintln!(
        "[{n}] API server: ready again with the fleet in {:.1?}, listed {listed} nodes in {:.1?}; RSS kube-apiserver {:.0} MiB, etcd {:.0} MiB",
        row.server_restart_with_fleet,
        row.server_list_all,
        row.mem_created.apiserver.0 as f64 / 1024.0,
        row.mem_created.etcd.0 as f64 / 1024.0
    );
    Ok(env)
}

/// Waits until gpuready's reconcile count has reached `at_least` and stopped
/// moving for a second.
async fn quiet(ctl: &Controller, at_least: u64) -> Result<(), Error> {
    let began = Instant::now();
    let mut last = None;
    loop {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let reconciles = sample(ctl.port).reconciles;
        if reconciles >= at_least && last == Some(reconciles) {
            return Ok(());
        }
        if began.elapsed() > LONG_WAIT {
            return Err(Error::Timeout("gpuready going quiet".into()));
        }
        last = Some(reconciles);
    }
}

/// The DRA rows (`--dra-updates`), on the converged controller, which it
/// stops before the floor's half.
#[allow(clippy::too_many_arguments)]
async fn dra_phase(
    ctl: Controller,
    env: &mut TestEnv,
    admin: &Client,
    floor_client: &Client,
    counts: &mut watch::Receiver<Counts>,
    args: &Args,
    n: usize,
) -> Result<DraRow, Error> {
    let m = args.dra_updates.min(n);
    let c = usize::from(args.concurrency);
    let mut dra = DraRow {
        updates: m,
        ..DraRow::default()
    };
    // Every node gets its slice: judged from it now (the same RTX 3090), and
    // still ready.
    let before = sample(ctl.port).reconciles;
    let began = Instant::now();
    fleet::put_slices(admin, 0..n, false, args.setup_concurrency).await?;
    dra.publish = began.elapsed();
    quiet(&ctl, before + n as u64).await?;
    wait_counts(counts, "every node ready from its slice", LONG_WAIT, |c| {
        c.condition_true == n && c.tainted == 0
    })
    .await?;
    dra.settle = began.elapsed();
    let probe = Api::<Node>::all(admin.clone())
        .get(&fleet::node_name(0))
        .await?;
    let reason = probe
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| {
            c.into_iter()
                .find(|c| c.type_ == gpuready_api::keys::CONDITION_GPU_READY)
        })
        .and_then(|c| c.reason)
        .unwrap_or_default();
    eprintln!(
        "[{n}] DRA: {n} slices published in {:.1?}, gpuready quiet after {:.1?} (GpuReady reason {reason})",
        dra.publish, dra.settle
    );

    // gpuready's half: m slices get a device taint, then lose it.
    let s0 = sample(ctl.port);
    let cpu0 = ctl.cpu();
    let t0 = Instant::now();
    fleet::put_slices(admin, 0..m, true, c).await?;
    dra.slices_sent = t0.elapsed();
    let at = wait_counts(counts, "the changed nodes tainted", LONG_WAIT, |c| {
        c.tainted == m
    })
    .await?;
    dra.taint = at - t0;
    wait_counts(counts, "the changed nodes GpuReady=False", LONG_WAIT, |c| {
        c.condition_false == m
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    dra.reconciles_taint = sample(ctl.port).reconciles.saturating_sub(s0.reconciles);
    let t1 = Instant::now();
    fleet::put_slices(admin, 0..m, false, c).await?;
    let at = wait_counts(counts, "the changed nodes untainted", LONG_WAIT, |c| {
        c.tainted == 0
    })
    .await?;
    dra.untaint = at - t1;
    wait_counts(counts, "every GpuReady=True again", LONG_WAIT, |c| {
        c.condition_true == n
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    dra.cpu_per_update_ms = (ctl.cpu() - cpu0) * 1000.0 / (2 * m).max(1) as f64;
    eprintln!(
        "[{n}] DRA: gpuready followed {m} slice updates: taint {:.1?}, untaint {:.1?}",
        dra.taint, dra.untaint
    );

    // Every watch re-lists after an API server restart; nothing changed, so
    // nothing needs judging.
    let s1 = sample(ctl.port);
    let cpu1 = ctl.cpu();
    env.restart_apiserver().await?;
    tokio::time::sleep(Duration::from_secs(20)).await;
    dra.relist_reconciles = sample(ctl.port).reconciles.saturating_sub(s1.reconciles);
    dra.relist_cpu = ctl.cpu() - cpu1;
    eprintln!(
        "[{n}] DRA: {} reconciles, {:.2} s CPU in the 20 s after the API server restart",
        dra.relist_reconciles, dra.relist_cpu
    );
    // The observer's watch re-listed too: wait until it sees the fleet again.
    wait_counts(
        counts,
        "the observer sees every node again",
        LONG_WAIT,
        |c| c.nodes == n && c.condition_true == n,
    )
    .await?;

    // The floor's half, gpuready stopped: each slice, then its node's taint.
    drop(ctl);
    let t2 = Instant::now();
    floor::run_after_slices(floor_client, c, m, true).await?;
    let at = wait_counts(counts, "the changed nodes floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == m
    })
    .await?;
    dra.floor_taint = at - t2;
    let t3 = Instant::now();
    floor::run_after_slices(floor_client, c, m, false).await?;
    let at = wait_counts(counts, "no node floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == 0
    })
    .await?;
    dra.floor_untaint = at - t3;
    eprintln!(
        "[{n}] DRA: floor, slice then node: taint {:.1?}, untaint {:.1?}",
        dra.floor_taint, dra.floor_untaint
    );
    Ok(dra)
}

async fn bench(n: usize, args: &Args, bin: &Path) -> Result<Row, Error> {
    let mut row = Row {
        nodes: n,
        ..Row::default()
    };
    let mut env = build_fleet(n, args, &mut row).await?;
    if args.setup_only {
        row.mem_end = server_memory(&env);
        return Ok(row);
    }
    let admin = env.client()?;
    if args.faults > 0 {
        fault::prepare(&admin).await?;
    }

    // The floor, at gpuready's client settings.
    let limiter = requests::limiter(args.client_qps, args.client_burst);
    let floor_client =
        requests::limited_client(env.config(), Arc::new(Metrics::default()), limiter)?;
    let cpu0 = self_cpu();
    let t = floor::run(&floor_client, usize::from(args.concurrency), true).await?;
    row.floor_taint = t.elapsed;
    let u = floor::run(&floor_client, usize::from(args.concurrency), false).await?;
    row.floor_untaint = u.elapsed;
    row.floor_writes = t.writes + u.writes;
    row.floor_cpu = self_cpu() - cpu0;
    eprintln!(
        "[{n}] floor: taint {:.1?}, untaint {:.1?} ({} conflicts)",
        t.elapsed,
        u.elapsed,
        t.conflicts + u.conflicts
    );

    // From here on, the floor is timed the way gpuready is: by the observer's
    // watch, which runs (on the same cores, against the same API server) during
    // every phase, until it sees every node tainted, then untainted.
    let (mut counts, observer) = observe::start(admin.clone());
    wait_counts(
        &mut counts,
        "the observer lists every node",
        LONG_WAIT,
        |c| c.nodes == n,
    )
    .await?;

    // Start-up pairs, alternating which half goes first and ending with
    // gpuready's, whose controller the rest of the run goes on with.
    fleet::apply_profile(&admin, "570.0").await?;
    let pairs = usize::from(args.startup_repeats);
    let mut ctl = None;
    let mut fleet_fresh = true;
    for pair in 0..pairs {
        let order = Side::ending_with_gpuready(pair, pairs);
        for side in order {
            match side {
                Side::Floor => {
                    drop(ctl.take());
                    let half =
                        startup::floor_half(&floor_client, &env, args, &mut counts, n).await?;
                    row.startup_floor.push(half);
                }
                Side::Gpuready => {
                    drop(ctl.take());
                    if !fleet_fresh {
                        startup::forget(&admin, args, &mut counts, n).await?;
                    }
                    let (c, run) = startup::gpuready_half(bin, &env, args, &mut counts, n).await?;
                    row.startup.push(run);
                    ctl = Some(c);
                    fleet_fresh = false;
                }
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    row.node_bytes_ready = node_bytes(&admin, &fleet::node_name(0)).await?;

    // The rounds alternate which side goes first (…; gpuready, floor; floor,
    // gpuready): the API server on a small machine speeds up and slows down
    // over minutes, and a side always run first or last would carry that drift.
    // The last round ends with gpuready, so the process measured at rest below
    // has been through a burst. gpuready is stopped while the floor writes (it
    // would judge every floor taint) and started again, and left to settle,
    // before its next phase.
    let rounds = usize::from(args.repeats);
    for round in 0..rounds {
        let order = Side::ending_with_gpuready(round, rounds);
        for side in order {
            match side {
                Side::Floor => {
                    drop(ctl.take());
                    floor_round(&floor_client, args, &mut counts, n, &mut row).await?;
                }
                Side::Gpuready => {
                    let c = match ctl.take() {
                        Some(c) => c,
                        None => restart(bin, &env, args, n).await?,
                    };
                    gpuready_round(&c, &env, &admin, &mut counts, n, round, &mut row).await?;
                    ctl = Some(c);
                }
            }
        }
    }
    let ctl = match ctl {
        Some(c) => c,
        None => restart(bin, &env, args, n).await?,
    };

    // Single-node changes: a label flips the product, gpuready taints; back, untaints.
    let node = fleet::node_name(n / 2);
    let mut reactions = Vec::new();
    let perf = match &args.perf {
        Some(dir) => Some(
            Command::new("perf")
                .args(["record", "-F", "499", "--call-graph", "dwarf,16384", "-o"])
                .arg(dir.join(format!("perf-{n}.data")))
                .args(["-p", &ctl.pid().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?,
        ),
        None => None,
    };
    let cpu2 = ctl.cpu();
    for _ in 0..args.flips {
        for (product, want_tainted) in [
            ("NVIDIA-Bench-Other", true),
            ("NVIDIA-GeForce-RTX-3090", false),
        ] {
            let sent = Instant::now();
            set_product(&admin, &node, product).await?;
            let node2 = node.clone();
            wait_counts(
                &mut counts,
                "the single node reacts",
                Duration::from_secs(60),
                |c| {
                    c.state.get(&node2).is_some_and(|s| {
                        s.tainted == want_tainted && s.gpu_ready == Some(!want_tainted)
                    })
                },
            )
            .await?;
            // The taint is what protects workloads: its change is what counts
            // (the condition may follow later, after the gate's quiet period).
            let seen = counts.borrow().taint_changed.get(&node).copied();
            if let Some(at) = seen {
                reactions.push(at.saturating_duration_since(sent));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let flips = (2 * args.flips).max(1) as f64;
    row.cpu_per_change_ms = (ctl.cpu() - cpu2) * 1000.0 / flips;
    if let Some(mut perf) = perf {
        // SIGINT, so perf writes its file out (a kill would leave it unreadable).
        let _ = Command::new("kill")
            .args(["-INT", &perf.id().to_string()])
            .status();
        let _ = perf.wait();
    }
    reactions.sort();
    row.reaction_p50 = percentile(&reactions, 0.50);
    row.reaction_p99 = percentile(&reactions, 0.99);

    // At rest.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // One scrape each side: the request count and the kinds cover the same window.
    let before = sample(ctl.port);
    let rest = Instant::now();
    let rest_cpu0 = ctl.cpu();
    tokio::time::sleep(Duration::from_secs(args.rest_seconds)).await;
    row.rest_cpu = ctl.cpu() - rest_cpu0;
    let after = sample(ctl.port);
    row.rest_window = rest.elapsed();
    row.rest_writes = process::write_requests(&diff(&after.requests, &before.requests));
    row.rest_writes_by_kind = diff(&after.writes, &before.writes);
    row.rest_series = after.series;
    (row.rss_rest_kib, row.rss_peak_kib) = process::rss_kib(ctl.pid());
    if args.faults > 0 {
        let rounds = usize::from(args.fault_rounds);
        row.faults = Some(fault::phase(&admin, &mut counts, n, args.faults, rounds).await?);
    }
    let storms = args.storms();
    // Each storm's two sides back to back, alternating which goes first, so
    // the API server's drift over minutes falls on both.
    if let Some(&largest) = storms.iter().max() {
        join::warm_up(&admin, &mut counts, n, largest, args.setup_concurrency).await?;
    }
    let mut ctl = Some(ctl);
    for (k, &j) in storms.iter().enumerate() {
        let order = if k % 2 == 0 {
            [Side::Gpuready, Side::Floor]
        } else {
            [Side::Floor, Side::Gpuready]
        };
        let mut storm = join::JoinRow::default();
        let mut floor_side = join::JoinSide::default();
        for side in order {
            match side {
                Side::Gpuready => {
                    let c = match ctl.take() {
                        Some(c) => c,
                        None => restart(bin, &env, args, n).await?,
                    };
                    quiet_server(&env).await;
                    storm =
                        join::gpuready_storm(&c, &admin, &mut counts, n, j, args.setup_concurrency)
                            .await?;
                    ctl = Some(c);
                }
                Side::Floor => {
                    drop(ctl.take());
                    quiet_server(&env).await;
                    floor_side = join::floor_storm(
                        &floor_client,
                        &admin,
                        &mut counts,
                        n,
                        j,
                        usize::from(args.concurrency),
                        args.setup_concurrency,
                    )
                    .await?;
                }
            }
        }
        storm.floor = floor_side;
        row.joins.push(storm);
    }
    let ctl = if args.dra_updates > 0 {
        let ctl = match ctl {
            Some(c) => c,
            None => restart(bin, &env, args, n).await?,
        };
        let dra = dra_phase(ctl, &mut env, &admin, &floor_client, &mut counts, args, n).await?;
        row.dra = Some(dra);
        None
    } else {
        ctl
    };
    if args.first_taint_probe {
        let ctl = match ctl {
            Some(c) => c,
            None => restart(bin, &env, args, n).await?,
        };
        let broke = Instant::now();
        fleet::apply_profile(&admin, "999.0").await?;
        let first =
            wait_counts(&mut counts, "a node tainted", LONG_WAIT, |c| c.tainted > 0).await?;
        row.first_taint.push(first - broke);
        eprintln!(
            "[{n}] gpuready: first taint seen {:.0?} after the profile change (probe)",
            first - broke
        );
        drop(ctl);
    } else {
        drop(ctl);
    }
    row.mem_end = server_memory(&env);
    observer.abort();
    Ok(row)
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The median (of an even count, the upper middle: no averaging of two runs).
fn median<T: Copy + Default + PartialOrd>(runs: &[T]) -> T {
    let mut v = runs.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// "median (run 1, run 2, …)", or just the time for a single run.
fn spread(runs: &[Duration]) -> String {
    if runs.len() < 2 {
        return secs(median(runs));
    }
    let each: Vec<String> = runs
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64()))
        .collect();
    format!("{} ({})", secs(median(runs)), each.join(", "))
}

fn ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        "–".into()
    } else {
        format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64())
    }
}

fn kinds(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One fleet-wide phase, as the table reads it from a row.
struct Phase {
    name: &'static str,
    /// What starts gpuready's phase.
    cause: &'static str,
    floor_alone: fn(&Row) -> Duration,
    floor_seen: fn(&Row) -> &[Duration],
    gpuready: fn(&Row) -> &[Duration],
}

const TAINT_ALL: Phase = Phase {
    name: "taint all",
    cause: "the profile change",
    floor_alone: |r| r.floor_taint,
    floor_seen: |r| &r.floor_taint_seen,
    gpuready: |r| &r.taint_all,
};

const UNTAINT_ALL: Phase = Phase {
    name: "untaint all",
    cause: "the profile fix",
    floor_alone: |r| r.floor_untaint,
    floor_seen: |r| &r.floor_untaint_seen,
    gpuready: |r| &r.untaint_all,
};

/// The floor alone, and with `--repeats` above 0 the floor seen, gpuready,
/// and their ratio.
fn phase_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String), p: &Phase, runs: bool) {
    line(&format!("floor: {}, its client alone", p.name), &|r| {
        secs((p.floor_alone)(r))
    });
    if !runs {
        return;
    }
    line(
        &format!("floor: {}, seen by the observer (median; each run)", p.name),
        &|r| spread((p.floor_seen)(r)),
    );
    line(
        &format!("gpuready: {}, from {} (median; each run)", p.name, p.cause),
        &|r| spread((p.gpuready)(r)),
    );
    line(
        &format!("gpuready ÷ floor ({}, medians, both seen)", p.name),
        &|r| ratio(median((p.gpuready)(r)), median((p.floor_seen)(r))),
    );
}

fn table(rows: &[Row], args: &Args) -> String {
    let mut out = String::new();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    out.push_str(&format!(
        "Measured {} on {cores} core(s); client qps {} burst {} (0: no client-side limit), concurrency {}, {} run(s) of each fleet-wide phase.\n\n",
        jiff::Timestamp::now().strftime("%Y-%m-%d"),
        args.client_qps,
        args.client_burst,
        args.concurrency,
        args.repeats
    ));
    out.push_str("| | ");
    out.push_str(
        &rows
            .iter()
            .map(|r| format!("{} nodes", r.nodes))
            .collect::<Vec<_>>()
            .join(" | "),
    );
    out.push_str(" |\n|---|");
    out.push_str(&"---|".repeat(rows.len()));
    out.push('\n');
    let mut line = |name: &str, f: &dyn Fn(&Row) -> String| {
        out.push_str(&format!("| {name} | "));
        out.push_str(&rows.iter().map(f).collect::<Vec<_>>().join(" | "));
        out.push_str(" |\n");
    };
    server_rows(&mut line, args);
    if !args.setup_only {
        startup::rows(&mut line);
        gpuready_rows(&mut line, args.repeats > 0);
        join::rows(&mut line, &args.storms());
        if args.faults > 0 {
            fault::rows(&mut line);
        }
        if args.dra_updates > 0 {
            dra_rows(&mut line);
        }
    }
    for w in rows.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let nodes = (b.nodes as f64 - a.nodes as f64).max(1.0);
        let kb = |a: u64, b: u64| (b as f64 - a as f64) * 1024.0 / nodes / 1000.0;
        out.push_str(&format!(
            "\n{}→{} nodes: API server RSS growth {:.1} KB per node, etcd {:.1} KB per node (after creating the fleet)",
            a.nodes,
            b.nodes,
            kb(a.mem_created.apiserver.0, b.mem_created.apiserver.0),
            kb(a.mem_created.etcd.0, b.mem_created.etcd.0),
        ));
        if args.setup_only {
            out.push_str(".\n");
            continue;
        }
        out.push_str(&format!(
            "; gpuready RSS growth {:.1} KB per node; CPU per single-node change {:.2}× the {}-node figure.\n",
            kb(a.rss_rest_kib, b.rss_rest_kib),
            b.cpu_per_change_ms / a.cpu_per_change_ms.max(f64::MIN_POSITIVE),
            a.nodes
        ));
    }
    out
}

fn mib(kib: u64) -> String {
    format!("{:.0}", kib as f64 / 1024.0)
}

/// The control plane's rows: start-up, creation, LIST, memory.
fn server_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String), args: &Args) {
    line(
        "API server: start-up, empty (etcd, then kube-apiserver ready)",
        &|r| secs(r.server_start_empty),
    );
    line(
        &format!(
            "fleet created (one POST a node, {} in flight; setup, not measured against a floor)",
            args.setup_concurrency
        ),
        &|r| {
            format!(
                "{} ({:.0} nodes/s)",
                secs(r.create),
                r.nodes as f64 / r.create.as_secs_f64().max(0.001)
            )
        },
    );
    line(
        "API server: start-up with the fleet in etcd (killed, started again, until ready and a first LIST)",
        &|r| secs(r.server_restart_with_fleet),
    );
    line("API server: paged LIST of every node (500 a page)", &|r| {
        secs(r.server_list_all)
    });
    line("RSS kube-apiserver / etcd, fleet created (MiB)", &|r| {
        format!(
            "{} / {}",
            mib(r.mem_created.apiserver.0),
            mib(r.mem_created.etcd.0)
        )
    });
    line("RSS kube-apiserver / etcd at the end; peak (MiB)", &|r| {
        format!(
            "{} / {}; {} / {}",
            mib(r.mem_end.apiserver.0),
            mib(r.mem_end.etcd.0),
            mib(r.mem_end.apiserver.1),
            mib(r.mem_end.etcd.1)
        )
    });
}

/// gpuready's and the floor's rows; those of the fleet-wide phases only where
/// they ran (`runs`: `--repeats` above 0), so no row reads 0 s for a phase
/// that was not timed.
fn gpuready_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String), runs: bool) {
    line(
        "one Node's JSON: as created → ready → not ready (bytes; gpuready's managedFields within)",
        &|r| {
            let b = |x: &NodeBytes| {
                if x.total == 0 {
                    "–".to_owned()
                } else {
                    format!("{} ({})", x.total, x.gpuready_managed_fields)
                }
            };
            format!(
                "{} → {} → {}",
                b(&r.node_bytes_created),
                b(&r.node_bytes_ready),
                b(&r.node_bytes_not_ready)
            )
        },
    );
    phase_rows(line, &TAINT_ALL, runs);
    // Timed by every taint-all run and by `--first-taint-probe`.
    line(
        "gpuready: first taint seen, from the profile change (median)",
        &|r| {
            if r.first_taint.is_empty() {
                "–".to_owned()
            } else {
                format!("{} ms", median(&r.first_taint).as_millis())
            }
        },
    );
    if runs {
        taint_phase_rows(line);
    }
    phase_rows(line, &UNTAINT_ALL, runs);
    line("floor: writes (both phases, its client alone)", &|r| {
        r.floor_writes.to_string()
    });
    line("floor: client CPU (both phases, its client alone)", &|r| {
        format!("{:.1} s", r.floor_cpu)
    });
    if runs {
        untaint_phase_rows(line);
    }
    rest_rows(line);
}

/// What gpuready sent and spent until the last taint of a taint-all phase.
fn taint_phase_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    line(
        "gpuready: other writes before the last taint was seen (first run)",
        &|r| kinds(&r.writes_before_last_taint),
    );
    line(
        "gpuready: CPU until the last taint was seen (median)",
        &|r| format!("{:.1} s", median(&r.cpu_until_last_taint)),
    );
    line(
        "gpuready: API requests and reconciles until the last taint was seen (first run)",
        &|r| {
            format!(
                "{}; reconciles {}",
                kinds(&r.requests_before_last_taint),
                r.reconciles_before_last_taint
            )
        },
    );
}

/// gpuready's writes, etcd's growth and gpuready's CPU over both fleet-wide
/// phases.
fn untaint_phase_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    line("gpuready: writes while tainting (first run)", &|r| {
        kinds(&r.writes_taint_phase)
    });
    line("gpuready: writes while untainting (first run)", &|r| {
        kinds(&r.writes_untaint_phase)
    });
    line(
        "etcd's database grown by gpuready's taint + untaint bursts (first run, MiB)",
        &|r| format!("{:.1}", r.etcd_growth_burst as f64 / (1u64 << 20) as f64),
    );
    line("gpuready: node writes + Events per transition", &|r| {
        let total: u64 = r
            .writes_taint_phase
            .iter()
            .chain(r.writes_untaint_phase.iter())
            .filter(|(k, _)| k.as_str() != "profile_status")
            .map(|(_, v)| v)
            .sum();
        format!("{:.2}", total as f64 / (2 * r.nodes).max(1) as f64)
    });
    line("gpuready: CPU, taint all (median)", &|r| {
        format!("{:.1} s", median(&r.cpu_taint_phase))
    });
    line("gpuready: CPU, untaint all (median)", &|r| {
        format!("{:.1} s", median(&r.cpu_untaint_phase))
    });
}

/// Single changes and rest: measured in every run.
fn rest_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    line("gpuready: CPU per single-node change", &|r| {
        format!("{:.1} ms", r.cpu_per_change_ms)
    });
    line("gpuready: label→taint reaction p50 / p99", &|r| {
        format!(
            "{} / {} ms",
            r.reaction_p50.as_millis(),
            r.reaction_p99.as_millis()
        )
    });
    line("gpuready: RSS at rest / peak", &|r| {
        format!(
            "{:.1} / {:.1} MiB",
            r.rss_rest_kib as f64 / 1024.0,
            r.rss_peak_kib as f64 / 1024.0
        )
    });
    line("gpuready: CPU at rest (ms per second)", &|r| {
        format!(
            "{:.1}",
            r.rest_cpu * 1000.0 / r.rest_window.as_secs_f64().max(1.0)
        )
    });
    line(
        "gpuready: samples in one /metrics scrape at rest (of them per-node `gpuready_node_*`)",
        &|r| format!("{} ({})", r.rest_series.0, r.rest_series.1),
    );
    line("gpuready: writes/s at rest", &|r| {
        format!(
            "{:.3} ({} in {:.0} s; by kind: {})",
            r.rest_writes as f64 / r.rest_window.as_secs_f64().max(1.0),
            r.rest_writes,
            r.rest_window.as_secs_f64(),
            kinds(&r.rest_writes_by_kind)
        )
    });
}

/// A DRA row's cell; "–" for a size that has none.
fn dra_cell(r: &Row, f: impl Fn(&DraRow) -> String) -> String {
    r.dra.as_ref().map_or_else(|| "–".into(), f)
}

/// The DRA rows (`--dra-updates`).
fn dra_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    line(
        "DRA: one ResourceSlice a node published (setup) → gpuready quiet, every node judged from it",
        &|r| {
            dra_cell(r, |d| {
                format!("{} (published in {})", secs(d.settle), secs(d.publish))
            })
        },
    );
    line("DRA: slices changed (a device taint on, then off)", &|r| {
        dra_cell(r, |d| d.updates.to_string())
    });
    line(
        "DRA: floor, each slice written then its node's taint, seen by the observer (on / off)",
        &|r| {
            dra_cell(r, |d| {
                format!("{} / {}", secs(d.floor_taint), secs(d.floor_untaint))
            })
        },
    );
    line(
        "DRA: gpuready, the slices written → their nodes' taints seen (on / off)",
        &|r| dra_cell(r, |d| format!("{} / {}", secs(d.taint), secs(d.untaint))),
    );
    line("DRA: gpuready ÷ floor (on / off)", &|r| {
        dra_cell(r, |d| {
            format!(
                "{} / {}",
                ratio(d.taint, d.floor_taint),
                ratio(d.untaint, d.floor_untaint)
            )
        })
    });
    line(
        "DRA: the bench's slice writes alone, within gpuready's taint phase",
        &|r| dra_cell(r, |d| secs(d.slices_sent)),
    );
    line(
        "DRA: reconciles until every changed node had GpuReady=False",
        &|r| dra_cell(r, |d| d.reconciles_taint.to_string()),
    );
    line("DRA: gpuready CPU per slice update", &|r| {
        dra_cell(r, |d| format!("{:.1} ms", d.cpu_per_update_ms))
    });
    line(
        "DRA: the API server restarted (every watch re-lists, nothing changed): reconciles, CPU in the next 20 s",
        &|r| {
            dra_cell(r, |d| {
                format!("{}, {:.2} s", d.relist_reconciles, d.relist_cpu)
            })
        },
    );
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // --setup-only never starts gpuready: no build for it.
    let built = if args.setup_only {
        Ok(PathBuf::new())
    } else {
        gpuready_binary(&args)
    };
    let bin = match built {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut rows = Vec::new();
    for &n in &args.nodes {
        match bench(n, &args, &bin).await {
            Ok(r) => rows.push(r),
            Err(e) => {
                eprintln!("error at {n} nodes: {e}");
                return std::process::ExitCode::from(1);
            }
        }
        // Partial results survive a later failure.
        eprintln!("{}", table(&rows, &args));
    }
    println!("{}", table(&rows, &args));
    std::process::ExitCode::SUCCESS
}
