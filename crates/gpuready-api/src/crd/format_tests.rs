//! Tests of `crd`, in their own file beside it.

use super::*;

/// The formats kube-apiserver's OpenAPI validation knows; any other makes
/// every apply print `Warning: unrecognized format`.
const KNOWN: &[&str] = &[
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "datetime",
    "duration",
    "password",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
];

fn formats(v: &serde_json::Value, path: &str, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::String(f)) = map.get("format") {
                out.push((path.to_owned(), f.clone()));
            }
            for (k, child) in map {
                formats(child, &format!("{path}.{k}"), out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                formats(child, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_format_is_one_the_api_server_knows_and_bounds_stay() {
    let crd = serde_json::to_value(gpu_node_profile_crd()).expect("serialize");
    let mut found = Vec::new();
    formats(&crd, "", &mut found);
    let unknown: Vec<_> = found
        .iter()
        .filter(|(_, f)| !KNOWN.contains(&f.as_str()))
        .collect();
    assert!(unknown.is_empty(), "{unknown:?}");
    // gpu.count was `format: uint32` with its range: the range stays.
    let count = crd
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/gpu/properties/count")
        .expect("gpu.count");
    assert_eq!(count["minimum"], 1.0, "{count}");
    assert_eq!(count["maximum"], 1024.0, "{count}");
    assert!(count.get("format").is_none(), "{count}");
}
