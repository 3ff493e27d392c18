//! The Compatibility layer: driver against architecture (R580 is the last branch
//! for Maxwell, Pascal, Volta), CUDA against architecture and driver.

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::keys::{nvidia, reasons};

use super::verdict::{Verdict, malformed, missing, not_ready, ready, unknown};
use crate::compat;
use crate::facts::NodeFacts;
use crate::version::MajorMinor;

pub(super) fn compatibility_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    let gfd = &facts.gfd;
    // The first bad value among the three this layer reads, in key order.
    if let Some(m) = gfd
        .compute
        .malformed()
        .or(gfd.driver.malformed())
        .or(gfd.cuda_runtime.malformed())
    {
        return malformed(m);
    }
    let cc = gfd.compute.present().copied();
    let driver = gfd.driver.present();

    if let (Some(cc), Some(d)) = (cc, driver)
        && !compat::driver_supports_architecture(d, cc)
    {
        let family = family_name(cc);
        return not_ready(
            "DriverDropsArchitecture",
            format!(
                "driver {d} is newer than the R{} branch, the last to support Maxwell, Pascal and Volta; this card is {family} (compute {cc}): pin the driver to R{}",
                compat::LAST_BRANCH_FOR_PRE_TURING,
                compat::LAST_BRANCH_FOR_PRE_TURING
            ),
        );
    }

    let Some(cuda) = spec.cuda_version.as_deref() else {
        return match (cc, driver) {
            (Some(_), Some(d)) => ready(
                "Compatible",
                format!("driver {d} supports this architecture; no CUDA version declared"),
            ),
            _ => unknown(
                if gfd.from_pool.is_some() {
                    reasons::DRA_ATTRIBUTE_MISSING
                } else {
                    "GfdLabelMissing"
                },
                "compute capability or driver version unknown: driver/architecture fit cannot be checked",
            ),
        };
    };
    let Ok(cuda) = MajorMinor::parse(cuda) else {
        return unknown(
            "InvalidProfile",
            format!("spec.cudaVersion {cuda:?} is not major.minor"),
        );
    };
    let Some(cc) = cc else {
        return missing(gfd, nvidia::GPU_COMPUTE_MAJOR);
    };
    if !compat::cuda_supports_architecture(cuda, cc) {
        let family = family_name(cc);
        return not_ready(
            "CudaDropsArchitecture",
            format!(
                "CUDA {cuda} cannot target {family} (compute {cc}): CUDA 13 needs compute capability {} or newer; build the workloads with CUDA 12.x",
                compat::TURING
            ),
        );
    }
    let Some(driver) = driver else {
        return missing(gfd, nvidia::DRIVER_FULL);
    };
    match compat::min_driver_for_cuda(cuda) {
        Some(min) if *driver < min => {
            return not_ready(
                "DriverTooOldForCuda",
                format!("CUDA {cuda} needs driver {min} or newer; the node runs {driver}"),
            );
        }
        Some(_) => {}
        None => {
            return unknown(
                "UnknownCudaRelease",
                format!(
                    "CUDA {cuda} is not in gpuready's table of driver minimums: upgrade gpuready or check NVIDIA's release notes"
                ),
            );
        }
    }
    match gfd.cuda_runtime.present() {
        None => missing(gfd, nvidia::RUNTIME_FULL),
        Some(rt) if *rt < cuda => not_ready(
            "CudaRuntimeTooOld",
            format!("the driver supports CUDA up to {rt}, the workloads need {cuda}"),
        ),
        Some(rt) => ready(
            "Compatible",
            format!("CUDA {cuda} fits compute {cc} and driver {driver} (supports CUDA up to {rt})"),
        ),
    }
}

/// The card's family as the two "drops architecture" messages name it: both
/// say the same word for a compute capability that the family table lacks.
fn family_name(cc: MajorMinor) -> String {
    compat::family_of(cc)
        .map(|f| f.to_string())
        .unwrap_or_else(|| "pre-Turing".into())
}
