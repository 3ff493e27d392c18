//! The project's real single-node cluster (tests/cluster/up.sh: kubelet,
//! containerd, scheduler, controller-manager, kube-proxy) as a test fixture:
//! started in a temporary folder, stopped by `down.sh` when the handle drops
//! (also when the test panics), with kubectl and helm pointed at it, Nodes
//! without a kubelet kept alive by a heartbeat, and the diagnostics a failing
//! step prints. Only the tests that set `GPUREADY_CLUSTER_E2E` use it
//! (tests/run.sh does, after building the cluster and the images).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{Out, repo_root, run};

/// What the suite needs from tests/run.sh, read from the environment.
pub struct ClusterImages {
    /// The operator image (tests/cluster/image.sh).
    pub operator: String,
    /// The probe image (tests/cluster/image.sh --probe).
    pub probe: String,
    /// The image tarballs to import into the cluster's containerd.
    pub tarballs: Vec<PathBuf>,
}

impl ClusterImages {
    /// `None` (after printing why on stderr, past the harness's capture) when
    /// the suite is not asked for.
    pub fn from_env(test: &str) -> Option<ClusterImages> {
        if std::env::var("GPUREADY_CLUSTER_E2E").as_deref() != Ok("1") {
            // Through io::stderr, past the test harness's output capture.
            let _ = writeln!(
                std::io::stderr(),
                "NOT RUN: {test}: GPUREADY_CLUSTER_E2E is unset. tests/run.sh sets it after \
                 tests/cluster/build.sh and tests/cluster/image.sh (needs root); see docs/testing.md"
            );
            return None;
        }
        let var = |k: &str| {
            std::env::var(k).unwrap_or_else(|_| {
                panic!("{k} is unset (tests/run.sh sets it with GPUREADY_CLUSTER_E2E)")
            })
        };
        Some(ClusterImages {
            operator: var("GPUREADY_E2E_IMAGE"),
            probe: var("GPUREADY_E2E_PROBE_IMAGE"),
            tarballs: var("GPUREADY_E2E_IMAGE_TARS")
                .split_whitespace()
                .map(PathBuf::from)
                .collect(),
        })
    }
}

/// A running cluster; `down.sh` stops it when dropped.
pub struct Cluster {
    dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub node: String,
    pub client: Client,
    pub started_in: Duration,
    tools: PathBuf,
    stopped: bool,
}

fn cluster_script(name: &str) -> PathBuf {
    repo_root().join("tests/cluster").join(name)
}

impl Cluster {
    /// Runs `up.sh` in a fresh temporary folder, importing `images`.
    pub async fn up(images: &[PathBuf]) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("gpuready-cluster-")
            .tempdir()
            .expect("temp dir");
        let tools = String::from_utf8(
            Command::new("bash")
                .arg(repo_root().join("tests/control-plane/build.sh"))
                .arg("--print-dir")
                .output()
                .expect("control-plane build.sh --print-dir")
                .stdout,
        )
        .expect("utf-8")
        .trim()
        .to_owned();
        let tars: Vec<String> = images.iter().map(|p| p.display().to_string()).collect();
        let started = Instant::now();
        let mut up = Command::new("bash");
        up.arg(cluster_script("up.sh"))
            .arg(dir.path())
            .env("GPUREADY_CLUSTER_IMAGES", tars.join(" "));
        let out = run(up, None).await;
        let started_in = started.elapsed();
        let kubeconfig = dir.path().join("kubeconfig");
        let fail = |why: String| -> ! {
            print_logs(dir.path());
            down_dir(dir.path());
            panic!("{why}");
        };
        if !out.ok {
            fail(format!(
                "tests/cluster/up.sh failed ({:?})\nstdout:\n{}\nstderr:\n{}",
                out.code, out.stdout, out.stderr
            ));
        }
        let last = out.stdout.lines().last().unwrap_or_default();
        if last != format!("KUBECONFIG={}", kubeconfig.display()) {
            fail(format!(
                "up.sh's last line is not KUBECONFIG=<file>: {last:?}"
            ));
        }
        let client = match client_for(&kubeconfig).await {
            Ok(c) => c,
            Err(e) => fail(format!("a client for {}: {e}", kubeconfig.display())),
        };
        let _ = writeln!(
            std::io::stderr(),
            "cluster up in {:.1}s in {}",
            started_in.as_secs_f64(),
            dir.path().display()
        );
        Cluster {
            kubeconfig,
            node: "gpuready-node".to_owned(),
            client,
            dir,
            tools: PathBuf::from(tools),
            started_in,
            stopped: false,
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn with_env(&self, mut c: Command) -> Command {
        let d = self.dir();
        c.env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", d.join("kube-cache"))
            .env("HELM_CACHE_HOME", d.join("helm/cache"))
            .env("HELM_CONFIG_HOME", d.join("helm/config"))
            .env("HELM_DATA_HOME", d.join("helm/data"));
        c
    }

    pub fn kubectl(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.tools.join("kubectl"));
        c.args(args);
        self.with_env(c)
    }

    pub fn helm(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.tools.join("helm"));
        c.args(args);
        self.with_env(c)
    }

    /// Runs a command inside the cluster's namespaces (as its components run).
    pub fn inside(&self, args: &[&str]) -> Command {
        let holder = std::fs::read_to_string(self.dir().join("pids/holder")).expect("holder pid");
        let mut c = Command::new("nsenter");
        c.args(["-t", holder.trim(), "-n", "-m", "--"]).args(args);
        c
    }

    /// `ctr` against the cluster's containerd, in the Kubernetes namespace.
    pub fn ctr(&self, args: &[&str]) -> Command {
        let sock = self.dir().join("containerd/containerd.sock");
        let sock = sock.to_str().expect("utf-8 path");
        let mut all = vec!["ctr", "--address", sock, "-n", "k8s.io"];
        all.extend_from_slice(args);
        self.inside(&all)
    }

    /// Runs kubectl; the result whether or not it succeeded.
    pub async fn try_kubectl(&self, args: &[&str]) -> Out {
        run(self.kubectl(args), None).await
    }

    /// Runs kubectl, which must succeed (otherwise: diagnostics, then panic).
    pub async fn must_kubectl(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = run(self.kubectl(args), stdin).await;
        if !out.ok {
            panic!("kubectl {args:?} failed:\n{}\n{}", out.stdout, out.stderr);
        }
        out.stdout
    }

    /// Creates namespace `ns` enforcing the restricted Pod Security Standard,
    /// where the suites install what users install.
    pub async fn restricted_namespace(&self, ns: &str) {
        self.must_kubectl(&["create", "namespace", ns], None).await;
        self.must_kubectl(
            &[
                "label",
                "namespace",
                ns,
                "pod-security.kubernetes.io/enforce=restricted",
            ],
            None,
        )
        .await;
    }

    pub async fn must_helm(&self, args: &[&str]) -> String {
        let out = run(self.helm(args), None).await;
        if !out.ok {
            panic!("helm {args:?} failed:\n{}\n{}", out.stdout, out.stderr);
        }
        out.stdout
    }

    /// What a failing step prints: pods, events, descriptions and logs of every
    /// namespace, the nodes, and the components' logs. Blocking (it also runs
    /// from `drop` while a panic unwinds).
    pub fn diagnose(&self) {
        eprintln!(
            "==== diagnostics of the cluster in {}",
            self.dir().display()
        );
        let kubectl = |args: &[&str]| -> (bool, String) {
            match self.kubectl(args).output() {
                Ok(o) => (
                    o.status.success(),
                    format!(
                        "{}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    ),
                ),
                Err(e) => (false, e.to_string()),
            }
        };
        for args in [
            &["get", "nodes", "-o", "wide"][..],
            &["get", "pods", "-A", "-o", "wide"],
            &["get", "events", "-A", "--sort-by=.lastTimestamp"],
            &["get", "leases", "-A"],
            &["describe", "pods", "-A"],
            &["describe", "nodes"],
        ] {
            eprintln!("---- kubectl {}\n{}", args.join(" "), kubectl(args).1);
        }
        let (_, pods) = kubectl(&[
            "get",
            "pods",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
        ]);
        for p in pods.lines() {
            let Some((ns, name)) = p.split_once('/') else {
                continue;
            };
            for prev in [false, true] {
                let mut args = vec!["logs", "-n", ns, name, "--all-containers", "--tail=60"];
                if prev {
                    args.push("--previous");
                }
                let (ok, out) = kubectl(&args);
                if ok && !out.is_empty() {
                    eprintln!(
                        "---- logs {ns}/{name}{}\n{out}",
                        if prev { " (previous)" } else { "" }
                    );
                }
            }
        }
        self.print_logs();
    }

    pub fn print_logs(&self) {
        print_logs(self.dir());
    }

    /// Stops the cluster now (the drop does it otherwise); the seconds it took.
    pub fn down(&mut self) -> Duration {
        let started = Instant::now();
        if !self.stopped {
            self.stopped = true;
            down_dir(self.dir());
        }
        started.elapsed()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A failed step panicked: show the cluster as it is before it goes.
        if std::thread::panicking() && !self.stopped {
            self.diagnose();
        }
        self.down();
    }
}

async fn client_for(kubeconfig: &Path) -> Result<Client, String> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| e.to_string())?;
    Client::try_from(config).map_err(|e| e.to_string())
}

fn down_dir(dir: &Path) {
    let status = Command::new("bash")
        .arg(cluster_script("down.sh"))
        .arg(dir)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("tests/cluster/down.sh {} failed: {status:?}", dir.display());
    }
}

/// The tails of the components' logs.
fn print_logs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir.join("logs")) else {
        return;
    };
    for e in entries.flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        eprintln!("---- {} (last lines)", e.path().display());
        for l in tail.into_iter().rev() {
            eprintln!("{l}");
        }
    }
}

/// Keeps kubelet-less Nodes alive the way a kubelet does: their `Ready`
/// condition's heartbeat renewed every few seconds, so the controller-manager's
/// node lifecycle controller never marks them `Unknown` (a heartbeat of our
/// own, not KWOK: see docs/testing.md).
#[derive(Clone, Default)]
pub struct Heartbeat {
    nodes: Arc<Mutex<Vec<String>>>,
}

impl Heartbeat {
    pub fn start(client: Client) -> (Heartbeat, tokio::task::JoinHandle<()>) {
        let beat = Heartbeat::default();
        let nodes = beat.nodes.clone();
        let task = tokio::spawn(async move {
            let api: Api<Node> = Api::all(client);
            loop {
                let names = nodes.lock().map(|n| n.clone()).unwrap_or_default();
                for name in names {
                    let now = jiff::Timestamp::now().to_string();
                    // The Ready condition only (strategic merge by type):
                    // every other condition, gpuready's included, is not sent.
                    let patch = json!({ "status": { "conditions": [{
                        "type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "heartbeat of the end-to-end suite (no kubelet)",
                        "lastHeartbeatTime": now,
                    }]}});
                    if let Err(e) = api
                        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                        .await
                    {
                        eprintln!("heartbeat of node {name}: {e}");
                    }
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
        (beat, task)
    }

    pub fn keep(&self, node: &str) {
        if let Ok(mut n) = self.nodes.lock() {
            n.push(node.to_owned());
        }
    }
}
