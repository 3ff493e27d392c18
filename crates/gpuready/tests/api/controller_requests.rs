//! What the controller costs the API server, counted rather than estimated:
//! every example cluster in deploy/examples converges with each write the
//! engine plans sent exactly once, a fresh instance over the converged cluster
//! (a restart, a failover) only lists and watches, and one node turning
//! broken and back costs at most two writes and one Event per transition. A
//! controller that rewrote unchanged nodes would load every API server it runs
//! against, forever; these numbers are the ones docs/performance.md quotes.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use gpuready_api::GpuNodeProfile;
use kube::Client;
use kube::api::Api;
use serde_json::json;
use support::*;

/// Converged: nothing left to change on any node, every profile's status
/// observed at its generation, and no write request for two seconds.
async fn converged(client: &Client, run: &Running) {
    eventually(60, "converged and quiet", || async {
        if !pending_changes(client).await.is_empty() {
            return None;
        }
        let profiles = Api::<GpuNodeProfile>::all(client.clone())
            .list(&Default::default())
            .await
            .ok()?;
        let observed = profiles.items.iter().all(|p| {
            p.status.as_ref().and_then(|s| s.observed_generation) == p.metadata.generation
        });
        let before = run.writes_sent();
        tokio::time::sleep(Duration::from_secs(2)).await;
        (observed && run.writes_sent() == before).then_some(())
    })
    .await;
}

/// What the engine plans over the cluster as it is.
struct Planned {
    node_patches: u64,
    condition_patches: u64,
    /// Nodes whose node patch carries a taint change and more (labels, other
    /// annotations): while other nodes' taint writes are pending, the gate
    /// sends such a taint alone first and the rest in a second node patch.
    may_split: u64,
}

async fn planned_writes(client: &Client) -> Planned {
    let report = live_report(client).await;
    let count = |f: &dyn Fn(&gpuready_core::NodeChanges) -> bool| {
        report.nodes.iter().filter(|a| f(&a.changes)).count() as u64
    };
    Planned {
        node_patches: count(&|c| c.patches_node()),
        condition_patches: count(&|c| c.conditions.is_some()),
        may_split: count(&|c| c.taint.is_some() && c.gating_part().1.patches_node()),
    }
}

fn counts(run: &Running) -> String {
    let by_kind: BTreeMap<&str, u64> = ["node", "conditions", "profile_status", "event"]
        .into_iter()
        .map(|k| (k, run.writes(k)))
        .collect();
    format!(
        "{} requests ({} writes, {} reads) by method {:?}; writes by kind {:?}",
        run.writes_sent() + run.reads_sent(),
        run.writes_sent(),
        run.reads_sent(),
        run.requests_by_method(),
        by_kind
    )
}

#[tokio::test]
async fn each_example_cluster_converges_in_a_counted_number_of_requests_and_a_resync_writes_nothing()
 {
    let examples = examples();
    assert_eq!(examples.len(), 4, "four example clusters");

    for example in &examples {
        let name = example.rsplit('/').next().unwrap_or(example);
        let env = env_with_crd().await;
        let client = env.client().expect("client");
        let nodes = create_example_nodes(&client, example).await;
        let profiles = apply_example_profiles(&client, example).await;

        let planned = planned_writes(&client).await;
        let run = start_controller(&env, test_args());
        converged(&client, &run).await;
        println!(
            "{name} ({} nodes, {} profiles) full convergence: {}",
            nodes.len(),
            profiles.len(),
            counts(&run)
        );
        assert!(run.node_writes() > 0, "{name}: the example needs changes");
        assert_eq!(
            run.writes("conditions"),
            planned.condition_patches,
            "{name}: each planned condition write sent once, nothing more"
        );
        let node = run.writes("node");
        assert!(
            (planned.node_patches..=planned.node_patches + planned.may_split).contains(&node),
            "{name}: each planned node patch sent once, or split once into its taint and the \
             rest (planned {}, {} may split; sent {node})",
            planned.node_patches,
            planned.may_split
        );
        run.stop().await.expect("clean stop");

        // A second instance over the converged cluster: lists, watches, no write.
        let resync = start_controller(&env, test_args());
        eventually(30, "caches synced", || async { resync.health.ready().ok() }).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        println!("{name} no-op resync: {}", counts(&resync));
        assert_eq!(
            resync.writes_sent(),
            0,
            "{name}: a no-op resync writes nothing"
        );
        resync.stop().await.expect("clean stop");
        check_example_verdicts(name, &client).await;
    }
}

/// Node, expected `GpuReady` (status, reason) or none written, tainted.
type Verdict = (&'static str, Option<(&'static str, &'static str)>, bool);

/// A few verdicts the examples are there to show, read back from the nodes.
async fn check_example_verdicts(example: &str, client: &Client) {
    let expect: &[Verdict] = match example {
        "rtx3090-rtx4070tis" => &[
            ("gpu-3090", Some(("True", "Ready")), false),
            ("gpu-4070tis", Some(("False", "DevicesUnhealthy")), true),
            ("gpu-3090-b", Some(("False", "GfdLabelsStale")), true),
        ],
        "talos-rtx3050" => &[("talos-gpu-1", Some(("True", "Ready")), false)],
        "kubemoot-gpu-workers" => &[
            ("gpu-worker-1", Some(("True", "Ready")), false),
            ("gpu-worker-2", Some(("False", "NoGfdLabels")), true),
            ("gpu-worker-3", Some(("False", "DevicesUnhealthy")), true),
            ("cpu-worker-1", None, false),
        ],
        "pascal-maxwell" => &[
            ("gtx1070-a", Some(("True", "Ready")), false),
            ("quadro-m5000", Some(("False", "FamilyExcluded")), true),
            // Observe: nothing written.
            ("gtx1070-cuda13", None, false),
            ("cpu-1", None, false),
        ],
        _ => &[],
    };
    for (node, condition, tainted) in expect {
        let n = get_node(client, node).await;
        let got = gpu_ready(&n);
        assert_eq!(
            got.as_ref().map(|(s, r)| (s.as_str(), r.as_str())),
            *condition,
            "{example}/{node}: GpuReady"
        );
        assert_eq!(gated(&n), *tainted, "{example}/{node}: tainted");
    }
    if example == "kubemoot-gpu-workers" {
        // The guide's taint stays on every worker, ready or not, beside ours.
        for worker in ["gpu-worker-1", "gpu-worker-2", "gpu-worker-3"] {
            let n = get_node(client, worker).await;
            assert!(
                has_taint(&n, "nvidia.com/gpu"),
                "{worker}: the guide's nvidia.com/gpu taint kept"
            );
        }
    }
    if example == "rtx3090-rtx4070tis" {
        let n = get_node(client, "gpu-3090-b").await;
        assert!(
            has_taint(&n, "karpenter.sh/disrupted"),
            "Karpenter's taint kept"
        );
    }
}

/// Occurrences of Events about the object `name` (a repeated Event is one
/// object whose series counts the repeats).
async fn event_occurrences(client: &Client, name: &str) -> i32 {
    events_about(client, name)
        .await
        .iter()
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum()
}

/// One node, flipped broken → healthy → broken: each transition costs at most
/// two writes (the node's merge patch, its condition patch) and one Event, and
/// a quiet node costs none.
#[tokio::test]
async fn a_transition_costs_at_most_two_writes_and_one_event() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    create_node(&client, "gpu-1", rtx3090_in("a"), 1, json!([])).await;
    // A second node that stays broken keeps the profile NotReady throughout, so
    // the profile's own transition Events stay out of the count.
    create_node(&client, "gpu-2", rtx3090_in("a"), 1, json!([])).await;
    set_node_status(&client, "gpu-2", 1, 0, true).await;
    apply_profile(&client, &rtx3090_profile("rtx3090", "a", "")).await;
    let run = start_controller(&env, test_args());
    converged(&client, &run).await;
    for (step, allocatable) in [("broken", 0), ("repaired", 1), ("broken again", 0)] {
        let before = (
            run.node_writes(),
            run.writes("event"),
            event_occurrences(&client, "gpu-1").await,
        );
        set_node_status(&client, "gpu-1", 1, allocatable, true).await;
        eventually(30, step, || async {
            let n = get_node(&client, "gpu-1").await;
            (gated(&n) == (allocatable == 0)
                && gpu_ready(&n).is_some_and(|(s, _)| (s == "True") == (allocatable == 1)))
            .then_some(())
        })
        .await;
        converged(&client, &run).await;
        let writes = run.node_writes() - before.0;
        let events = run.writes("event") - before.1;
        println!(
            "{step}: {writes} node writes, {events} Events; {}",
            counts(&run)
        );
        assert!(writes <= 2, "{step}: {writes} node writes");
        assert_eq!(events, 1, "{step}: one Event for the GpuReady transition");
    }
    // Quiet: a change gpuready does not judge (a foreign label) writes nothing.
    let before = run.writes_sent();
    set_labels(&client, "gpu-1", json!({ "example.com/unrelated": "x" })).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(run.writes_sent(), before, "no write without a transition");
    run.stop().await.expect("clean stop");
}
