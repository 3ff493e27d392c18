//! The controller against profiles the current CRD refuses but an older or
//! looser one admitted: a `resources` quantity past u32 that the Rust types
//! cannot hold, and a selector `In` without values. Stored objects outlive the
//! CRD version that admitted them, so gpuready meets them after any upgrade or
//! restart. Started with them already stored, gpuready still converges the
//! valid profile's nodes, reports the unreadable profile with a Warning Event,
//! and marks the invalid one `Ready=False`/`Stalled=True` with reason
//! `InvalidProfile` (kstatus: Failed) instead of `Ready=True`: one bad object
//! never stops the others.

use crate::support;

use gpuready_api::keys;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

/// Drops every CEL rule and `maximum` under the selector and resources, like a
/// CRD from before those rules.
fn loosen(v: &mut Value) {
    if let Value::Object(map) = v {
        map.remove("x-kubernetes-validations");
        map.remove("maximum");
        map.remove("enum");
        for (_, child) in map.iter_mut() {
            loosen(child);
        }
    }
}

#[tokio::test]
async fn unreadable_and_invalid_profiles_do_not_stop_the_others() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(crds.get("gpunodeprofiles.gpuready.io").await.expect("crd"))
        .expect("json");
    for path in [
        "/properties/spec/properties/nodeSelector",
        "/properties/spec/properties/resources",
    ] {
        if let Some(v) = crd
            .pointer_mut("/spec/versions/0/schema/openAPIV3Schema")
            .and_then(|s| s.pointer_mut(path))
        {
            loosen(v);
        }
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

    create_raw(
        &client,
        &raw_profile(
            "too-many",
            json!({ "nodeSelector": { "matchLabels": { POOL: "a" } },
                "resources": { "nvidia.com/gpu": 5_000_000_000u64 } }),
        ),
    )
    .await
    .expect("the loosened CRD admits it");
    create_raw(
        &client,
        &raw_profile(
            "in-without-values",
            json!({ "nodeSelector": { "matchExpressions": [{ "key": POOL, "operator": "In" }] } }),
        ),
    )
    .await
    .expect("the loosened CRD admits it");
    apply_profile(&client, &rtx3090_profile("good", "good", "")).await;
    create_node(&client, "gpu-good", rtx3090_in("good"), 1, json!([])).await;

    let run = start_controller(&env, test_args());
    eventually(60, "the valid profile's node converges", || async {
        let n = get_node(&client, "gpu-good").await;
        (label(&n, keys::LABEL_READY).as_deref() == Some("true") && !gated(&n)).then_some(())
    })
    .await;
    eventually(60, "the invalid profile says so in its status", || async {
        let ready = profile_condition(&client, "in-without-values", "Ready").await?;
        let stalled = profile_condition(&client, "in-without-values", "Stalled").await?;
        (ready == ("False".into(), keys::REASON_INVALID_PROFILE.into())
            && stalled == ("True".into(), keys::REASON_INVALID_PROFILE.into()))
            .then_some(())
    })
    .await;
    eventually(30, "the unreadable profile is reported", || async {
        event_reasons(&client, "too-many")
            .await
            .iter()
            .any(|r| r == keys::REASON_INVALID_PROFILE)
            .then_some(())
    })
    .await;
    // Issue 24: its status says so too (kstatus: Failed), read untyped since
    // the types cannot hold it.
    eventually(30, "the unreadable profile's status says so", || async {
        let raw = raw_profile_api(&client).get("too-many").await.ok()?;
        let conditions = raw.data.pointer("/status/conditions")?.as_array()?.clone();
        let has = |t: &str, s: &str| {
            conditions.iter().any(|c| {
                c["type"] == t && c["status"] == s && c["reason"] == keys::REASON_INVALID_PROFILE
            })
        };
        (has("Ready", "False") && has("Stalled", "True")).then_some(())
    })
    .await;
    // And a live `gpuready check` judges the cluster, skipping it with a
    // message, instead of exiting 2 with "cannot reach the API server".
    let report = live_report(&client).await;
    let good = report
        .nodes
        .iter()
        .find(|n| n.name == "gpu-good")
        .expect("gpu-good judged");
    assert_eq!(good.profile.as_deref(), Some("good"));
    // Its status is written once, not again on its own echo.
    let rv = |o: kube::api::DynamicObject| o.metadata.resource_version;
    let before = rv(raw_profile_api(&client).get("too-many").await.expect("get"));
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let after = rv(raw_profile_api(&client).get("too-many").await.expect("get"));
    assert_eq!(
        before, after,
        "the unreadable profile's status is not rewritten"
    );
    run.stop().await.expect("clean stop");
}
