//! What gpuready writes, and when it must not, against a real kube-apiserver:
//! a replica whose lease renewals fail stops writing at its renew deadline while
//! the other takes over; a node no profile selects keeps every taint, gpuready's
//! own key included; and gpuready adds and removes only its own condition, on
//! nodes whose status was set in the create as well as through the subresource.

use crate::support;

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use gpuready::controller::{self, Metrics, RunArgs};
use gpuready_api::keys;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use support::*;

// ---- Fencing ----

/// Every request a client sent: when, method, path.
#[derive(Clone, Default)]
struct Sent(Arc<Mutex<Vec<(Instant, String, String)>>>);

impl Sent {
    /// Requests other than reads sent at or after `since`, except to Leases
    /// (`…/leases` to create one, `…/leases/<name>` for the rest).
    fn writes_since(&self, since: Instant) -> Vec<String> {
        self.0
            .lock()
            .expect("log")
            .iter()
            .filter(|(at, method, path)| {
                *at >= since && method != "GET" && !path.contains("/leases")
            })
            .map(|(_, m, p)| format!("{m} {p}"))
            .collect()
    }
}

impl<S> tower::Layer<S> for Sent {
    type Service = SentService<S>;
    fn layer(&self, inner: S) -> SentService<S> {
        SentService {
            inner,
            log: self.clone(),
        }
    }
}

#[derive(Clone)]
struct SentService<S> {
    inner: S,
    log: Sent,
}

impl<S, B> tower::Service<http::Request<B>> for SentService<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> S::Future {
        self.log.0.lock().expect("log").push((
            Instant::now(),
            req.method().to_string(),
            req.uri().path().to_owned(),
        ));
        self.inner.call(req)
    }
}

/// gpuready in-process on a client that records every request it sends.
fn start_recorded(config: kube::Config, args: RunArgs) -> (Running, Sent) {
    let sent = Sent::default();
    let metrics = Arc::new(Metrics::default());
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("client builder")
        .with_layer(&sent)
        // The counting layer clones the service below it (it waits for a rate
        // token before sending), so it sits on a buffer, as in gpuready's client.
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&controller::requests::CountRequests {
            metrics: metrics.clone(),
            limiter: None,
        })
        .build();
    (spawn_controller(client, metrics, args), sent)
}

const LEASE_SECONDS: u64 = 4;

fn ha_args(identity: &str) -> RunArgs {
    run_args(&[
        "--leader-elect=true",
        &format!("--identity={identity}"),
        &format!("--lease-duration-seconds={LEASE_SECONDS}"),
    ])
}

/// Users `replica-a` and `replica-b`: everything gpuready needs cluster-wide
/// through one binding each, and the Lease through a separate RoleBinding each,
/// so one replica's lease permission can be taken away alone.
async fn grant(client: &Client) {
    apply_rbac(
        client,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": "gpuready-replica" },
            "rules": [{
                "apiGroups": ["", "events.k8s.io", "gpuready.io", "apiextensions.k8s.io"],
                "resources": ["*"], "verbs": ["*"],
            }],
        }),
    )
    .await;
    apply_rbac(
        client,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": { "name": "gpuready-lease", "namespace": "default" },
            "rules": [{ "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"] }],
        }),
    )
    .await;
    for user in ["replica-a", "replica-b"] {
        let subjects =
            json!([{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }]);
        apply_rbac(
            client,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": { "name": user },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuready-replica" },
                "subjects": subjects,
            }),
        )
        .await;
        apply_rbac(
            client,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": { "name": format!("{user}-lease"), "namespace": "default" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gpuready-lease" },
                "subjects": subjects,
            }),
        )
        .await;
    }
}

#[tokio::test]
async fn a_leader_whose_renewals_fail_stops_writing_at_its_deadline_and_the_other_takes_over() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    grant(&client).await;
    create_node(&client, "good", rtx3090_in("a"), 1, json!([])).await;
    create_node(&client, "broken", rtx3090_in("a"), 1, json!([])).await;
    set_node_status(&client, "broken", 1, 0, true).await;
    apply_profile(&client, &rtx3090_profile("rtx3090", "a", "")).await;

    let (a, a_sent) = start_recorded(as_user(&env, "replica-a"), ha_args("gpuready-a"));
    eventually(30, "a leads", || async { a.is_leader().then_some(()) }).await;
    let (b, _) = start_recorded(as_user(&env, "replica-b"), ha_args("gpuready-b"));
    eventually(30, "b is ready as a standby", || async {
        b.health.ready().ok()
    })
    .await;
    eventually(30, "a converged", || async {
        let n = get_node(&client, "broken").await;
        gated(&n).then_some(())
    })
    .await;
    assert!(a.node_writes() > 0, "the leader writes");

    // Take a's lease permission away; its node permissions stay.
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), "default")
        .delete("replica-a-lease", &DeleteParams::default())
        .await
        .expect("delete a's lease binding");
    let revoked = Instant::now();
    let deadline = Duration::from_millis(LEASE_SECONDS * 2000 / 3);

    eventually(30, "a steps down", || async {
        (!a.is_leader()).then_some(())
    })
    .await;
    let stepped_down = Instant::now();
    println!(
        "a stepped down {:.1?} after its lease permission went (renew deadline {deadline:?})",
        stepped_down - revoked
    );
    // A renewal already in flight when the binding went may still land.
    assert!(
        stepped_down - revoked <= deadline + Duration::from_secs(2),
        "a stops at its renew deadline, not later"
    );

    // A change after a's deadline: b takes over and converges it.
    set_node_status(&client, "good", 1, 0, true).await;
    eventually(60, "b took over and tainted good", || async {
        let n = get_node(&client, "good").await;
        (b.is_leader() && gated(&n)).then_some(())
    })
    .await;
    println!(
        "b converged the change {:.1?} after a lost its permission",
        revoked.elapsed()
    );
    assert!(b.node_writes() > 0, "the new leader writes");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        a_sent.writes_since(stepped_down),
        Vec::<String>::new(),
        "a sends no write after its deadline"
    );
    assert_eq!(a.sample("gpuready_leader"), 0.0);
    let ended = tokio::time::timeout(Duration::from_secs(30), a.task)
        .await
        .expect("a ends")
        .expect("a's task");
    assert!(
        matches!(ended, Err(controller::Error::LostLeadership)),
        "a exits non-zero to restart as a candidate: {ended:?}"
    );
    b.stop().await.expect("b stops cleanly");
}

/// Someone else takes the Lease `default/gpuready` (a split brain as another
/// replica would see it after the leader's renewals stopped reaching the
/// server); returns when.
async fn take_lease(client: &Client) -> Instant {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now());
    Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), "default")
        .patch(
            "gpuready",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": {
                "holderIdentity": "intruder", "renewTime": now, "acquireTime": now,
            }})),
        )
        .await
        .expect("take the lease");
    Instant::now()
}

#[tokio::test]
async fn a_leader_that_sees_another_holder_in_the_lease_stops_writing_at_once() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    single_node_pool(&client, true).await;
    let (a, a_sent) = start_recorded(env.config(), ha_args("gpuready-a"));
    eventually(30, "a leads and converged", || async {
        let n = get_node(&client, "gpu-1").await;
        (a.is_leader() && label(&n, keys::LABEL_READY).is_some()).then_some(())
    })
    .await;
    let taken = take_lease(&client).await;
    eventually(10, "a steps down", || async {
        (!a.is_leader()).then_some(())
    })
    .await;
    let stepped_down = Instant::now();
    println!(
        "a stepped down {:.1?} after the lease changed hands",
        stepped_down - taken
    );
    assert!(
        stepped_down - taken < Duration::from_secs(2),
        "at once, not at a deadline"
    );
    // A change a would have acted on.
    set_node_status(&client, "gpu-1", 1, 0, true).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(a_sent.writes_since(stepped_down), Vec::<String>::new());
    assert!(
        !gated(&get_node(&client, "gpu-1").await),
        "nobody wrote the node"
    );
    let ended = tokio::time::timeout(Duration::from_secs(30), a.task)
        .await
        .expect("a ends")
        .expect("a's task");
    assert!(
        matches!(ended, Err(controller::Error::LostLeadership)),
        "{ended:?}"
    );
}

// ---- Two replicas at once ----

/// Rounds of the start race: a fresh install (or a rollout) starts both
/// replicas within milliseconds of each other, and every round is one more
/// chance for both to claim the Lease.
const RACE_ROUNDS: usize = 20;

/// The holders the Lease `default/<name>` named, in order, as its watch saw
/// them: `-` for none, each with the milliseconds since `since` (one entry
/// per change).
type Holders = Arc<Mutex<Vec<(u128, String)>>>;

fn record_holders(
    client: &Client,
    name: &str,
    since: Instant,
) -> (Holders, tokio::task::JoinHandle<()>) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let seen = Holders::default();
    let api =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), "default");
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let task = tokio::spawn({
        let seen = seen.clone();
        async move {
            let mut leases = watcher(api, cfg)
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(lease) = leases.next().await {
                let Ok(lease) = lease else { continue };
                let holder = lease
                    .spec
                    .and_then(|s| s.holder_identity)
                    .unwrap_or_else(|| "-".into());
                let mut seen = seen.lock().expect("holders");
                if seen.last().map(|(_, h)| h) != Some(&holder) {
                    seen.push((since.elapsed().as_millis(), holder));
                }
            }
        }
    });
    (seen, task)
}

/// The holders in `seen` from the first one on (a new or released Lease
/// starts with none).
fn held(seen: &Holders) -> Vec<String> {
    seen.lock()
        .expect("holders")
        .iter()
        .map(|(_, h)| h.clone())
        .skip_while(|h| h == "-")
        .collect()
}

#[tokio::test]
async fn two_replicas_started_together_never_both_lead_and_the_loser_stands_by_writing_nothing() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    grant(&client).await;
    single_node_pool(&client, false).await;
    let started = Instant::now();
    for round in 0..RACE_ROUNDS {
        // Even rounds race for a Lease that does not exist yet (a fresh
        // install), odd ones for the one the previous round released.
        let lease = format!("race-{}", round / 2);
        let since = Instant::now();
        let (holders, watching) = record_holders(&client, &lease, since);
        let args = |identity: &str| {
            run_args(&[
                "--leader-elect=true",
                &format!("--identity={identity}"),
                &format!("--lease-name={lease}"),
                // The default lease (15 s, renew deadline 10 s), as the chart
                // runs it: no round waits for an expiry. With the 4 s lease of
                // the tests above, one run in about twenty on a loaded 2-core
                // machine had a round's leader deposed before its stop (a
                // stall past the 2.7 s renew deadline would do that).
                // The NFD CRD reconciler runs too: only the leader may write them.
                "--nfd-crds=apply",
            ])
        };
        let (a, a_sent) = start_recorded(as_user(&env, "replica-a"), args("gpuready-a"));
        let (b, b_sent) = start_recorded(as_user(&env, "replica-b"), args("gpuready-b"));
        // Sampled every 10 ms: never both leading, until one leads and the
        // other stands by ready, and for 2 s after that.
        let mut settled: Option<Instant> = None;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (la, lb) = (a.is_leader(), b.is_leader());
            assert!(!(la && lb), "round {round}: both replicas lead at once");
            let one_leads = (la && b.health.ready().is_ok()) || (lb && a.health.ready().is_ok());
            match settled {
                Some(t) if t.elapsed() >= Duration::from_secs(2) => break,
                None if one_leads => settled = Some(Instant::now()),
                _ => {}
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: no single leader with a ready standby within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let ((winner, won_as), (loser, loser_sent)) = if a.is_leader() {
            ((a, "gpuready-a"), (b, b_sent))
        } else {
            ((b, "gpuready-b"), (a, a_sent))
        };
        assert!(winner.is_leader(), "round {round}: the winner still leads");
        assert_eq!(
            held(&holders),
            vec![won_as.to_owned()],
            "round {round}: the Lease named one holder only: {:?}",
            holders.lock().expect("holders")
        );
        assert!(
            !loser.task.is_finished(),
            "round {round}: the loser stands by (it never held the lease, so it does not exit)"
        );
        assert!(
            loser.health.ready().is_ok() && loser.sample("gpuready_leader") == 0.0,
            "round {round}: the loser is a ready standby"
        );
        assert_eq!(
            loser_sent.writes_since(since),
            Vec::<String>::new(),
            "round {round}: the loser sends no write"
        );
        loser.stop().await.expect("the standby stops cleanly");
        let stopped = winner.stop().await;
        assert!(
            stopped.is_ok(),
            "round {round}: the leader stops cleanly, still leading: {stopped:?}; holders {:?}",
            holders.lock().expect("holders")
        );
        // The leader released the Lease; nobody else ever held it.
        eventually(10, "the Lease released", || async {
            (held(&holders) == [won_as, "-"]).then_some(())
        })
        .await;
        watching.abort();
    }
    println!(
        "{RACE_ROUNDS} start races: one leader each, the other a ready standby that wrote nothing ({:.1?})",
        started.elapsed()
    );
    // The leaders of the rounds did their work: the broken node is gated.
    assert!(gated(&get_node(&client, "gpu-1").await));
}

/// User `replica-blind`: everything gpuready needs, and the Lease, but not
/// Nodes, so its node cache never fills and it never finishes syncing.
async fn grant_all_but_nodes(client: &Client) {
    apply_rbac(
        client,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": "gpuready-blind" },
            "rules": [
                { "apiGroups": ["events.k8s.io", "gpuready.io", "apiextensions.k8s.io"],
                  "resources": ["*"], "verbs": ["*"] },
                { "apiGroups": [""], "resources": ["events", "configmaps"], "verbs": ["*"] },
                { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"] },
            ],
        }),
    )
    .await;
    apply_rbac(
        client,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": "replica-blind" },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuready-blind" },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "replica-blind" }],
        }),
    )
    .await;
}

#[tokio::test]
async fn a_leader_stopped_or_deposed_before_its_caches_synced_still_ends() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    grant_all_but_nodes(&client).await;
    single_node_pool(&client, false).await;

    // Stopped (SIGTERM) while its caches are still filling: it ends, cleanly.
    let (a, _) = start_recorded(as_user(&env, "replica-blind"), ha_args("gpuready-a"));
    eventually(30, "a leads", || async { a.is_leader().then_some(()) }).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        a.health.ready().is_err(),
        "its caches never sync (it may not list Nodes)"
    );
    let t = Instant::now();
    a.stop().await.expect("a stops cleanly");
    println!(
        "stopped before its caches synced: ended after {:.1?}",
        t.elapsed()
    );

    // Deposed while its caches are still filling: it ends with LostLeadership
    // (exit code 1: restarted as a candidate), writing nothing after.
    let (a, a_sent) = start_recorded(as_user(&env, "replica-blind"), ha_args("gpuready-a"));
    eventually(30, "a leads again", || async {
        a.is_leader().then_some(())
    })
    .await;
    let taken = take_lease(&client).await;
    let ended = tokio::time::timeout(Duration::from_secs(30), a.task)
        .await
        .expect("a deposed before its caches synced ends")
        .expect("a's task");
    println!(
        "deposed before its caches synced: ended after {:.1?}",
        taken.elapsed()
    );
    assert!(
        matches!(ended, Err(controller::Error::LostLeadership)),
        "{ended:?}"
    );
    assert_eq!(a_sent.writes_since(taken), Vec::<String>::new());
}

// ---- Hands off ungoverned nodes ----

#[tokio::test]
async fn a_node_no_profile_selects_keeps_gpureadys_taint_until_a_profile_governs_it() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    // Registered with gpuready's bootstrap taint (kubelet --register-with-taints),
    // plus an admin's maintenance taint under gpuready's prefix. No profile yet.
    let bootstrap = json!([
        { "key": keys::DEFAULT_TAINT_KEY, "value": "true", "effect": "NoSchedule" },
        { "key": "gpuready.io/maintenance", "value": "true", "effect": "NoExecute" },
    ]);
    create_node(&client, "gpu-1", rtx3090_in("a"), 1, bootstrap).await;
    let before = get_node(&client, "gpu-1").await;

    // Two full resyncs by fresh instances (each lists every node).
    for round in 0..2 {
        let run = start_controller(&env, test_args());
        eventually(30, "caches synced", || async { run.health.ready().ok() }).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(run.writes_sent(), 0, "round {round}: nothing written");
        run.stop().await.expect("clean stop");
    }
    let after = get_node(&client, "gpu-1").await;
    assert_eq!(taints(&after), taints(&before), "every taint kept");
    // `check` against the cluster predicts the same: nothing to do.
    assert_eq!(pending_changes(&client).await, Vec::<String>::new());
    assert_eq!(after.resource_version(), before.resource_version());

    // A profile that selects it: gpuready governs it — the (healthy) node's
    // bootstrap taint is released, the admin's taint stays.
    let run = start_controller(&env, test_args());
    apply_profile(&client, &rtx3090_profile("rtx3090", "a", "")).await;
    eventually(30, "governed and released", || async {
        let n = get_node(&client, "gpu-1").await;
        (label(&n, keys::LABEL_READY).as_deref() == Some("true")
            && !has_taint(&n, keys::DEFAULT_TAINT_KEY))
        .then_some(())
    })
    .await;
    let n = get_node(&client, "gpu-1").await;
    assert!(has_taint(&n, "gpuready.io/maintenance"), "{:?}", taints(&n));
    run.stop().await.expect("clean stop");
}

// ---- Only its own conditions ----

/// kubelet-style conditions, as a node dump carries them.
fn kubelet_conditions() -> Value {
    let t = "2026-11-30T08:00:00Z";
    json!([
        { "type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
          "message": "kubelet has sufficient memory available", "lastHeartbeatTime": t, "lastTransitionTime": t },
        { "type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
          "message": "kubelet has no disk pressure", "lastHeartbeatTime": t, "lastTransitionTime": t },
        { "type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
          "message": "kubelet has sufficient PID available", "lastHeartbeatTime": t, "lastTransitionTime": t },
        { "type": "Ready", "status": "True", "reason": "KubeletReady",
          "message": "kubelet is posting ready status", "lastHeartbeatTime": t, "lastTransitionTime": t },
        { "type": "GpuReadyForTraining", "status": "True", "reason": "BurnIn",
          "message": "another tool's condition", "lastHeartbeatTime": t, "lastTransitionTime": t },
    ])
}

fn gpu_status() -> Value {
    json!({
        "capacity": { "cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1" },
        "allocatable": { "cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1" },
        "conditions": kubelet_conditions(),
    })
}

/// Every condition but gpuready's, as JSON (byte-identical comparison).
fn others(node: &Node) -> Vec<Value> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_ != keys::CONDITION_GPU_READY)
        .map(|c| serde_json::to_value(c).expect("condition"))
        .collect()
}

#[tokio::test]
async fn gpuready_adds_and_removes_only_its_condition_however_the_status_was_written() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let api: Api<Node> = Api::all(client.clone());
    // Status in the create (a `kubectl create -f` of a node dump: no manager
    // owns the conditions) ...
    let in_create: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": "in-create", "labels": rtx3090_in("a") },
        "status": gpu_status(),
    }))
    .expect("node");
    api.create(&PostParams::default(), &in_create)
        .await
        .expect("create");
    // ... and through the status subresource, as kubelet does.
    let object: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": "via-status", "labels": rtx3090_in("a") },
    }))
    .expect("node");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create");
    api.patch_status(
        "via-status",
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": gpu_status() })),
    )
    .await
    .expect("status");
    let names = ["in-create", "via-status"];
    let mut before = Vec::new();
    for name in names {
        let n = get_node(&client, name).await;
        assert_eq!(others(&n).len(), 5, "{name}: the conditions were stored");
        before.push(others(&n));
    }

    let run = start_controller(&env, test_args());
    apply_profile(&client, &rtx3090_profile("rtx3090", "a", "")).await;
    for (name, want) in names.iter().zip(&before) {
        eventually(30, &format!("{name}: GpuReady added"), || async {
            gpu_ready(&get_node(&client, name).await)
                .is_some()
                .then_some(())
        })
        .await;
        assert_eq!(
            &others(&get_node(&client, name).await),
            want,
            "{name}: added"
        );
    }
    // The nodes leave the profile: gpuready removes GpuReady and only it.
    for name in names {
        set_labels(&client, name, json!({ "pool": "b" })).await;
    }
    for (name, want) in names.iter().zip(&before) {
        eventually(30, &format!("{name}: GpuReady removed"), || async {
            gpu_ready(&get_node(&client, name).await)
                .is_none()
                .then_some(())
        })
        .await;
        let n = get_node(&client, name).await;
        assert_eq!(&others(&n), want, "{name}: every other condition unchanged");
        let traces: Vec<String> = gpuready_traces(&n)
            .into_iter()
            .filter(|t| t != "condition GpuReadyForTraining")
            .collect();
        assert!(traces.is_empty(), "{name}: {traces:?}");
    }
    run.stop().await.expect("clean stop");
}
