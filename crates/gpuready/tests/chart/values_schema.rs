//! The chart's `values.schema.json` covers `profiles`: each profile spec is
//! checked with the GpuNodeProfile spec schema (generated from the CRD, so the two
//! cannot drift), and a value of the wrong type fails `helm` with the key named —
//! `--set profiles.x.gpu.minComputeCapability=8` (a number where the CRD wants a
//! string) is refused before anything is installed, instead of failing the
//! release with a Go type error from the API server.
//!
//! Regenerate after changing the GpuNodeProfile types:
//! `UPDATE_VALUES_SCHEMA=1 cargo test -p gpuready --test chart values_schema::`.

use crate::support;

use gpuready_testenv::TestEnv;
use serde_json::{Map, Value, json};
use support::*;

const SCHEMA: &str = "charts/gpuready/values.schema.json";

/// JSON Schema keywords Helm understands and the CRD's schema uses; the
/// Kubernetes extensions (x-kubernetes-*, nullable, CEL rules) stay with the API
/// server, which still validates every profile it is sent.
const KEEP: &[&str] = &[
    "type",
    "description",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "required",
];

fn helm_schema(crd: &Value) -> Value {
    let Value::Object(crd) = crd else {
        return crd.clone();
    };
    let mut out = Map::new();
    for key in KEEP {
        if let Some(v) = crd.get(*key) {
            out.insert((*key).to_owned(), v.clone());
        }
    }
    // A nullable field may be written as null in values (e.g. to unset it).
    if crd.get("nullable") == Some(&json!(true))
        && let Some(Value::String(t)) = out.get("type").cloned()
    {
        out.insert("type".into(), json!([t, "null"]));
    }
    if let Some(Value::Object(props)) = crd.get("properties") {
        let props: Map<String, Value> = props
            .iter()
            .map(|(k, v)| (k.clone(), helm_schema(v)))
            .collect();
        out.insert("properties".into(), Value::Object(props));
    }
    if let Some(items) = crd.get("items") {
        out.insert("items".into(), helm_schema(items));
    }
    match crd.get("additionalProperties") {
        Some(v @ Value::Object(_)) => {
            out.insert("additionalProperties".into(), helm_schema(v));
        }
        Some(v @ Value::Bool(_)) => {
            out.insert("additionalProperties".into(), v.clone());
        }
        _ => {}
    }
    Value::Object(out)
}

/// The `profiles` entry the schema file must hold.
fn expected_profiles() -> Value {
    let crd = serde_json::to_value(gpuready_api::crd::gpu_node_profile_crd()).expect("CRD JSON");
    let spec = crd
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .expect("spec schema");
    let mut spec = helm_schema(spec);
    spec["description"] = json!(
        "The spec of a GpuNodeProfile (generated from the CRD; the API server applies its further rules). Quote strings such as \"8.6\" or use --set-string: a bare 8 is a number."
    );
    json!({
        "type": "object",
        "description": "GpuNodeProfiles to create: profile name -> spec.",
        "propertyNames": {
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            "maxLength": 63
        },
        "additionalProperties": spec,
    })
}

/// Replaces the text of the top-level `"profiles": {...}` entry and leaves the
/// rest of the hand-written file byte for byte as it is (key order included).
fn splice_profiles(text: &str, want: &Value) -> String {
    let key = "\n    \"profiles\": ";
    let start = text.find(key).expect("a top-level \"profiles\" entry") + key.len();
    // The end of the object that starts there: braces outside strings.
    let (mut depth, mut in_string, mut escaped, mut end) = (0usize, false, false, start);
    for (i, c) in text[start..].char_indices() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (false, _, '"') => in_string = true,
            (false, _, '{') => depth += 1,
            (false, _, '}') => {
                depth -= 1;
                if depth == 0 {
                    end = start + i + 1;
                    break;
                }
            }
            _ => {}
        }
    }
    let pretty = serde_json::to_string_pretty(want).expect("serialize");
    let indented = pretty.replace('\n', "\n    ");
    format!("{}{indented}{}", &text[..start], &text[end..])
}

#[test]
fn profiles_schema_is_the_crd_spec_schema() {
    let path = repo_root().join(SCHEMA);
    let text = std::fs::read_to_string(&path).expect("values.schema.json");
    let schema: Value = serde_json::from_str(&text).expect("JSON");
    let want = expected_profiles();
    if std::env::var_os("UPDATE_VALUES_SCHEMA").is_some() {
        std::fs::write(&path, splice_profiles(&text, &want)).expect("write values.schema.json");
        return;
    }
    assert_eq!(
        schema["properties"]["profiles"], want,
        "{SCHEMA}'s profiles are not the CRD's spec schema; regenerate with \
         UPDATE_VALUES_SCHEMA=1 cargo test -p gpuready --test chart values_schema::"
    );
}

#[tokio::test]
async fn a_number_where_the_crd_wants_a_string_is_refused_naming_the_key() {
    let env = TestEnv::shared().await.expect("test control plane");
    let chart = chart_dir();
    let chart = chart.to_str().expect("utf-8");
    let base = [
        "template",
        "g",
        chart,
        "--api-versions",
        "gpuready.io/v1alpha1/GpuNodeProfile",
        "--set",
        "profiles.x.nodeSelector.matchLabels.pool=a",
    ];
    let mut bad = base.to_vec();
    bad.extend(["--set", "profiles.x.gpu.minComputeCapability=8"]);
    let out = run(helm(env, &bad), None).await;
    assert!(!out.ok, "helm accepted a number: {}", out.stdout);
    assert!(
        out.stderr.contains("/profiles/x/gpu/minComputeCapability"),
        "{}",
        out.stderr
    );
    // As a string it renders.
    let mut good = base.to_vec();
    good.extend(["--set-string", "profiles.x.gpu.minComputeCapability=8.6"]);
    let rendered = must(helm(env, &good), None, "helm template").await;
    assert!(
        rendered.contains("minComputeCapability: \"8.6\""),
        "{rendered}"
    );
}
