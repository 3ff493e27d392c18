//! The controller against a real kube-apiserver: convergence, no-op resyncs,
//! layer flips, cleanup, and the taint written beside a concurrent writer.

use crate::support;

use gpuready_api::keys;
use kube::ResourceExt;
use serde_json::json;
use support::*;

fn profile() -> String {
    rtx3090_profile("rtx3090", "rtx3090", "")
}

#[tokio::test]
async fn converges_then_a_resync_writes_nothing_then_cleans_up_on_profile_deletion() {
    let env = env_with_crd().await;
    let client = env.client().unwrap();
    // good: ready; broken: allocatable 0. Both carry a foreign taint.
    let foreign =
        json!([{ "key": "example.org/maintenance", "value": "x", "effect": "PreferNoSchedule" }]);
    create_node(&client, "good", rtx3090_in("rtx3090"), 1, foreign.clone()).await;
    create_node(&client, "broken", rtx3090_in("rtx3090"), 1, foreign.clone()).await;
    set_node_status(&client, "broken", 1, 0, true).await;
    create_node(&client, "cpu", Default::default(), 0, json!([])).await;
    apply_profile(&client, &profile()).await;

    let run = start_controller(&env, test_args());
    eventually(30, "broken tainted, good labelled ready", || async {
        let broken = get_node(&client, "broken").await;
        let good = get_node(&client, "good").await;
        (taint_keys(&broken).contains(&keys::DEFAULT_TAINT_KEY.to_owned())
            && good.labels().get(keys::LABEL_READY).map(String::as_str) == Some("true")
            && good.labels().get("example.org/gpu").map(String::as_str) == Some("rtx3090")
            && gpu_ready(&broken).is_some_and(|(s, r)| s == "False" && r == "DevicesUnhealthy")
            && gpu_ready(&good).is_some_and(|(s, _)| s == "True"))
        .then_some(())
    })
    .await;
    let broken = get_node(&client, "broken").await;
    assert!(
        taint_keys(&broken).contains(&"example.org/maintenance".to_owned()),
        "foreign taint kept"
    );
    // The API server's TaintNodesByCondition admission adds node.kubernetes.io/not-ready
    // at creation: one more foreign taint gpuready must leave alone.
    let good = get_node(&client, "good").await;
    let foreign_of = |n: &k8s_openapi::api::core::v1::Node| {
        taint_keys(n)
            .into_iter()
            .filter(|k| !k.starts_with("gpuready.io/") && k != keys::DEFAULT_TAINT_KEY)
            .collect::<Vec<_>>()
    };
    let foreign_before = foreign_of(&good);
    assert!(foreign_before.contains(&"example.org/maintenance".to_owned()));
    assert!(!taint_keys(&good).contains(&keys::DEFAULT_TAINT_KEY.to_owned()));
    let cpu = get_node(&client, "cpu").await;
    assert!(
        cpu.labels().get(keys::LABEL_READY).is_none(),
        "ungoverned node untouched"
    );

    // Profile status converges.
    let api: kube::Api<gpuready_api::GpuNodeProfile> = kube::Api::all(client.clone());
    eventually(30, "profile status counts", || async {
        let p = api.get("rtx3090").await.ok()?;
        let s = p.status?;
        (s.matched_nodes == 2 && s.ready_nodes == 1 && s.not_ready_nodes == 1).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let converge_writes = run.writes_sent();
    let converge_reads = run.reads_sent();
    println!(
        "convergence: {converge_writes} write requests, {converge_reads} reads (node writes {})",
        run.node_writes()
    );
    run.stop().await.expect("clean stop");

    // A fresh instance lists everything again: zero writes.
    let run = start_controller(&env, test_args());
    eventually(30, "caches synced", || async { run.health.ready().ok() }).await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        run.node_writes(),
        0,
        "a no-op resync writes nothing to nodes"
    );
    assert_eq!(run.writes("profile_status"), 0, "nor to profile status");
    println!("no-op resync: {} write requests", run.writes_sent());
    assert_eq!(run.writes_sent(), 0);

    // Fix the broken node: the taint goes, the foreign one stays.
    set_node_status(&client, "broken", 1, 1, true).await;
    eventually(30, "broken untainted", || async {
        let n = get_node(&client, "broken").await;
        (taint_keys(&n) == foreign_before).then_some(())
    })
    .await;

    // Delete the profile: gpuready removes everything it put there.
    delete_profile(&client, "rtx3090").await;
    eventually(30, "nodes released", || async {
        let n = get_node(&client, "good").await;
        let released = !n
            .labels()
            .keys()
            .any(|k| k.starts_with("gpuready.io/") || k == "example.org/gpu")
            && gpu_ready(&n).is_none()
            && taint_keys(&n) == foreign_before;
        released.then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
}
