//! Upstream NFD CRD manifests for tests, from one place: the releases the Go
//! module proxy serves come from the cache `tests/control-plane/nfd-crds.sh`
//! fills (fetched on first use when missing); older releases the proxy does not
//! serve are read only from the folder `GPUREADY_EXTRA_NFD_CRDS` names, and a
//! test that needs one says plainly that it did not run when that is unset.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use crate::assets::{cache_root, control_plane_dir};
use crate::error::Error;

/// The variable naming a folder of `<release>.yaml` files for releases the Go
/// module proxy does not serve.
pub const EXTRA_DIR_VAR: &str = "GPUREADY_EXTRA_NFD_CRDS";

/// Releases read only from [`EXTRA_DIR_VAR`]: the Go module proxy answers 403
/// for them (their module versions were retracted from the proxy).
pub const EXTRA_RELEASES: &[&str] = &["v0.14.6", "v0.15.7", "v0.16.9"];

/// The release list `nfd-crds.sh` fetches, the one source of truth for both.
const VERSIONS_FILE: &str = include_str!("../../../tests/control-plane/nfd-crds.versions");

/// Releases fetched from the Go module proxy into the cache, oldest first.
pub fn proxy_releases() -> Vec<&'static str> {
    VERSIONS_FILE
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Every release a test may ask for, oldest first.
pub fn all_releases() -> Vec<&'static str> {
    EXTRA_RELEASES
        .iter()
        .copied()
        .chain(proxy_releases())
        .collect()
}

/// The folder `tests/control-plane/nfd-crds.sh --print-dir` prints:
/// `${GPUREADY_CACHE:-$HOME/.cache/gpuready}/nfd-crds`.
pub fn cache_dir() -> Result<PathBuf, Error> {
    Ok(cache_root()?.join("nfd-crds"))
}

/// The folder [`EXTRA_DIR_VAR`] names, when set and non-empty.
pub fn extra_dir() -> Option<PathBuf> {
    std::env::var_os(EXTRA_DIR_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// One fetch per test process: parallel tests wait for the first instead of
/// each starting `go mod download` (the script's rename makes a cross-process
/// race harmless anyway).
static FETCH: Mutex<()> = Mutex::new(());

fn fetch() -> Result<(), Error> {
    let script = control_plane_dir().join("nfd-crds.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .map_err(Error::io(format!("running {}", script.display())))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::UpstreamNfd(format!(
            "`bash tests/control-plane/nfd-crds.sh` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The file of one upstream release, or `None` when it is an extra release and
/// [`EXTRA_DIR_VAR`] is unset (after printing, past the test harness's capture,
/// which test did not run and why). A proxy release missing from the cache is
/// fetched; failing that, or a release nobody listed, is an error.
pub fn file(tag: &str) -> Result<Option<PathBuf>, Error> {
    if EXTRA_RELEASES.contains(&tag) {
        let Some(dir) = extra_dir() else {
            not_run(tag);
            return Ok(None);
        };
        let path = dir.join(format!("{tag}.yaml"));
        return if path.is_file() {
            Ok(Some(path))
        } else {
            Err(Error::UpstreamNfd(format!(
                "{EXTRA_DIR_VAR} is set but {} does not exist; that folder must hold \
                 deployment/base/nfd-crds/nfd-api-crds.yaml of NFD {tag} as {tag}.yaml",
                path.display()
            )))
        };
    }
    if !proxy_releases().contains(&tag) {
        return Err(Error::UpstreamNfd(format!(
            "NFD {tag} is neither in tests/control-plane/nfd-crds.versions nor an extra \
             release ({EXTRA_RELEASES:?}); add it to one of them"
        )));
    }
    let path = cache_dir()?.join(format!("{tag}.yaml"));
    if !is_nonempty(&path) {
        let _once = FETCH
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !is_nonempty(&path) {
            fetch()?;
        }
    }
    if is_nonempty(&path) {
        Ok(Some(path))
    } else {
        Err(Error::UpstreamNfd(format!(
            "{} is still missing after `bash tests/control-plane/nfd-crds.sh`",
            path.display()
        )))
    }
}

fn is_nonempty(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// Prints that a test did not run, on the real stderr: the harness captures
/// `eprintln!` of passing tests, and this line must be seen.
/// The test is named by its thread, which libtest names after the test.
pub fn not_run(tag: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let _ = writeln!(
        std::io::stderr(),
        "NOT RUN: {test} with NFD {tag}: the Go module proxy does not serve that release and \
         {EXTRA_DIR_VAR} is unset (point it at a folder holding {tag}.yaml to run it)"
    );
}

/// The documents of one release's file as untyped JSON (nothing lost to a
/// typed parse), or `None` as [`file`] says.
pub fn docs(tag: &str) -> Result<Option<Vec<Value>>, Error> {
    let Some(path) = file(tag)? else {
        return Ok(None);
    };
    let text =
        std::fs::read_to_string(&path).map_err(Error::io(format!("reading {}", path.display())))?;
    let mut docs = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let value = <Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| Error::UpstreamNfd(format!("{}: {e}", path.display())))?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(Some(docs))
}

/// The CRDs of one release's file, typed, or `None` as [`file`] says.
pub fn crds(tag: &str) -> Result<Option<Vec<CustomResourceDefinition>>, Error> {
    let Some(docs) = docs(tag)? else {
        return Ok(None);
    };
    docs.into_iter()
        .map(|doc| {
            serde_json::from_value(doc)
                .map_err(|e| Error::UpstreamNfd(format!("NFD {tag}: not a CRD: {e}")))
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Rust copy of the folder rule must match the script's.
    #[test]
    fn cache_dir_matches_nfd_crds_sh_print_dir() {
        let out = std::process::Command::new("bash")
            .arg(control_plane_dir().join("nfd-crds.sh"))
            .arg("--print-dir")
            .output()
            .expect("run nfd-crds.sh --print-dir");
        assert!(out.status.success(), "{out:?}");
        let printed = String::from_utf8(out.stdout).expect("utf-8");
        assert_eq!(PathBuf::from(printed.trim_end()), cache_dir().expect("dir"));
    }

    #[test]
    fn releases_are_listed_once_and_unknown_ones_are_errors() {
        let all = all_releases();
        let mut dedup = all.clone();
        dedup.dedup();
        assert_eq!(all, dedup);
        assert!(proxy_releases().contains(&"v0.19.0"), "{all:?}");
        let err = file("v0.1.0").expect_err("unknown release");
        assert!(err.to_string().contains("nfd-crds.versions"), "{err}");
    }
}
