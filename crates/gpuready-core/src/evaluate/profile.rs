//! The Profile layer: product, memory, compute capability, family and count
//! against the profile's GPU expectations, then the PCI bus count and the MIG
//! geometry.

use gpuready_api::keys::{dra, nvidia, reasons};
use gpuready_api::{Family, GpuNodeProfileSpec};

use super::verdict::{
    Verdict, malformed, mig_strategy_invalid, missing, named, not_ready, ready, unknown,
};
use crate::evidence::{DeviceKind, Source};
use crate::facts::NodeFacts;
use crate::field::Field;
use crate::gfd::{FamilyLabel, GfdFacts, SingleMig};
use crate::product;
use crate::report::Status;
use crate::version::MajorMinor;

fn profile_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    let mut met = Vec::new();
    match profile_rules(spec, &facts.gfd, &mut met) {
        Ok(()) => profile_count(&spec.gpu, facts, met),
        Err(v) => v,
    }
}

/// The MIG product, memory, compute capability and family rules in turn,
/// each adding what it matched to `met`; `Err` is the first the node fails.
fn profile_rules(
    spec: &GpuNodeProfileSpec,
    gfd: &GfdFacts,
    met: &mut Vec<String>,
) -> Result<(), Verdict> {
    let g = &spec.gpu;
    if let Some(SingleMig::Invalid { model }) = &gfd.mig_single {
        return Err(mig_strategy_invalid(model));
    }
    let partitioned = match &gfd.mig_single {
        Some(SingleMig::Partitioned { model, profile }) => Some((model.as_str(), profile.as_str())),
        _ => None,
    };
    let r = Reading {
        spec,
        gfd,
        partitioned,
    };
    r.product(met)?;
    r.memory(met)?;
    r.compute(met)?;
    if !g.families.is_empty() || !g.excluded_families.is_empty() {
        r.family(met)?;
    }
    Ok(())
}

/// What the profile rules read: the profile, GFD's facts, and GFD's single
/// MIG strategy read once (`partitioned`: the model and its MIG profile).
struct Reading<'a> {
    spec: &'a GpuNodeProfileSpec,
    gfd: &'a GfdFacts,
    partitioned: Option<(&'a str, &'a str)>,
}

impl Reading<'_> {
    /// The product against the profile's, read through GFD's single MIG strategy
    /// (`partitioned`: its model and MIG profile).
    fn product(&self, met: &mut Vec<String>) -> Result<(), Verdict> {
        let (spec, gfd, partitioned) = (self.spec, self.gfd, self.partitioned);
        let g = &spec.gpu;
        // GFD's single strategy names the product `<model>-MIG-<profile>`: a
        // profile listing the model matches it when it declares a MIG geometry; a
        // profile without one asks for full GPUs, unless its products name the
        // MIG product itself.
        let full_name_listed = gfd
            .product
            .as_deref()
            .is_some_and(|p| product::matches_any(&g.products, p));
        if let Some((model, profile)) = partitioned
            && spec.mig.is_none()
            && !full_name_listed
        {
            return Err(not_ready(
                reasons::MIG_PARTITIONED,
                format!(
                    "{}={} and {}={}: GFD's single strategy shows the {model} GPUs partitioned into {profile} MIG devices, but the profile declares no mig geometry, so it asks for full GPUs: add mig (e.g. mig: {{devices: {{{profile}: N}}}}) to the profile for a MIG pool, or disable MIG on the node ({}=all-disabled)",
                    nvidia::GPU_PRODUCT,
                    gfd.product.as_deref().unwrap_or_default(),
                    nvidia::GPU_COUNT,
                    gfd.count
                        .present()
                        .map_or_else(|| "(absent)".to_owned(), ToString::to_string),
                    nvidia::MIG_CONFIG
                ),
            ));
        }
        if g.products.is_empty() {
            return Ok(());
        }
        let Some(p) = &gfd.product else {
            return Err(missing(gfd, nvidia::GPU_PRODUCT));
        };
        match partitioned {
            _ if full_name_listed => met.push(p.clone()),
            Some((model, profile)) if product::matches_any(&g.products, model) => {
                met.push(format!("{model} (MIG {profile}, GFD's single strategy)"));
            }
            Some((model, _)) => {
                return Err(not_ready(
                    "ProductMismatch",
                    format!(
                        "{p} ({model} partitioned by GFD's single MIG strategy) is not one of {}",
                        g.products.join(", ")
                    ),
                ));
            }
            None => {
                return Err(not_ready(
                    "ProductMismatch",
                    format!("{p} is not one of {}", g.products.join(", ")),
                ));
            }
        }
        Ok(())
    }

    /// The card's memory against the profile's minimum (not compared on a MIG
    /// device's memory).
    fn memory(&self, met: &mut Vec<String>) -> Result<(), Verdict> {
        let (g, gfd, partitioned) = (&self.spec.gpu, self.gfd, self.partitioned);
        if let (Some(_), Some((_, profile))) = (g.min_memory_mib, partitioned) {
            // One MIG device's memory is no minimum of the card's.
            met.push(format!(
            "memory not compared ({}={} is one {profile} MIG device's under GFD's single strategy)",
            nvidia::GPU_MEMORY,
            gfd.memory_mib
                .present()
                .map_or_else(|| "(absent)".to_owned(), ToString::to_string)
        ));
        } else if let Some(min) = g.min_memory_mib {
            match &gfd.memory_mib {
                Field::Absent => {
                    return Err(missing(gfd, nvidia::GPU_MEMORY));
                }
                Field::Malformed(m) => return Err(malformed(m)),
                Field::Present(mib) if *mib < u64::from(min) => {
                    return Err(not_ready(
                        "MemoryTooSmall",
                        format!("{mib} MiB < {min} MiB required"),
                    ));
                }
                Field::Present(mib) => met.push(format!("{mib} MiB")),
            }
        }
        Ok(())
    }

    /// The compute capability against the profile's minimum.
    fn compute(&self, met: &mut Vec<String>) -> Result<(), Verdict> {
        let (g, gfd) = (&self.spec.gpu, self.gfd);
        let Some(min) = &g.min_compute_capability else {
            return Ok(());
        };
        let Ok(min) = MajorMinor::parse(min) else {
            return Err(unknown(
                "InvalidProfile",
                format!("spec.gpu.minComputeCapability {min:?} is not major.minor"),
            ));
        };
        match &gfd.compute {
            Field::Absent => Err(missing(gfd, nvidia::GPU_COMPUTE_MAJOR)),
            Field::Malformed(m) => Err(malformed(m)),
            Field::Present(cc) if *cc < min => Err(not_ready(
                "ComputeCapabilityTooLow",
                format!("compute capability {cc} < {min} required"),
            )),
            Field::Present(cc) => {
                met.push(format!("compute {cc}"));
                Ok(())
            }
        }
    }

    /// The family against the profile's allowed and excluded families.
    fn family(&self, met: &mut Vec<String>) -> Result<(), Verdict> {
        let g = &self.spec.gpu;
        let Some(family) = self.known_family(met)? else {
            return Ok(());
        };
        if g.excluded_families.contains(&family) {
            return Err(not_ready(
                "FamilyExcluded",
                format!("{family} is excluded by the profile"),
            ));
        }
        if !g.families.is_empty() && !g.families.contains(&family) {
            let allowed: Vec<&str> = g.families.iter().map(|f| f.as_str()).collect();
            return Err(not_ready(
                "FamilyNotAllowed",
                format!("{family} is not one of {}", allowed.join(", ")),
            ));
        }
        met.push(family.to_string());
        Ok(())
    }

    /// The node's family when gpuready knows it; `Ok(None)` for a family newer
    /// than this gpuready that the profile lets pass (noted in `met`).
    fn known_family(&self, met: &mut Vec<String>) -> Result<Option<Family>, Verdict> {
        let (g, gfd) = (&self.spec.gpu, self.gfd);
        match (gfd.effective_family(), &gfd.family, &gfd.compute) {
            (Some(f), _, _) => Ok(Some(f)),
            (None, Field::Malformed(m), _) | (None, _, Field::Malformed(m)) => Err(malformed(m)),
            (None, Field::Present(FamilyLabel::Undefined), cc) => {
                if gfd.from_pool.is_some() {
                    return Err(unknown(
                        reasons::DRA_ATTRIBUTE_MISSING,
                        format!(
                            "{} names no architecture this gpuready knows, so the family rule cannot be checked",
                            named(gfd, nvidia::GPU_FAMILY)
                        ),
                    ));
                }
                Err(not_ready(
                    reasons::MALFORMED_LABEL,
                    format!(
                        "{}=undefined{}: GFD has no family name for this card (a GFD release older than the card?), so the family rule cannot be checked",
                        nvidia::GPU_FAMILY,
                        cc.present()
                            .map(|c| format!(" (compute {c})"))
                            .unwrap_or_default()
                    ),
                ))
            }
            // A family newer than this gpuready: not excluded, and not among the
            // allowed ones (which can only name families gpuready knows).
            (None, Field::Present(FamilyLabel::Unrecognized(name)), _) => {
                if !g.families.is_empty() {
                    let allowed: Vec<&str> = g.families.iter().map(|f| f.as_str()).collect();
                    return Err(not_ready(
                        "FamilyNotAllowed",
                        format!("{name} is not one of {}", allowed.join(", ")),
                    ));
                }
                met.push(name.clone());
                Ok(None)
            }
            _ => Err(missing(gfd, nvidia::GPU_FAMILY)),
        }
    }
}

/// The last Profile check (GPU count), then the verdict over what matched.
fn profile_count(
    g: &gpuready_api::GpuExpectation,
    facts: &NodeFacts,
    mut met: Vec<String>,
) -> Verdict {
    let gfd = &facts.gfd;
    if let (Some(_), Some(SingleMig::Partitioned { profile, .. })) = (g.count, &gfd.mig_single) {
        // GFD's count is of MIG devices here: the GPUs are counted on the bus.
        met.push(format!(
            "{} × {profile} MIG devices ({} under GFD's single strategy; {})",
            gfd.count
                .present()
                .map_or_else(|| "?".to_owned(), ToString::to_string),
            nvidia::GPU_COUNT,
            match &facts.evidence.bus {
                Some(bus) => format!("{} GPU(s) on NFD's PCI scan", bus.gpus),
                None => "the GPU count needs NFD's PCI scan, not read".to_owned(),
            }
        ));
    } else if let Some(min) = g.count {
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
    if let Some(SingleMig::Partitioned { profile, .. }) = &facts.gfd.mig_single
        && let Some(n) = facts.gfd.count.present()
    {
        out.insert(mig_key(profile), u64::from(*n));
    }
    (out, "GFD's MIG labels".to_owned())
}

/// mig-manager's config and state labels against the profile's `mig`: a node
/// being re-partitioned is not ready, whatever its other labels (they still
/// describe the old layout) say.
fn mig_state(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Result<(), Verdict> {
    let Some(m) = &spec.mig else {
        return Ok(());
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
    Ok(())
}

/// The MIG devices the profile needs (`spec.mig`), once the state holds.
/// `Ok(note)` when they are there.
fn mig_geometry(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    dra: bool,
) -> Result<String, Verdict> {
    let Some(m) = &spec.mig else {
        return Ok(String::new());
    };
    let label = |k: &str| facts.labels.get(k).map(String::as_str);
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

/// `gpu.maxGpusPerNumaNode` against the DRA pool's
/// `resource.kubernetes.io/numaNode` (an `int` or an `ints` list). GFD
/// publishes no NUMA placement, so a device-plugin node is not judged by it
/// (the message says so). `Ok(note)` when it holds or does not apply.
fn numa_rule(spec: &GpuNodeProfileSpec, facts: &NodeFacts, dra: bool) -> Result<String, Verdict> {
    let Some(max) = spec.gpu.max_gpus_per_numa_node else {
        return Ok(String::new());
    };
    let Some(pool) = facts.evidence.dra.complete().filter(|_| dra) else {
        return Ok(format!(
            "; GPUs per NUMA node not judged: {} comes from the DRA driver's ResourceSlices, and this node is judged by the device plugin",
            dra::ATTR_NUMA_NODE
        ));
    };
    let (per_node, unplaced) = pool.gpus_per_numa_node();
    let pools = pool.pools.join(", ");
    if !unplaced.is_empty() {
        return Err(unknown(
            reasons::DRA_ATTRIBUTE_MISSING,
            format!(
                "the ResourceSlice attribute {} (pool {pools}) is missing on {}: the DRA driver publishes it from v0.5 (main), so gpu.maxGpusPerNumaNode cannot be checked",
                dra::ATTR_NUMA_NODE,
                unplaced.join(", ")
            ),
        )
        .via(Source::ResourceSlices));
    }
    let spread = per_node
        .iter()
        .map(|(n, g)| format!("NUMA node {n}: {g}"))
        .collect::<Vec<_>>()
        .join(", ");
    if let Some((node, gpus)) = per_node.iter().find(|(_, g)| **g > max as usize) {
        return Err(not_ready(
            reasons::TOO_MANY_GPUS_PER_NUMA_NODE,
            format!(
                "NUMA node {node} holds {gpus} GPU(s), more than the {max} gpu.maxGpusPerNumaNode allows ({}, pool {pools}: {spread}): a BIOS NUMA setting (NPS/SNC, NUMA off) or the platform put them together; compare numactl -H and the board's topology, fix the BIOS setting and reboot",
                dra::ATTR_NUMA_NODE
            ),
        )
        .via(Source::ResourceSlices));
    }
    Ok(format!("; GPUs per NUMA node at most {max} ({spread})"))
}

/// Profile, then the bus: NFD's PCI scan can prove a count short even when
/// the labels still claim it (a GPU lost after GFD last ran). Then the MIG
/// geometry the profile asks for.
pub(super) fn profile_with_bus(spec: &GpuNodeProfileSpec, facts: &NodeFacts, dra: bool) -> Verdict {
    // mig-manager's state first: mid-reconfiguration the product and counts
    // GFD labelled describe the layout being replaced.
    if let Err(state) = mig_state(spec, facts) {
        return state;
    }
    let v = profile_layer(spec, facts);
    if v.status != Status::Ready {
        return v;
    }
    // The MIG layout and the NUMA placement are GPU expectations of their own.
    let v = match noted(v, mig_geometry(spec, facts, dra)) {
        Ok(v) => v,
        Err(bad) => return bad,
    };
    let v = match noted(v, numa_rule(spec, facts, dra)) {
        Ok(v) => v,
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

/// A ready verdict with a rule's note added (`Ok("; …")`), or the rule's
/// failure. A note on a profile that expected nothing else is the verdict.
fn noted(v: Verdict, rule: Result<String, Verdict>) -> Result<Verdict, Verdict> {
    let note = rule?;
    if !note.is_empty() && v.reason == "NoExpectations" {
        return Ok(ready(
            "ProfileMatches",
            note.trim_start_matches("; ").to_owned(),
        ));
    }
    Ok(Verdict {
        message: format!("{}{note}", v.message),
        ..v
    })
}
