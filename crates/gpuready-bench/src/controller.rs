//! gpuready as the bench runs it: the release binary, one process on a free
//! port, and its counters read from one scrape of `/metrics`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpuready_testenv::TestEnv;

use crate::args::Args;
use crate::error::Error;
use crate::fault;
use crate::observe::LONG_WAIT;
use crate::process;

/// A running gpuready, killed when dropped.
pub struct Controller {
    child: Child,
    /// Its `/metrics` port.
    pub port: u16,
}

impl Controller {
    pub fn start(bin: &Path, env: &TestEnv, args: &Args) -> Result<Controller, Error> {
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

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn cpu(&self) -> f64 {
        process::cpu_seconds(self.pid())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The workspace root: the CRD is read from it, and gpuready built in it.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The release binary, built now unless given.
pub fn gpuready_binary(args: &Args) -> Result<PathBuf, Error> {
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

/// gpuready's counters, read from one scrape of its metrics.
pub struct Sample {
    pub writes: BTreeMap<String, u64>,
    pub requests: BTreeMap<String, u64>,
    pub reconciles: u64,
    /// Seconds spent in reconciles, all together.
    pub reconcile_seconds: f64,
    /// Failed reconciles by error kind.
    pub errors: BTreeMap<String, u64>,
    /// `gpuready_time_to_ready_seconds{kind="join"}`'s buckets, every profile.
    pub join_buckets: Vec<(f64, u64)>,
    /// Samples in the scrape: all, and the per-node families'.
    pub series: (usize, usize),
    /// The controller's channels (`gpuready_channel_*`) since it started.
    pub channels: Channels,
}

/// The deepest each channel got, and its overflows (messages coalesced over
/// its capacity), by channel.
#[derive(Clone, Debug, Default)]
pub struct Channels {
    pub peak: BTreeMap<String, u64>,
    pub overflows: BTreeMap<String, u64>,
}

impl std::fmt::Display for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.peak.is_empty() {
            return write!(f, "– (a gpuready without the gauges)");
        }
        let each: Vec<String> = self
            .peak
            .iter()
            .map(|(c, n)| {
                let over = self.overflows.get(c).copied().unwrap_or(0);
                format!("{c} {n} ({over} overflowed)")
            })
            .collect();
        write!(f, "{}", each.join(", "))
    }
}

pub fn sample(port: u16) -> Sample {
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
        channels: Channels {
            peak: process::family(&text, "gpuready_channel_depth_peak", "channel"),
            overflows: process::family(&text, "gpuready_channel_overflows_total", "channel"),
        },
    }
}

pub fn diff(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
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

/// gpuready started again on the converged fleet, returned once it has judged
/// every node and gone quiet (its reconcile count stopped moving).
pub async fn restart(
    bin: &Path,
    env: &TestEnv,
    args: &Args,
    n: usize,
) -> Result<Controller, Error> {
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

/// Waits until gpuready's reconcile count has reached `at_least` and stopped
/// moving for a second.
pub async fn quiet(ctl: &Controller, at_least: u64) -> Result<(), Error> {
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
