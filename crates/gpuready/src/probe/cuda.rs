//! The compute check through the CUDA driver API (`cudarc`, which loads
//! libcuda at run time, so the binary builds and runs without a driver or a
//! CUDA toolkit): cuInit, then per GPU a context, a small buffer copied
//! host→device→host and compared, and one PTX kernel JIT-compiled by the driver
//! whose result is checked. Runs in a child process of the probe
//! ([`run_child`]), so a hung GPU is bounded by a timeout and libcuda's memory
//! is given back when the check ends.
//!
//! The calls cudarc marks unsafe (its library probe, the driver version, the
//! kernel launch) and the kernel itself are in `ffi.rs`, the probe's one
//! module with `unsafe`.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaStream, DriverError};
use gpuready_api::probe::{ComputeCheck, ComputeOutcome, ComputeStep, CudaError, GpuCompute};
use serde::{Deserialize, Serialize};

/// Elements of the test buffer (`u32`): 16 MiB per buffer, two buffers on the
/// GPU, 48 MiB of host buffers at the peak (libcuda itself took far more: the
/// child peaked at 205 MB RSS on an H200).
pub const ELEMENTS: usize = 4 * 1024 * 1024;

/// What the child process prints: the node-wide part and one result per CUDA
/// device, keyed by UUID so the parent can match NVML's GPUs.
///
/// The node-wide part is the report's own [`ComputeCheck`] (flattened, so the
/// child prints `library`, `cudaVersion`, `error`, `initMillis` and `outcome`
/// at the top as before): the child fills what it can know, the parent the
/// rest (when, why, the stack, the whole run's time), and the fields are
/// listed once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChildResult {
    #[serde(flatten)]
    pub check: ComputeCheck,
    #[serde(default)]
    pub devices: Vec<DeviceResult>,
}

#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceResult {
    /// CUDA ordinal (differs from NVML's index unless CUDA_DEVICE_ORDER=PCI_BUS_ID).
    pub ordinal: u32,
    pub uuid: Option<String>,
    pub result: GpuCompute,
}

/// A CUresult as the report names it.
pub fn cuda_error(e: &DriverError, step: &str) -> CudaError {
    // The enum's variant name is the CUresult's name (CUDA_ERROR_...); its
    // discriminant is the number. Neither needs the driver, which may be the
    // thing that failed.
    CudaError {
        name: format!("{:?}", e.0),
        code: e.0 as u32,
        step: step.to_owned(),
        detail: e
            .error_string()
            .ok()
            .map(|s| s.to_string_lossy().into_owned()),
    }
}

/// Failed when a node-wide error stopped the check or a device did not pass:
/// one rule for the child's verdict and the parent's (which adds errors only
/// it can see: a timeout, a crash, a device without a UUID).
pub fn outcome(node_error: bool, devices: &[DeviceResult]) -> ComputeOutcome {
    if node_error
        || devices
            .iter()
            .any(|d| d.result.outcome != ComputeOutcome::Passed)
    {
        ComputeOutcome::Failed
    } else {
        ComputeOutcome::Passed
    }
}

/// The compute check in this process (the child). Never panics on a CUDA
/// error: each is reported by name and number.
pub fn check() -> ChildResult {
    let mut out = ChildResult::default();
    run_check(&mut out);
    out.check.outcome = outcome(out.check.error.is_some(), &out.devices);
    out
}

/// [`check`]'s steps, stopping at the first node-wide failure.
fn run_check(out: &mut ChildResult) {
    if !super::ffi::libcuda_present() {
        out.check.error = Some(CudaError {
            name: "CUDA_LIBRARY_UNAVAILABLE".into(),
            code: 0,
            step: "load".into(),
            detail: Some(
                "libcuda.so.1 (or libcuda.so) not found by the dynamic loader: no NVIDIA driver, or the container was started without the compute capability".into(),
            ),
        });
        return;
    }
    out.check.library = Some("libcuda.so".into());
    let t = Instant::now();
    let init = cudarc::driver::result::init();
    out.check.init_millis = Some(ms(t));
    if let Err(e) = init {
        out.check.error = Some(cuda_error(&e, "init"));
        return;
    }
    out.check.cuda_version = driver_version();
    let count = match cudarc::driver::result::device::get_count() {
        Ok(n) => n,
        Err(e) => {
            out.check.error = Some(cuda_error(&e, "deviceCount"));
            return;
        }
    };
    for ordinal in 0..count.max(0) {
        out.devices.push(check_device(ordinal as usize));
    }
}

fn driver_version() -> Option<String> {
    let v = super::ffi::cuda_driver_version()?;
    Some(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

fn ms(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

/// Runs the steps on one device, timing each; stops at the first failure.
fn check_device(ordinal: usize) -> DeviceResult {
    let mut steps = Vec::new();
    let mut device = DeviceResult {
        ordinal: ordinal as u32,
        ..DeviceResult::default()
    };
    // Every outcome reports the steps run and the bytes a full run moves; a
    // failure adds what failed.
    let (outcome, error, mismatch) = match run_steps(ordinal, &mut steps, &mut device.uuid) {
        Ok(()) => (ComputeOutcome::Passed, None, None),
        Err(Failure::Cuda(e)) => (ComputeOutcome::Failed, Some(e), None),
        Err(Failure::Mismatch(m)) => (ComputeOutcome::Failed, None, Some(m)),
    };
    device.result = GpuCompute {
        outcome,
        steps,
        error,
        mismatch,
        bytes: (2 * ELEMENTS * 4) as u64,
    };
    device
}

enum Failure {
    Cuda(CudaError),
    Mismatch(String),
}

/// Times one step and records it.
fn step<T>(
    steps: &mut Vec<ComputeStep>,
    name: &str,
    f: impl FnOnce() -> Result<T, Failure>,
) -> Result<T, Failure> {
    let t = Instant::now();
    let r = f();
    steps.push(ComputeStep {
        name: name.to_owned(),
        millis: ms(t),
        ok: r.is_ok(),
    });
    r
}

fn cu<T>(r: Result<T, DriverError>, name: &str) -> Result<T, Failure> {
    r.map_err(|e| Failure::Cuda(cuda_error(&e, name)))
}

fn pattern(i: usize) -> u32 {
    // Knuth's multiplicative hash: every bit varies across the buffer.
    (i as u32).wrapping_mul(2_654_435_761) ^ 0xA5A5_A5A5
}

fn first_difference(got: &[u32], want: impl Fn(usize) -> u32) -> Option<String> {
    let bad = got
        .iter()
        .enumerate()
        .filter(|(i, v)| **v != want(*i))
        .count();
    let first = got.iter().enumerate().find(|(i, v)| **v != want(*i))?;
    Some(format!(
        "{bad} of {} words wrong, first at word {}: expected {:#010x}, got {:#010x}",
        got.len(),
        first.0,
        want(first.0),
        first.1
    ))
}

fn run_steps(
    ordinal: usize,
    steps: &mut Vec<ComputeStep>,
    uuid: &mut Option<String>,
) -> Result<(), Failure> {
    // The UUID first (no context needed), so a GPU whose context fails is
    // still matched to NVML's.
    *uuid = cudarc::driver::result::device::get(ordinal as i32)
        .and_then(cudarc::driver::result::device::get_uuid)
        .ok()
        .map(|u| format_uuid(&u.bytes));
    let ctx: Arc<CudaContext> = step(steps, "context", || {
        cu(CudaContext::new(ordinal), "context")
    })?;
    let stream: Arc<CudaStream> = ctx.default_stream();
    let host: Vec<u32> = (0..ELEMENTS).map(pattern).collect();
    let mut input = step(steps, "alloc", || {
        let a = cu(stream.alloc_zeros::<u32>(ELEMENTS), "alloc")?;
        cu(stream.synchronize(), "alloc")?;
        Ok(a)
    })?;
    let mut output = cu(stream.alloc_zeros::<u32>(ELEMENTS), "alloc")?;
    step(steps, "copyHtoD", || {
        cu(stream.memcpy_htod(&host, &mut input), "copyHtoD")?;
        cu(stream.synchronize(), "copyHtoD")
    })?;
    let back = step(steps, "copyDtoH", || {
        let v = cu(stream.clone_dtoh(&input), "copyDtoH")?;
        cu(stream.synchronize(), "copyDtoH")?;
        Ok(v)
    })?;
    step(steps, "compare", || {
        match first_difference(&back, pattern) {
            None => Ok(()),
            Some(m) => Err(Failure::Mismatch(format!("copy host→device→host: {m}"))),
        }
    })?;
    let func = step(steps, "moduleLoad", || {
        let module = cu(
            ctx.load_module(cudarc::nvrtc::Ptx::from_src(super::ffi::CHECK_KERNEL_PTX)),
            "moduleLoad",
        )?;
        cu(module.load_function(super::ffi::CHECK_KERNEL), "moduleLoad")
    })?;
    step(steps, "launch", || {
        cu(
            super::ffi::launch_check_kernel(&stream, &func, &input, &mut output),
            "launch",
        )?;
        cu(stream.synchronize(), "launch")
    })?;
    let result = step(steps, "copyResult", || {
        cu(stream.clone_dtoh(&output), "copyResult")
    })?;
    step(steps, "verify", || {
        match first_difference(&result, |i| pattern(i).wrapping_mul(3).wrapping_add(7)) {
            None => Ok(()),
            Some(m) => Err(Failure::Mismatch(format!("kernel out[i] = in[i]*3+7: {m}"))),
        }
    })?;
    step(steps, "free", || {
        drop(input);
        drop(output);
        cu(stream.synchronize(), "free")
    })?;
    Ok(())
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as NVML writes UUIDs.
pub fn format_uuid(bytes: &[std::ffi::c_char; 16]) -> String {
    let b: Vec<u8> = bytes.iter().map(|c| *c as u8).collect();
    let hex =
        |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    )
}

#[cfg(test)]
mod tests;
