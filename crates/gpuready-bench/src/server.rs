//! The control plane under the bench: its flags, and what the bench reads of
//! it (memory, CPU, etcd's file, one Node's size), kept apart from the phases
//! that drive it.

use std::time::{Duration, Instant};

use gpuready_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;

use crate::error::Error;
use crate::process;

/// The control plane's flags for the benchmark, the same for the floor and
/// gpuready at every size. The API server's in-flight limits are raised from
/// 400 + 200 (a test cluster's defaults; the benchmark's admin user is exempt
/// from priority and fairness anyway), etcd's backend quota from 2 GiB (100,000
/// nodes with the history of a fleet-wide burst come near it) and the API
/// server compacts etcd every minute instead of every five, so history of
/// earlier bursts does not pile up in etcd's memory.
pub fn tuning() -> gpuready_testenv::Tuning {
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
pub struct ServerMemory {
    pub apiserver: (u64, u64),
    pub etcd: (u64, u64),
}

pub fn server_memory(env: &TestEnv) -> ServerMemory {
    ServerMemory {
        apiserver: env
            .apiserver_pid()
            .map(process::rss_kib)
            .unwrap_or_default(),
        etcd: process::rss_kib(env.etcd_pid()),
    }
}

/// The size of etcd's database file (bbolt grows it as it needs pages and
/// never shrinks it without a defragmentation).
pub fn etcd_db_bytes(env: &TestEnv) -> u64 {
    std::fs::metadata(env.dir().join("etcd/member/snap/db")).map_or(0, |m| m.len())
}

/// The size of one Node object's JSON, and of its managedFields entries by
/// gpuready's field managers within it.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeBytes {
    pub total: usize,
    pub gpuready_managed_fields: usize,
}

pub async fn node_bytes(client: &Client, name: &str) -> Result<NodeBytes, Error> {
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

/// CPU seconds of kube-apiserver and etcd together: what a phase cost the
/// control plane, whose two cores the client under test shares.
pub fn server_cpu(env: &TestEnv) -> f64 {
    env.apiserver_pid().map_or(0.0, process::cpu_seconds) + process::cpu_seconds(env.etcd_pid())
}

/// Waits until kube-apiserver and etcd are idle — under a tenth of a core
/// over two seconds — for at most a minute, and says how long it waited. A
/// timed half that starts while the control plane still works off the last
/// burst (etcd's compaction, the Go runtime's collection of the burst's
/// garbage) would carry that work: gpuready's start right after the bench
/// took its writes back cost the API server 56.6 s of CPU where the floor's
/// untaint before it cost 38.9 s (2026-12-05, 10,000 nodes).
pub async fn quiet_server(env: &TestEnv) {
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
