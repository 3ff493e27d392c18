//! Test helpers shared by gpuready-core's integration tests: a `NodeBuilder` that
//! reads like the node it describes, profiles from YAML, and `apply`, an in-memory
//! stand-in for the API server that writes `NodeChanges` onto a Node the way the
//! controller's requests would (merge patch of taints + annotations, server-side
//! apply of labels and of status conditions, with managedFields).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::keys::{self, nvidia};
use gpuready_api::{GpuNodeProfile, GpuNodeProfileSpec, Layer};
use gpuready_core::evaluate::{LayerReport, LayerResult, Status};
use gpuready_core::plan::{NodeChanges, PlanOptions};
use gpuready_core::{NodeAssessment, NodeFacts};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, ManagedFieldsEntry, ObjectMeta, Time,
};
use kube_core::Selector;
use serde_json::{Value, json};

/// The instant every test judges at (the examples' `--now`).
pub const NOW: &str = "2026-11-29T12:00:00Z";

pub fn now() -> Timestamp {
    NOW.parse().expect("NOW is RFC 3339")
}

/// `NOW` shifted by `secs` (negative: in the past).
pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(now().as_second() + secs).expect("in range")
}

/// Unix seconds `secs` before `NOW`, as GFD writes `gfd.timestamp`.
pub fn seconds_ago(secs: i64) -> String {
    (now().as_second() - secs).to_string()
}

/// The label every test profile selects on.
pub const POOL: (&str, &str) = ("gpu-pool", "test");

/// A Node as a test describes it. Starts empty but for kubelet `Ready=True`.
#[derive(Clone, Debug)]
pub struct NodeBuilder {
    node: Node,
}

impl NodeBuilder {
    /// A node with no labels, no resources, kubelet Ready.
    pub fn bare(name: &str) -> Self {
        NodeBuilder {
            node: Node {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..ObjectMeta::default()
                },
                spec: Some(NodeSpec::default()),
                status: Some(NodeStatus::default()),
            },
        }
        .kubelet("True", "KubeletReady", "kubelet is posting ready status")
    }

    /// Continues from an existing Node (e.g. one a reconcile already wrote to).
    pub fn from_node(node: Node) -> Self {
        NodeBuilder { node }
    }

    /// A healthy RTX 3090 node in the test pool, labelled the way the device
    /// plugin chart's GFD + NFD label it (docs/gpu-facts.md, "Labels GFD writes"):
    /// driver 580.178.04, CUDA 13.0, `pci-0300_10de`, one GPU allocatable, GFD
    /// timestamp 45 s old.
    pub fn gpu(name: &str) -> Self {
        use gpuready_testenv::rtx3090;
        let card = rtx3090::LABELS
            .iter()
            .fold(NodeBuilder::bare(name), |b, (k, v)| b.label(k, v));
        card.label(POOL.0, POOL.1)
            .label("kubernetes.io/hostname", name)
            .label("feature.node.kubernetes.io/cpu-model.vendor_id", "AMD")
            .label(nvidia::GFD_TIMESTAMP, &seconds_ago(45))
            .label(nvidia::GPU_REPLICAS, "1")
            .label("nvidia.com/gpu.sharing-strategy", "none")
            .label("nvidia.com/gpu.mode", "graphics")
            .label("nvidia.com/gpu.machine", "Standard-PC-Q35-ICH9-2009")
            .label("nvidia.com/mig.capable", "false")
            .label("nvidia.com/mps.capable", "false")
            .label("nvidia.com/vgpu.present", "false")
            // Every driver and CUDA label GFD writes beside the full versions.
            .driver(rtx3090::DRIVER)
            .cuda_runtime(rtx3090::CUDA)
            .gpus(1, 1)
    }

    /// The H200 as GFD labels it (values of a real GFD v0.20.0 capture on
    /// that GPU): 143771 MiB, Hopper 9.0, driver 580.159.04, CUDA 13.0.
    pub fn h200(name: &str) -> Self {
        NodeBuilder::gpu(name)
            .label(nvidia::GPU_PRODUCT, "NVIDIA-H200")
            .label(nvidia::GPU_MEMORY, "143771")
            .label(nvidia::GPU_FAMILY, "hopper")
            .compute(9, 0)
            .driver("580.159.04")
            .cuda_runtime("13.0")
    }

    /// GTX 1070 8 GB, Pascal 6.1, on the R580 branch (580.95.05, CUDA 13.0).
    pub fn gtx1070(name: &str) -> Self {
        NodeBuilder::gpu(name)
            .label(nvidia::GPU_PRODUCT, "NVIDIA-GeForce-GTX-1070")
            .label(nvidia::GPU_MEMORY, "8192")
            .compute(6, 1)
            .label(nvidia::GPU_FAMILY, "pascal")
            .driver("580.95.05")
    }

    /// Quadro M5000 8 GB, Maxwell 5.2: its NVML name has no `NVIDIA ` prefix.
    pub fn quadro_m5000(name: &str) -> Self {
        NodeBuilder::gpu(name)
            .label(nvidia::GPU_PRODUCT, "Quadro-M5000")
            .label(nvidia::GPU_MEMORY, "8192")
            .compute(5, 2)
            .label(nvidia::GPU_FAMILY, "maxwell")
            .driver("580.95.05")
    }

    /// RTX 4070 Ti SUPER 16 GB, Ada 8.9 (16376 MiB as NVML reports it).
    pub fn rtx4070tis(name: &str) -> Self {
        NodeBuilder::gpu(name)
            .label(nvidia::GPU_PRODUCT, "NVIDIA-GeForce-RTX-4070-Ti-SUPER")
            .label(nvidia::GPU_MEMORY, "16376")
            .compute(8, 9)
            .label(nvidia::GPU_FAMILY, "ada-lovelace")
    }

    /// A100-SXM4-40GB under the GPU operator with MIG `mixed`: 3g.20gb + 2g.10gb +
    /// 1g.5gb, no `nvidia.com/gpu` resource, `pci-10de` from the operator's NFD values.
    pub fn a100_mig_mixed(name: &str) -> Self {
        NodeBuilder::gpu(name)
            .unlabel("feature.node.kubernetes.io/pci-0300_10de.present")
            .label("feature.node.kubernetes.io/pci-10de.present", "true")
            .label(nvidia::GPU_PRESENT, "true")
            .label(nvidia::GPU_PRODUCT, "NVIDIA-A100-SXM4-40GB")
            .label(nvidia::GPU_MEMORY, "40960")
            .label(nvidia::GPU_REPLICAS, "0")
            .label("nvidia.com/gpu.mode", "compute")
            .label("nvidia.com/mig.capable", "true")
            .label(nvidia::MIG_STRATEGY, "mixed")
            .label("nvidia.com/mig-1g.5gb.count", "1")
            .label(
                "nvidia.com/mig-1g.5gb.product",
                "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            )
            .compute(8, 0)
            .no_resource(nvidia::GPU_RESOURCE)
            .resource("nvidia.com/mig-1g.5gb", "1", "1")
            .resource("nvidia.com/mig-2g.10gb", "1", "1")
            .resource("nvidia.com/mig-3g.20gb", "1", "1")
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.node
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn unlabel(mut self, key: &str) -> Self {
        if let Some(l) = self.node.metadata.labels.as_mut() {
            l.remove(key);
        }
        self
    }

    /// Removes every label whose key starts with `prefix`.
    pub fn unlabel_prefix(mut self, prefix: &str) -> Self {
        if let Some(l) = self.node.metadata.labels.as_mut() {
            l.retain(|k, _| !k.starts_with(prefix));
        }
        self
    }

    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.node
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// `gpu.compute.major` / `.minor`.
    pub fn compute(self, major: u32, minor: u32) -> Self {
        self.label(nvidia::GPU_COMPUTE_MAJOR, &major.to_string())
            .label(nvidia::GPU_COMPUTE_MINOR, &minor.to_string())
    }

    /// Every driver label GFD ≥ v0.15 writes for this NVML version string: the
    /// `cuda.driver-version.*` keys and the deprecated `cuda.driver.*` ones, with
    /// `rev=""` for a 2-part version.
    pub fn driver(self, version: &str) -> Self {
        let parts: Vec<&str> = version.split('.').collect();
        let (major, minor, rev) = (
            parts.first().copied().unwrap_or(""),
            parts.get(1).copied().unwrap_or(""),
            parts.get(2).copied().unwrap_or(""),
        );
        self.label(nvidia::DRIVER_FULL, version)
            .label(nvidia::DRIVER_MAJOR, major)
            .label(nvidia::DRIVER_MINOR, minor)
            .label(nvidia::DRIVER_REVISION, rev)
            .label(nvidia::DRIVER_MAJOR_OLD, major)
            .label(nvidia::DRIVER_MINOR_OLD, minor)
            .label(nvidia::DRIVER_REV_OLD, rev)
    }

    /// Only the deprecated `cuda.driver.*` keys, as GFD before v0.15 wrote them.
    pub fn old_gfd_driver(self, major: &str, minor: &str, rev: &str) -> Self {
        self.no_driver()
            .label(nvidia::DRIVER_MAJOR_OLD, major)
            .label(nvidia::DRIVER_MINOR_OLD, minor)
            .label(nvidia::DRIVER_REV_OLD, rev)
    }

    pub fn no_driver(self) -> Self {
        self.unlabel_prefix("nvidia.com/cuda.driver")
    }

    /// `cuda.runtime-version.*` and the deprecated `cuda.runtime.*`.
    pub fn cuda_runtime(self, version: &str) -> Self {
        let (major, minor) = version.split_once('.').unwrap_or((version, ""));
        self.label(nvidia::RUNTIME_FULL, version)
            .label(nvidia::RUNTIME_MAJOR, major)
            .label(nvidia::RUNTIME_MINOR, minor)
            .label(nvidia::RUNTIME_MAJOR_OLD, major)
            .label(nvidia::RUNTIME_MINOR_OLD, minor)
    }

    pub fn no_cuda_runtime(self) -> Self {
        self.unlabel_prefix("nvidia.com/cuda.runtime")
    }

    /// Drops every label GFD writes (keeps `gpu.present` and `gpu.deploy.*`).
    pub fn no_gfd(self) -> Self {
        let mut b = self
            .unlabel_prefix("nvidia.com/cuda.")
            .unlabel_prefix("nvidia.com/mig")
            .unlabel_prefix("nvidia.com/mps.")
            .unlabel_prefix("nvidia.com/vgpu.")
            .unlabel(nvidia::GFD_TIMESTAMP);
        if let Some(l) = b.node.metadata.labels.as_mut() {
            l.retain(|k, _| {
                !k.starts_with("nvidia.com/gpu.")
                    || k == nvidia::GPU_PRESENT
                    || k.starts_with("nvidia.com/gpu.deploy.")
            });
        }
        b
    }

    pub fn no_nfd(self) -> Self {
        self.unlabel_prefix("feature.node.kubernetes.io/")
    }

    /// `nvidia.com/gpu` capacity and allocatable.
    pub fn gpus(self, capacity: u32, allocatable: u32) -> Self {
        self.resource(
            nvidia::GPU_RESOURCE,
            &capacity.to_string(),
            &allocatable.to_string(),
        )
    }

    pub fn resource(mut self, name: &str, capacity: &str, allocatable: &str) -> Self {
        let status = self.node.status.get_or_insert_with(NodeStatus::default);
        status
            .capacity
            .get_or_insert_with(BTreeMap::new)
            .insert(name.to_owned(), Quantity(capacity.to_owned()));
        status
            .allocatable
            .get_or_insert_with(BTreeMap::new)
            .insert(name.to_owned(), Quantity(allocatable.to_owned()));
        self
    }

    pub fn no_resource(mut self, name: &str) -> Self {
        if let Some(s) = self.node.status.as_mut() {
            for m in [s.capacity.as_mut(), s.allocatable.as_mut()]
                .into_iter()
                .flatten()
            {
                m.remove(name);
            }
        }
        self
    }

    /// kubelet's `Ready` condition.
    pub fn kubelet(self, status: &str, reason: &str, message: &str) -> Self {
        self.no_kubelet_condition().condition(NodeCondition {
            type_: "Ready".into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_heartbeat_time: Some(Time(at(-20))),
            last_transition_time: Some(Time(at(-86_400))),
        })
    }

    pub fn kubelet_not_ready(self, message: &str) -> Self {
        self.kubelet("False", "KubeletNotReady", message)
    }

    pub fn no_kubelet_condition(mut self) -> Self {
        if let Some(c) = self
            .node
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
        {
            c.retain(|c| c.type_ != "Ready");
        }
        self
    }

    pub fn condition(mut self, c: NodeCondition) -> Self {
        let conds = self
            .node
            .status
            .get_or_insert_with(NodeStatus::default)
            .conditions
            .get_or_insert_with(Vec::new);
        conds.retain(|x| x.type_ != c.type_);
        conds.push(c);
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.node
            .spec
            .get_or_insert_with(NodeSpec::default)
            .taints
            .get_or_insert_with(Vec::new)
            .push(taint(key, value, effect));
        self
    }

    /// `spec.unschedulable` set or cleared (a cordon).
    pub fn cordoned(mut self, on: bool) -> Self {
        self.node
            .spec
            .get_or_insert_with(NodeSpec::default)
            .unschedulable = on.then_some(true);
        self
    }

    /// The node's taints with this key removed.
    pub fn untaint(mut self, key: &str) -> Self {
        if let Some(ts) = self.node.spec.as_mut().and_then(|s| s.taints.as_mut()) {
            ts.retain(|t| t.key != key);
        }
        self
    }

    /// gpuready's `gpuready.io/labels` annotation listing these label keys.
    pub fn owned_by_gpuready(self, labels: &[&str]) -> Self {
        self.annotate(keys::ANNOTATION_LABELS, &labels.join(","))
    }

    /// A managedFields entry claiming these labels for gpuready's server-side
    /// apply, as gpuready before 0.2 left nodes.
    pub fn owned_by_legacy_apply(mut self, labels: &[&str]) -> Self {
        let labels: BTreeSet<String> = labels.iter().map(|s| s.to_string()).collect();
        set_legacy_owned_labels(&mut self.node, &labels);
        self
    }

    pub fn build(self) -> Node {
        self.node
    }

    pub fn facts(&self) -> NodeFacts {
        NodeFacts::from_node(&self.node)
    }
}

pub fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_owned(),
        value: Some(value.to_owned()).filter(|v| !v.is_empty()),
        effect: effect.to_owned(),
        time_added: None,
    }
}

/// `key=value:effect` for each taint, in order.
pub fn taint_strings(taints: &[Taint]) -> Vec<String> {
    taints
        .iter()
        .map(|t| {
            format!(
                "{}={}:{}",
                t.key,
                t.value.as_deref().unwrap_or(""),
                t.effect
            )
        })
        .collect()
}

pub fn node_taints(node: &Node) -> Vec<String> {
    taint_strings(
        node.spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or(&[]),
    )
}

/// A GpuNodeProfile selecting `gpu-pool=test`, with `spec` given as YAML (empty
/// for the defaults). A `nodeSelector` in the YAML replaces the default one.
pub fn profile(name: &str, spec_yaml: &str) -> GpuNodeProfile {
    GpuNodeProfile::new(name, spec(spec_yaml))
}

pub fn spec(spec_yaml: &str) -> GpuNodeProfileSpec {
    let mut v: Value = if spec_yaml.trim().is_empty() {
        json!({})
    } else {
        serde_yaml_ng::from_str(spec_yaml).expect("test profile YAML parses")
    };
    let obj = v.as_object_mut().expect("spec YAML is a mapping");
    obj.entry("nodeSelector")
        .or_insert_with(|| json!({"matchLabels": {POOL.0: POOL.1}}));
    let spec: GpuNodeProfileSpec = serde_json::from_value(v).expect("test profile spec is valid");
    assert_eq!(spec.validate(), vec![], "test profile must pass validation");
    spec
}

/// Evaluates a node under a profile spec at `NOW`.
pub fn judge(spec_yaml: &str, node: &NodeBuilder) -> LayerReport {
    gpuready_core::evaluate(&spec(spec_yaml), &node.facts(), now())
}

pub trait ReportExt {
    /// The layer's result, asserting its status and reason.
    fn expect(&self, layer: Layer, status: Status, reason: &str) -> &LayerResult;
}

impl ReportExt for LayerReport {
    #[track_caller]
    fn expect(&self, layer: Layer, status: Status, reason: &str) -> &LayerResult {
        let r = self
            .get(layer)
            .unwrap_or_else(|| panic!("no {layer} layer"));
        assert_eq!(
            (r.status, r.reason.as_str()),
            (status, reason),
            "{layer}: {}",
            r.message
        );
        r
    }
}

pub trait ResultExt {
    /// Asserts the message contains every fragment.
    fn mentions(&self, fragments: &[&str]) -> &Self;
}

impl ResultExt for LayerResult {
    #[track_caller]
    fn mentions(&self, fragments: &[&str]) -> &Self {
        for f in fragments {
            assert!(
                self.message.contains(f),
                "{} message {:?} should mention {f:?}",
                self.layer,
                self.message
            );
        }
        self
    }
}

/// Plan options at `NOW`: 5-minute heartbeat, no brake.
pub fn opts() -> PlanOptions {
    PlanOptions {
        now: now(),
        heartbeat_seconds: 300,
        hold_new_taints: false,
        write_refused: false,
    }
}

/// Assesses a node against profiles (selectors parsed here).
pub fn assess_with(node: &Node, profiles: &[GpuNodeProfile], opts: &PlanOptions) -> NodeAssessment {
    let selectors: Vec<Selector> = profiles
        .iter()
        .map(|p| gpuready_core::select::profile_selector(p).expect("selector parses"))
        .collect();
    let pairs: Vec<(&GpuNodeProfile, &Selector)> = profiles.iter().zip(selectors.iter()).collect();
    gpuready_core::assess(&NodeFacts::from_node(node), &pairs, opts)
}

/// Applies planned changes, then plans again with the same options: what the
/// controller's next reconcile would do.
pub fn reconcile_twice(
    node: &Node,
    profiles: &[GpuNodeProfile],
    opts: &PlanOptions,
) -> (NodeAssessment, Node, NodeAssessment) {
    let first = assess_with(node, profiles, opts);
    let mut after = node.clone();
    apply(&mut after, &first.changes);
    let second = assess_with(&after, profiles, opts);
    (first, after, second)
}

// ---- the in-memory API server ----

const FIELDS_TYPE: &str = "FieldsV1";

/// Writes `changes` onto `node` as the API server would after gpuready's two
/// requests:
/// - one merge patch on the node: `spec.taints` replaced when `taint` is set,
///   each label and annotation set (`Some`) or deleted (`None`);
/// - one strategic merge patch of `status.conditions` keyed by type: each of
///   `set` added or replaced, each type in `remove` deleted, nothing else touched.
pub fn apply(node: &mut Node, changes: &NodeChanges) {
    if let Some(t) = &changes.taint {
        let spec = node.spec.get_or_insert_with(NodeSpec::default);
        spec.taints = (!t.taints.is_empty()).then(|| t.taints.clone());
    }
    let merge = |map: &mut Option<BTreeMap<String, String>>,
                 changes: &BTreeMap<String, Option<String>>| {
        let m = map.get_or_insert_with(BTreeMap::new);
        for (k, v) in changes {
            match v {
                Some(v) => {
                    m.insert(k.clone(), v.clone());
                }
                None => {
                    m.remove(k);
                }
            }
        }
        if m.is_empty() {
            *map = None;
        }
    };
    if let Some(a) = &changes.annotations {
        merge(&mut node.metadata.annotations, a);
    }
    if let Some(l) = &changes.labels {
        merge(&mut node.metadata.labels, l);
    }
    if let Some(c) = &changes.conditions {
        let conds = node
            .status
            .get_or_insert_with(NodeStatus::default)
            .conditions
            .get_or_insert_with(Vec::new);
        conds.retain(|x| !c.remove.contains(&x.type_));
        for w in &c.set {
            match conds.iter_mut().find(|x| x.type_ == w.type_) {
                Some(x) => *x = w.clone(),
                None => conds.push(w.clone()),
            }
        }
    }
}

/// Marks `labels` as owned by gpuready's server-side apply, as gpuready before
/// 0.2 left them (managedFields, no annotation).
pub fn set_legacy_owned_labels(node: &mut Node, labels: &BTreeSet<String>) {
    let inner: serde_json::Map<String, Value> = labels
        .iter()
        .map(|k| (format!("f:{k}"), json!({})))
        .collect();
    node.metadata
        .managed_fields
        .get_or_insert_with(Vec::new)
        .push(ManagedFieldsEntry {
            api_version: Some("v1".into()),
            fields_type: Some(FIELDS_TYPE.into()),
            fields_v1: Some(FieldsV1(json!({"f:metadata": {"f:labels": inner}}))),
            manager: Some(keys::FIELD_MANAGER.into()),
            operation: Some("Apply".into()),
            subresource: None,
            time: Some(Time(now())),
        });
}

/// The node's condition of this type.
pub fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

pub fn labels_of(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

pub fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}
