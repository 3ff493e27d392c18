//! Tests of `fence`, in their own file beside it.

use super::*;

#[test]
fn closed_until_extended_and_closed_for_good_once_revoked() {
    let f = Fence::new();
    assert!(!f.is_open());
    f.extend_to(Instant::now() + Duration::from_secs(60));
    assert!(f.is_open());
    // Never moves back.
    f.extend_to(Instant::now());
    assert!(f.is_open());
    f.revoke();
    assert!(!f.is_open());
    f.extend_to(Instant::now() + Duration::from_secs(60));
    assert!(!f.is_open(), "a revoked fence stays closed");
}

#[test]
fn expires_by_itself() {
    let f = Fence::new();
    f.extend_to(Instant::now() + Duration::from_millis(20));
    assert!(f.is_open());
    std::thread::sleep(Duration::from_millis(40));
    assert!(!f.is_open());
}
