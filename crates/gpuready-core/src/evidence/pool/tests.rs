//! Tests of `pool`, in their own file beside it.

use super::*;

#[test]
fn architectures() {
    assert_eq!(
        architecture_family("Ada Lovelace"),
        FamilyLabel::Known(Family::AdaLovelace)
    );
    assert_eq!(
        architecture_family("Hopper"),
        FamilyLabel::Known(Family::Hopper)
    );
    assert_eq!(architecture_family("Unknown"), FamilyLabel::Undefined);
}
