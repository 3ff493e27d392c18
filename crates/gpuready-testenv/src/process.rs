//! Child processes that cannot outlive the test process.
//!
//! On Linux every child is started as `setpriv --pdeathsig KILL -- <binary> ...`:
//! setpriv sets the parent-death signal and then execs the binary, so the PID we
//! hold is the binary's own, and the kernel SIGKILLs it when its parent goes away,
//! even when the test process is itself SIGKILLed and no Drop runs. This needs no
//! `unsafe` (a `pre_exec` + `prctl` would, and the workspace forbids it).
//!
//! The kernel ties the parent-death signal to the *thread* that forked the child,
//! not to the process. Tokio tests run on runtime worker threads that come and go
//! (and `#[tokio::test]` runs on the test's own short-lived thread), so every child
//! is forked by one dedicated spawner thread that lives until the process exits.
//!
//! Remaining gap: if the test process dies in the microseconds between fork and
//! setpriv's prctl, the child survives. The parent is alive while it waits for the
//! spawn reply, so in practice this cannot happen during a test.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;

use crate::error::Error;

/// A request to the spawner thread: the command and where to send the result.
struct SpawnRequest {
    command: Command,
    reply: mpsc::Sender<std::io::Result<Child>>,
}

static SPAWNER: OnceLock<Result<mpsc::Sender<SpawnRequest>, String>> = OnceLock::new();

/// Forks `command` from the long-lived spawner thread (see the module doc).
fn spawn_from_spawner_thread(command: Command) -> Result<Child, Error> {
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("gpuready-testenv-spawner".into())
            // The loop never ends: the sender lives in a static, so this thread is
            // the parent of every child until the process exits.
            .spawn(move || {
                for mut request in rx {
                    // The requester may have given up; nothing to do then.
                    let _ = request.reply.send(request.command.spawn());
                }
            })
            .map(|_| tx)
            .map_err(|e| e.to_string())
    });
    let sender = sender.as_ref().map_err(|e| Error::Io {
        context: "starting the spawner thread".into(),
        source: std::io::Error::other(e.clone()),
    })?;
    let (reply, response) = mpsc::channel();
    let lost = || Error::Io {
        context: "spawner thread".into(),
        source: std::io::Error::other("the spawner thread is gone"),
    };
    sender
        .send(SpawnRequest { command, reply })
        .map_err(|_| lost())?;
    response
        .recv()
        .map_err(|_| lost())?
        .map_err(Error::io("spawning a control-plane process"))
}

/// `setpriv` on Linux; `None` elsewhere (no parent-death signal there, Drop only).
fn supervisor() -> Result<Option<PathBuf>, Error> {
    if !cfg!(target_os = "linux") {
        return Ok(None);
    }
    static SETPRIV: OnceLock<Option<PathBuf>> = OnceLock::new();
    SETPRIV
        .get_or_init(|| {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .map(|dir| dir.join("setpriv"))
                .find(|p| p.is_file())
        })
        .clone()
        .map(Some)
        .ok_or(Error::MissingSetpriv)
}

/// One running control-plane process, its output going to a log file.
#[derive(Debug)]
pub(crate) struct Proc {
    pub name: &'static str,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// Starts `binary args...`, appending stdout and stderr to `log` (a file, not a
    /// pipe: nobody has to drain it, and it survives for the error message).
    pub fn spawn(
        name: &'static str,
        binary: &Path,
        args: &[OsString],
        log: PathBuf,
    ) -> Result<Proc, Error> {
        let mut out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(Error::io(format!("opening {}", log.display())))?;
        // Restarts append to the same log; the marker tells the runs apart.
        writeln!(out, "===== gpuready-testenv: starting {name} =====")
            .map_err(Error::io(format!("writing {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(Error::io(format!("opening {}", log.display())))?;
        let mut command = match supervisor()? {
            Some(setpriv) => {
                let mut c = Command::new(setpriv);
                c.args(["--pdeathsig", "KILL", "--"]).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = spawn_from_spawner_thread(command)?;
        tracing::debug!(name, pid = child.id(), log = %log.display(), "spawned");
        Ok(Proc { name, child, log })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL and reap. Tests want the outage now, and a killed etcd or apiserver
    /// is exactly the crash a fault test simulates.
    pub fn kill(&mut self) {
        if self.exited().is_none() {
            // Fails only if it already exited, which wait() then reaps.
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// The last `lines` lines of the log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of a file, reading at most its last 32 KiB.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    const MAX: u64 = 32 * 1024;
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(MAX)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read the log: {e})"),
    }
}

/// `n` distinct free loopback ports. All listeners are held until every port is
/// chosen so the kernel cannot hand out the same one twice; there is still a small
/// window before the child binds them, which start-up retries cover.
pub(crate) fn free_ports<const N: usize>() -> Result<[u16; N], Error> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    for port in &mut ports {
        let l = TcpListener::bind("127.0.0.1:0").map_err(Error::io("finding a free port"))?;
        *port = l
            .local_addr()
            .map_err(Error::io("finding a free port"))?
            .port();
        listeners.push(l);
    }
    Ok(ports)
}

/// Name prefix of every environment's temporary folder; the PID follows it so a
/// later run can tell which folders belong to dead processes.
pub(crate) const DIR_PREFIX: &str = "gpuready-testenv-";

/// Removes temporary folders left by test processes that no longer exist (killed,
/// or the shared environment, whose Drop never runs). Returns how many it removed.
/// Linux only: it asks /proc whether the owner is alive.
pub fn sweep_stale_dirs() -> usize {
    if !cfg!(target_os = "linux") {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists()
            && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}
