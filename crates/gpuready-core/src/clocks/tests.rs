//! Tests of `clocks`, in their own file beside it.

use super::*;
use gpuready_api::Layer;

fn t(s: u32) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + i64::from(s)).expect("time")
}

fn seen(state: NodeState, ready: &[Layer]) -> Observation {
    Observation {
        state,
        ready: ready.iter().map(|l| Step::Layer(*l)).collect(),
        created: Some(t(0)),
        never_ready: true,
        repaired_at: None,
        not_ready_since: None,
        untaints: false,
    }
}

#[test]
fn a_node_first_seen_ready_under_the_taint_waited_from_registration() {
    // Registered with gpuready's taint, every layer up by the first
    // verdict (a join storm of warm nodes): the wait ends as it is seen.
    let mut c = None;
    let mut o = seen(NodeState::Ready, &[Layer::Node, Layer::Driver]);
    o.untaints = true;
    let r = advance(&mut c, &o, t(4)).expect("ready");
    assert_eq!(
        r.to_string(),
        format!("kind=join started={} seconds=4 Node=4 Driver=4", t(0))
    );
    // The same node seen long after registration waited on a fault.
    let mut c = None;
    o.never_ready = false;
    o.not_ready_since = Some(t(100));
    let r = advance(&mut c, &o, t(130)).expect("ready");
    assert_eq!((r.kind, r.seconds), (EpisodeKind::Fault, 30));
}

#[test]
fn a_join_counts_from_registration_layer_by_layer() {
    let mut c = None;
    let not = NodeState::NotReady;
    assert_eq!(advance(&mut c, &seen(not, &[Layer::Node]), t(5)), None);
    assert_eq!(
        advance(&mut c, &seen(not, &[Layer::Node, Layer::Driver]), t(60)),
        None
    );
    let gate = seen(
        NodeState::WaitingForGate,
        &[Layer::Node, Layer::Driver, Layer::DevicePlugin],
    );
    assert_eq!(advance(&mut c, &gate, t(90)), None);
    let done = seen(
        NodeState::Ready,
        &[Layer::Node, Layer::Driver, Layer::DevicePlugin],
    );
    let r = advance(&mut c, &done, t(120)).expect("ready");
    assert_eq!(
        r.to_string(),
        format!(
            "kind=join started={} seconds=120 Node=5 Driver=60 DevicePlugin=90 Gates=120",
            t(0)
        )
    );
    // Until the caller drops it, the same record, however often asked.
    assert_eq!(advance(&mut c, &done, t(130)), Some(r));
}

#[test]
fn a_ready_node_has_no_clock_and_a_fault_counts_from_the_condition() {
    let mut c = None;
    let mut o = seen(NodeState::Ready, &[Layer::Node]);
    assert_eq!(advance(&mut c, &o, t(10)), None);
    assert_eq!(c, None);
    o.state = NodeState::NotReady;
    o.never_ready = false;
    o.not_ready_since = Some(t(100));
    advance(&mut c, &o, t(103));
    o.state = NodeState::Ready;
    let r = advance(&mut c, &o, t(130)).expect("ready");
    assert_eq!((r.kind, r.seconds), (EpisodeKind::Fault, 30));
}

#[test]
fn a_node_seen_first_long_after_registration_is_no_join() {
    let mut c = None;
    let o = seen(NodeState::NotReady, &[]);
    advance(&mut c, &o, t(0) + jiff::SignedDuration::from_hours(25));
    assert_eq!(c.map(|c| c.kind), Some(EpisodeKind::Fault));
}

#[test]
fn maintenance_counts_from_its_end_and_repair_from_its_mark() {
    let mut c = None;
    let mut o = seen(NodeState::Maintenance, &[Layer::Node]);
    o.never_ready = false;
    advance(&mut c, &o, t(10));
    o.state = NodeState::NotReady;
    advance(&mut c, &o, t(200));
    o.state = NodeState::Ready;
    let r = advance(&mut c, &o, t(230)).expect("ready");
    assert_eq!(
        (r.kind, r.started, r.seconds),
        (EpisodeKind::Maintenance, t(200), 30)
    );

    let mut c = None;
    let mut o = seen(NodeState::NotReady, &[]);
    o.never_ready = false;
    o.not_ready_since = Some(t(0));
    advance(&mut c, &o, t(10));
    o.repaired_at = Some(t(500));
    advance(&mut c, &o, t(510));
    o.state = NodeState::Ready;
    let r = advance(&mut c, &o, t(560)).expect("ready");
    assert_eq!((r.kind, r.seconds), (EpisodeKind::Repair, 60));
}

#[test]
fn failing_again_before_the_record_is_written_starts_a_new_wait() {
    let mut c = None;
    let mut o = seen(NodeState::NotReady, &[]);
    advance(&mut c, &o, t(10));
    o.state = NodeState::Ready;
    assert!(advance(&mut c, &o, t(20)).is_some());
    o.state = NodeState::NotReady;
    o.never_ready = false;
    assert_eq!(advance(&mut c, &o, t(30)), None);
    assert_eq!(
        c.map(|c| (c.kind, c.started)),
        Some((EpisodeKind::Fault, t(30)))
    );
}
