//! Tests of `nvml`, in their own file beside it.

use super::*;

#[test]
fn a_new_critical_record_signals_a_repeat_or_an_application_xid_does_not() {
    let (tx, mut rx) = watch::channel(0u64);
    let events = Events::signalling(tx);
    let at = "2026-12-07T10:00:00Z";
    events.record("GPU-a".into(), EventKind::Xid, Some(79), at);
    assert!(rx.has_changed().is_ok_and(|c| c));
    rx.borrow_and_update();
    // The same (GPU, kind, XID) again: counted, no signal.
    events.record("GPU-a".into(), EventKind::Xid, Some(79), at);
    // An application XID follows the workload: no signal.
    events.record("GPU-a".into(), EventKind::Xid, Some(13), at);
    assert!(rx.has_changed().is_ok_and(|c| !c));
    // Another GPU, and a double-bit ECC error: signalled.
    events.record("GPU-b".into(), EventKind::Xid, Some(79), at);
    events.record("GPU-b".into(), EventKind::DoubleBitEcc, None, at);
    assert_eq!(*rx.borrow_and_update(), 3);
    let log = events.snapshot();
    assert_eq!(log.records.len(), 4);
    assert_eq!(log.records[0].count, 2);
}
