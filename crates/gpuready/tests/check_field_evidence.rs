//! `gpuready check` over the field-evidence inputs of issue 31
//! (`tests/fixtures/field/`): single-strategy MIG nodes (ready, pending,
//! failed), one healthy and one broken node per outside-signal preset, a
//! ready and a broken multi-node NVLink rack, and DRA slices with list-typed
//! `numaNode`. Each node's verdict, reason and the evidence its deciding layer
//! names, as a user reads them.

mod support;

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
    for pool in ["eks", "aks", "nebius", "gcm"] {
        rows.push((format!("{pool}-h200-healthy"), true, "Ready"));
        rows.push((format!("{pool}-h200-broken"), false, "ExternalSignalBroken"));
    }
    let rows: Vec<Expect<'_>> = rows
        .iter()
        .map(|(n, ready, reason)| (n.as_str(), *ready, *reason, "External", "NodeConditions"))
        .collect();
    expect(&r, &rows);
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
