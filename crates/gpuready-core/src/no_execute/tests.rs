//! Tests of `no_execute`, in their own file beside it.

use super::*;

fn node_ask(due: bool, now: bool) -> Ask {
    Ask {
        node_due: due,
        node_now: now,
        devices: 8,
        percent: 10,
        ..Ask::default()
    }
}

#[test]
fn limit_is_a_share_with_a_floor_of_one() {
    assert_eq!(limit(10, 200), 20);
    assert_eq!(limit(10, 5), 1);
    assert_eq!(limit(0, 200), 0);
    assert_eq!(limit(100, 7), 7);
    assert_eq!(limit(20, 20), 4);
}

/// Issue 49's slow waves: 160 of 200 nodes due to escalate, in two waves
/// far apart. The budget is a level, so neither wave passes 20.
#[test]
fn waves_never_pass_the_level() {
    let mut b = Budget::default();
    let mut under = 0;
    for wave in 0..2 {
        for i in 0..80 {
            let n = format!("n{}", wave * 80 + i);
            let (g, _) = b.ask(&n, &node_ask(true, false), 200, false);
            under += usize::from(g.node_held.is_none());
        }
    }
    assert_eq!(under, 20);
    let v = b.view();
    assert_eq!((v.nodes, v.node_limit, v.nodes_held), (20, 20, 140));
}

#[test]
fn an_engaged_brake_holds_new_escalations_but_keeps_existing_ones() {
    let mut b = Budget::default();
    let (g, _) = b.ask("a", &node_ask(true, true), 100, true);
    assert_eq!(g.node_held, None, "already NoExecute: stays");
    let (g, _) = b.ask("b", &node_ask(true, false), 100, true);
    assert_eq!(g.node_held.map(|h| h.by), Some(HeldBy::Brake));
}

#[test]
fn room_opens_when_a_node_recovers_or_leaves() {
    let mut b = Budget::default();
    b.ask("a", &node_ask(true, false), 5, false);
    let (g, _) = b.ask("b", &node_ask(true, false), 5, false);
    assert_eq!(g.node_held.map(|h| h.by), Some(HeldBy::Budget));
    // a recovers: b waits, so room opened.
    let (_, opened) = b.ask("a", &node_ask(false, true), 5, false);
    assert!(opened);
    assert_eq!(b.waiting(), ["b"]);
    let (g, _) = b.ask("b", &node_ask(true, false), 5, false);
    assert_eq!(g.node_held, None);
    assert!(b.waiting().is_empty());
    assert!(!b.forget("b"), "nobody waits");
    assert_eq!(b.view().nodes, 0);
}

/// Issue 49's device storm: 120 devices of 25 eight-GPU nodes due at
/// once; at 10 % of 200 devices, 20 turn NoExecute.
#[test]
fn devices_share_their_own_budget() {
    let mut b = Budget::default();
    for n in 0..25 {
        let due: BTreeSet<String> = if n < 15 {
            (0..8).map(|d| format!("gpu-{d}")).collect()
        } else {
            BTreeSet::new()
        };
        let ask = Ask {
            devices_due: due,
            devices: 8,
            percent: 10,
            ..Ask::default()
        };
        b.ask(&format!("n{n}"), &ask, 25, false);
    }
    let v = b.view();
    // The denominator grows as nodes are asked: the first nodes' devices
    // met a smaller limit, so fewer than 20 may pass, never more.
    assert!(v.devices <= 20, "{v:?}");
    assert_eq!(v.devices + v.devices_held, 120);
}

#[test]
fn a_larger_pool_opens_room() {
    let mut b = Budget::default();
    b.ask("a", &node_ask(true, false), 10, false);
    b.ask("b", &node_ask(true, false), 10, false);
    assert!(!b.matched(10));
    assert!(b.matched(20), "limit 1 → 2 with b waiting");
}
