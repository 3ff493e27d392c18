//! A profile whose selector reads what gpuready writes, on a real API server.
//! The CRD refuses such selectors now (crd_admission.rs); one stored by an
//! older CRD must still not start a write loop. Issue 24 measured 9,264 node
//! writes a minute on 20 nodes for `pool=talos, gpuready.io/ready NotIn
//! [true]`, and every ready node turned `Conflict` under a second profile
//! selecting `gpuready.io/ready=true`. Here the same two profiles, counting the
//! controller's writes once the nodes have converged: none may follow.

use crate::support;

use std::time::Duration;

use gpuready_api::keys;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

const NODES: usize = 5;

/// Drops the CEL rules under `spec.nodeSelector`, like a CRD from before them.
async fn loosen_selector_rules(client: &kube::Client) {
    fn strip(v: &mut Value) {
        if let Value::Object(map) = v {
            map.remove("x-kubernetes-validations");
            map.values_mut().for_each(strip);
        }
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(crds.get("gpunodeprofiles.gpuready.io").await.expect("crd"))
        .expect("json");
    if let Some(v) = crd.pointer_mut(
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/nodeSelector",
    ) {
        strip(v);
    }
    if let Some(m) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        m.remove("resourceVersion");
    }
    crd.as_object_mut().map(|o| o.remove("status"));
    crds.patch(
        "gpunodeprofiles.gpuready.io",
        &PatchParams::apply(TEST_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("loosen the CRD");
}

fn storm_spec(extra: Value) -> Value {
    let mut spec = json!({
        "gpu": { "products": ["NVIDIA-GeForce-RTX-3090"] },
        "readyLabels": { "example.org/gpu": "rtx3090" },
    });
    if let (Some(s), Value::Object(e)) = (spec.as_object_mut(), extra) {
        s.extend(e);
    }
    spec
}

#[tokio::test]
async fn a_selector_on_gpureadys_own_labels_causes_no_write_storm() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    loosen_selector_rules(&client).await;
    // The storm profile of the issue: its selector reads gpuready.io/ready.
    create_raw(
        &client,
        &raw_profile(
            "storm",
            storm_spec(json!({ "nodeSelector": {
                "matchLabels": { POOL: "talos" },
                "matchExpressions": [{ "key": keys::LABEL_READY, "operator": "NotIn", "values": ["true"] }],
            } })),
        ),
    )
    .await
    .expect("the loosened CRD admits it");
    for i in 0..NODES {
        create_node(
            &client,
            &format!("gpu-{i}"),
            rtx3090_in("talos"),
            1,
            json!([]),
        )
        .await;
    }

    let run = start_controller(&env, test_args());
    eventually(
        60,
        "every node converges under the storm profile",
        || async {
            for i in 0..NODES {
                let n = get_node(&client, &format!("gpu-{i}")).await;
                if label(&n, keys::LABEL_READY).as_deref() != Some("true")
                    || label(&n, keys::LABEL_PROFILE).as_deref() != Some("storm")
                    || gated(&n)
                {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    eventually(30, "the profile says its selector is invalid", || async {
        let ready = profile_condition(&client, "storm", "Ready").await?;
        (ready == ("False".into(), keys::REASON_INVALID_PROFILE.into())).then_some(())
    })
    .await;

    // The second profile of the issue: selects exactly the ready nodes.
    create_raw(
        &client,
        &raw_profile(
            "ready-ones",
            storm_spec(json!({ "nodeSelector": { "matchLabels": { keys::LABEL_READY: "true" } } })),
        ),
    )
    .await
    .expect("the loosened CRD admits it");
    // Settle: the status pass and its Events after the new profile.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes = run.node_writes();
    tokio::time::sleep(Duration::from_secs(15)).await;
    let more = run.node_writes() - writes;
    for i in 0..NODES {
        let n = get_node(&client, &format!("gpu-{i}")).await;
        assert_eq!(
            gpu_ready(&n).map(|(s, _)| s).as_deref(),
            Some("True"),
            "gpu-{i} stays ready under its profile, not Conflict: {:?}",
            gpu_ready(&n)
        );
        assert_eq!(label(&n, keys::LABEL_PROFILE).as_deref(), Some("storm"));
    }
    println!(
        "node writes in 15 s after convergence: {more} ({NODES} nodes, 2 self-referential profiles)"
    );
    assert_eq!(more, 0, "no write loop");
    let counts = profile_counts(&client, "ready-ones").await;
    assert_eq!(
        counts.map(|c| c.0),
        Some(0),
        "ready-ones matches nothing: {counts:?}"
    );
    run.stop().await.expect("clean stop");
}

/// Issue 32: a profile created while the controller runs, whose selector
/// reads a label another profile sets (`example.com/ready NotIn [true]`, the
/// other profile's readyLabels key), conflicts with that profile on its ready
/// nodes — the labels gpuready wrote are not selectable, so the requirement
/// holds there. The running controller used to keep them Ready until a
/// restart (the profile change re-queued nodes by their raw labels); now
/// `run` says Conflict as soon as the profile exists, as `check` does.
#[tokio::test]
async fn a_profile_reading_another_profiles_ready_label_conflicts_at_once() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    apply_profile_json(
        &client,
        raw_profile(
            "setter",
            json!({
                "nodeSelector": { "matchLabels": { POOL: "a" } },
                "gpu": { "products": ["NVIDIA-GeForce-RTX-3090"] },
                "readyLabels": { "example.com/ready": "true" },
            }),
        ),
    )
    .await;
    for i in 0..NODES {
        create_node(&client, &format!("gpu-{i}"), rtx3090_in("a"), 1, json!([])).await;
    }
    let run = start_controller(&env, test_args());
    eventually(60, "every node is ready under the setter", || async {
        for i in 0..NODES {
            let n = get_node(&client, &format!("gpu-{i}")).await;
            if label(&n, "example.com/ready").as_deref() != Some("true") || gated(&n) {
                return None;
            }
        }
        Some(())
    })
    .await;
    apply_profile_json(
        &client,
        raw_profile(
            "reader",
            json!({
                "nodeSelector": { "matchExpressions": [
                    { "key": "example.com/ready", "operator": "NotIn", "values": ["true"] }] },
                "gpu": { "products": ["NVIDIA-GeForce-RTX-3090"] },
            }),
        ),
    )
    .await;
    eventually(
        30,
        "run says Conflict on every node, without a restart",
        || async {
            for i in 0..NODES {
                let n = get_node(&client, &format!("gpu-{i}")).await;
                if gpu_ready(&n)?.1 != keys::reasons::CONFLICT {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    let report = live_report(&client).await;
    assert_eq!(report.summary.conflicts, NODES, "check agrees");
    eventually(30, "the reader is told why", || async {
        let ready = profile_condition(&client, "reader", "Ready").await?;
        (ready == ("False".into(), keys::REASON_INVALID_PROFILE.into())).then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
}
