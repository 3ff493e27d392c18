//! The node book's rules through whole sequences: the brake's turns and
//! release, refusals and their backoff, the error backoff, what is queued again.

use super::*;
use crate::plan::{ConditionChange, TaintChange, TaintChangeKind};

const CFG: BrakeConfig = BrakeConfig {
    threshold: 0.5,
    window_seconds: 300,
    min_nodes: 3,
};

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).expect("time")
}

/// A labelled-ready node of profile `p` in `state`.
fn turn(node: &str, state: NodeState) -> Turn<'_> {
    Turn {
        node,
        profile: Some("p"),
        state: Some(state),
        labelled_ready: true,
    }
}

/// The plan of a node governed by profile `p`.
fn governed<'a>(node: &'a str, changes: &'a NodeChanges) -> PlannedWrite<'a> {
    PlannedWrite {
        node,
        profile: Some("p"),
        changes,
        governance: GovernanceKind::Governed,
    }
}

fn note<'a>(
    profile: &'a str,
    why: &'a str,
    what: RefusedWrite,
    changes: Option<&'a NodeChanges>,
) -> RefusalNote<'a> {
    RefusalNote {
        profile,
        why,
        what,
        changes,
    }
}

fn held_taint() -> NodeChanges {
    NodeChanges {
        conditions: Some(ConditionChange {
            set: vec![],
            remove: vec!["GpuReadyDriver".into()],
        }),
        taint_held_by_brake: true,
        ..NodeChanges::default()
    }
}

fn a_taint() -> NodeChanges {
    NodeChanges {
        taint: Some(TaintChange {
            taints: vec![],
            kind: TaintChangeKind::Add,
            ours: None,
        }),
        ..NodeChanges::default()
    }
}

/// A reconcile of `node` from start to finish: its turn, then its step.
fn reconcile(
    b: &mut NodeBook,
    node: &str,
    state: NodeState,
    now: Timestamp,
) -> (bool, WriteStep, Vec<String>) {
    b.start(node);
    let hold = b.turn(&turn(node, state), now);
    let changes = if hold { held_taint() } else { a_taint() };
    let s = b.step(governed(node, &changes), CrdView::Confirmed, now);
    b.finish(node);
    (hold, s, queued(b))
}

/// What the book has queued for kube now (handed out, as kube would get it).
fn queued(b: &mut NodeBook) -> Vec<String> {
    std::iter::from_fn(|| b.next(usize::MAX)).collect()
}

/// Issue 33's sequence through the whole book: 60 of 100 turn at once and
/// engage the brake; the window passes with 60 still not ready; one more
/// turns. The late turn never releases the brake, and the release by
/// counts re-queues every node the brake held.
#[test]
fn a_turn_after_the_window_never_releases_an_engaged_brake() {
    let mut b = NodeBook::new(CFG);
    assert!(!b.counts("p", 100, 0, at(0)));
    let mut held = BTreeSet::new();
    for i in 0..60 {
        let n = format!("n{i:02}");
        let (hold, s, _) = reconcile(&mut b, &n, NodeState::NotReady, at(0));
        if hold {
            assert!(matches!(s, WriteStep::HoldByBrake { .. }));
            held.insert(n);
        }
    }
    assert!(b.engaged("p"), "60 of 100 turned at once");
    // The turn that trips it is held too: 50 % may taint, not one more.
    assert_eq!(held.len(), 10);
    let engaged = b.counts("p", 100, 60, at(400));
    assert_eq!(
        (engaged, queued(&mut b).len()),
        (true, 0),
        "still 60 % not ready"
    );
    let (hold, ..) = reconcile(&mut b, "n60", NodeState::NotReady, at(401));
    assert!(hold, "a late turn released the brake");
    held.insert("n60".to_owned());
    assert!(b.counts("p", 100, 61, at(402)));
    assert!(!b.counts("p", 100, 50, at(403)));
    assert_eq!(
        queued(&mut b).into_iter().collect::<BTreeSet<_>>(),
        held,
        "every node held is re-queued on the release"
    );
    b.counts("p", 100, 50, at(404));
    assert!(queued(&mut b).is_empty(), "once");
}

#[test]
fn maintenance_and_gates_are_not_turns() {
    let mut b = NodeBook::new(CFG);
    b.counts("p", 4, 0, at(0));
    for (i, state) in [NodeState::Maintenance, NodeState::WaitingForGate]
        .into_iter()
        .cycle()
        .take(4)
        .enumerate()
    {
        let (hold, ..) = reconcile(&mut b, &format!("n{i}"), state, at(0));
        assert!(!hold);
    }
    assert!(!b.engaged("p"));
}

#[test]
fn a_hold_decided_after_the_release_requeues_the_node_itself() {
    let mut b = NodeBook::new(CFG);
    b.counts("p", 4, 0, at(0));
    for n in ["a", "b", "c"] {
        reconcile(&mut b, n, NodeState::NotReady, at(0));
    }
    assert!(b.engaged("p"));
    // "d" planned under the brake; the counts release it before its step.
    b.start("d");
    assert!(b.turn(&turn("d", NodeState::NotReady), at(1)));
    assert!(!b.counts("p", 4, 1, at(2)));
    // The release queued c, which the brake had held: its reconcile is
    // taint work ahead of d until it is done.
    assert_eq!(queued(&mut b), ["c"]);
    b.start("c");
    b.finish("c");
    let s = b.step(governed("d", &held_taint()), CrdView::Confirmed, at(2));
    assert!(matches!(s, WriteStep::HoldByBrake { .. }));
    assert!(queued(&mut b).is_empty(), "d runs: queued, not handed");
    b.finish("d");
    assert_eq!(queued(&mut b), ["d"]);
}

#[test]
fn a_write_that_passes_clears_the_refusal_and_a_deleted_node_is_forgotten() {
    let mut b = NodeBook::new(CFG);
    let none = NodeChanges::default();
    b.refused(
        "a",
        note("p", "denied", RefusedWrite::Taint, Some(&none)),
        at(0),
    );
    b.refused(
        "b",
        note("p", "denied too", RefusedWrite::Other, Some(&none)),
        at(0),
    );
    b.refused(
        "c",
        note("q", "elsewhere", RefusedWrite::Other, None),
        at(0),
    );
    assert_eq!(
        b.refusals_of("p", |_| true),
        Some(RefusedNodes {
            taint: 1,
            other: 1,
            first: "a".into(),
            why: format!("{}: denied", keys::TAINT_REFUSED),
        })
    );
    assert_eq!(
        b.refusals_of("p", |n| n != "a").map(|r| r.first),
        Some("b".into()),
        "only nodes that exist"
    );
    assert_eq!(b.written("a", Some("9".into()), true), Some("p".into()));
    assert_eq!(b.written("a", Some("10".into()), true), None, "said once");
    b.forget("b");
    assert_eq!(b.refusals_of("p", |_| true), None);
    assert!(b.refusals_of("q", |_| true).is_some());
}

/// Issue 49: another controller's writes trigger a refused node every few
/// seconds; the same refused changes are sent again only after 1, 4, 16,
/// 64, 256 s, then every 300 s — and changed ones at once.
#[test]
fn refused_changes_back_off_until_they_change() {
    let mut b = NodeBook::new(CFG);
    let mut sent = vec![];
    for second in 0..=1200 {
        b.start("a");
        let s = b.step(governed("a", &a_taint()), CrdView::Confirmed, at(second));
        if matches!(s, WriteStep::Write { .. }) {
            sent.push(second);
            b.refused(
                "a",
                note("p", "denied", RefusedWrite::Taint, Some(&a_taint())),
                at(second),
            );
        }
        b.finish("a");
    }
    assert_eq!(sent, [0, 1, 5, 21, 85, 341, 641, 941]);
    assert_eq!(refusal_backoff_seconds(40), 300);
    // A changed plan goes at once, and is reported still.
    b.start("a");
    let s = b.step(governed("a", &held_taint()), CrdView::Confirmed, at(1201));
    assert!(!matches!(s, WriteStep::HoldByRefusal { .. }));
    assert!(b.refusals_of("p", |_| true).is_some());
    b.finish("a");
}

#[test]
fn a_gone_profile_hands_back_what_its_brake_held() {
    let mut b = NodeBook::new(CFG);
    b.counts("p", 4, 0, at(0));
    for n in ["a", "b", "c"] {
        reconcile(&mut b, n, NodeState::NotReady, at(0));
    }
    b.retain_profiles(|p| p != "p");
    assert_eq!(queued(&mut b), ["c"]);
    assert!(!b.engaged("p"));
}

#[test]
fn the_error_backoff_grows_per_node_and_starts_over_on_success() {
    let mut b = NodeBook::new(CFG);
    let waits: Vec<u64> = (0..10).map(|_| b.failed("a").as_secs()).collect();
    // Base 1, 2, 4 … 128, 150, spread by up to as much again.
    for (w, base) in waits.iter().zip([1, 2, 4, 8, 16, 32, 64, 128, 150, 150]) {
        assert!((base..2 * base).contains(w), "{waits:?}");
    }
    assert!(b.failed("b").as_secs() < 2, "per node");
    b.succeeded("a");
    assert!(b.failed("a").as_secs() < 2, "starts over");
    b.forget("a");
    assert!(b.failed("a").as_secs() < 2, "a deleted node is forgotten");
}
