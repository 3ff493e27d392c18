//! The verdict: node facts judged against a profile, layer by layer, bottom-up.
//! A pure function of (profile, facts, now).

use std::borrow::Cow;

use gpuready_api::keys::{dra, nvidia, reasons};
use gpuready_api::{GpuNodeProfileSpec, Layer, Workload};
use jiff::Timestamp;
use serde::Serialize;

mod evidence_layers;

use evidence_layers::{
    apply_deadline, device_plugin_evidence, dra_feature_layer, dra_pending, not_applicable_to_vm,
    profile_with_bus, uses_dra,
};

use crate::compat;
use crate::evidence::Source;
use crate::facts::{ConditionStatus, FamilyLabel, Field, GfdFacts, Malformed, NodeFacts};
use crate::product;
use crate::version::{DriverVersion, MajorMinor};

/// A layer's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Status {
    Ready,
    NotReady,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ready => "Ready",
            Status::NotReady => "NotReady",
            Status::Unknown => "Unknown",
        }
    }
}

/// One layer's verdict: a machine reason and a message a person can act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerResult {
    pub layer: Layer,
    pub status: Status,
    pub reason: String,
    pub message: String,
    /// Whether this layer can hold the node back under the profile.
    pub gating: bool,
    /// The evidence the verdict rests on.
    pub evidence: Source,
}

/// Every layer's verdict for one node under one profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerReport {
    pub layers: Vec<LayerResult>,
    /// Seconds until a time-based verdict (the GFD timestamp going stale) may
    /// change without any change to the node.
    pub recheck_after_seconds: Option<u64>,
    /// Set while the node is not ready for longer than the profile's
    /// `notReadyDeadline` allows.
    pub deadline: Option<DeadlinePassed>,
    /// The per-device verdict when the profile gates devices and the node's
    /// DRA pool could be judged device by device (`None` otherwise: gpuready's
    /// DeviceTaintRules for the node are then left as they are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<crate::devices::DeviceGatingReport>,
}

/// A node past its not-ready deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadlinePassed {
    /// When the not-ready time started counting.
    pub since: String,
    pub seconds: u32,
    /// The profile asks for the remediation label.
    pub label: bool,
}

impl DeadlinePassed {
    pub fn describe(&self) -> String {
        format!(
            "not ready for longer than the {} deadline (counting since {})",
            human_seconds(i64::from(self.seconds)),
            self.since
        )
    }
}

impl LayerReport {
    /// Ready when every gating layer is Ready.
    pub fn ready(&self) -> bool {
        self.layers
            .iter()
            .filter(|l| l.gating)
            .all(|l| l.status == Status::Ready)
    }

    /// The first gating layer that is not Ready, bottom-up.
    pub fn first_failure(&self) -> Option<&LayerResult> {
        self.layers
            .iter()
            .find(|l| l.gating && l.status != Status::Ready)
    }

    /// Every gating layer that is not Ready.
    pub fn failures(&self) -> impl Iterator<Item = &LayerResult> {
        self.layers
            .iter()
            .filter(|l| l.gating && l.status != Status::Ready)
    }

    pub fn get(&self, layer: Layer) -> Option<&LayerResult> {
        self.layers.iter().find(|l| l.layer == layer)
    }
}

struct Verdict {
    status: Status,
    reason: &'static str,
    message: String,
    /// `None`: the layer's default evidence.
    source: Option<Source>,
}

impl Verdict {
    fn via(mut self, source: Source) -> Verdict {
        self.source = Some(source);
        self
    }
}

fn ready(reason: &'static str, message: impl Into<String>) -> Verdict {
    Verdict {
        status: Status::Ready,
        reason,
        message: message.into(),
        source: None,
    }
}
fn not_ready(reason: &'static str, message: impl Into<String>) -> Verdict {
    Verdict {
        status: Status::NotReady,
        reason,
        message: message.into(),
        source: None,
    }
}
fn unknown(reason: &'static str, message: impl Into<String>) -> Verdict {
    Verdict {
        status: Status::Unknown,
        reason,
        message: message.into(),
        source: None,
    }
}
fn malformed(m: &Malformed) -> Verdict {
    not_ready(reasons::MALFORMED_LABEL, m.to_string())
}

/// Judges a node against a profile at time `now`.
pub fn evaluate(spec: &GpuNodeProfileSpec, facts: &NodeFacts, now: Timestamp) -> LayerReport {
    let node = node_layer(facts);
    let node_ok = node.status == Status::Ready;
    let dra = uses_dra(spec, facts);
    let vm = spec.workload != Workload::Container;
    // Under DRA the pool's device attributes stand in for GFD labels: the same
    // rules judge them, and only a DRA node pays for the copy.
    let pool = if dra && !vm {
        facts.evidence.dra.complete()
    } else {
        None
    };
    // Device gating: bad devices get their own DeviceTaintRule, so the node's
    // layers judge the devices that stay in service. Only when the rules can
    // be written (read at all): otherwise the whole node is gated, as before.
    let devices = match (pool, &spec.device_gating, &facts.evidence.device_rules) {
        (Some(p), Some(_), Some(_)) => {
            let probe = match &facts.probe {
                Some(crate::health::ProbeEvidence::Report(r)) => Some(r.as_ref()),
                _ => None,
            };
            Some(crate::devices::judge_devices(spec, p, probe))
        }
        _ => None,
    };
    let good_pool = match (pool, &devices) {
        (Some(p), Some(g)) if !g.bad.is_empty() => {
            let names = g.bad.iter().map(|b| b.device.as_str()).collect();
            let good = p.without(&names);
            // Every device bad: the attributes of the whole pool still describe
            // the node (and its layers fail on the device plugin count).
            Some(if good.devices.is_empty() {
                p.clone()
            } else {
                good
            })
        }
        _ => None,
    };
    let judged: Cow<NodeFacts> = match pool {
        Some(p) => {
            let mut f = facts.clone();
            f.gfd = good_pool.as_ref().unwrap_or(p).as_gfd();
            // The count is what the pool publishes: a bad device is still there.
            f.gfd.count = p.as_gfd().count;
            Cow::Owned(f)
        }
        None => Cow::Borrowed(facts),
    };
    // The Health layer judges the GPUs that stay in service: a bad GPU's own
    // state is its DeviceTaintRule's business.
    let health_facts: Cow<NodeFacts> = match (pool, &devices, &facts.probe) {
        (Some(p), Some(g), Some(crate::health::ProbeEvidence::Report(r))) if !g.bad.is_empty() => {
            let mut f = facts.clone();
            f.probe = Some(crate::health::ProbeEvidence::Report(Box::new(
                crate::devices::report_without(r, g, p),
            )));
            Cow::Owned(f)
        }
        _ => Cow::Borrowed(facts),
    };
    let attributes = if pool.is_some() {
        Source::ResourceSlices
    } else {
        Source::GfdLabels
    };
    let mut recheck = None;
    let mut layers = Vec::with_capacity(Layer::ALL.len() + Layer::OPTIONAL.len());
    for layer in Layer::every() {
        let v = match layer {
            Layer::Node => continue,
            // Left out entirely when there is no report and the profile ignores
            // that: profiles written before the probe existed judge as before.
            Layer::Health if !crate::health::applies(spec, facts) => continue,
            // A node that is down tells us nothing current about its GPU stack.
            _ if !node_ok => unknown(
                reasons::NODE_NOT_READY,
                "kubelet is not Ready: the GPU stack cannot be judged until the node is back",
            )
            .via(Source::Kubelet),
            Layer::Hardware => hardware_layer(spec, facts),
            Layer::DevicePlugin => device_plugin_evidence(spec, facts, dra, devices.as_ref()),
            Layer::Driver | Layer::FeatureDiscovery | Layer::Profile | Layer::Compatibility
                if vm =>
            {
                not_applicable_to_vm(spec, layer)
            }
            // DRA without a complete pool and without GFD labels to fall back
            // on: these layers wait for the pool, under the pool's reason.
            Layer::Driver | Layer::Profile | Layer::Compatibility
                if dra && pool.is_none() && !facts.gfd.seen =>
            {
                dra_pending(facts)
            }
            Layer::Driver => driver_layer(spec, &judged).or_via(attributes),
            Layer::FeatureDiscovery if dra => dra_feature_layer(facts),
            Layer::FeatureDiscovery => {
                let (v, r) = feature_discovery_layer(spec, facts, now);
                recheck = r;
                v
            }
            Layer::Profile => profile_with_bus(spec, &judged, dra).or_via(attributes),
            Layer::Compatibility => compatibility_layer(spec, &judged).or_via(attributes),
            Layer::Health => match crate::health::judge(spec, &health_facts, now) {
                Some(h) => {
                    recheck = match (recheck, h.recheck_after_seconds) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    Verdict {
                        status: h.status,
                        reason: h.reason,
                        message: h.message,
                        source: Some(Source::ProbeReport),
                    }
                }
                None => continue,
            },
        };
        layers.push(LayerResult {
            layer,
            status: v.status,
            reason: v.reason.to_owned(),
            message: v.message,
            gating: spec.is_gating(layer),
            evidence: v.source.unwrap_or(default_source(layer)),
        });
    }
    layers.insert(
        0,
        LayerResult {
            layer: Layer::Node,
            status: node.status,
            reason: node.reason.to_owned(),
            message: node.message,
            gating: spec.is_gating(Layer::Node),
            evidence: Source::Kubelet,
        },
    );
    let mut report = LayerReport {
        layers,
        recheck_after_seconds: recheck,
        deadline: None,
        devices,
    };
    apply_deadline(spec, facts, now, &mut report);
    report
}

fn default_source(layer: Layer) -> Source {
    match layer {
        Layer::Node => Source::Kubelet,
        Layer::Hardware => Source::NfdLabels,
        Layer::DevicePlugin => Source::Allocatable,
        Layer::Health => Source::ProbeReport,
        _ => Source::GfdLabels,
    }
}

impl Verdict {
    fn or_via(self, source: Source) -> Verdict {
        if self.source.is_some() {
            self
        } else {
            self.via(source)
        }
    }
}

fn node_layer(facts: &NodeFacts) -> Verdict {
    let k = &facts.kubelet;
    let detail = if k.message.is_empty() {
        String::new()
    } else {
        format!(": {}", k.message)
    };
    match k.status {
        ConditionStatus::True => ready("KubeletReady", "kubelet reports Ready"),
        ConditionStatus::False => not_ready(
            "KubeletNotReady",
            format!("kubelet reports NotReady{detail}"),
        ),
        ConditionStatus::Unknown => unknown(
            "KubeletStatusUnknown",
            format!("kubelet stopped posting status{detail}"),
        ),
        ConditionStatus::Missing => unknown(
            "KubeletStatusUnknown",
            "the node has no Ready condition yet",
        ),
    }
}

fn hardware_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    // How the GPUs are bound (nvidia driver or vfio-pci) decides what every
    // layer above can read, so a node serving another workload fails here.
    if let Some(label) = facts.labels.get(nvidia::WORKLOAD_CONFIG)
        && label != spec.workload.label_value()
    {
        return not_ready(
            reasons::WORKLOAD_MISMATCH,
            format!(
                "{}={label} but the profile serves {} nodes: relabel the node or select it with a profile for {label}",
                nvidia::WORKLOAD_CONFIG,
                spec.workload.label_value()
            ),
        )
        .via(Source::Profile);
    }
    let hw = &facts.hardware;
    if let Some(m) = hw.gpu_present.malformed() {
        return malformed(m);
    }
    if hw.gpu_present.present() == Some(&false) {
        return not_ready(
            "GpuNotPresent",
            format!(
                "{}=false: the GPU operator no longer sees an NVIDIA PCI device",
                nvidia::GPU_PRESENT
            ),
        );
    }
    if let Some(bus) = &facts.evidence.bus
        && bus.gpus > 0
    {
        let mixed = if bus.models.len() > 1 {
            format!(
                "; {} GPU models on one node: GFD labels only one of them, so product rules judge a random one",
                bus.models.len()
            )
        } else {
            String::new()
        };
        return ready(
            reasons::NVIDIA_GPUS_ON_BUS,
            format!(
                "NFD's PCI scan ({}) shows {} NVIDIA GPU(s): {}{mixed}",
                bus.objects.join(", "),
                bus.gpus,
                bus.describe()
            ),
        )
        .via(Source::NodeFeature);
    }
    if let Some(label) = hw.nvidia_pci_labels.first() {
        return ready(
            "NvidiaPciDevice",
            format!("NFD sees an NVIDIA PCI device ({label})"),
        );
    }
    if hw.gpu_present.present() == Some(&true) {
        return ready("GpuPresent", format!("{}=true", nvidia::GPU_PRESENT));
    }
    if facts.gfd.product.is_some() {
        return ready(
            "SeenByGfd",
            "GFD labels the node's GPU, so the device is present",
        )
        .via(Source::GfdLabels);
    }
    if let Some(p) = facts.evidence.dra.complete()
        && p.physical_gpus(false) > 0
    {
        return ready(
            reasons::SEEN_BY_DRA_DRIVER,
            format!(
                "the DRA driver publishes {} GPU(s) for the node",
                p.physical_gpus(false)
            ),
        )
        .via(Source::ResourceSlices);
    }
    if !hw.nfd_seen {
        let msg =
            "no NFD labels on the node (feature.node.kubernetes.io/*): is nfd-worker running here?";
        return if spec.is_gating(Layer::Hardware) {
            not_ready("NfdLabelsAbsent", msg)
        } else {
            unknown("NfdLabelsAbsent", msg)
        };
    }
    not_ready(
        "NoNvidiaPciDevice",
        "NFD labels the node but shows no NVIDIA PCI device (vendor 10de): check PCI passthrough from the hypervisor, and NFD's pci deviceClassWhitelist (03 or 0300/0302)",
    )
}

/// How a message names the value behind a GFD label key: the label itself,
/// or — when the values were read from the DRA pool — the ResourceSlice
/// attribute, so a DRA-only node's messages never send a reader to a label
/// that is not there.
fn named(gfd: &GfdFacts, key: &str) -> String {
    let Some(pool) = &gfd.from_pool else {
        return key.to_owned();
    };
    let attr = match key {
        nvidia::GPU_PRODUCT => dra::ATTR_PRODUCT,
        nvidia::GPU_MEMORY => "capacity.memory",
        nvidia::GPU_COMPUTE_MAJOR => dra::ATTR_COMPUTE,
        nvidia::GPU_FAMILY => dra::ATTR_ARCHITECTURE,
        nvidia::GPU_COUNT => return format!("the ResourceSlices of pool {pool}"),
        nvidia::DRIVER_FULL => dra::ATTR_DRIVER,
        nvidia::RUNTIME_FULL => dra::ATTR_CUDA_DRIVER,
        other => other,
    };
    format!("the ResourceSlice attribute {attr} (pool {pool})")
}

/// A value the layer needs is not there: a GFD label, or a slice attribute.
fn missing(gfd: &GfdFacts, key: &str) -> Verdict {
    let reason = if gfd.from_pool.is_some() {
        reasons::DRA_ATTRIBUTE_MISSING
    } else {
        "GfdLabelMissing"
    };
    unknown(reason, format!("{} is missing", named(gfd, key)))
}

fn vfio_mode_verdict() -> Verdict {
    not_ready(
        reasons::GFD_VFIO_MODE,
        format!(
            "GFD runs in vfio mode ({}=-1, driver unknown): the GPU is bound to vfio-pci, not the NVIDIA driver. For a VM node set the profile's workload to VmPassthrough; for containers bind the GPU back to the nvidia driver",
            nvidia::GPU_COMPUTE_MAJOR
        ),
    )
    .via(Source::GfdLabels)
}

fn driver_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    if facts.gfd.vfio_mode {
        return vfio_mode_verdict();
    }
    let v = driver_version_layer(spec, facts);
    if v.status != Status::Ready {
        return v;
    }
    // A vGPU guest driver must come from the branch of the host's vGPU manager.
    if let (Some(vgpu), Some(d)) = (&facts.gfd.vgpu, facts.gfd.driver.present())
        && let Some(host) = vgpu.host_branch_major()
        && host != d.major
    {
        return not_ready(
            reasons::VGPU_BRANCH_MISMATCH,
            format!(
                "vGPU guest driver {d} is from branch R{}, the host's vGPU manager is {} (R{host}): install the guest driver of the host's branch",
                d.major,
                vgpu.host_branch
                    .as_deref()
                    .or(vgpu.host_version.as_deref())
                    .unwrap_or("?")
            ),
        );
    }
    v
}

fn driver_version_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    match &facts.gfd.driver {
        Field::Malformed(m) => malformed(m),
        Field::Absent if !facts.gfd.seen => unknown(
            "NoGfdLabels",
            "no GFD labels: the driver version cannot be read from the node",
        ),
        Field::Absent => not_ready(
            "DriverVersionMissing",
            match &facts.gfd.from_pool {
                Some(_) => format!(
                    "the DRA driver publishes no driver version ({}): NVML cannot reach the driver",
                    named(&facts.gfd, nvidia::DRIVER_FULL)
                ),
                None => format!(
                    "GFD runs but publishes no driver version ({}): NVML cannot reach the driver",
                    nvidia::DRIVER_FULL
                ),
            },
        ),
        Field::Present(v) => match spec.min_driver_version.as_deref().map(DriverVersion::parse) {
            Some(Ok(min)) if *v < min => not_ready(
                "DriverTooOld",
                format!("driver {v} is older than the minimum {min}"),
            ),
            Some(Ok(min)) => ready("DriverVersionOk", format!("driver {v} (minimum {min})")),
            // The schema refuses such a profile; an object written before the rule existed ends here.
            Some(Err(e)) => unknown("InvalidProfile", format!("spec.minDriverVersion: {e}")),
            None => ready("DriverVersionOk", format!("driver {v}")),
        },
    }
}

/// The allocatable quantities the device plugin must advertise.
enum Need<'a> {
    Resource(&'a str, u64),
    AnyMig,
}

fn device_plugin_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    let default_count = u64::from(spec.gpu.count.unwrap_or(1));
    let needs: Vec<Need> = if !spec.resources.is_empty() {
        spec.resources
            .iter()
            .map(|(k, v)| Need::Resource(k.as_str(), u64::from(*v)))
            .collect()
    } else if facts.gfd.mig_strategy.as_deref() == Some("mixed") {
        vec![Need::AnyMig]
    } else {
        vec![Need::Resource(nvidia::GPU_RESOURCE, default_count)]
    };

    let mut ok = Vec::new();
    for need in needs {
        match need {
            Need::AnyMig => {
                let total: u64 = facts
                    .allocatable
                    .iter()
                    .filter(|(k, _)| k.starts_with(nvidia::MIG_RESOURCE_PREFIX))
                    .filter_map(|(_, v)| v.present())
                    .sum();
                if total == 0 {
                    return not_ready(
                        "MigResourcesMissing",
                        "MIG strategy is mixed but no nvidia.com/mig-* resource is allocatable: check the MIG manager's config and the device plugin",
                    );
                }
                ok.push(format!("{total} MIG devices allocatable"));
            }
            Need::Resource(name, want) => {
                let alloc = facts.allocatable.get(name);
                let cap = facts.capacity.get(name);
                if let Some(m) = alloc
                    .and_then(Field::malformed)
                    .or(cap.and_then(Field::malformed))
                {
                    return not_ready("MalformedQuantity", m.to_string());
                }
                let alloc = alloc.and_then(Field::present).copied();
                let cap = cap.and_then(Field::present).copied();
                match (alloc, cap) {
                    (None, None) => {
                        return not_ready(
                            "ResourceNotAdvertised",
                            format!(
                                "{name} is not advertised: the device plugin is not running or has not registered with kubelet"
                            ),
                        );
                    }
                    (a, c) if a.unwrap_or(0) < want && c.unwrap_or(0) >= want => {
                        return not_ready(
                            "DevicesUnhealthy",
                            format!(
                                "{name}: allocatable {} < {want} while capacity is {}: the device plugin reports unhealthy devices (XID errors, driver faults)",
                                a.unwrap_or(0),
                                c.unwrap_or(0)
                            ),
                        );
                    }
                    (a, c) if a.unwrap_or(0) < want => {
                        return not_ready(
                            "TooFewDevices",
                            format!(
                                "{name}: allocatable {} (capacity {}) < {want} expected",
                                a.unwrap_or(0),
                                c.unwrap_or(0)
                            ),
                        );
                    }
                    (a, _) => ok.push(format!(
                        "{name}: {} allocatable (need {want})",
                        a.unwrap_or(0)
                    )),
                }
            }
        }
    }
    ready("Allocatable", ok.join("; "))
}

/// The GFD labels this profile needs to judge the node.
fn needed_gfd_keys(spec: &GpuNodeProfileSpec) -> Vec<&'static str> {
    let mut keys = Vec::new();
    let g = &spec.gpu;
    if !g.products.is_empty() {
        keys.push(nvidia::GPU_PRODUCT);
    }
    if g.min_memory_mib.is_some() {
        keys.push(nvidia::GPU_MEMORY);
    }
    if g.min_compute_capability.is_some() || spec.cuda_version.is_some() {
        keys.push(nvidia::GPU_COMPUTE_MAJOR);
    }
    if (!g.families.is_empty() || !g.excluded_families.is_empty())
        && !keys.contains(&nvidia::GPU_COMPUTE_MAJOR)
    {
        keys.push(nvidia::GPU_FAMILY);
    }
    if g.count.is_some() {
        keys.push(nvidia::GPU_COUNT);
    }
    if spec.min_driver_version.is_some() || spec.cuda_version.is_some() {
        keys.push(nvidia::DRIVER_FULL);
    }
    if spec.cuda_version.is_some() {
        keys.push(nvidia::RUNTIME_FULL);
    }
    keys
}

fn is_present(facts: &NodeFacts, key: &str) -> bool {
    let g = &facts.gfd;
    match key {
        nvidia::GPU_PRODUCT => g.product.is_some(),
        nvidia::GPU_MEMORY => !g.memory_mib.is_absent(),
        nvidia::GPU_COMPUTE_MAJOR => !g.compute.is_absent(),
        nvidia::GPU_FAMILY => !g.family.is_absent() || !g.compute.is_absent(),
        nvidia::GPU_COUNT => !g.count.is_absent(),
        nvidia::DRIVER_FULL => !g.driver.is_absent(),
        nvidia::RUNTIME_FULL => !g.cuda_runtime.is_absent(),
        _ => facts.labels.contains_key(key),
    }
}

/// How far ahead of gpuready's clock a GFD timestamp may be and still count as
/// fresh: node clocks drift by seconds under NTP, never by minutes.
pub const MAX_GFD_CLOCK_SKEW_SECONDS: i64 = 60;

fn feature_discovery_layer(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    now: Timestamp,
) -> (Verdict, Option<u64>) {
    let gfd = &facts.gfd;
    if gfd.vfio_mode {
        return (vfio_mode_verdict(), None);
    }
    if !gfd.seen {
        return (
            not_ready(
                "GfdLabelsMissing",
                "no GPU Feature Discovery labels (nvidia.com/gpu.*, nvidia.com/cuda.*): is gpu-feature-discovery running on this node, and nfd-master in the cluster?",
            ),
            None,
        );
    }
    if let Some(m) = gfd.malformed().first() {
        return (malformed(m), None);
    }
    let missing: Vec<&str> = needed_gfd_keys(spec)
        .into_iter()
        .filter(|k| !is_present(facts, k))
        .collect();
    if !missing.is_empty() {
        return (
            not_ready(
                "GfdLabelsMissing",
                format!(
                    "GFD labels the profile needs are missing: {}",
                    missing.join(", ")
                ),
            ),
            None,
        );
    }
    let max_age = i64::from(spec.max_label_age_seconds);
    match gfd.timestamp.present() {
        None => (
            ready(
                "GfdLabelsPresent",
                "GFD labels present; no gfd.timestamp (GFD runs with --no-timestamp?), so freshness is not checked",
            ),
            None,
        ),
        Some(_) if max_age == 0 => (ready("GfdLabelsPresent", "GFD labels present"), None),
        // The messages name the timestamp, never the time elapsed since it: they
        // end up in node conditions, and a message that changes with the clock
        // turns every reconcile into a status write.
        Some(&ts) => {
            let age = now.as_second().saturating_sub(ts);
            if age < -MAX_GFD_CLOCK_SKEW_SECONDS {
                // A timestamp from the future would otherwise stay "fresh" for as
                // long as it is ahead: a wrong node clock, or a hand-written label,
                // must not hide a GFD that stopped. It turns fresh by itself once
                // the clock catches up to within the allowed skew.
                let when = Timestamp::from_second(ts)
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                let wait = u64::try_from(age.saturating_neg() - MAX_GFD_CLOCK_SKEW_SECONDS)
                    .unwrap_or(u64::MAX);
                return (
                    not_ready(
                        "GfdTimestampInFuture",
                        format!(
                            "{}={ts}{when} is more than {MAX_GFD_CLOCK_SKEW_SECONDS}s in the future: check the node's clock (NTP)",
                            nvidia::GFD_TIMESTAMP,
                        ),
                    ),
                    Some(wait),
                );
            }
            if age > max_age {
                let when = Timestamp::from_second(ts)
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                (
                    not_ready(
                        "GfdLabelsStale",
                        format!(
                            "{}={ts}{when} is older than the {} limit: GFD stopped refreshing its labels",
                            nvidia::GFD_TIMESTAMP,
                            human_seconds(max_age)
                        ),
                    ),
                    None,
                )
            } else {
                let left = u64::try_from(max_age - age.max(0) + 1).unwrap_or(1);
                (
                    ready(
                        "GfdLabelsFresh",
                        format!(
                            "GFD labels present and refreshed within the {} limit",
                            human_seconds(max_age)
                        ),
                    ),
                    Some(left),
                )
            }
        }
    }
}

fn human_seconds(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 || s % 3600 != 0 && s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

fn profile_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    let g = &spec.gpu;
    let gfd = &facts.gfd;
    let mut met = Vec::new();

    if !g.products.is_empty() {
        let Some(p) = &gfd.product else {
            return missing(gfd, nvidia::GPU_PRODUCT);
        };
        if !product::matches_any(&g.products, p) {
            return not_ready(
                "ProductMismatch",
                format!("{p} is not one of {}", g.products.join(", ")),
            );
        }
        met.push(p.clone());
    }
    if let Some(min) = g.min_memory_mib {
        match &gfd.memory_mib {
            Field::Absent => {
                return missing(gfd, nvidia::GPU_MEMORY);
            }
            Field::Malformed(m) => return malformed(m),
            Field::Present(mib) if *mib < u64::from(min) => {
                return not_ready("MemoryTooSmall", format!("{mib} MiB < {min} MiB required"));
            }
            Field::Present(mib) => met.push(format!("{mib} MiB")),
        }
    }
    if let Some(min) = &g.min_compute_capability {
        let Ok(min) = MajorMinor::parse(min) else {
            return unknown(
                "InvalidProfile",
                format!("spec.gpu.minComputeCapability {min:?} is not major.minor"),
            );
        };
        match &gfd.compute {
            Field::Absent => {
                return missing(gfd, nvidia::GPU_COMPUTE_MAJOR);
            }
            Field::Malformed(m) => return malformed(m),
            Field::Present(cc) if *cc < min => {
                return not_ready(
                    "ComputeCapabilityTooLow",
                    format!("compute capability {cc} < {min} required"),
                );
            }
            Field::Present(cc) => met.push(format!("compute {cc}")),
        }
    }
    if !g.families.is_empty() || !g.excluded_families.is_empty() {
        let family = match (gfd.effective_family(), &gfd.family, &gfd.compute) {
            (Some(f), _, _) => f,
            (None, Field::Malformed(m), _) | (None, _, Field::Malformed(m)) => return malformed(m),
            (None, Field::Present(FamilyLabel::Undefined), cc) => {
                if gfd.from_pool.is_some() {
                    return unknown(
                        reasons::DRA_ATTRIBUTE_MISSING,
                        format!(
                            "{} names no architecture this gpuready knows, so the family rule cannot be checked",
                            named(gfd, nvidia::GPU_FAMILY)
                        ),
                    );
                }
                return not_ready(
                    reasons::MALFORMED_LABEL,
                    format!(
                        "{}=undefined{}: GFD has no family name for this card (a GFD release older than the card?), so the family rule cannot be checked",
                        nvidia::GPU_FAMILY,
                        cc.present()
                            .map(|c| format!(" (compute {c})"))
                            .unwrap_or_default()
                    ),
                );
            }
            // A family newer than this gpuready: not excluded, and not among the
            // allowed ones (which can only name families gpuready knows).
            (None, Field::Present(FamilyLabel::Unrecognized(name)), _) => {
                if !g.families.is_empty() {
                    let allowed: Vec<&str> = g.families.iter().map(|f| f.as_str()).collect();
                    return not_ready(
                        "FamilyNotAllowed",
                        format!("{name} is not one of {}", allowed.join(", ")),
                    );
                }
                met.push(name.clone());
                return profile_count(g, gfd, met);
            }
            _ => {
                return missing(gfd, nvidia::GPU_FAMILY);
            }
        };
        if g.excluded_families.contains(&family) {
            return not_ready(
                "FamilyExcluded",
                format!("{family} is excluded by the profile"),
            );
        }
        if !g.families.is_empty() && !g.families.contains(&family) {
            let allowed: Vec<&str> = g.families.iter().map(|f| f.as_str()).collect();
            return not_ready(
                "FamilyNotAllowed",
                format!("{family} is not one of {}", allowed.join(", ")),
            );
        }
        met.push(family.to_string());
    }
    profile_count(g, gfd, met)
}

/// The last Profile check (GPU count), then the verdict over what matched.
fn profile_count(
    g: &gpuready_api::GpuExpectation,
    gfd: &crate::facts::GfdFacts,
    mut met: Vec<String>,
) -> Verdict {
    if let Some(min) = g.count {
        match &gfd.count {
            Field::Absent => {
                return missing(gfd, nvidia::GPU_COUNT);
            }
            Field::Malformed(m) => return malformed(m),
            Field::Present(n) if *n < min => {
                return not_ready(
                    "TooFewGpus",
                    format!(
                        "{} reports {n} GPU(s) < {min} expected",
                        named(gfd, nvidia::GPU_COUNT)
                    ),
                );
            }
            Field::Present(n) => met.push(format!("{n} GPU(s)")),
        }
    }
    if met.is_empty() {
        ready("NoExpectations", "the profile sets no GPU expectations")
    } else {
        ready("ProfileMatches", met.join(", "))
    }
}

fn compatibility_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    let gfd = &facts.gfd;
    if let Some(m) = [
        gfd.compute.malformed(),
        gfd.driver.malformed(),
        gfd.cuda_runtime.malformed(),
    ]
    .into_iter()
    .flatten()
    .next()
    {
        return malformed(m);
    }
    let cc = gfd.compute.present().copied();
    let driver = gfd.driver.present();

    if let (Some(cc), Some(d)) = (cc, driver)
        && !compat::driver_supports_architecture(d, cc)
    {
        let family = compat::family_of(cc)
            .map(|f| f.to_string())
            .unwrap_or_else(|| "pre-Turing".into());
        return not_ready(
            "DriverDropsArchitecture",
            format!(
                "driver {d} is newer than the R{} branch, the last to support Maxwell, Pascal and Volta; this card is {family} (compute {cc}): pin the driver to R{}",
                compat::LAST_BRANCH_FOR_PRE_TURING,
                compat::LAST_BRANCH_FOR_PRE_TURING
            ),
        );
    }

    let Some(cuda) = spec.cuda_version.as_deref() else {
        return match (cc, driver) {
            (Some(_), Some(d)) => ready(
                "Compatible",
                format!("driver {d} supports this architecture; no CUDA version declared"),
            ),
            _ => unknown(
                if gfd.from_pool.is_some() {
                    reasons::DRA_ATTRIBUTE_MISSING
                } else {
                    "GfdLabelMissing"
                },
                "compute capability or driver version unknown: driver/architecture fit cannot be checked",
            ),
        };
    };
    let Ok(cuda) = MajorMinor::parse(cuda) else {
        return unknown(
            "InvalidProfile",
            format!("spec.cudaVersion {cuda:?} is not major.minor"),
        );
    };
    let Some(cc) = cc else {
        return missing(gfd, nvidia::GPU_COMPUTE_MAJOR);
    };
    if !compat::cuda_supports_architecture(cuda, cc) {
        let family = compat::family_of(cc)
            .map(|f| f.to_string())
            .unwrap_or_else(|| "pre-Turing".into());
        return not_ready(
            "CudaDropsArchitecture",
            format!(
                "CUDA {cuda} cannot target {family} (compute {cc}): CUDA 13 needs compute capability {} or newer; build the workloads with CUDA 12.x",
                compat::TURING
            ),
        );
    }
    let Some(driver) = driver else {
        return missing(gfd, nvidia::DRIVER_FULL);
    };
    match compat::min_driver_for_cuda(cuda) {
        Some(min) if *driver < min => {
            return not_ready(
                "DriverTooOldForCuda",
                format!("CUDA {cuda} needs driver {min} or newer; the node runs {driver}"),
            );
        }
        Some(_) => {}
        None => {
            return unknown(
                "UnknownCudaRelease",
                format!(
                    "CUDA {cuda} is not in gpuready's table of driver minimums: upgrade gpuready or check NVIDIA's release notes"
                ),
            );
        }
    }
    match gfd.cuda_runtime.present() {
        None => missing(gfd, nvidia::RUNTIME_FULL),
        Some(rt) if *rt < cuda => not_ready(
            "CudaRuntimeTooOld",
            format!("the driver supports CUDA up to {rt}, the workloads need {cuda}"),
        ),
        Some(rt) => ready(
            "Compatible",
            format!("CUDA {cuda} fits compute {cc} and driver {driver} (supports CUDA up to {rt})"),
        ),
    }
}
