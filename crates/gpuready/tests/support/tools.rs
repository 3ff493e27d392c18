//! Running the programs a user runs: the `gpuready` binary this build made,
//! and kubectl and helm pointed at a test control plane. Async callers use
//! [`run`]/[`must`] so a slow command does not block the runtime that serves
//! the controller under test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuready_testenv::TestEnv;

use super::repo_root;

/// The instant the example dumps in `deploy/examples` were taken at: offline
/// checks pass it as `--now` so the dumps' GFD timestamps never age.
pub const DUMPED_AT: &str = "2026-11-29T12:00:00Z";

/// What a finished command printed, and how it ended.
pub struct Out {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Out {
    fn from(out: Output) -> Out {
        Out {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs a command without blocking the runtime, feeding `stdin` (through a
/// temporary file: the workspace's tokio has no io-util).
pub async fn run(command: Command, stdin: Option<&str>) -> Out {
    let input = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(input.path(), stdin.unwrap_or_default()).expect("write stdin file");
    let mut command = tokio::process::Command::from(command);
    command.stdin(std::fs::File::open(input.path()).expect("open stdin file"));
    command.output().await.expect("run command").into()
}

/// Runs a command that must succeed; returns its stdout.
pub async fn must(command: Command, stdin: Option<&str>, what: &str) -> String {
    let shown = format!("{command:?}");
    let out = run(command, stdin).await;
    assert!(
        out.ok,
        "{what} failed: {shown}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out.stdout
}

/// `helm <args>` against `env`.
pub fn helm(env: &TestEnv, args: &[&str]) -> Command {
    let mut c = env.helm();
    c.args(args);
    c
}

/// `kubectl <args>` against `env`.
pub fn kubectl(env: &TestEnv, args: &[&str]) -> Command {
    let mut c = env.kubectl();
    c.args(args);
    c
}

/// `kubectl apply -f <file>`: client-side apply, as NFD's docs and Helm-era
/// upgrade scripts do (manager `kubectl-client-side-apply`, last-applied
/// annotation).
pub async fn kubectl_apply(env: &TestEnv, file: &Path) {
    let file = file.to_str().expect("utf-8 path");
    must(
        kubectl(env, &["apply", "-f", file]),
        None,
        &format!("kubectl apply -f {file}"),
    )
    .await;
}

/// The `gpuready` binary of this build, with nothing from the environment that
/// could point it at a cluster (no in-cluster service, no KUBECONFIG): a test
/// names the cluster with [`gpuready_on`] or with flags.
pub fn gpuready() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuready"));
    c.env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent/kubeconfig");
    c
}

/// The `gpuready` binary pointed at `env` through `KUBECONFIG`.
pub fn gpuready_on(env: &TestEnv) -> Command {
    gpuready_with_kubeconfig(env.kubeconfig_path())
}

/// The `gpuready` binary pointed at a kubeconfig file through `KUBECONFIG`.
pub fn gpuready_with_kubeconfig(kubeconfig: &Path) -> Command {
    let mut c = gpuready();
    c.env("KUBECONFIG", kubeconfig);
    c
}

/// `gpuready check --now DUMPED_AT` over these `--nodes`, `--profiles` and
/// `extra` arguments, offline.
pub fn offline_check(nodes: &[PathBuf], profiles: &[PathBuf], extra: &[&str]) -> Output {
    let mut cmd = gpuready();
    cmd.arg("check").args(["--now", DUMPED_AT]);
    if !nodes.is_empty() {
        cmd.arg("--nodes").args(nodes);
    }
    if !profiles.is_empty() {
        cmd.arg("--profiles").args(profiles);
    }
    cmd.args(extra).output().expect("gpuready runs")
}

/// A file `name` holding `contents` in a fresh temporary folder (removed when
/// the returned guard drops).
pub fn temp_file(name: &str, contents: impl AsRef<[u8]>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, contents).expect("write temp file");
    (dir, path)
}

/// The nodes and profiles of the talos-rtx3050 example, all ready: the valid
/// half of an input whose other half a test breaks.
pub fn good_nodes() -> PathBuf {
    repo_root().join("deploy/examples/talos-rtx3050/nodes.json")
}

pub fn good_profiles() -> PathBuf {
    repo_root().join("deploy/examples/talos-rtx3050/profiles.yaml")
}

/// Asserts that `check` refused its input: exit 2, every fragment on stderr
/// (the file, the document, the field…), and no report on stdout.
#[track_caller]
pub fn assert_refused(o: &Output, fragments: &[&str]) {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout:\n{}\nstderr:\n{err}",
        stdout(o)
    );
    for f in fragments {
        assert!(err.contains(f), "stderr should mention {f:?}:\n{err}");
    }
    assert!(o.stdout.is_empty(), "no report on bad input: {}", stdout(o));
}
