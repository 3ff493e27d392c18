//! The not-ready deadline against the real API server: counted from state the
//! API server keeps (the `GpuReady` condition's lastTransitionTime), it turns
//! the condition's reason, publishes one Event, sets the remediation label and
//! the `past_deadline` metric, and never cordons the node.

use crate::support;

use gpuready_api::keys;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::*;

#[tokio::test]
async fn a_node_past_its_not_ready_deadline_is_marked_not_removed() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let name = "never-ready";
    // A GPU node whose device plugin never registered (allocatable 0).
    create_node(&client, name, rtx3090_in(POOL), 0, json!([])).await;
    // gpuready judged it not ready two hours ago (as a previous replica would
    // have written): the deadline counts from that durable transition time.
    let two_hours_ago = jiff::Timestamp::from_second(now_s() - 7200)
        .expect("time")
        .to_string();
    Api::<Node>::all(client.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(&json!({"status": {"conditions": [{
                "type": keys::CONDITION_GPU_READY, "status": "False",
                "reason": "ResourceNotAdvertised", "message": "earlier verdict",
                "lastHeartbeatTime": two_hours_ago, "lastTransitionTime": two_hours_ago,
            }]}})),
        )
        .await
        .expect("old condition");
    apply_profile(
        &client,
        &rtx3090_profile(
            "deadline",
            POOL,
            "notReadyDeadline: { seconds: 3600, since: LastReady, label: true }",
        ),
    )
    .await;
    let run = start_controller(&env, test_args());
    eventually(60, "the node is marked past its deadline", || async {
        let n = get_node(&client, name).await;
        (gpu_ready(&n)
            == Some((
                "False".into(),
                keys::reasons::NOT_READY_DEADLINE_EXCEEDED.into(),
            ))
            && label(&n, keys::LABEL_DEADLINE_EXCEEDED).as_deref() == Some("true"))
        .then_some(())
    })
    .await;
    eventually(30, "one deadline Event", || async {
        let reasons = event_reasons(&client, name).await;
        (reasons
            .iter()
            .filter(|r| *r == keys::reasons::NOT_READY_DEADLINE_EXCEEDED)
            .count()
            == 1)
            .then_some(())
    })
    .await;
    eventually(30, "the past_deadline metric", || async {
        (run.sample("gpuready_nodes{profile=\"deadline\",state=\"past_deadline\"}") == 1.0)
            .then_some(())
    })
    .await;
    let n = get_node(&client, name).await;
    // The transition time is kept: the verdict's status did not change.
    let cond = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == keys::CONDITION_GPU_READY))
        .cloned()
        .expect("GpuReady");
    assert_eq!(
        cond.last_transition_time.map(|t| t.0.to_string()),
        Some(two_hours_ago)
    );
    assert!(
        cond.message.unwrap_or_default().contains("1h deadline"),
        "message names the deadline"
    );
    // Marked, never cordoned or removed.
    assert_ne!(n.spec.as_ref().and_then(|s| s.unschedulable), Some(true));
    assert!(has_taint(&n, keys::DEFAULT_TAINT_KEY));

    // The device plugin registers: ready, label gone, metric back to 0.
    set_node_status(&client, name, 1, 1, true).await;
    eventually(60, "ready again, the label removed", || async {
        let n = get_node(&client, name).await;
        (gpu_ready(&n) == Some(("True".into(), "Ready".into()))
            && label(&n, keys::LABEL_DEADLINE_EXCEEDED).is_none())
        .then_some(())
    })
    .await;
    eventually(30, "past_deadline back to 0", || async {
        (run.sample("gpuready_nodes{profile=\"deadline\",state=\"past_deadline\"}") == 0.0)
            .then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
}
