//! `gpuready probe`: the node agent. Reads the GPUs through NVML where the
//! workloads run and publishes a versioned report for its node (or, with
//! `--once`, prints it). The controller's Health layer judges the report.

pub mod nvml;
pub mod publish;

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gpuready_api::probe::{EventLog, NvmlState, PROBE_REPORT_API_VERSION, ProbeReport};
use jiff::Timestamp;

use crate::controller::config::{LogFormat, parse_duration};

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
    #[arg(long, env = "GPUREADY_PROBE_INTERVAL", default_value = "60s", value_parser = parse_duration)]
    pub interval: Duration,

    /// Log format.
    #[arg(long, env = "GPUREADY_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Exit code of `--once` when the report was printed but NVML is unusable or
/// enumerates no GPU.
pub const EXIT_NVML_UNUSABLE: u8 = 1;
/// Exit code for arguments or an environment the probe cannot work with.
pub const EXIT_USAGE: u8 = 2;

/// Assembles a report from what NVML gave (nothing when it is unusable).
pub fn build_report(
    node: Option<&str>,
    started: Timestamp,
    state: NvmlState,
    nvml: Option<&nvml_wrapper::Nvml>,
    events: EventLog,
) -> ProbeReport {
    let snap = nvml.map(nvml::snapshot);
    let (driver_version, cuda_driver_version, device_count, gpus) = match snap {
        Some(s) => (
            s.driver_version,
            s.cuda_driver_version,
            s.device_count,
            s.gpus,
        ),
        None => (None, None, None, Vec::new()),
    };
    ProbeReport {
        api_version: PROBE_REPORT_API_VERSION.to_owned(),
        node: node.map(str::to_owned),
        generated_at: Timestamp::now().to_string(),
        probe_started_at: started.to_string(),
        probe_version: env!("CARGO_PKG_VERSION").to_owned(),
        nvml: state,
        driver_version,
        cuda_driver_version,
        device_count,
        gpus,
        events,
    }
}

/// `gpuready probe`.
pub fn run(args: ProbeArgs) -> ExitCode {
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
    let started = Timestamp::now();
    let events = Arc::new(nvml::Events::default());
    let stop = AtomicBool::new(false);
    // NVML lives for the rest of the process once initialised; the event thread
    // borrows it, so both live inside one thread scope.
    let nvml_cell: OnceLock<nvml_wrapper::Nvml> = OnceLock::new();
    std::thread::scope(|scope| {
        runtime.block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let mut last_state = NvmlState::default();
            loop {
                // The driver may come up after the probe (the GPU operator installs
                // it in a pod of its own): keep trying until NVML initialises.
                if nvml_cell.get().is_none() {
                    let (nvml, state) = nvml::init(args.nvml_library.as_deref());
                    if state != last_state {
                        match &state.error {
                            None => tracing::info!(library = ?state.library, version = ?state.version, "NVML initialised"),
                            Some(e) => tracing::warn!(error = %e, "NVML unusable; retrying every interval"),
                        }
                    }
                    last_state = state;
                    if let Some(nvml) = nvml
                        && nvml_cell.set(nvml).is_ok()
                        && let Some(n) = nvml_cell.get()
                    {
                        let (events, stop) = (events.clone(), &stop);
                        scope.spawn(move || nvml::watch_events(n, &events, stop));
                    }
                }
                let report = build_report(
                    Some(&node),
                    started,
                    last_state.clone(),
                    nvml_cell.get(),
                    events.snapshot(),
                );
                match publish::publish(&client, &namespace, &node, &report).await {
                    Ok(()) => tracing::debug!(gpus = report.gpus.len(), "report published"),
                    Err(e) => tracing::error!(error = %e, "publishing the report failed"),
                }
                let stopping = async {
                    match term.as_mut() {
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
                };
                tokio::select! {
                    _ = stopping => break,
                    _ = tokio::time::sleep(args.interval) => {},
                }
            }
            tracing::info!("probe stopping");
        });
        stop.store(true, Ordering::Relaxed);
    });
    ExitCode::SUCCESS
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
        started,
        state,
        nvml.as_ref(),
        log,
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
