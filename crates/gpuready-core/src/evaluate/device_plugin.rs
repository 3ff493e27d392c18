//! The DevicePlugin layer: the advertisement the profile's evidence selects —
//! allocatable device-plugin resources, the DRA pool, or the sandbox plugin of a
//! VM-workload node — then the GPU count on the PCI bus against it.

use gpuready_api::keys::{dra, nvidia, reasons};
use gpuready_api::{GpuNodeProfileSpec, Workload};

use super::verdict::{Verdict, mig_strategy_invalid, not_ready, ready, unknown};
use crate::devices::DeviceGatingReport;
use crate::evidence::{DeviceKind, DraEvidence, Source};
use crate::facts::NodeFacts;
use crate::field::Field;
use crate::gfd::SingleMig;
use crate::report::Status;

/// The allocatable quantities the device plugin must advertise.
enum Need<'a> {
    Resource(&'a str, u64),
    AnyMig,
}

fn device_plugin_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    // Under GFD's single strategy `nvidia.com/gpu` counts MIG devices, so it
    // is held to the MIG devices GFD counts, never to a GPU count.
    let mig_single = facts.gfd.mig_single.as_ref();
    if let Some(SingleMig::Invalid { model }) = mig_single {
        return mig_strategy_invalid(model).via(Source::GfdLabels);
    }
    let default_count = match (mig_single, facts.gfd.count.present()) {
        (Some(_), Some(n)) => u64::from(*n).max(1),
        _ => u64::from(spec.gpu.count.unwrap_or(1)),
    };
    let needs: Vec<Need> = if !spec.resources.is_empty() {
        spec.resources
            .iter()
            .map(|(k, v)| Need::Resource(k.as_str(), u64::from(*v)))
            .collect()
    } else if mixed_with_mig_devices(facts) {
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
                                "{name} is not advertised: the device plugin is not running or has not registered with kubelet{}",
                                if facts.gfd.mig_strategy.as_deref() == Some("mixed") {
                                    " (MIG strategy mixed, and GFD labels no MIG device: a GPU with MIG disabled is served as nvidia.com/gpu, one with MIG enabled only as its MIG devices, so a GPU in MIG mode without MIG devices is served as nothing: check the MIG manager's config)"
                                } else {
                                    ""
                                }
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
                        "{name}: {} allocatable (need {want}{})",
                        a.unwrap_or(0),
                        match mig_single {
                            Some(SingleMig::Partitioned { profile, .. })
                                if name == nvidia::GPU_RESOURCE =>
                            {
                                format!(
                                    ": {} counts MIG devices ({profile}) under GFD's single strategy",
                                    nvidia::GPU_COUNT
                                )
                            }
                            _ => String::new(),
                        }
                    )),
                }
            }
        }
    }
    ready("Allocatable", ok.join("; "))
}

/// Under GFD's `mixed` strategy, whether the node's GPUs are (partly) in MIG
/// mode, so MIG devices are what it must advertise. The device plugin serves a
/// GPU with MIG disabled as a whole `nvidia.com/gpu` under `mixed` too, and
/// only a MIG-enabled one as its `nvidia.com/mig-<profile>` devices
/// (k8s-device-plugin v0.20.0 `internal/rm/device_map.go`,
/// `buildGPUDeviceMap` skips only MIG-enabled GPUs); GFD labels the full
/// GPUs as usual and adds `nvidia.com/mig-<profile>.*` labels only for MIG
/// devices that exist (`internal/lm/mig-strategy.go`,
/// `newMigStrategyMixedLabeler`). So MIG is in use where GFD labels a MIG
/// device or one is allocatable; elsewhere (every GPU with MIG off) the node
/// is judged by `nvidia.com/gpu` like any other. A MIG resource left in the
/// node's capacity at 0 does not count: kubelet keeps a resource a device
/// plugin stopped serving at 0 rather than removing it.
fn mixed_with_mig_devices(facts: &NodeFacts) -> bool {
    if facts.gfd.mig_strategy.as_deref() != Some("mixed") {
        return false;
    }
    let labelled = facts.labels.keys().any(|k| {
        k.strip_prefix(nvidia::MIG_LABEL_PREFIX)
            .is_some_and(|rest| rest.ends_with(nvidia::MIG_COUNT_SUFFIX))
    });
    let allocatable = facts.allocatable.iter().any(|(k, v)| {
        k.starts_with(nvidia::MIG_RESOURCE_PREFIX) && v.present().is_some_and(|n| *n > 0)
    });
    labelled || allocatable
}

/// DevicePlugin: the advertisement the profile's evidence selects (device plugin, DRA pool, sandbox plugin), then the GPU
/// count on the PCI bus against the count advertised.
pub(super) fn device_plugin_evidence(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    dra: bool,
    gating: Option<&DeviceGatingReport>,
) -> Verdict {
    // `advertised`: the physical-GPU count the layer's own source gives, and
    // that source's name for the messages.
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
    let mut compared: Vec<String> = counts.iter().map(|(s, n)| format!("{s}: {n}")).collect();
    if let (Some(SingleMig::Partitioned { profile, .. }), Some(n)) =
        (&facts.gfd.mig_single, facts.gfd.count.present())
    {
        compared.push(format!(
            "{}={n} counts {profile} MIG devices under GFD's single strategy, not GPUs: not compared",
            nvidia::GPU_COUNT
        ));
    }
    let compared = if compared.is_empty() {
        String::new()
    } else {
        format!(" ({})", compared.join(", "))
    };
    match (&facts.evidence.bus, advertised) {
        (Some(bus), Some((source, adv))) if u64::from(bus.gpus) > adv => not_ready(
            reasons::GPU_NOT_ADVERTISED,
            format!(
                "NFD's PCI scan shows {} NVIDIA GPU(s) ({}) but only {adv} are advertised ({source}): a GPU the stack does not serve (driver not bound, device plugin or DRA driver lost it)",
                bus.gpus,
                bus.describe()
            ),
        )
        .via(Source::NodeFeature),
        (Some(bus), Some((source, adv))) if u64::from(bus.gpus) < adv => not_ready(
            reasons::GPU_MISSING_FROM_BUS,
            format!(
                "{adv} GPU(s) are advertised ({source}) but NFD's PCI scan shows only {} ({}): a GPU fell off the bus (XID 79?) while the stack still advertises it; drain and reset the node",
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
        // No physical count of the layer's own to compare (MIG): say what the
        // bus holds and what was compared, never that it matches.
        (Some(bus), None) if !compared.is_empty() => Verdict {
            message: format!(
                "{}; NFD's PCI scan shows {} GPU(s){compared}",
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
fn advertised_counts(facts: &NodeFacts) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let strategy = facts.gfd.mig_strategy.as_deref().filter(|m| *m != "none");
    if let Some(n) = facts.gfd.count.present()
        && !facts.gfd.count_is_mig_devices()
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

/// Physical GPUs the device plugin stack advertises, with the source: GFD's
/// `gpu.count` (not under the single strategy's relabelling, where it counts
/// MIG devices), else the `nvidia.com/gpu` capacity where it counts whole GPUs
/// (no MIG, no time-slicing replicas). `None` when it cannot be told.
fn device_plugin_gpu_count(facts: &NodeFacts) -> Option<(String, u64)> {
    if facts.gfd.count_is_mig_devices() {
        return None;
    }
    if let Some(n) = facts.gfd.count.present() {
        return Some((nvidia::GPU_COUNT.to_owned(), u64::from(*n)));
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
        .map(|n| (format!("{} capacity", nvidia::GPU_RESOURCE), *n))
}

/// DevicePlugin under DRA: the newest complete pool must hold enough GPUs
/// without a NoSchedule/NoExecute device taint.
fn dra_device_layer(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    gating: Option<&DeviceGatingReport>,
) -> (Verdict, Option<(String, u64)>) {
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
                return (
                    v,
                    u64::try_from(published)
                        .ok()
                        .map(|n| (format!("the DRA pool {}", p.pools.join(", ")), n)),
                );
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
                let taints = p.blocking_taints();
                // The driver's XID taints are sticky (its plugin clears them on
                // restart only; removing them is an open issue of the driver,
                // #1455): say so, since neither gpuready nor the repair
                // annotation touches them.
                let sticky = if taints.iter().any(|t| t.contains(dra::TAINT_XID)) {
                    format!(
                        "; the DRA driver's {} taints are sticky: they stay until its kubelet plugin on the node restarts (gpuready never edits them, and the repair annotation does not clear them): after the repair, restart that plugin",
                        dra::TAINT_XID
                    )
                } else {
                    String::new()
                };
                not_ready(
                    reasons::DEVICES_TAINTED,
                    format!(
                        "{usable} of {published} GPU(s) usable, {want} needed: device taints {}{sticky}",
                        taints.join(", ")
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
fn is_sandbox_resource(name: &str) -> bool {
    name.strip_prefix("nvidia.com/")
        .is_some_and(|n| !n.is_empty() && !n.chars().any(|c| c.is_ascii_lowercase()))
}

/// DevicePlugin on a vm-passthrough / vm-vgpu node: the sandbox device plugin's
/// resources, never the container driver's labels.
fn sandbox_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> (Verdict, Option<(String, u64)>) {
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
    // Both the short and the enough verdict list the chosen resources alike.
    let listed = chosen
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect::<Vec<_>>()
        .join(", ");
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
            format!("{listed} allocatable: {total} < {want} expected"),
        )
    } else {
        ready(
            reasons::SANDBOX_RESOURCES,
            format!("{listed} allocatable (need {want})"),
        )
    };
    // Passthrough hands out whole GPUs, so its total is a GPU count; a vGPU
    // host's mediated devices are not.
    let advertised = (spec.workload == Workload::VmPassthrough && !chosen.is_empty())
        .then(|| ("the sandbox device plugin's resources".to_owned(), total));
    (v.via(Source::SandboxResources), advertised)
}
