//! Tests of `tally`, in their own file beside it.

use super::*;

fn verdict(profiles: &[&str], ready: bool, layer_reason: Option<&str>) -> NodeVerdict {
    NodeVerdict {
        governance: if profiles.len() > 1 {
            GovernanceKind::Conflict
        } else {
            GovernanceKind::Governed
        },
        profiles: profiles.iter().map(|p| (*p).to_owned()).collect(),
        ready,
        state: if ready {
            NodeState::Ready
        } else {
            NodeState::NotReady
        },
        lifecycle_detail: String::new(),
        observe: false,
        past_deadline: false,
        reason: if ready { "Ready" } else { "DriverTooOld" }.into(),
        summary_layer: "Driver".into(),
        tainted_devices: vec![],
        escalations: vec![],
        held_by: vec![],
        not_evicted_pods: 0,
        last_join: None,
        layers: vec![LayerVerdict {
            layer: Layer::Driver,
            status: if layer_reason.is_some() {
                Status::NotReady
            } else {
                Status::Ready
            },
            reason: layer_reason.unwrap_or_default().into(),
        }],
    }
}

#[test]
fn node_counts_put_each_node_in_one_state_and_undo_cleanly() {
    let mut c = NodeCounts::default();
    c.add(GovernanceKind::Governed, NodeState::Ready);
    c.add(GovernanceKind::Governed, NodeState::NotReady);
    c.add(GovernanceKind::Governed, NodeState::Maintenance);
    c.add(GovernanceKind::Governed, NodeState::WaitingForGate);
    c.add(GovernanceKind::Conflict, NodeState::NotReady);
    c.add(GovernanceKind::Ungoverned, NodeState::NotReady);
    let want = NodeCounts {
        governed: 4,
        ready: 1,
        not_ready: 1,
        maintenance: 1,
        waiting_for_gate: 1,
        conflicts: 1,
        ungoverned: 1,
    };
    assert_eq!(c, want);
    assert_eq!(c.matched(), 5);
    c.remove(GovernanceKind::Governed, NodeState::NotReady);
    c.remove(GovernanceKind::Governed, NodeState::Maintenance);
    c.remove(GovernanceKind::Conflict, NodeState::NotReady);
    assert_eq!(
        (c.governed, c.not_ready, c.maintenance, c.conflicts),
        (2, 0, 0, 0)
    );
}

#[test]
fn add_then_remove_leaves_nothing_behind() {
    let mut t = Tally::default();
    assert_eq!(t.set("a", Some(verdict(&["p"], true, None))).len(), 1);
    assert_eq!(
        t.set("b", Some(verdict(&["p"], false, Some("DriverTooOld")))),
        BTreeSet::from(["p".to_owned()])
    );
    let p = t.profile("p").expect("tally of p");
    assert_eq!(
        (p.matched(), p.counts.ready, p.counts.not_ready),
        (2, 1, 1),
        "{p:?}"
    );
    assert_eq!(p.layer_ready(Layer::Driver), 1);
    assert_eq!(p.layers[&Layer::Driver].reasons["DriverTooOld"], 1);
    // The same verdict again changes nothing.
    assert!(
        t.set("b", Some(verdict(&["p"], false, Some("DriverTooOld"))))
            .is_empty()
    );
    t.set("b", None);
    t.set("a", None);
    assert!(t.profile("p").is_none());
    assert_eq!(t.nodes(), 0);
}

#[test]
fn systems_holding_nodes_are_counted_and_undone_cleanly() {
    use NeighbourSystem::{NodeWright, NvSentinel};
    let held = |systems: &[NeighbourSystem]| NodeVerdict {
        held_by: systems.to_vec(),
        ..verdict(&["p"], false, None)
    };
    let mut t = Tally::default();
    t.set("a", Some(held(&[NvSentinel, NodeWright])));
    t.set("b", Some(held(&[NvSentinel])));
    let counts = |t: &Tally| {
        t.profile("p")
            .map(|p| p.held_by.clone().into_iter().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(counts(&t), [(NvSentinel, 2), (NodeWright, 1)]);
    t.set("a", Some(held(&[])));
    assert_eq!(counts(&t), [(NvSentinel, 1)]);
    t.set("b", None);
    assert_eq!(counts(&t), []);
}

#[test]
fn a_conflict_counts_in_every_profile_and_moves_out_cleanly() {
    let mut t = Tally::default();
    t.set("n", Some(verdict(&["p", "q"], false, None)));
    for name in ["p", "q"] {
        let p = t.profile(name).expect("tally");
        assert_eq!(p.conflicts.len(), 1);
        assert_eq!(p.not_ready.len(), 1);
        assert_eq!(p.counts.governed, 0);
        assert_eq!(p.counts.conflicts, 1);
    }
    let touched = t.set("n", Some(verdict(&["p"], true, None)));
    assert_eq!(touched, BTreeSet::from(["p".to_owned(), "q".to_owned()]));
    assert!(t.profile("q").is_none());
    let p = t.profile("p").expect("tally");
    assert_eq!((p.matched(), p.counts.ready, p.conflicts.len()), (1, 1, 0));
}

#[test]
fn a_tally_built_incrementally_equals_one_built_at_once() {
    let mut t = Tally::default();
    let mut want = ProfileTally::default();
    for i in 0..50 {
        let v = verdict(&["p"], i % 3 == 0, (i % 3 != 0).then_some("DriverTooOld"));
        t.set(&format!("n{i}"), Some(v.clone()));
        // Flip every other node through a different verdict and back.
        if i % 2 == 0 {
            t.set(
                &format!("n{i}"),
                Some(verdict(&["p"], false, Some("Other"))),
            );
            t.set(&format!("n{i}"), Some(v.clone()));
        }
        want.add(&format!("n{i}"), &v);
    }
    assert_eq!(t.profile("p"), Some(&want));
}
