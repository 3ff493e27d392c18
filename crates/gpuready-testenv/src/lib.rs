//! A real etcd + kube-apiserver for gpuready's tests (dev-only, never published).
//!
//! [`TestEnv`] starts etcd and kube-apiserver on free loopback ports, with a
//! temporary data folder and certificates made on the spot (one CA, a serving
//! certificate for `localhost`/`127.0.0.1`, an admin client certificate
//! `CN=admin, O=system:masters`, a service-account signing key pair), with
//! `--authorization-mode=RBAC` so permission bugs surface, and waits for `/readyz`.
//! It hands out an admin [`kube::Client`], a kubeconfig file, impersonating clients
//! ([`TestEnv::client_as_service_account`], [`TestEnv::client_as`]) and
//! `kubectl`/`helm` commands already pointed at it. There is no controller manager
//! or scheduler, as with envtest: no namespace deletion, garbage collection,
//! default service accounts or pods from Deployments.
//!
//! # Binaries
//!
//! Looked up as envtest does: `TEST_ASSET_KUBE_APISERVER` / `TEST_ASSET_ETCD` /
//! `TEST_ASSET_KUBECTL` (and `TEST_ASSET_HELM`), else `$KUBEBUILDER_ASSETS/<name>`,
//! else the folder `tests/control-plane/build.sh --print-dir` prints. A missing
//! kube-apiserver or etcd is an error telling you to run that script: a test that
//! needs the API server never skips itself silently. kubectl and helm fall back to
//! PATH.
//!
//! # One environment per test, or one per test binary
//!
//! Starting the pair takes seconds of CPU on a 2-core machine, so most tests should
//! share one: [`TestEnv::shared`] starts a single environment per test binary on
//! first use and returns `&'static TestEnv`. Tests isolate themselves by names —
//! [`unique_name`] and [`TestEnv::create_namespace`] — and must not assume an empty
//! cluster (list with a label selector of their own, not "everything"). Shared is
//! sound because nothing about it is tied to one test's runtime: every call to
//! [`TestEnv::client`] builds a fresh `kube::Client` in the caller's runtime (a
//! client's background tasks die with the runtime that made it, and each
//! `#[tokio::test]` has its own), and the processes belong to a thread that lives
//! as long as the process. Its Drop never runs (it is a static): the processes die
//! with the test process through the parent-death signal, and its temporary folder
//! is removed by the next start's [`sweep_stale_dirs`].
//!
//! Tests that break the control plane (stop or restart the API server) need their
//! own [`TestEnv::start`]; the `&mut self` on those methods makes that a compile
//! error on the shared one. An owned environment is torn down on Drop.
//!
//! # No orphans
//!
//! Children run under `setpriv --pdeathsig KILL` and are forked by one long-lived
//! thread (see the `process` module for why the thread matters), so they die with
//! the test process even when it is SIGKILLed. `tests/no_orphans.rs` proves it by
//! SIGKILLing a child test process and watching its etcd and apiserver disappear.
//!
//! # Why not kube-rs's `envtest` crate
//!
//! The `envtest` crate (kube-rs/envtest) wraps controller-runtime's Go envtest
//! package through rust2go (cgo): building it needs a Go toolchain and clang at
//! every `cargo build`, links a Go runtime into each test binary, and by default
//! fetches its binaries the setup-envtest way, from upstream downloads our build
//! machines cannot reach; its 0.1 releases also turn on k8s-openapi's `latest`
//! feature, which clashes with our `v1_33` pin. What it would save is small — the
//! process and certificate handling here is a few hundred lines of plain Rust —
//! while a native harness gives what our tests need and it does not offer:
//! binaries built from the Go modules pinned in `tests/control-plane`, restarting
//! the API server in place on the same port for fault tests, impersonating
//! clients, kubectl/helm wired to the environment, and a tested guarantee that no
//! process outlives a killed test.

mod assets;
mod certs;
pub mod crds;
mod error;
mod process;
pub mod rtx3090;
pub mod upstream_dra;
pub mod upstream_nfd;

use std::ffi::OsString;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

pub use assets::{Assets, control_plane_dir, default_dir as default_asset_dir};
pub use error::Error;
pub use process::sweep_stale_dirs;

use certs::CertFiles;
use process::{DIR_PREFIX, Proc};

/// Default readiness timeout for each process; override with
/// `GPUREADY_TESTENV_TIMEOUT_SECS`. Generous because the apiserver competes with
/// cargo for two cores.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How many log lines an error message carries.
const TAIL_LINES: usize = 40;

fn timeout() -> Duration {
    std::env::var("GPUREADY_TESTENV_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs)
}

/// Extra command-line flags for the two processes, appended after the
/// harness's own (a later flag wins in both binaries).
#[derive(Clone, Debug, Default)]
pub struct Tuning {
    /// Appended to etcd's flags, e.g. `--quota-backend-bytes=8589934592`.
    pub etcd: Vec<String>,
    /// Appended to kube-apiserver's flags, e.g. `--max-requests-inflight=2000`.
    pub apiserver: Vec<String>,
    /// How long each process may take to become ready (start and restart),
    /// instead of `GPUREADY_TESTENV_TIMEOUT_SECS` or 120 s: an API server
    /// started again over 100,000 nodes fills its watch cache for minutes.
    pub ready_timeout: Option<Duration>,
}

/// A running etcd + kube-apiserver. See the crate documentation.
#[derive(Debug)]
pub struct TestEnv {
    assets: Assets,
    apiserver: Option<Proc>,
    apiserver_args: Vec<OsString>,
    apiserver_port: u16,
    etcd: Proc,
    kubeconfig: PathBuf,
    config: Config,
    startup: Duration,
    ready_timeout: Duration,
    // Last, so the folder outlives the processes writing into it.
    dir: tempfile::TempDir,
}

impl TestEnv {
    /// Starts an environment owned by the caller and torn down on Drop. Use it for
    /// tests that stop or restart the API server; otherwise prefer [`TestEnv::shared`].
    pub async fn start() -> Result<TestEnv, Error> {
        Self::start_with(&Tuning::default()).await
    }

    /// [`TestEnv::start`] with extra flags for etcd and kube-apiserver (the
    /// fleet benchmark raises limits meant for a small test cluster; tests use
    /// the defaults).
    pub async fn start_with(tuning: &Tuning) -> Result<TestEnv, Error> {
        let began = Instant::now();
        sweep_stale_dirs();
        let assets = assets::locate()?;
        // A free port can be taken between choosing it and the child binding it;
        // that shows up as "address already in use" and is worth another go.
        let mut attempt = 1;
        loop {
            match Self::launch(&assets, tuning, began).await {
                Err(e) if attempt < 3 && is_port_clash(&e) => {
                    tracing::warn!(attempt, error = %e, "port taken during start-up, retrying");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    /// The environment shared by every test of this test binary, started on first
    /// use. If that start fails, every caller gets the same error at once.
    pub async fn shared() -> Result<&'static TestEnv, Error> {
        static SHARED: tokio::sync::OnceCell<Result<TestEnv, String>> =
            tokio::sync::OnceCell::const_new();
        SHARED
            .get_or_init(|| async { TestEnv::start().await.map_err(|e| e.to_string()) })
            .await
            .as_ref()
            .map_err(|e| Error::Shared(e.clone()))
    }

    async fn launch(assets: &Assets, tuning: &Tuning, began: Instant) -> Result<TestEnv, Error> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(Error::io("creating the environment's temporary folder"))?;
        let certs = certs::generate(dir.path())?;
        let [etcd_port, etcd_peer_port, apiserver_port] = process::free_ports::<3>()?;

        let mut etcd_flags = etcd_args(&assets.etcd, dir.path(), etcd_port, etcd_peer_port);
        etcd_flags.extend(tuning.etcd.iter().map(OsString::from));
        let mut etcd = Proc::spawn(
            "etcd",
            &assets.etcd,
            &etcd_flags,
            dir.path().join("etcd.log"),
        )?;
        let ready_timeout = tuning.ready_timeout.unwrap_or_else(timeout);
        wait_until_ready(&mut etcd, ready_timeout, || async move {
            etcd_health(etcd_port)
        })
        .await?;

        let kubeconfig = dir.path().join("kubeconfig");
        let config = write_kubeconfig(&kubeconfig, &certs, apiserver_port).await?;

        let mut apiserver_args = apiserver_args(&certs, dir.path(), etcd_port, apiserver_port);
        apiserver_args.extend(tuning.apiserver.iter().map(OsString::from));
        let mut env = TestEnv {
            assets: assets.clone(),
            apiserver: None,
            apiserver_args,
            apiserver_port,
            etcd,
            kubeconfig,
            config,
            startup: Duration::ZERO,
            ready_timeout,
            dir,
        };
        env.start_apiserver().await?;
        env.startup = began.elapsed();
        tracing::info!(
            startup = ?env.startup,
            url = %env.apiserver_url(),
            dir = %env.dir.path().display(),
            "test control plane ready"
        );
        Ok(env)
    }

    /// An admin client (`system:masters`), built in the caller's runtime. Call it
    /// per test; do not keep one across `#[tokio::test]`s.
    pub fn client(&self) -> Result<Client, Error> {
        Ok(Client::try_from(self.config.clone())?)
    }

    /// The admin [`kube::Config`], for clients with custom settings.
    pub fn config(&self) -> Config {
        self.config.clone()
    }

    /// A client that impersonates `user` with `groups` (admin credentials plus
    /// `Impersonate-*` headers). Empty `groups` lets the API server derive them, as
    /// it does for `system:serviceaccount:*` users.
    pub fn client_as(&self, user: &str, groups: &[&str]) -> Result<Client, Error> {
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups =
            (!groups.is_empty()).then(|| groups.iter().map(|g| (*g).to_owned()).collect());
        Ok(Client::try_from(config)?)
    }

    /// A client that acts as service account `namespace/name`, with the groups a
    /// real token of that account carries — what the operator's RBAC must allow.
    /// The ServiceAccount object need not exist (impersonation does not look).
    pub fn client_as_service_account(&self, namespace: &str, name: &str) -> Result<Client, Error> {
        let all_in_namespace = format!("system:serviceaccounts:{namespace}");
        self.client_as(
            &format!("system:serviceaccount:{namespace}:{name}"),
            &[
                "system:serviceaccounts",
                &all_in_namespace,
                "system:authenticated",
            ],
        )
    }

    /// Path of a kubeconfig for the admin user (certificate files, not inline data,
    /// so it is only valid while this environment lives).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// `kubectl --kubeconfig <ours> --cache-dir <ours>`; add arguments and run it.
    /// In async tests, `tokio::process::Command::from(env.kubectl())` avoids
    /// blocking the runtime.
    pub fn kubectl(&self) -> Command {
        let mut c = Command::new(&self.assets.kubectl);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("kubectl-cache"))
            .env("KUBECONFIG", &self.kubeconfig);
        c
    }

    /// `helm --kubeconfig <ours>`, with helm's cache, config and data folders in
    /// the environment's temporary folder so tests never read the user's repos.
    pub fn helm(&self) -> Command {
        let home = self.dir.path().join("helm");
        let mut c = Command::new(&self.assets.helm);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env_remove("HELM_KUBECONTEXT")
            .env_remove("HELM_NAMESPACE");
        c
    }

    /// The binaries this environment uses.
    pub fn assets(&self) -> &Assets {
        &self.assets
    }

    /// `https://127.0.0.1:<port>`; the port stays the same across restarts.
    pub fn apiserver_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    /// PID of kube-apiserver, `None` while stopped.
    pub fn apiserver_pid(&self) -> Option<u32> {
        self.apiserver.as_ref().map(Proc::pid)
    }

    /// PID of etcd.
    pub fn etcd_pid(&self) -> u32 {
        self.etcd.pid()
    }

    /// The temporary folder with certificates, data and the `etcd.log` /
    /// `kube-apiserver.log` files (look there when a test fails).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Wall time from [`TestEnv::start`] to a ready API server.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// Creates a namespace named [`unique_name`]`(prefix)` and returns the name.
    /// Namespaces are never finalized here (no controller manager), so do not wait
    /// for deletions.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String, Error> {
        let name = unique_name(prefix);
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": { "name": name },
        }))
        .map_err(|e| Error::Io {
            context: "building a Namespace".into(),
            source: std::io::Error::other(e),
        })?;
        Api::<Namespace>::all(self.client()?)
            .create(&PostParams::default(), &ns)
            .await?;
        Ok(name)
    }

    /// Kills kube-apiserver (SIGKILL: a crash, not a graceful shutdown). etcd and
    /// its data stay. A no-op when already stopped.
    pub fn stop_apiserver(&mut self) {
        if let Some(mut p) = self.apiserver.take() {
            p.kill();
        }
    }

    /// Starts kube-apiserver again with the same flags, port and etcd, and waits
    /// for `/readyz`. A no-op when it is running.
    pub async fn start_apiserver(&mut self) -> Result<(), Error> {
        if self.apiserver.is_some() {
            return Ok(());
        }
        let mut proc = Proc::spawn(
            "kube-apiserver",
            &self.assets.kube_apiserver,
            &self.apiserver_args,
            self.dir.path().join("kube-apiserver.log"),
        )?;
        let client = self.client()?;
        let result = wait_until_ready(&mut proc, self.ready_timeout, || {
            let client = client.clone();
            async move { apiserver_ready(&client).await }
        })
        .await;
        // Kept even on failure so Drop kills it.
        self.apiserver = Some(proc);
        result
    }

    /// [`TestEnv::stop_apiserver`] then [`TestEnv::start_apiserver`].
    pub async fn restart_apiserver(&mut self) -> Result<(), Error> {
        self.stop_apiserver();
        self.start_apiserver().await
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        // apiserver before etcd, so it does not spend its last moments retrying.
        self.stop_apiserver();
        self.etcd.kill();
    }
}

/// A Kubernetes-valid (DNS-1123 label) name, unique within this test process:
/// `<prefix>-<pid>-<counter>`, the prefix cut to fit 63 characters.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let suffix = format!(
        "-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let prefix: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(63 - suffix.len())
        .collect();
    let prefix = prefix.trim_matches('-');
    let prefix = if prefix.is_empty() { "t" } else { prefix };
    format!("{prefix}{suffix}")
}

fn is_port_clash(e: &Error) -> bool {
    matches!(e, Error::ExitedEarly { tail, .. } if tail.contains("address already in use"))
}

fn etcd_args(binary: &Path, dir: &Path, port: u16, peer_port: u16) -> Vec<OsString> {
    let client = format!("http://127.0.0.1:{port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let mut args: Vec<OsString> = vec![
        "--name=testenv".into(),
        format!("--data-dir={}", dir.join("etcd").display()).into(),
        format!("--listen-client-urls={client}").into(),
        format!("--advertise-client-urls={client}").into(),
        format!("--listen-peer-urls={peer}").into(),
        // Else etcd advertises its default localhost:2380 peer URL.
        format!("--initial-advertise-peer-urls={peer}").into(),
        format!("--initial-cluster=testenv={peer}").into(),
        "--log-level=warn".into(),
    ];
    // Throwaway data: fsync only costs time. envtest asks --help first too, since
    // etcd older than 3.5 (possible via KUBEBUILDER_ASSETS) lacks the flag.
    if etcd_supports_no_fsync(binary) {
        args.push("--unsafe-no-fsync=true".into());
    }
    args
}

fn etcd_supports_no_fsync(binary: &Path) -> bool {
    Command::new(binary)
        .arg("--help")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).contains("unsafe-no-fsync")
                || String::from_utf8_lossy(&o.stderr).contains("unsafe-no-fsync")
        })
        .unwrap_or(false)
}

fn apiserver_args(certs: &CertFiles, dir: &Path, etcd_port: u16, port: u16) -> Vec<OsString> {
    let path = |flag: &str, p: &Path| OsString::from(format!("--{flag}={}", p.display()));
    vec![
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}").into(),
        format!("--secure-port={port}").into(),
        "--bind-address=127.0.0.1".into(),
        // Else it is taken from the default route's interface.
        "--advertise-address=127.0.0.1".into(),
        // Since 1.3x the endpoint reconciler refuses a loopback advertise address
        // ("may not be in the loopback range") and the apiserver exits; nothing
        // here needs the `kubernetes` Service's endpoints.
        "--endpoint-reconciler-type=none".into(),
        path("cert-dir", &dir.join("apiserver-certs")),
        path("tls-cert-file", &certs.serving_cert),
        path("tls-private-key-file", &certs.serving_key),
        path("client-ca-file", &certs.ca_cert),
        "--authorization-mode=RBAC".into(),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--allow-privileged=true".into(),
        // Nothing creates default service accounts here (no controller manager),
        // so this plugin would refuse every pod.
        "--disable-admission-plugins=ServiceAccount".into(),
        format!("--service-account-issuer=https://127.0.0.1:{port}/").into(),
        path("service-account-key-file", &certs.sa_public),
        path("service-account-signing-key-file", &certs.sa_private),
    ]
}

/// Writes the admin kubeconfig and loads it back as the client config, so the
/// file kubectl and helm use is the one our own clients are known to work with.
async fn write_kubeconfig(path: &Path, certs: &CertFiles, port: u16) -> Result<Config, Error> {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "gpuready-testenv",
            "cluster": {
                "server": format!("https://127.0.0.1:{port}"),
                "certificate-authority": certs.ca_cert,
            },
        }],
        "users": [{
            "name": "admin",
            "user": {
                "client-certificate": certs.admin_cert,
                "client-key": certs.admin_key,
            },
        }],
        "contexts": [{
            "name": "gpuready-testenv",
            "context": { "cluster": "gpuready-testenv", "user": "admin", "namespace": "default" },
        }],
        "current-context": "gpuready-testenv",
    });
    let mut file = std::fs::File::create(path).map_err(Error::io("creating the kubeconfig"))?;
    file.write_all(serde_yaml_ng::to_string(&doc)?.as_bytes())
        .map_err(Error::io("writing the kubeconfig"))?;
    let kubeconfig = Kubeconfig::read_from(path)?;
    Ok(Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)
}

/// Polls `probe` until it succeeds, the process exits, or the timeout passes;
/// failures carry the tail of the process's log.
async fn wait_until_ready<F, Fut>(
    proc: &mut Proc,
    timeout: Duration,
    mut probe: F,
) -> Result<(), Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let began = Instant::now();
    loop {
        if let Some(status) = proc.exited() {
            return Err(Error::ExitedEarly {
                process: proc.name,
                status: status.to_string(),
                log: proc.log.clone(),
                tail: proc.log_tail(TAIL_LINES),
            });
        }
        let last_probe = match probe().await {
            Ok(()) => {
                tracing::debug!(process = proc.name, elapsed = ?began.elapsed(), "ready");
                return Ok(());
            }
            Err(e) => e,
        };
        if began.elapsed() > timeout {
            return Err(Error::Timeout {
                process: proc.name,
                timeout,
                last_probe,
                log: proc.log.clone(),
                tail: proc.log_tail(TAIL_LINES),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// etcd's `/health` over a plain socket (loopback, a few bytes: not worth an
/// HTTP client dependency, and blocking for at most a second is fine here).
fn etcd_health(port: u16) -> Result<(), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500))
        .map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("read: {e}"))?;
    if response.starts_with("HTTP/1.")
        && response.contains(" 200 ")
        && response.contains("\"true\"")
    {
        Ok(())
    } else {
        Err(format!(
            "unhealthy: {}",
            response.lines().last().unwrap_or_default()
        ))
    }
}

/// `/readyz` is ok, and the `default` namespace exists (the apiserver creates it
/// right after start; tests that use it should not race that).
async fn apiserver_ready(client: &Client) -> Result<(), String> {
    let request = http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await {
        Err(_) => return Err("/readyz: no answer within 5s".into()),
        Ok(Err(e)) => return Err(format!("/readyz: {e}")),
        Ok(Ok(_)) => {}
    }
    match Api::<Namespace>::all(client.clone())
        .get_opt("default")
        .await
    {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err("namespace default not created yet".into()),
        Err(e) => Err(format!("get namespace default: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_valid_dns_labels() {
        let long = "A_Very/Long:Prefix".repeat(10);
        for prefix in ["crd", "--x--", "", long.as_str()] {
            let name = unique_name(prefix);
            assert!(name.len() <= 63, "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
            assert!(!name.starts_with('-') && !name.ends_with('-'), "{name}");
        }
        assert_ne!(unique_name("a"), unique_name("a"));
    }
}
