//! The repair annotation against the real API server: a fatal XID the probe
//! recorded keeps the node gated until an operator marks the repair
//! (`gpuready.io/repaired-at`); a mark in the future is refused with an Event
//! and a condition message and changes nothing; a mark after the fault
//! releases the node, across the probe's later reports; a fault seen again
//! after the repair gates it again.

use crate::support;

use gpuready::probe::publish::publish;
use gpuready_api::keys::{health_reasons, lifecycle as lc};
use gpuready_api::probe::ProbeReport;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::*;

const NODE: &str = "gpu-1";

fn report(xid79_at: Option<jiff::Timestamp>) -> ProbeReport {
    one_gpu_report(NODE, xid79_at)
}

async fn annotate(client: &Client, value: &str) {
    Api::<Node>::all(client.clone())
        .patch(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({ "metadata": { "annotations": { lc::ANNOTATION_REPAIRED_AT: value } } }),
            ),
        )
        .await
        .expect("annotate");
}

async fn wait_for(client: &Client, what: &str, f: impl Fn(&Node) -> bool) -> Node {
    eventually(30, what, || async {
        let n = get_node(client, NODE).await;
        f(&n).then_some(n)
    })
    .await
}

#[tokio::test]
async fn a_repair_mark_clears_a_fatal_xid_and_a_future_one_is_refused() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let ns = env.create_namespace("gpuready").await.expect("namespace");
    create_node(&client, NODE, rtx3090_in("r"), 1, json!([])).await;
    // The recorded report is an H200's; this node is labelled as a 3090.
    apply_profile(
        &client,
        &rtx3090_profile("repair", "r", "probe: { checkLabels: false }"),
    )
    .await;
    let run = start_controller(&env, run_args(&[&format!("--probe-namespace={ns}")]));
    let xid_at = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
    publish(&client, &ns, NODE, &report(Some(xid_at)))
        .await
        .expect("publish");
    let n = wait_for(&client, "gated for the fatal XID", |n| {
        gpu_ready(n).is_some_and(|(_, r)| r == health_reasons::FATAL_XID) && gated(n)
    })
    .await;
    say!("before the repair: GpuReady {:?}", gpu_ready(&n));

    // A mark an hour in the future: refused, an Event, nothing changes.
    let future = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600)).to_string();
    annotate(&client, &future).await;
    let n = wait_for(&client, "the refusal in the condition", |n| {
        gpu_ready_message(n).contains("is refused and changes nothing")
    })
    .await;
    assert_eq!(
        gpu_ready(&n).map(|(_, r)| r).as_deref(),
        Some(health_reasons::FATAL_XID)
    );
    assert!(gated(&n), "a refused mark changes nothing");
    eventually(30, "a RepairRefused Event", || async {
        events_about(&client, NODE)
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(lc::EVENT_REPAIR_REFUSED))
    })
    .await;
    let event = events_about(&client, NODE)
        .await
        .into_iter()
        .find(|e| e.reason.as_deref() == Some(lc::EVENT_REPAIR_REFUSED))
        .expect("event");
    say!(
        "future mark {future}: Event {} {}: {}",
        event.type_.as_deref().unwrap_or_default(),
        lc::EVENT_REPAIR_REFUSED,
        event.note.as_deref().unwrap_or_default()
    );

    // The repair, after the fault: the XID no longer counts; the probe's
    // next reports (same record) keep it cleared.
    let repaired = jiff::Timestamp::now().to_string();
    annotate(&client, &repaired).await;
    let n = wait_for(&client, "released after the repair", |n| {
        gpu_ready(n) == Some(("True".into(), "Ready".into())) && !gated(n)
    })
    .await;
    say!(
        "repaired-at {repaired}: GpuReady True Ready: {}",
        gpu_ready_message(&n)
    );
    assert!(
        gpu_ready_message(&n).contains("1 fault record(s) from before the repair"),
        "{}",
        gpu_ready_message(&n)
    );
    publish(&client, &ns, NODE, &report(Some(xid_at)))
        .await
        .expect("publish");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(!gated(&get_node(&client, NODE).await));

    // A new XID after the repair gates the node again.
    publish(&client, &ns, NODE, &report(Some(jiff::Timestamp::now())))
        .await
        .expect("publish");
    wait_for(&client, "gated again by a new fault", |n| {
        gpu_ready(n).is_some_and(|(_, r)| r == health_reasons::FATAL_XID) && gated(n)
    })
    .await;
    let refusals = event_reasons(&client, NODE)
        .await
        .into_iter()
        .filter(|r| r == lc::EVENT_REPAIR_REFUSED)
        .count();
    assert_eq!(refusals, 1, "one Event for the refused mark");
    run.stop().await.expect("clean stop");
}
