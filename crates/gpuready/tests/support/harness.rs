//! gpuready's controller run in the test process on a real API server: its
//! flags (parsed by clap exactly as `gpuready run` parses them), a client whose
//! every request is counted, and the numbers a test asserts on, read from the
//! /metrics text an operator scrapes. Also the engine's own verdict over a live
//! cluster (what `gpuready check` prints), to know when the controller is done.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};
use gpuready::check::{CheckArgs, CheckReport};
use gpuready::controller::{self, Health, Metrics, RunArgs};
use gpuready_testenv::TestEnv;
use kube::Client;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------- flags

#[derive(Parser)]
struct RunFlags {
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Parser)]
struct CheckFlags {
    #[command(flatten)]
    check: CheckArgs,
}

/// Parses `flags` as clap would for `gpuready run`, with every environment
/// fallback (`GPUREADY_*`, `POD_NAME`…) switched off so a variable set on the
/// developer's machine cannot change a test, and a flag given twice taking its
/// last value (a test's flags override the harness defaults).
fn parse_flags<P: Parser>(flags: &[&str]) -> P {
    let command = P::command()
        .args_override_self(true)
        .mut_args(|a| a.env(None::<&'static str>));
    let matches = command
        .try_get_matches_from(std::iter::once("gpuready").chain(flags.iter().copied()))
        .unwrap_or_else(|e| panic!("flags {flags:?}: {e}"));
    P::from_arg_matches(&matches).unwrap_or_else(|e| panic!("flags {flags:?}: {e}"))
}

/// The flags every in-process controller starts from, where a test differs from
/// `gpuready run`'s defaults: no fixed HTTP port (the harness serves nothing),
/// 4 reconciles in parallel, no leader election (one replica), NFD CRDs left
/// alone (only the NFD tests ask for them), and an identity of this process.
fn test_flags() -> Vec<String> {
    [
        "--http-addr=127.0.0.1:0",
        "--concurrency=4",
        "--leader-elect=false",
        "--nfd-crds=off",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([format!("--identity=test-{}", std::process::id())])
    .collect()
}

/// `gpuready run`'s arguments for a test: the test defaults, then `flags`
/// (later flags win, e.g. `run_args(&["--leader-elect=true"])`).
pub fn run_args(flags: &[&str]) -> RunArgs {
    let defaults = test_flags();
    let all: Vec<&str> = defaults
        .iter()
        .map(String::as_str)
        .chain(flags.iter().copied())
        .collect();
    parse_flags::<RunFlags>(&all).run
}

/// `gpuready run`'s arguments with the test defaults only.
pub fn test_args() -> RunArgs {
    run_args(&[])
}

// ---------------------------------------------------------------- controller

/// A controller running in this process, with its own counted client.
pub struct Running {
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    pub stop: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), controller::Error>>,
}

/// Logs from the controller under test (RUST_LOG, default info), shown for failed tests.
pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn")),
        )
        .with_test_writer()
        .try_init();
}

pub fn start_controller(env: &TestEnv, args: RunArgs) -> Running {
    start_controller_with(env.config(), args)
}

/// Runs gpuready in-process with gpuready's own client stack (retry, counting,
/// no rate limit) built from `config`, e.g. one impersonating the chart's
/// ServiceAccount.
pub fn start_controller_with(config: kube::Config, args: RunArgs) -> Running {
    let metrics = Arc::new(Metrics::default());
    let client = controller::requests::limited_client(config, metrics.clone(), None)
        .expect("gpuready's client");
    spawn_controller(client, metrics, args)
}

/// Runs gpuready in-process on `client`, whose requests the caller has set up
/// to be counted into `metrics`.
pub fn spawn_controller(client: Client, metrics: Arc<Metrics>, args: RunArgs) -> Running {
    init_logs();
    let health = Arc::new(Health::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller::run(
        client,
        args,
        metrics.clone(),
        health.clone(),
        stop.clone(),
    ));
    Running {
        metrics,
        health,
        stop,
        task,
    }
}

impl Running {
    pub async fn stop(self) -> Result<(), controller::Error> {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("controller stops in time")
            .expect("controller task")
    }

    /// A sample from /metrics, e.g. `gpuready_safety_brake_engaged{profile="x"}`.
    pub fn metric(&self, series: &str) -> Option<f64> {
        self.metrics
            .encode()
            .lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    /// Like [`Running::metric`], 0 when the series is absent.
    pub fn sample(&self, series: &str) -> f64 {
        self.metric(series).unwrap_or(0.0)
    }

    /// Samples of one metric family by the value of one label, e.g.
    /// `gpuready_api_requests_total` by `method`.
    fn by_label(&self, family: &str, label: &str) -> BTreeMap<String, u64> {
        let prefix = format!("{family}{{");
        let key = format!("{label}=\"");
        self.metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| {
                let value = l.split(&key).nth(1)?.split('"').next()?;
                let n = l.rsplit(' ').next()?.parse().ok()?;
                Some((value.to_owned(), n))
            })
            .collect()
    }

    /// `gpuready_writes_total{kind}`: writes gpuready made, by what it wrote.
    pub fn writes(&self, kind: &str) -> u64 {
        self.by_label("gpuready_writes_total", "kind")
            .get(kind)
            .copied()
            .unwrap_or(0)
    }

    /// Writes to nodes: the one merge patch on the node (taint, labels,
    /// annotations) and the condition patch on its status.
    pub fn node_writes(&self) -> u64 {
        self.writes("node") + self.writes("conditions")
    }

    /// Requests sent so far, by method as `gpuready_api_requests_total` labels
    /// them (`GET` — a LIST too —, `WATCH`, `PATCH`…).
    pub fn requests_by_method(&self) -> BTreeMap<String, u64> {
        self.by_label("gpuready_api_requests_total", "method")
    }

    /// Write requests sent so far, every attempt counted: every method but
    /// `GET` and `WATCH`.
    pub fn writes_sent(&self) -> u64 {
        self.requests_by_method()
            .iter()
            .filter(|(m, _)| !matches!(m.as_str(), "GET" | "WATCH"))
            .map(|(_, n)| n)
            .sum()
    }

    /// Read requests sent so far (`GET`, `LIST` and `WATCH`).
    pub fn reads_sent(&self) -> u64 {
        self.requests_by_method()
            .iter()
            .filter(|(m, _)| matches!(m.as_str(), "GET" | "WATCH"))
            .map(|(_, n)| n)
            .sum()
    }

    pub fn is_leader(&self) -> bool {
        self.metric("gpuready_leader") == Some(1.0)
    }
}

// ---------------------------------------------------------------- verdicts

/// The engine's report over the live nodes and profiles, now: what `gpuready
/// check` prints against this cluster, computed by the same function.
pub async fn live_report(client: &Client) -> CheckReport {
    let args = parse_flags::<CheckFlags>(&[]).check;
    gpuready::check::check_cluster(client, "the test control plane", &args)
        .await
        .expect("gpuready check against the test control plane")
}

/// `gpuready check`'s arguments for `flags`, parsed as clap would, with the
/// environment fallbacks off (as for `gpuready run` above).
pub fn check_args(flags: &[&str]) -> CheckArgs {
    parse_flags::<CheckFlags>(flags).check
}

/// The nodes on which gpuready would still change something, judged by the same
/// engine over the live objects (heartbeats ignored): empty once converged.
pub async fn pending_changes(client: &Client) -> Vec<String> {
    live_report(client)
        .await
        .nodes
        .into_iter()
        .filter(|a| !a.changes.is_empty())
        .map(|a| a.name)
        .collect()
}
