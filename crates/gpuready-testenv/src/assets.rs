//! Where the control-plane binaries come from: envtest's variables first, then the
//! cache folder `tests/control-plane/build.sh` fills (computed here exactly as the
//! script computes it, so the two cannot disagree; a test checks that).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The helper modules that pin the versions, relative to this crate.
const CONTROL_PLANE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/control-plane");

/// Paths of the binaries an environment runs or hands out.
#[derive(Debug, Clone)]
pub struct Assets {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
    /// A path in the asset folder, or the bare name (then it is looked up on PATH).
    pub kubectl: PathBuf,
    /// A path in the asset folder, or the bare name (then it is looked up on PATH).
    pub helm: PathBuf,
}

/// A non-empty environment variable; an empty one counts as unset, like `${X:-…}`.
fn var(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// `tests/control-plane/` inside the repository this crate was built from.
pub fn control_plane_dir() -> PathBuf {
    PathBuf::from(CONTROL_PLANE_DIR)
}

/// The version a helper go.mod pins for `module`, read the way build.sh's awk does:
/// either `module vX` inside a require block or `require module vX` on one line.
fn module_version(go_mod: &Path, module: &str) -> Result<String, Error> {
    let text = std::fs::read_to_string(go_mod)
        .map_err(|e| Error::AssetDir(format!("reading {}: {e}", go_mod.display())))?;
    text.lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [m, v, ..] if *m == module => Some((*v).to_owned()),
                ["require", m, v, ..] if *m == module => Some((*v).to_owned()),
                _ => None,
            }
        })
        .ok_or_else(|| Error::AssetDir(format!("{} does not require {module}", go_mod.display())))
}

/// `${GPUREADY_CACHE:-$HOME/.cache/gpuready}`: where the scripts in
/// `tests/control-plane` cache what they build or fetch.
pub(crate) fn cache_root() -> Result<PathBuf, Error> {
    match var("GPUREADY_CACHE") {
        Some(root) => Ok(PathBuf::from(root)),
        None => Ok(PathBuf::from(
            var("HOME")
                .ok_or_else(|| Error::AssetDir("neither GPUREADY_CACHE nor HOME is set".into()))?,
        )
        .join(".cache/gpuready")),
    }
}

/// The folder `tests/control-plane/build.sh --print-dir` prints:
/// `${GPUREADY_CACHE:-$HOME/.cache/gpuready}/control-plane/k8s-<v>-etcd-<v>`.
pub fn default_dir() -> Result<PathBuf, Error> {
    let cp = control_plane_dir();
    let k8s = module_version(&cp.join("kube-apiserver/go.mod"), "k8s.io/kubernetes")?;
    let etcd = module_version(&cp.join("etcd/go.mod"), "go.etcd.io/etcd/server/v3")?;
    Ok(cache_root()?
        .join("control-plane")
        .join(format!("k8s-{k8s}-etcd-{etcd}")))
}

/// The folder binaries are taken from when no per-binary variable is set, and why.
fn asset_dir() -> Result<(PathBuf, String), Error> {
    match var("KUBEBUILDER_ASSETS") {
        Some(dir) => Ok((
            PathBuf::from(dir),
            "KUBEBUILDER_ASSETS points there".to_owned(),
        )),
        None => Ok((
            default_dir()?,
            "KUBEBUILDER_ASSETS is unset and this is the folder tests/control-plane/build.sh fills"
                .to_owned(),
        )),
    }
}

/// A binary the environment cannot run without: missing is an error, never a skip.
fn required(name: &'static str, env_var: &str, dir: &Path, why: &str) -> Result<PathBuf, Error> {
    let (path, origin) = match var(env_var) {
        Some(p) => (PathBuf::from(p), format!("{env_var} points there")),
        None => (dir.join(name), why.to_owned()),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingBinary { name, path, origin })
    }
}

/// A CLI the tests may shell out to: the asset folder's copy, else PATH.
fn optional(name: &str, env_var: &str, dir: &Path) -> PathBuf {
    if let Some(p) = var(env_var) {
        return PathBuf::from(p);
    }
    let in_dir = dir.join(name);
    if in_dir.is_file() {
        in_dir
    } else {
        PathBuf::from(name)
    }
}

/// Resolves every binary. `TEST_ASSET_KUBE_APISERVER`, `TEST_ASSET_ETCD` and
/// `TEST_ASSET_KUBECTL` (envtest's names) win, plus `TEST_ASSET_HELM` by analogy;
/// then `$KUBEBUILDER_ASSETS/<name>`; then the build.sh cache folder.
pub fn locate() -> Result<Assets, Error> {
    let (dir, why) = asset_dir()?;
    Ok(Assets {
        kube_apiserver: required("kube-apiserver", "TEST_ASSET_KUBE_APISERVER", &dir, &why)?,
        etcd: required("etcd", "TEST_ASSET_ETCD", &dir, &why)?,
        kubectl: optional("kubectl", "TEST_ASSET_KUBECTL", &dir),
        helm: optional("helm", "TEST_ASSET_HELM", &dir),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_versions_from_block_and_single_line_requires() {
        let dir = tempfile::tempdir().expect("tempdir");
        let block = dir.path().join("block.mod");
        std::fs::write(
            &block,
            "module x\n\nrequire (\n\tfoo/bar v0.1.0 // indirect\n\tk8s.io/kubernetes v1.37.2\n)\n",
        )
        .expect("write");
        assert_eq!(
            module_version(&block, "k8s.io/kubernetes").expect("found"),
            "v1.37.2"
        );
        let single = dir.path().join("single.mod");
        std::fs::write(
            &single,
            "module x\nrequire go.etcd.io/etcd/server/v3 v3.7.0\n",
        )
        .expect("write");
        assert_eq!(
            module_version(&single, "go.etcd.io/etcd/server/v3").expect("found"),
            "v3.7.0"
        );
        assert!(module_version(&single, "k8s.io/kubernetes").is_err());
    }

    /// The Rust copy of the folder rule must match the script, or tests would look
    /// in one place while build.sh fills another.
    #[test]
    fn default_dir_matches_build_sh_print_dir() {
        let out = std::process::Command::new("bash")
            .arg(control_plane_dir().join("build.sh"))
            .arg("--print-dir")
            .output()
            .expect("run build.sh --print-dir");
        assert!(out.status.success(), "build.sh --print-dir failed: {out:?}");
        let printed = String::from_utf8(out.stdout).expect("utf-8");
        assert_eq!(
            PathBuf::from(printed.trim_end()),
            default_dir().expect("default dir")
        );
    }
}
