//! The Node watch's first state on a real kube-apiserver (v1.37): streamed
//! where the server serves streaming lists (WatchList on, its default since
//! 1.34), listed in pages where it refuses them (WatchList off, as 1.33
//! ships) — and in both the controller judges the nodes.

use crate::support;

use futures::{StreamExt, TryStreamExt};
use gpuready::controller::watch::initial_list::{self, InitialList};
use gpuready_testenv::{TestEnv, Tuning};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::json;
use support::*;

/// The names of the nodes in the watch's first state, sorted; an error before
/// the end of that state fails the test.
async fn first_state(api: Api<Node>, initial: InitialList) -> Vec<String> {
    let mut events = initial_list::watch(api, watcher::Config::default(), initial);
    let mut names = Vec::new();
    let until_done = async {
        while let Some(e) = events.try_next().await.expect("the watch's first state") {
            match e {
                watcher::Event::InitApply(n) => names.push(n.metadata.name.unwrap_or_default()),
                watcher::Event::InitDone => return,
                _ => {}
            }
        }
        panic!("the watch ended before its first state did");
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), until_done)
        .await
        .expect("the first state within 60 s");
    names.sort();
    names
}

/// The API server's count of LISTs of nodes so far (its own /metrics).
async fn node_lists(client: &Client) -> f64 {
    let text = client
        .request_text(
            http::Request::get("/metrics")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("the API server's /metrics");
    text.lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains(r#"resource="nodes""#)
                && l.contains(r#"verb="LIST""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn two_nodes(client: &Client) -> Vec<String> {
    for n in ["gpu-1", "gpu-2"] {
        create_node(client, n, rtx3090_in("a"), 1, json!([])).await;
    }
    vec!["gpu-1".to_owned(), "gpu-2".to_owned()]
}

#[tokio::test]
async fn where_the_server_streams_lists_the_first_state_is_streamed_and_paged_still_lists() {
    let env = TestEnv::start().await.expect("test control plane");
    let client = env.client().expect("client");
    let nodes = two_nodes(&client).await;
    let api: Api<Node> = Api::all(client.clone());

    let lists = node_lists(&client).await;
    assert_eq!(first_state(api.clone(), InitialList::Auto).await, nodes);
    assert_eq!(
        node_lists(&client).await,
        lists,
        "auto streamed the first state: no LIST of nodes"
    );
    assert_eq!(first_state(api, InitialList::Paged).await, nodes);
    assert!(
        node_lists(&client).await > lists,
        "paged listed the first state"
    );
}

#[tokio::test]
async fn where_the_server_refuses_streaming_lists_the_first_state_is_listed_and_the_nodes_judged() {
    let env = TestEnv::start_with(&Tuning {
        apiserver: vec!["--feature-gates=WatchList=false".into()],
        ..Tuning::default()
    })
    .await
    .expect("test control plane");
    install_crds(&env, CRD_FILE, TEST_MANAGER).await;
    let client = env.client().expect("client");
    let nodes = two_nodes(&client).await;
    let api: Api<Node> = Api::all(client.clone());

    // The premise: this server refuses a streaming list outright.
    let refused = kube::runtime::watcher(api.clone(), watcher::Config::default().streaming_lists())
        .boxed()
        .filter_map(|e| std::future::ready(e.err()))
        .next()
        .await
        .expect("an error");
    assert!(
        matches!(&refused, watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 422),
        "{refused:?}"
    );

    let lists = node_lists(&client).await;
    assert_eq!(first_state(api, InitialList::Auto).await, nodes);
    assert!(
        node_lists(&client).await > lists,
        "auto fell back to a LIST"
    );

    apply_profile(&client, &rtx3090_profile("rtx3090", "a", "")).await;
    let run = start_controller(&env, test_args());
    for n in &nodes {
        eventually(60, &format!("{n} judged ready"), || async {
            let node = get_node(&client, n).await;
            (gpu_ready(&node) == Some(("True".into(), "Ready".into()))).then_some(())
        })
        .await;
    }
    run.stop().await.expect("clean stop");
}
