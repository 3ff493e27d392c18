//! The shipped binary, as a pod runs it: `gpuready run` against a real API server
//! serves /healthz, /readyz and /metrics, takes the Lease, and on SIGTERM
//! finishes, releases the Lease and exits 0.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::*;

/// A plain HTTP/1.0 GET on loopback: (status code, body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Some((code, body))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::test]
async fn the_binary_serves_health_takes_the_lease_and_releases_it_on_sigterm() {
    let env = env_with_crd().await;
    let client = env.client().unwrap();
    let port = free_port();
    let mut child = gpuready_on(&env)
        .args([
            "run",
            "--http-addr",
            &format!("127.0.0.1:{port}"),
            "--nfd-crds",
            "off",
        ])
        .args(["--identity", "bin-test", "--lease-namespace", "default"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gpuready run");

    eventually(30, "/healthz answers ok", || async {
        get(port, "/healthz").filter(|(c, _)| *c == 200)
    })
    .await;
    eventually(30, "/readyz answers ok", || async {
        get(port, "/readyz").filter(|(c, _)| *c == 200)
    })
    .await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    eventually(30, "the lease is held by the binary", || async {
        let l = leases.get_opt("gpuready").await.ok()??;
        (l.spec?.holder_identity.as_deref() == Some("bin-test")).then_some(())
    })
    .await;
    let (_, metrics) = get(port, "/metrics").expect("/metrics");
    assert!(
        metrics.lines().any(|l| l == "gpuready_leader 1"),
        "{metrics}"
    );

    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let status = eventually(30, "the process exits after SIGTERM", || {
        let done = child.try_wait().expect("wait");
        async move { done }
    })
    .await;
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    assert!(status.success(), "exit status {status}\n{stderr}");
    assert!(stderr.contains("shutting down"), "{stderr}");
    let released = leases.get("gpuready").await.expect("lease");
    let holder = released.spec.and_then(|s| s.holder_identity);
    assert!(
        holder.as_deref().is_none_or(|h| h != "bin-test"),
        "the lease is released on SIGTERM, holder {holder:?}"
    );
}
