//! The controller under faults, against a real kube-apiserver: a profile, and
//! a node, deleted while gpuready's watch was cut, the GpuNodeProfile CRD deleted under a
//! running controller, a start-up while the API server is down, and a long API
//! server outage.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpuready_api::keys;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams};
use serde_json::json;
use support::*;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// A TCP relay between gpuready and the API server that the test can cut (every
/// open connection dropped, new ones refused) and heal: a network partition
/// with a real server on the other side.
struct Relay {
    port: u16,
    open: Arc<AtomicBool>,
    cut: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(upstream: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let port = listener.local_addr().expect("relay address").port();
        let open = Arc::new(AtomicBool::new(true));
        let cut = Arc::new(Notify::new());
        let task = {
            let (open, cut) = (open.clone(), cut.clone());
            tokio::spawn(async move {
                while let Ok((mut down, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        continue; // dropped: the connection is refused
                    }
                    let cut = cut.clone();
                    tokio::spawn(async move {
                        let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                            return;
                        };
                        tokio::select! {
                            _ = copy_bidirectional(&mut down, &mut up) => {},
                            _ = cut.notified() => {},
                        }
                    });
                }
            })
        };
        Relay {
            port,
            open,
            cut,
            task,
        }
    }

    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        self.cut.notify_waiters();
    }

    fn heal(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn apiserver_port(env: &gpuready_testenv::TestEnv) -> u16 {
    env.apiserver_url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("API server port")
}

/// gpuready started against the API server through a relay the test can cut.
async fn controller_behind_relay(env: &gpuready_testenv::TestEnv) -> (Relay, Running) {
    let relay = Relay::start(apiserver_port(env)).await;
    let mut config = env.config();
    config.cluster_url = format!("https://127.0.0.1:{}", relay.port)
        .parse()
        .expect("relay URL");
    (relay, start_controller_with(config, test_args()))
}

/// Deletes `name` while gpuready's watch is cut, waits until it is gone, then
/// restarts the API server so the watch cannot resume from where it was and
/// must re-list (a re-list has no Delete event), and heals the relay. Returns
/// a client of the restarted server and the instant the relay healed.
async fn deleted_while_cut<K>(
    env: &mut gpuready_testenv::TestEnv,
    relay: &Relay,
    api: Api<K>,
    name: &str,
) -> (Client, Instant)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    relay.cut();
    api.delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete {name}: {e}"));
    eventually(30, &format!("{name} is gone"), || async {
        api.get_opt(name)
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    env.restart_apiserver()
        .await
        .expect("restart kube-apiserver");
    let client = env.client().expect("client");
    relay.heal();
    (client, Instant::now())
}

#[tokio::test]
async fn a_profile_deleted_while_the_watch_was_cut_is_released_after_the_relist() {
    let mut env = env_with_crd().await;
    let client = env.client().expect("client");
    single_node_pool(&client, false).await;

    let (relay, run) = controller_behind_relay(&env).await;
    wait_gated(&client, "gpu-1", true, 30).await;

    // gpuready sees nothing while the profile is deleted, and the API server
    // restarts meanwhile: the watch re-lists, and a re-list has no Delete.
    let profiles = Api::<gpuready_api::GpuNodeProfile>::all(client.clone());
    let (client, healed) = deleted_while_cut(&mut env, &relay, profiles, "rtx3090").await;

    // The heartbeat (5 min here) would catch it eventually; the re-list must.
    eventually(30, "gpu-1 released after the re-list", || async {
        let n = get_node(&client, "gpu-1").await;
        gpuready_traces(&n).is_empty().then_some(())
    })
    .await;
    println!(
        "released {:.1?} after the watch came back",
        healed.elapsed()
    );
    run.stop().await.expect("clean stop");
}

/// A node deleted while the watch is down sends no Delete: the re-list must
/// reach the same path (the tally, the profile's counts, the node's metric
/// series), not a periodic recount minutes later.
#[tokio::test]
async fn a_node_deleted_while_the_watch_was_cut_leaves_the_profile_counts_right_after_the_relist() {
    let mut env = env_with_crd().await;
    let client = env.client().expect("client");
    // gpu-1 ready; gpu-2 not ready (its GPU not allocatable), the one deleted.
    create_node(&client, "gpu-1", rtx3090_in("a"), 1, json!([])).await;
    create_node(&client, "gpu-2", rtx3090_in("a"), 1, json!([])).await;
    set_node_status(&client, "gpu-2", 1, 0, true).await;
    apply_profile(&client, &rtx3090_profile("rtx3090", "a", "")).await;

    let (relay, run) = controller_behind_relay(&env).await;
    eventually(30, "the profile counts both nodes", || async {
        (profile_counts(&client, "rtx3090").await == Some((2, 1, 1))).then_some(())
    })
    .await;
    let gpu2_series = |run: &Running| {
        run.metrics
            .encode()
            .lines()
            .any(|l| l.contains("node=\"gpu-2\""))
    };
    assert!(gpu2_series(&run), "gpu-2 has its not-ready series");

    // As for the profile above: cut, deleted, the API server restarted.
    let nodes = Api::<Node>::all(client.clone());
    let (client, healed) = deleted_while_cut(&mut env, &relay, nodes, "gpu-2").await;

    // Within the 30 s resync a stale tally would be written again as it is;
    // the re-list's InitDone must have dropped gpu-2 from it.
    eventually(30, "the profile counts gpu-1 only", || async {
        (profile_counts(&client, "rtx3090").await == Some((1, 1, 0))).then_some(())
    })
    .await;
    eventually(10, "gpu-2's metric series removed", || async {
        (!gpu2_series(&run)).then_some(())
    })
    .await;
    println!(
        "counts right {:.1?} after the watch came back",
        healed.elapsed()
    );
    run.stop().await.expect("clean stop");
}

async fn crd(client: &Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

#[tokio::test]
async fn deleting_the_crd_releases_nothing_reports_not_ready_and_recovers_when_it_returns() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    for name in ["broken-1", "broken-2", "good"] {
        create_node(&client, name, rtx3090_in("a"), 1, json!([])).await;
    }
    for name in ["broken-1", "broken-2"] {
        set_node_status(&client, name, 1, 0, true).await;
    }
    let profile = rtx3090_profile("rtx3090", "a", "");
    apply_profile(&client, &profile).await;
    let run = start_controller(&env, test_args());
    wait_gated(&client, "broken-1", true, 30).await;
    wait_gated(&client, "broken-2", true, 30).await;
    wait_gated(&client, "good", false, 30).await;
    assert_eq!(run.health.ready(), Ok(()));
    let crd_yaml =
        std::fs::read_to_string(repo_root().join("deploy/crds/gpunodeprofiles.gpuready.io.yaml"))
            .expect("CRD file");

    crd(&client)
        .await
        .delete("gpunodeprofiles.gpuready.io", &DeleteParams::default())
        .await
        .expect("delete CRD");
    eventually(30, "gpuready reports the CRD missing", || async {
        (run.health.ready().is_err() && run.sample("gpuready_profile_crd_present") == 0.0)
            .then_some(())
    })
    .await;
    // Every profile vanished with the CRD; nothing is released for all that.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(12) {
        for (name, tainted) in [("broken-1", true), ("broken-2", true), ("good", false)] {
            let n = get_node(&client, name).await;
            assert_eq!(gated(&n), tainted, "{name} keeps its taint state");
            assert!(
                label(&n, keys::LABEL_PROFILE).is_some(),
                "{name} keeps gpuready's labels"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The CRD and the profile come back (a re-install): gpuready resumes.
    let crd_obj: CustomResourceDefinition =
        serde_yaml_ng::from_str(crd_yaml.split("---\n").nth(1).expect("one document"))
            .expect("CRD");
    eventually(
        60,
        "the old CRD is gone and the new one applies",
        || async {
            crd(&client)
                .await
                .patch(
                    "gpunodeprofiles.gpuready.io",
                    &kube::api::PatchParams::apply("test").force(),
                    &kube::api::Patch::Apply(&crd_obj),
                )
                .await
                .ok()
        },
    )
    .await;
    eventually(30, "the profile applies again", || async {
        let p: gpuready_api::GpuNodeProfile = serde_yaml_ng::from_str(&profile).ok()?;
        Api::<gpuready_api::GpuNodeProfile>::all(client.clone())
            .patch(
                "rtx3090",
                &kube::api::PatchParams::apply("test").force(),
                &kube::api::Patch::Apply(&p),
            )
            .await
            .ok()
    })
    .await;
    eventually(30, "gpuready is ready again", || async {
        (run.health.ready().is_ok() && run.sample("gpuready_profile_crd_present") == 1.0)
            .then_some(())
    })
    .await;
    set_node_status(&client, "broken-1", 1, 1, true).await;
    wait_gated(&client, "broken-1", false, 30).await;
    wait_gated(&client, "broken-2", true, 30).await;
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_controller_started_while_the_api_server_is_down_waits_and_then_converges() {
    let mut env = env_with_crd().await;
    let client = env.client().expect("client");
    single_node_pool(&client, false).await;
    env.stop_apiserver();
    let run = start_controller(&env, test_args());
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !run.task.is_finished(),
        "a transient error at start-up does not end the controller"
    );
    env.start_apiserver().await.expect("start kube-apiserver");
    let client = env.client().expect("client");
    wait_gated(&client, "gpu-1", true, 60).await;
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn after_a_20_s_api_server_outage_node_changes_are_seen_within_seconds() {
    let mut env = env_with_crd().await;
    let client = env.client().expect("client");
    single_node_pool(&client, true).await;
    let run = start_controller(&env, test_args());
    wait_gated(&client, "gpu-1", false, 30).await;

    env.stop_apiserver();
    tokio::time::sleep(Duration::from_secs(20)).await;
    env.start_apiserver().await.expect("start kube-apiserver");
    let client = env.client().expect("client");
    let back = Instant::now();
    set_node_status(&client, "gpu-1", 1, 0, true).await;
    // client-go's watch backoff (0.8 s doubling to 30 s) left gpuready blind for
    // up to 30 s after such an outage; gpuready's is capped at 2 s.
    wait_gated(&client, "gpu-1", true, 60).await;
    let took = back.elapsed();
    println!("after a 20 s outage: converged {took:.1?} after the server was back");
    assert!(
        took < Duration::from_secs(12),
        "reacted {took:.1?} after the server was back"
    );
    run.stop().await.expect("clean stop");
}

/// RBAC for a controller identity that may write the status of some profiles
/// only: everything else gpuready needs, cluster-wide.
async fn grant_all_but_some_profile_status(client: &Client, user: &str, writable: &[&str]) {
    grant_cluster_role(
        client,
        user,
        json!([
            { "apiGroups": [""], "resources": ["nodes", "nodes/status"],
              "verbs": ["get", "list", "watch", "patch", "update"] },
            { "apiGroups": ["gpuready.io"], "resources": ["gpunodeprofiles"],
              "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["gpuready.io"], "resources": ["gpunodeprofiles/status"],
              "verbs": ["get", "patch", "update"], "resourceNames": writable },
            { "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
              "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["", "events.k8s.io"], "resources": ["events"],
              "verbs": ["create", "patch"] },
        ]),
        json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }),
    )
    .await;
}

#[tokio::test]
async fn a_profile_whose_status_write_fails_does_not_hold_back_the_others() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    // Five pools, one profile each; the controller may not write "p-c"'s status.
    let pools = ["a", "b", "c", "d", "e"];
    for pool in pools {
        create_node(
            &client,
            &format!("gpu-{pool}"),
            rtx3090_in(pool),
            1,
            json!([]),
        )
        .await;
        apply_profile(&client, &rtx3090_profile(&format!("p-{pool}"), pool, "")).await;
    }
    let user = "gpuready-partial";
    grant_all_but_some_profile_status(&client, user, &["p-a", "p-b", "p-d", "p-e"]).await;
    let run = start_controller_with(as_user(&env, user), test_args());
    for pool in pools {
        wait_gated(&client, &format!("gpu-{pool}"), false, 30).await;
    }
    // Every profile but the forbidden one gets its status, whatever the order
    // the pass visits them in.
    for pool in ["a", "b", "d", "e"] {
        eventually(30, &format!("p-{pool} has a status"), || async {
            profile_counts(&client, &format!("p-{pool}"))
                .await
                .filter(|c| *c == (1, 1, 0))
        })
        .await;
    }
    assert_eq!(
        profile_counts(&client, "p-c").await,
        None,
        "p-c was refused"
    );
    run.stop().await.expect("clean stop");
}
