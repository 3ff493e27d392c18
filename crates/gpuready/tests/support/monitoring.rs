//! The monitoring suites' parts (tests/monitoring/build.sh, cached under
//! `~/.cache/gpuready/monitoring`) and what both suites agree on: the labels
//! Prometheus adds to a series it scrapes through the chart's ServiceMonitor.

use std::path::PathBuf;
use std::process::Command;

use super::repo_root;

/// Labels Prometheus adds to every sample scraped through the chart's
/// ServiceMonitor (prometheus-operator's relabelling of an endpoints target):
/// the rule tests' input series carry them, the live suite finds them.
pub const TARGET_LABELS: [&str; 7] = [
    "container",
    "endpoint",
    "instance",
    "job",
    "namespace",
    "pod",
    "service",
];

fn build_sh(arg: &str) -> String {
    let out = Command::new("bash")
        .arg(repo_root().join("tests/monitoring/build.sh"))
        .arg(arg)
        .output()
        .expect("run tests/monitoring/build.sh");
    assert!(
        out.status.success(),
        "tests/monitoring/build.sh {arg} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned()
}

/// promtool (fetched from Debian's package when missing).
pub fn promtool() -> String {
    build_sh("--promtool")
}

/// The folder of the monitoring parts (built by `tests/monitoring/build.sh`).
pub fn monitoring_dir() -> PathBuf {
    PathBuf::from(build_sh("--print-dir"))
}
