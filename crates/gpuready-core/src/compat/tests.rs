//! Tests of `compat`, in their own file beside it.

use super::*;

#[test]
fn families_follow_gfd() {
    let f = |a, b| family_of(MajorMinor::new(a, b));
    assert_eq!(f(6, 1), Some(Family::Pascal));
    assert_eq!(f(5, 2), Some(Family::Maxwell));
    assert_eq!(f(7, 0), Some(Family::Volta));
    assert_eq!(f(7, 5), Some(Family::Turing));
    assert_eq!(f(8, 6), Some(Family::Ampere));
    assert_eq!(f(8, 9), Some(Family::AdaLovelace));
    assert_eq!(f(9, 0), Some(Family::Hopper));
    assert_eq!(f(10, 0), Some(Family::Blackwell));
    assert_eq!(f(12, 0), Some(Family::Blackwell));
    assert_eq!(f(13, 0), Some(Family::Rubin));
    assert_eq!(f(11, 0), None);
    assert_eq!(f(4, 0), None);
}

#[test]
fn every_table_entry_parses() {
    for ((maj, min), v) in MIN_DRIVER_FOR_CUDA {
        assert!(DriverVersion::parse(v).is_ok(), "{maj}.{min} -> {v}");
    }
    assert_eq!(
        min_driver_for_cuda(MajorMinor::new(13, 0)).unwrap(),
        DriverVersion::parse("580.65.06").unwrap()
    );
    assert!(min_driver_for_cuda(MajorMinor::new(12, 7)).is_none());
}

#[test]
fn pre_turing_limits() {
    let d = |s| DriverVersion::parse(s).unwrap();
    assert!(driver_supports_architecture(
        &d("580.95.05"),
        MajorMinor::new(6, 1)
    ));
    assert!(!driver_supports_architecture(
        &d("590.44.01"),
        MajorMinor::new(6, 1)
    ));
    assert!(!driver_supports_architecture(
        &d("590.44.01"),
        MajorMinor::new(7, 0)
    ));
    assert!(driver_supports_architecture(
        &d("595.71.05"),
        MajorMinor::new(8, 6)
    ));
    assert!(!cuda_supports_architecture(
        MajorMinor::new(13, 0),
        MajorMinor::new(6, 1)
    ));
    assert!(cuda_supports_architecture(
        MajorMinor::new(12, 9),
        MajorMinor::new(6, 1)
    ));
    assert!(cuda_supports_architecture(
        MajorMinor::new(13, 0),
        MajorMinor::new(7, 5)
    ));
}
