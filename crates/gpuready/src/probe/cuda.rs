//! The compute check through the CUDA driver API (`cudarc`, which loads
//! libcuda at run time, so the binary builds and runs without a driver or a
//! CUDA toolkit): cuInit, then per GPU a context, a small buffer copied
//! host→device→host and compared, and one PTX kernel JIT-compiled by the driver
//! whose result is checked. Runs in a child process of the probe
//! ([`run_child`]), so a hung GPU is bounded by a timeout and libcuda's memory
//! is given back when the check ends.
//!
//! `unsafe` appears in two scoped places only, each with its SAFETY comment:
//! cudarc's library probe and its kernel launch, which its API marks unsafe.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaStream, DriverError, LaunchConfig, PushKernelArg, sys};
use gpuready_api::probe::{ComputeOutcome, ComputeStep, CudaError, GpuCompute};
use serde::{Deserialize, Serialize};

/// Elements of the test buffer (`u32`): 16 MiB per buffer, two buffers on the
/// GPU, 48 MiB of host buffers at the peak (libcuda itself took far more: the
/// child peaked at 205 MB RSS on an H200).
pub const ELEMENTS: usize = 4 * 1024 * 1024;

/// The kernel: `out[i] = in[i] * 3 + 7` for `i < n`. PTX ISA 6.0 for sm_50, so
/// every driver since CUDA 9 JIT-compiles it for the GPU it runs on.
const PTX: &str = r#"
.version 6.0
.target sm_50
.address_size 64

.visible .entry gpuready_check(
    .param .u64 in_ptr,
    .param .u64 out_ptr,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<9>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [in_ptr];
    ld.param.u64 %rd2, [out_ptr];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.u32 %r6, [%rd6];
    mul.lo.u32 %r7, %r6, 3;
    add.u32 %r8, %r7, 7;
    add.s64 %rd7, %rd4, %rd5;
    st.global.u32 [%rd7], %r8;
DONE:
    ret;
}
"#;

/// What the child process prints: the node-wide part and one result per CUDA
/// device, keyed by UUID so the parent can match NVML's GPUs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<String>,
    /// Node-wide failure: library not loadable, cuInit, device count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CudaError>,
    #[serde(default)]
    pub devices: Vec<DeviceResult>,
    /// Wall time of cuInit in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_millis: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceResult {
    /// CUDA ordinal (differs from NVML's index unless CUDA_DEVICE_ORDER=PCI_BUS_ID).
    pub ordinal: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

/// Whether libcuda can be loaded under one of the names cudarc looks for.
#[allow(unsafe_code)]
fn library_present() -> bool {
    // SAFETY: this dlopens libcuda (running its initialisers) exactly as
    // cudarc's own first call would; nothing else is called through it here.
    unsafe { sys::is_culib_present() }
}

/// The compute check in this process (the child). Never panics on a CUDA
/// error: each is reported by name and number.
pub fn check() -> ChildResult {
    let mut out = ChildResult::default();
    if !library_present() {
        out.error = Some(CudaError {
            name: "CUDA_LIBRARY_UNAVAILABLE".into(),
            code: 0,
            step: "load".into(),
            detail: Some(
                "libcuda.so.1 (or libcuda.so) not found by the dynamic loader: no NVIDIA driver, or the container was started without the compute capability".into(),
            ),
        });
        return out;
    }
    out.library = Some("libcuda.so".into());
    let t = Instant::now();
    let init = cudarc::driver::result::init();
    out.init_millis = Some(ms(t));
    if let Err(e) = init {
        out.error = Some(cuda_error(&e, "init"));
        return out;
    }
    out.cuda_version = driver_version();
    let count = match cudarc::driver::result::device::get_count() {
        Ok(n) => n,
        Err(e) => {
            out.error = Some(cuda_error(&e, "deviceCount"));
            return out;
        }
    };
    for ordinal in 0..count.max(0) {
        out.devices.push(check_device(ordinal as usize));
    }
    out
}

#[allow(unsafe_code)]
fn driver_version() -> Option<String> {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: cuDriverGetVersion writes one int through the pointer, which
    // points to a live local; the library is loaded (checked above).
    let r = unsafe { sys::cuDriverGetVersion(&mut v) };
    (r == sys::CUresult::CUDA_SUCCESS).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
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
    let outcome = run_steps(ordinal, &mut steps, &mut device.uuid);
    device.result = match outcome {
        Ok(()) => GpuCompute {
            outcome: ComputeOutcome::Passed,
            steps,
            bytes: (2 * ELEMENTS * 4) as u64,
            ..GpuCompute::default()
        },
        Err(Failure::Cuda(e)) => GpuCompute {
            outcome: ComputeOutcome::Failed,
            steps,
            error: Some(e),
            bytes: (2 * ELEMENTS * 4) as u64,
            ..GpuCompute::default()
        },
        Err(Failure::Mismatch(m)) => GpuCompute {
            outcome: ComputeOutcome::Failed,
            steps,
            mismatch: Some(m),
            bytes: (2 * ELEMENTS * 4) as u64,
            ..GpuCompute::default()
        },
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
            ctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX)),
            "moduleLoad",
        )?;
        cu(module.load_function("gpuready_check"), "moduleLoad")
    })?;
    let n = ELEMENTS as u32;
    step(steps, "launch", || {
        let mut launch = stream.launch_builder(&func);
        launch.arg(&input).arg(&mut output).arg(&n);
        let cfg = LaunchConfig::for_num_elems(n);
        launch_kernel(&mut launch, cfg)?;
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

#[allow(unsafe_code)]
fn launch_kernel(
    launch: &mut cudarc::driver::LaunchArgs<'_>,
    cfg: LaunchConfig,
) -> Result<(), Failure> {
    // SAFETY: the arguments pushed match the PTX entry's parameters in number,
    // order and type (two device pointers to ELEMENTS u32 each, then the u32
    // count), and the kernel writes only out[i] for i < n, inside `output`.
    cu(unsafe { launch.launch(cfg) }.map(|_| ()), "launch")
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
mod tests {
    use super::*;

    #[test]
    fn uuids_are_written_like_nvml() {
        let mut b = [0 as std::ffi::c_char; 16];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i as u8 * 17) as std::ffi::c_char;
        }
        assert_eq!(format_uuid(&b), "GPU-00112233-4455-6677-8899-aabbccddeeff");
    }

    #[test]
    fn mismatches_name_the_first_wrong_word() {
        let mut v: Vec<u32> = (0..8).map(pattern).collect();
        assert_eq!(first_difference(&v, pattern), None);
        v[5] ^= 1;
        let m = first_difference(&v, pattern).expect("a difference");
        assert!(m.starts_with("1 of 8 words wrong, first at word 5"), "{m}");
    }
}
