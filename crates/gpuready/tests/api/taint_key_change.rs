//! A readiness-taint key change never opens a window: whether the default key
//! moved (a node registered with the default of an earlier release,
//! `gpuready.io/not-ready`) or a profile edit names another key, the new key is
//! added and the old one removed in the same resourceVersion-locked patch. A
//! watch on the node sees every version the API server stored, and none of them
//! lacks a readiness taint.

use crate::support;

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use gpuready_api::keys;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher::{self, Event, watcher};
use serde_json::json;
use support::*;

/// Every stored version of the node, as the taint keys it carried.
type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

fn follow(client: &kube::Client, name: &str) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let api: Api<Node> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let task = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(api, config));
            while let Some(ev) = events.next().await {
                if let Ok(Event::Apply(n) | Event::InitApply(n)) = ev
                    && let Ok(mut s) = seen.lock()
                {
                    let rv = n.metadata.resource_version.clone().unwrap_or_default();
                    if s.last().map(|(v, _)| v) != Some(&rv) {
                        s.push((rv, taint_keys(&n)));
                    }
                }
            }
        })
    };
    (seen, task)
}

fn readiness_keys(keys: &[String], candidates: &[&str]) -> Vec<String> {
    keys.iter()
        .filter(|k| candidates.contains(&k.as_str()))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_key_change_moves_the_taint_in_one_write() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let name = "bootstrapped";
    let old = keys::PREVIOUS_DEFAULT_TAINT_KEYS[0];
    let custom = "example.com/gpu-not-ready";
    let all = [old, keys::DEFAULT_TAINT_KEY, custom];
    // Registered with the earlier default key (kubelet --register-with-taints),
    // and its device plugin not up: gpuready keeps it tainted throughout.
    create_node(
        &client,
        name,
        rtx3090_in("keys"),
        0,
        json!([{ "key": old, "value": "true", "effect": "NoSchedule" }]),
    )
    .await;
    let (seen, watch) = follow(&client, name);
    apply_profile(&client, &rtx3090_profile("keys", "keys", "")).await;
    let run = start_controller(&env, test_args());
    eventually(60, "the taint moved to the current default", || async {
        let n = get_node(&client, name).await;
        (readiness_keys(&taint_keys(&n), &all) == [keys::DEFAULT_TAINT_KEY]).then_some(())
    })
    .await;
    // A profile edit names another key.
    apply_profile(
        &client,
        &rtx3090_profile("keys", "keys", &format!("taint: {{key: {custom}}}")),
    )
    .await;
    eventually(60, "the taint moved to the profile's key", || async {
        let n = get_node(&client, name).await;
        (readiness_keys(&taint_keys(&n), &all) == [custom]).then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    watch.abort();

    let versions = seen.lock().expect("seen").clone();
    let held: Vec<Vec<String>> = versions
        .iter()
        .map(|(_, k)| readiness_keys(k, &all))
        .collect();
    assert!(
        held.iter().all(|k| k.len() == 1),
        "every stored version carries exactly one readiness taint: {versions:?}"
    );
    // Each move is one write: the old key's last version is followed directly
    // by the new key's first.
    let mut moves: Vec<(String, String)> = held
        .windows(2)
        .filter(|w| w[0] != w[1])
        .map(|w| (w[0][0].clone(), w[1][0].clone()))
        .collect();
    moves.dedup();
    assert_eq!(
        moves,
        [
            (old.to_owned(), keys::DEFAULT_TAINT_KEY.to_owned()),
            (keys::DEFAULT_TAINT_KEY.to_owned(), custom.to_owned())
        ],
        "{versions:?}"
    );
}
