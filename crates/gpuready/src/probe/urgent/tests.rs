//! Tests of `urgent`, in their own file beside it.

use super::*;
use gpuready_api::profile::DEFAULT_FATAL_XIDS;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn fatal_xids_and_double_bit_ecc_are_critical_application_xids_are_not() {
    for x in DEFAULT_FATAL_XIDS {
        assert!(is_critical(EventKind::Xid, Some(u64::from(*x))), "XID {x}");
    }
    // Not in the default list, but a profile may list it.
    assert!(is_critical(EventKind::Xid, Some(94)));
    for x in APPLICATION_XIDS {
        assert!(!is_critical(EventKind::Xid, Some(u64::from(*x))), "XID {x}");
    }
    assert!(!is_critical(EventKind::Xid, None));
    assert!(is_critical(EventKind::DoubleBitEcc, None));
}

#[test]
fn a_burst_is_one_report_after_the_debounce() {
    let t0 = Instant::now();
    let mut e = EarlyReports::default();
    assert_eq!(e.due(), None);
    assert_eq!(e.event(t0), t0 + DEBOUNCE);
    // Seven more GPUs report the XID within the debounce: same report.
    for k in 1..8 {
        assert_eq!(e.event(t0 + ms(20 * k)), t0 + DEBOUNCE);
    }
    e.published(t0 + DEBOUNCE, true);
    assert_eq!(e.due(), None);
    // A later event asks for a report of its own.
    let t1 = t0 + ms(2000);
    assert_eq!(e.event(t1), t1 + DEBOUNCE);
}

#[test]
fn past_the_budget_an_event_waits_for_the_oldest_to_leave_the_window() {
    let t0 = Instant::now();
    let mut e = EarlyReports::default();
    let mut sent = Vec::new();
    for k in 0..MAX_EARLY_PER_WINDOW as u64 {
        let due = e.event(t0 + ms(1000 * k));
        e.published(due, true);
        sent.push(due);
    }
    let now = t0 + ms(10_000);
    assert_eq!(e.event(now), sent[0] + WINDOW);
    // The heartbeat came first: it carried the event, nothing is due, and
    // the budget is still spent.
    e.published(now + ms(5000), false);
    assert_eq!(e.due(), None);
    let later = now + ms(6000);
    assert_eq!(e.event(later), sent[0] + WINDOW);
    // Once the oldest has left the window, the debounce alone applies.
    e.published(sent[0] + WINDOW, true);
    let free = sent[1] + WINDOW;
    assert_eq!(e.event(free), free + DEBOUNCE);
}

#[test]
fn a_regular_report_clears_a_due_one_without_spending_the_budget() {
    let t0 = Instant::now();
    let mut e = EarlyReports::new(ms(500), Duration::from_secs(60), 1);
    e.event(t0);
    e.published(t0 + ms(100), false);
    assert_eq!(e.due(), None);
    let t1 = t0 + ms(200);
    assert_eq!(e.event(t1), t1 + ms(500));
    e.published(t1 + ms(500), true);
    // Budget of one spent: the next waits a minute from the early one.
    let t2 = t1 + ms(1000);
    assert_eq!(e.event(t2), t1 + ms(500) + Duration::from_secs(60));
}
