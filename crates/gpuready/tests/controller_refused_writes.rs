//! When the API server refuses gpuready's node write (an admission policy a
//! platform team added, say), against a real kube-apiserver. Issue 24: the taint
//! removal rode in the same patch as a refused label, so healthy nodes stayed
//! tainted while their profile said `Ready=True`, and the only signal was ERROR
//! log lines. Now the taint goes out alone and still passes, and the refusal is
//! said on the node (its `GpuReady` message, a Warning Event) and on the profile
//! (`Ready=False`/`Stalled=True`, reason `WritesRefused`: kstatus Failed), with
//! the server's reason.

mod support;

use gpuready_api::keys;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use support::*;

const USER: &str = "gpuready-refused";

/// A policy refusing `USER` any node write that sets the profile's ready label
/// `example.org/gpu` (what rtx3090_profile's readyLabels names).
async fn refuse_the_ready_label(client: &kube::Client) {
    let ar = |kind: &str| {
        ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            kind,
        ))
    };
    let apply = |kind: &'static str, body: Value| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar(kind));
        async move {
            let name = body["metadata"]["name"].as_str().expect("name").to_owned();
            api.patch(
                &name,
                &PatchParams::apply(TEST_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        }
    };
    apply(
        "ValidatingAdmissionPolicy",
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": { "name": "no-gpu-label" },
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": { "resourceRules": [{ "apiGroups": [""], "apiVersions": ["*"],
                    "operations": ["UPDATE"], "resources": ["nodes"] }] },
                "matchConditions": [{ "name": "user", "expression": format!("request.userInfo.username == '{USER}'") }],
                "validations": [{
                    "expression": "!('example.org/gpu' in object.metadata.?labels.orValue({}))",
                    "message": "the platform team forbids example.org/gpu",
                }],
            },
        }),
    )
    .await;
    apply(
        "ValidatingAdmissionPolicyBinding",
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": { "name": "no-gpu-label" },
            "spec": { "policyName": "no-gpu-label", "validationActions": ["Deny"] },
        }),
    )
    .await;
}

#[tokio::test]
async fn a_refused_label_never_holds_the_taint_and_the_refusal_is_reported() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    grant_cluster_role(
        &client,
        USER,
        json!([
            { "apiGroups": [""], "resources": ["nodes", "nodes/status"],
              "verbs": ["get", "list", "watch", "patch"] },
            { "apiGroups": ["gpuready.io"], "resources": ["gpunodeprofiles"],
              "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["gpuready.io"], "resources": ["gpunodeprofiles/status"],
              "verbs": ["patch"] },
            { "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
              "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"] },
        ]),
        json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER }),
    )
    .await;
    // Broken first: gpuready taints it (that write sets no example.org/gpu).
    single_node_pool(&client, false).await;
    refuse_the_ready_label(&client).await;
    // The policy is loaded asynchronously: wait until it refuses.
    create_node(&client, "bystander", rtx3090_in("none"), 1, json!([])).await;
    let as_user_client = kube::Client::try_from(as_user(&env, USER)).expect("client");
    eventually(60, "the policy is active", || async {
        let r = Api::<k8s_openapi::api::core::v1::Node>::all(as_user_client.clone())
            .patch(
                "bystander",
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "labels": { "example.org/gpu": "x" } } })),
            )
            .await;
        if r.is_ok() {
            set_labels(&client, "bystander", json!({ "example.org/gpu": null })).await;
        }
        r.is_err().then_some(())
    })
    .await;
    let run = start_controller_with(as_user(&env, USER), test_args());
    wait_gated(&client, "gpu-1", true, 30).await;

    // Repaired: the write that releases the taint also sets example.org/gpu,
    // which the server refuses. The taint goes anyway.
    set_node_status(&client, "gpu-1", 1, 1, true).await;
    eventually(
        60,
        "the taint is released despite the refused label",
        || async {
            let n = get_node(&client, "gpu-1").await;
            (!gated(&n) && label(&n, "example.org/gpu").is_none()).then_some(())
        },
    )
    .await;
    eventually(60, "the node's condition and an Event say so", || async {
        let n = get_node(&client, "gpu-1").await;
        let condition = n
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == keys::CONDITION_GPU_READY)?
            .clone();
        let says = condition
            .message
            .as_deref()
            .is_some_and(|m| m.contains("refused") && m.contains("forbids example.org/gpu"));
        let event = event_reasons(&client, "gpu-1")
            .await
            .iter()
            .any(|r| r == keys::event_reasons::WRITE_REFUSED);
        (says && event).then_some(())
    })
    .await;
    eventually(60, "the profile is not Current: WritesRefused", || async {
        let ready = profile_condition(&client, "rtx3090", "Ready").await?;
        let stalled = profile_condition(&client, "rtx3090", "Stalled").await?;
        (ready == ("False".into(), keys::REASON_WRITES_REFUSED.into())
            && stalled == ("True".into(), keys::REASON_WRITES_REFUSED.into()))
            .then_some(())
    })
    .await;
    let p = get_profile(&client, "rtx3090").await;
    let message = p
        .status
        .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message)
        .unwrap_or_default();
    assert!(
        message.contains("gpu-1") && message.contains("forbids example.org/gpu"),
        "{message}"
    );
    run.stop().await.expect("clean stop");
}
