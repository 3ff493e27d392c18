//! The Driver layer: the driver version GFD (or the DRA pool) publishes against
//! the profile's minimum, and a vGPU guest driver against its host's branch.

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::keys::{nvidia, reasons};

use super::verdict::{Verdict, malformed, named, not_ready, ready, unknown, vfio_mode_verdict};
use crate::facts::NodeFacts;
use crate::field::Field;
use crate::report::Status;
use crate::version::DriverVersion;

pub(super) fn driver_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    if facts.gfd.vfio_mode {
        return vfio_mode_verdict();
    }
    let v = driver_version_layer(spec, facts);
    if v.status != Status::Ready {
        return v;
    }
    // A vGPU guest driver must come from the branch of the host's vGPU manager.
    if let (Some(vgpu), Some(d)) = (&facts.gfd.vgpu, facts.gfd.driver.present())
        && let Some(host) = vgpu.host_branch_major()
        && host != d.major
    {
        return not_ready(
            reasons::VGPU_BRANCH_MISMATCH,
            format!(
                "vGPU guest driver {d} is from branch R{}, the host's vGPU manager is {} (R{host}): install the guest driver of the host's branch",
                d.major,
                vgpu.host_branch
                    .as_deref()
                    .or(vgpu.host_version.as_deref())
                    .unwrap_or("?")
            ),
        );
    }
    v
}

fn driver_version_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    match &facts.gfd.driver {
        Field::Malformed(m) => malformed(m),
        Field::Absent if !facts.gfd.seen => unknown(
            "NoGfdLabels",
            "no GFD labels: the driver version cannot be read from the node",
        ),
        Field::Absent => not_ready(
            "DriverVersionMissing",
            match &facts.gfd.from_pool {
                Some(_) => format!(
                    "the DRA driver publishes no driver version ({}): NVML cannot reach the driver",
                    named(&facts.gfd, nvidia::DRIVER_FULL)
                ),
                None => format!(
                    "GFD runs but publishes no driver version ({}): NVML cannot reach the driver",
                    nvidia::DRIVER_FULL
                ),
            },
        ),
        Field::Present(v) => match spec.min_driver_version.as_deref().map(DriverVersion::parse) {
            Some(Ok(min)) if *v < min => not_ready(
                "DriverTooOld",
                format!("driver {v} is older than the minimum {min}"),
            ),
            Some(Ok(min)) => ready("DriverVersionOk", format!("driver {v} (minimum {min})")),
            // The schema refuses such a profile; an object written before the rule existed ends here.
            Some(Err(e)) => unknown("InvalidProfile", format!("spec.minDriverVersion: {e}")),
            None => ready("DriverVersionOk", format!("driver {v}")),
        },
    }
}
