//! Tests of `gfd`, in their own file beside it.

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn driver_from_new_old_and_full_spellings() {
    let full = parse_driver(&labels(&[(nvidia::DRIVER_FULL, "580.159.04")]));
    assert_eq!(full.present().unwrap().as_str(), "580.159.04");
    let new = parse_driver(&labels(&[
        (nvidia::DRIVER_MAJOR, "550"),
        (nvidia::DRIVER_MINOR, "90"),
        (nvidia::DRIVER_REVISION, "07"),
    ]));
    assert_eq!(new.present().unwrap().patch, Some(7));
    let old_two_part = parse_driver(&labels(&[
        (nvidia::DRIVER_MAJOR_OLD, "570"),
        (nvidia::DRIVER_MINOR_OLD, "26"),
        (nvidia::DRIVER_REV_OLD, ""),
    ]));
    assert_eq!(old_two_part.present().unwrap().as_str(), "570.26");
    let bad = parse_driver(&labels(&[(nvidia::DRIVER_FULL, "580")]));
    assert_eq!(bad.malformed().unwrap().key, nvidia::DRIVER_FULL);
    let no_minor = parse_driver(&labels(&[
        (nvidia::DRIVER_MAJOR_OLD, "570"),
        (nvidia::DRIVER_REV_OLD, ""),
    ]));
    assert_eq!(no_minor.malformed().unwrap().key, nvidia::DRIVER_MINOR_OLD);
}

#[test]
fn cuda_runtime_spellings() {
    let full = parse_cuda_runtime(&labels(&[(nvidia::RUNTIME_FULL, "13.0")]));
    assert_eq!(full, Field::Present(MajorMinor::new(13, 0)));
    let old = parse_cuda_runtime(&labels(&[
        (nvidia::RUNTIME_MAJOR_OLD, "12"),
        (nvidia::RUNTIME_MINOR_OLD, "4"),
    ]));
    assert_eq!(old, Field::Present(MajorMinor::new(12, 4)));
    let bad = parse_cuda_runtime(&labels(&[(nvidia::RUNTIME_MAJOR, "12")]));
    assert!(bad.malformed().is_some());
}

#[test]
fn malformed_gfd_values_name_their_key() {
    let gfd = parse_gfd(&labels(&[
        (nvidia::GPU_MEMORY, "24GB"),
        (nvidia::GPU_COMPUTE_MAJOR, "x"),
        (nvidia::GPU_COMPUTE_MINOR, "6"),
        (nvidia::GPU_FAMILY, "undefined"),
    ]));
    let keys: Vec<&str> = gfd.malformed().iter().map(|m| m.key.as_str()).collect();
    assert_eq!(keys, [nvidia::GPU_MEMORY, nvidia::GPU_COMPUTE_MAJOR]);
    assert_eq!(gfd.family, Field::Present(FamilyLabel::Undefined));
    assert!(gfd.seen);
}

#[test]
fn single_strategy_products() {
    assert_eq!(
        SingleMig::parse("NVIDIA-H200-MIG-1g.18gb"),
        Some(SingleMig::Partitioned {
            model: "NVIDIA-H200".into(),
            profile: "1g.18gb".into()
        })
    );
    assert_eq!(
        SingleMig::parse("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb.me-SHARED"),
        Some(SingleMig::Partitioned {
            model: "NVIDIA-A100-SXM4-40GB".into(),
            profile: "1g.5gb.me".into()
        })
    );
    assert_eq!(
        SingleMig::parse("NVIDIA-H200-MIG-INVALID"),
        Some(SingleMig::Invalid {
            model: "NVIDIA-H200".into()
        })
    );
    assert_eq!(SingleMig::parse("NVIDIA-H200"), None);
    assert_eq!(SingleMig::parse("-MIG-1g.18gb"), None);
    // Only under the single strategy: mixed keeps the full-GPU product.
    let mixed = parse_gfd(&labels(&[
        (nvidia::MIG_STRATEGY, "mixed"),
        (nvidia::GPU_PRODUCT, "NVIDIA-H200-MIG-1g.18gb"),
    ]));
    assert_eq!(mixed.mig_single, None);
}

#[test]
fn effective_family_prefers_compute_capability() {
    let gfd = parse_gfd(&labels(&[
        (nvidia::GPU_COMPUTE_MAJOR, "8"),
        (nvidia::GPU_COMPUTE_MINOR, "9"),
        (nvidia::GPU_FAMILY, "ampere"),
    ]));
    assert_eq!(gfd.effective_family(), Some(Family::AdaLovelace));
}
