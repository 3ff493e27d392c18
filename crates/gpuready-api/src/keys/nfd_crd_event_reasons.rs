//! Event reasons on GpuNodeProfiles when gpuready changes the NFD CRDs, fails
//! to, or (check mode) finds that it would (the condition's reasons are in
//! [`nfd_crd_reasons`](super::nfd_crd_reasons)).

pub const INSTALLED: &str = "NfdCrdsInstalled";
pub const UPGRADED: &str = "NfdCrdsUpgraded";
pub const WOULD_CHANGE: &str = "NfdCrdsWouldChange";
pub const APPLY_FAILED: &str = "NfdCrdsApplyFailed";
