//! Everything an operator tunes on `gpuready run`, as flags with env fallbacks.

use std::net::SocketAddr;
use std::time::Duration;

use gpuready_core::brake::BrakeConfig;

use crate::cli::{LogFormat, parse_duration};

/// A duration of at least `min`: a zero heartbeat or window would turn every
/// reconcile into writes (or disable what the flag promises) without a word.
fn duration_at_least(s: &str, min: Duration, what: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < min {
        return Err(format!(
            "{s:?} is too short: {what} must be at least {}s",
            min.as_secs()
        ));
    }
    Ok(d)
}

/// `--heartbeat`: `off` (or `0s`, the default) never rewrites an unchanged
/// condition; otherwise at least 10s (every heartbeat rewrites each node's
/// condition).
pub fn parse_heartbeat(s: &str) -> Result<Duration, String> {
    if matches!(s.trim(), "off" | "0" | "0s") {
        return Ok(Duration::ZERO);
    }
    duration_at_least(s, Duration::from_secs(10), "the heartbeat (or `off`)")
}

/// `--brake-window`: at least 1s.
pub fn parse_brake_window(s: &str) -> Result<Duration, String> {
    duration_at_least(s, Duration::from_secs(1), "the brake window")
}

/// `--brake-threshold`: a share in (0, 1]; 1 disables the brake.
pub fn parse_brake_threshold(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number: give a share like 0.5"))?;
    // NaN fails this comparison too, so it cannot slip through.
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!(
            "{s:?} must be a share above 0 and at most 1 (0.5 = half the profile's nodes; 1 disables the brake)"
        ))
    }
}

/// `--brake-min-nodes`: at least 1 (0 would let a single node engage the brake).
pub fn parse_min_nodes(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?} must be a whole number of at least 1")),
    }
}

/// The longest `--identity`: it names this replica's Lease field manager
/// (`gpuready-lease-<identity>`), which the API server caps at 128 characters,
/// and Events' reporting instance (also 128).
pub const IDENTITY_MAX_LEN: usize = 100;

/// `--identity`: not empty, at most [`IDENTITY_MAX_LEN`] bytes (the API
/// server counts bytes), no control characters.
pub fn parse_identity(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > IDENTITY_MAX_LEN || s.chars().any(char::is_control) {
        return Err(format!(
            "{s:?} must be 1 to {IDENTITY_MAX_LEN} bytes, no control characters (the pod name in-cluster)"
        ));
    }
    Ok(s.to_owned())
}

/// What gpuready does about the NFD CRDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NfdCrdMode {
    /// Install missing and upgrade older NFD CRDs (never downgrade or delete).
    Apply,
    /// Report what Apply would change; write nothing.
    Check,
    /// Leave NFD CRDs alone.
    Off,
}

#[derive(Clone, Debug, clap::Args)]
pub struct RunArgs {
    /// Address of the HTTP server for /metrics, /healthz and /readyz.
    #[arg(long, env = "GPUREADY_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,

    /// Nodes reconciled in parallel.
    #[arg(long, env = "GPUREADY_CONCURRENCY", default_value_t = 8,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,

    /// Client-side limit on requests per second to the API server. 0 (the
    /// default): none — the API server's priority and fairness protects it, and
    /// --concurrency bounds what gpuready has in flight (docs/performance.md
    /// has the measurements behind this default).
    #[arg(long, env = "GPUREADY_CLIENT_QPS", default_value_t = 0)]
    pub client_qps: u32,

    /// Requests allowed in a burst above --client-qps (ignored when it is 0).
    #[arg(long, env = "GPUREADY_CLIENT_BURST", default_value_t = 0)]
    pub client_burst: u32,

    /// Rewrite unchanged node conditions after this long (a per-node liveness
    /// stamp in lastHeartbeatTime, at N/heartbeat writes per second forever).
    /// `off` (default): a condition is written only when it changes; liveness is
    /// the leader Lease and the profile status.
    #[arg(long, env = "GPUREADY_HEARTBEAT", default_value = "off", value_parser = parse_heartbeat)]
    pub heartbeat: Duration,

    /// Only watch nodes matching this label selector (e.g. `nvidia.com/gpu.present=true`)
    /// to keep memory small on large mixed clusters. Nodes outside it are never touched.
    #[arg(long, env = "GPUREADY_NODE_SELECTOR")]
    pub node_selector: Option<String>,

    /// How the Node watch gets its first state: `auto` (default) streams it
    /// (a watch with sendInitialEvents: no page of 500 Nodes held at once)
    /// and lists it in pages where the API server refuses that (WatchList is
    /// off by default in Kubernetes 1.33); `paged` always lists in pages.
    #[arg(long, env = "GPUREADY_INITIAL_LIST", value_enum,
          default_value_t = crate::controller::watch::initial_list::InitialList::Auto)]
    pub initial_list: crate::controller::watch::initial_list::InitialList,

    /// Safety brake: share (0..1) of a profile's nodes that must turn not-ready
    /// within --brake-window to stop adding taints. 1 disables the brake.
    #[arg(long, env = "GPUREADY_BRAKE_THRESHOLD", default_value_t = 0.5, value_parser = parse_brake_threshold)]
    pub brake_threshold: f64,

    /// Safety brake window.
    #[arg(long, env = "GPUREADY_BRAKE_WINDOW", default_value = "5m", value_parser = parse_brake_window)]
    pub brake_window: Duration,

    /// Safety brake: fewer turns than this never engage it (small pools).
    #[arg(long, env = "GPUREADY_BRAKE_MIN_NODES", default_value_t = 3,
          value_parser = parse_min_nodes)]
    pub brake_min_nodes: usize,

    /// Run leader election on a coordination.k8s.io Lease; only the leader writes.
    #[arg(long, env = "GPUREADY_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// Name of the Lease.
    #[arg(long, env = "GPUREADY_LEASE_NAME", default_value = "gpuready")]
    pub lease_name: String,

    /// Namespace of the Lease (the pod's namespace in-cluster).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,

    /// Lease duration in seconds: how long a dead leader blocks a successor. The
    /// leader renews every third of it and stops writing two thirds after the
    /// last renewal it saw (the renew deadline).
    #[arg(long, env = "GPUREADY_LEASE_DURATION", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub lease_duration_seconds: u64,

    /// This replica's identity in the Lease and in Events (the pod name
    /// in-cluster); it must differ between replicas. Without it: $HOSTNAME.
    #[arg(long, env = "POD_NAME", value_parser = parse_identity)]
    pub identity: Option<String>,

    /// What to do about the NFD CRDs Helm never upgrades.
    #[arg(long, env = "GPUREADY_NFD_CRDS", value_enum, default_value_t = NfdCrdMode::Apply)]
    pub nfd_crds: NfdCrdMode,

    /// Log format.
    #[arg(long, env = "GPUREADY_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Namespace where `gpuready probe` publishes its reports (ConfigMaps
    /// `gpuready-probe-<node>`). Unset: no report is read (and no RBAC on
    /// ConfigMaps is needed); the Health layer then sees every node without one.
    #[arg(long, env = "GPUREADY_PROBE_NAMESPACE")]
    pub probe_namespace: Option<String>,
}

impl RunArgs {
    pub fn brake(&self) -> BrakeConfig {
        BrakeConfig {
            threshold: self.brake_threshold,
            window_seconds: i64::try_from(self.brake_window.as_secs()).unwrap_or(i64::MAX),
            min_nodes: self.brake_min_nodes,
        }
    }

    pub fn identity(&self) -> String {
        self.identity.clone().unwrap_or_else(|| {
            std::env::var("HOSTNAME").unwrap_or_else(|_| format!("gpuready-{}", std::process::id()))
        })
    }
}

#[cfg(test)]
mod tests;
