//! Tests of `yaml`, in their own file beside it.

use super::*;
use serde_json::json;

fn items(text: &str) -> Vec<(usize, Option<usize>, Item)> {
    let mut out = Vec::new();
    let mut sink = |d, i, v| -> Result<(), ()> {
        out.push((d, i, v));
        Ok(())
    };
    assert!(for_each_item(text, &mut sink).is_ok());
    out
}

#[test]
fn items_are_streamed_with_anchors_merges_and_last_keys() {
    let got = items(
        "kind: List\nitems:\n- &a {x: 1, z: 2}\n- <<: *a\n  x: 3\n- {k: a, k: b, on: yes, y: 1}\n---\nkind: Node\nv: '0777'\n",
    );
    let want = [
        (1, Some(0), Ok(json!({"x": 1, "z": 2}))),
        (1, Some(1), Ok(json!({"x": 3, "z": 2}))),
        // `on` and `y` are both the key true (YAML 1.1), the last wins.
        (1, Some(2), Ok(json!({"k": "b", "true": 1}))),
        (2, None, Ok(json!({"kind": "Node", "v": "0777"}))),
    ];
    assert_eq!(got, want);
    let got = items("items:\n- a: {b: [1, .nan]}\n- ok: 1\n");
    assert_eq!(
        got[0].2,
        Err((
            "a.b[1]".to_owned(),
            ".nan is not a number JSON (and so the API server) can hold".to_owned()
        ))
    );
    assert_eq!(got[1].2, Ok(json!({"ok": 1})));
}

#[test]
fn lists_are_reported_with_their_kind_and_item_count() {
    let mut sink = |_, _, _| -> Result<(), ()> { Ok(()) };
    let lists = for_each_item(
        "apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: \"\"\n---\n# nothing\n---\nkind: ResourceSliceList\nitems:\n---\nkind: Node\n---\nkind: List\nitems: [{a: 1}, {b: 2}]\n",
        &mut sink,
    );
    let list = |doc, kind: &str, api: Option<&str>, items| ListDoc {
        doc,
        kind: Some(kind.to_owned()),
        api_version: api.map(str::to_owned),
        items,
    };
    assert_eq!(
        lists.ok(),
        Some(vec![
            list(1, "List", Some("v1"), 0),
            list(3, "ResourceSliceList", None, 0),
            list(5, "List", None, 2),
        ])
    );
}

#[test]
fn bounds_refuse_before_building() {
    let deep = format!(
        "a:\n{}",
        (1..300)
            .map(|i| format!("{}b{i}:\n", " ".repeat(i)))
            .collect::<String>()
    );
    let mut sink = |_, _, _| -> Result<(), ()> { Ok(()) };
    assert!(
        matches!(for_each_item(&deep, &mut sink), Err(Stop::Syntax(1, m)) if m.contains("deeper than 256"))
    );
    let laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
    assert!(
        matches!(for_each_item(laughs, &mut sink), Err(Stop::Syntax(1, m)) if m.contains("aliases"))
    );
    let big = format!(
        "items:\n- a: [{}]\n",
        "1, ".repeat(MAX_OBJECT_CHARS / 3 + 10)
    );
    assert!(
        matches!(for_each_item(&big, &mut sink), Err(Stop::Syntax(1, m)) if m.contains("items[0] longer than"))
    );
}
