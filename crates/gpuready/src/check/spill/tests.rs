//! Tests of `spill`, in their own file beside it.

use super::*;

/// What stays in memory per node is this row and the node's name: the
/// profile and reason columns are shared between the nodes that show
/// the same text, so a fleet of one failure holds one copy of each.
#[test]
fn a_row_holds_the_name_and_shares_the_rest() {
    assert!(
        std::mem::size_of::<Row>() <= 80,
        "{}",
        std::mem::size_of::<Row>()
    );
    let mut interned = Interned::default();
    let a = interned.get("GpuLabelsMissing");
    let b = interned.get("GpuLabelsMissing");
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(interned.0.len(), 1);
}

#[test]
fn parts_are_indented_as_items_of_the_whole_report() {
    assert_eq!(
        indented("{\n  \"a\": 1\n}", "    ", "    "),
        "    {\n      \"a\": 1\n    }"
    );
    assert_eq!(
        indented("name: x\nmessage: |-\n  a\n\n  b\n", "- ", "  "),
        "- name: x\n  message: |-\n    a\n\n    b\n"
    );
}
