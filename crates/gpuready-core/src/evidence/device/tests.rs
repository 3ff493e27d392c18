//! Tests of `device`, in their own file beside it.

use super::*;

#[test]
fn quantities() {
    assert_eq!(quantity_mib("143771Mi"), Some(143_771));
    assert_eq!(quantity_mib("80Gi"), Some(81_920));
    assert_eq!(quantity_mib("1048576"), Some(1));
    assert_eq!(quantity_mib("12x"), None);
}

#[test]
fn semver_forms() {
    assert_eq!(semver_major_minor("9.0.0"), Some(MajorMinor::new(9, 0)));
    assert_eq!(semver_major_minor("13.0.0"), Some(MajorMinor::new(13, 0)));
}
