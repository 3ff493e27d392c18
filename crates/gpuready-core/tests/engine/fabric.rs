//! The Fabric layer on multi-node NVLink nodes, from documented formats (no
//! such machine was lent here: `fixtures/fabric/README.md`): GFD's
//! `nvidia.com/gpu.clique` label, the probe's NVML fabric state of every GPU,
//! the driver IMEX needs, the host's IMEX service against the DRA driver's
//! IMEX mode; nothing judged unless the profile asks.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use gpuready_api::Layer;
use gpuready_api::compute_domain::ComputeDomainClique;
use gpuready_api::keys::fabric as r;
use gpuready_api::probe::{
    FabricPhase, ImexConfig, ImexHost, ImexSocket, ImexUnit, ProbeReport, SocketState, UnitState,
};
use gpuready_core::clique_groups::{CliqueGroup, GroupIndex};
use gpuready_core::evaluate::Status;
use gpuready_core::evidence::{CliqueMembership, Source};
use gpuready_core::group_peers::{clique_group, group_of};
use gpuready_core::health::ProbeEvidence;

const CLIQUE: &str = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766";

fn tray_report() -> ProbeReport {
    let path = format!(
        "{}/tests/fixtures/fabric/gb200-tray-report.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut r: ProbeReport =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("report");
    r.generated_at = at(-30).to_string();
    r.node = None;
    r
}

fn tray() -> NodeBuilder {
    NodeBuilder::gpu("gb200-1")
        .label("nvidia.com/gpu.product", "NVIDIA-GB200")
        .label("nvidia.com/gpu.count", "4")
        .label("nvidia.com/gpu.clique", CLIQUE)
        .driver("580.159.04")
        .compute(10, 0)
        .label("nvidia.com/gpu.family", "blackwell")
        .gpus(4, 4)
}

fn judge_tray(
    profile: &str,
    node: &NodeBuilder,
    report: Option<ProbeReport>,
) -> gpuready_core::LayerReport {
    let facts = node
        .facts()
        .with_probe(report.map(|r| ProbeEvidence::Report(Box::new(r))));
    gpuready_core::evaluate(&spec(profile), &facts, now())
}

const PROFILE: &str = "fabric: {cliques: [\"9277d399-0674-44a9-b64e-d85bb19ce2b0.32766\"]}";

#[test]
fn a_tray_in_its_clique_with_every_gpu_registered_is_ready() {
    let rep = judge_tray(PROFILE, &tray(), Some(tray_report()));
    let l = rep.expect(Layer::Fabric, Status::Ready, r::FABRIC_READY);
    l.mentions(&[
        CLIQUE,
        "all 4 GPU(s) registered with the fabric in clique 32766",
        "minimum 570.158.01",
    ]);
    assert_eq!(l.evidence, Source::ProbeReport);
    assert!(rep.ready());
    // No fabric section: no Fabric layer.
    assert!(
        judge_tray("", &tray(), Some(tray_report()))
            .get(Layer::Fabric)
            .is_none()
    );
}

/// NVML's RECOVER_IMEX_DOMAIN on a GPU names its IMEX domain, not the GPU:
/// Health never gates on it (it says it in its Ready message) and device
/// gating taints nothing; a profile that asks for a fabric reads its Fabric
/// layer NotReady until the domain recovers (multi-node work is what it is
/// for), a profile that does not stays ready. A GPU's own recovery action is
/// Health's, not the Fabric layer's.
#[test]
fn an_imex_domain_under_recovery_is_the_fabric_layers_alone() {
    use gpuready_api::keys::health_reasons as hr;
    use gpuready_api::probe::RecoveryAction;
    let with = |action| {
        let mut rep = tray_report();
        rep.gpus[2].recovery_action = Some(action);
        rep
    };
    let imex = with(RecoveryAction::RecoverImexDomain);
    let rep = judge_tray(PROFILE, &tray(), Some(imex.clone()));
    rep.expect(
        Layer::Fabric,
        Status::NotReady,
        r::IMEX_DOMAIN_RECOVERY_REQUIRED,
    )
    .mentions(&[
        "GPU 2 (GPU-5d1c0e7a-4b2f-4c1e-9a3d-000000000002)",
        "RECOVER_IMEX_DOMAIN",
        "nvidia-imex.service",
        CLIQUE,
    ]);
    rep.expect(Layer::Health, Status::Ready, hr::PROBE_HEALTHY)
        .mentions(&["RECOVER_IMEX_DOMAIN", "judged by the Fabric layer"]);
    assert!(!rep.ready(), "Fabric gates by default");
    // Fabric reported, not gating: the node is ready.
    let report_only = format!(
        "{PROFILE}\ngatingLayers: [Node, Hardware, Driver, DevicePlugin, FeatureDiscovery, Profile, Compatibility, Health]"
    );
    let rep = judge_tray(&report_only, &tray(), Some(imex.clone()));
    rep.expect(
        Layer::Fabric,
        Status::NotReady,
        r::IMEX_DOMAIN_RECOVERY_REQUIRED,
    );
    assert!(rep.ready());
    // No fabric asked for: no Fabric layer, nothing held back.
    let rep = judge_tray("", &tray(), Some(imex));
    assert!(rep.get(Layer::Fabric).is_none());
    rep.expect(Layer::Health, Status::Ready, hr::PROBE_HEALTHY)
        .mentions(&["RECOVER_IMEX_DOMAIN"]);
    assert!(rep.ready());
    // The GPU's own actions are Health's; the fabric itself is fine.
    for (action, reason) in [
        (RecoveryAction::BusReset, hr::BUS_RESET_REQUIRED),
        (RecoveryAction::SystemReboot, hr::SYSTEM_REBOOT_REQUIRED),
        (RecoveryAction::Unknown, hr::RECOVERY_ACTION_REQUIRED),
    ] {
        let rep = judge_tray(PROFILE, &tray(), Some(with(action)));
        rep.expect(Layer::Health, Status::NotReady, reason);
        rep.expect(Layer::Fabric, Status::Ready, r::FABRIC_READY);
    }
}

#[test]
fn the_clique_label_missing_malformed_or_unexpected() {
    judge_tray(
        PROFILE,
        &tray().unlabel("nvidia.com/gpu.clique"),
        Some(tray_report()),
    )
    .expect(Layer::Fabric, Status::NotReady, r::CLIQUE_LABEL_MISSING)
    .mentions(&["nvidia.com/gpu.clique", "nvidia-fabricmanager"]);
    judge_tray(
        PROFILE,
        &tray().label("nvidia.com/gpu.clique", "32766"),
        Some(tray_report()),
    )
    .expect(Layer::Fabric, Status::NotReady, r::CLIQUE_LABEL_MALFORMED);
    let other = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32767";
    judge_tray(
        PROFILE,
        &tray().label("nvidia.com/gpu.clique", other),
        Some(tray_report()),
    )
    .expect(Layer::Fabric, Status::NotReady, r::UNEXPECTED_CLIQUE)
    .mentions(&[other, CLIQUE]);
    // Without fabric.cliques any well-formed clique is accepted.
    judge_tray(
        "fabric: {}",
        &tray().label("nvidia.com/gpu.clique", other),
        None,
    )
    .expect(Layer::Fabric, Status::Unknown, r::FABRIC_STATE_UNREAD);
}

#[test]
fn every_gpu_must_have_registered_in_the_labelled_clique() {
    let mut pending = tray_report();
    pending.gpus[2].fabric.as_mut().expect("fabric").state = FabricPhase::InProgress;
    pending.gpus[2].fabric.as_mut().expect("fabric").status = None;
    judge_tray(PROFILE, &tray(), Some(pending))
        .expect(
            Layer::Fabric,
            Status::NotReady,
            r::FABRIC_REGISTRATION_INCOMPLETE,
        )
        .mentions(&["GPU 2", "InProgress"]);
    let mut failed = tray_report();
    failed.gpus[1].fabric.as_mut().expect("fabric").status = Some("NVML_ERROR_UNKNOWN".into());
    judge_tray(PROFILE, &tray(), Some(failed))
        .expect(
            Layer::Fabric,
            Status::NotReady,
            r::FABRIC_REGISTRATION_INCOMPLETE,
        )
        .mentions(&["GPU 1", "NVML_ERROR_UNKNOWN"]);
    let mut moved = tray_report();
    moved.gpus[3].fabric.as_mut().expect("fabric").clique_id = Some(1);
    judge_tray(PROFILE, &tray(), Some(moved))
        .expect(Layer::Fabric, Status::NotReady, r::CLIQUE_MISMATCH)
        .mentions(&["GPU 3", "clique 1", "clique 32766"]);
    let mut off = tray_report();
    off.gpus[0].fabric = None;
    judge_tray(PROFILE, &tray(), Some(off)).expect(
        Layer::Fabric,
        Status::NotReady,
        r::GPU_NOT_ON_FABRIC,
    );
}

#[test]
fn driver_minimum_and_a_missing_probe_report() {
    judge_tray(PROFILE, &tray().driver("570.148.08"), Some(tray_report()))
        .expect(Layer::Fabric, Status::NotReady, r::DRIVER_TOO_OLD_FOR_IMEX)
        .mentions(&["570.148.08 < 570.158.01"]);
    judge_tray(
        "fabric: {minDriverVersion: \"580.65.06\"}",
        &tray().driver("575.57.08"),
        Some(tray_report()),
    )
    .expect(Layer::Fabric, Status::NotReady, r::DRIVER_TOO_OLD_FOR_IMEX);
    judge_tray(PROFILE, &tray(), None).expect(
        Layer::Fabric,
        Status::Unknown,
        r::FABRIC_STATE_UNREAD,
    );
    judge_tray("fabric: {whenProbeMissing: Blocking}", &tray(), None).expect(
        Layer::Fabric,
        Status::NotReady,
        r::FABRIC_STATE_UNREAD,
    );
    judge_tray("fabric: {whenProbeMissing: Ignore}", &tray(), None)
        .expect(Layer::Fabric, Status::Ready, r::FABRIC_READY)
        .mentions(&["per-GPU fabric state not read"]);
}

// ------------------------------------------------------------- groups by label

const RACK: &str = "example.com/nvl-rack";
const OTHER: &str = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32767";
const FOREIGN: &str = "0b2a6e3c-5c1e-4a53-9d87-2f1f0b1d7c11.7";

/// A tray of rack `rack-a` in `clique`, judged with its peers' cliques.
fn judge_in_group(
    profile: &str,
    clique: &str,
    peers: &[Option<&str>],
) -> gpuready_core::LayerReport {
    let node = tray()
        .label(RACK, "rack-a")
        .label("nvidia.com/gpu.clique", clique);
    let mut facts = node.facts();
    facts.evidence.clique_group = Some(CliqueGroup {
        label: RACK.into(),
        value: "rack-a".into(),
        peers: peers
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("gb200-{}", i + 2), c.map(str::to_owned)))
            .collect(),
    });
    let mut report = tray_report();
    let (uuid, id) = clique.rsplit_once('.').expect("clique");
    for g in &mut report.gpus {
        let f = g.fabric.as_mut().expect("fabric");
        f.cluster_uuid = Some(uuid.replace('-', ""));
        f.clique_id = id.parse().ok();
    }
    gpuready_core::evaluate(
        &spec(profile),
        &facts.with_probe(Some(ProbeEvidence::Report(Box::new(report)))),
        now(),
    )
}

const GROUPED: &str = "fabric: {groupByLabel: example.com/nvl-rack}";

#[test]
fn a_group_by_label_is_judged_from_its_nodes_cliques() {
    let c = Some(CLIQUE);
    let o = Some(OTHER);
    // (the node's clique, its peers', expected reason, what the message says)
    type Case<'a> = (&'a str, &'a [Option<&'a str>], &'a str, &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        // A group of one, and a united group.
        (
            CLIQUE,
            &[],
            r::FABRIC_READY,
            &["all 1 node(s) in this clique"],
        ),
        (CLIQUE, &[c, c, c], r::FABRIC_READY, &["all 4 node(s)"]),
        // The majority is ready and says where the others sit.
        (
            CLIQUE,
            &[c, c, o],
            r::FABRIC_READY,
            &["3 of 4 node(s)", "the group's majority", OTHER],
        ),
        // The minority is not, naming the majority and the counts.
        (
            OTHER,
            &[c, c, c],
            r::CLIQUE_SPLIT,
            &[
                "this node's clique",
                "holds 1 of 4",
                "the majority (3 node(s)) sits in",
                CLIQUE,
            ],
        ),
        // A tie: no node of the group can be called right.
        (CLIQUE, &[c, o, o], r::CLIQUE_SPLIT, &["no majority", "×2"]),
        (OTHER, &[c, c, o], r::CLIQUE_SPLIT, &["no majority"]),
        // Two others tie ahead of the node: still no majority.
        (FOREIGN, &[c, c, o, o], r::CLIQUE_SPLIT, &["no majority"]),
        // Peers without a (well-formed) label are not counted.
        (
            CLIQUE,
            &[None, Some("32766"), o, c],
            r::FABRIC_READY,
            &["2 of 3 node(s)", "2 node(s) without a clique label"],
        ),
        (CLIQUE, &[None, None, o], r::CLIQUE_SPLIT, &["no majority"]),
    ];
    for (own, peers, reason, words) in cases {
        let rep = judge_in_group(GROUPED, own, peers);
        let l = rep.get(Layer::Fabric).expect("fabric layer");
        assert_eq!(l.reason, *reason, "{own} with {peers:?}: {}", l.message);
        l.mentions(words);
        assert_eq!(
            l.evidence,
            if *reason == r::FABRIC_READY {
                Source::ProbeReport
            } else {
                Source::GroupCliques
            },
            "{own} with {peers:?}"
        );
        assert_eq!(
            rep.ready(),
            *reason == r::FABRIC_READY,
            "{own} with {peers:?}"
        );
    }
}

#[test]
fn with_fabric_cliques_only_expected_cliques_count_towards_the_majority() {
    // Rack A's expected clique is CLIQUE; three trays landed in OTHER. The two
    // in CLIQUE are right (ready), the three in OTHER fail on their own.
    let profile = format!("fabric: {{groupByLabel: {RACK}, cliques: [\"{CLIQUE}\"]}}");
    let o = Some(OTHER);
    judge_in_group(&profile, CLIQUE, &[Some(CLIQUE), o, o, o])
        .expect(Layer::Fabric, Status::Ready, r::FABRIC_READY)
        .mentions(&[
            "all 2 node(s)",
            "3 in a clique fabric.cliques does not list",
        ]);
    judge_in_group(&profile, OTHER, &[Some(CLIQUE), o, o]).expect(
        Layer::Fabric,
        Status::NotReady,
        r::UNEXPECTED_CLIQUE,
    );
    // Two expected cliques, split evenly: a tie.
    let both = format!("fabric: {{groupByLabel: {RACK}, cliques: [\"{CLIQUE}\", \"{OTHER}\"]}}");
    judge_in_group(&both, CLIQUE, &[o]).expect(Layer::Fabric, Status::NotReady, r::CLIQUE_SPLIT);
}

#[test]
fn a_node_without_the_group_label_or_without_its_groups_evidence() {
    judge_tray(GROUPED, &tray(), Some(tray_report()))
        .expect(Layer::Fabric, Status::NotReady, r::GROUP_LABEL_MISSING)
        .mentions(&[RACK, "label the node"]);
    // The label, but no group read (a caller that did not look).
    judge_tray(GROUPED, &tray().label(RACK, "rack-a"), Some(tray_report()))
        .expect(Layer::Fabric, Status::Unknown, r::CLIQUE_GROUP_UNREAD)
        .mentions(&["example.com/nvl-rack=rack-a"]);
    // A profile without groupByLabel never reads the group.
    judge_tray(PROFILE, &tray().label(RACK, "rack-a"), Some(tray_report())).expect(
        Layer::Fabric,
        Status::Ready,
        r::FABRIC_READY,
    );
}

#[test]
fn peers_are_the_nodes_of_the_same_profile_with_the_same_value() {
    let rack_a = profile(
        "rack-a",
        &format!("nodeSelector: {{matchLabels: {{gpu-pool: gb200}}}}\n{GROUPED}"),
    );
    let cpu = profile("cpu", "nodeSelector: {matchLabels: {gpu-pool: cpu}}");
    let selectors: Vec<_> = [&rack_a, &cpu]
        .iter()
        .map(|p| gpuready_core::select::profile_selector(p).expect("selector"))
        .collect();
    let pairs: Vec<_> = [&rack_a, &cpu].into_iter().zip(selectors.iter()).collect();
    let node = tray().label("gpu-pool", "gb200").label(RACK, "rack-a");
    let (p, key, value) = group_of(&node.facts(), &pairs).expect("grouped");
    assert_eq!(
        (p.metadata.name.as_deref(), key.as_str(), value.as_str()),
        (Some("rack-a"), RACK, "rack-a")
    );
    // Without the label, or governed by a profile that groups nothing: none.
    assert!(group_of(&tray().label("gpu-pool", "gb200").facts(), &pairs).is_none());
    assert!(
        group_of(
            &tray()
                .label("gpu-pool", "cpu")
                .label(RACK, "rack-a")
                .facts(),
            &pairs
        )
        .is_none()
    );
    let labels = |pool: &str, rack: &str, clique: Option<&str>| {
        let mut m = BTreeMap::from([
            ("gpu-pool".to_owned(), pool.to_owned()),
            (RACK.to_owned(), rack.to_owned()),
            // gpuready's own labels never change who governs a peer.
            ("gpuready.io/profile".to_owned(), "cpu".to_owned()),
        ]);
        if let Some(c) = clique {
            m.insert("nvidia.com/gpu.clique".to_owned(), c.to_owned());
        }
        m
    };
    let group = clique_group(
        "gb200-1",
        p,
        RACK,
        "rack-a",
        [
            (
                "gb200-1".to_owned(),
                labels("gb200", "rack-a", Some(CLIQUE)),
            ),
            (
                "gb200-2".to_owned(),
                labels("gb200", "rack-a", Some(CLIQUE)),
            ),
            ("gb200-3".to_owned(), labels("gb200", "rack-a", None)),
            (
                "gb200-4".to_owned(),
                labels("gb200", "rack-b", Some(CLIQUE)),
            ),
            ("cpu-1".to_owned(), labels("cpu", "rack-a", Some(OTHER))),
        ],
        &pairs,
    );
    assert_eq!(
        group.peers,
        BTreeMap::from([
            ("gb200-2".to_owned(), Some(CLIQUE.to_owned())),
            ("gb200-3".to_owned(), None),
        ])
    );
}

#[test]
fn the_group_index_requeues_only_the_group_and_only_on_what_peers_read() {
    let mut idx = GroupIndex::default();
    let node = |rack: &str, clique: &str, ts: &str| {
        vec![
            ("gpu-pool".to_owned(), "gb200".to_owned()),
            (RACK.to_owned(), rack.to_owned()),
            ("nvidia.com/gfd.timestamp".to_owned(), ts.to_owned()),
            ("nvidia.com/gpu.clique".to_owned(), clique.to_owned()),
        ]
    };
    fn feed(v: &[(String, String)]) -> Vec<(&str, &str)> {
        v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }
    let a1 = node("rack-a", CLIQUE, "1");
    idx.rebuild(
        BTreeSet::from([RACK.to_owned()]),
        [
            ("a1", feed(&a1)),
            ("a2", feed(&a1)),
            ("b1", feed(&node("rack-b", CLIQUE, "1"))),
        ],
    );
    assert_eq!(
        idx.members(RACK, "rack-a").collect::<Vec<_>>(),
        ["a1", "a2"]
    );
    // A new node joins rack A: its peers are judged again, rack B's are not.
    assert_eq!(idx.update("a3", feed(&a1)), ["a1", "a2"]);
    // GFD's timestamp moves: nothing a peer reads changed.
    assert!(
        idx.update("a3", feed(&node("rack-a", CLIQUE, "2")))
            .is_empty()
    );
    // Its clique changes: rack A again.
    assert_eq!(
        idx.update("a3", feed(&node("rack-a", OTHER, "2"))),
        ["a1", "a2"]
    );
    // It moves to rack B: both racks.
    assert_eq!(
        idx.update("a3", feed(&node("rack-b", OTHER, "2"))),
        ["a1", "a2", "b1"]
    );
    // It loses the rack label, then is deleted: rack B, then no one.
    assert_eq!(
        idx.update("a3", feed(&[("gpu-pool".into(), "gb200".into())])),
        ["b1"]
    );
    assert!(idx.remove("a3").is_empty());
    assert_eq!(idx.remove("a2"), ["a1"]);
    assert_eq!(idx.members(RACK, "rack-a").collect::<Vec<_>>(), ["a1"]);
    // A key no profile groups by is not indexed.
    assert!(idx.update("x", [("other/label", "v")]).is_empty());
    assert_eq!(idx.members("other/label", "v").count(), 0);
}

// ------------------------------------------------------- ComputeDomainCliques

fn memberships(node: &str) -> Vec<CliqueMembership> {
    let path = format!(
        "{}/tests/fixtures/fabric/compute-domain-clique.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let clique: ComputeDomainClique =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("clique");
    CliqueMembership::of_clique(&clique)
        .into_iter()
        .filter(|(n, _)| n == node)
        .map(|(_, m)| m)
        .collect()
}

fn judge_domains(
    profile: &str,
    entries: Option<Vec<CliqueMembership>>,
) -> gpuready_core::LayerReport {
    let mut facts = tray().facts();
    facts.evidence.compute_domains = entries;
    gpuready_core::evaluate(
        &spec(profile),
        &facts.with_probe(Some(ProbeEvidence::Report(Box::new(tray_report())))),
        now(),
    )
}

#[test]
fn the_driver_s_compute_domain_clique_is_read_entry_by_entry() {
    let ready = memberships("gb200-1");
    assert_eq!(ready.len(), 1);
    let m = &ready[0];
    assert_eq!(
        m.object,
        "nvidia-dra-driver-gpu/5b7f1c2e-8d4a-4f0e-9c3b-2a1d6e8f0b47.9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"
    );
    assert_eq!(
        m.compute_domain.as_deref(),
        Some("5b7f1c2e-8d4a-4f0e-9c3b-2a1d6e8f0b47")
    );
    assert_eq!(
        (m.clique_id.as_str(), m.index, m.is_ready()),
        (CLIQUE, 0, true)
    );
    assert!(!memberships("gb200-2")[0].is_ready());
    assert!(memberships("gb200-9").is_empty());
}

#[test]
fn compute_domain_cliques_checked_only_where_the_profile_asks() {
    const CHECK: &str = "fabric: {computeDomainCliques: Check}";
    const REQUIRE: &str = "fabric: {computeDomainCliques: Require}";
    let ready = memberships("gb200-1");
    let not_ready = memberships("gb200-2");
    judge_domains(CHECK, Some(ready.clone()))
        .expect(Layer::Fabric, Status::Ready, r::FABRIC_READY)
        .mentions(&["IMEX daemon Ready in 1 ComputeDomainClique(s)"]);
    judge_domains(CHECK, Some(vec![]))
        .expect(Layer::Fabric, Status::Ready, r::FABRIC_READY)
        .mentions(&["in no ComputeDomainClique (no ComputeDomain uses the node now)"]);
    let l = judge_domains(CHECK, Some(not_ready.clone()));
    let l = l.expect(Layer::Fabric, Status::NotReady, r::IMEX_DAEMON_NOT_READY);
    l.mentions(&[
        "5b7f1c2e-8d4a-4f0e-9c3b-2a1d6e8f0b47",
        "index 1",
        "NotReady",
    ]);
    assert_eq!(l.evidence, Source::ComputeDomainCliques);
    let mut silent = ready.clone();
    silent[0].status = String::new();
    judge_domains(CHECK, Some(silent))
        .expect(Layer::Fabric, Status::NotReady, r::IMEX_DAEMON_NOT_READY)
        .mentions(&["no status (NotReady)"]);
    let mut elsewhere = ready.clone();
    elsewhere[0].clique_id = OTHER.into();
    judge_domains(CHECK, Some(elsewhere))
        .expect(
            Layer::Fabric,
            Status::NotReady,
            r::COMPUTE_DOMAIN_CLIQUE_MISMATCH,
        )
        .mentions(&[OTHER, CLIQUE]);
    judge_domains(CHECK, None)
        .expect(
            Layer::Fabric,
            Status::Unknown,
            r::COMPUTE_DOMAIN_CLIQUES_UNREAD,
        )
        .mentions(&["not served or not readable"]);
    judge_domains(REQUIRE, Some(vec![])).expect(
        Layer::Fabric,
        Status::NotReady,
        r::NOT_IN_COMPUTE_DOMAIN,
    );
    judge_domains(REQUIRE, Some(ready)).expect(Layer::Fabric, Status::Ready, r::FABRIC_READY);
    // Ignore (the default) reads nothing, not even a missing API.
    judge_domains("fabric: {}", None).expect(Layer::Fabric, Status::Ready, r::FABRIC_READY);
    judge_domains("fabric: {}", Some(not_ready)).expect(
        Layer::Fabric,
        Status::Ready,
        r::FABRIC_READY,
    );
}

// ------------------------------------------------------------------ IMEX mode

/// A host without the nvidia-imex package: no config, no unit link.
fn no_imex() -> ImexHost {
    ImexHost::default()
}

/// Host-managed IMEX as the DRA driver's prerequisites set it up: the
/// package's config with the command service on the default socket, which
/// the running daemon created, and the unit enabled.
fn host_imex() -> ImexHost {
    ImexHost {
        config: ImexConfig {
            present: true,
            cmd_enabled: Some("1".into()),
            cmd_unix_domain_path: Some("/etc/nvidia-imex/imex_ctrl.sock".into()),
            error: None,
        },
        socket: Some(ImexSocket {
            path: "/etc/nvidia-imex/imex_ctrl.sock".into(),
            state: SocketState::Present,
        }),
        unit: ImexUnit {
            state: UnitState::Enabled,
            wanted_by: vec!["multi-user.target".into()],
            error: None,
        },
    }
}

fn with(mut h: ImexHost, change: impl FnOnce(&mut ImexHost)) -> ImexHost {
    change(&mut h);
    h
}

fn judge_imex(profile: &str, imex: Option<ImexHost>) -> gpuready_core::LayerReport {
    let mut report = tray_report();
    report.imex = imex;
    judge_tray(profile, &tray(), Some(report))
}

const DRIVER_MANAGED: &str = "fabric: {imexMode: DriverManaged}";
const HOST_MANAGED: &str = "fabric: {imexMode: HostManaged}";

#[test]
fn the_host_imex_service_against_the_dra_driver_s_imex_mode() {
    // A report of a probe without --host-root (or an older one) has no imex
    // field, and still parses.
    assert_eq!(tray_report().imex, None);
    let masked = |h: &mut ImexHost| h.unit.state = UnitState::Masked;
    let disabled = |h: &mut ImexHost| {
        h.unit.state = UnitState::NotEnabled;
        h.unit.wanted_by.clear();
    };
    let socket = |state| move |h: &mut ImexHost| h.socket.as_mut().expect("socket").state = state;
    let unread_etc = ImexHost {
        config: ImexConfig {
            error: Some(
                "/host/etc is not a directory: the host's /etc is not mounted there".into(),
            ),
            ..ImexConfig::default()
        },
        socket: None,
        unit: ImexUnit {
            state: UnitState::Unread,
            ..ImexUnit::default()
        },
    };
    // (profile, what the probe read, status, reason, what the message says)
    type Case<'a> = (&'a str, Option<ImexHost>, Status, &'a str, &'a [&'a str]);
    let cases: Vec<Case<'_>> = vec![
        // Driver-managed: the host service must not be enabled.
        (
            DRIVER_MANAGED,
            Some(no_imex()),
            Status::Ready,
            r::FABRIC_READY,
            &["host nvidia-imex not installed (no /etc/nvidia-imex/config.cfg)"],
        ),
        (
            DRIVER_MANAGED,
            Some(with(host_imex(), masked)),
            Status::Ready,
            r::FABRIC_READY,
            &[
                "host nvidia-imex.service masked, as driver-managed IMEX wants",
                "a control socket is at /etc/nvidia-imex/imex_ctrl.sock",
            ],
        ),
        (
            DRIVER_MANAGED,
            Some(with(
                with(host_imex(), disabled),
                socket(SocketState::Absent),
            )),
            Status::Ready,
            r::FABRIC_READY,
            &[
                "nvidia-imex.service not enabled, but not masked either",
                "whether it runs now is not visible",
            ],
        ),
        (
            DRIVER_MANAGED,
            Some(host_imex()),
            Status::NotReady,
            r::IMEX_SERVICE_CONFLICTS,
            &[
                "nvidia-imex.service enabled (wanted by multi-user.target)",
                "systemctl disable --now nvidia-imex.service && systemctl mask nvidia-imex.service",
                "fabric.imexMode HostManaged",
            ],
        ),
        // Host-managed: installed, not masked, the command service on a socket
        // the running daemon created.
        (
            HOST_MANAGED,
            Some(host_imex()),
            Status::Ready,
            r::FABRIC_READY,
            &[
                "control socket /etc/nvidia-imex/imex_ctrl.sock present",
                "no minimum: host-managed IMEX",
            ],
        ),
        (
            HOST_MANAGED,
            Some(with(host_imex(), disabled)),
            Status::Ready,
            r::FABRIC_READY,
            &["not enabled: it will not start after a reboot"],
        ),
        (
            HOST_MANAGED,
            Some(no_imex()),
            Status::NotReady,
            r::IMEX_SERVICE_MISSING,
            &["no /etc/nvidia-imex/config.cfg", "not installed"],
        ),
        (
            HOST_MANAGED,
            Some(with(host_imex(), masked)),
            Status::NotReady,
            r::IMEX_SERVICE_MISSING,
            &["masked", "systemctl unmask nvidia-imex.service"],
        ),
        (
            HOST_MANAGED,
            Some(with(host_imex(), |h| {
                h.config.cmd_enabled = Some("0".into())
            })),
            Status::NotReady,
            r::IMEX_CONFIG_INCOMPLETE,
            &[
                "IMEX_CMD_ENABLED is \"0\"",
                "IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock",
            ],
        ),
        (
            HOST_MANAGED,
            Some(with(host_imex(), |h| h.config.cmd_enabled = None)),
            Status::NotReady,
            r::IMEX_CONFIG_INCOMPLETE,
            &["IMEX_CMD_ENABLED is not set"],
        ),
        (
            HOST_MANAGED,
            Some(with(host_imex(), |h| {
                h.config.cmd_unix_domain_path = None;
                h.socket = None;
            })),
            Status::NotReady,
            r::IMEX_CONFIG_INCOMPLETE,
            &["IMEX_CMD_UNIX_DOMAIN_PATH is not set"],
        ),
        (
            HOST_MANAGED,
            Some(with(host_imex(), socket(SocketState::Absent))),
            Status::NotReady,
            r::IMEX_SOCKET_MISSING,
            &[
                "no control socket at /etc/nvidia-imex/imex_ctrl.sock",
                "systemctl restart nvidia-imex.service",
            ],
        ),
        (
            HOST_MANAGED,
            Some(with(host_imex(), socket(SocketState::NotASocket))),
            Status::NotReady,
            r::IMEX_SOCKET_MISSING,
            &["is not a socket"],
        ),
        (
            HOST_MANAGED,
            Some(with(host_imex(), |h| {
                let s = h.socket.as_mut().expect("socket");
                s.path = "/run/nvidia-imex/ctrl.sock".into();
                s.state = SocketState::NotVisible;
            })),
            Status::Ready,
            r::FABRIC_READY,
            &[
                "control socket /run/nvidia-imex/ctrl.sock not checked",
                "its imex.hostSocketPath must name it",
            ],
        ),
        (
            HOST_MANAGED,
            Some(with(
                with(host_imex(), disabled),
                socket(SocketState::NotVisible),
            )),
            Status::Unknown,
            r::IMEX_STATE_UNREAD,
            &["whether the host's IMEX daemon runs is not visible"],
        ),
        // Not read: an older probe, one without the host's /etc, or files it
        // could not read. Never "not installed".
        (
            DRIVER_MANAGED,
            None,
            Status::Unknown,
            r::IMEX_STATE_UNREAD,
            &["probe.imex.enabled=true", "--host-root"],
        ),
        (
            HOST_MANAGED,
            Some(unread_etc.clone()),
            Status::Unknown,
            r::IMEX_STATE_UNREAD,
            &["not mounted"],
        ),
        (
            DRIVER_MANAGED,
            Some(with(no_imex(), |h| {
                h.unit.state = UnitState::Unread;
                h.unit.error =
                    Some("reading /etc/systemd/system: No such file or directory".into());
            })),
            Status::Unknown,
            r::IMEX_STATE_UNREAD,
            &["the unit's links", "/etc/systemd/system"],
        ),
        // Without imexMode nothing of it is judged, whatever the probe read.
        (
            "fabric: {}",
            Some(host_imex()),
            Status::Ready,
            r::FABRIC_READY,
            &[],
        ),
        (
            "fabric: {}",
            Some(unread_etc),
            Status::Ready,
            r::FABRIC_READY,
            &[],
        ),
        ("fabric: {}", None, Status::Ready, r::FABRIC_READY, &[]),
    ];
    for (profile, imex, status, reason, words) in cases {
        let what = format!("{profile} over {imex:?}");
        let rep = judge_imex(profile, imex);
        let l = rep
            .get(Layer::Fabric)
            .unwrap_or_else(|| panic!("{what}: no Fabric layer"));
        assert_eq!(
            (l.status, l.reason.as_str()),
            (status, reason),
            "{what}: {l:?}"
        );
        for w in words {
            assert!(l.message.contains(w), "{what}: {w:?} not in {}", l.message);
        }
        assert_eq!(l.evidence, Source::ProbeReport, "{what}");
    }
}

#[test]
fn host_managed_imex_has_no_default_driver_minimum() {
    let old = tray().driver("565.57.01");
    let judge = |profile: &str| {
        let mut report = tray_report();
        report.imex = Some(host_imex());
        judge_tray(profile, &old, Some(report))
    };
    judge(HOST_MANAGED).expect(Layer::Fabric, Status::Ready, r::FABRIC_READY);
    judge(DRIVER_MANAGED)
        .expect(Layer::Fabric, Status::NotReady, r::DRIVER_TOO_OLD_FOR_IMEX)
        .mentions(&["565.57.01 < 570.158.01: IMEX daemons with DNS names"]);
    // A minimum the profile names still applies.
    judge("fabric: {imexMode: HostManaged, minDriverVersion: \"570.0\"}")
        .expect(Layer::Fabric, Status::NotReady, r::DRIVER_TOO_OLD_FOR_IMEX)
        .mentions(&["565.57.01 < 570.0 (fabric.minDriverVersion)"]);
    // Without a probe report (whenProbeMissing Ignore) the message says the
    // host's IMEX service was not read either.
    judge_tray(
        "fabric: {imexMode: DriverManaged, whenProbeMissing: Ignore}",
        &tray(),
        None,
    )
    .expect(Layer::Fabric, Status::Ready, r::FABRIC_READY)
    .mentions(&["per-GPU fabric state and the host's IMEX service not read"]);
}
