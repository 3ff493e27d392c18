//! What NVIDIA publishes about architectures, drivers and CUDA releases, as tables.
//! Sources: GFD's getArchFamily, the CUDA 13.2 U2 release notes (Table 3) and the
//! R580 deprecation notice; see docs/gpu-facts.md ("Architecture family" and
//! "Drivers, CUDA and architectures").

use gpuready_api::Family;

use crate::version::{DriverVersion, MajorMinor};

/// The family GFD derives from a compute capability; `None` where GFD says `undefined`.
pub fn family_of(cc: MajorMinor) -> Option<Family> {
    Some(match (cc.major, cc.minor) {
        (1, _) => Family::Tesla,
        (2, _) => Family::Fermi,
        (3, _) => Family::Kepler,
        (5, _) => Family::Maxwell,
        (6, _) => Family::Pascal,
        (7, m) if m < 5 => Family::Volta,
        (7, _) => Family::Turing,
        (8, m) if m < 9 => Family::Ampere,
        (8, _) => Family::AdaLovelace,
        (9, _) => Family::Hopper,
        (10, _) | (12, _) => Family::Blackwell,
        (13, _) => Family::Rubin,
        _ => return None,
    })
}

/// CUDA 13.0 removed Maxwell, Pascal and Volta: the first CUDA major that needs
/// Turing (7.5) or newer.
pub const CUDA_DROPPING_PRE_TURING: u32 = 13;
/// Turing: the oldest architecture CUDA 13 and post-R580 drivers support.
pub const TURING: MajorMinor = MajorMinor::new(7, 5);
/// R580 is the last driver branch for Maxwell, Pascal and Volta.
pub const LAST_BRANCH_FOR_PRE_TURING: u32 = 580;

/// Minimum Linux x86_64 driver for each CUDA release (GA), CUDA 13.2 U2 notes, Table 3.
const MIN_DRIVER_FOR_CUDA: &[((u32, u32), &str)] = &[
    ((13, 2), "595.45.04"),
    ((13, 1), "590.44.01"),
    ((13, 0), "580.65.06"),
    ((12, 9), "575.51.03"),
    ((12, 8), "570.26"),
    ((12, 6), "560.28.03"),
    ((12, 5), "555.42.02"),
    ((12, 4), "550.54.14"),
    ((12, 3), "545.23.06"),
    ((12, 2), "535.54.03"),
    ((12, 1), "530.30.02"),
    ((12, 0), "525.60.13"),
    ((11, 8), "520.61.05"),
    ((11, 7), "515.43.04"),
    ((11, 6), "510.39.01"),
    ((11, 5), "495.29.05"),
    ((11, 4), "470.42.01"),
    ((11, 3), "465.19.01"),
    ((11, 2), "460.27.03"),
    ((11, 1), "455.23"),
    ((11, 0), "450.51.05"),
];

/// The minimum driver NVIDIA lists for a CUDA release, or `None` for a release
/// the table does not know (newer than this build of gpuready, or not a release).
pub fn min_driver_for_cuda(cuda: MajorMinor) -> Option<DriverVersion> {
    MIN_DRIVER_FOR_CUDA
        .iter()
        .find(|((maj, min), _)| *maj == cuda.major && *min == cuda.minor)
        .and_then(|(_, v)| DriverVersion::parse(v).ok())
}

/// Whether a driver branch can drive this architecture at all.
pub fn driver_supports_architecture(driver: &DriverVersion, cc: MajorMinor) -> bool {
    cc >= TURING || driver.major <= LAST_BRANCH_FOR_PRE_TURING
}

/// Whether a CUDA release can target this architecture.
pub fn cuda_supports_architecture(cuda: MajorMinor, cc: MajorMinor) -> bool {
    cuda.major < CUDA_DROPPING_PRE_TURING || cc >= TURING
}

#[cfg(test)]
mod tests;
