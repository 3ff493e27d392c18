//! When the compute check runs, and running it. The decision is pure
//! ([`due`], [`blocker`]): a check is due on the probe's first report, after the
//! driver version, the boot ID or the GPU set changed, on a new request
//! annotation and periodically; it runs only while NVML lists no compute
//! process on any GPU (a workload's CUDA context, whatever its PID namespace),
//! no GPU is in an exclusive compute mode or MIG, and never sooner than the
//! minimum interval after the last run. The run itself is a child process
//! (`gpuready probe --compute-check-child`, [`super::cuda`]) under a timeout.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuready_api::keys::ANNOTATION_COMPUTE_CHECK_REQUEST;
use gpuready_api::probe::{
    ComputeCheck, ComputeOutcome, ComputeSkip, ComputeSkipReason, ComputeStack, ComputeTrigger,
    CudaError, DeviceNode, GpuState,
};
use jiff::Timestamp;

use super::cuda::ChildResult;

/// Whether the probe runs compute checks at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ComputeCheckMode {
    /// Run when due and the GPUs are idle.
    Auto,
    /// Never (the report says `Disabled`; no device nodes are listed).
    Off,
}

/// The probe's settings for the check.
#[derive(Clone, Debug)]
pub struct Settings {
    pub mode: ComputeCheckMode,
    pub min_interval: Duration,
    /// 0: no periodic re-check.
    pub every: Duration,
    pub timeout: Duration,
}

/// What the probe remembers between reports (in memory: a restarted probe
/// checks again, as its first check).
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// The latest run: its node-wide result and per-GPU results by UUID.
    pub last: Option<LastRun>,
    pub skipped: Option<ComputeSkip>,
}

#[derive(Clone, Debug)]
pub struct LastRun {
    pub at: Timestamp,
    pub check: ComputeCheck,
    pub gpus: Vec<(String, gpuready_api::probe::GpuCompute)>,
}

/// The stack the report describes now.
pub fn stack(driver: Option<&str>, boot_id: Option<&str>, gpus: &[GpuState]) -> ComputeStack {
    let mut uuids: Vec<String> = gpus.iter().filter_map(|g| g.uuid.clone()).collect();
    uuids.sort_unstable();
    ComputeStack {
        driver_version: driver.map(str::to_owned),
        boot_id: boot_id.map(str::to_owned),
        gpus: uuids,
    }
}

/// Why a check is due now, if it is.
pub fn due(
    memory: &Memory,
    now_stack: &ComputeStack,
    request: Option<&str>,
    now: Timestamp,
    every: Duration,
) -> Option<ComputeTrigger> {
    let Some(last) = &memory.last else {
        return Some(ComputeTrigger::FirstCheck);
    };
    let then = last.check.stack.clone().unwrap_or_default();
    if then.driver_version != now_stack.driver_version {
        return Some(ComputeTrigger::DriverChanged);
    }
    if then.boot_id != now_stack.boot_id {
        return Some(ComputeTrigger::BootChanged);
    }
    if then.gpus != now_stack.gpus {
        return Some(ComputeTrigger::GpuSetChanged);
    }
    if let Some(r) = request
        && last.check.request.as_deref() != Some(r)
    {
        return Some(ComputeTrigger::Requested);
    }
    if !every.is_zero()
        && now.as_second() - last.at.as_second()
            >= i64::try_from(every.as_secs()).unwrap_or(i64::MAX)
    {
        return Some(ComputeTrigger::Periodic);
    }
    None
}

/// What keeps a due check from running now: never take a GPU from a workload.
/// The messages are fixed per reason (they reach node conditions, which must
/// not change with every process count).
pub fn blocker(
    nvml_usable: bool,
    gpus: &[GpuState],
    memory: &Memory,
    now: Timestamp,
    min_interval: Duration,
) -> Option<(ComputeSkipReason, String)> {
    if !nvml_usable {
        return Some((
            ComputeSkipReason::NvmlUnusable,
            "NVML is unusable, so the probe cannot tell whether a workload uses the GPUs".into(),
        ));
    }
    // Which GPUs are busy is in gpus[].computeProcesses; the message stays the
    // same while workloads come and go, so it rewrites no node condition.
    if gpus.iter().any(|g| g.compute_processes != Some(0)) {
        return Some((
            ComputeSkipReason::GpusBusy,
            "a workload holds a GPU (NVML lists compute processes, see gpus[].computeProcesses, or cannot list them): the check waits until every GPU is idle".into(),
        ));
    }
    let exclusive: Vec<String> = gpus
        .iter()
        .filter(|g| matches!(g.compute_mode.as_deref(), Some(m) if m != "Default"))
        .map(|g| g.index.to_string())
        .collect();
    if !exclusive.is_empty() {
        return Some((
            ComputeSkipReason::ExclusiveComputeMode,
            format!(
                "GPU {} is in an exclusive or prohibited compute mode: a context of the probe could lock a workload out",
                exclusive.join(", ")
            ),
        ));
    }
    if gpus.iter().any(|g| g.mig_enabled == Some(true)) {
        return Some((
            ComputeSkipReason::MigEnabled,
            "MIG is enabled: CUDA reaches MIG instances only, which the check does not cover"
                .into(),
        ));
    }
    if let Some(last) = &memory.last
        && now.as_second() - last.at.as_second()
            < i64::try_from(min_interval.as_secs()).unwrap_or(i64::MAX)
    {
        return Some((
            ComputeSkipReason::MinInterval,
            format!(
                "the last check ran less than the minimum interval ({}s) ago",
                min_interval.as_secs()
            ),
        ));
    }
    None
}

/// Records a skipped due check; keeps the first time it was skipped while the
/// same trigger stays due for the same reason.
pub fn note_skip(
    memory: &mut Memory,
    trigger: ComputeTrigger,
    reason: ComputeSkipReason,
    message: String,
    now: Timestamp,
) {
    let since = match &memory.skipped {
        Some(s) if s.due == trigger && s.reason == reason => s.since.clone(),
        _ => now.to_string(),
    };
    memory.skipped = Some(ComputeSkip {
        reason,
        due: trigger,
        message,
        since,
    });
}

/// The report's `computeCheck` and the per-GPU results, from memory.
pub fn report_fields(settings: &Settings, memory: &Memory, gpus: &mut [GpuState]) -> ComputeCheck {
    if settings.mode == ComputeCheckMode::Off {
        return ComputeCheck {
            outcome: ComputeOutcome::Disabled,
            ..ComputeCheck::default()
        };
    }
    let mut check = match &memory.last {
        Some(last) => {
            for g in gpus.iter_mut() {
                g.compute = g.uuid.as_ref().and_then(|u| {
                    last.gpus
                        .iter()
                        .find(|(id, _)| id == u)
                        .map(|(_, r)| r.clone())
                });
            }
            last.check.clone()
        }
        None => ComputeCheck::default(),
    };
    check.skipped = memory.skipped.clone();
    check
}

/// The pod annotation asking for a check, from the downward API's
/// `annotations` file (`key="escaped value"` per line).
pub fn read_request(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k == ANNOTATION_COMPUTE_CHECK_REQUEST).then(|| v.trim_matches('"').to_owned())
    })
}

/// The node's boot ID (not namespaced: a container reads the host's).
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The device nodes a CUDA container needs, and whether each is a character
/// device (a file or directory at the path does not count).
pub fn device_nodes(minors: &[(u32, u32)]) -> Vec<DeviceNode> {
    use std::os::unix::fs::FileTypeExt;
    let present = |p: &str| {
        std::fs::metadata(p)
            .map(|m| m.file_type().is_char_device())
            .unwrap_or(false)
    };
    let mut out: Vec<DeviceNode> = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
        .iter()
        .map(|p| DeviceNode {
            path: (*p).to_owned(),
            present: present(p),
            gpu: None,
        })
        .collect();
    for (index, minor) in minors {
        let path = format!("/dev/nvidia{minor}");
        out.push(DeviceNode {
            present: present(&path),
            path,
            gpu: Some(*index),
        });
    }
    out
}

/// Runs the check in a child process and folds its result into the memory.
pub fn run(
    settings: &Settings,
    memory: &mut Memory,
    trigger: ComputeTrigger,
    stack: ComputeStack,
    request: Option<String>,
) {
    let at = Timestamp::now();
    let t = Instant::now();
    let child = run_child(settings.timeout);
    let millis = (t.elapsed().as_secs_f64() * 1e4).round() / 10.0;
    let (result, error) = match child {
        Ok(r) => (r, None),
        Err(e) => (ChildResult::default(), Some(e)),
    };
    // A failed device CUDA could not name (no UUID) cannot be matched to an
    // NVML GPU: its error becomes the node-wide one, so it is never lost.
    let unmatched = result
        .devices
        .iter()
        .find(|d| d.uuid.is_none() && d.result.outcome != ComputeOutcome::Passed)
        .and_then(|d| d.result.error.clone());
    let error = error.or(result.check.error.clone()).or(unmatched);
    // The child's node-wide fields (library, CUDA version, cuInit's time) as
    // it printed them; the verdict and error are judged again here.
    let check = ComputeCheck {
        outcome: super::cuda::outcome(error.is_some(), &result.devices),
        ran_at: Some(at.to_string()),
        trigger: Some(trigger),
        stack: Some(stack),
        error,
        millis: Some(millis),
        skipped: None,
        request,
        ..result.check
    };
    let gpus = result
        .devices
        .into_iter()
        .filter_map(|d| Some((d.uuid?, d.result)))
        .collect();
    memory.last = Some(LastRun { at, check, gpus });
    memory.skipped = None;
}

/// Starts `gpuready probe --compute-check-child` and reads its JSON, killing it
/// after `timeout`.
fn run_child(timeout: Duration) -> Result<ChildResult, CudaError> {
    let fail = |name: &str, detail: String| CudaError {
        name: name.to_owned(),
        code: 0,
        step: "child".into(),
        detail: Some(detail),
    };
    let exe = std::env::current_exe()
        .map_err(|e| fail("CUDA_CHECK_NOT_STARTED", format!("own executable: {e}")))?;
    let mut child = Command::new(exe)
        .args(["probe", "--compute-check-child"])
        // No JIT cache on disk: the probe's root filesystem is read-only, and
        // each check should compile the PTX afresh anyway.
        .env("CUDA_CACHE_DISABLE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail("CUDA_CHECK_NOT_STARTED", format!("starting the check: {e}")))?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = stdout.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = stderr.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(
                    "CUDA_CHECK_TIMEOUT",
                    format!(
                        "the compute check did not finish within {}s: a GPU or the driver hangs",
                        timeout.as_secs()
                    ),
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(fail("CUDA_CHECK_CRASHED", format!("waiting: {e}"))),
        }
    };
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if !status.success() {
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(fail(
            "CUDA_CHECK_CRASHED",
            format!("the check process ended with {status}: {last}"),
        ));
    }
    serde_json::from_str(&out).map_err(|e| {
        fail(
            "CUDA_CHECK_CRASHED",
            format!("the check process printed no result ({e})"),
        )
    })
}

#[cfg(test)]
mod tests;
