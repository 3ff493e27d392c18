//! The NVIDIA DRA driver's ComputeDomainClique CRD for tests, as the driver
//! ships it: fetched from the Go module proxy by
//! `tests/control-plane/dra-driver-crds.sh` into the cache outside the clone
//! (on first use when missing), never written by hand.

use std::path::PathBuf;
use std::sync::Mutex;

use crate::assets::control_plane_dir;
use crate::error::Error;

/// One fetch per test process (the script's rename makes a race across
/// processes harmless).
static FETCH: Mutex<()> = Mutex::new(());

/// The CRD file (`resource.nvidia.com_computedomaincliques.yaml` of the
/// driver's chart), fetched when missing.
pub fn compute_domain_clique_crd() -> Result<PathBuf, Error> {
    let _once = FETCH
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let script = control_plane_dir().join("dra-driver-crds.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .map_err(Error::io(format!("running {}", script.display())))?;
    let printed = String::from_utf8_lossy(&out.stdout);
    let path = printed.lines().last().map(PathBuf::from);
    match path {
        Some(p) if out.status.success() && p.is_file() => Ok(p),
        _ => Err(Error::Crd(format!(
            "`bash tests/control-plane/dra-driver-crds.sh` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}
