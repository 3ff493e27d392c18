//! Tests of `brake`, in their own file beside it.

use super::*;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

const CFG: BrakeConfig = BrakeConfig {
    threshold: 0.5,
    window_seconds: 300,
    min_nodes: 3,
};

#[test]
fn engages_on_a_burst_and_releases_when_nodes_recover() {
    let mut b = BrakeState::default();
    let engaged: Vec<bool> = ["a", "b", "c", "d"]
        .iter()
        .enumerate()
        .map(|(i, n)| b.turn(&CFG, n, 6, at(i as i64)))
        .collect();
    // The fourth turn of six nodes is more than half: engaged at once.
    assert_eq!(engaged, [false, false, false, true]);
    assert!(b.counts(&CFG, 6, 4, at(10)));
    // Still 4 of 6 not ready after the window: stays engaged (level, not rate).
    assert!(b.counts(&CFG, 6, 4, at(1000)));
    // Recovered below the threshold: released.
    assert!(!b.counts(&CFG, 6, 2, at(1001)));
}

#[test]
fn slow_failures_never_engage() {
    let mut b = BrakeState::default();
    for i in 0..6 {
        assert!(!b.turn(&CFG, &format!("n{i}"), 6, at(i * 400)));
        assert!(!b.counts(&CFG, 6, (i + 1) as usize, at(i * 400)));
    }
}

#[test]
fn small_pools_and_disabled_brake() {
    let mut b = BrakeState::default();
    b.turn(&CFG, "a", 2, at(0));
    assert!(!b.turn(&CFG, "b", 2, at(0)), "below min_nodes");
    assert!(!b.counts(&CFG, 2, 2, at(1)), "below min_nodes");
    let off = BrakeConfig {
        threshold: 1.0,
        ..CFG
    };
    for n in ["c", "d", "e"] {
        assert!(!b.turn(&off, n, 5, at(0)));
    }
    assert!(!b.counts(&off, 5, 5, at(1)));
}

#[test]
fn the_window_drops_old_turns_and_keeps_a_node_once() {
    let mut b = BrakeState::default();
    b.turn(&CFG, "a", 10, at(0));
    b.turn(&CFG, "b", 10, at(100));
    // "a" turns again later: counted once, at its latest turn.
    b.turn(&CFG, "a", 10, at(200));
    b.counts(&CFG, 10, 2, at(250));
    assert_eq!(b.recent_turns(), 2);
    // Past b's window, inside a's.
    b.counts(&CFG, 10, 2, at(450));
    assert_eq!(b.recent_turns(), 1);
    b.forget("a");
    b.counts(&CFG, 10, 0, at(451));
    assert_eq!(b.recent_turns(), 0);
    assert!(b.by_time.is_empty() && b.turns.is_empty());
    // A turn forgotten before the window passes leaves nothing behind.
    b.turn(&CFG, "c", 10, at(500));
    b.forget("c");
    assert!(b.by_time.is_empty() && b.turns.is_empty());
}

/// Issue 33's sequence: 60 of 100 nodes turn at once and engage the brake;
/// the window passes with 60 still not ready (the counts keep it engaged);
/// then one more node turns. One recent turn is not one node not ready:
/// the turn must not release the brake while 61 % are not ready.
#[test]
fn a_turn_after_the_window_never_releases_an_engaged_brake() {
    let mut b = BrakeState::default();
    for i in 0..60 {
        b.turn(&CFG, &format!("n{i}"), 100, at(0));
    }
    assert!(b.engaged(), "60 of 100 turned at once");
    assert!(b.counts(&CFG, 100, 60, at(400)), "still 60 % not ready");
    assert_eq!(b.recent_turns(), 0, "the burst's turns left the window");
    assert!(
        b.turn(&CFG, "n60", 100, at(401)),
        "a late turn released the brake"
    );
    assert!(b.counts(&CFG, 100, 61, at(402)));
    // Only the level releases it.
    assert!(!b.counts(&CFG, 100, 50, at(403)));
}
