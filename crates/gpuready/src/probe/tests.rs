//! Tests of `mod`, in their own file beside it.

use super::*;
use std::time::Instant;

/// The wiring of [`urgent`] into the loop's wait (its schedule is tested
/// by instants in `urgent.rs`): an event wakes it after the debounce, and
/// with the budget spent the heartbeat comes first.
#[tokio::test]
async fn a_critical_event_wakes_the_loop_after_the_debounce_within_its_budget() {
    let (tx, mut rx) = tokio::sync::watch::channel(0u64);
    let debounce = Duration::from_millis(50);
    let mut early = urgent::EarlyReports::new(debounce, Duration::from_secs(60), 1);
    let far = tokio::time::Instant::now() + Duration::from_secs(30);
    tx.send_modify(|n| *n += 1);
    let began = Instant::now();
    let wake = next_wake(std::future::pending(), None, &mut rx, &mut early, far).await;
    assert_eq!(wake, Wake::Early);
    assert!(began.elapsed() >= debounce, "{:?}", began.elapsed());
    rx.borrow_and_update();
    early.published(Instant::now(), true);

    tx.send_modify(|n| *n += 1);
    let soon = tokio::time::Instant::now() + Duration::from_millis(200);
    let wake = next_wake(std::future::pending(), None, &mut rx, &mut early, soon).await;
    assert_eq!(wake, Wake::Regular, "the budget of one is spent");
    assert!(early.due().is_some());
    let wake = next_wake(async {}, None, &mut rx, &mut early, far).await;
    assert_eq!(wake, Wake::Stop);
}
