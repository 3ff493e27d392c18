//! The probe's only `unsafe` code, in one place: the calls its crates' APIs
//! mark unsafe — cudarc's library probe, `cuDriverGetVersion`, and the launch
//! of the check's PTX kernel (kept here with the kernel text, so the launch's
//! contract and the kernel it relies on are read together), and NVML's fabric
//! query through nvml-wrapper's loaded library with the raw binding of
//! `nvml-wrapper-sys` (nvml-wrapper does not wrap it). Every function here is
//! safe to call; each `unsafe` block says why it holds.
#![allow(unsafe_code)]

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg, sys,
};
use nvml_wrapper::Nvml;
use nvml_wrapper::error::{NvmlError, nvml_sym, nvml_try};
use nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_t;

/// Entry point of [`CHECK_KERNEL_PTX`].
pub const CHECK_KERNEL: &str = "gpuready_check";

/// The kernel: `out[i] = in[i] * 3 + 7` for `i < n`. PTX ISA 6.0 for sm_50, so
/// every driver since CUDA 9 JIT-compiles it for the GPU it runs on.
pub const CHECK_KERNEL_PTX: &str = r#"
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

/// Whether libcuda can be loaded under one of the names cudarc looks for.
pub fn libcuda_present() -> bool {
    // SAFETY: this dlopens libcuda (running its initialisers) exactly as
    // cudarc's own first call would; nothing else is called through it here.
    unsafe { sys::is_culib_present() }
}

/// `cuDriverGetVersion` (e.g. 13000 for CUDA 13.0); `None` on an error. Call
/// only after [`libcuda_present`] said yes and `cuInit` succeeded.
pub fn cuda_driver_version() -> Option<std::ffi::c_int> {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: cuDriverGetVersion writes one int through the pointer, which
    // points to a live local; cudarc loaded the library before `cuInit`.
    let r = unsafe { sys::cuDriverGetVersion(&mut v) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
}

/// Launches [`CHECK_KERNEL`] (from [`CHECK_KERNEL_PTX`], loaded into `func`)
/// over `input`, writing `output`, one thread per element.
pub fn launch_check_kernel(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    input: &CudaSlice<u32>,
    output: &mut CudaSlice<u32>,
) -> Result<(), DriverError> {
    // Both buffers are checked to be as long as the count the kernel gets.
    let n = u32::try_from(input.len().min(output.len())).unwrap_or(u32::MAX);
    let mut launch = stream.launch_builder(func);
    launch.arg(input).arg(output).arg(&n);
    let cfg = LaunchConfig::for_num_elems(n);
    // SAFETY: the arguments pushed match the PTX entry's parameters in number,
    // order and type (two device pointers to u32, then the u32 count), the
    // count is at most the length of either buffer, and the kernel reads only
    // in[i] and writes only out[i] for i < n.
    unsafe { launch.launch(cfg) }.map(|_| ())
}

/// NVML's `nvmlDeviceGetGpuFabricInfo` for one device (v1 struct); the error
/// as nvml-wrapper reports every other call's (FunctionNotFound on a driver
/// without it, NotSupported on a GPU without a fabric).
pub fn gpu_fabric_info(
    nvml: &Nvml,
    device: &nvml_wrapper::Device<'_>,
) -> Result<nvmlGpuFabricInfo_t, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuFabricInfo.as_ref())?;
    let mut info = nvmlGpuFabricInfo_t {
        clusterUuid: [0; 16],
        status: 0,
        cliqueId: 0,
        state: 0,
    };
    // SAFETY: the handle comes from this Nvml (alive for the call), and the
    // function writes one nvmlGpuFabricInfo_t through a pointer to a live local
    // of exactly that type (the v1 struct of the v1 call).
    let code = unsafe { sym(device.handle(), &mut info) };
    nvml_try(code)?;
    Ok(info)
}
