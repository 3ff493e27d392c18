//! Reasons of the [`CONDITION_NFD_CRDS`](super::CONDITION_NFD_CRDS) profile
//! condition. True means the NFD CRDs are fine for NFD and gpuready as they
//! are (current, just installed or upgraded, or newer than gpuready's and left
//! alone); False means something needs a person (Check mode would change them,
//! an apply failed).

/// True: the installed CRDs match the set gpuready carries.
pub const CURRENT: &str = "Current";
/// True: gpuready created the missing CRDs.
pub const INSTALLED: &str = "Installed";
/// True: gpuready upgraded older CRDs (and created missing ones).
pub const UPGRADED: &str = "Upgraded";
/// True: some CRDs are newer than gpuready's and were left alone.
pub const NEWER_LEFT_ALONE: &str = "NewerLeftAlone";
/// False: `--nfd-crds=check` and gpuready would create or upgrade some.
pub const CHECK_ONLY_WOULD_CHANGE: &str = "CheckOnlyWouldChange";
/// False: a CRD is missing and creating it failed.
pub const MISSING: &str = "Missing";
/// False: a CRD is older and upgrading it failed.
pub const OUTDATED: &str = "Outdated";
/// False: applied, but the CRD did not become Established in time.
pub const NOT_ESTABLISHED: &str = "NotEstablished";
/// False: applied, yet the API server's copy still differs from gpuready's;
/// gpuready stops re-applying until the CRD changes.
pub const APPLY_DID_NOT_CONVERGE: &str = "ApplyDidNotConverge";
/// False: the CRDs could not be read.
pub const READ_FAILED: &str = "ReadFailed";
