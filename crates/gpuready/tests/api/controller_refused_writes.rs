//! When the API server refuses gpuready's node write (an admission policy a
//! platform team added, say), against a real kube-apiserver. Issue 24: the taint
//! removal rode in the same patch as a refused label, so healthy nodes stayed
//! tainted while their profile said `Ready=True`, and the only signal was ERROR
//! log lines. Now the taint goes out alone and still passes, and the refusal is
//! said on the node (its `GpuReady` message, a Warning Event) and on the profile
//! (`Ready=False`/`Stalled=True`, reason `WritesRefused`: kstatus Failed), with
//! the server's reason. Issue 32: a refused *taint* was not reported at all
//! (the taint sent alone was refused too, and that error went unreported):
//! now it is said the same three ways, counted in
//! `gpuready_write_refused_nodes{write="taint"}`, and listed by `gpuready check`.

use crate::support;

use gpuready_api::keys;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use support::*;

const USER: &str = "gpuready-refused";

/// A site's policy `name` refusing `user` every node update for which
/// `expression` is false, with `message`; returns once the API server has
/// loaded it (a bystander node's write that breaks it is refused).
async fn site_policy(
    env: &gpuready_testenv::TestEnv,
    user: &str,
    name: &str,
    expression: &str,
    message: &str,
    breaks_it: Value,
) {
    let client = env.client().expect("client");
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
            "metadata": { "name": name },
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": { "resourceRules": [{ "apiGroups": [""], "apiVersions": ["*"],
                    "operations": ["UPDATE"], "resources": ["nodes"] }] },
                "matchConditions": [{ "name": "user", "expression": format!("request.userInfo.username == '{user}'") }],
                "validations": [{ "expression": expression, "message": message }],
            },
        }),
    )
    .await;
    apply(
        "ValidatingAdmissionPolicyBinding",
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": { "name": name },
            "spec": { "policyName": name, "validationActions": ["Deny"] },
        }),
    )
    .await;
    // The policy is loaded asynchronously: wait until it refuses.
    let bystander = format!("bystander-{name}");
    create_node(&client, &bystander, rtx3090_in("none"), 1, json!([])).await;
    let as_user_client = kube::Client::try_from(as_user(env, user)).expect("client");
    let before = serde_json::to_value(get_node(&client, &bystander).await).expect("json");
    eventually(60, "the site's policy is active", || async {
        let r = Api::<k8s_openapi::api::core::v1::Node>::all(as_user_client.clone())
            .patch(
                &bystander,
                &PatchParams::default(),
                &Patch::Merge(breaks_it.clone()),
            )
            .await;
        if r.is_ok() {
            // Admitted before the policy was loaded: put it back.
            Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
                .patch(
                    &bystander,
                    &PatchParams::default(),
                    &Patch::Merge(json!({
                        "metadata": { "labels": before["metadata"]["labels"] },
                        "spec": { "taints": before["spec"]["taints"] },
                    })),
                )
                .await
                .expect("undo");
        }
        r.is_err().then_some(())
    })
    .await;
}

/// What the controller needs, granted to `user` (no policy of the chart).
async fn grant(client: &kube::Client, user: &str) {
    grant_cluster_role(
        client,
        user,
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
        json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }),
    )
    .await;
}

/// Waits until the profile reads WritesRefused (Ready False, Stalled True:
/// kstatus Failed) and returns its Ready message.
async fn writes_refused_message(client: &kube::Client, profile: &str) -> String {
    eventually(60, "the profile is not Current: WritesRefused", || async {
        let ready = profile_condition(client, profile, "Ready").await?;
        let stalled = profile_condition(client, profile, "Stalled").await?;
        (ready == ("False".into(), keys::REASON_WRITES_REFUSED.into())
            && stalled == ("True".into(), keys::REASON_WRITES_REFUSED.into()))
            .then_some(())
    })
    .await;
    get_profile(client, profile)
        .await
        .status
        .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_refused_label_never_holds_the_taint_and_the_refusal_is_reported() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    grant(&client, USER).await;
    // Broken first: gpuready taints it (that write sets no example.org/gpu).
    single_node_pool(&client, false).await;
    site_policy(
        &env,
        USER,
        "no-gpu-label",
        "!('example.org/gpu' in object.metadata.?labels.orValue({}))",
        "the platform team forbids example.org/gpu",
        json!({ "metadata": { "labels": { "example.org/gpu": "x" } } }),
    )
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
        let m = gpu_ready_message(&n);
        let says = m.contains("refused") && m.contains("forbids example.org/gpu");
        let event = event_reasons(&client, "gpu-1")
            .await
            .iter()
            .any(|r| r == keys::event_reasons::WRITE_REFUSED);
        (says && event).then_some(())
    })
    .await;
    let message = writes_refused_message(&client, "rtx3090").await;
    assert!(
        message.contains("gpu-1") && message.contains("forbids example.org/gpu"),
        "{message}"
    );
    run.stop().await.expect("clean stop");
}

/// Issue 32: a site's policy refuses gpuready's taint on 20 broken nodes that
/// were registered without one. Each node says so in its `GpuReady`
/// condition and a Warning Event, the profile turns `WritesRefused`
/// (kstatus Failed), `gpuready_write_refused_nodes{write="taint"}` counts the
/// 20, the verdict labels still land, and `gpuready check` lists the nodes as
/// not gated as their verdict says.
#[tokio::test]
async fn a_refused_taint_is_reported_like_a_refused_label() {
    const USER: &str = "gpuready-taint-refused";
    const NODES: usize = 20;
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let names = broken_nodes_whose_taint_is_refused(&env, USER, "broken", NODES).await;
    let run = start_controller_with(as_user(&env, USER), test_args());

    let says_refused = |n: &k8s_openapi::api::core::v1::Node| {
        let m = gpu_ready_message(n);
        m.contains(keys::TAINT_REFUSED) && m.contains("its own readiness controller")
    };
    eventually(
        120,
        "every node's condition and an Event say the taint was refused",
        || async {
            for name in &names {
                let n = get_node(&client, name).await;
                if gated(&n)
                    || !says_refused(&n)
                    || label(&n, keys::LABEL_READY).as_deref() != Some("false")
                {
                    return None;
                }
                if !event_reasons(&client, name)
                    .await
                    .iter()
                    .any(|r| r == keys::event_reasons::WRITE_REFUSED)
                {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    let message = writes_refused_message(&client, "rtx3090").await;
    assert!(
        message.contains(&format!("{NODES} node(s)")) && message.contains(keys::TAINT_REFUSED),
        "{message}"
    );
    eventually(
        30,
        "the metric counts the nodes whose taint was refused",
        || async {
            (run.sample("gpuready_write_refused_nodes{profile=\"rtx3090\",write=\"taint\"}")
                == NODES as f64)
                .then_some(())
        },
    )
    .await;
    let report = live_report(&client).await;
    let mut listed: Vec<&String> = report
        .taint_refused
        .iter()
        .filter(|n| names.contains(n))
        .collect();
    listed.sort();
    assert_eq!(
        listed.len(),
        NODES,
        "gpuready check lists them: {:?}",
        report.taint_refused
    );
    assert_eq!(report.exit_code(), 1);
    println!(
        "refused taints reported: {NODES} of {NODES} nodes by condition and Event, profile {}, metric {}, check lists {}",
        keys::REASON_WRITES_REFUSED,
        run.sample("gpuready_write_refused_nodes{profile=\"rtx3090\",write=\"taint\"}"),
        listed.len()
    );
    run.stop().await.expect("clean stop");
}

/// Issue 49: refused writes were retried on every trigger, and another
/// controller labelling the nodes triggers them every few seconds (254
/// refused PATCHes a minute for 40 nodes on `main` 4446535). Now the same
/// refused changes wait 1, 4, 16, 64, 256 s, then 300 s: with a writer
/// labelling each of 40 refused nodes every 10 s, the second minute after
/// the refusals sees at most 2 refused writes a node — and every node still
/// says its taint is refused.
#[tokio::test]
async fn refused_writes_back_off_while_another_writer_labels_the_nodes() {
    const USER: &str = "gpuready-backoff";
    const NODES: usize = 40;
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let names = broken_nodes_whose_taint_is_refused(&env, USER, "backoff", NODES).await;
    let run = start_controller_with(as_user(&env, USER), test_args());
    let refused = || run.sample("gpuready_reconcile_errors_total{kind=\"refused\"}");
    eventually(60, "every node refused once", || async {
        (refused() >= NODES as f64).then_some(())
    })
    .await;
    // Another controller labels every node every 10 s.
    let writer = {
        let client = client.clone();
        let names = names.clone();
        tokio::spawn(async move {
            for round in 0.. {
                for n in &names {
                    set_labels(
                        &client,
                        n,
                        json!({ "example.org/heartbeat": round.to_string() }),
                    )
                    .await;
                }
                tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            }
        })
    };
    let mut per_minute = vec![];
    for _ in 0..2 {
        let before = refused();
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        per_minute.push(refused() - before);
    }
    writer.abort();
    say!(
        "refused writes a minute, {NODES} nodes, another writer every 10 s: first {}, second {}",
        per_minute[0],
        per_minute[1]
    );
    assert!(
        per_minute[1] <= 2.0 * NODES as f64,
        "refused writes in the second minute: {per_minute:?}"
    );
    for n in &names {
        let node = get_node(&client, n).await;
        assert!(
            gpu_ready_message(&node).contains(keys::TAINT_REFUSED),
            "{n} still says its taint is refused"
        );
    }
    run.stop().await.expect("clean stop");
}

/// `nodes` broken nodes (`prefix-00`, …) of profile rtx3090, and a site
/// policy that refuses gpuready's readiness taint to `user` (granted
/// gpuready's rights): what the refused-taint tests start from.
async fn broken_nodes_whose_taint_is_refused(
    env: &gpuready_testenv::TestEnv,
    user: &str,
    prefix: &str,
    nodes: usize,
) -> Vec<String> {
    let client = env.client().expect("client");
    grant(&client, user).await;
    site_policy(
        env,
        user,
        &format!("no-gpuready-taint-{prefix}"),
        "object.spec.?taints.orValue([]).all(t, t.key != 'readiness.k8s.io/gpuready-not-ready')",
        "the platform team gates its nodes with its own readiness controller",
        json!({ "spec": { "taints": [{ "key": "readiness.k8s.io/gpuready-not-ready", "effect": "NoSchedule" }] } }),
    )
    .await;
    let names: Vec<String> = (0..nodes).map(|i| format!("{prefix}-{i:02}")).collect();
    for n in &names {
        create_node(&client, n, rtx3090_in("a"), 1, json!([])).await;
        set_node_status(&client, n, 1, 0, true).await;
    }
    apply_profile(&client, &rtx3090_profile("rtx3090", "a", "")).await;
    names
}
