//! Tests of `text`, in their own file beside it.

use super::*;

#[test]
fn brackets_in_quotes_and_comments_are_text_but_a_stray_quote_hides_nothing() {
    let deep = "[".repeat(MAX_FLOW_DEPTH + 1);
    for ok in [
        format!("a: '{deep}'\n"),
        format!("a: \"{deep}\"\n"),
        format!("a: 'it''s {deep}'\n"),
        format!("a: \"say \\\" {deep}\"\n"),
        format!("a: 1 # {deep}\n"),
        format!("a: ['{deep}', \"{deep}\"]\n"),
    ] {
        assert_eq!(flow_too_deep(&ok), None, "{ok}");
    }
    for bad in [
        format!("a: {deep}"),
        format!("a: it's\nb: {deep}"),
        format!("a: x\"y\nb: {deep}"),
        format!("a: x#y {deep}"),
    ] {
        assert!(flow_too_deep(&bad).is_some(), "{bad}");
    }
    // Shallow but dense: not this bound's business (items are streamed).
    let dense = format!("a: [{}]\n", "[],".repeat(100_000));
    assert_eq!(flow_too_deep(&dense), None);
    // The shipped dumps are far from the bound.
    for example in ["rtx3090-rtx4070tis", "talos-rtx3050", "pascal-maxwell"] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/examples")
            .join(example);
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            assert_eq!(flow_too_deep(&text), None, "{}", entry.path().display());
        }
    }
}
