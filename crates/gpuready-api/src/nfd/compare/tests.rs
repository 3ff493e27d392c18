//! Tests of `compare`, in their own file beside it.

use super::*;
use serde_json::json;

#[test]
fn documentation_order_and_defaults_do_not_count() {
    let a = json!({
        "metadata": {"name": "x", "annotations": {"a": "b"}},
        "spec": {"names": {"kind": "Foo", "plural": "foos", "listKind": "FooList", "shortNames": ["b", "a"]},
                 "conversion": {"strategy": "None"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "deprecated": false,
                    "schema": {"openAPIV3Schema": {"type": "object", "description": "x", "nullable": false,
                        "properties": {"description": {"type": "string", "description": "kept as a field"}},
                        "required": ["b", "a"]}}}]},
        "status": {"storedVersions": ["v1"]}
    });
    let b = json!({
        "metadata": {"name": "x"},
        "spec": {"names": {"kind": "Foo", "plural": "foos", "singular": "foo", "shortNames": ["a", "b"]},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "properties": {"description": {"type": "string"}},
                        "required": ["a", "b"]}}}]}
    });
    assert_eq!(diff(&normalize_crd(&a), &normalize_crd(&b)), vec![]);
}

#[test]
fn a_property_named_description_is_compared() {
    let a = json!({"type": "object", "properties": {"description": {"type": "string"}}});
    let b = json!({"type": "object"});
    let d = diff(&normalize_schema(&a), &normalize_schema(&b));
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].path(), "properties");
}

#[test]
fn differences_name_their_path() {
    let a = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
        "properties": {"op": {"type": "string", "enum": ["In", "Ge"]}}}}}]}});
    let b = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
        "properties": {"op": {"type": "integer", "enum": ["In"]}, "x": {"type": "string"}}}}}]}});
    let d = diff(&normalize_crd(&a), &normalize_crd(&b));
    let lines: Vec<String> = d
        .iter()
        .map(|d| d.render("upstream", "generated"))
        .collect();
    assert_eq!(
        lines,
        vec![
            "spec.versions[v1].schema.openAPIV3Schema.properties.op.enum: upstream has [Ge, In], generated has [In] (only upstream: [Ge])",
            "spec.versions[v1].schema.openAPIV3Schema.properties.op.type: upstream has \"string\", generated has \"integer\"",
            "spec.versions[v1].schema.openAPIV3Schema.properties.x: upstream has nothing, generated has {\"type\":\"string\"}",
        ]
    );
    assert_eq!(d[0].key(), "enum");
    assert_eq!(d[2].key(), "x");
}

#[test]
fn version_key_is_bracketed() {
    let a = json!({"spec": {"versions": [{"name": "v1"}, {"name": "v2"}]}});
    let b = json!({"spec": {"versions": [{"name": "v1"}]}});
    let d = diff(&normalize_crd(&a), &normalize_crd(&b));
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].path(), "spec.versions[v2]");
    assert_eq!(d[0].key(), "[v2]");
}
