//! GitOps end to end: Flux's own controllers (source-, kustomize- and
//! helm-controller, built from their Go modules at one Flux release) reconcile
//! `deploy/flux/` on the real single-node cluster of tests/cluster, from a
//! local OCI registry and a local Git server (tests/cluster/flux-up.sh). No
//! image is imported by hand: containerd pulls gpuready's image and Flux's
//! from the registry, and helm-controller installs the chart source-controller
//! pulled from it. Proves, through the Flux objects' own conditions:
//!
//! - the bootstrap a user makes (GitRepository and Kustomization
//!   `flux-system` on `clusters/my-cluster`) gets Kustomization `gpuready`
//!   Ready (the HelmRelease installed from the OCI HelmRepository, the
//!   Deployment Available) and then `gpuready-profiles` Ready (`dependsOn`,
//!   health checks on the GpuNodeProfiles' status);
//! - a commit that changes a profile taints the node it governs, another
//!   releases it (seconds from `git push` to the taint change are printed);
//! - a new chart version with a changed CRD, pushed with `helm push`, is
//!   upgraded to by Flux, the CRD with it (the chart ships it as a template);
//! - a profile in conflict fails `gpuready-profiles` with the reason in its
//!   Ready condition, and deleting it makes it Ready again;
//! - an `Observe` profile over a broken node keeps it Ready.
//!
//! Runs only with `GPUREADY_CLUSTER_E2E` set (tests/run.sh, as root, after
//! tests/cluster/flux-build.sh, with `GPUREADY_FLUX_E2E=1`); otherwise prints
//! NOT RUN.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cluster::{Cluster, ClusterImages, Heartbeat};
use support::*;

/// Generous: the machine may be loaded by the other tests of the run.
const WAIT: u64 = 300;
const NODE: &str = "gpu-flux";
/// The label the shipped profile `rtx3090` selects its pool by.
const PROFILE_POOL: (&str, &str) = ("gpu-pool", "rtx3090");
const NO_KUBELET: &str = "e2e.gpuready.test/no-kubelet";
const PROFILE_FILE: &str = "deploy/flux/profiles/rtx3090.yaml";
const ENTRY_FILE: &str = "deploy/flux/clusters/my-cluster/gpuready.yaml";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn flux_reconciles_deploy_flux_from_a_local_registry_and_git_server() {
    const TEST: &str = "flux_reconciles_deploy_flux_from_a_local_registry_and_git_server";
    if std::env::var("GPUREADY_FLUX_E2E").as_deref() != Ok("1") {
        say!(
            "NOT RUN: {TEST}: GPUREADY_FLUX_E2E is not 1. tests/run.sh sets it (as root) after \
             tests/cluster/flux-build.sh; see docs/testing.md"
        );
        return;
    }
    // The images tests/run.sh built (flux-up.sh pushes them to the registry).
    if ClusterImages::from_env(TEST).is_none() {
        return;
    }
    // Nothing imported: every Pod's image is pulled from the local registry.
    let cluster = Cluster::up(&[]).await;
    let (beat, beating) = Heartbeat::start(cluster.client.clone());
    let result = tokio::time::timeout(Duration::from_secs(1500), suite(&cluster, &beat)).await;
    beating.abort();
    if result.is_err() {
        cluster.diagnose_flux();
        panic!("the Flux end-to-end suite did not finish in 25 minutes");
    }
    let mut cluster = cluster;
    say!("cluster down in {:.1}s", cluster.down().as_secs_f64());
}

/// What flux-up.sh printed last.
struct Flux {
    registry: String,
    git: String,
}

async fn suite(c: &Cluster, beat: &Heartbeat) {
    // ---- a GPU node of the shipped profile's pool, healthy
    let mut labels = gfd_3090();
    labels.insert(PROFILE_POOL.0.into(), PROFILE_POOL.1.into());
    // The HelmRelease's controller.nodeLabelSelector.
    labels.insert("nvidia.com/gpu.present".into(), "true".into());
    create_node(
        &c.client,
        NODE,
        labels,
        1,
        json!([{ "key": NO_KUBELET, "value": "true", "effect": "NoSchedule" }]),
    )
    .await;
    beat.keep(NODE);

    // ---- registry, Git server, Flux, bootstrap
    let t = Instant::now();
    let flux = flux_up(c).await;
    say!(
        "flux-up.sh in {:.1}s: REGISTRY={} GIT={}",
        since(t),
        flux.registry,
        flux.git
    );
    let t = Instant::now();
    wait_flux_ready(c, "kustomization", "flux-system", "gpuready").await;
    say!(
        "Kustomization gpuready Ready {:.1}s after bootstrap",
        since(t)
    );
    let hr = flux_object(c, "helmrelease", "gpuready-system", "gpuready").await;
    assert_eq!(ready_of(&hr).0, "True", "HelmRelease gpuready: {hr}");
    let available = c
        .must_kubectl(
            &[
                "-n",
                "gpuready-system",
                "get",
                "deployment",
                "gpuready",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Available\")].status} {.spec.template.spec.containers[0].image}",
            ],
            None,
        )
        .await;
    let (status, image) = available.split_once(' ').unwrap_or_default();
    assert_eq!(status, "True", "Deployment gpuready Available");
    assert!(
        image.starts_with("10.200.0.2:5000/gpuready/gpuready:"),
        "the Deployment runs the image from the local registry, not {image}"
    );
    wait_flux_ready(c, "kustomization", "flux-system", "gpuready-profiles").await;
    say!(
        "Kustomization gpuready-profiles Ready {:.1}s after bootstrap",
        since(t)
    );
    wait_gated(&c.client, NODE, false, WAIT).await;
    say!(
        "Flux objects after bootstrap:\n{}",
        c.must_kubectl(
            &[
                "get",
                "gitrepositories,helmrepositories,helmcharts,kustomizations,helmreleases",
                "-A",
            ],
            None,
        )
        .await
    );
    say!(
        "{}",
        c.must_kubectl(&["get", "gpunodeprofiles"], None).await
    );

    // ---- a commit that changes the profile: the node is tainted, then released
    let work = tempfile::tempdir().expect("temp dir");
    let clone = work.path().join("repo");
    git(
        work.path(),
        &["clone", "-q", &flux.git, clone.to_str().expect("utf-8")],
    );
    let original = std::fs::read_to_string(clone.join(PROFILE_FILE)).expect("profile file");
    assert!(original.contains("minDriverVersion: \"570.0\""));
    let raised = original.replace("minDriverVersion: \"570.0\"", "minDriverVersion: \"590.0\"");
    let t = commit_and_sync(
        c,
        &clone,
        &[(PROFILE_FILE, Some(raised.as_str()))],
        "rtx3090: driver 590 or newer",
    );
    wait_gated(&c.client, NODE, true, WAIT).await;
    let on = since(t);
    say!("profile commit (driver >= 590) -> {NODE} tainted: {on:.1}s");
    let t = commit_and_sync(
        c,
        &clone,
        &[(PROFILE_FILE, Some(original.as_str()))],
        "rtx3090: driver 570 again",
    );
    wait_gated(&c.client, NODE, false, WAIT).await;
    let off = since(t);
    say!("profile commit (driver >= 570) -> {NODE} released: {off:.1}s");
    let head = git_out(&clone, &["rev-parse", "HEAD"]);
    wait_applied(c, "gpuready-profiles", &head).await;
    wait_flux_ready(c, "kustomization", "flux-system", "gpuready-profiles").await;

    // ---- a new chart version with a changed CRD
    chart_upgrade(c, &flux, work.path()).await;

    // ---- a profile in conflict fails gpuready-profiles, with the reason
    let twin = original
        .replace("name: rtx3090", "name: rtx3090-twin")
        .replace("example.org/gpu: rtx3090", "example.org/gpu-twin: rtx3090");
    let kustomization =
        std::fs::read_to_string(clone.join("deploy/flux/profiles/kustomization.yaml"))
            .expect("profiles kustomization");
    let with_twin = kustomization.replace(
        "  - rtx3090.yaml",
        "  - rtx3090.yaml\n  - rtx3090-twin.yaml",
    );
    // Health-checked like every profile (flux.rs keeps the shipped layout so):
    // checking only rtx3090, unchanged by this commit, passes at once, before
    // gpuready has seen the new profile (seen on a run: "Health check passed
    // in 70ms" with both profiles in Conflict a moment later).
    let entry = "      kind: GpuNodeProfile\n      name: rtx3090\n";
    let entrypoint = std::fs::read_to_string(clone.join(ENTRY_FILE)).expect("gpuready.yaml");
    assert!(
        entrypoint.contains(entry),
        "gpuready.yaml health-checks rtx3090"
    );
    let checked_twin = entrypoint.replacen(
        entry,
        &format!(
            "{entry}    - apiVersion: gpuready.io/v1alpha1\n      kind: GpuNodeProfile\n      name: rtx3090-twin\n"
        ),
        1,
    );
    let t = commit_and_sync(
        c,
        &clone,
        &[
            (
                "deploy/flux/profiles/rtx3090-twin.yaml",
                Some(twin.as_str()),
            ),
            (
                "deploy/flux/profiles/kustomization.yaml",
                Some(with_twin.as_str()),
            ),
            (ENTRY_FILE, Some(checked_twin.as_str())),
        ],
        "a second profile over the same pool",
    );
    let failed = eventually(
        WAIT,
        "Kustomization gpuready-profiles Ready=False",
        || async {
            let k = flux_object(c, "kustomization", "flux-system", "gpuready-profiles").await;
            let (status, _, _) = ready_of(&k);
            (status == "False"
                && k["status"]["lastAttemptedRevision"]
                    .as_str()
                    .is_some_and(|r| r.contains(&git_out(&clone, &["rev-parse", "HEAD"]))))
            .then_some(k)
        },
    )
    .await;
    let (_, reason, message) = ready_of(&failed);
    say!(
        "conflicting profile -> gpuready-profiles Ready=False after {:.1}s: reason {reason}: {message}",
        since(t)
    );
    assert_eq!(reason, "HealthCheckFailed", "{failed}");
    assert!(
        message.contains("GpuNodeProfile")
            && message.contains("rtx3090")
            && message.contains("Failed"),
        "the reason names the failed profile: {message}"
    );
    say!(
        "{}",
        c.must_kubectl(&["get", "gpunodeprofiles"], None).await
    );
    let t = commit_and_sync(
        c,
        &clone,
        &[
            ("deploy/flux/profiles/rtx3090-twin.yaml", None),
            (
                "deploy/flux/profiles/kustomization.yaml",
                Some(kustomization.as_str()),
            ),
            (ENTRY_FILE, Some(entrypoint.as_str())),
        ],
        "drop the second profile",
    );
    let head = git_out(&clone, &["rev-parse", "HEAD"]);
    wait_applied(c, "gpuready-profiles", &head).await;
    wait_flux_ready(c, "kustomization", "flux-system", "gpuready-profiles").await;
    say!(
        "conflict removed (pruned) -> gpuready-profiles Ready after {:.1}s",
        since(t)
    );

    // ---- an Observe profile over a broken node keeps its Kustomization healthy
    let observe = original.replace("spec:\n", "spec:\n  mode: Observe\n");
    assert_ne!(observe, original, "the profile has a spec: line");
    commit_and_sync(
        c,
        &clone,
        &[(PROFILE_FILE, Some(observe.as_str()))],
        "rtx3090: observe only",
    );
    let head = git_out(&clone, &["rev-parse", "HEAD"]);
    wait_applied(c, "gpuready-profiles", &head).await;
    let t = Instant::now();
    set_node_status(&c.client, NODE, 1, 0, true).await;
    let profile = eventually(WAIT, "rtx3090 reports its not-ready node", || async {
        let p = flux_object(c, "gpunodeprofile", "", "rtx3090").await;
        (p["status"]["notReadyNodes"].as_i64() == Some(1)).then_some(p)
    })
    .await;
    let (status, reason, _) = ready_of(&profile);
    say!(
        "Observe profile with its node broken ({:.1}s): Ready={status} ({reason})",
        since(t)
    );
    assert_eq!(status, "True", "{profile}");
    // A reconcile after the node broke, as `flux reconcile ks` asks for one.
    let asked = request_reconcile(c, "kustomization", "gpuready-profiles");
    let k = eventually(
        WAIT,
        "gpuready-profiles reconciled after the node broke",
        || async {
            let k = flux_object(c, "kustomization", "flux-system", "gpuready-profiles").await;
            (k["status"]["lastHandledReconcileAt"].as_str() == Some(asked.as_str())).then_some(k)
        },
    )
    .await;
    assert_eq!(
        ready_of(&k).0,
        "True",
        "Observe keeps gpuready-profiles Ready: {k}"
    );
    let n = get_node(&c.client, NODE).await;
    assert!(
        !gated(&n),
        "an Observe profile writes no taint: {:?}",
        taint_keys(&n)
    );
    say!(
        "Flux objects at the end:\n{}",
        c.must_kubectl(&["get", "kustomizations,helmreleases", "-A"], None)
            .await
    );
}

/// Runs flux-up.sh against the cluster; its last two lines name the registry
/// and the repository as the host reaches them.
async fn flux_up(c: &Cluster) -> Flux {
    let mut up = Command::new("bash");
    up.arg(repo_root().join("tests/cluster/flux-up.sh"))
        .arg(c.dir());
    let out = run(up, None).await;
    if !out.ok {
        c.diagnose_flux();
        panic!(
            "tests/cluster/flux-up.sh failed ({:?})\nstdout:\n{}\nstderr:\n{}",
            out.code, out.stdout, out.stderr
        );
    }
    let lines: Vec<&str> = out.stdout.lines().collect();
    let last = |i: usize, key: &str| -> String {
        let line = lines
            .len()
            .checked_sub(i)
            .and_then(|n| lines.get(n))
            .copied()
            .unwrap_or_default();
        line.strip_prefix(key)
            .unwrap_or_else(|| {
                panic!("flux-up.sh's last lines are not REGISTRY= and GIT=: {lines:?}")
            })
            .to_owned()
    };
    Flux {
        registry: last(2, "REGISTRY="),
        git: last(1, "GIT="),
    }
}

/// A Flux object (or any object) as JSON; `Value::Null` when it is not there.
async fn flux_object(c: &Cluster, kind: &str, ns: &str, name: &str) -> Value {
    let mut args = vec!["get", kind, name, "-o", "json"];
    if !ns.is_empty() {
        args.extend(["-n", ns]);
    }
    let out = c.try_kubectl(&args).await;
    if !out.ok {
        return Value::Null;
    }
    serde_json::from_str(&out.stdout).unwrap_or(Value::Null)
}

/// `(status, reason, message)` of an object's Ready condition.
fn ready_of(obj: &Value) -> (String, String, String) {
    let cond = obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or(Value::Null);
    let s = |k: &str| cond[k].as_str().unwrap_or_default().to_owned();
    (s("status"), s("reason"), s("message"))
}

/// Waits for the object's Ready=True on its current generation.
async fn wait_flux_ready(c: &Cluster, kind: &str, ns: &str, name: &str) {
    let what = format!("{kind} {ns}/{name} Ready");
    let mut last = Value::Null;
    let got = tokio::time::timeout(Duration::from_secs(WAIT), async {
        loop {
            let o = flux_object(c, kind, ns, name).await;
            let current = o["status"]["observedGeneration"] == o["metadata"]["generation"];
            if current && ready_of(&o).0 == "True" {
                return;
            }
            last = o;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    if got.is_err() {
        c.diagnose_flux();
        panic!("timed out after {WAIT}s waiting for {what}; last seen: {last}");
    }
}

/// Waits until the Kustomization has applied the Git revision `sha`.
async fn wait_applied(c: &Cluster, name: &str, sha: &str) {
    eventually(
        WAIT,
        &format!("Kustomization {name} applied {sha}"),
        || async {
            let k = flux_object(c, "kustomization", "flux-system", name).await;
            k["status"]["lastAppliedRevision"]
                .as_str()
                .is_some_and(|r| r.contains(sha))
                .then_some(())
        },
    )
    .await;
}

/// Asks a Flux object for a reconcile now, as the flux CLI's `reconcile` does
/// (the `reconcile.fluxcd.io/requestedAt` annotation); returns the value.
fn request_reconcile(c: &Cluster, kind: &str, name: &str) -> String {
    let at = jiff::Timestamp::now().to_string();
    let out = c
        .kubectl(&[
            "-n",
            "flux-system",
            "annotate",
            "--overwrite",
            kind,
            name,
            &format!("reconcile.fluxcd.io/requestedAt={at}"),
        ])
        .output()
        .expect("kubectl annotate");
    assert!(
        out.status.success(),
        "annotating {kind}/{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    at
}

/// Writes (`Some`) or deletes (`None`) files in the clone, commits, pushes to
/// the served repository and asks source-controller to fetch it now (what
/// `flux reconcile source git flux-system` does; without it the GitRepository's
/// 1m interval adds up to a minute). Returns the instant of the push.
fn commit_and_sync(
    c: &Cluster,
    clone: &Path,
    files: &[(&str, Option<&str>)],
    message: &str,
) -> Instant {
    for (path, content) in files {
        match content {
            Some(text) => std::fs::write(clone.join(path), text).expect("write file"),
            None => std::fs::remove_file(clone.join(path)).expect("remove file"),
        }
    }
    git(clone, &["add", "-A"]);
    git(clone, &["commit", "-q", "-m", message]);
    git(clone, &["push", "-q", "origin", "main"]);
    let pushed = Instant::now();
    request_reconcile(c, "gitrepository", "flux-system");
    pushed
}

fn git_command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "flux-e2e")
        .env("GIT_AUTHOR_EMAIL", "flux-e2e@gpuready.local")
        .env("GIT_COMMITTER_NAME", "flux-e2e")
        .env("GIT_COMMITTER_EMAIL", "flux-e2e@gpuready.local");
    cmd
}

fn git(dir: &Path, args: &[&str]) {
    let out = git_command(dir, args).output().expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = git_command(dir, args).output().expect("git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The chart of this checkout at the next patch version, with one more printer
/// column in its GpuNodeProfile CRD, pushed with `helm push`; Flux (the
/// HelmRelease asks for `0.1.x`) must upgrade the release and the CRD.
async fn chart_upgrade(c: &Cluster, flux: &Flux, work: &Path) {
    let chart = work.join("chart/gpuready");
    std::fs::create_dir_all(work.join("chart")).expect("chart folder");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(repo_root().join("charts/gpuready"))
        .arg(work.join("chart"))
        .status()
        .expect("cp");
    assert!(copied.success());
    let chart_yaml = std::fs::read_to_string(chart.join("Chart.yaml")).expect("Chart.yaml");
    let version = chart_yaml
        .lines()
        .find_map(|l| l.strip_prefix("version: "))
        .expect("chart version")
        .trim()
        .to_owned();
    let (major_minor, patch) = version.rsplit_once('.').expect("x.y.z");
    let next = format!(
        "{major_minor}.{}",
        patch.parse::<u32>().expect("patch number") + 1
    );
    std::fs::write(
        chart.join("Chart.yaml"),
        chart_yaml.replace(&format!("version: {version}"), &format!("version: {next}")),
    )
    .expect("write Chart.yaml");
    let crd_path = chart.join("files/crds/gpunodeprofiles.gpuready.io.yaml");
    let crd = std::fs::read_to_string(&crd_path).expect("chart CRD");
    let column = "  - additionalPrinterColumns:\n    - jsonPath: .spec.taint.key\n      name: E2E-Taint\n      type: string\n";
    assert!(crd.contains("  - additionalPrinterColumns:\n"));
    std::fs::write(
        &crd_path,
        crd.replacen("  - additionalPrinterColumns:\n", column, 1),
    )
    .expect("write chart CRD");
    let dest = work.join("packaged");
    c.must_helm(&[
        "package",
        chart.to_str().expect("utf-8"),
        "--destination",
        dest.to_str().expect("utf-8"),
    ])
    .await;
    let tgz = dest.join(format!("gpuready-{next}.tgz"));
    let t = Instant::now();
    c.must_helm(&[
        "push",
        tgz.to_str().expect("utf-8"),
        &format!("oci://{}/charts", flux.registry),
        "--plain-http",
    ])
    .await;
    // The HelmChart helm-controller made polls the registry every 1h (the
    // HelmRelease's chart interval): ask now, as `flux reconcile` would.
    request_reconcile(c, "helmchart", "gpuready-system-gpuready");
    let hr = eventually(
        WAIT,
        &format!("HelmRelease gpuready at chart {next}"),
        || async {
            let hr = flux_object(c, "helmrelease", "gpuready-system", "gpuready").await;
            let at = hr["status"]["history"][0]["chartVersion"].as_str() == Some(next.as_str());
            let current = hr["status"]["observedGeneration"] == hr["metadata"]["generation"];
            (at && current && ready_of(&hr).0 == "True").then_some(hr)
        },
    )
    .await;
    let (_, reason, message) = ready_of(&hr);
    say!(
        "chart {next} pushed -> HelmRelease upgraded after {:.1}s: {reason}: {message}",
        since(t)
    );
    let crd = flux_object(c, "crd", "", "gpunodeprofiles.gpuready.io").await;
    let columns: Vec<&str> = crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    let chart_label = crd["metadata"]["labels"]["helm.sh/chart"]
        .as_str()
        .unwrap_or_default();
    say!("CRD after the upgrade: labels helm.sh/chart={chart_label}, printer columns {columns:?}");
    assert!(
        columns.contains(&"E2E-Taint"),
        "the CRD was upgraded: {columns:?}"
    );
    assert_eq!(chart_label, format!("gpuready-{next}"));
    wait_flux_ready(c, "kustomization", "flux-system", "gpuready").await;
}

trait FluxDiagnostics {
    fn diagnose_flux(&self);
}

impl FluxDiagnostics for Cluster {
    /// The Flux objects and controllers' logs, then the cluster's diagnostics.
    fn diagnose_flux(&self) {
        for args in [
            &[
                "get",
                "gitrepositories,helmrepositories,helmcharts,kustomizations,helmreleases",
                "-A",
                "-o",
                "yaml",
            ][..],
            &["get", "gpunodeprofiles", "-o", "yaml"],
        ] {
            if let Ok(o) = self.kubectl(args).output() {
                eprintln!(
                    "---- kubectl {}\n{}{}",
                    args.join(" "),
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
        self.diagnose();
    }
}
