//! The `gpuready` command: `check`, `crd`, `nfd-crds`, and in the cluster
//! `run` (the controller), `probe` (the node agent) and `release` (the chart's
//! uninstall hook).

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use gpuready::check;
use gpuready::cli::LogFormat;
use gpuready::cluster::ClusterArgs;
use gpuready::controller::{self, Health, Metrics, RunArgs};
use tokio_util::sync::CancellationToken;

/// jemalloc instead of the platform's malloc: glibc kept the pages of the
/// initial node list and of every burst (RSS at rest equal to the peak), and
/// the published image links musl, whose malloc is slower still under threads.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Tells, node by node and layer by layer, whether a GPU node is really ready.
#[derive(Debug, Parser)]
#[command(name = "gpuready", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Judge nodes against GpuNodeProfiles and print every layer's verdict.
    ///
    /// Reads what `gpuready run` reads, from files (--nodes, --profiles,
    /// --resource-slices, --node-features, --probe-reports) or, without
    /// --nodes, from the cluster (read-only; probe reports from
    /// --probe-namespace), and judges it with the same engine.
    ///
    /// Exit code: 0 when every governed node is ready, 1 when one is not (or is
    /// in conflict), 2 for input that cannot be used.
    Check(check::CheckArgs),
    /// Run the controller (in-cluster, or out-of-cluster with KUBECONFIG or
    /// --kubeconfig).
    Run(RunCommand),
    /// Print the GpuNodeProfile CRD generated from gpuready's types.
    Crd {
        /// Write the committed copies in the repository instead of printing.
        #[arg(long)]
        write: bool,
    },
    /// See, compare or install the Node Feature Discovery CRDs gpuready carries
    /// (Helm never upgrades them). `print` shows them, `diff` compares the
    /// cluster's with them, `apply` installs missing and upgrades older ones.
    NfdCrds(gpuready::nfd_cli::NfdCrdsArgs),
    /// The node agent: read the GPUs through NVML and publish a report for the
    /// controller's Health layer (`--once` prints it instead; no cluster needed).
    ///
    /// Exit codes of --once: 0 the report was printed and NVML sees at least one
    /// GPU; 1 the report was printed but NVML is unusable or sees no GPU (the
    /// report's nvml.error says why); 2 arguments or environment unusable.
    Probe(gpuready::probe::ProbeArgs),
    /// Take back everything gpuready put on nodes (its taint, labels,
    /// annotations and conditions), as when a node leaves every profile; with
    /// --stop-deployment, first stop the controller. The chart's pre-delete
    /// hook, so `helm uninstall` strands no node.
    ///
    /// Exit codes: 0 released (or nothing to release); 1 a node could not be
    /// released or the controller's pods did not end; 2 no usable cluster.
    Release(gpuready::release::ReleaseArgs),
}

/// `gpuready run`: the cluster flags beside the controller's own, so RunArgs
/// stays what the controller needs.
#[derive(Debug, clap::Args)]
struct RunCommand {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    args: RunArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => run_check(&args),
        Command::Crd { write } => run_crd(write),
        Command::Run(run) => run_controller(run.cluster, run.args),
        Command::NfdCrds(args) => gpuready::nfd_cli::run(args),
        Command::Probe(args) => gpuready::probe::run(args),
        Command::Release(args) => gpuready::release::run(args),
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn"));
    // Colours only for a person at a terminal: written to a file or a log
    // pipeline, escape codes are noise.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

fn run_controller(cluster: ClusterArgs, args: RunArgs) -> ExitCode {
    init_tracing(args.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        let stop = CancellationToken::new();
        tokio::spawn(shutdown_on_signal(stop.clone()));
        let metrics = Arc::new(Metrics::default());
        let health = Arc::new(Health::default());
        let config = match cluster.config().await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "no usable Kubernetes configuration");
                return ExitCode::from(2);
            }
        };
        // Named once up front, so every later connection error has an address.
        let api_server = config.cluster_url.to_string();
        tracing::info!(server = %api_server, "using the Kubernetes API server");
        let limiter = controller::requests::limiter(args.client_qps, args.client_burst);
        let client = match controller::requests::limited_client(config, metrics.clone(), limiter) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "building the Kubernetes client");
                return ExitCode::from(2);
            }
        };
        let server = match controller::status::http::serve(args.http_addr, metrics.clone(), health.clone(), stop.clone()).await {
            Ok((addr, task)) => {
                tracing::info!(%addr, "serving /metrics, /healthz, /readyz");
                task
            }
            Err(e) => {
                tracing::error!(error = %e, addr = %args.http_addr, "binding the HTTP server");
                return ExitCode::from(2);
            }
        };
        let result = controller::run(client, args, metrics, health, stop.clone()).await;
        stop.cancel();
        let _ = server.await;
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(controller::Error::LostLeadership) => {
                // Not a fault to look into: the pod restarts and stands by.
                tracing::warn!("lost the leader lease: exiting (1) to restart as a standby candidate");
                ExitCode::from(1)
            }
            Err(e) => {
                tracing::error!(
                    error = %e,
                    server = %api_server,
                    "gpuready stopped (if the API server was not reached: is the cluster up, and are the kubeconfig and context the ones you mean?)"
                );
                ExitCode::from(1)
            }
        }
    })
}

/// First SIGTERM/SIGINT: stop taking work, finish in-flight reconciles, release
/// the lease. A second one exits at once.
async fn shutdown_on_signal(stop: CancellationToken) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "installing the SIGTERM handler");
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
    tracing::info!("shutting down: finishing in-flight reconciles");
    stop.cancel();
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
    tracing::warn!("second signal: exiting now");
    std::process::exit(130);
}

fn run_check(args: &check::CheckArgs) -> ExitCode {
    if !args.nodes.is_empty() {
        return run_check_files(args);
    }
    let report = {
        let Some(runtime) = gpuready::one_shot_runtime() else {
            return ExitCode::from(2);
        };
        runtime
            .block_on(check::check_live(args))
            .map_err(|e| e.to_string())
    };
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if !written(check::render_to(
        &report,
        args.output,
        &mut std::io::stdout().lock(),
    )) {
        return ExitCode::from(2);
    }
    checked_exit(&report.summary, report.exit_code())
}

/// Whether the report was written; a closed pipe (`| head`) is the reader's
/// choice, not an error.
fn written(result: std::io::Result<()>) -> bool {
    match result {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => true,
        Err(e) => {
            eprintln!("error: rendering the report: {e}");
            false
        }
    }
}

/// A check's exit code, with a warning when no profile selected any node.
fn checked_exit(summary: &check::Summary, code: u8) -> ExitCode {
    if summary.governed + summary.conflicts == 0 {
        eprintln!(
            "warning: no GpuNodeProfile selects any of these nodes; check the profiles' nodeSelector"
        );
    }
    ExitCode::from(code)
}

/// An offline check: the report is written as the nodes are judged (each
/// node's part spilled to a temporary file), so memory holds a small row per
/// node, not its assessment.
fn run_check_files(args: &check::CheckArgs) -> ExitCode {
    let checked =
        match check::spill::check_files_to(args, args.output, &mut std::io::stdout().lock()) {
            Ok((checked, report)) => {
                if !written(report) {
                    return ExitCode::from(2);
                }
                checked
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
    checked_exit(&checked.summary, checked.exit_code())
}

fn run_crd(write: bool) -> ExitCode {
    let yaml = match gpuready_api::crd::to_yaml(&[gpuready_api::crd::gpu_node_profile_crd()]) {
        Ok(y) => y,
        Err(e) => {
            eprintln!("error: rendering the CRD: {e}");
            return ExitCode::from(2);
        }
    };
    if !write {
        print!("{yaml}");
        return ExitCode::SUCCESS;
    }
    for rel in gpuready_api::crd::COMMITTED_GPUREADY_CRD_PATHS {
        if let Err(e) = std::fs::write(rel, &yaml) {
            eprintln!("error: {rel}: {e} (run from the repository root)");
            return ExitCode::from(2);
        }
        eprintln!("wrote {rel}");
    }
    ExitCode::SUCCESS
}
