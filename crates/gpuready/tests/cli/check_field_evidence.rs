//! `gpuready check` over the field-evidence inputs of issue 31
//! (`tests/fixtures/field/`): single-strategy MIG nodes (ready, pending,
//! failed), one healthy and one broken node per outside-signal preset, one
//! node per other system that holds nodes (NVSentinel, NodeWright, the GPU
//! operator's upgrade cordon, a readiness rule, an admin's cordon), a
//! ready and a broken multi-node NVLink rack, racks grouped by a label and
//! the DRA driver's ComputeDomainCliques, the host's IMEX service in both
//! of the DRA driver's IMEX modes, and DRA slices with list-typed
//! `numaNode`. Each node's verdict, reason and the evidence its deciding layer
//! names, as a user reads them.

use crate::support;

use std::path::PathBuf;

use serde_json::{Value, json};
use support::*;

fn field(dir: &str, file: &str) -> PathBuf {
    repo_root()
        .join("crates/gpuready/tests/fixtures/field")
        .join(dir)
        .join(file)
}

/// The instant the field inputs were written at (their GFD timestamps and
/// heartbeats are just before it).
const FIELD_NOW: &str = "2026-11-30T09:46:00Z";

/// `check -o json` over one field folder, with its extra evidence files.
fn check(dir: &str, extra: &[(&str, &str)]) -> Value {
    let mut cmd = gpuready();
    cmd.args(["check", "--now", FIELD_NOW, "-o", "json", "--nodes"])
        .arg(field(dir, "nodes.json"))
        .arg("--profiles")
        .arg(field(dir, "profiles.yaml"));
    for (flag, file) in extra {
        cmd.arg(flag).arg(field(dir, file));
    }
    let o = cmd.output().expect("gpuready runs");
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

/// (node, ready, reason, the deciding layer, its evidence).
type Expect<'a> = (&'a str, bool, &'a str, &'a str, &'a str);

#[track_caller]
fn expect(report: &Value, rows: &[Expect<'_>]) {
    for (name, ready, reason, layer, evidence) in rows {
        let n = report["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|n| n["name"] == *name)
            .unwrap_or_else(|| panic!("{name} not in the report"));
        assert_eq!(n["ready"], *ready, "{name}: {n}");
        // A node in maintenance (issue 30) carries the maintenance reason
        // (its callers assert it); its down layer keeps its own, checked below.
        if n["state"] != "maintenance" {
            assert_eq!(n["reason"], *reason, "{name}: {n}");
        }
        let l = n["layers"]
            .as_array()
            .expect("layers")
            .iter()
            .find(|l| l["layer"] == *layer)
            .unwrap_or_else(|| panic!("{name}: no {layer} layer"));
        assert_eq!(l["evidence"], *evidence, "{name}: {l}");
        if !*ready {
            assert_eq!(l["reason"], *reason, "{name}: {l}");
        }
    }
}

#[test]
fn single_strategy_mig_nodes_ready_pending_failed() {
    let r = check("mig-single", &[("--node-features", "nodefeatures.json")]);
    expect(
        &r,
        &[
            ("h200-mig-ready", true, "Ready", "Profile", "GfdLabels"),
            // Maintenance, not a failure: the node reads MigReconfiguring
            // (asserted below), its Profile layer MigConfigPending.
            (
                "h200-mig-pending",
                false,
                "MigConfigPending",
                "Profile",
                "MigManagerLabels",
            ),
            (
                "h200-mig-failed",
                false,
                "MigConfigFailed",
                "Profile",
                "MigManagerLabels",
            ),
            // The bus comparison no longer mistakes MIG devices for GPUs.
            (
                "h200-mig-ready",
                true,
                "Ready",
                "DevicePlugin",
                "Allocatable",
            ),
        ],
    );
    let pending = r["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["name"] == "h200-mig-pending"))
        .expect("h200-mig-pending");
    assert_eq!(
        (&pending["reason"], &pending["state"]),
        (&json!("MigReconfiguring"), &json!("maintenance")),
        "a MIG change in progress is maintenance: {pending}"
    );
}

#[test]
fn one_node_per_outside_signal_preset_healthy_and_broken() {
    let r = check("external", &[]);
    let mut rows = Vec::new();
    for pool in ["eks", "aks", "nebius", "gcm", "gke", "npd"] {
        rows.push((format!("{pool}-h200-healthy"), true, "Ready"));
        rows.push((format!("{pool}-h200-broken"), false, "ExternalSignalBroken"));
    }
    let rows: Vec<Expect<'_>> = rows
        .iter()
        .map(|(n, ready, reason)| (n.as_str(), *ready, *reason, "External", "NodeConditions"))
        .collect();
    expect(&r, &rows);
}

/// `check`'s table for one folder, as a user reads it.
fn check_table(dir: &str) -> String {
    let o = gpuready()
        .args(["check", "--now", FIELD_NOW, "--nodes"])
        .arg(field(dir, "nodes.json"))
        .arg("--profiles")
        .arg(field(dir, "profiles.yaml"))
        .output()
        .expect("gpuready runs");
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// The part of the table about one node: from its verdict line to the next
/// node's.
fn node_part<'a>(table: &'a str, name: &str) -> &'a str {
    let start = table
        .find(&format!("\n{name}: "))
        .unwrap_or_else(|| panic!("{name} not in the table:\n{table}"));
    let rest = &table[start + 1..];
    let end = rest[1..].find("\n\n").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

#[test]
fn gke_and_npd_presets_say_what_their_agents_wrote() {
    let t = check_table("external");
    for (node, says) in [
        (
            "gke-h200-broken",
            "XidCriticalError=True (XIDs 48, 79; recorded in boot 7d4e2f9a-51c3-4b8e-9f0d-6a2b3c4d5e6f)",
        ),
        (
            "gke-h200-healthy",
            "Ready     ExternalSignalsHealthy  NodeConditions    not on the node, which means healthy (written only while a problem holds): GKE's GPU device plugin (preset GkeDevicePlugin): XidCriticalError",
        ),
        (
            "npd-h200-broken",
            "node-problem-detector (preset NodeProblemDetector): CperHardwareErrorFatal=True (CperHardwareErrorFatal: [Hardware Error]: event severity: fatal): fix what it names; node-problem-detector's log-matched conditions stay True until it restarts",
        ),
        (
            "npd-h200-healthy",
            "every outside verdict read is healthy: node-problem-detector (preset NodeProblemDetector): KernelDeadlock=False",
        ),
    ] {
        let part = node_part(&t, node);
        assert!(part.contains(says), "{node}: {says:?} not in\n{part}");
    }
}

/// One node per other system on the fleet: `check` names who holds it, what
/// that system is doing and what releases it; the GPU operator's upgrade
/// cordon is the maintenance's; gpuready would write no taint for any of them.
#[test]
fn each_neighbour_is_named_with_what_it_does_and_what_releases_it() {
    let r = check("neighbours", &[]);
    for (name, state, reason) in [
        ("nvsentinel-draining", "waitingForGate", "WaitingForGate"),
        ("nvsentinel-external", "waitingForGate", "WaitingForGate"),
        ("nodewright-tuning", "waitingForGate", "WaitingForGate"),
        ("nodewright-cordon", "waitingForGate", "WaitingForGate"),
        ("upgrade-drain", "maintenance", "DriverUpgradeInProgress"),
        ("readiness-rule", "waitingForGate", "WaitingForGate"),
        ("admin-cordon", "waitingForGate", "WaitingForGate"),
        ("free", "ready", "Ready"),
    ] {
        let n = r["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in the report"));
        assert_eq!(
            (&n["state"], &n["reason"]),
            (&json!(state), &json!(reason)),
            "{name}: {n}"
        );
    }
    let t = check_table("neighbours");
    for (node, says) in [
        (
            "nvsentinel-draining",
            "held by: NVSentinel (dgxc.nvidia.com/nvsentinel-state=draining, cordoned): draining the node's workloads after a fault; released when NVSentinel's health monitors report the node healthy",
        ),
        (
            "nvsentinel-external",
            "held by: NVSentinel (nvsentinel.nvidia.com/external-remediation=gpu0-xid79-nvsentinel-external:NoSchedule): handed the node to an external remediation system",
        ),
        (
            "nodewright-tuning",
            "held by: NodeWright (nodewright.nvidia.com=runtime-required:NoSchedule): applying its runtime-required packages",
        ),
        (
            "nodewright-cordon",
            "held by: NodeWright (spec.unschedulable, nodewright.nvidia.com/runtimeRequiredCordon): keeps the node cordoned after its runtime-required packages",
        ),
        (
            "upgrade-drain",
            "held by the GPU operator (spec.unschedulable, nvidia.com/gpu-driver-upgrade-state=drain-required): the upgrade controller cordoned the node for its driver upgrade; released when the upgrade controller uncordons the node at uncordon-required",
        ),
        (
            "readiness-rule",
            "held by: a readiness controller (readiness.k8s.io/network-ready=pending:NoSchedule)",
        ),
        (
            "admin-cordon",
            "held by: an unknown owner (spec.unschedulable): cordoned by an admin or by a controller gpuready does not know; released when whoever cordoned it uncordons it",
        ),
    ] {
        let part = node_part(&t, node);
        assert!(part.contains(says), "{node}: {says:?} not in\n{part}");
        // gpuready would never add its taint for another system's gate (the
        // upgrade is maintenance: gated by gpuready's own taint).
        assert_eq!(
            part.contains("would: add taint"),
            node == "upgrade-drain",
            "{node}:\n{part}"
        );
    }
}

#[test]
fn a_ready_and_a_broken_nvlink_rack() {
    let r = check("fabric", &[("--probe-reports", "probe-reports.json")]);
    expect(
        &r,
        &[
            ("gb200-rack-a-01", true, "Ready", "Fabric", "ProbeReport"),
            ("gb200-rack-a-02", true, "Ready", "Fabric", "ProbeReport"),
            ("gb200-rack-b-01", true, "Ready", "Fabric", "ProbeReport"),
            // The probe's Health layer, before Fabric, names the same fault.
            (
                "gb200-rack-b-02",
                false,
                "FabricNotReady",
                "Health",
                "ProbeReport",
            ),
            (
                "gb200-rack-b-03",
                false,
                "UnexpectedClique",
                "Fabric",
                "GfdLabels",
            ),
            (
                "gb200-rack-b-04",
                false,
                "FabricNotReady",
                "Health",
                "ProbeReport",
            ),
        ],
    );
}

#[test]
fn racks_grouped_by_a_label_one_united_one_with_a_minority_tray_one_tied() {
    let r = check(
        "fabric",
        &[
            ("--probe-reports", "probe-reports.json"),
            ("--compute-domain-cliques", "compute-domain-cliques.json"),
        ],
    );
    let united_and_majority: Vec<String> = ["c-01", "c-02", "c-03", "c-04", "d-01", "d-02", "d-03"]
        .iter()
        .map(|n| format!("gb200-rack-{n}"))
        .collect();
    let mut rows: Vec<Expect<'_>> = united_and_majority
        .iter()
        .map(|n| (n.as_str(), true, "Ready", "Fabric", "ProbeReport"))
        .collect();
    rows.extend([
        (
            "gb200-rack-d-04",
            false,
            "CliqueSplit",
            "Fabric",
            "GroupCliques",
        ),
        (
            "gb200-rack-e-01",
            false,
            "CliqueSplit",
            "Fabric",
            "GroupCliques",
        ),
        (
            "gb200-rack-e-02",
            false,
            "CliqueSplit",
            "Fabric",
            "GroupCliques",
        ),
    ]);
    expect(&r, &rows);
    let message = |name: &str| fabric_message(&r, name);
    let minority = message("gb200-rack-d-04");
    for words in [
        "group example.com/nvl-rack=rack-d is split",
        "9277d399-0674-44a9-b64e-d85bb19ce2b0.32770 holds 1 of 4 node(s)",
        "the majority (3 node(s)) sits in 9277d399-0674-44a9-b64e-d85bb19ce2b0.32769",
    ] {
        assert!(minority.contains(words), "{words:?} not in {minority}");
    }
    assert!(
        message("gb200-rack-d-01").contains("3 of 4 node(s) in this clique, the group's majority")
    );
    assert!(
        message("gb200-rack-c-01")
            .contains("group example.com/nvl-rack=rack-c: all 4 node(s) in this clique")
    );
    assert!(message("gb200-rack-e-01").contains("no majority"));
}

/// Rack A's first tray with NVML's RECOVER_IMEX_DOMAIN on one GPU: its
/// profile asks for a fabric, so the Fabric layer holds it
/// (`ImexDomainRecoveryRequired`, what to do in the message) while Health
/// stays Ready and only says it; the other tray of the rack is untouched.
#[test]
fn an_imex_domain_under_recovery_holds_the_tray_at_the_fabric_layer() {
    let text = std::fs::read_to_string(field("fabric", "probe-reports.json")).expect("fixture");
    let mut list: Value = serde_json::from_str(&text).expect("json");
    let cm = list["items"]
        .as_array_mut()
        .expect("items")
        .iter_mut()
        .find(|c| c["metadata"]["name"] == "gpuready-probe-gb200-rack-a-01")
        .expect("rack A's first tray");
    let mut report: Value =
        serde_json::from_str(cm["data"]["report.json"].as_str().expect("report")).expect("json");
    report["gpus"][1]["recoveryAction"] = json!("RecoverImexDomain");
    cm["data"]["report.json"] = json!(report.to_string());
    let dir = tempfile::tempdir().expect("tempdir");
    let reports = dir.path().join("probe-reports.json");
    std::fs::write(&reports, list.to_string()).expect("write");
    let run = |output: &str| {
        let o = gpuready()
            .args(["check", "--now", FIELD_NOW, "-o", output, "--nodes"])
            .arg(field("fabric", "nodes.json"))
            .arg("--profiles")
            .arg(field("fabric", "profiles.yaml"))
            .arg("--probe-reports")
            .arg(&reports)
            .output()
            .expect("gpuready runs");
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        stdout(&o)
    };
    let r: Value = serde_json::from_str(&run("json")).expect("json report");
    expect(
        &r,
        &[
            (
                "gb200-rack-a-01",
                false,
                "ImexDomainRecoveryRequired",
                "Fabric",
                "ProbeReport",
            ),
            ("gb200-rack-a-02", true, "Ready", "Fabric", "ProbeReport"),
        ],
    );
    let message = fabric_message(&r, "gb200-rack-a-01");
    assert!(
        message.contains("GPU 1 (GPU-") && message.contains("to recover the IMEX domain"),
        "{message}"
    );
    let health = r["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["name"] == "gb200-rack-a-01"))
        .and_then(|n| n["layers"].as_array())
        .and_then(|l| l.iter().find(|l| l["layer"] == "Health"))
        .cloned()
        .expect("Health");
    assert_eq!(health["status"], "Ready", "{health}");
    let table = run("table");
    assert!(table.contains("ImexDomainRecoveryRequired"), "{table}");
}

/// A layer's message, for one node of a `check -o json` report.
fn fabric_message(report: &Value, name: &str) -> String {
    report["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["name"] == name)
        .and_then(|n| {
            n["layers"]
                .as_array()?
                .iter()
                .find(|l| l["layer"] == "Fabric")
        })
        .and_then(|l| l["message"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn compute_domain_cliques_ready_not_ready_mismatched_and_unread() {
    let with = check(
        "fabric",
        &[
            ("--probe-reports", "probe-reports.json"),
            ("--compute-domain-cliques", "compute-domain-cliques.json"),
        ],
    );
    expect(
        &with,
        &[
            ("gb200-rack-d-02", true, "Ready", "Fabric", "ProbeReport"),
            ("gb200-rack-f-01", true, "Ready", "Fabric", "ProbeReport"),
            (
                "gb200-rack-f-02",
                false,
                "ImexDaemonNotReady",
                "Fabric",
                "ComputeDomainCliques",
            ),
            (
                "gb200-rack-f-03",
                false,
                "ComputeDomainCliqueMismatch",
                "Fabric",
                "ComputeDomainCliques",
            ),
            // No ComputeDomain on rack C: fine under Check.
            ("gb200-rack-c-01", true, "Ready", "Fabric", "ProbeReport"),
        ],
    );
    assert!(
        fabric_message(&with, "gb200-rack-d-02")
            .contains("IMEX daemon Ready in 1 ComputeDomainClique(s)")
    );
    assert!(fabric_message(&with, "gb200-rack-c-01").contains("in no ComputeDomainClique"));
    let waiting = fabric_message(&with, "gb200-rack-f-02");
    assert!(
        waiting.contains("ComputeDomain a3c9e7d1-6f2b-4e8a-b1d0-7c5e9f3a2b16"),
        "{waiting}"
    );
    assert!(waiting.contains("index 1): NotReady"), "{waiting}");
    // Without the file, offline: not read, so the profile's nodes are Unknown.
    let without = check("fabric", &[("--probe-reports", "probe-reports.json")]);
    expect(
        &without,
        &[(
            "gb200-rack-c-01",
            false,
            "ComputeDomainCliquesUnread",
            "Fabric",
            "ComputeDomainCliques",
        )],
    );
}

#[test]
fn the_host_imex_service_in_driver_managed_and_host_managed_mode() {
    let r = check("fabric", &[("--probe-reports", "probe-reports.json")]);
    let ready = |n| (n, true, "Ready", "Fabric", "ProbeReport");
    let broken = |n, reason| (n, false, reason, "Fabric", "ProbeReport");
    expect(
        &r,
        &[
            // Driver-managed (the DRA driver's default): no host service.
            ready("gb200-rack-g-01"),
            ready("gb200-rack-g-02"),
            broken("gb200-rack-g-03", "ImexServiceConflicts"),
            // Host-managed: the host service, its command service and socket.
            ready("gb200-rack-h-01"),
            broken("gb200-rack-h-02", "ImexSocketMissing"),
            broken("gb200-rack-h-03", "ImexConfigIncomplete"),
            broken("gb200-rack-h-04", "ImexServiceMissing"),
            broken("gb200-rack-h-05", "ImexStateUnread"),
        ],
    );
    for (node, words) in [
        ("gb200-rack-g-01", "host nvidia-imex not installed"),
        ("gb200-rack-g-02", "nvidia-imex.service masked"),
        (
            "gb200-rack-g-03",
            "systemctl disable --now nvidia-imex.service && systemctl mask nvidia-imex.service",
        ),
        (
            "gb200-rack-h-01",
            "control socket /etc/nvidia-imex/imex_ctrl.sock present",
        ),
        (
            "gb200-rack-h-02",
            "no control socket at /etc/nvidia-imex/imex_ctrl.sock",
        ),
        ("gb200-rack-h-03", "IMEX_CMD_ENABLED is \"0\""),
        ("gb200-rack-h-04", "no /etc/nvidia-imex/config.cfg"),
        ("gb200-rack-h-05", "probe.imex.enabled=true"),
    ] {
        let message = fabric_message(&r, node);
        assert!(
            message.contains(words),
            "{node}: {words:?} not in {message}"
        );
    }
    // Not read is Unknown, not a broken node.
    let unread = r["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["name"] == "gb200-rack-h-05")
        .and_then(|n| {
            n["layers"]
                .as_array()?
                .iter()
                .find(|l| l["layer"] == "Fabric")
        })
        .expect("Fabric layer");
    assert_eq!(unread["status"], "Unknown", "{unread}");
}

#[test]
fn dra_slices_with_list_typed_numa_nodes() {
    let r = check("dra-numa", &[("--resource-slices", "slices.json")]);
    expect(
        &r,
        &[
            ("h200-numa-ok", true, "Ready", "Profile", "ResourceSlices"),
            (
                "h200-numa-collapsed",
                false,
                "TooManyGpusPerNumaNode",
                "Profile",
                "ResourceSlices",
            ),
        ],
    );
}
