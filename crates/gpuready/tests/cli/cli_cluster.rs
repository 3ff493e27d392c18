//! How `check` and `run` find their cluster, and what they say when they cannot
//! reach it: `--kubeconfig` and `--context` on both (the flags `nfd-crds` has),
//! an unreachable server named with what to check, and logs without colour
//! escapes when stderr is not a terminal. The shipped binary against a real API
//! server (or against a port where none listens).

use crate::support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gpuready_testenv::TestEnv;
use support::*;

/// `gpuready <args>` with only the flags pointing at a cluster (no
/// KUBECONFIG, no in-cluster service) and no RUST_LOG.
fn gpuready_cli(args: &[&str]) -> Command {
    let mut c = gpuready();
    c.args(args).env_remove("RUST_LOG");
    c
}

fn text(o: &Output) -> (String, String) {
    (stdout(o), stderr(o))
}

#[tokio::test]
async fn check_takes_kubeconfig_and_context() {
    let env = TestEnv::shared().await.expect("test control plane");
    let kubeconfig = env.kubeconfig_path().to_str().expect("utf-8").to_owned();

    let o = gpuready_cli(&["check", "--kubeconfig", &kubeconfig])
        .output()
        .expect("run check");
    let (out, err) = text(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{out}\n{err}");
    assert!(out.contains("governed node(s)"), "{out}\n{err}");

    // The context the file names works; one it does not name is refused by name.
    let o = gpuready_cli(&[
        "check",
        "--kubeconfig",
        &kubeconfig,
        "--context",
        "gpuready-testenv",
    ])
    .output()
    .expect("run check");
    assert!(matches!(o.status.code(), Some(0 | 1)), "{:?}", text(&o));
    let o = gpuready_cli(&["check", "--kubeconfig", &kubeconfig, "--context", "nope"])
        .output()
        .expect("run check");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn an_unreachable_server_is_named_with_what_to_check() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    // Port 1 on loopback: nothing listens there.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .expect("write kubeconfig");
    let o = gpuready_cli(&["check", "--kubeconfig", kubeconfig.to_str().expect("utf-8")])
        .output()
        .expect("run check");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot reach the Kubernetes API server at https://127.0.0.1:1"),
        "{err}"
    );
    assert!(
        err.contains("--kubeconfig") && err.contains("--context"),
        "{err}"
    );
}

/// `run --kubeconfig` talks to that cluster (it logs the server it uses), a
/// missing file is refused by name, and logs written to a pipe carry no ANSI
/// colour codes.
#[tokio::test]
async fn run_takes_kubeconfig_and_logs_plain_text_to_a_pipe() {
    let env = TestEnv::shared().await.expect("test control plane");
    let kubeconfig = env.kubeconfig_path().to_str().expect("utf-8").to_owned();

    let o = gpuready_cli(&[
        "run",
        "--kubeconfig",
        "/nonexistent/other",
        "--nfd-crds",
        "off",
    ])
    .output()
    .expect("run");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/other"), "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "no escape codes in a pipe: {err:?}"
    );

    let log = tempfile::NamedTempFile::new().expect("log file");
    let mut child = gpuready_cli(&[
        "run",
        "--kubeconfig",
        &kubeconfig,
        "--nfd-crds",
        "off",
        "--http-addr",
        "127.0.0.1:0",
        "--leader-elect=false",
    ])
    .stdout(Stdio::null())
    .stderr(log.reopen().expect("log handle"))
    .spawn()
    .expect("start run");
    let server = env.config().cluster_url.to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let logged = loop {
        let text = std::fs::read_to_string(log.path()).unwrap_or_default();
        if text.contains("using the Kubernetes API server") || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        logged.contains(server.trim_end_matches('/')),
        "{server} not in {logged}"
    );
    assert!(
        !logged.contains('\u{1b}'),
        "no escape codes in a file: {logged:?}"
    );
}
