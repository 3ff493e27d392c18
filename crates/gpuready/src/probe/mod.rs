//! `gpuready probe`: the node agent. Reads the GPUs through NVML where the
//! workloads run, checks through CUDA that they compute (when no workload uses
//! them), and publishes a versioned report for its node (or, with `--once`,
//! prints it). The controller's Health layer judges the report.

pub mod agent;
pub mod compute;
pub mod cuda;
mod ffi;
pub mod imex;
pub mod maintenance;
pub mod nvml;
pub mod publish;
pub mod report;
pub mod urgent;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gpuready_api::probe::EventLog;
use jiff::Timestamp;

use compute::{ComputeCheckMode, Memory, Settings};
pub use report::{Checker, build_report};

use crate::cli::{LogFormat, parse_duration};

/// Output format of `--once`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbeOutput {
    Json,
    Yaml,
}

#[derive(Clone, Debug, clap::Args)]
pub struct ProbeArgs {
    /// Read the GPUs once, print the report and exit (no cluster needed).
    #[arg(long)]
    pub once: bool,

    /// With --once: watch NVML's critical events (XIDs, double-bit ECC) this long
    /// before printing, e.g. `10s`. Default 0: no events are watched.
    #[arg(long, default_value = "0s", value_parser = parse_duration, requires = "once")]
    pub events_for: Duration,

    /// Format of the report printed by --once.
    #[arg(long, value_enum, default_value_t = ProbeOutput::Json)]
    pub output: ProbeOutput,

    /// NVML library to load instead of searching libnvidia-ml.so.1 and the usual
    /// driver folders.
    #[arg(long, env = "GPUREADY_NVML_LIBRARY")]
    pub nvml_library: Option<OsString>,

    /// Node the probe runs on (the downward API's spec.nodeName in-cluster).
    #[arg(long, env = "NODE_NAME")]
    pub node_name: Option<String>,

    /// Namespace the report ConfigMap is written to (the pod's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: Option<String>,

    /// How often the report is refreshed and published: the probe's heartbeat.
    /// Keep it well under the profiles' probe.maxReportAgeSeconds (300 s default).
    /// A critical NVML event (an XID a profile may list as fatal, a double-bit
    /// ECC error) publishes at once besides: 500 ms after the first event of a
    /// burst, at most 6 such reports a minute, the heartbeat unmoved.
    #[arg(long, env = "GPUREADY_PROBE_INTERVAL", default_value = "60s", value_parser = parse_duration)]
    pub interval: Duration,

    /// Log format.
    #[arg(long, env = "GPUREADY_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// The CUDA compute check: `auto` runs it when due and no workload uses a
    /// GPU; `off` never (the report says Disabled).
    #[arg(long, env = "GPUREADY_COMPUTE_CHECK", value_enum, default_value_t = ComputeCheckMode::Auto)]
    pub compute_check: ComputeCheckMode,

    /// Least time between two compute checks, whatever triggers them.
    #[arg(long, env = "GPUREADY_COMPUTE_CHECK_MIN_INTERVAL", default_value = "10m", value_parser = parse_duration)]
    pub compute_check_min_interval: Duration,

    /// Re-run the compute check this often while the GPUs are idle; 0s: only
    /// on the first report, a stack change or a request.
    #[arg(long, env = "GPUREADY_COMPUTE_CHECK_EVERY", default_value = "24h", value_parser = parse_duration)]
    pub compute_check_every: Duration,

    /// Kill the compute check (a child process) after this long and report
    /// CUDA_CHECK_TIMEOUT.
    #[arg(long, env = "GPUREADY_COMPUTE_CHECK_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub compute_check_timeout: Duration,

    /// The downward API's annotations file of the probe pod: a new value of the
    /// gpuready.io/compute-check-request annotation asks for a check.
    #[arg(long, env = "GPUREADY_COMPUTE_CHECK_REQUEST_FILE")]
    pub compute_check_request_file: Option<PathBuf>,

    /// Where the host's `/` is seen (its `/etc` mounted read-only at
    /// `DIR/etc`): the report then says what the host's files show of the
    /// nvidia-imex service (`imex`). Unset: not read.
    #[arg(long, env = "GPUREADY_HOST_ROOT", value_name = "DIR")]
    pub host_root: Option<PathBuf>,

    /// Read this node's labels (a watch on its Node, by field selector) and
    /// release NVML while the GPU operator takes the node through maintenance
    /// (a driver upgrade between cordon and uncordon, a MIG change, GPU
    /// clients paused); `false`: never read the Node. Needs get, list and watch
    /// on nodes; without them the probe works as with `false`.
    #[arg(long, env = "GPUREADY_PROBE_WATCH_NODE", default_value_t = true, action = clap::ArgAction::Set)]
    pub watch_node: bool,

    /// Internal: run the compute check in this process and print its result
    /// (the probe starts itself so; a hang is then bounded by its timeout).
    #[arg(long, hide = true)]
    pub compute_check_child: bool,
}

impl ProbeArgs {
    fn checker(&self, once: bool) -> Checker {
        Checker {
            settings: self.settings(),
            memory: Memory::default(),
            once,
        }
    }

    fn settings(&self) -> Settings {
        Settings {
            mode: self.compute_check,
            min_interval: self.compute_check_min_interval,
            every: self.compute_check_every,
            timeout: self.compute_check_timeout,
        }
    }
}

/// Exit code of `--once` when the report was printed but NVML is unusable,
/// enumerates no GPU, or the compute check ran and failed.
pub const EXIT_NVML_UNUSABLE: u8 = 1;
/// Exit code for arguments or an environment the probe cannot work with.
pub const EXIT_USAGE: u8 = 2;

/// `gpuready probe`.
pub fn run(args: ProbeArgs) -> ExitCode {
    if args.compute_check_child {
        return match serde_json::to_string(&cuda::check()) {
            Ok(t) => {
                println!("{t}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: rendering the compute check: {e}");
                ExitCode::from(EXIT_USAGE)
            }
        };
    }
    if args.once {
        return run_once(&args);
    }
    init_tracing(args.log_format);
    let (Some(node), Some(namespace)) = (args.node_name.clone(), args.namespace.clone()) else {
        tracing::error!(
            "the probe needs its node (NODE_NAME or --node-name) and namespace (POD_NAMESPACE or --namespace); use --once to print a report without a cluster"
        );
        return ExitCode::from(EXIT_USAGE);
    };
    if gpuready_api::probe::configmap_name(&node).is_none() {
        tracing::error!(%node, "node name too long for the report ConfigMap name");
        return ExitCode::from(EXIT_USAGE);
    }
    let Some(runtime) = crate::one_shot_runtime() else {
        return ExitCode::from(EXIT_USAGE);
    };
    let client = match runtime.block_on(async {
        let mut config = kube::Config::infer().await.map_err(|e| e.to_string())?;
        crate::cluster::identify(&mut config);
        kube::Client::try_from(config).map_err(|e| e.to_string())
    }) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "no Kubernetes configuration: run in-cluster or set KUBECONFIG");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    runtime.block_on(agent_loop(&args, &client, &node, &namespace));
    ExitCode::SUCCESS
}

/// How long the probe spends, on SIGTERM, reading its node and publishing the
/// paused report: well inside the pod's 30 s grace period.
const STOP_STEP_LIMIT: Duration = Duration::from_secs(5);

/// Why the loop publishes its next report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wake {
    /// The heartbeat, or the node's maintenance view changed.
    Regular,
    /// A critical NVML event, ahead of the heartbeat ([`urgent`]).
    Early,
    Stop,
}

/// Reports every interval, at once when the node's maintenance view changes,
/// and ahead of the heartbeat (debounced, at most a few a minute) on a
/// critical NVML event, until SIGTERM (or Ctrl-C); then releases NVML and,
/// when the node is in maintenance, publishes the paused report before
/// returning.
async fn agent_loop(args: &ProbeArgs, client: &kube::Client, node: &str, namespace: &str) {
    let mut view = args.watch_node.then(|| {
        let (tx, rx) = tokio::sync::watch::channel(maintenance::NodeView::Unread);
        tokio::spawn(maintenance::watch_node(client.clone(), node.to_owned(), tx));
        rx
    });
    let mut agent = agent::Agent::new(args.nvml_library.clone(), args.checker(false));
    let mut critical = agent.critical_events();
    let mut early = urgent::EarlyReports::default();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let mut wake = Wake::Regular;
    let mut heartbeat = tokio::time::Instant::now();
    while wake != Wake::Stop {
        // Every event recorded until here is in the report built below.
        critical.borrow_and_update();
        let labels = view
            .as_mut()
            .map(|v| v.borrow_and_update().maintenance().to_vec())
            .unwrap_or_default();
        let request = args
            .compute_check_request_file
            .as_deref()
            .and_then(compute::read_request);
        // The compute check blocks this single-threaded loop while its child
        // runs (bounded by --compute-check-timeout; about a second measured).
        let report = agent.report(node, args.host_root.as_deref(), request, &labels);
        match publish::publish(client, namespace, node, &report).await {
            Ok(()) if wake == Wake::Early => {
                tracing::info!("critical NVML event: report published ahead of the heartbeat")
            }
            Ok(()) => tracing::debug!(gpus = report.gpus.len(), "report published"),
            Err(e) => tracing::error!(error = %e, "publishing the report failed"),
        }
        early.published(std::time::Instant::now(), wake == Wake::Early);
        // An early report leaves the heartbeat where it was.
        if wake == Wake::Regular {
            heartbeat = tokio::time::Instant::now() + args.interval;
        }
        wake = next_wake(
            stopping(term.as_mut()),
            view.as_mut(),
            &mut critical,
            &mut early,
            heartbeat,
        )
        .await;
    }
    // Whatever comes next, the GPU files close first: the DaemonSet
    // controller deleting the pod for a driver upgrade is why it stops.
    agent.release();
    if let Some(v) = &view {
        let last = v.borrow().clone();
        let now = maintenance::read_now(client, node, STOP_STEP_LIMIT)
            .await
            .unwrap_or(last);
        if !now.maintenance().is_empty() {
            let report = agent.report(node, args.host_root.as_deref(), None, now.maintenance());
            let sent = tokio::time::timeout(
                STOP_STEP_LIMIT,
                publish::publish(client, namespace, node, &report),
            )
            .await;
            match sent {
                Ok(Ok(())) => tracing::info!("published the paused report before stopping"),
                Ok(Err(e)) => tracing::warn!(error = %e, "publishing the paused report failed"),
                Err(_) => tracing::warn!("publishing the paused report timed out"),
            }
        }
    }
    tracing::info!("probe stopping");
}

/// Waits for the next reason to publish. A critical event only schedules the
/// early report ([`urgent::EarlyReports::event`]); its wait is one of the
/// reasons, and while one is due no further event needs listening to.
async fn next_wake(
    stop: impl std::future::Future<Output = ()>,
    mut view: Option<&mut tokio::sync::watch::Receiver<maintenance::NodeView>>,
    critical: &mut tokio::sync::watch::Receiver<u64>,
    early: &mut urgent::EarlyReports,
    heartbeat: tokio::time::Instant,
) -> Wake {
    let mut stop = std::pin::pin!(stop);
    loop {
        let due = early.due().map(tokio::time::Instant::from_std);
        tokio::select! {
            _ = &mut stop => return Wake::Stop,
            _ = node_changed(view.as_deref_mut()) => return Wake::Regular,
            _ = tokio::time::sleep_until(heartbeat) => return Wake::Regular,
            _ = tokio::time::sleep_until(due.unwrap_or(heartbeat)), if due.is_some() => {
                return Wake::Early
            }
            Ok(()) = critical.changed(), if due.is_none() => {
                let now = std::time::Instant::now();
                let wait = early.event(now).saturating_duration_since(now);
                tracing::debug!(?wait, "critical NVML event: early report scheduled");
            }
        }
    }
}

/// Resolves when the node's maintenance view changes; never without a view
/// (or once its watch ended).
async fn node_changed(view: Option<&mut tokio::sync::watch::Receiver<maintenance::NodeView>>) {
    let changed = match view {
        Some(v) => v.changed().await.is_ok(),
        None => false,
    };
    if !changed {
        std::future::pending::<()>().await;
    }
}

/// Resolves on SIGTERM or Ctrl-C.
async fn stopping(term: Option<&mut tokio::signal::unix::Signal>) {
    match term {
        Some(t) => {
            tokio::select! {
                _ = t.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
        }
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn run_once(args: &ProbeArgs) -> ExitCode {
    let started = Timestamp::now();
    let (nvml, state) = nvml::init(args.nvml_library.as_deref());
    let events = Arc::new(nvml::Events::default());
    let log = match &nvml {
        Some(n) if !args.events_for.is_zero() => {
            let stop = AtomicBool::new(false);
            std::thread::scope(|scope| {
                let watcher = scope.spawn(|| nvml::watch_events(n, &events, &stop));
                std::thread::sleep(args.events_for);
                stop.store(true, Ordering::Relaxed);
                let _ = watcher.join();
            });
            events.snapshot()
        }
        _ => EventLog {
            monitored: false,
            error: Some("--once without --events-for watches no events".into()),
            ..EventLog::default()
        },
    };
    let report = build_report(
        args.node_name.as_deref(),
        args.host_root.as_deref(),
        started,
        state,
        nvml.as_ref(),
        log,
        &mut args.checker(true),
        None,
    );
    let text = match args.output {
        ProbeOutput::Json => serde_json::to_string_pretty(&report)
            .map(|mut s| {
                s.push('\n');
                s
            })
            .map_err(|e| e.to_string()),
        ProbeOutput::Yaml => serde_yaml_ng::to_string(&report).map_err(|e| e.to_string()),
    };
    match text {
        Ok(t) => print!("{t}"),
        Err(e) => {
            eprintln!("error: rendering the report: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    if !report.nvml.usable {
        eprintln!(
            "error: NVML is unusable: {}",
            report.nvml.error.as_deref().unwrap_or("no error given")
        );
        return ExitCode::from(EXIT_NVML_UNUSABLE);
    }
    if report.device_count.unwrap_or(0) == 0 {
        eprintln!("error: NVML enumerates no GPU");
        return ExitCode::from(EXIT_NVML_UNUSABLE);
    }
    if let Some(cc) = &report.compute_check
        && cc.outcome == gpuready_api::probe::ComputeOutcome::Failed
    {
        let why = cc
            .error
            .as_ref()
            .map(|e| format!("{} {} ({})", e.step, e.name, e.code))
            .unwrap_or_else(|| "a GPU failed (see gpus[].compute)".into());
        eprintln!("error: the compute check failed: {why}");
        return ExitCode::from(EXIT_NVML_UNUSABLE);
    }
    ExitCode::SUCCESS
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

#[cfg(test)]
mod tests;
