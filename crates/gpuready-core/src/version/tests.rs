//! Tests of `version`, in their own file beside it.

use super::*;

#[test]
fn driver_versions_compare_numerically() {
    let v = |s| DriverVersion::parse(s).unwrap();
    assert!(v("580.65.06") > v("580.65.5"));
    assert!(v("595.71.05") > v("580.178.04"));
    assert_eq!(v("570.26"), v("570.26.00"));
    assert!(v("570.124.06") > v("570.26"));
    assert_eq!(v("550.90.07").patch, Some(7));
}

#[test]
fn driver_versions_reject_garbage() {
    for bad in [
        "",
        "580",
        "580.65.06.1",
        "580.x.1",
        "580..1",
        "v580.65",
        "580.65.",
    ] {
        assert!(DriverVersion::parse(bad).is_err(), "{bad:?} should fail");
    }
}

#[test]
fn major_minor_parses() {
    assert_eq!(MajorMinor::parse("13.0").unwrap(), MajorMinor::new(13, 0));
    assert!(MajorMinor::parse("13").is_err());
    assert!(MajorMinor::parse("x.1").is_err());
    assert!(MajorMinor::new(7, 5) > MajorMinor::new(7, 2));
}
