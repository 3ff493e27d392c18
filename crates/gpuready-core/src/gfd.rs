//! What GPU Feature Discovery publishes on a node (`nvidia.com/gpu.*`,
//! `nvidia.com/cuda.*`), parsed into [`GfdFacts`]. The DRA pool's attributes are
//! read into the same shape (`evidence`), so one set of layer rules judges both.

use std::collections::BTreeMap;

use gpuready_api::Family;
use gpuready_api::keys::nvidia;

use crate::field::{Field, Malformed, read};
use crate::version::{DriverVersion, MajorMinor, parse_number};

/// The architecture family as labelled by GFD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FamilyLabel {
    Known(Family),
    /// GFD writes `undefined` for compute capabilities it has no name for (and for
    /// Ada/Blackwell on GFD releases that predate those names).
    Undefined,
    /// A name this gpuready does not know, as a GFD newer than it would write for
    /// a new architecture. Not malformed: only a profile that lists families fails.
    Unrecognized(String),
}

/// Everything GPU Feature Discovery published on the node.
#[derive(Clone, Debug, PartialEq)]
pub struct GfdFacts {
    /// `Some(pool/generation)` when these values were read from the DRA
    /// driver's ResourceSlices rather than GFD labels: messages then name the
    /// slice attributes, never a label.
    pub from_pool: Option<String>,
    /// At least one GFD-written label is present.
    pub seen: bool,
    pub product: Option<String>,
    pub memory_mib: Field<u64>,
    pub compute: Field<MajorMinor>,
    pub family: Field<FamilyLabel>,
    pub count: Field<u32>,
    pub driver: Field<DriverVersion>,
    pub cuda_runtime: Field<MajorMinor>,
    pub timestamp: Field<i64>,
    pub mig_strategy: Option<String>,
    /// What GFD's `single` MIG strategy made of `gpu.product` and `gpu.count`
    /// (`None` under the other strategies, and under `single` on a node whose
    /// GPUs are not in MIG mode: GFD then labels the full GPUs as usual).
    pub mig_single: Option<SingleMig>,
    /// GFD runs with the vfio device-discovery strategy: it writes compute
    /// capability `-1` and driver `unknown` for GPUs bound to vfio-pci. Those
    /// values are then not malformed: they say the GPU has no host driver.
    pub vfio_mode: bool,
    /// GFD inside a vGPU guest (`nvidia.com/vgpu.present=true`).
    pub vgpu: Option<VgpuFacts>,
}

/// GFD's `single` MIG strategy relabels the full-GPU keys for the MIG devices
/// (k8s-device-plugin v0.20.0 `internal/lm/mig-strategy.go`, `resource.go`):
/// `nvidia.com/gpu.product` becomes `<model>-MIG-<profile>`, `gpu.count` the
/// number of MIG devices and `gpu.memory` one MIG device's memory, while the
/// compute capability and family stay the GPU's. When the node's layout breaks
/// the strategy (two MIG profiles, a MIG-enabled GPU with no MIG device, MIG
/// enabled on some GPUs only) GFD writes `<model>-MIG-INVALID` with count 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SingleMig {
    /// Every GPU partitioned into MIG devices of one profile.
    Partitioned {
        /// The GPU model, e.g. `NVIDIA-H200`.
        model: String,
        /// The MIG profile with `+` written `.`, e.g. `1g.18gb` or `1g.18gb.me`.
        profile: String,
    },
    /// GFD's `<model>-MIG-INVALID`.
    Invalid { model: String },
}

impl SingleMig {
    /// Reads `nvidia.com/gpu.product` under the `single` strategy: `None` for a
    /// product without `-MIG-` (GPUs not in MIG mode). A `-SHARED` suffix
    /// (time-slicing of the MIG devices) is not part of the profile.
    pub fn parse(product: &str) -> Option<SingleMig> {
        let trimmed = crate::product::strip_suffix_ci(product, "-SHARED").unwrap_or(product);
        let (model, profile) = trimmed.rsplit_once("-MIG-")?;
        if model.is_empty() || profile.is_empty() {
            return None;
        }
        Some(if profile == "INVALID" {
            SingleMig::Invalid {
                model: model.to_owned(),
            }
        } else {
            SingleMig::Partitioned {
                model: model.to_owned(),
                profile: profile.to_owned(),
            }
        })
    }

    pub fn model(&self) -> &str {
        match self {
            SingleMig::Partitioned { model, .. } | SingleMig::Invalid { model } => model,
        }
    }
}

/// A vGPU guest's view of its host, from GFD's `vgpu.*` labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VgpuFacts {
    /// `nvidia.com/vgpu.host-driver-branch`, e.g. `r550_40`.
    pub host_branch: Option<String>,
    /// `nvidia.com/vgpu.host-driver-version`, e.g. `550.54.16`.
    pub host_version: Option<String>,
}

impl VgpuFacts {
    /// The host branch's major number: `r550_40` → 550 (a guest driver must come
    /// from the same branch as the host's vGPU manager).
    pub fn host_branch_major(&self) -> Option<u32> {
        if let Some(b) = &self.host_branch {
            let digits: String = b
                .trim_start_matches(['r', 'R'])
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse() {
                return Some(n);
            }
        }
        self.host_version
            .as_deref()
            .and_then(|v| v.split('.').next())
            .and_then(|m| m.parse().ok())
    }
}

impl GfdFacts {
    /// `nvidia.com/gpu.count` counts MIG devices, not GPUs (GFD's `single`
    /// strategy on a partitioned node), so it is no GPU count to compare.
    pub fn count_is_mig_devices(&self) -> bool {
        self.mig_single.is_some()
    }

    /// The family from the compute capability (authoritative: older GFD releases
    /// label Ada as `ampere` and Blackwell as `undefined`), else from the label.
    pub fn effective_family(&self) -> Option<Family> {
        if let Some(cc) = self.compute.present()
            && let Some(f) = crate::compat::family_of(*cc)
        {
            return Some(f);
        }
        match self.family.present() {
            Some(FamilyLabel::Known(f)) => Some(*f),
            _ => None,
        }
    }

    /// Every malformed GFD value, in key order.
    pub fn malformed(&self) -> Vec<&Malformed> {
        [
            self.memory_mib.malformed(),
            self.compute.malformed(),
            self.family.malformed(),
            self.count.malformed(),
            self.driver.malformed(),
            self.cuda_runtime.malformed(),
            self.timestamp.malformed(),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// `nvidia.com/gpu.*` labels that GFD never writes: the GPU operator's
/// (`gpu.present`, `gpu.deploy.<operand>`) and the admin's operand-set selector.
fn is_operator_gpu_label(key: &str) -> bool {
    key == nvidia::GPU_PRESENT
        || key == "nvidia.com/gpu.workload.config"
        || key.starts_with("nvidia.com/gpu.deploy.")
}

/// GFD's vfio-mode values: compute capability `-1` and driver `unknown`.
fn is_vfio_mode(labels: &BTreeMap<String, String>) -> bool {
    let is = |k: &str, v: &str| labels.get(k).is_some_and(|x| x == v);
    is(nvidia::GPU_COMPUTE_MAJOR, "-1")
        || is(nvidia::DRIVER_MAJOR, "unknown")
        || labels
            .get(nvidia::DRIVER_FULL)
            .is_some_and(|v| v.starts_with("unknown"))
}

pub(crate) fn parse_gfd(labels: &BTreeMap<String, String>) -> GfdFacts {
    let vfio_mode = is_vfio_mode(labels);
    let mut gfd = parse_gfd_values(labels);
    if vfio_mode {
        // Not malformed: GFD says, in its way, that no driver owns the GPU.
        gfd.compute = Field::Absent;
        gfd.driver = Field::Absent;
        gfd.cuda_runtime = Field::Absent;
        gfd.family = Field::Absent;
        gfd.vfio_mode = true;
    }
    gfd
}

fn parse_gfd_values(labels: &BTreeMap<String, String>) -> GfdFacts {
    let seen = labels.keys().any(|k| {
        k == nvidia::GFD_TIMESTAMP
            || k.starts_with("nvidia.com/cuda.")
            || (k.starts_with("nvidia.com/gpu.") && !is_operator_gpu_label(k))
    });
    GfdFacts {
        from_pool: None,
        seen,
        product: labels.get(nvidia::GPU_PRODUCT).cloned(),
        memory_mib: read(labels, nvidia::GPU_MEMORY, |v| {
            parse_number(v).map_err(|e| format!("{e}: expected MiB as a whole number, e.g. 24576"))
        }),
        compute: parse_compute(labels),
        family: read(labels, nvidia::GPU_FAMILY, |v| {
            if v == "undefined" {
                Ok(FamilyLabel::Undefined)
            } else {
                Ok(Family::parse(v)
                    .map(FamilyLabel::Known)
                    .unwrap_or_else(|| FamilyLabel::Unrecognized(v.to_owned())))
            }
        }),
        count: read(labels, nvidia::GPU_COUNT, parse_number),
        driver: parse_driver(labels),
        cuda_runtime: parse_cuda_runtime(labels),
        timestamp: read(labels, nvidia::GFD_TIMESTAMP, |v| {
            parse_number(v).map_err(|e| format!("{e}: expected Unix seconds"))
        }),
        mig_strategy: labels.get(nvidia::MIG_STRATEGY).cloned(),
        mig_single: labels
            .get(nvidia::GPU_PRODUCT)
            .filter(|_| labels.get(nvidia::MIG_STRATEGY).map(String::as_str) == Some("single"))
            .and_then(|p| SingleMig::parse(p)),
        vfio_mode: false,
        vgpu: (labels.get(nvidia::VGPU_PRESENT).map(String::as_str) == Some("true")).then(|| {
            VgpuFacts {
                host_branch: labels.get(nvidia::VGPU_HOST_BRANCH).cloned(),
                host_version: labels.get(nvidia::VGPU_HOST_VERSION).cloned(),
            }
        }),
    }
}

fn parse_compute(labels: &BTreeMap<String, String>) -> Field<MajorMinor> {
    let major = read(labels, nvidia::GPU_COMPUTE_MAJOR, parse_number::<u32>);
    let minor = read(labels, nvidia::GPU_COMPUTE_MINOR, parse_number::<u32>);
    match (major, minor) {
        (Field::Absent, Field::Absent) => Field::Absent,
        (Field::Present(major), Field::Present(minor)) => {
            Field::Present(MajorMinor { major, minor })
        }
        (Field::Malformed(m), _) | (_, Field::Malformed(m)) => Field::Malformed(m),
        (Field::Absent, _) => Field::Malformed(Malformed {
            key: nvidia::GPU_COMPUTE_MAJOR.into(),
            value: String::new(),
            why: format!("missing while {} is set", nvidia::GPU_COMPUTE_MINOR),
        }),
        (_, Field::Absent) => Field::Malformed(Malformed {
            key: nvidia::GPU_COMPUTE_MINOR.into(),
            value: String::new(),
            why: format!("missing while {} is set", nvidia::GPU_COMPUTE_MAJOR),
        }),
    }
}

/// Prefers `cuda.driver-version.full`; falls back to the split keys, new spelling
/// first, then the deprecated `cuda.driver.*`. A split revision of `""` is GFD's
/// spelling of a 2-part version such as `570.26`.
fn parse_driver(labels: &BTreeMap<String, String>) -> Field<DriverVersion> {
    if labels.contains_key(nvidia::DRIVER_FULL) {
        return read(labels, nvidia::DRIVER_FULL, DriverVersion::parse);
    }
    for (maj_key, min_key, rev_key) in [
        (
            nvidia::DRIVER_MAJOR,
            nvidia::DRIVER_MINOR,
            nvidia::DRIVER_REVISION,
        ),
        (
            nvidia::DRIVER_MAJOR_OLD,
            nvidia::DRIVER_MINOR_OLD,
            nvidia::DRIVER_REV_OLD,
        ),
    ] {
        let Some(major) = labels.get(maj_key) else {
            continue;
        };
        let Some(minor) = labels.get(min_key) else {
            return Field::Malformed(Malformed {
                key: min_key.into(),
                value: String::new(),
                why: format!("missing while {maj_key}={major:?} is set"),
            });
        };
        let joined = match labels.get(rev_key).map(String::as_str) {
            None | Some("") => format!("{major}.{minor}"),
            Some(rev) => format!("{major}.{minor}.{rev}"),
        };
        let from = format!("driver version from {maj_key}/{min_key}/{rev_key}");
        return parse_joined(joined, maj_key, &from, DriverVersion::parse);
    }
    Field::Absent
}

fn parse_cuda_runtime(labels: &BTreeMap<String, String>) -> Field<MajorMinor> {
    if labels.contains_key(nvidia::RUNTIME_FULL) {
        return read(labels, nvidia::RUNTIME_FULL, MajorMinor::parse);
    }
    for (maj_key, min_key) in [
        (nvidia::RUNTIME_MAJOR, nvidia::RUNTIME_MINOR),
        (nvidia::RUNTIME_MAJOR_OLD, nvidia::RUNTIME_MINOR_OLD),
    ] {
        if let Some(major) = labels.get(maj_key) {
            let minor = labels.get(min_key).map(String::as_str).unwrap_or("");
            let joined = format!("{major}.{minor}");
            let from = format!("CUDA version from {maj_key}/{min_key}");
            return parse_joined(joined, maj_key, &from, MajorMinor::parse);
        }
    }
    Field::Absent
}

/// A version GFD splits over several labels, parsed once joined. A bad one is
/// reported on the major label, whose presence chose this label family, and
/// `from` names every label it was joined from, so the user knows what to fix.
fn parse_joined<T>(
    joined: String,
    maj_key: &str,
    from: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Field<T> {
    match parse(&joined) {
        Ok(v) => Field::Present(v),
        Err(why) => Field::Malformed(Malformed {
            key: maj_key.into(),
            value: joined,
            why: format!("{from}: {why}"),
        }),
    }
}

#[cfg(test)]
mod tests;
