//! The end-to-end suite: gpuready as its users run it. A real single-node
//! cluster (tests/cluster/up.sh: kubelet, containerd, scheduler,
//! controller-manager, kube-proxy) runs the Helm chart with its own defaults
//! but the image values, in a namespace enforcing the restricted Pod Security
//! Standard; GPU nodes are Node objects without a kubelet beside the real CPU
//! node, kept alive by a heartbeat. Proves: 2 replicas Ready, one leader who
//! holds the Lease, /metrics through the Service from another pod; the
//! in-cluster controller taints, labels and conditions a broken GPU node and
//! releases it after repair while the real node is never written; failover on
//! a deleted leader pod and on `kill -9` of its process, with no write sent
//! twice; a rolling `helm upgrade` and `helm rollback`; a GPU operator
//! driver-upgrade wave over four GPU nodes that never counts as not ready nor
//! engages the brake, the taint held and released in the upgrade's order;
//! `helm uninstall`
//! leaving no node stranded; the probe DaemonSet on the real node, sitting out
//! a driver-upgrade wave's labels (its pod removed and back, or paused in
//! place); and the
//! README's `kubectl get gnp` / `kubectl describe node`.
//!
//! Runs only with `GPUREADY_CLUSTER_E2E` set (tests/run.sh sets it after
//! building the cluster and the images); otherwise prints NOT RUN. One test
//! function: the steps share one cluster, which takes seconds to start but
//! whose pods take the rest.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::cluster::{Cluster, ClusterImages, Heartbeat};
use support::*;

const NS: &str = "gpuready-system";
const RELEASE: &str = "gpuready";
const LEASE: &str = "gpuready";
/// The chart's default `leaderElection.leaseDurationSeconds`, and the renew
/// deadline gpuready derives from it (two thirds).
const LEASE_S: u64 = 15;
const RENEW_DEADLINE_S: u64 = 10;
/// Generous waits: the machine may be loaded by the other tests of the run.
const WAIT: u64 = 180;
/// A taint every kubelet-less node carries, so nothing is scheduled there.
const NO_KUBELET: &str = "e2e.gpuready.test/no-kubelet";
const POD_SELECTOR: &str = "app.kubernetes.io/name=gpuready,app.kubernetes.io/instance=gpuready";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gpuready_runs_in_a_real_cluster_from_its_helm_chart() {
    let Some(images) =
        ClusterImages::from_env("gpuready_runs_in_a_real_cluster_from_its_helm_chart")
    else {
        return;
    };
    let marker = tempfile::NamedTempFile::new().expect("marker file");
    let cluster = Cluster::up(&images.tarballs).await;
    let (beat, beating) = Heartbeat::start(cluster.client.clone());
    let result =
        tokio::time::timeout(Duration::from_secs(1500), suite(&cluster, &images, &beat)).await;
    beating.abort();
    if result.is_err() {
        panic!("the end-to-end suite did not finish in 25 minutes");
    }
    let mut cluster = cluster;
    let down = cluster.down();
    say!("cluster down in {:.1}s", down.as_secs_f64());
    let written = written_outside(cluster.dir(), marker.path());
    say!(
        "files under /etc /usr /var /opt /run changed during the run: {}",
        if written.is_empty() {
            "none".to_owned()
        } else {
            written.join(", ")
        }
    );
    let ours: Vec<&String> = written.iter().filter(|p| is_cluster_path(p)).collect();
    assert!(
        ours.is_empty(),
        "the cluster wrote outside its folder: {ours:?}"
    );
}

/// Files under the host paths the cluster's parts hard-code, newer than
/// `marker` (tests/cluster/check-no-writes.sh does the same by hand).
fn written_outside(dir: &std::path::Path, marker: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("tests/cluster/check-no-writes.sh"))
        .arg(marker)
        .arg(dir)
        .output()
        .expect("check-no-writes.sh");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Paths only a cluster writes (other processes on a shared machine may write
/// elsewhere under /var or /run; those are printed, not failed on).
fn is_cluster_path(p: &str) -> bool {
    [
        "/run/containerd",
        "/run/netns",
        "/run/xtables.lock",
        "/run/runc",
        "/run/calico",
        "/var/lib/kubelet",
        "/var/lib/cni",
        "/var/lib/containerd",
        "/var/log/pods",
        "/var/log/containers",
        "/opt/containerd",
        "/opt/cni",
        "/usr/libexec/kubernetes",
        "/etc/cni",
        "/etc/kubernetes",
        "/etc/containerd",
        "/run/flannel",
        "/var/run",
    ]
    .iter()
    .any(|prefix| p.starts_with(prefix))
}

async fn suite(c: &Cluster, images: &ClusterImages, beat: &Heartbeat) {
    let (repo, tag) = images
        .operator
        .rsplit_once(':')
        .expect("image ref repo:tag");
    let (probe_repo, probe_tag) = images.probe.rsplit_once(':').expect("probe ref repo:tag");
    let image_values = [
        format!("image.repository={repo}"),
        format!("image.tag={tag}"),
    ];

    // ---- install into a restricted namespace
    c.restricted_namespace(NS).await;
    let chart = repo_root().join("charts/gpuready");
    let chart = chart.to_str().expect("utf-8 path");
    let t = Instant::now();
    c.must_helm(&helm_args("install", chart, &image_values, &[]))
        .await;
    say!("helm install --wait: {:.1}s", since(t));
    let pods = wait_ready_pods(c, 2).await;
    say!(
        "{}",
        c.must_kubectl(&["-n", NS, "get", "pods", "-o", "wide"], None)
            .await
    );
    let leader = wait_single_leader(c, &pods).await;
    say!("leader: {leader} (Lease {NS}/{LEASE} holder)");
    metrics_through_the_service(c).await;

    // ---- GPU nodes beside the real one
    let api: Api<Node> = Api::all(c.client.clone());
    let real_before = api.get(&c.node).await.expect("the real node");
    for (name, healthy) in [("gpu-a", true), ("gpu-b", false)] {
        fake_gpu_node(c, beat, name, healthy).await;
    }
    let t = Instant::now();
    c.must_kubectl(&["apply", "-f", "-"], Some(&profile_yaml()))
        .await;
    wait_gated(&c.client, "gpu-b", true, WAIT).await;
    say!(
        "gpu-b (no allocatable GPU) tainted by the in-cluster controller after {:.1}s",
        since(t)
    );
    wait_gated(&c.client, "gpu-a", false, WAIT).await;
    // The condition is a second write after the taint (and may wait while
    // taint writes are under way): wait for it rather than read it once.
    let b = eventually(WAIT, "gpu-b's GpuReady condition False", || async {
        let b = get_node(&c.client, "gpu-b").await;
        (gpu_ready(&b).map(|(s, _)| s).as_deref() == Some("False")).then_some(b)
    })
    .await;
    say!(
        "gpu-b: taints {:?}, GpuReady {:?}",
        taint_keys(&b),
        gpu_ready(&b)
    );
    let t = Instant::now();
    set_allocatable(c, "gpu-b", 1).await;
    wait_gated(&c.client, "gpu-b", false, WAIT).await;
    say!("gpu-b repaired: released after {:.1}s", since(t));

    // ---- failover: the leader pod deleted. On SIGTERM it releases the
    // Lease; the standby or the Deployment's replacement pod, whichever asks
    // first, takes it.
    let t = Instant::now();
    c.must_kubectl(&["-n", NS, "delete", "pod", &leader, "--wait=false"], None)
        .await;
    let holder = eventually(WAIT, "another replica holds the Lease", || async {
        lease_holder(c).await.filter(|h| *h != leader)
    })
    .await;
    let took = since(t);
    let standby = pods
        .iter()
        .find(|p| **p != leader)
        .cloned()
        .unwrap_or_default();
    say!(
        "leader pod {leader} deleted: Lease holder {holder} ({}) after {took:.1}s",
        if holder == standby {
            "the standby"
        } else {
            "the replacement pod"
        }
    );
    assert!(
        took <= (LEASE_S + RENEW_DEADLINE_S) as f64,
        "takeover took {took}s, more than lease duration + renew deadline"
    );
    let t = Instant::now();
    set_allocatable(c, "gpu-a", 0).await;
    wait_gated(&c.client, "gpu-a", true, WAIT).await;
    say!(
        "new leader {holder} tainted gpu-a (newly broken) after {:.1}s",
        since(t)
    );
    set_allocatable(c, "gpu-a", 1).await;
    wait_gated(&c.client, "gpu-a", false, WAIT).await;
    let pods = wait_ready_pods(c, 2).await;

    // ---- failover: kill -9 of the leader's process
    let leader = wait_single_leader(c, &pods).await;
    let before = node_writes_by_pod(c, &pods).await;
    let restarts = restart_count(c, &leader).await;
    let pid = container_pid(c, &leader).await;
    let t = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
    assert!(
        matches!(killed, Ok(s) if s.success()),
        "kill -9 {pid}: {killed:?}"
    );
    eventually(
        WAIT,
        "the kubelet restarts the killed container",
        || async { (restart_count(c, &leader).await > restarts).then_some(()) },
    )
    .await;
    let restarted = since(t);
    let pods = wait_ready_pods(c, 2).await;
    let new_leader = wait_single_leader(c, &pods).await;
    let took = since(t);
    say!(
        "kill -9 of {leader}'s process (pid {pid}): restarted by the kubelet after {restarted:.1}s, \
         Lease holder {new_leader} after {took:.1}s"
    );
    // The nodes were converged: whoever leads now re-judges them and sends
    // nothing (the killed container's counter restarts at zero).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = node_writes_by_pod(c, &pods).await;
    let resent: u64 = pods
        .iter()
        .map(|p| {
            let was = if *p == leader {
                0
            } else {
                before.get(p).copied().unwrap_or(0)
            };
            after.get(p).copied().unwrap_or(0).saturating_sub(was)
        })
        .sum();
    say!("node writes before {before:?}, after {after:?}");
    assert_eq!(resent, 0, "a node write was sent again after the failover");

    // ---- helm upgrade (rolling) while a node breaks, then rollback
    let mut upgrade = helm_args(
        "upgrade",
        chart,
        &image_values,
        &["controller.logLevel=info\\,gpuready=debug"],
    );
    upgrade.push("--reuse-values");
    let helm = c.helm(&upgrade);
    let rollout = tokio::spawn(async move { run(helm, None).await });
    // Break a node while the pods roll: the taint must not wait longer than
    // one lease duration (the old leader hands over on SIGTERM).
    eventually(WAIT, "the rollout starts a new pod", || async {
        (pod_names(c).await.len() > 2).then_some(())
    })
    .await;
    let t = Instant::now();
    set_allocatable(c, "gpu-b", 0).await;
    wait_gated(&c.client, "gpu-b", true, WAIT).await;
    let took = since(t);
    say!("during the rolling upgrade gpu-b was tainted after {took:.1}s");
    assert!(
        took <= LEASE_S as f64,
        "a node change waited {took}s during the rollout"
    );
    let up = rollout.await.expect("helm upgrade task");
    if !up.ok {
        panic!("helm upgrade failed: {}{}", up.stdout, up.stderr);
    }
    let pods = wait_ready_pods(c, 2).await;
    wait_single_leader(c, &pods).await;
    set_allocatable(c, "gpu-b", 1).await;
    wait_gated(&c.client, "gpu-b", false, WAIT).await;
    c.must_helm(&[
        "rollback",
        RELEASE,
        "1",
        "-n",
        NS,
        "--wait",
        "--timeout",
        "5m",
    ])
    .await;
    let pods = wait_ready_pods(c, 2).await;
    wait_single_leader(c, &pods).await;
    let history = c.must_helm(&["history", RELEASE, "-n", NS]).await;
    say!("{history}");

    // ---- a GPU operator driver-upgrade wave over four GPU nodes
    upgrade_wave(c, beat).await;

    // ---- the README's views
    let gnp = c.must_kubectl(&["get", "gnp"], None).await;
    say!("kubectl get gnp:\n{gnp}");
    assert!(gnp.contains("rtx3090"), "{gnp}");
    set_allocatable(c, "gpu-b", 0).await;
    wait_gated(&c.client, "gpu-b", true, WAIT).await;
    let described = c.must_kubectl(&["describe", "node", "gpu-b"], None).await;
    let shown: Vec<&str> = described
        .lines()
        .filter(|l| l.contains("gpuready") || l.contains("GpuReady"))
        .collect();
    say!(
        "kubectl describe node gpu-b (gpuready's lines):\n{}",
        shown.join("\n")
    );
    assert!(
        described.contains(gpuready_api::keys::DEFAULT_TAINT_KEY),
        "{described}"
    );
    assert!(described.contains("GpuReady"), "{described}");

    // ---- the probe DaemonSet on the real node (no NVIDIA runtime here)
    probe_on_the_real_node(c, probe_repo, probe_tag, &image_values).await;

    // ---- the real node was never written
    let real = api.get(&c.node).await.expect("the real node");
    assert!(
        gpuready_traces(&real).is_empty(),
        "{:?}",
        gpuready_traces(&real)
    );
    let managers: Vec<String> = real
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        !managers.iter().any(|m| m.starts_with("gpuready")),
        "gpuready wrote the real node: managers {managers:?}"
    );
    assert_eq!(
        real.labels(),
        real_before.labels(),
        "the real node's labels changed"
    );
    say!(
        "real node {}: no gpuready label, taint, condition or field manager",
        c.node
    );

    // ---- helm uninstall leaves no node stranded (gpu-b is tainted now)
    let t = Instant::now();
    c.must_helm(&["uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "5m"])
        .await;
    say!(
        "helm uninstall (pre-delete hook included): {:.1}s",
        since(t)
    );
    for name in ["gpu-a", "gpu-b"] {
        let n = get_node(&c.client, name).await;
        let left = gpuready_traces(&n);
        say!(
            "after helm uninstall, {name} keeps gpuready's: {left:?}; taints {:?}",
            taint_keys(&n)
        );
        assert!(
            left.is_empty(),
            "helm uninstall stranded {name} with {left:?}"
        );
    }

    // ---- the opt-out: uninstall.releaseNodes=false leaves the nodes as they
    // are; `gpuready release` by hand then takes them back.
    c.must_helm(&helm_args(
        "install",
        chart,
        &image_values,
        &["uninstall.releaseNodes=false"],
    ))
    .await;
    wait_gated(&c.client, "gpu-b", true, WAIT).await;
    c.must_helm(&["uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "5m"])
        .await;
    let left = gpuready_traces(&get_node(&c.client, "gpu-b").await);
    say!("with uninstall.releaseNodes=false, gpu-b keeps {left:?}");
    assert!(
        left.contains(&format!("taint {}", gpuready_api::keys::DEFAULT_TAINT_KEY)),
        "{left:?}"
    );
    let mut release = gpuready();
    release.env("KUBECONFIG", &c.kubeconfig).arg("release");
    let out = run(release, None).await;
    assert!(out.ok, "gpuready release: {}{}", out.stdout, out.stderr);
    say!("gpuready release by hand: {}", out.stdout.trim());
    for name in ["gpu-a", "gpu-b"] {
        let left = gpuready_traces(&get_node(&c.client, name).await);
        assert!(left.is_empty(), "gpuready release left {left:?} on {name}");
    }
}

// ---------------------------------------------------------------- steps

/// A driver-upgrade wave as the GPU operator runs one, against the
/// in-cluster controller: every node queued (`upgrade-required`), then three
/// at a time (`maxParallelUpgrades: 3`, 75 % of the pool: a burst the safety
/// brake would stop, were maintenance counted as failure) and the fourth,
/// each through every state with the evidence it shows — cordoned from
/// `cordon-required` to `validation-required`, the device plugin paused and
/// allocatable 0 at `pod-restart-required`. At every step: the nodes'
/// reasons, the leader's `not_ready` count 0 (the not-ready alert's
/// expression), the brake off, gpuready's taint on from the cordon to
/// `upgrade-done`.
async fn upgrade_wave(c: &Cluster, beat: &Heartbeat) {
    use gpuready_api::keys::lifecycle as lc;
    let t = Instant::now();
    for name in ["gpu-c", "gpu-d"] {
        fake_gpu_node(c, beat, name, true).await;
    }
    let nodes = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"];
    for n in nodes {
        wait_gated(&c.client, n, false, WAIT).await;
    }
    let api: Api<Node> = Api::all(c.client.clone());
    let step = |name: &'static str, state: &'static str| {
        let api = api.clone();
        async move {
            let cordoned = !matches!(
                state,
                "upgrade-required" | "uncordon-required" | "upgrade-done"
            );
            let paused = if state == "pod-restart-required" {
                lc::PAUSED_FOR_DRIVER_UPGRADE
            } else {
                "true"
            };
            api.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({
                    "metadata": { "labels": {
                        lc::DRIVER_UPGRADE_STATE: state,
                        "nvidia.com/gpu.deploy.device-plugin": paused,
                    } },
                    "spec": { "unschedulable": if cordoned { json!(true) } else { Value::Null } },
                })),
            )
            .await
            .unwrap_or_else(|e| panic!("{name} to {state}: {e}"));
            set_allocatable(c, name, u32::from(state != "pod-restart-required")).await;
        }
    };
    for n in nodes {
        step(n, "upgrade-required").await;
    }
    let pods = pod_names(c).await;
    for wave in [&nodes[..3], &nodes[3..]] {
        // Every state in the upgrade controller's order, upgrade-failed aside.
        for state in lc::UPGRADE_STATES
            .into_iter()
            .filter(|s| *s != lc::UPGRADE_FAILED)
        {
            for n in wave {
                step(n, state).await;
            }
            let in_service = matches!(state, "upgrade-required" | "upgrade-done");
            let (status, reason) = if in_service {
                ("True", "Ready")
            } else {
                ("False", lc::DRIVER_UPGRADE_IN_PROGRESS)
            };
            for n in wave {
                eventually(
                    WAIT,
                    &format!("{n} at {state}: GpuReady {reason}"),
                    || async {
                        let node = get_node(&c.client, n).await;
                        (gpu_ready(&node) == Some((status.into(), reason.into()))
                            && gated(&node) != in_service)
                            .then_some(())
                    },
                )
                .await;
            }
            let maintenance = if in_service { 0 } else { wave.len() };
            let leader = wait_single_leader(c, &pods).await;
            let (not_ready, in_maintenance, brake) =
                eventually(WAIT, &format!("the leader's counts at {state}"), || async {
                    let m = pod_metrics(c, &leader).await?;
                    let series = |s: &str| {
                        sample(
                            &m,
                            &format!("gpuready_nodes{{profile=\"rtx3090\",state=\"{s}\"}}"),
                        )
                    };
                    let got = (
                        series("not_ready")?,
                        series("maintenance")?,
                        sample(&m, "gpuready_safety_brake_engaged{profile=\"rtx3090\"}")?,
                    );
                    (got.1 == maintenance as f64).then_some(got)
                })
                .await;
            let counts = get_profile(&c.client, "rtx3090")
                .await
                .status
                .map(|s| (s.ready_nodes, s.not_ready_nodes, s.maintenance_nodes));
            say!(
                "wave {:?} {state:<26} GpuReady {status} {reason:<23} taint {:<5} | metrics not_ready {not_ready} maintenance {in_maintenance} brake {brake} | profile (ready, notReady, maintenance) {counts:?}",
                wave,
                !in_service
            );
            assert_eq!(not_ready, 0.0, "no alert-worthy not-ready count at {state}");
            assert_eq!(brake, 0.0, "the brake untouched at {state}");
        }
    }
    let gnp = c.must_kubectl(&["get", "gnp", "-o", "wide"], None).await;
    say!(
        "after the wave ({:.1}s), kubectl get gnp -o wide:\n{gnp}",
        since(t)
    );
    for n in ["gpu-c", "gpu-d"] {
        beat.forget(n);
        api.delete(n, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {n}: {e}"));
    }
}

async fn pod_names(c: &Cluster) -> Vec<String> {
    let out = c
        .try_kubectl(&["-n", NS, "get", "pods", "-l", POD_SELECTOR, "-o", "json"])
        .await;
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until exactly `n` controller pods exist, all Running and Ready (none
/// terminating); their names.
async fn wait_ready_pods(c: &Cluster, n: usize) -> Vec<String> {
    let t = Instant::now();
    let pods = eventually(
        WAIT,
        &format!("{n} gpuready pods Running and Ready"),
        || async {
            let out = c
                .try_kubectl(&["-n", NS, "get", "pods", "-l", POD_SELECTOR, "-o", "json"])
                .await;
            let v: Value = serde_json::from_str(&out.stdout).ok()?;
            let items = v["items"].as_array()?;
            let ready: Vec<String> = items
                .iter()
                .filter(|p| {
                    p["metadata"]["deletionTimestamp"].is_null()
                        && p["status"]["phase"] == "Running"
                        && p["status"]["conditions"].as_array().is_some_and(|cs| {
                            cs.iter()
                                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                        })
                })
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
                .collect();
            (ready.len() == n && items.len() == n).then_some(ready)
        },
    )
    .await;
    say!(
        "{n} pods Running and Ready after {:.1}s: {pods:?}",
        since(t)
    );
    pods
}

async fn lease_holder(c: &Cluster) -> Option<String> {
    let out = c
        .try_kubectl(&[
            "-n",
            NS,
            "get",
            "lease",
            LEASE,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .await;
    (out.ok && !out.stdout.is_empty()).then_some(out.stdout)
}

/// The pod's /metrics, through the API server's pod proxy.
async fn pod_metrics(c: &Cluster, pod: &str) -> Option<String> {
    let path = format!("/api/v1/namespaces/{NS}/pods/{pod}:8080/proxy/metrics");
    let out = c.try_kubectl(&["get", "--raw", &path]).await;
    out.ok.then_some(out.stdout)
}

fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.split_whitespace().next() == Some(series))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// Waits until exactly one of `pods` says it leads, and it is the Lease holder.
async fn wait_single_leader(c: &Cluster, pods: &[String]) -> String {
    eventually(WAIT, "exactly one leader, holding the Lease", || async {
        let mut leaders = vec![];
        for p in pods {
            let m = pod_metrics(c, p).await?;
            if sample(&m, "gpuready_leader")? == 1.0 {
                leaders.push(p.clone());
            }
        }
        let holder = lease_holder(c).await?;
        (leaders.len() == 1 && leaders[0] == holder).then(|| leaders.remove(0))
    })
    .await
}

async fn node_writes_by_pod(c: &Cluster, pods: &[String]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for p in pods {
        let m = eventually(WAIT, &format!("/metrics of {p}"), || pod_metrics(c, p)).await;
        let writes: u64 = m
            .lines()
            .filter(|l| l.starts_with("gpuready_writes_total{"))
            .filter(|l| l.contains("kind=\"node\"") || l.contains("kind=\"conditions\""))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum();
        out.insert(p.clone(), writes);
    }
    out
}

/// /metrics through the chart's Service, from a pod in another namespace.
async fn metrics_through_the_service(c: &Cluster) {
    let ip = c
        .must_kubectl(
            &[
                "-n",
                NS,
                "get",
                "service",
                "gpuready-metrics",
                "-o",
                "jsonpath={.spec.clusterIP}",
            ],
            None,
        )
        .await;
    let busybox =
        std::fs::read_to_string(std::path::Path::new(&cluster_bin_dir()).join("busybox.name"))
            .expect("busybox.name (tests/cluster/build.sh)");
    c.must_kubectl(&["create", "namespace", "e2e-client"], None)
        .await;
    let script = format!(
        "for i in $(seq 1 30); do printf 'GET /metrics HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n' | nc -w 5 {ip} 8080 > /tmp/out && grep -q '^gpuready_leader' /tmp/out && cat /tmp/out && exit 0; sleep 1; done; exit 1"
    );
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "metrics-client", "namespace": "e2e-client" },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "client", "image": busybox.trim(), "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", script],
                "volumeMounts": [{ "name": "tmp", "mountPath": "/tmp" }],
            }],
            "volumes": [{ "name": "tmp", "emptyDir": {} }],
        }
    });
    c.must_kubectl(&["apply", "-f", "-"], Some(&pod.to_string()))
        .await;
    let phase = eventually(WAIT, "the metrics client pod finishes", || async {
        let out = c
            .try_kubectl(&[
                "-n",
                "e2e-client",
                "get",
                "pod",
                "metrics-client",
                "-o",
                "jsonpath={.status.phase}",
            ])
            .await;
        matches!(out.stdout.as_str(), "Succeeded" | "Failed").then_some(out.stdout)
    })
    .await;
    let logs = c
        .must_kubectl(&["-n", "e2e-client", "logs", "metrics-client"], None)
        .await;
    if phase != "Succeeded" {
        panic!("the client pod could not read /metrics through Service {ip}:8080:\n{logs}");
    }
    let leaders: Vec<&str> = logs
        .lines()
        .filter(|l| l.starts_with("gpuready_leader"))
        .collect();
    say!(
        "/metrics through Service gpuready-metrics ({ip}:8080) from pod e2e-client/metrics-client: {leaders:?}"
    );
}

fn cluster_bin_dir() -> String {
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("tests/cluster/build.sh"))
        .arg("--print-dir")
        .output()
        .expect("tests/cluster/build.sh --print-dir");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A GPU node without a kubelet: created like kubelet creates one, tainted so
/// nothing is scheduled there, kept Ready by the heartbeat.
async fn fake_gpu_node(c: &Cluster, beat: &Heartbeat, name: &str, healthy: bool) {
    create_node(
        &c.client,
        name,
        rtx3090_in("e2e"),
        1,
        json!([{ "key": NO_KUBELET, "value": "true", "effect": "NoSchedule" }]),
    )
    .await;
    beat.keep(name);
    if !healthy {
        set_allocatable(c, name, 0).await;
    }
}

/// Sets the node's allocatable GPUs (0: the device plugin layer fails).
async fn set_allocatable(c: &Cluster, name: &str, gpus: u32) {
    let api: Api<Node> = Api::all(c.client.clone());
    let patch = json!({ "status": {
        "allocatable": { "cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string() },
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap_or_else(|e| panic!("setting allocatable of {name}: {e}"));
}

/// The profile of the suite: the RTX 3090 pool `e2e`. No readyLabels: the
/// chart's admission policy admits only ready labels it was told about.
fn profile_yaml() -> String {
    format!(
        r#"apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata:
  name: rtx3090
spec:
  nodeSelector:
    matchLabels:
      {POOL}: e2e
  gpu:
    products: ["NVIDIA-GeForce-RTX-3090"]
    minMemoryMib: 24000
  minDriverVersion: "570.0"
"#
    )
}

async fn restart_count(c: &Cluster, pod: &str) -> i64 {
    let out = c
        .try_kubectl(&[
            "-n",
            NS,
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.status.containerStatuses[0].restartCount}",
        ])
        .await;
    out.stdout.trim().parse().unwrap_or(0)
}

/// The host PID of the pod's gpuready process, from containerd's task list.
async fn container_pid(c: &Cluster, pod: &str) -> u32 {
    let id = c
        .must_kubectl(
            &[
                "-n",
                NS,
                "get",
                "pod",
                pod,
                "-o",
                "jsonpath={.status.containerStatuses[0].containerID}",
            ],
            None,
        )
        .await;
    let id = id.trim().trim_start_matches("containerd://").to_owned();
    let tasks = run(c.ctr(&["tasks", "ls"]), None).await;
    tasks
        .stdout
        .lines()
        .find(|l| l.starts_with(&id))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no task {id} in ctr tasks ls:\n{}{}",
                tasks.stdout, tasks.stderr
            )
        })
}

/// `probe.enabled=true` without the NVIDIA RuntimeClass (none exists here),
/// on the real node: the DaemonSet's pod runs under the restricted standard and
/// its report says NVML is unusable.
async fn probe_on_the_real_node(c: &Cluster, repo: &str, tag: &str, image_values: &[String]) {
    let node_selector = format!("probe.nodeSelector.kubernetes\\.io/hostname={}", c.node);
    let probe_repo = format!("probe.image.repository={repo}");
    let probe_tag = format!("probe.image.tag={tag}");
    let chart = repo_root().join("charts/gpuready");
    let mut args = vec![
        "upgrade",
        RELEASE,
        chart.to_str().expect("utf-8"),
        "-n",
        NS,
        "--wait",
        "--timeout",
        "5m",
        "--reuse-values",
        "--set",
        "probe.enabled=true",
        "--set",
        "probe.runtimeClassName=",
        "--set",
        &node_selector,
        "--set",
        &probe_repo,
        "--set",
        &probe_tag,
        "--set",
        "probe.interval=10s",
    ];
    for v in image_values {
        args.extend(["--set", v.as_str()]);
    }
    let t = Instant::now();
    c.must_helm(&args).await;
    let cm = format!("gpuready-probe-{}", c.node);
    let report = eventually(WAIT, "the probe's report of the real node", || async {
        let out = c
            .try_kubectl(&["-n", NS, "get", "configmap", &cm, "-o", "json"])
            .await;
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        let data = v["data"].as_object()?.values().next()?.as_str()?.to_owned();
        serde_json::from_str::<Value>(&data).ok()
    })
    .await;
    say!(
        "probe DaemonSet Running on {}; report after {:.1}s: nvml {}",
        c.node,
        since(t),
        report["nvml"]
    );
    assert_eq!(report["nvml"]["usable"], false, "{report}");
    // The Health layer on that report: the same report, carried for GPU node
    // gpu-a (the real node is never governed, so never judged). docs/probe.md
    // promises NvmlUnusable, NotReady: the node is tainted for it.
    let mut carried = report.clone();
    carried["node"] = json!("gpu-a");
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "gpuready-probe-gpu-a", "namespace": NS,
            "labels": { "gpuready.io/probe-report": "true" },
        },
        "data": { "report.json": carried.to_string() },
    });
    let t = Instant::now();
    c.must_kubectl(&["apply", "-f", "-"], Some(&cm.to_string()))
        .await;
    let reasons = eventually(
        WAIT,
        "gpu-a judged NvmlUnusable by the Health layer",
        || async {
            let n = get_node(&c.client, "gpu-a").await;
            let conds: Vec<(String, String, String)> = n
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .filter(|c| c.type_.starts_with("GpuReady"))
                .map(|c| {
                    (
                        c.type_.clone(),
                        c.status.clone(),
                        c.reason.clone().unwrap_or_default(),
                    )
                })
                .collect();
            (gated(&n) && conds.iter().any(|(_, _, r)| r == "NvmlUnusable")).then_some(conds)
        },
    )
    .await;
    say!(
        "Health layer on the probe's report (carried for gpu-a): tainted after {:.1}s, conditions {reasons:?}",
        since(t)
    );
    c.must_kubectl(
        &["-n", NS, "delete", "configmap", "gpuready-probe-gpu-a"],
        None,
    )
    .await;
    let ds = c
        .must_kubectl(
            &[
                "-n",
                NS,
                "get",
                "pods",
                "-l",
                "app.kubernetes.io/component=probe",
                "-o",
                "wide",
            ],
            None,
        )
        .await;
    say!("{ds}");
    assert!(ds.contains("Running"), "{ds}");
    probe_sits_out_a_driver_upgrade(c).await;
}

/// The probe's pods on the real node that are not being deleted: (name, uid).
async fn probe_pods(c: &Cluster) -> Vec<(String, String, String)> {
    let out = c
        .try_kubectl(&[
            "-n",
            NS,
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/component=probe",
            "-o",
            "json",
        ])
        .await;
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .filter(|p| p["spec"]["nodeName"] == c.node.as_str())
                .map(|p| {
                    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                    (
                        s(&p["metadata"]["name"]),
                        s(&p["metadata"]["uid"]),
                        s(&p["status"]["phase"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The probe's report of the real node, as published.
async fn probe_report(c: &Cluster) -> Option<Value> {
    let cm = format!("gpuready-probe-{}", c.node);
    let out = c
        .try_kubectl(&["-n", NS, "get", "configmap", &cm, "-o", "json"])
        .await;
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    let data = v["data"]["report.json"].as_str()?.to_owned();
    serde_json::from_str(&data).ok()
}

/// `report.paused` in a line: its labels and open device files, or "not paused".
fn paused_of(report: &Value) -> String {
    match report.get("paused") {
        Some(p) => format!(
            "paused since {} for {} (openDeviceFiles {})",
            p["since"].as_str().unwrap_or("?"),
            p["labels"],
            p["openDeviceFiles"]
        ),
        None => "not paused".to_owned(),
    }
}

/// The `/dev/nvidia*` files among a process's open files, and how many it has.
fn nvidia_fds(pid: u32) -> (usize, Vec<String>) {
    let links: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let nvidia = links
        .iter()
        .filter(|l| l.starts_with("/dev/nvidia"))
        .cloned()
        .collect();
    (links.len(), nvidia)
}

/// Issue 48's proof on the real node (chart defaults: `probe.maintenance`
/// stepAside and watchNode on). A driver-upgrade wave's labels in order —
/// `nvidia.com/gpu.deploy.client=paused-for-driver-upgrade`, the upgrade
/// states from `cordon-required` to `upgrade-done`, then the client label
/// `true` — make the DaemonSet controller delete the probe's pod before
/// `pod-restart-required` (its last report says it paused) and recreate it
/// after; then the states alone (an operator before 26.7, no client label)
/// leave the pod in place while the probe itself reports paused with no
/// `/dev/nvidia*` open (`/proc/<pid>/fd`). No GPU here: NVML never opened,
/// so the files were never open either; the GPU run is the agent's test.
async fn probe_sits_out_a_driver_upgrade(c: &Cluster) {
    use gpuready_api::keys::lifecycle as lc;
    let t0 = Instant::now();
    let mut timeline: Vec<String> = Vec::new();
    let mut mark = |what: String| {
        let line = format!("  +{:>5.1}s  {what}", since(t0));
        say!("{line}");
        timeline.push(line);
    };
    let label = |kv: String| async move {
        c.must_kubectl(&["label", "node", &c.node, "--overwrite", &kv], None)
            .await;
    };
    let first = eventually(WAIT, "one probe pod Running", || async {
        let pods = probe_pods(c).await;
        (pods.len() == 1 && pods[0].2 == "Running").then(|| pods[0].clone())
    })
    .await;
    let (fds, nvidia) = nvidia_fds(container_pid(c, &first.0).await);
    mark(format!(
        "probe pod {} Running ({fds} open files, /dev/nvidia*: {nvidia:?}); report {}",
        first.0,
        probe_report(c)
            .await
            .map(|r| paused_of(&r))
            .unwrap_or_default()
    ));

    // ---- the GPU operator 26.7 way: the client label, then the states
    label(format!(
        "{}={}",
        lc::DEPLOY_CLIENT,
        lc::PAUSED_FOR_DRIVER_UPGRADE
    ))
    .await;
    mark(format!(
        "label {}={}",
        lc::DEPLOY_CLIENT,
        lc::PAUSED_FOR_DRIVER_UPGRADE
    ));
    eventually(WAIT, "the probe pod deleted", || async {
        let pods = probe_pods(c).await;
        let gone = !pods.iter().any(|p| p.1 == first.1);
        let out = c
            .try_kubectl(&["-n", NS, "get", "pod", &first.0, "-o", "name"])
            .await;
        (gone && !out.ok).then_some(())
    })
    .await;
    let left = eventually(WAIT, "the paused report of the removed pod", || async {
        probe_report(c).await.filter(|r| r.get("paused").is_some())
    })
    .await;
    mark(format!(
        "probe pod {} deleted by the DaemonSet controller; its last report: {}",
        first.0,
        paused_of(&left)
    ));
    assert_eq!(left["paused"]["openDeviceFiles"], json!([]), "{left}");
    let mut deleted_before_restart = true;
    for state in lc::UPGRADE_STATES
        .into_iter()
        .filter(|s| *s != lc::UPGRADE_FAILED && *s != lc::UPGRADE_REQUIRED)
    {
        let pods = probe_pods(c).await;
        if state == "pod-restart-required" {
            deleted_before_restart = pods.is_empty();
        }
        label(format!("{}={state}", lc::DRIVER_UPGRADE_STATE)).await;
        // Time for the DaemonSet controller to act, were it to.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let pods = probe_pods(c).await;
        mark(format!(
            "label {}={state:<26} probe pods on the node: {}",
            lc::DRIVER_UPGRADE_STATE,
            pods.len()
        ));
        assert!(pods.is_empty(), "a probe pod at {state}: {pods:?}");
    }
    assert!(
        deleted_before_restart,
        "the probe pod was still there at pod-restart-required"
    );
    label(format!("{}=true", lc::DEPLOY_CLIENT)).await;
    mark(format!("label {}=true", lc::DEPLOY_CLIENT));
    let back = eventually(WAIT, "a new probe pod Running", || async {
        let pods = probe_pods(c).await;
        (pods.len() == 1 && pods[0].2 == "Running" && pods[0].1 != first.1).then(|| pods[0].clone())
    })
    .await;
    mark(format!("probe pod {} Running (recreated)", back.0));
    let fresh = eventually(WAIT, "a report not paused", || async {
        probe_report(c).await.filter(|r| r.get("paused").is_none())
    })
    .await;
    mark(format!(
        "report {} (nvml usable {}: no GPU here)",
        paused_of(&fresh),
        fresh["nvml"]["usable"]
    ));

    // ---- an operator before 26.7: no client label, the states alone
    label(format!("{}-", lc::DEPLOY_CLIENT)).await;
    label(format!("{}=cordon-required", lc::DRIVER_UPGRADE_STATE)).await;
    mark(format!(
        "label {}- and {}=cordon-required (the states alone)",
        lc::DEPLOY_CLIENT,
        lc::DRIVER_UPGRADE_STATE
    ));
    let paused = eventually(WAIT, "the probe's own paused report", || async {
        probe_report(c).await.filter(|r| r.get("paused").is_some())
    })
    .await;
    let pods = probe_pods(c).await;
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert_eq!(
        pods[0].1, back.1,
        "the pod stays: the probe steps aside itself"
    );
    let (fds, nvidia) = nvidia_fds(container_pid(c, &back.0).await);
    mark(format!(
        "probe pod {} still Running; report {}; /proc/<pid>/fd: {fds} open, /dev/nvidia*: {nvidia:?}",
        back.0,
        paused_of(&paused)
    ));
    assert!(nvidia.is_empty(), "{nvidia:?}");
    label(format!("{}=upgrade-done", lc::DRIVER_UPGRADE_STATE)).await;
    mark(format!("label {}=upgrade-done", lc::DRIVER_UPGRADE_STATE));
    let resumed = eventually(WAIT, "the probe resumes", || async {
        probe_report(c).await.filter(|r| r.get("paused").is_none())
    })
    .await;
    mark(format!("report {}", paused_of(&resumed)));
    label(format!("{}-", lc::DRIVER_UPGRADE_STATE)).await;
    say!(
        "probe timeline against the driver-upgrade labels (real node {}):\n{}",
        c.node,
        timeline.join("\n")
    );
}

/// `helm install` (or `upgrade`) of the chart into the test namespace, waiting
/// for it, with the e2e images and any further `--set` values.
fn helm_args<'a>(
    verb: &'a str,
    chart: &'a str,
    images: &'a [String],
    sets: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![verb, RELEASE, chart, "-n", NS, "--wait", "--timeout", "5m"];
    for v in images
        .iter()
        .map(String::as_str)
        .chain(sets.iter().copied())
    {
        args.extend(["--set", v]);
    }
    args
}
