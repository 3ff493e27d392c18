//! The Fabric layer: multi-node NVLink readiness for profiles that ask for it
//! (`spec.fabric`). The node must sit in an expected NVLink clique (GFD's
//! `nvidia.com/gpu.clique`, `<cluster UUID>.<clique ID>`), every GPU's fabric
//! registration must have completed with success in the same clique (the
//! probe's NVML fabric state: GFD labels the clique of the GPUs that did
//! register and leaves a failed one out), and the driver must be new enough
//! for IMEX; no GPU's NVML recovery action may be RECOVER_IMEX_DOMAIN (the
//! one action judged here rather than by Health); with `fabric.imexMode`, the
//! host's `nvidia-imex.service` must be in the state the NVIDIA DRA driver's
//! IMEX mode needs, as far as the probe sees it in the host's files.

use gpuready_api::keys::{fabric as reasons, nvidia};
use gpuready_api::probe::{
    FabricPhase, GpuState, IMEX_CONFIG_PATH, IMEX_DEFAULT_SOCKET, IMEX_UNIT, ImexHost, ImexUnit,
    ProbeReport, SocketState, UnitState,
};
use gpuready_api::validate::parse_clique;
use gpuready_api::{
    ComputeDomainCliquePolicy, FabricExpectation, GpuNodeProfileSpec, ImexMode, ProbePolicy,
};

use super::verdict::{Verdict, not_ready, ready, unknown};
use crate::clique_groups::{GroupTally, Standing};
use crate::evidence::{CliqueMembership, Source};
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
    fabric_verdict(f, facts).unwrap_or_else(|v| v)
}

/// The node's clique label, and the cluster and clique it names.
struct Clique<'a> {
    label: &'a str,
    cluster: String,
    id: u32,
}

/// The rules in the order they speak; `Err` is the first the node fails.
fn fabric_verdict(f: &FabricExpectation, facts: &NodeFacts) -> Result<Verdict, Verdict> {
    let clique = expected_clique(f, facts)?;
    let label = clique.label;
    // What the ready message adds: the group's and the ComputeDomains' word.
    let mut notes = String::new();
    // The node's group: one clique for all of it.
    if let Some(key) = &f.group_by_label {
        let note = group_rule(key, label, f, facts)?;
        notes.push_str(&format!("; {note}"));
    }
    let report = match &facts.probe {
        Some(ProbeEvidence::Report(r)) => Some(r.as_ref()),
        _ => None,
    };
    let (min, driver) = imex_driver(f, facts, report)?;
    // The DRA driver's ComputeDomainCliques that name the node.
    if f.compute_domain_cliques != ComputeDomainCliquePolicy::Ignore {
        let note = compute_domain_rule(f.compute_domain_cliques, label, facts)?;
        notes.push_str(&format!("; {note}"));
    }
    // Every GPU's fabric registration, from the probe.
    let Some(report) = report else {
        return Ok(without_probe(f, &clique, driver, &notes));
    };
    registration_rule(report, &clique)?;
    if let Some(v) = imex_domain_recovery(report, label) {
        return Err(v);
    }
    // The host's IMEX service, as the DRA driver's IMEX mode needs it.
    if let Some(mode) = f.imex_mode {
        let note = imex_rule(mode, report)?;
        notes.push_str(&format!("; {note}"));
    }
    Ok(ready(
        reasons::FABRIC_READY,
        format!(
            "{}={label}{}; all {} GPU(s) registered with the fabric in clique {} (NVML, probe report); driver {} ({}){notes}",
            nvidia::GPU_CLIQUE,
            if f.cliques.is_empty() {
                String::new()
            } else {
                " (an expected clique)".to_owned()
            },
            report.gpus.len(),
            clique.id,
            driver.map_or_else(|| "unknown".to_owned(), |d| d.to_string()),
            min.map_or_else(
                || "no minimum: host-managed IMEX".to_owned(),
                |m| format!("minimum {m}")
            ),
        ),
    )
    .via(Source::ProbeReport))
}

/// Not ready on what the node's clique label says: each of its checks fails
/// this way, so the source of those verdicts is set in one place.
fn not_ready_on_labels(reason: &'static str, message: String) -> Verdict {
    not_ready(reason, message).via(Source::GfdLabels)
}

/// The clique label: present, well-formed, and one the profile expects.
fn expected_clique<'a>(f: &FabricExpectation, facts: &'a NodeFacts) -> Result<Clique<'a>, Verdict> {
    let Some(label) = facts.labels.get(nvidia::GPU_CLIQUE) else {
        return Err(not_ready_on_labels(
            reasons::CLIQUE_LABEL_MISSING,
            format!(
                "no {} label: GFD writes it only when the GPUs are attached to an NVLink fabric (registration completed with success) and agree on one cluster UUID and clique ID; check nvidia-fabricmanager / the NVLink switch trays, and that GFD runs on the node",
                nvidia::GPU_CLIQUE
            ),
        ));
    };
    let Some((cluster, id)) = parse_clique(label) else {
        return Err(not_ready_on_labels(
            reasons::CLIQUE_LABEL_MALFORMED,
            format!(
                "{}={label:?} is not <cluster UUID>.<clique ID> as GFD writes it",
                nvidia::GPU_CLIQUE
            ),
        ));
    };
    if !f.cliques.is_empty() && !f.cliques.iter().any(|c| c == label) {
        return Err(not_ready_on_labels(
            reasons::UNEXPECTED_CLIQUE,
            format!(
                "{}={label} is not the profile's NVLink domain ({}): the node's GPUs registered with another NVLink partition or cluster; check the fabric manager's partition and the rack's NVLink switch trays, or fix fabric.cliques",
                nvidia::GPU_CLIQUE,
                f.cliques.join(", ")
            ),
        ));
    }
    Ok(Clique { label, cluster, id })
}

/// The minimum driver IMEX needs and the node's driver (GFD's label, else the
/// probe's); `Err` when the driver is older. The default minimum is what the
/// DRA driver checks for the IMEX daemons it runs; host-managed IMEX has none
/// of those.
fn imex_driver<'f>(
    f: &'f FabricExpectation,
    facts: &NodeFacts,
    report: Option<&ProbeReport>,
) -> Result<(Option<&'f str>, Option<DriverVersion>), Verdict> {
    let min = f.min_driver_version.as_deref().or_else(|| {
        (f.imex_mode != Some(ImexMode::HostManaged)).then_some(DEFAULT_MIN_IMEX_DRIVER)
    });
    let driver = facts.gfd.driver.present().cloned().or_else(|| {
        report
            .and_then(|r| r.driver_version.as_deref())
            .and_then(|d| DriverVersion::parse(d).ok())
    });
    if let (Some(Ok(min)), Some(d)) = (min.map(DriverVersion::parse), &driver)
        && *d < min
    {
        return Err(not_ready(
            reasons::DRIVER_TOO_OLD_FOR_IMEX,
            if f.imex_mode == Some(ImexMode::HostManaged) {
                format!("driver {d} < {min} (fabric.minDriverVersion); upgrade the driver")
            } else {
                format!(
                    "driver {d} < {min}: IMEX daemons with DNS names (the NVIDIA DRA driver's ComputeDomains) need {min} or later; upgrade the driver"
                )
            },
        ));
    }
    Ok((min, driver))
}

/// Without a probe report the per-GPU registration is unread: what
/// `fabric.whenProbeMissing` makes of that.
fn without_probe(
    f: &FabricExpectation,
    clique: &Clique,
    driver: Option<DriverVersion>,
    notes: &str,
) -> Verdict {
    let Clique { label, cluster, id } = clique;
    let message = format!(
        "{}={label} (cluster {cluster}, clique {id}) but no probe report: the label does not show that every GPU registered with the fabric (GFD leaves a failed GPU out); run gpuready probe on the node",
        nvidia::GPU_CLIQUE
    );
    match f.when_probe_missing {
        ProbePolicy::Ignore => ready(
            reasons::FABRIC_READY,
            format!(
                "{}={label}; driver {}; per-GPU fabric state{} not read (no probe report, fabric.whenProbeMissing Ignore){notes}",
                nvidia::GPU_CLIQUE,
                driver.map_or_else(|| "unknown".to_owned(), |d| d.to_string()),
                if f.imex_mode.is_some() {
                    " and the host's IMEX service"
                } else {
                    ""
                },
            ),
        ),
        ProbePolicy::Unknown => unknown(reasons::FABRIC_STATE_UNREAD, message),
        ProbePolicy::Blocking => not_ready(reasons::FABRIC_STATE_UNREAD, message),
    }
}

/// Every GPU registered with the fabric, with success, in the label's clique;
/// `Err` names every GPU that did not, under the first one's reason.
fn registration_rule(report: &ProbeReport, clique: &Clique) -> Result<(), Verdict> {
    let problems: Vec<(&'static str, String)> = report
        .gpus
        .iter()
        .filter_map(|g| registration_problem(g, clique))
        .collect();
    let Some((reason, _)) = problems.first() else {
        return Ok(());
    };
    Err(not_ready(
        reason,
        format!(
            "{}; {}={}: start or fix nvidia-fabricmanager (its version must equal the driver's) and the NVLink switch trays; multi-node jobs need every GPU in the clique",
            problems
                .iter()
                .map(|(_, p)| p.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            nvidia::GPU_CLIQUE,
            clique.label
        ),
    )
    .via(Source::ProbeReport))
}

/// What keeps one GPU out of the label's clique, if anything.
fn registration_problem(g: &GpuState, clique: &Clique) -> Option<(&'static str, String)> {
    let Clique {
        cluster, id: want, ..
    } = clique;
    let id = format!(
        "GPU {}{}",
        g.index,
        g.uuid
            .as_deref()
            .map(|u| format!(" ({u})"))
            .unwrap_or_default()
    );
    match &g.fabric {
        None => Some((
            reasons::GPU_NOT_ON_FABRIC,
            format!("{id}: NVML reports no NVLink fabric (not an NVSwitch-attached GPU)"),
        )),
        Some(s) if s.state != FabricPhase::Completed => Some((
            reasons::FABRIC_REGISTRATION_INCOMPLETE,
            format!("{id}: fabric registration {:?}", s.state),
        )),
        Some(s) if s.status.as_deref() != Some("Success") => Some((
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
                .is_some_and(|u| u.replace('-', "").eq_ignore_ascii_case(cluster));
            (!same_cluster || s.clique_id != Some(*want)).then(|| {
                (
                    reasons::CLIQUE_MISMATCH,
                    format!(
                        "{id}: NVML puts it in cluster {} clique {}, the label says cluster {cluster} clique {want}",
                        s.cluster_uuid.as_deref().unwrap_or("?"),
                        s.clique_id.map_or_else(|| "?".to_owned(), |c| c.to_string())
                    ),
                )
            })
        }
    }
}

/// The host's `nvidia-imex.service` against the DRA driver's IMEX mode, from
/// what the probe read of the host's files (docs/fabric.md, "The IMEX
/// mode"). `Ok`: the note for the ready message; `Err`: the verdict.
fn imex_rule(mode: ImexMode, report: &ProbeReport) -> Result<String, Verdict> {
    let unread =
        |why: String| Err(unknown(reasons::IMEX_STATE_UNREAD, why).via(Source::ProbeReport));
    let Some(host) = &report.imex else {
        return unread(format!(
            "fabric.imexMode {mode:?} asks for the host's {IMEX_UNIT}, but the probe report says nothing of it: run the probe with the host's /etc mounted (chart value probe.imex.enabled=true, gpuready probe --host-root), or unset fabric.imexMode"
        ));
    };
    if let Some(e) = &host.config.error {
        return unread(format!(
            "the probe could not read the host's IMEX files: {e}"
        ));
    }
    if let Some(e) = &host.unit.error {
        return unread(format!("the probe could not read the unit's links: {e}"));
    }
    let unit = unit_state(&host.unit);
    match mode {
        ImexMode::DriverManaged => driver_managed(host, &unit),
        ImexMode::HostManaged => host_managed(host, &unit),
    }
}

/// `nvidia-imex.service enabled (wanted by multi-user.target)`, `... masked`, ...
fn unit_state(unit: &ImexUnit) -> String {
    match unit.state {
        UnitState::Enabled => format!(
            "{IMEX_UNIT} enabled (wanted by {})",
            unit.wanted_by.join(", ")
        ),
        UnitState::Masked => format!("{IMEX_UNIT} masked"),
        UnitState::NotEnabled => format!("{IMEX_UNIT} not enabled"),
        UnitState::Unread => format!("{IMEX_UNIT} not read"),
    }
}

/// The DRA driver runs each ComputeDomain's IMEX daemon: its prerequisites
/// want the host service disabled (and masked) wherever it is installed.
fn driver_managed(host: &ImexHost, unit: &str) -> Result<String, Verdict> {
    if host.unit.state == UnitState::Enabled {
        return Err(not_ready(
            reasons::IMEX_SERVICE_CONFLICTS,
            format!(
                "{unit} on the host: with driver-managed IMEX (the NVIDIA DRA driver's default imex.mode) the driver runs each ComputeDomain's IMEX daemon and needs the host service disabled; run `systemctl disable --now {IMEX_UNIT} && systemctl mask {IMEX_UNIT}` on the node, or set fabric.imexMode HostManaged if the driver runs with imex.mode=hostManaged"
            ),
        )
        .via(Source::ProbeReport));
    }
    let socket = match &host.socket {
        Some(s) if s.state == SocketState::Present => format!(
            "; a control socket is at {}: a host IMEX daemon created it (left over if that daemon has stopped)",
            s.path
        ),
        _ => String::new(),
    };
    Ok(match (host.config.present, host.unit.state) {
        (false, UnitState::NotEnabled) => format!(
            "host nvidia-imex not installed (no {IMEX_CONFIG_PATH}), as driver-managed IMEX wants{socket}"
        ),
        (_, UnitState::Masked) => {
            format!("host {unit}, as driver-managed IMEX wants{socket}")
        }
        _ => format!(
            "host {unit}, but not masked either (the DRA driver's prerequisites also mask it); whether it runs now is not visible{socket}"
        ),
    })
}

/// The host runs the IMEX daemon: installed, not masked, its command service
/// on a Unix socket the DRA driver's kubelet plugin asks for readiness.
fn host_managed(host: &ImexHost, unit: &str) -> Result<String, Verdict> {
    let missing =
        |why: String| Err(not_ready(reasons::IMEX_SERVICE_MISSING, why).via(Source::ProbeReport));
    let incomplete =
        |why: String| Err(not_ready(reasons::IMEX_CONFIG_INCOMPLETE, why).via(Source::ProbeReport));
    if !host.config.present {
        return missing(format!(
            "no {IMEX_CONFIG_PATH} on the host: the nvidia-imex package is not installed; host-managed IMEX (the NVIDIA DRA driver's imex.mode=hostManaged) needs {IMEX_UNIT} installed, configured and running on every node"
        ));
    }
    if host.unit.state == UnitState::Masked {
        return missing(format!(
            "{unit} on the host: systemd cannot start it, and host-managed IMEX needs it running; run `systemctl unmask {IMEX_UNIT} && systemctl enable --now {IMEX_UNIT}`"
        ));
    }
    let wanted = format!(
        "host-managed IMEX needs IMEX_CMD_ENABLED=1 and IMEX_CMD_UNIX_DOMAIN_PATH={IMEX_DEFAULT_SOCKET} (or the path the DRA driver's imex.hostSocketPath names) in {IMEX_CONFIG_PATH}, for the driver's readiness check over that socket; set them, then `systemctl restart {IMEX_UNIT}`"
    );
    if host.config.cmd_enabled.as_deref() != Some("1") {
        return incomplete(format!(
            "IMEX_CMD_ENABLED is {}: {wanted}",
            host.config
                .cmd_enabled
                .as_deref()
                .map_or_else(|| "not set".to_owned(), |v| format!("{v:?}"))
        ));
    }
    let Some(socket) = &host.socket else {
        return incomplete(format!("IMEX_CMD_UNIX_DOMAIN_PATH is not set: {wanted}"));
    };
    let path = &socket.path;
    let not_default = if path == IMEX_DEFAULT_SOCKET {
        String::new()
    } else {
        " (not the DRA driver's default: its imex.hostSocketPath must name it)".to_owned()
    };
    let restart = format!(
        "the daemon creates it when it starts, so it is not running, or was not restarted since the setting; the DRA driver's channel claims wait for it; run `systemctl restart {IMEX_UNIT}` and see `journalctl -u {IMEX_UNIT}`; {unit}"
    );
    match socket.state {
        SocketState::Present => Ok(format!(
            "host {unit}, IMEX_CMD_ENABLED=1, control socket {path} present{not_default} (a socket file outlives a daemon killed before it removed it){}",
            if host.unit.state == UnitState::NotEnabled {
                "; not enabled: it will not start after a reboot"
            } else {
                ""
            }
        )),
        SocketState::Absent => Err(not_ready(
            reasons::IMEX_SOCKET_MISSING,
            format!("no control socket at {path}{not_default}: {restart}"),
        )
        .via(Source::ProbeReport)),
        SocketState::NotASocket => Err(not_ready(
            reasons::IMEX_SOCKET_MISSING,
            format!("{path} is not a socket{not_default}: {restart}"),
        )
        .via(Source::ProbeReport)),
        SocketState::NotVisible if host.unit.state == UnitState::Enabled => Ok(format!(
            "host {unit}, IMEX_CMD_ENABLED=1; control socket {path} not checked (outside the host's /etc the probe reads){not_default}"
        )),
        SocketState::NotVisible => Err(unknown(
            reasons::IMEX_STATE_UNREAD,
            format!(
                "the control socket {path} is outside the host's /etc the probe reads and {unit}: whether the host's IMEX daemon runs is not visible"
            ),
        )
        .via(Source::ProbeReport)),
    }
}

/// The NVIDIA DRA driver's ComputeDomainClique entries naming the node: each
/// in the node's clique (`label`), each IMEX daemon `Ready`; with `Require`,
/// at least one. `Ok`: the note for the ready message; `Err`: the verdict.
fn compute_domain_rule(
    policy: ComputeDomainCliquePolicy,
    label: &str,
    facts: &NodeFacts,
) -> Result<String, Verdict> {
    let Some(entries) = &facts.evidence.compute_domains else {
        return Err(unknown(
            reasons::COMPUTE_DOMAIN_CLIQUES_UNREAD,
            "fabric.computeDomainCliques asks for the NVIDIA DRA driver's ComputeDomainCliques (resource.nvidia.com/v1beta1), which are not served or not readable here: install the DRA driver with its ComputeDomainCliques gate on (beta, on by default since v0.3; host-managed IMEX turns it off), grant gpuready list/watch on them, or set computeDomainCliques: Ignore",
        )
        .via(Source::ComputeDomainCliques));
    };
    let describe = |m: &CliqueMembership| {
        format!(
            "ComputeDomain {} (ComputeDomainClique {}, index {})",
            m.compute_domain.as_deref().unwrap_or("?"),
            m.object,
            m.index
        )
    };
    if let Some(m) = entries.iter().find(|m| m.clique_id != label) {
        return Err(not_ready(
            reasons::COMPUTE_DOMAIN_CLIQUE_MISMATCH,
            format!(
                "{} lists this node in clique {}, but its {} is {label}: the IMEX daemon joined another NVLink partition than the node's GPUs; check the fabric manager partition, then restart the ComputeDomain's daemon on this node",
                describe(m),
                if m.clique_id.is_empty() { "(none)" } else { m.clique_id.as_str() },
                nvidia::GPU_CLIQUE
            ),
        )
        .via(Source::ComputeDomainCliques));
    }
    let waiting: Vec<String> = entries
        .iter()
        .filter(|m| !m.is_ready())
        .map(|m| {
            format!(
                "{}: {}",
                describe(m),
                if m.status.is_empty() {
                    "no status (NotReady)"
                } else {
                    m.status.as_str()
                }
            )
        })
        .collect();
    if !waiting.is_empty() {
        return Err(not_ready(
            reasons::IMEX_DAEMON_NOT_READY,
            format!(
                "this node's IMEX daemon is not Ready in {}: multi-node jobs of that ComputeDomain cannot share GPU memory through it yet (a daemon still starting reads NotReady too); see the daemon pod's log in the DRA driver's namespace",
                waiting.join("; ")
            ),
        )
        .via(Source::ComputeDomainCliques));
    }
    match (entries.len(), policy) {
        (0, ComputeDomainCliquePolicy::Require) => Err(not_ready(
            reasons::NOT_IN_COMPUTE_DOMAIN,
            "no ComputeDomainClique lists this node (fabric.computeDomainCliques: Require): no ComputeDomain's IMEX daemon runs here; check the ComputeDomain's numNodes and that its workload's pods can land on this node",
        )
        .via(Source::ComputeDomainCliques)),
        (0, _) => Ok("in no ComputeDomainClique (no ComputeDomain uses the node now)".to_owned()),
        (n, _) => Ok(format!(
            "IMEX daemon Ready in {n} ComputeDomainClique(s) of this clique ({})",
            entries
                .iter()
                .map(|m| m.object.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
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

/// The driver's own word on the IMEX domain: a GPU whose recovery action is
/// RECOVER_IMEX_DOMAIN belongs to a domain under recovery. Health and device
/// gating leave it alone (the GPU serves single-node work); the multi-node
/// work a fabric profile is for waits until the domain recovers.
fn imex_domain_recovery(report: &ProbeReport, label: &str) -> Option<Verdict> {
    let recovering = crate::recovery::imex_domain_gpus(report);
    if recovering.is_empty() {
        return None;
    }
    Some(
        not_ready(
            reasons::IMEX_DOMAIN_RECOVERY_REQUIRED,
            format!(
                "NVML recovery action on {}: {}; {}={label}",
                recovering.join(", "),
                crate::recovery::IMEX_DOMAIN_WHAT_TO_DO,
                nvidia::GPU_CLIQUE
            ),
        )
        .via(Source::ProbeReport),
    )
}
