//! Tests of `backoff`, in their own file beside it.

use super::*;

#[test]
fn watch_backoff_is_capped_and_resets() {
    let mut b = WatchBackoff::default();
    let waits: Vec<Duration> = (&mut b).take(8).collect();
    assert!(waits[0] < Duration::from_millis(200), "{waits:?}");
    assert!(
        waits.iter().all(|w| *w <= Duration::from_millis(2400)),
        "{waits:?}"
    );
    b.reset();
    assert!(b.next().is_some_and(|w| w < Duration::from_millis(200)));
}
