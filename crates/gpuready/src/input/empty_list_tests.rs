//! Tests of `input`, in their own file beside it.

use super::*;

/// A file's text → how many ResourceSlices, or a fragment of the error.
#[test]
fn an_empty_list_is_no_objects_and_a_file_without_documents_is_refused() {
    let rows: &[(&str, Result<usize, &str>)] = &[
        (
            r#"{"apiVersion": "v1", "kind": "List", "items": []}"#,
            Ok(0),
        ),
        (
            r#"{"apiVersion": "v1", "kind": "List", "items": null}"#,
            Ok(0),
        ),
        (
            r#"{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList", "items": []}"#,
            Ok(0),
        ),
        ("apiVersion: v1\nitems: []\nkind: List\n", Ok(0)),
        (
            "# two kubectl runs\n---\nkind: List\nitems: []\n---\nkind: List\nitems:\n",
            Ok(0),
        ),
        (
            "",
            Err("no ResourceSlice objects found: the file holds no document"),
        ),
        ("\n# only a comment\n---\n", Err("holds no document")),
        (
            r#"{"items": []}"#,
            Err("document 1: kind: an empty list of no kind"),
        ),
        (
            r#"{"apiVersion": "v1", "kind": "NodeList", "items": []}"#,
            Err("an empty list of kind NodeList: expected List or ResourceSliceList"),
        ),
        (
            "kind: List\nitems: []\n---\nkind: ConfigMapList\nitems: []\n",
            Err("document 2: kind: an empty list of kind ConfigMapList"),
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, (text, want)) in rows.iter().enumerate() {
        let path = dir.path().join(format!("slices-{i}.json"));
        std::fs::write(&path, text).expect("write");
        let got = read_resource_slices(&path)
            .map(|s| s.len())
            .map_err(|e| e.to_string());
        match (want, &got) {
            (Ok(n), Ok(m)) => assert_eq!(n, m, "{text:?}"),
            (Err(fragment), Err(e)) => assert!(e.contains(fragment), "{text:?}: {e}"),
            _ => panic!("{text:?}: got {got:?}, want {want:?}"),
        }
    }
}
