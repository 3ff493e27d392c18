//! Tests of `leader`, in their own file beside it.

use super::*;

#[test]
fn every_replica_claims_under_its_own_field_manager() {
    let a = lease_field_manager("gpuready-7d4b9c-abcde");
    let b = lease_field_manager("gpuready-7d4b9c-fghij");
    assert_ne!(a, b);
    assert_eq!(a, "gpuready-lease-gpuready-7d4b9c-abcde");
    let longest = "x".repeat(crate::controller::config::IDENTITY_MAX_LEN);
    assert!(lease_field_manager(&longest).len() <= 128);
}

#[test]
fn renew_deadline_falls_between_renewals_and_expiry() {
    for d in [2, 4, 15, 60] {
        let t = LeaseTiming::new(d);
        let interval = Duration::from_secs(t.duration_s - t.grace_s);
        assert!(t.grace_s > 0 && t.grace_s < t.duration_s, "{t:?}");
        assert!(
            t.renew_deadline > interval,
            "{t:?}: deadline after a renewal is due"
        );
        assert!(
            t.renew_deadline < Duration::from_secs(t.duration_s),
            "{t:?}: writes stop before anyone else may take over"
        );
    }
    assert_eq!(LeaseTiming::new(15).renew_deadline, Duration::from_secs(10));
    // client-go's defaults: renew every 2 s, five tries inside the deadline.
    assert_eq!(
        LeaseTiming::new(15).duration_s - LeaseTiming::new(15).grace_s,
        2
    );
}
