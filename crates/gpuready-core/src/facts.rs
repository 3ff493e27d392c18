//! What a Node object says about its GPU stack, parsed once into typed facts.
//! Parsing never fails: a value that is absent or malformed is recorded as such,
//! with the offending key, so the layer that needs it can say why.

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::Family;
use gpuready_api::keys::{self, nfd, nvidia};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};

use crate::evidence::Evidence;
use crate::version::{DriverVersion, MajorMinor, parse_number};

/// A value read from a label (or resource quantity).
#[derive(Clone, Debug, PartialEq)]
pub enum Field<T> {
    /// The key is not on the node.
    Absent,
    /// The key is there but its value cannot be used.
    Malformed(Malformed),
    Present(T),
}

/// Where and why a value could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    pub key: String,
    pub value: String,
    pub why: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={:?}: {}", self.key, self.value, self.why)
    }
}

impl<T> Field<T> {
    pub fn present(&self) -> Option<&T> {
        match self {
            Field::Present(v) => Some(v),
            _ => None,
        }
    }

    pub fn malformed(&self) -> Option<&Malformed> {
        match self {
            Field::Malformed(m) => Some(m),
            _ => None,
        }
    }

    pub fn is_absent(&self) -> bool {
        matches!(self, Field::Absent)
    }
}

/// Status of a node condition as the API spells it, plus "not reported at all".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
    Missing,
}

/// kubelet's `Ready` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeletReady {
    pub status: ConditionStatus,
    pub reason: String,
    pub message: String,
}

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
    /// GFD runs with the vfio device-discovery strategy: it writes compute
    /// capability `-1` and driver `unknown` for GPUs bound to vfio-pci. Those
    /// values are then not malformed: they say the GPU has no host driver.
    pub vfio_mode: bool,
    /// GFD inside a vGPU guest (`nvidia.com/vgpu.present=true`).
    pub vgpu: Option<VgpuFacts>,
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

/// Evidence of an NVIDIA PCI device.
#[derive(Clone, Debug, PartialEq)]
pub struct HardwareFacts {
    /// NFD PCI labels naming vendor 10de with value `true`.
    pub nvidia_pci_labels: Vec<String>,
    /// Any `feature.node.kubernetes.io/` label: NFD has labelled this node.
    pub nfd_seen: bool,
    /// `nvidia.com/gpu.present`, written by the GPU operator.
    pub gpu_present: Field<bool>,
}

/// What gpuready itself last wrote to the node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnedState {
    /// Label keys gpuready owns: those its `gpuready.io/labels` annotation lists,
    /// plus (nodes written by gpuready before 0.2) those its server-side apply
    /// owned according to managedFields.
    pub labels: BTreeSet<String>,
    /// `gpuready.io/labels` as it is on the node (`None` when absent).
    pub labels_annotation: Option<String>,
    /// `gpuready.io/taint`: the `key:effect` of the taint gpuready applied.
    pub taint: Option<(String, String)>,
    /// `gpuready.io/released-at`: UntilFirstReady marker.
    pub released_at: Option<String>,
}
/// Everything the engine reads from one Node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub kubelet: KubeletReady,
    pub taints: Vec<Taint>,
    pub capacity: BTreeMap<String, Field<u64>>,
    pub allocatable: BTreeMap<String, Field<u64>>,
    /// Node conditions of the types gpuready writes ([`is_own_condition`]), as they are now.
    pub gpu_conditions: Vec<NodeCondition>,
    pub gfd: GfdFacts,
    pub hardware: HardwareFacts,
    pub owned: OwnedState,
    /// The node's `gpuready probe` report, when the caller found its carrier
    /// (the Node itself never holds it: see docs/probe.md).
    pub probe: Option<crate::health::ProbeEvidence>,
    /// `metadata.creationTimestamp`: when the node first appeared.
    pub created: Option<jiff::Timestamp>,
    /// Evidence that lives outside the Node object (ResourceSlices, NodeFeature).
    /// Empty ("not read") from [`NodeFacts::from_node`]; callers that read those
    /// sources attach them with [`NodeFacts::with_evidence`].
    pub evidence: Evidence,
}

/// Whether gpuready writes node conditions of this type: `GpuReady`, the
/// per-layer `GpuReady<Layer>` types and the Health layer's `GpuReadyProbe`.
/// Only these are ever added, changed or removed; every other condition on the
/// node is left byte for byte as it is. (`GpuReadyProbe` was missing here, so a
/// released node kept it: the end-to-end suite's `helm uninstall` found it.)
pub fn is_own_condition(type_: &str) -> bool {
    type_ == keys::CONDITION_GPU_READY
        || type_ == keys::CONDITION_PROBE_HEALTHY
        || gpuready_api::Layer::ALL
            .iter()
            .any(|l| l.condition_type() == type_)
}

impl NodeFacts {
    /// The same facts with the evidence read beside the Node attached.
    pub fn with_evidence(mut self, evidence: Evidence) -> NodeFacts {
        self.evidence = evidence;
        self
    }

    pub fn from_node(node: &Node) -> NodeFacts {
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let annotations = node.metadata.annotations.as_ref();
        let status = node.status.as_ref();
        let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);

        let kubelet = conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| KubeletReady {
                status: match c.status.as_str() {
                    "True" => ConditionStatus::True,
                    "False" => ConditionStatus::False,
                    _ => ConditionStatus::Unknown,
                },
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            })
            .unwrap_or(KubeletReady {
                status: ConditionStatus::Missing,
                reason: String::new(),
                message: String::new(),
            });

        let quantities = |q: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >| {
            q.map(|m| {
                m.iter()
                    .filter(|(k, _)| k.starts_with("nvidia.com/") || k.contains('/'))
                    .map(|(k, v)| (k.clone(), parse_quantity(k, &v.0)))
                    .collect()
            })
            .unwrap_or_default()
        };

        NodeFacts {
            gfd: parse_gfd(&labels),
            hardware: parse_hardware(&labels),
            kubelet,
            taints: node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
            capacity: quantities(status.and_then(|s| s.capacity.as_ref())),
            allocatable: quantities(status.and_then(|s| s.allocatable.as_ref())),
            gpu_conditions: conditions
                .iter()
                .filter(|c| is_own_condition(&c.type_))
                .cloned()
                .collect(),
            owned: OwnedState {
                labels: owned_keys(node, "f:metadata", "f:labels", None)
                    .into_iter()
                    .chain(
                        annotations
                            .and_then(|a| a.get(keys::ANNOTATION_LABELS))
                            .into_iter()
                            .flat_map(|v| v.split(','))
                            .filter(|k| !k.is_empty())
                            .map(str::to_owned),
                    )
                    .collect(),
                labels_annotation: annotations
                    .and_then(|a| a.get(keys::ANNOTATION_LABELS))
                    .cloned(),
                taint: annotations
                    .and_then(|a| a.get(keys::ANNOTATION_TAINT))
                    .and_then(|v| v.split_once(':'))
                    .map(|(k, e)| (k.to_owned(), e.to_owned())),
                released_at: annotations
                    .and_then(|a| a.get(keys::ANNOTATION_RELEASED))
                    .cloned(),
            },
            created: node.metadata.creation_timestamp.as_ref().map(|t| t.0),
            evidence: Evidence::default(),
            name,
            labels,
            probe: None,
        }
    }

    /// The same facts with the node's probe report attached.
    pub fn with_probe(mut self, probe: Option<crate::health::ProbeEvidence>) -> NodeFacts {
        self.probe = probe;
        self
    }
}

/// Keys gpuready's apply owns under `fieldsV1.<outer>.<inner>`: label keys
/// (`f:<key>`) or condition types (`k:{"type":"<type>"}`).
fn owned_keys(
    node: &Node,
    outer: &str,
    inner: &str,
    subresource: Option<&str>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in node.metadata.managed_fields.iter().flatten() {
        if entry.manager.as_deref() != Some(keys::FIELD_MANAGER)
            || entry.operation.as_deref() != Some("Apply")
            || entry.subresource.as_deref() != subresource
        {
            continue;
        }
        let Some(fields) = entry
            .fields_v1
            .as_ref()
            .and_then(|f| f.0.get(outer))
            .and_then(|o| o.get(inner))
            .and_then(|i| i.as_object())
        else {
            continue;
        };
        for k in fields.keys() {
            if let Some(label) = k.strip_prefix("f:") {
                out.insert(label.to_owned());
            } else if let Some(json) = k.strip_prefix("k:")
                && let Ok(serde_json::Value::Object(m)) = serde_json::from_str(json)
                && let Some(serde_json::Value::String(t)) = m.get("type")
            {
                out.insert(t.clone());
            }
        }
    }
    out
}

/// Extended resources are whole numbers; anything with a unit or fraction is not
/// something a device plugin writes.
fn parse_quantity(key: &str, value: &str) -> Field<u64> {
    match parse_number::<u64>(value) {
        Ok(n) => Field::Present(n),
        Err(why) => Field::Malformed(Malformed {
            key: key.to_owned(),
            value: value.to_owned(),
            why,
        }),
    }
}

fn field<T>(
    labels: &BTreeMap<String, String>,
    key: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Field<T> {
    match labels.get(key) {
        None => Field::Absent,
        Some(v) => match parse(v) {
            Ok(t) => Field::Present(t),
            Err(why) => Field::Malformed(Malformed {
                key: key.to_owned(),
                value: v.clone(),
                why,
            }),
        },
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

fn parse_gfd(labels: &BTreeMap<String, String>) -> GfdFacts {
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
        memory_mib: field(labels, nvidia::GPU_MEMORY, |v| {
            parse_number(v).map_err(|e| format!("{e}: expected MiB as a whole number, e.g. 24576"))
        }),
        compute: parse_compute(labels),
        family: field(labels, nvidia::GPU_FAMILY, |v| {
            if v == "undefined" {
                Ok(FamilyLabel::Undefined)
            } else {
                Ok(Family::parse(v)
                    .map(FamilyLabel::Known)
                    .unwrap_or_else(|| FamilyLabel::Unrecognized(v.to_owned())))
            }
        }),
        count: field(labels, nvidia::GPU_COUNT, parse_number),
        driver: parse_driver(labels),
        cuda_runtime: parse_cuda_runtime(labels),
        timestamp: field(labels, nvidia::GFD_TIMESTAMP, |v| {
            parse_number(v).map_err(|e| format!("{e}: expected Unix seconds"))
        }),
        mig_strategy: labels.get(nvidia::MIG_STRATEGY).cloned(),
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
    let major = field(labels, nvidia::GPU_COMPUTE_MAJOR, parse_number::<u32>);
    let minor = field(labels, nvidia::GPU_COMPUTE_MINOR, parse_number::<u32>);
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
        return field(labels, nvidia::DRIVER_FULL, DriverVersion::parse);
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
        return match DriverVersion::parse(&joined) {
            Ok(v) => Field::Present(v),
            Err(why) => Field::Malformed(Malformed {
                key: maj_key.into(),
                value: joined,
                why: format!("driver version from {maj_key}/{min_key}/{rev_key}: {why}"),
            }),
        };
    }
    Field::Absent
}

fn parse_cuda_runtime(labels: &BTreeMap<String, String>) -> Field<MajorMinor> {
    if labels.contains_key(nvidia::RUNTIME_FULL) {
        return field(labels, nvidia::RUNTIME_FULL, MajorMinor::parse);
    }
    for (maj_key, min_key) in [
        (nvidia::RUNTIME_MAJOR, nvidia::RUNTIME_MINOR),
        (nvidia::RUNTIME_MAJOR_OLD, nvidia::RUNTIME_MINOR_OLD),
    ] {
        if let Some(major) = labels.get(maj_key) {
            let minor = labels.get(min_key).map(String::as_str).unwrap_or("");
            let joined = format!("{major}.{minor}");
            return match MajorMinor::parse(&joined) {
                Ok(v) => Field::Present(v),
                Err(why) => Field::Malformed(Malformed {
                    key: maj_key.into(),
                    value: joined,
                    why: format!("CUDA version from {maj_key}/{min_key}: {why}"),
                }),
            };
        }
    }
    Field::Absent
}

/// NFD names PCI labels by the configured fields in a fixed order (class, vendor,
/// device, ...). Vendor 10de is the first field when the class is not configured
/// (`pci-10de`), else the second (`pci-0300_10de`, `pci-0302_10de`).
pub fn is_nvidia_pci_label(key: &str) -> bool {
    let Some(fields) = key
        .strip_prefix(nfd::PCI_PREFIX)
        .and_then(|k| k.strip_suffix(nfd::PCI_SUFFIX))
    else {
        return false;
    };
    let parts: Vec<&str> = fields.split('_').collect();
    // A PCI class code's base class is 0x00-0x13 or 0xff; a vendor ID such as
    // Intel's 8086 is not a class, so `pci-8086_10de` (Intel device 10de) is not NVIDIA.
    // Checked as ASCII hex digits before any slicing: a label key may hold any
    // character, and a byte slice inside a multi-byte one would panic.
    let is_class = |p: &str| {
        p.len() == 4
            && p.bytes().all(|b| b.is_ascii_hexdigit())
            && u8::from_str_radix(&p[..2], 16).is_ok_and(|base| base <= 0x13 || base == 0xff)
    };
    parts.first() == Some(&nfd::NVIDIA_VENDOR)
        || (parts.len() >= 2 && is_class(parts[0]) && parts[1] == nfd::NVIDIA_VENDOR)
}

fn parse_hardware(labels: &BTreeMap<String, String>) -> HardwareFacts {
    HardwareFacts {
        nvidia_pci_labels: labels
            .iter()
            .filter(|(k, v)| is_nvidia_pci_label(k) && v.as_str() == "true")
            .map(|(k, _)| k.clone())
            .collect(),
        nfd_seen: labels.keys().any(|k| k.starts_with(nfd::LABEL_PREFIX)),
        gpu_present: field(labels, nvidia::GPU_PRESENT, |v| match v {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err("expected true or false".into()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_condition_type_gpuready_writes_is_its_own() {
        assert!(is_own_condition(keys::CONDITION_GPU_READY));
        assert!(is_own_condition(keys::CONDITION_PROBE_HEALTHY));
        assert!(is_own_condition(
            &gpuready_api::Layer::Driver.condition_type()
        ));
        assert!(!is_own_condition("Ready"));
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn pci_label_forms() {
        assert!(is_nvidia_pci_label(
            "feature.node.kubernetes.io/pci-10de.present"
        ));
        assert!(is_nvidia_pci_label(
            "feature.node.kubernetes.io/pci-0300_10de.present"
        ));
        assert!(is_nvidia_pci_label(
            "feature.node.kubernetes.io/pci-0302_10de.present"
        ));
        assert!(is_nvidia_pci_label(
            "feature.node.kubernetes.io/pci-0302_10de_2335.present"
        ));
        assert!(!is_nvidia_pci_label(
            "feature.node.kubernetes.io/pci-0300_1002.present"
        ));
        assert!(!is_nvidia_pci_label(
            "feature.node.kubernetes.io/pci-10de.sriov.capable"
        ));
        assert!(!is_nvidia_pci_label(
            "feature.node.kubernetes.io/pci-0300_8086_10de.present"
        ));
        // Multi-byte characters where a class code would be never panic.
        for key in [
            "feature.node.kubernetes.io/pci-aé1_10de.present",
            "feature.node.kubernetes.io/pci-é_10de.present",
            "feature.node.kubernetes.io/pci-0é0_10de.present",
            "feature.node.kubernetes.io/pci-😀_10de.present",
        ] {
            assert!(!is_nvidia_pci_label(key), "{key}");
        }
    }

    #[test]
    fn driver_from_new_old_and_full_spellings() {
        let full = parse_driver(&labels(&[(nvidia::DRIVER_FULL, "580.159.04")]));
        assert_eq!(full.present().unwrap().as_str(), "580.159.04");
        let new = parse_driver(&labels(&[
            (nvidia::DRIVER_MAJOR, "550"),
            (nvidia::DRIVER_MINOR, "90"),
            (nvidia::DRIVER_REVISION, "07"),
        ]));
        assert_eq!(new.present().unwrap().patch, Some(7));
        let old_two_part = parse_driver(&labels(&[
            (nvidia::DRIVER_MAJOR_OLD, "570"),
            (nvidia::DRIVER_MINOR_OLD, "26"),
            (nvidia::DRIVER_REV_OLD, ""),
        ]));
        assert_eq!(old_two_part.present().unwrap().as_str(), "570.26");
        let bad = parse_driver(&labels(&[(nvidia::DRIVER_FULL, "580")]));
        assert_eq!(bad.malformed().unwrap().key, nvidia::DRIVER_FULL);
        let no_minor = parse_driver(&labels(&[
            (nvidia::DRIVER_MAJOR_OLD, "570"),
            (nvidia::DRIVER_REV_OLD, ""),
        ]));
        assert_eq!(no_minor.malformed().unwrap().key, nvidia::DRIVER_MINOR_OLD);
    }

    #[test]
    fn cuda_runtime_spellings() {
        let full = parse_cuda_runtime(&labels(&[(nvidia::RUNTIME_FULL, "13.0")]));
        assert_eq!(full, Field::Present(MajorMinor::new(13, 0)));
        let old = parse_cuda_runtime(&labels(&[
            (nvidia::RUNTIME_MAJOR_OLD, "12"),
            (nvidia::RUNTIME_MINOR_OLD, "4"),
        ]));
        assert_eq!(old, Field::Present(MajorMinor::new(12, 4)));
        let bad = parse_cuda_runtime(&labels(&[(nvidia::RUNTIME_MAJOR, "12")]));
        assert!(bad.malformed().is_some());
    }

    #[test]
    fn malformed_gfd_values_name_their_key() {
        let gfd = parse_gfd(&labels(&[
            (nvidia::GPU_MEMORY, "24GB"),
            (nvidia::GPU_COMPUTE_MAJOR, "x"),
            (nvidia::GPU_COMPUTE_MINOR, "6"),
            (nvidia::GPU_FAMILY, "undefined"),
        ]));
        let keys: Vec<&str> = gfd.malformed().iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, [nvidia::GPU_MEMORY, nvidia::GPU_COMPUTE_MAJOR]);
        assert_eq!(gfd.family, Field::Present(FamilyLabel::Undefined));
        assert!(gfd.seen);
    }

    #[test]
    fn effective_family_prefers_compute_capability() {
        let gfd = parse_gfd(&labels(&[
            (nvidia::GPU_COMPUTE_MAJOR, "8"),
            (nvidia::GPU_COMPUTE_MINOR, "9"),
            (nvidia::GPU_FAMILY, "ampere"),
        ]));
        assert_eq!(gfd.effective_family(), Some(Family::AdaLovelace));
    }
}
