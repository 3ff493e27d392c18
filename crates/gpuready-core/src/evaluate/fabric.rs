//! The Fabric layer: multi-node NVLink readiness for profiles that ask for it
//! (`spec.fabric`). The node must sit in an expected NVLink clique (GFD's
//! `nvidia.com/gpu.clique`, `<cluster UUID>.<clique ID>`), every GPU's fabric
//! registration must have completed with success in the same clique (the
//! probe's NVML fabric state: GFD labels the clique of the GPUs that did
//! register and leaves a failed one out), and the driver must be new enough
//! for IMEX.

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::ProbePolicy;
use gpuready_api::keys::{fabric as reasons, nvidia};
use gpuready_api::probe::FabricPhase;
use gpuready_api::validate::parse_clique;

use super::verdict::{Verdict, not_ready, ready, unknown};
use crate::clique_groups::{GroupTally, Standing};
use crate::evidence::Source;
use crate::facts::NodeFacts;
use crate::probe::ProbeEvidence;
use crate::version::DriverVersion;

/// What the NVIDIA DRA driver's ComputeDomains need when IMEX daemons are
/// addressed by DNS name (its `IMEXDaemonsWithDNSNames` gate, on by default).
pub const DEFAULT_MIN_IMEX_DRIVER: &str = "570.158.01";

pub(super) fn applies(spec: &GpuNodeProfileSpec) -> bool {
    spec.fabric.is_some()
}

pub(super) fn fabric_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    let Some(f) = &spec.fabric else {
        return ready(reasons::FABRIC_READY, "no fabric expectation");
    };
    // The clique label: present, well-formed, and one the profile expects.
    let Some(label) = facts.labels.get(nvidia::GPU_CLIQUE) else {
        return not_ready(
            reasons::CLIQUE_LABEL_MISSING,
            format!(
                "no {} label: GFD writes it only when the GPUs are attached to an NVLink fabric (registration completed with success) and agree on one cluster UUID and clique ID; check nvidia-fabricmanager / the NVLink switch trays, and that GFD runs on the node",
                nvidia::GPU_CLIQUE
            ),
        )
        .via(Source::GfdLabels);
    };
    let Some((cluster, clique)) = parse_clique(label) else {
        return not_ready(
            reasons::CLIQUE_LABEL_MALFORMED,
            format!(
                "{}={label:?} is not <cluster UUID>.<clique ID> as GFD writes it",
                nvidia::GPU_CLIQUE
            ),
        )
        .via(Source::GfdLabels);
    };
    if !f.cliques.is_empty() && !f.cliques.iter().any(|c| c == label) {
        return not_ready(
            reasons::UNEXPECTED_CLIQUE,
            format!(
                "{}={label} is not the profile's NVLink domain ({}): the node's GPUs registered with another NVLink partition or cluster; check the fabric manager's partition and the rack's NVLink switch trays, or fix fabric.cliques",
                nvidia::GPU_CLIQUE,
                f.cliques.join(", ")
            ),
        )
        .via(Source::GfdLabels);
    }
    // The node's group: one clique for all of it.
    let group = match &f.group_by_label {
        Some(key) => match group_rule(key, label, f, facts) {
            Ok(note) => Some(note),
            Err(v) => return v,
        },
        None => None,
    };
    // The driver IMEX needs.
    let min = f
        .min_driver_version
        .as_deref()
        .unwrap_or(DEFAULT_MIN_IMEX_DRIVER);
    let report = match &facts.probe {
        Some(ProbeEvidence::Report(r)) => Some(r.as_ref()),
        _ => None,
    };
    let driver = facts.gfd.driver.present().cloned().or_else(|| {
        report
            .and_then(|r| r.driver_version.as_deref())
            .and_then(|d| DriverVersion::parse(d).ok())
    });
    if let (Ok(min), Some(d)) = (DriverVersion::parse(min), &driver)
        && *d < min
    {
        return not_ready(
            reasons::DRIVER_TOO_OLD_FOR_IMEX,
            format!(
                "driver {d} < {min}: IMEX daemons with DNS names (the NVIDIA DRA driver's ComputeDomains) need {min} or later; upgrade the driver"
            ),
        );
    }
    // Every GPU's fabric registration, from the probe.
    let Some(report) = report else {
        let message = format!(
            "{}={label} (cluster {cluster}, clique {clique}) but no probe report: the label does not show that every GPU registered with the fabric (GFD leaves a failed GPU out); run gpuready probe on the node",
            nvidia::GPU_CLIQUE
        );
        return match f.when_probe_missing {
            ProbePolicy::Ignore => ready(
                reasons::FABRIC_READY,
                format!(
                    "{}={label}; driver {}; per-GPU fabric state not read (no probe report, fabric.whenProbeMissing Ignore){}",
                    nvidia::GPU_CLIQUE,
                    driver.map_or_else(|| "unknown".to_owned(), |d| d.to_string()),
                    group.map(|g| format!("; {g}")).unwrap_or_default()
                ),
            ),
            ProbePolicy::Unknown => unknown(reasons::FABRIC_STATE_UNREAD, message),
            ProbePolicy::Blocking => not_ready(reasons::FABRIC_STATE_UNREAD, message),
        };
    };
    let mut problems = Vec::new();
    for g in &report.gpus {
        let id = format!(
            "GPU {}{}",
            g.index,
            g.uuid
                .as_deref()
                .map(|u| format!(" ({u})"))
                .unwrap_or_default()
        );
        match &g.fabric {
            None => problems.push((
                reasons::GPU_NOT_ON_FABRIC,
                format!("{id}: NVML reports no NVLink fabric (not an NVSwitch-attached GPU)"),
            )),
            Some(s) if s.state != FabricPhase::Completed => problems.push((
                reasons::FABRIC_REGISTRATION_INCOMPLETE,
                format!("{id}: fabric registration {:?}", s.state),
            )),
            Some(s) if s.status.as_deref() != Some("Success") => problems.push((
                reasons::FABRIC_REGISTRATION_INCOMPLETE,
                format!(
                    "{id}: fabric registration completed with {}",
                    s.status.as_deref().unwrap_or("no status")
                ),
            )),
            Some(s) => {
                let same_cluster = s
                    .cluster_uuid
                    .as_deref()
                    .is_some_and(|u| u.replace('-', "").eq_ignore_ascii_case(&cluster));
                if !same_cluster || s.clique_id != Some(clique) {
                    problems.push((
                        reasons::CLIQUE_MISMATCH,
                        format!(
                            "{id}: NVML puts it in cluster {} clique {}, the label says cluster {cluster} clique {clique}",
                            s.cluster_uuid.as_deref().unwrap_or("?"),
                            s.clique_id.map_or_else(|| "?".to_owned(), |c| c.to_string())
                        ),
                    ));
                }
            }
        }
    }
    if let Some((reason, _)) = problems.first() {
        return not_ready(
            reason,
            format!(
                "{}; {}={label}: start or fix nvidia-fabricmanager (its version must equal the driver's) and the NVLink switch trays; multi-node jobs need every GPU in the clique",
                problems
                    .iter()
                    .map(|(_, p)| p.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
                nvidia::GPU_CLIQUE
            ),
        )
        .via(Source::ProbeReport);
    }
    ready(
        reasons::FABRIC_READY,
        format!(
            "{}={label}{}; all {} GPU(s) registered with the fabric in clique {clique} (NVML, probe report); driver {} (minimum {min}){}",
            nvidia::GPU_CLIQUE,
            if f.cliques.is_empty() {
                String::new()
            } else {
                " (an expected clique)".to_owned()
            },
            report.gpus.len(),
            driver.map_or_else(|| "unknown".to_owned(), |d| d.to_string()),
            group.map(|g| format!("; {g}")).unwrap_or_default()
        ),
    )
    .via(Source::ProbeReport)
}

/// Every node of the profile sharing the node's value of `key` must sit in
/// one clique. `Ok`: the node's clique holds its group (the note for the
/// ready message); `Err`: the verdict. A minority node is not ready; with no
/// majority, no node of the group is (none can be called right); peers
/// without a clique label, or in a clique `fabric.cliques` does not list,
/// are not ready on their own and are not counted.
fn group_rule(
    key: &str,
    own: &str,
    f: &gpuready_api::FabricExpectation,
    facts: &NodeFacts,
) -> Result<String, Verdict> {
    let Some(value) = facts.labels.get(key) else {
        return Err(not_ready(
            reasons::GROUP_LABEL_MISSING,
            format!(
                "no {key} label: the profile groups its nodes by it (fabric.groupByLabel), so this node's NVLink domain cannot be compared with its group's; label the node"
            ),
        )
        .via(Source::GfdLabels));
    };
    let Some(group) = facts
        .evidence
        .clique_group
        .as_ref()
        .filter(|g| g.label == *key && g.value == *value)
    else {
        return Err(unknown(
            reasons::CLIQUE_GROUP_UNREAD,
            format!(
                "{key}={value}: the other nodes of the group were not read, so whether they share this node's clique is unknown"
            ),
        )
        .via(Source::GroupCliques));
    };
    let tally = GroupTally::of(own, group, &f.cliques);
    let counts = |t: &GroupTally| {
        t.counts
            .iter()
            .map(|(c, n)| format!("{c} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let uncounted = match (tally.unlabelled, tally.unexpected) {
        (0, 0) => String::new(),
        (u, x) => format!(
            " (not counted: {u} node(s) without a clique label, {x} in a clique fabric.cliques does not list)"
        ),
    };
    let total = tally.total();
    let mine = tally.counts.get(own).copied().unwrap_or(0);
    match tally.standing(own) {
        Standing::United => Ok(format!(
            "group {key}={value}: all {total} node(s) in this clique{uncounted}"
        )),
        Standing::Majority => Ok(format!(
            "group {key}={value}: {mine} of {total} node(s) in this clique, the group's majority ({}){uncounted}",
            counts(&tally)
        )),
        Standing::Minority { majority } => Err(not_ready(
            reasons::CLIQUE_SPLIT,
            format!(
                "group {key}={value} is split: this node's clique {own} holds {mine} of {total} node(s), the majority ({} node(s)) sits in {majority}{uncounted}; every node of a group must share one NVLink domain: check this node's fabric manager partition and NVLink switch trays",
                tally.counts.get(&majority).copied().unwrap_or(0)
            ),
        )
        .via(Source::GroupCliques)),
        Standing::Tie => Err(not_ready(
            reasons::CLIQUE_SPLIT,
            format!(
                "group {key}={value} is split with no majority ({}){uncounted}: no clique can be called the group's, so none of its nodes is; fix the fabric partition, or list the expected clique in fabric.cliques",
                counts(&tally)
            ),
        )
        .via(Source::GroupCliques)),
    }
}
