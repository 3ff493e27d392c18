//! What a Node object says about its GPU stack, parsed once into typed facts.
//! Parsing never fails: a value that is absent or malformed is recorded as such,
//! with the offending key, so the layer that needs it can say why.

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::keys::{self, nfd, nvidia};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};

use crate::evidence::Evidence;
// The value types and GFD's labels are inputs of their own, below this one;
// re-exported where callers have always found them.
use crate::field::read;
pub use crate::field::{Field, Malformed};
use crate::gfd::parse_gfd;
pub use crate::gfd::{FamilyLabel, GfdFacts, VgpuFacts};
use crate::probe::ProbeEvidence;
use crate::version::parse_number;

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
    /// Label keys gpuready owns on the node: its own verdict labels
    /// (`keys::NODE_LABELS_WRITTEN`, by exact name) where the node carries
    /// them, the other keys its `gpuready.io/labels` annotation lists (a
    /// profile's `readyLabels` it set), and (nodes written by gpuready before
    /// 0.2) those its server-side apply owned according to managedFields.
    pub labels: BTreeSet<String>,
    /// `gpuready.io/labels` as it is on the node (`None` when absent).
    pub labels_annotation: Option<String>,
    /// `gpuready.io/taint`: the `key:effect` of the taint gpuready applied.
    pub taint: Option<(String, String)>,
    /// `gpuready.io/released-at`: UntilFirstReady marker.
    pub released_at: Option<String>,
    /// `gpuready.io/timeline`: the node's last finished wait, as written.
    pub timeline: Option<String>,
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
    /// Conditions other writers put on the node ([`is_outside_condition`]):
    /// what the External layer reads from the judges a profile names.
    pub outside_conditions: Vec<NodeCondition>,
    pub gfd: GfdFacts,
    pub hardware: HardwareFacts,
    pub owned: OwnedState,
    /// The node's `gpuready probe` report, when the caller found its carrier
    /// (the Node itself never holds it: see docs/probe.md).
    pub probe: Option<ProbeEvidence>,
    /// `metadata.creationTimestamp`: when the node first appeared.
    pub created: Option<jiff::Timestamp>,
    /// Evidence that lives outside the Node object (ResourceSlices, NodeFeature).
    /// Empty ("not read") from [`NodeFacts::from_node`]; callers that read those
    /// sources attach them with [`NodeFacts::with_evidence`].
    pub evidence: Evidence,
    /// `spec.unschedulable`: cordoned (never by gpuready: another gate).
    pub unschedulable: bool,
    /// The operator's repair annotation, as written (judged in `lifecycle`).
    pub repaired_at: Option<String>,
    /// Other systems' annotations `lifecycle` reads to name who holds a
    /// cordon (NodeWright's; [`crate::neighbours::is_neighbour_annotation`]).
    pub neighbour_annotations: BTreeMap<String, String>,
}

/// The label keys gpuready's labels annotation (`keys::ANNOTATION_LABELS`)
/// lists: the labels it wrote to the node beyond its own verdict labels
/// (annotations written by earlier builds list those too).
pub fn listed_labels(annotation: &str) -> impl Iterator<Item = &str> {
    annotation.split(',').filter(|k| !k.is_empty())
}

/// Whether gpuready writes node conditions of this type: `GpuReady`, the
/// per-layer `GpuReady<Layer>` types and the Health layer's `GpuReadyProbe`.
/// Only these are ever added, changed or removed; every other condition on the
/// node is left byte for byte as it is. (`GpuReadyProbe` was missing here, so a
/// released node kept it: the end-to-end suite's `helm uninstall` found it.
/// `GpuReadyHealth`, the optional layer's, was missing too: with per-layer
/// node conditions on, every reconcile planned it anew; `check` and `run`
/// compared layer by layer found it.)
pub fn is_own_condition(type_: &str) -> bool {
    type_ == keys::CONDITION_GPU_READY
        || type_ == keys::CONDITION_PROBE_HEALTHY
        // By its parts, not `condition_type()`: every condition of every node
        // passes here on each reconcile, and that allocates a String a layer.
        || type_
            .strip_prefix(keys::CONDITION_LAYER_PREFIX)
            .is_some_and(|layer| gpuready_api::Layer::every().any(|l| l.as_str() == layer))
}

/// Whether the engine reads a node annotation: gpuready's own
/// (`gpuready.io/`) and other systems' marks of a cordon. The controller's
/// node cache keeps exactly these.
pub fn is_read_annotation(key: &str) -> bool {
    key.starts_with(keys::KEY_PREFIX) || crate::neighbours::is_neighbour_annotation(key)
}

/// kubelet's conditions besides `Ready`: no profile's External layer reads
/// them (the Node layer reads `Ready`), so neither the engine nor the
/// controller's cache keeps them.
pub const KUBELET_PRESSURE_CONDITIONS: [&str; 4] = [
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
];

/// Whether a node condition is another writer's verdict the External layer may
/// read: neither kubelet's nor gpuready's own. The controller's cache keeps
/// exactly these besides kubelet's `Ready` and gpuready's.
pub fn is_outside_condition(type_: &str) -> bool {
    type_ != "Ready" && !is_own_condition(type_) && !KUBELET_PRESSURE_CONDITIONS.contains(&type_)
}

impl NodeFacts {
    /// When gpuready's `GpuReady` condition last left True (its transition
    /// time while it is not True): where maintenance and an escalation's dry
    /// run count from.
    pub fn gpu_ready_left_true(&self) -> Option<jiff::Timestamp> {
        self.gpu_conditions
            .iter()
            .find(|c| c.type_ == keys::CONDITION_GPU_READY && c.status != "True")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0)
    }

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
            outside_conditions: conditions
                .iter()
                .filter(|c| is_outside_condition(&c.type_))
                .cloned()
                .collect(),
            owned: OwnedState {
                labels: owned_keys(node, "f:metadata", "f:labels", None)
                    .into_iter()
                    .chain(
                        annotations
                            .and_then(|a| a.get(keys::ANNOTATION_LABELS))
                            .into_iter()
                            .flat_map(|v| listed_labels(v))
                            .map(str::to_owned),
                    )
                    .chain(
                        keys::NODE_LABELS_WRITTEN
                            .iter()
                            .filter(|k| labels.contains_key(**k))
                            .map(|k| (*k).to_owned()),
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
                timeline: annotations
                    .and_then(|a| a.get(keys::ANNOTATION_TIMELINE))
                    .cloned(),
            },
            created: node.metadata.creation_timestamp.as_ref().map(|t| t.0),
            evidence: Evidence::default(),
            unschedulable: node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false),
            repaired_at: annotations
                .and_then(|a| a.get(keys::lifecycle::ANNOTATION_REPAIRED_AT))
                .cloned(),
            neighbour_annotations: annotations
                .into_iter()
                .flatten()
                .filter(|(k, _)| crate::neighbours::is_neighbour_annotation(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            name,
            labels,
            probe: None,
        }
    }

    /// The same facts with the node's probe report attached.
    pub fn with_probe(mut self, probe: Option<ProbeEvidence>) -> NodeFacts {
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
        gpu_present: read(labels, nvidia::GPU_PRESENT, |v| match v {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err("expected true or false".into()),
        }),
    }
}

#[cfg(test)]
mod tests;
