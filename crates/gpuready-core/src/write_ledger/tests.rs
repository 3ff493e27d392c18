//! The ledger's rules as tables: what `next` hands kube, in which order, and
//! when deferred nodes come back.

use super::*;
use crate::NodeChanges;
use crate::write_step::tests::{GOV, cond_only, full, taint_only};
use crate::write_step::{CrdView, step};

/// Tickets of pending taint work by node, to look inside.
fn pending_nodes(l: &WriteLedger) -> BTreeMap<u64, String> {
    l.queued
        .iter()
        .filter(|(_, t)| l.pending.contains(t))
        .map(|(n, t)| (*t, n.clone()))
        .chain(
            l.running
                .iter()
                .filter(|(_, r)| r.pending)
                .map(|(n, r)| (r.ticket, n.clone())),
        )
        .collect()
}

/// One reconcile through the ledger: start, step, decided, finish.
fn reconcile(l: &mut WriteLedger, node: &str, changes: &NodeChanges) -> (WriteStep, Vec<String>) {
    l.start(node);
    let s = step(changes, GOV, CrdView::Confirmed, l.view(node));
    let mut out = l.decided(node, &s);
    out.extend(l.finish(node));
    (s, out)
}

/// What `next` hands out now, in order, until it stops; `can_hand` says
/// so exactly before each.
fn drain(l: &mut WriteLedger, slots: usize) -> Vec<String> {
    std::iter::from_fn(|| {
        let can = l.can_hand(slots);
        let next = l.next(slots);
        assert_eq!(can, next.is_some(), "can_hand before {next:?}");
        next
    })
    .collect()
}

/// A step of a table: what happens, then what `next(3)` hands out.
enum Do {
    Ask(&'static str),
    Start(&'static str),
    Finish(&'static str),
    Forget(&'static str),
}

fn run_table(slots: usize, table: &[(&[Do], &[&str], &str)]) {
    let mut l = WriteLedger::default();
    for (i, (steps, want, why)) in table.iter().enumerate() {
        for s in *steps {
            match s {
                Do::Ask(n) => {
                    l.ask(n, None);
                }
                Do::Start(n) => l.start(n),
                Do::Finish(n) => {
                    l.finish(n);
                }
                Do::Forget(n) => {
                    l.forget(n);
                }
            }
        }
        assert_eq!(drain(&mut l, slots), *want, "row {i}: {why}");
    }
}

#[test]
fn nodes_go_to_kube_oldest_first_and_only_while_it_has_room() {
    use Do::*;
    run_table(
        3,
        &[
            (
                &[Ask("a"), Ask("b"), Ask("c"), Ask("d"), Ask("a")],
                &["a", "b", "c"],
                "three slots",
            ),
            (&[Ask("b"), Start("a")], &[], "a runs: its slot is taken"),
            (&[Finish("a")], &["d"], "a's slot is d's"),
            (
                &[Start("b"), Start("c"), Start("d"), Finish("c")],
                &[],
                "b was not queued twice",
            ),
            (&[Ask("b")], &[], "b runs: kube would hold it"),
            (&[Finish("b")], &["b"], "finished: handed again"),
        ],
    );
}

#[test]
fn a_running_node_does_not_hold_up_the_ones_behind_it() {
    use Do::*;
    run_table(
        2,
        &[
            (&[Ask("a")], &["a"], ""),
            (&[Start("a"), Ask("a"), Ask("b")], &["b"], "a runs"),
            (&[Start("b"), Finish("a")], &["a"], "its turn kept"),
        ],
    );
}

#[test]
fn a_start_kube_did_not_get_from_here_takes_a_slot_and_a_drop_frees_one() {
    use Do::*;
    run_table(
        2,
        &[
            (&[Ask("a")], &["a"], ""),
            // A timed requeue of x starts inside kube: it takes a slot too.
            (&[Start("x"), Ask("b")], &[], "a handed, x running"),
            (&[Forget("a")], &["b"], "kube dropped a (not found)"),
        ],
    );
}

#[test]
fn taint_work_goes_to_kube_before_handed_back_nodes() {
    let mut l = WriteLedger::default();
    l.queue("x");
    for n in ["d0", "d1"] {
        l.queue(n);
    }
    assert_eq!(drain(&mut l, 8), ["x", "d0", "d1"]);
    for n in ["d0", "d1"] {
        let (s, back) = reconcile(&mut l, n, &cond_only());
        assert_eq!(s, WriteStep::Defer);
        assert!(back.is_empty(), "x is still taint work");
    }
    let (_, back) = reconcile(&mut l, "x", &full());
    assert_eq!(back, ["d0", "d1"], "oldest first, all at once");
    // A joiner asked for now is taint work: it passes both.
    l.ask("j", None);
    assert_eq!(pending_nodes(&l).values().collect::<Vec<_>>(), ["j"]);
    assert_eq!(drain(&mut l, 8), ["j", "d0", "d1"]);
    l.start("d0");
    assert!(l.view("d0").released && l.view("d0").taint_work_ahead);
}

#[test]
fn the_echo_of_a_write_is_skipped_only_while_the_node_waits() {
    let mut l = WriteLedger::default();
    l.note_write("a", "7".into());
    assert_eq!(l.ask("a", Some("7")), Trigger::Queue, "not waiting");
    l.note_write("a", "7".into());
    l.defer("b"); // some other node waits: irrelevant to a
    l.queue("c");
    l.defer("a");
    assert_eq!(
        l.ask("a", Some("8")),
        Trigger::Queue,
        "someone else's newer write is judged"
    );
    assert_eq!(l.ask("a", Some("7")), Trigger::SkipEcho);
    assert_eq!(l.last_writes(), 0, "forgotten once its echo is seen");
    assert_eq!(l.ask("a", Some("7")), Trigger::Queue);
}

#[test]
fn a_cache_behind_the_last_write_is_said_once() {
    let mut l = WriteLedger::default();
    l.note_write("a", "7".into());
    assert!(l.cache_may_be_behind("a", Some("6")));
    assert!(!l.cache_may_be_behind("a", Some("6")), "answered once");
    l.note_write("a", "7".into());
    assert!(!l.cache_may_be_behind("a", Some("7")));
}

#[test]
fn a_burst_writes_every_taint_before_any_condition() {
    let mut l = WriteLedger::default();
    assert!(!l.taint_work_pending());
    for n in ["a", "b", "c"] {
        l.queue(n);
    }
    // A profile's status waits as long as any of them may bring a taint.
    assert!(l.taint_work_pending());
    // a: taint now, condition deferred; b: condition only, deferred.
    let (s, out) = reconcile(&mut l, "a", &full());
    assert!(matches!(
        s,
        WriteStep::Write {
            rest_deferred: true,
            ..
        }
    ));
    assert!(out.is_empty());
    let (s, out) = reconcile(&mut l, "b", &cond_only());
    assert_eq!(s, WriteStep::Defer);
    assert!(out.is_empty(), "c is still queued");
    assert_eq!(l.deferred(), 2);
    // c, the last queued node, writes its taint; then both are handed back.
    l.start("c");
    let s = step(&full(), GOV, CrdView::Confirmed, l.view("c"));
    assert!(
        matches!(
            s,
            WriteStep::Write {
                rest_deferred: false,
                ..
            }
        ),
        "nothing ahead of c"
    );
    assert!(
        l.decided("c", &s).is_empty(),
        "c's taint is still being written"
    );
    assert!(l.taint_work_pending(), "c's taint is still being written");
    let mut back = l.finish("c");
    back.sort();
    assert_eq!(back, ["a", "b"]);
    assert!(pending_nodes(&l).is_empty());
    assert!(!l.taint_work_pending(), "only deferred writes are left");
    // Handed back, each writes what waited even if new work is queued.
    l.queue("d");
    l.start("a");
    assert!(l.view("a").released && l.view("a").taint_work_ahead);
}

#[test]
fn a_profile_change_still_being_mapped_holds_conditions_back() {
    let mut l = WriteLedger::default();
    let mapping = l.unnamed_work();
    l.queue("a");
    // a, found first, writes its taint at once; its condition waits for
    // the nodes not found yet, which may bring taints too.
    let (s, out) = reconcile(&mut l, "a", &full());
    assert!(matches!(
        s,
        WriteStep::Write {
            rest_deferred: true,
            ..
        }
    ));
    assert!(out.is_empty());
    let (s, out) = reconcile(&mut l, "b", &cond_only());
    assert_eq!(s, WriteStep::Defer, "the mapping is taint work ahead");
    assert!(out.is_empty());
    l.queue("c");
    assert!(l.unnamed_done(mapping).is_empty(), "c is still queued");
    let (_, mut back) = reconcile(&mut l, "c", &taint_only());
    back.sort();
    assert_eq!(back, ["a", "b"]);
    assert!(pending_nodes(&l).is_empty() && l.pending.is_empty());
}

#[test]
fn taint_work_queued_after_a_deferral_goes_first() {
    let mut l = WriteLedger::default();
    l.queue("x");
    l.queue("a");
    let (s, _) = reconcile(&mut l, "a", &cond_only());
    assert_eq!(s, WriteStep::Defer);
    // Nodes join behind a, each with a taint to take off.
    for i in 0..100 {
        l.queue(&format!("n{i}"));
    }
    let (_, back) = reconcile(&mut l, "x", &full());
    assert!(
        back.is_empty(),
        "the joiners' untaints go before a's condition"
    );
    for i in 0..99 {
        let (_, back) = reconcile(&mut l, &format!("n{i}"), &taint_only());
        assert!(back.is_empty());
    }
    let (_, back) = reconcile(&mut l, "n99", &taint_only());
    // No taint work is left: a, then x (its condition deferred after a's).
    assert_eq!(back, ["a", "x"]);
}

#[test]
fn taint_work_that_never_ends_holds_a_deferral_only_so_long() {
    let mut l = WriteLedger::default();
    l.queue("x");
    l.queue("a");
    let (s, _) = reconcile(&mut l, "a", &cond_only());
    assert_eq!(s, WriteStep::Defer);
    // A stream of new work, each judged and done, one always still queued.
    l.queue("n0");
    let (_, back) = reconcile(&mut l, "x", &taint_only());
    assert!(back.is_empty());
    let mut handed_back_after = None;
    for i in 1..=HOLD_TICKETS + 1 {
        l.queue(&format!("n{i}"));
        let (_, back) = reconcile(&mut l, &format!("n{}", i - 1), &taint_only());
        if back == ["a"] {
            handed_back_after = Some(i);
            break;
        }
        assert!(back.is_empty());
    }
    assert!(
        handed_back_after.is_some_and(|i| i + 1 >= HOLD_TICKETS),
        "handed back after {handed_back_after:?} later reconciles"
    );
}

#[test]
fn a_deleted_node_holds_no_one_back() {
    let mut l = WriteLedger::default();
    l.queue("gone");
    l.queue("a");
    let (s, back) = reconcile(&mut l, "a", &cond_only());
    assert_eq!(s, WriteStep::Defer);
    assert!(back.is_empty());
    assert_eq!(l.forget("gone"), ["a"]);
    assert_eq!(l.forget("a"), Vec::<String>::new());
    assert_eq!(drain(&mut l, 8), Vec::<String>::new(), "nothing left");
}
