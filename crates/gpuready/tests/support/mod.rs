//! The one fixtures module of `crates/gpuready/tests`: every test binary that
//! needs a helper declares `mod support;` (a suite's `main.rs` through
//! `#[path]`) and uses `support::*`, so a helper is written once, here, by
//! topic:
//!
//! - [`fixtures`]: nodes (created the way kubelet does), profiles and the
//!   example clusters under `deploy/examples`;
//! - [`observe`]: reading back what gpuready left on nodes and profiles;
//! - [`harness`]: gpuready's controller in-process, its flags, its metrics, and
//!   the engine's own verdict over a live cluster;
//! - [`devices`]: DRA GPU nodes: the H200 ResourceSlice, the probe's report of
//!   its GPUs, a profile for such a pool;
//! - [`crds`]: installing CRDs and waiting for them, and NFD's upstream CRDs and
//!   objects;
//! - [`monitoring`]: promtool and the other monitoring parts, the target
//!   labels of a scraped series;
//! - [`tools`]: running kubectl, helm and the `gpuready` binary;
//! - [`chart`]: rendering and installing the Helm chart, reading YAML streams;
//! - [`data`]: test tables read from YAML files under `tests/fixtures`;
//! - [`rng`]: the seeded random source of the mutation tests;
//! - [`cluster`]: the real single-node cluster of tests/cluster (kubelet,
//!   containerd) for the end-to-end suite, and a heartbeat for kubelet-less nodes.
//!
//! A test binary uses only part of it, so unused helpers are not warnings here.
#![allow(dead_code, unused_imports, unused_macros)]

pub mod chart;
pub mod cluster;
pub mod crds;
pub mod data;
pub mod devices;
pub mod fixtures;
pub mod harness;
pub mod monitoring;
pub mod observe;
pub mod rng;
pub mod tools;

/// Progress and measured seconds of the end-to-end suites, written past the
/// test harness's capture so a CI log shows them for a passing run too.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

/// Seconds since `t`, to a tenth: how the end-to-end suites report timings.
pub fn since(t: std::time::Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 10.0).round() / 10.0
}

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

pub use chart::*;
pub use crds::*;
pub use data::*;
pub use devices::*;
pub use fixtures::*;
pub use harness::*;
pub use monitoring::*;
pub use observe::*;
pub use tools::*;

/// The repository's root (test files name repository paths relative to it).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn now_s() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// Polls `check` until it returns `Some`, or panics with `what` after `secs`.
/// Tests wait for an outcome rather than sleep a fixed time, so a loaded
/// machine makes them slower, not flaky.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
