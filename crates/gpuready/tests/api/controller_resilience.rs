//! The controller against a real kube-apiserver when the world is not quiet:
//! another writer flapping its own taint on the same node never loses it while
//! gpuready flips its own (the resourceVersion-checked read-modify-write), of two
//! replicas only the Lease holder writes and the standby takes over when it
//! stops, and after the API server restarts gpuready converges new changes
//! without being restarted itself. Each is a way a real cluster differs from a
//! quiet test one.

use crate::support;

use std::time::{Duration, Instant};

use gpuready_api::keys;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

/// The concurrent writer's own taint.
const FLAP: &str = "other.example/flap";

/// What the concurrent writer saw.
#[derive(Debug, Default)]
struct WriterReport {
    /// Reads that followed one of its successful writes and were checked.
    checks: usize,
    writes: usize,
    conflicts: usize,
    /// Reads where its taint, or the admission's, was not as last written.
    lost: Vec<String>,
}

/// Another controller: toggles its own taint as fast as it can, the right way
/// (GET, change only its key, merge patch carrying the resourceVersion, retry
/// on 409), and after each successful write checks at its next read that its
/// taint is still as it left it.
async fn flap_own_taint(client: Client, name: String, stop: CancellationToken) -> WriterReport {
    let api: Api<Node> = Api::all(client);
    let mut report = WriterReport::default();
    let mut last_written: Option<bool> = None;
    while !stop.is_cancelled() {
        let node = api.get(&name).await.expect("get node");
        let present = has_taint(&node, FLAP);
        if let Some(want) = last_written {
            report.checks += 1;
            if present != want {
                report.lost.push(format!(
                    "rv {}: {FLAP} present={present}, last written {want}",
                    node.resource_version().unwrap_or_default()
                ));
            }
        }
        if !has_taint(&node, ADMISSION_TAINT) {
            report.lost.push(format!(
                "rv {}: {ADMISSION_TAINT} gone",
                node.resource_version().unwrap_or_default()
            ));
        }
        let mut list = taints(&node);
        if present {
            list.retain(|t| t.key != FLAP);
        } else {
            list.push(Taint {
                key: FLAP.into(),
                value: Some("x".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            });
        }
        let patch = json!({
            "metadata": { "resourceVersion": node.resource_version() },
            "spec": { "taints": list },
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                report.writes += 1;
                last_written = Some(!present);
            }
            Err(kube::Error::Api(s)) if s.code == 409 => report.conflicts += 1,
            Err(e) => panic!("flap writer: {e}"),
        }
    }
    report
}

#[tokio::test]
async fn a_concurrent_writer_flapping_its_own_taint_never_loses_it_while_gpuready_flips_its_own() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    single_node_pool(&client, true).await;
    let run = start_controller(&env, test_args());
    wait_gated(&client, "gpu-1", false, 30).await;
    let history = record_node(&client, "gpu-1").await;

    let stop = CancellationToken::new();
    let writer = tokio::spawn(flap_own_taint(client.clone(), "gpu-1".into(), stop.clone()));
    // Flip the GPU stack so gpuready adds and removes its taint, 12 times each.
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(180), async {
        for _ in 0..12 {
            set_node_status(&client, "gpu-1", 1, 0, true).await;
            wait_gated(&client, "gpu-1", true, 30).await;
            set_node_status(&client, "gpu-1", 1, 1, true).await;
            wait_gated(&client, "gpu-1", false, 30).await;
        }
    })
    .await
    .expect("24 readiness flips within 180 s");
    // Let the writer run a little on a quiet node too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    let report = writer.await.expect("writer task");
    let elapsed = started.elapsed();

    let versions = history.snapshot();
    let gpuready_changes = transitions(&versions, gated);
    let flap_changes = transitions(&versions, |n| has_taint(n, FLAP));
    let requests = run.requests_by_method();
    // Every PATCH that was not a counted write was a taint patch refused with
    // 409 (Events are POSTed, then PATCHed as a series when they repeat).
    let method = |m: &str| requests.get(m).copied().unwrap_or(0);
    let event_patches = run.writes("event").saturating_sub(method("POST"));
    let gpuready_conflicts = method("PATCH")
        .saturating_sub(run.node_writes() + run.writes("profile_status") + event_patches);
    println!(
        "in {elapsed:.1?}: writer {} writes, {} checks, {} conflicts; gpuready taint changes \
         observed {gpuready_changes} ({} node patches, {gpuready_conflicts} patches refused \
         with 409); writer taint changes observed {flap_changes}; {} node versions",
        report.writes,
        report.checks,
        report.conflicts,
        run.writes("node"),
        versions.len()
    );
    assert_eq!(
        report.lost,
        Vec::<String>::new(),
        "no foreign taint ever lost"
    );
    assert!(report.checks >= 50, "enough checks: {report:?}");
    assert!(
        gpuready_changes >= 20,
        "gpuready flipped its taint often enough"
    );
    assert!(
        versions.iter().all(|n| has_taint(n, ADMISSION_TAINT)),
        "the admission's taint is in every version of the node"
    );

    // Once everyone is quiet, gpuready agrees with the node as it is.
    eventually(30, "converged", || async {
        pending_changes(&client).await.is_empty().then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
}

/// A replica under leader election on the Lease `default/gpuready`, with a
/// short lease so a takeover fits in a test.
fn ha_args(identity: &str) -> gpuready::controller::RunArgs {
    run_args(&[
        "--leader-elect=true",
        &format!("--identity={identity}"),
        "--lease-name=gpuready",
        "--lease-namespace=default",
        "--lease-duration-seconds=4",
    ])
}

async fn lease_holder(client: &Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), "default")
        .get_opt("gpuready")
        .await
        .expect("get lease")?
        .spec?
        .holder_identity
}

#[tokio::test]
async fn of_two_replicas_only_the_leader_writes_and_the_standby_takes_over_when_it_stops() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    create_node(&client, "good", rtx3090_in("a"), 1, json!([])).await;
    create_node(&client, "broken", rtx3090_in("a"), 1, json!([])).await;
    set_node_status(&client, "broken", 1, 0, true).await;
    apply_profile(&client, &rtx3090_profile("rtx3090", "a", "")).await;

    let a = start_controller(&env, ha_args("gpuready-a"));
    eventually(30, "a leads", || async { a.is_leader().then_some(()) }).await;
    let b = start_controller(&env, ha_args("gpuready-b"));
    eventually(30, "b is ready as a standby", || async {
        b.health.ready().ok()
    })
    .await;
    wait_gated(&client, "broken", true, 30).await;
    wait_gated(&client, "good", false, 30).await;
    // Several lease durations with both running.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(a.is_leader() && !b.is_leader());
    assert_eq!(lease_holder(&client).await.as_deref(), Some("gpuready-a"));
    assert!(a.node_writes() > 0, "the leader writes");
    assert_eq!(b.node_writes(), 0, "the standby writes no node");
    assert_eq!(b.writes("profile_status"), 0, "nor any status");
    assert_eq!(b.health.ready(), Ok(()), "and reports ready as a standby");

    // The leader stops gracefully (releasing the lease); a change made after
    // that is converged by the other replica.
    a.stop().await.expect("a stops cleanly");
    let stopped = Instant::now();
    assert_ne!(
        lease_holder(&client).await.as_deref(),
        Some("gpuready-a"),
        "a released the lease on its way out"
    );
    set_node_status(&client, "good", 1, 0, true).await;
    wait_gated(&client, "good", true, 30).await;
    println!(
        "takeover: b converged a change {:.1?} after a stopped (lease duration 4 s)",
        stopped.elapsed()
    );
    assert!(b.is_leader());
    assert_eq!(lease_holder(&client).await.as_deref(), Some("gpuready-b"));
    assert!(b.node_writes() > 0, "the new leader writes");
    b.stop().await.expect("b stops cleanly");
}

#[tokio::test]
async fn after_the_api_server_restarts_gpuready_converges_new_changes_without_a_restart() {
    let mut env = env_with_crd().await;
    let client = env.client().expect("client");
    single_node_pool(&client, true).await;
    let run = start_controller(&env, test_args());
    wait_gated(&client, "gpu-1", false, 30).await;

    // A quick restart, then a node change right after it. The watches come back
    // through the watcher's client-go-like backoff (0.8 s doubling up to 30 s,
    // reset after two quiet minutes), hence the minute allowed.
    env.restart_apiserver()
        .await
        .expect("restart kube-apiserver");
    let restarted = Instant::now();
    set_node_status(&client, "gpu-1", 1, 0, true).await;
    wait_gated(&client, "gpu-1", true, 60).await;
    println!("after a restart: converged in {:.1?}", restarted.elapsed());

    // A longer outage with nothing changing, then a node change and a profile
    // change: both watches came back.
    env.stop_apiserver();
    tokio::time::sleep(Duration::from_secs(5)).await;
    env.start_apiserver().await.expect("start kube-apiserver");
    let restarted = Instant::now();
    set_node_status(&client, "gpu-1", 1, 1, true).await;
    wait_gated(&client, "gpu-1", false, 60).await;
    println!(
        "after a 5 s outage: converged in {:.1?}",
        restarted.elapsed()
    );
    apply_profile(
        &client,
        &rtx3090_profile("rtx3090", "a", "").replace("\"570.0\"", "\"600.0\""),
    )
    .await;
    eventually(60, "the profile change reaches the node", || async {
        let n = get_node(&client, "gpu-1").await;
        (gated(&n) && gpu_ready(&n) == Some(("False".into(), "DriverTooOld".into()))).then_some(())
    })
    .await;
    assert!(!run.task.is_finished(), "the controller never exited");
    assert_eq!(
        label(&get_node(&client, "gpu-1").await, keys::LABEL_READY).as_deref(),
        Some("false")
    );
    run.stop().await.expect("clean stop");
}
