//! The words a layer judge returns before `evaluate` names the layer: a status,
//! a reason, a message, the evidence when it is not the layer's default. The
//! helpers every layer file shares, so none of them reaches into another.

use gpuready_api::keys::{dra, nvidia, reasons};

use crate::evidence::Source;
use crate::field::Malformed;
use crate::gfd::GfdFacts;
use crate::report::Status;

/// A layer's verdict before `evaluate` names the layer and its gating.
pub(super) struct Verdict {
    pub(super) status: Status,
    pub(super) reason: &'static str,
    pub(super) message: String,
    /// `None`: the layer's default evidence.
    pub(super) source: Option<Source>,
}

impl Verdict {
    /// The verdict rests on `source`, not the layer's default evidence.
    pub(super) fn via(mut self, source: Source) -> Verdict {
        self.source = Some(source);
        self
    }

    /// `source` unless the judge already named one.
    pub(super) fn or_via(self, source: Source) -> Verdict {
        if self.source.is_some() {
            self
        } else {
            self.via(source)
        }
    }
}

pub(super) fn ready(reason: &'static str, message: impl Into<String>) -> Verdict {
    Verdict {
        status: Status::Ready,
        reason,
        message: message.into(),
        source: None,
    }
}
pub(super) fn not_ready(reason: &'static str, message: impl Into<String>) -> Verdict {
    Verdict {
        status: Status::NotReady,
        reason,
        message: message.into(),
        source: None,
    }
}
pub(super) fn unknown(reason: &'static str, message: impl Into<String>) -> Verdict {
    Verdict {
        status: Status::Unknown,
        reason,
        message: message.into(),
        source: None,
    }
}
pub(super) fn malformed(m: &Malformed) -> Verdict {
    not_ready(reasons::MALFORMED_LABEL, m.to_string())
}

/// How a message names the value behind a GFD label key: the label itself,
/// or — when the values were read from the DRA pool — the ResourceSlice
/// attribute, so a DRA-only node's messages never send a reader to a label
/// that is not there.
pub(super) fn named(gfd: &GfdFacts, key: &str) -> String {
    let Some(pool) = &gfd.from_pool else {
        return key.to_owned();
    };
    let attr = match key {
        nvidia::GPU_PRODUCT => dra::ATTR_PRODUCT,
        nvidia::GPU_MEMORY => "capacity.memory",
        nvidia::GPU_COMPUTE_MAJOR => dra::ATTR_COMPUTE,
        nvidia::GPU_FAMILY => dra::ATTR_ARCHITECTURE,
        nvidia::GPU_COUNT => return format!("the ResourceSlices of pool {pool}"),
        nvidia::DRIVER_FULL => dra::ATTR_DRIVER,
        nvidia::RUNTIME_FULL => dra::ATTR_CUDA_DRIVER,
        other => other,
    };
    format!("the ResourceSlice attribute {attr} (pool {pool})")
}

/// A value the layer needs is not there: a GFD label, or a slice attribute.
pub(super) fn missing(gfd: &GfdFacts, key: &str) -> Verdict {
    let reason = if gfd.from_pool.is_some() {
        reasons::DRA_ATTRIBUTE_MISSING
    } else {
        "GfdLabelMissing"
    };
    unknown(reason, format!("{} is missing", named(gfd, key)))
}

pub(super) fn vfio_mode_verdict() -> Verdict {
    not_ready(
        reasons::GFD_VFIO_MODE,
        format!(
            "GFD runs in vfio mode ({}=-1, driver unknown): the GPU is bound to vfio-pci, not the NVIDIA driver. For a VM node set the profile's workload to VmPassthrough; for containers bind the GPU back to the nvidia driver",
            nvidia::GPU_COMPUTE_MAJOR
        ),
    )
    .via(Source::GfdLabels)
}

/// GFD's `<model>-MIG-INVALID`: the node's MIG layout breaks the single
/// strategy, so GFD and the device plugin advertise no device at all.
pub(super) fn mig_strategy_invalid(model: &str) -> Verdict {
    not_ready(
        reasons::MIG_STRATEGY_INVALID,
        format!(
            "{}={model}-MIG-INVALID: the MIG layout does not fit GFD's single strategy (MIG devices of more than one profile, a MIG-enabled GPU without MIG devices, or MIG enabled on some GPUs only), so no device is advertised: apply a one-profile mig.config on every GPU or switch the node to the mixed strategy",
            nvidia::GPU_PRODUCT
        ),
    )
}
