//! Tests of `event_budget`, in their own file beside it.

use super::*;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).expect("a valid time")
}

#[test]
fn a_burst_posts_at_most_the_bucket_then_one_summary() {
    let mut b = EventBudget::default();
    let posted = (0..5000)
        .filter(|_| b.admit("pool", "GpuReady", at(0)))
        .count();
    assert_eq!(posted, BURST as usize);
    let due = b.due(at(1));
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].total(), 5000 - u64::from(BURST));
    assert!(due[0].note(at(1)).starts_with("4975 per-node Events"));
    assert!(b.due(at(2)).is_empty(), "taken");
}

#[test]
fn the_bucket_refills_over_time_and_caps_at_the_burst() {
    let mut b = EventBudget::default();
    for _ in 0..BURST {
        assert!(b.admit("pool", "r", at(0)));
    }
    assert!(!b.admit("pool", "r", at(REFILL_SECONDS - 1)));
    assert!(b.admit("pool", "r", at(REFILL_SECONDS)));
    assert!(!b.admit("pool", "r", at(REFILL_SECONDS)));
    // A long quiet spell refills to the burst, no more.
    let later = at(REFILL_SECONDS * 1000);
    let posted = (0..100).filter(|_| b.admit("pool", "r", later)).count();
    assert_eq!(posted, BURST as usize);
}

#[test]
fn profiles_have_their_own_buckets_and_summaries_are_spaced() {
    let mut b = EventBudget::default();
    for _ in 0..BURST + 3 {
        b.admit("a", "x", at(0));
    }
    assert!(b.admit("b", "x", at(0)), "b's bucket is full");
    assert_eq!(b.due(at(0)).len(), 1);
    assert!(!b.admit("a", "y", at(1)), "no token earned yet");
    assert!(b.due(at(1)).is_empty(), "a's last summary is too recent");
    let due = b.due(at(SUMMARY_SECONDS));
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].held, BTreeMap::from([("y".to_owned(), 1)]));
    assert_eq!(due[0].since, at(1));
}

#[test]
fn deleted_profiles_are_forgotten() {
    let mut b = EventBudget::default();
    for _ in 0..BURST + 1 {
        b.admit("gone", "x", at(0));
        b.admit("", "x", at(0));
    }
    b.retain_profiles(|_| false);
    let due = b.due(at(0));
    assert_eq!(due.len(), 1, "the ungoverned bucket stays");
    assert_eq!(due[0].profile, "");
}
