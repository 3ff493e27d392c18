//! Layer verdicts over evidence beyond the Node object: the DRA pool, NFD's
//! PCI bus count, the sandbox device plugin of VM-workload nodes, and the
//! not-ready deadline. A child of `evaluate`, sharing its verdict helpers.

use gpuready_api::keys::{self, dra, nvidia, reasons};
use gpuready_api::{DeadlineStart, EvidenceMode, GpuNodeProfileSpec, Layer, Workload};
use jiff::Timestamp;

use super::{
    DeadlinePassed, LayerReport, Status, Verdict, device_plugin_layer, not_ready, profile_layer,
    ready, unknown,
};
use crate::devices::DeviceGatingReport;
use crate::evidence::{DeviceKind, DraEvidence, Source};
use crate::facts::{Field, NodeFacts};

/// Whether the profile judges this node's advertisement by DRA ResourceSlices.
pub(super) fn uses_dra(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> bool {
    match spec.evidence {
        EvidenceMode::DevicePlugin => false,
        EvidenceMode::Dra => true,
        EvidenceMode::Auto => facts.evidence.dra.has_slices(),
    }
}

/// The not-ready deadline: counted from durable state only (the node's
/// creationTimestamp, or the `GpuReady` condition's lastTransitionTime), so a
/// restarted gpuready reaches the same verdict.
pub(super) fn apply_deadline(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    now: Timestamp,
    report: &mut LayerReport,
) {
    let Some(d) = &spec.not_ready_deadline else {
        return;
    };
    if report.ready() {
        return;
    }
    let gpu_ready = facts
        .gpu_conditions
        .iter()
        .find(|c| c.type_ == keys::CONDITION_GPU_READY);
    let since = match d.since {
        DeadlineStart::FirstSeen => facts.created,
        DeadlineStart::LastReady => match gpu_ready {
            // Ready until this verdict: the clock starts now.
            Some(c) if c.status == "True" => Some(now),
            Some(c) => c
                .last_transition_time
                .as_ref()
                .map(|t| t.0)
                .or(facts.created),
            None => facts.created,
        },
    };
    let Some(since) = since else {
        return;
    };
    let left = since.as_second() + i64::from(d.seconds) - now.as_second();
    if left > 0 {
        let left = u64::try_from(left).unwrap_or(u64::MAX);
        report.recheck_after_seconds =
            Some(report.recheck_after_seconds.map_or(left, |r| r.min(left)));
        return;
    }
    report.deadline = Some(DeadlinePassed {
        since: since.to_string(),
        seconds: d.seconds,
        label: d.label,
    });
}

/// Driver, FeatureDiscovery, Profile and Compatibility judge the container
/// driver stack, which a VM-workload node does not run: the guest does.
pub(super) fn not_applicable_to_vm(spec: &GpuNodeProfileSpec, layer: Layer) -> Verdict {
    ready(
        reasons::NOT_APPLICABLE_TO_WORKLOAD,
        format!(
            "workload {}: the GPUs are handed to VMs, so the {layer} layer (host driver and GFD labels) is judged inside the guest, not here",
            spec.workload.label_value()
        ),
    )
    .via(Source::Profile)
}

/// A layer that reads GPU attributes while the DRA pool cannot give them.
pub(super) fn dra_pending(facts: &NodeFacts) -> Verdict {
    let reason = match &facts.evidence.dra {
        DraEvidence::NotRead => reasons::DRA_EVIDENCE_UNAVAILABLE,
        DraEvidence::Incomplete { .. } => reasons::RESOURCE_POOL_INCOMPLETE,
        DraEvidence::NoSlices | DraEvidence::Complete(_) => reasons::NO_RESOURCE_SLICE,
    };
    unknown(
        reason,
        "the GPU attributes come from the node's gpu.nvidia.com ResourceSlices, and there is no complete pool to read (see DevicePlugin)",
    )
    .via(Source::ResourceSlices)
}

/// FeatureDiscovery under DRA: the attributes come from the pool itself.
pub(super) fn dra_feature_layer(facts: &NodeFacts) -> Verdict {
    match &facts.evidence.dra {
        DraEvidence::Complete(p) => ready(
            reasons::DRA_ATTRIBUTES,
            format!(
                "GPU attributes come from the DRA driver's ResourceSlices (pool {}); GFD labels are not needed",
                p.pools.join(", ")
            ),
        ),
        _ => unknown(
            reasons::DRA_ATTRIBUTES,
            "no complete gpu.nvidia.com pool to read GPU attributes from (see DevicePlugin)",
        ),
    }
    .via(Source::ResourceSlices)
}

/// DevicePlugin: the advertisement the profile's evidence selects (device plugin, DRA pool, sandbox plugin), then the GPU
/// count on the PCI bus against the count advertised.
pub(super) fn device_plugin_evidence(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    dra: bool,
    gating: Option<&DeviceGatingReport>,
) -> Verdict {
    let (v, advertised) = if spec.workload != Workload::Container {
        sandbox_layer(spec, facts)
    } else if dra {
        dra_device_layer(spec, facts, gating)
    } else {
        let v = device_plugin_layer(spec, facts);
        (v, device_plugin_gpu_count(facts))
    };
    if v.status != Status::Ready {
        return v;
    }
    // Every count any source advertises must be backed by the bus: a count
    // above it is a lost or phantom GPU, whichever source still claims it.
    let counts = advertised_counts(facts);
    if let Some(bus) = &facts.evidence.bus
        && let Some((source, n)) = counts.iter().find(|(_, n)| *n > u64::from(bus.gpus))
    {
        return not_ready(
            reasons::GPU_MISSING_FROM_BUS,
            format!(
                "{n} GPU(s) are advertised ({source}) but NFD's PCI scan shows only {} ({}): a GPU fell off the bus (XID 79?) or is a phantom the stack still advertises; drain and reset the node",
                bus.gpus,
                bus.describe()
            ),
        )
        .via(Source::NodeFeature);
    }
    let compared = if counts.is_empty() {
        String::new()
    } else {
        format!(
            " ({})",
            counts
                .iter()
                .map(|(s, n)| format!("{s}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    match (&facts.evidence.bus, advertised) {
        (Some(bus), Some(adv)) if u64::from(bus.gpus) > adv => not_ready(
            reasons::GPU_NOT_ADVERTISED,
            format!(
                "NFD's PCI scan shows {} NVIDIA GPU(s) ({}) but only {adv} are advertised: a GPU the stack does not serve (driver not bound, device plugin or DRA driver lost it)",
                bus.gpus,
                bus.describe()
            ),
        )
        .via(Source::NodeFeature),
        (Some(bus), Some(adv)) if u64::from(bus.gpus) < adv => not_ready(
            reasons::GPU_MISSING_FROM_BUS,
            format!(
                "{adv} GPU(s) are advertised but NFD's PCI scan shows only {} ({}): a GPU fell off the bus (XID 79?) while the stack still advertises it; drain and reset the node",
                bus.gpus,
                bus.describe()
            ),
        )
        .via(Source::NodeFeature),
        (Some(bus), Some(_)) => Verdict {
            message: format!(
                "{}; matches the {} GPU(s) on the PCI bus{compared}",
                v.message, bus.gpus
            ),
            ..v
        },
        _ => v,
    }
}

/// Every physical-GPU count the node's sources advertise, named by source:
/// GFD's `nvidia.com/gpu.count` (not under the MIG `single` strategy, where it
/// counts MIG devices), the `nvidia.com/gpu` capacity (divided by
/// `nvidia.com/gpu.replicas` under time-slicing or MPS; not under MIG), and the
/// DRA pool's GPUs. Each is compared with NFD's PCI scan.
pub(super) fn advertised_counts(facts: &NodeFacts) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let strategy = facts.gfd.mig_strategy.as_deref().filter(|m| *m != "none");
    if let Some(n) = facts.gfd.count.present()
        && strategy != Some("single")
    {
        out.push((nvidia::GPU_COUNT.to_owned(), u64::from(*n)));
    }
    let replicas = facts
        .labels
        .get(nvidia::GPU_REPLICAS)
        .and_then(|r| r.parse::<u64>().ok())
        .filter(|r| *r >= 1)
        .unwrap_or(1);
    let quantity = facts
        .capacity
        .get(nvidia::GPU_RESOURCE)
        .or_else(|| facts.allocatable.get(nvidia::GPU_RESOURCE))
        .and_then(Field::present)
        .copied();
    if strategy.is_none()
        && let Some(q) = quantity
        && q > 0
    {
        let name = if replicas > 1 {
            format!(
                "{} capacity {q} / {}={replicas}",
                nvidia::GPU_RESOURCE,
                nvidia::GPU_REPLICAS
            )
        } else {
            format!("{} capacity", nvidia::GPU_RESOURCE)
        };
        out.push((name, q.div_ceil(replicas)));
    }
    if let Some(p) = facts.evidence.dra.complete() {
        out.push((
            format!("the DRA pool {}", p.pools.join(", ")),
            u64::try_from(p.physical_gpus(false)).unwrap_or(u64::MAX),
        ));
    }
    out
}

/// Physical GPUs the device plugin stack advertises: GFD's `gpu.count`, else
/// the `nvidia.com/gpu` capacity where it counts whole GPUs (no MIG, no
/// time-slicing replicas). `None` when it cannot be told.
pub(super) fn device_plugin_gpu_count(facts: &NodeFacts) -> Option<u64> {
    if let Some(n) = facts.gfd.count.present() {
        return Some(u64::from(*n));
    }
    let mig = facts
        .gfd
        .mig_strategy
        .as_deref()
        .is_some_and(|m| m != "none");
    let replicas = facts
        .labels
        .get(nvidia::GPU_REPLICAS)
        .is_some_and(|r| r != "1");
    if mig || replicas {
        return None;
    }
    facts
        .capacity
        .get(nvidia::GPU_RESOURCE)
        .and_then(Field::present)
        .copied()
}

/// DevicePlugin under DRA: the newest complete pool must hold enough GPUs
/// without a NoSchedule/NoExecute device taint.
pub(super) fn dra_device_layer(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    gating: Option<&DeviceGatingReport>,
) -> (Verdict, Option<u64>) {
    // Under device gating the node needs its minimum of ready GPUs, bad
    // devices (tainted by their own DeviceTaintRule) not counted.
    let want = match gating {
        Some(g) => g.min_ready_gpus,
        None => usize::try_from(spec.gpu.count.unwrap_or(1)).unwrap_or(usize::MAX),
    };
    let v = match &facts.evidence.dra {
        DraEvidence::NotRead => unknown(
            reasons::DRA_EVIDENCE_UNAVAILABLE,
            "the profile expects DRA but ResourceSlices could not be read (resource.k8s.io/v1 not served, or check ran without --resource-slices)",
        ),
        DraEvidence::NoSlices => not_ready(
            reasons::NO_RESOURCE_SLICE,
            "no ResourceSlice of driver gpu.nvidia.com names this node: is the NVIDIA DRA driver's kubelet plugin running here (kubelet wipes slices at restart until it re-registers)?",
        ),
        DraEvidence::Incomplete {
            pool,
            generation,
            have,
            want,
        } => not_ready(
            reasons::RESOURCE_POOL_INCOMPLETE,
            format!(
                "pool {pool} generation {generation}: {have} of {want} ResourceSlices published: the DRA driver is still publishing (or lost a slice); devices are not judged from a partial pool"
            ),
        ),
        DraEvidence::Complete(p) => {
            let published = p.physical_gpus(false);
            let usable = gating.map_or_else(|| p.physical_gpus(true), |g| g.ready_gpus);
            let shape = format!(
                "{} full GPU, {} MIG, {} VFIO device(s) in pool {}",
                p.count(DeviceKind::Gpu),
                p.count(DeviceKind::Mig),
                p.count(DeviceKind::Vfio),
                p.pools.join(", ")
            );
            // Devices gpuready itself takes out of service (device gating).
            let gated = gating
                .filter(|g| !g.bad.is_empty())
                .map(|g| {
                    format!(
                        "; taken out by gpuready's DeviceTaintRules: {}",
                        g.describe()
                    )
                })
                .unwrap_or_default();
            // Taints that do not block (effect None, the driver's ignored XIDs
            // and `unmonitored`) are reported, never counted against the node.
            let info = p.informational_taints();
            let info_note = if info.is_empty() {
                String::new()
            } else {
                format!("; informational device taints: {}", info.join(", "))
            };
            let lost = p.devices_with_taint(dra::TAINT_GPU_LOST);
            if usable >= want {
                let unmonitored = p.devices_with_taint(dra::TAINT_UNMONITORED);
                let v = if unmonitored.is_empty() {
                    ready(
                        reasons::DRA_DEVICES_AVAILABLE,
                        format!("{usable} GPU(s) usable (need {want}): {shape}{gated}{info_note}"),
                    )
                } else {
                    ready(
                        reasons::DEVICES_UNMONITORED,
                        format!(
                            "{usable} GPU(s) usable (need {want}): {shape}{gated}; the DRA driver cannot watch {} for XIDs ({}): its health taints will not come for them{info_note}",
                            unmonitored.join(", "),
                            dra::TAINT_UNMONITORED
                        ),
                    )
                }
                .via(Source::ResourceSlices);
                return (v, u64::try_from(published).ok());
            }
            if !lost.is_empty() {
                return (
                    not_ready(
                        reasons::GPU_LOST,
                        format!(
                            "the DRA driver reports a GPU lost ({} on {}): a GPU fell off the bus (XID 79); {usable} of {published} GPU(s) usable, {want} needed. The taint clears only when the driver's kubelet plugin restarts: reboot or service the node, then restart the plugin",
                            dra::TAINT_GPU_LOST,
                            lost.join(", ")
                        ),
                    )
                    .via(Source::ResourceSlices),
                    None,
                );
            }
            if gating.is_some() && !gated.is_empty() && published >= want {
                return (
                    not_ready(
                        reasons::TOO_FEW_READY_DEVICES,
                        format!(
                            "{usable} of {published} GPU(s) ready, {want} needed{gated}{}",
                            if p.blocking_taints().is_empty() {
                                String::new()
                            } else {
                                format!("; device taints {}", p.blocking_taints().join(", "))
                            }
                        ),
                    )
                    .via(Source::ResourceSlices),
                    None,
                );
            }
            if published >= want {
                not_ready(
                    reasons::DEVICES_TAINTED,
                    format!(
                        "{usable} of {published} GPU(s) usable, {want} needed: device taints {}",
                        p.blocking_taints().join(", ")
                    ),
                )
            } else {
                not_ready(
                    "TooFewDevices",
                    format!("{published} GPU(s) published < {want} expected: {shape}"),
                )
            }
        }
    };
    (v.via(Source::ResourceSlices), None)
}

/// Whether an extended resource is named the way the sandbox (KubeVirt) device
/// plugin names PCI devices and vGPU types: upper-case PCI-database names such
/// as `nvidia.com/GH100_H200_SXM_141GB`, never `gpu` or `mig-*`.
pub(super) fn is_sandbox_resource(name: &str) -> bool {
    name.strip_prefix("nvidia.com/")
        .is_some_and(|n| !n.is_empty() && !n.chars().any(|c| c.is_ascii_lowercase()))
}

/// DevicePlugin on a vm-passthrough / vm-vgpu node: the sandbox device plugin's
/// resources, never the container driver's labels.
pub(super) fn sandbox_layer(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
) -> (Verdict, Option<u64>) {
    let want = u64::from(spec.gpu.count.unwrap_or(1));
    let chosen: Vec<(&String, u64)> = facts
        .allocatable
        .iter()
        .filter(|(k, _)| {
            if spec.sandbox_resources.is_empty() {
                is_sandbox_resource(k)
            } else {
                spec.sandbox_resources.contains(k)
            }
        })
        .filter_map(|(k, v)| v.present().map(|n| (k, *n)))
        .collect();
    let total: u64 = chosen.iter().map(|(_, n)| n).sum();
    let named = if spec.sandbox_resources.is_empty() {
        "a sandbox device plugin resource (nvidia.com/<PCI device name>)".to_owned()
    } else {
        spec.sandbox_resources.join(", ")
    };
    let v = if chosen.is_empty() {
        not_ready(
            reasons::SANDBOX_RESOURCE_MISSING,
            format!(
                "workload {}: {named} is not allocatable: is the sandbox device plugin running, and are the GPUs bound to vfio-pci{}?",
                spec.workload.label_value(),
                if spec.workload == Workload::VmVgpu {
                    " (vGPU: mediated devices created by the vGPU device manager)"
                } else {
                    ""
                }
            ),
        )
    } else if total < want {
        not_ready(
            "TooFewDevices",
            format!(
                "{} allocatable: {total} < {want} expected",
                chosen
                    .iter()
                    .map(|(k, n)| format!("{k}={n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    } else {
        ready(
            reasons::SANDBOX_RESOURCES,
            format!(
                "{} allocatable (need {want})",
                chosen
                    .iter()
                    .map(|(k, n)| format!("{k}={n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    };
    // Passthrough hands out whole GPUs, so its total is a GPU count; a vGPU
    // host's mediated devices are not.
    let advertised =
        (spec.workload == Workload::VmPassthrough && !chosen.is_empty()).then_some(total);
    (v.via(Source::SandboxResources), advertised)
}

/// MIG profile names compare with `+` and `.` alike: nvidia-smi and the DRA
/// driver write `1g.18gb+me`, GFD's labels `1g.18gb.me`.
fn mig_key(profile: &str) -> String {
    profile.replace('+', ".")
}

/// MIG devices per profile, from the DRA pool (its `mig` devices' `profile`
/// attribute) when the node is judged by DRA, else from GFD's labels: the
/// mixed strategy's `nvidia.com/mig-<profile>.count`, or the single strategy's
/// relabelling (`gpu.product` ending in `-MIG-<profile>`, `gpu.count` MIG devices).
fn mig_devices(facts: &NodeFacts, dra: bool) -> (std::collections::BTreeMap<String, u64>, String) {
    let mut out = std::collections::BTreeMap::new();
    if dra && let Some(p) = facts.evidence.dra.complete() {
        for d in p.devices.iter().filter(|d| d.kind == DeviceKind::Mig) {
            if let Some(prof) = &d.mig_profile {
                *out.entry(mig_key(prof)).or_insert(0) += 1;
            }
        }
        return (out, format!("the DRA pool {}", p.pools.join(", ")));
    }
    for (k, v) in &facts.labels {
        if let Some(prof) = k
            .strip_prefix(nvidia::MIG_LABEL_PREFIX)
            .and_then(|r| r.strip_suffix(nvidia::MIG_COUNT_SUFFIX))
            && let Ok(n) = v.parse::<u64>()
        {
            out.insert(mig_key(prof), n);
        }
    }
    if facts.gfd.mig_strategy.as_deref() == Some("single")
        && let Some(product) = facts.labels.get(nvidia::GPU_PRODUCT)
        && let Some((_, prof)) = product.rsplit_once("-MIG-")
        && let Some(n) = facts.gfd.count.present()
    {
        out.insert(mig_key(prof), u64::from(*n));
    }
    (out, "GFD's MIG labels".to_owned())
}

/// The MIG geometry the profile needs (`spec.mig`): mig-manager's config and
/// state labels, then the MIG devices per profile. `Ok(note)` when it holds.
fn mig_geometry(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    dra: bool,
) -> Result<String, Verdict> {
    let Some(m) = &spec.mig else {
        return Ok(String::new());
    };
    let label = |k: &str| facts.labels.get(k).map(String::as_str);
    let state = label(nvidia::MIG_CONFIG_STATE);
    if let Some(want) = &m.config {
        match label(nvidia::MIG_CONFIG) {
            Some(c) if c == want => {}
            other => {
                return Err(not_ready(
                    reasons::MIG_CONFIG_MISMATCH,
                    format!(
                        "{}={} but the profile needs {want}: label the node {}={want} and let mig-manager apply it",
                        nvidia::MIG_CONFIG,
                        other.unwrap_or("(absent)"),
                        nvidia::MIG_CONFIG
                    ),
                )
                .via(Source::MigManagerLabels));
            }
        }
    }
    // Whatever layout is asked for, a node mid-reconfiguration is not ready.
    if m.config.is_some() || state.is_some() {
        let tagged = |v: Verdict| v.via(Source::MigManagerLabels);
        let config = label(nvidia::MIG_CONFIG).unwrap_or("(absent)");
        match state {
            Some("success") => {}
            Some("pending") => {
                return Err(tagged(not_ready(
                    reasons::MIG_CONFIG_PENDING,
                    format!(
                        "mig-manager has not applied {}={config} yet ({}=pending)",
                        nvidia::MIG_CONFIG,
                        nvidia::MIG_CONFIG_STATE
                    ),
                )));
            }
            Some("rebooting") => {
                return Err(tagged(not_ready(
                    reasons::MIG_CONFIG_REBOOTING,
                    format!(
                        "mig-manager is rebooting the node to apply {}={config} ({}=rebooting)",
                        nvidia::MIG_CONFIG,
                        nvidia::MIG_CONFIG_STATE
                    ),
                )));
            }
            Some("failed") => {
                return Err(tagged(not_ready(
                    reasons::MIG_CONFIG_FAILED,
                    format!(
                        "mig-manager failed to apply {}={config} ({}=failed): read the nvidia-mig-manager pod's log on this node",
                        nvidia::MIG_CONFIG,
                        nvidia::MIG_CONFIG_STATE
                    ),
                )));
            }
            other => {
                return Err(tagged(unknown(
                    reasons::MIG_CONFIG_STATE_UNKNOWN,
                    format!(
                        "{}={}: is mig-manager running on this node?",
                        nvidia::MIG_CONFIG_STATE,
                        other.unwrap_or("(absent)")
                    ),
                )));
            }
        }
    }
    if m.devices.is_empty() {
        return Ok(format!(
            "; MIG config {} applied",
            label(nvidia::MIG_CONFIG).unwrap_or("-")
        ));
    }
    let (have, source) = mig_devices(facts, dra);
    let short: Vec<String> = m
        .devices
        .iter()
        .filter_map(|(p, want)| {
            let n = have.get(&mig_key(p)).copied().unwrap_or(0);
            (n < u64::from(*want)).then(|| format!("{p}: {n} < {want}"))
        })
        .collect();
    if !short.is_empty() {
        return Err(not_ready(
            reasons::MIG_DEVICES_MISSING,
            format!("{source} offers too few MIG devices: {}", short.join(", ")),
        ));
    }
    Ok(format!(
        "; MIG devices from {source}: {}",
        m.devices
            .keys()
            .map(|p| format!("{p} ×{}", have.get(&mig_key(p)).copied().unwrap_or(0)))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Profile, then the bus: NFD's PCI scan can prove a count short even when
/// the labels still claim it (a GPU lost after GFD last ran). Then the MIG
/// geometry the profile asks for.
pub(super) fn profile_with_bus(spec: &GpuNodeProfileSpec, facts: &NodeFacts, dra: bool) -> Verdict {
    let v = profile_layer(spec, facts);
    if v.status != Status::Ready {
        return v;
    }
    let v = match mig_geometry(spec, facts, dra) {
        // The MIG layout is a GPU expectation of its own.
        Ok(note) if !note.is_empty() && v.reason == "NoExpectations" => {
            ready("ProfileMatches", note.trim_start_matches("; ").to_owned())
        }
        Ok(note) => Verdict {
            message: format!("{}{note}", v.message),
            ..v
        },
        Err(bad) => return bad,
    };
    let Some(bus) = &facts.evidence.bus else {
        return v;
    };
    if let Some(min) = spec.gpu.count
        && bus.gpus < min
    {
        return not_ready(
            "TooFewGpus",
            format!(
                "NFD's PCI scan shows {} NVIDIA GPU(s) < {min} expected ({})",
                bus.gpus,
                bus.describe()
            ),
        )
        .via(Source::NodeFeature);
    }
    if bus.models.len() > 1 {
        return Verdict {
            message: format!(
                "{}; note: {} GPU models on the bus ({}): GFD labels only one of them",
                v.message,
                bus.models.len(),
                bus.describe()
            ),
            ..v
        };
    }
    v
}
