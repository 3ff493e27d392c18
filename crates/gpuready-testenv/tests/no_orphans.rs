//! Proves that etcd and kube-apiserver never outlive the test process.
//!
//! The binary re-executes itself as a child "test process" that starts an
//! environment, prints the PIDs and then either waits to be SIGKILLed (no Drop,
//! no unwinding: only the kernel's parent-death signal can clean up) or exits
//! with `std::process::exit` while holding the shared environment (whose Drop
//! never runs by design). The parent then checks the PIDs disappear.
//!
//! The child starts its environment from a thread that exits right after: if the
//! parent-death signal were tied to that thread instead of the long-lived spawner
//! thread, the control plane would die there and the child would report it.
//!
//! `harness = false` because the child mode needs its own `main`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpuready_testenv::TestEnv;

const CHILD_MODE: &str = "GPUREADY_TESTENV_ORPHAN_CHILD";

fn main() {
    // Test runners list tests before running them; answer like libtest does.
    if std::env::args().any(|a| a == "--list") {
        println!("sigkilled_test_process_leaves_no_processes: test");
        println!("shared_env_dies_with_exiting_test_process: test");
        return;
    }
    match std::env::var(CHILD_MODE).as_deref() {
        Ok(mode) => child(mode),
        Err(_) => {
            parent(
                "sigkilled_test_process_leaves_no_processes",
                "own-then-sigkill",
            );
            parent(
                "shared_env_dies_with_exiting_test_process",
                "shared-then-exit",
            );
            println!("\ntest result: ok. 2 passed");
        }
    }
}

/// The child test process: start, report, then die as `mode` says.
fn child(mode: &str) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let env: &TestEnv = match mode {
        "own-then-sigkill" => {
            // Started on a thread (with its own runtime) that ends right away.
            let env = std::thread::spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(TestEnv::start())
            })
            .join()
            .expect("starter thread")
            .expect("start environment");
            Box::leak(Box::new(env))
        }
        "shared-then-exit" => std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(TestEnv::shared())
        })
        .join()
        .expect("starter thread")
        .expect("start shared environment"),
        other => panic!("unknown {CHILD_MODE}={other}"),
    };
    // Still serving after the starting thread is gone.
    runtime.block_on(async {
        let version = env
            .client()
            .expect("client")
            .apiserver_version()
            .await
            .expect("API server answers after its starting thread exited");
        eprintln!("child: API server {} is up", version.git_version);
    });
    println!(
        "READY etcd={} apiserver={} dir={} startup_ms={}",
        env.etcd_pid(),
        env.apiserver_pid().expect("apiserver running"),
        env.dir().display(),
        env.startup_time().as_millis()
    );
    match mode {
        // exit() runs no destructors: the shared env is never dropped.
        "shared-then-exit" => std::process::exit(0),
        _ => loop {
            std::thread::sleep(Duration::from_secs(60));
        },
    }
}

struct Ready {
    etcd: u32,
    apiserver: u32,
    dir: PathBuf,
}

fn parse_ready(line: &str) -> Option<Ready> {
    let rest = line.strip_prefix("READY ")?;
    let field = |k: &str| {
        rest.split(' ')
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
    };
    Some(Ready {
        etcd: field("etcd")?.parse().ok()?,
        apiserver: field("apiserver")?.parse().ok()?,
        dir: PathBuf::from(field("dir")?),
    })
}

/// Alive and not a zombie waiting for init to reap it.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Format: "pid (comm) S ..."; comm may contain spaces, so split after ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn parent(name: &str, mode: &str) {
    let began = Instant::now();
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .env(CHILD_MODE, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child test process");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let ready = loop {
        match rx.recv_timeout(Duration::from_secs(300)) {
            Ok(line) => {
                if let Some(r) = parse_ready(&line) {
                    println!("{name}: child says {line}");
                    break r;
                }
            }
            Err(e) => {
                let _ = child.kill();
                panic!(
                    "{name}: child never reported READY ({e}); status {:?}",
                    child.wait()
                );
            }
        }
    };
    assert_eq!(comm(ready.etcd), "etcd", "{name}: etcd PID");
    assert_eq!(
        comm(ready.apiserver),
        "kube-apiserver",
        "{name}: apiserver PID"
    );

    if mode == "own-then-sigkill" {
        assert!(alive(ready.etcd) && alive(ready.apiserver));
        child.kill().expect("SIGKILL the child test process");
    }
    let status = child.wait().expect("reap child");
    println!("{name}: child test process ended: {status}");

    let deadline = Instant::now() + Duration::from_secs(10);
    while (alive(ready.etcd) || alive(ready.apiserver)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let leftovers: Vec<u32> = [ready.etcd, ready.apiserver]
        .into_iter()
        .filter(|p| alive(*p))
        .collect();
    if !leftovers.is_empty() {
        // Do not leave them behind ourselves, then fail.
        for pid in &leftovers {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        panic!("{name}: processes outlived the test process: {leftovers:?}");
    }

    // The dead process's temporary folder is garbage now; the next start sweeps it.
    assert!(
        ready.dir.exists(),
        "{name}: no Drop ran, the folder should remain"
    );
    gpuready_testenv::sweep_stale_dirs();
    assert!(
        !Path::new(&ready.dir).exists(),
        "{name}: sweep_stale_dirs left {}",
        ready.dir.display()
    );
    println!("{name}: ok ({:?})", began.elapsed());
}
