//! Compares CRDs by the API they define, not by their bytes: a normal form that
//! drops documentation and what the API server adds or defaults, and a diff of
//! two normal forms that names each difference by its path.
//!
//! Used by the conformance test (generated vs upstream NFD CRDs) and by the
//! classification of installed CRDs in `gpuready-core`.
//!
//! # Normalizations
//!
//! Each one maps encodings that the API server treats alike onto one form:
//!
//! * **Only `metadata.name` is kept** of the metadata, and `status` is dropped:
//!   annotations, labels and the rest record provenance and server state, not API.
//! * **`description` is dropped from every schema node** (only the keyword; a
//!   property *named* `description` stays). Texts differ by author; they do not
//!   affect validation.
//! * **Object keys are unordered** (JSON objects compare as maps).
//! * **Set-valued lists compare as sets**: `enum` and `required` in schemas,
//!   `shortNames` and `categories` in names. Order has no meaning for them.
//! * **Empty equals absent** for `required: []` and `properties: {}`.
//! * **`false` equals absent** for the boolean schema keywords whose default is
//!   `false`: `nullable`, `uniqueItems`, `exclusiveMinimum`, `exclusiveMaximum`,
//!   `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-embedded-resource`,
//!   `x-kubernetes-int-or-string`; likewise `deprecated: false` on a version and
//!   `preserveUnknownFields: false` on the spec.
//! * **API server defaults equal absent**: `conversion: {strategy: None}`,
//!   `listKind: <Kind>List`, `singular: <kind in lower case>`.
//! * **Versions are keyed by name** (`versions[v1alpha1]`), so their order does not
//!   matter, and empty `additionalPrinterColumns` / `selectableFields` equal absent.
//!
//! Everything else is compared as it is, including keywords this module does not
//! know, so that nothing is ignored by accident.

use serde_json::{Map, Value};

/// Schema keywords whose value is one subschema.
const SUBSCHEMA_KEYS: &[&str] = &["additionalProperties", "additionalItems", "not", "items"];
/// Schema keywords whose value maps names to subschemas.
const SUBSCHEMA_MAP_KEYS: &[&str] = &[
    "properties",
    "patternProperties",
    "definitions",
    "dependencies",
];
/// Schema keywords whose value is a list of subschemas.
const SUBSCHEMA_LIST_KEYS: &[&str] = &["allOf", "anyOf", "oneOf"];
/// Boolean schema keywords whose absence means `false`.
const FALSE_BY_DEFAULT: &[&str] = &[
    "nullable",
    "uniqueItems",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
];
/// List-valued keys compared as sets (see the module docs).
const SET_KEYS: &[&str] = &["enum", "required", "shortNames", "categories"];

/// The normal form of a CRD (given as JSON), as described in the module docs.
pub fn normalize_crd(crd: &Value) -> Value {
    let mut out = Map::new();
    let name = crd
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    out.insert(
        "metadata".into(),
        Value::Object(Map::from_iter([("name".into(), name)])),
    );
    if let Some(spec) = crd.get("spec") {
        out.insert("spec".into(), normalize_spec(spec));
    }
    Value::Object(out)
}

fn normalize_spec(spec: &Value) -> Value {
    let Some(spec) = spec.as_object() else {
        return spec.clone();
    };
    let mut out = spec.clone();
    if let Some(names) = out.get_mut("names") {
        normalize_names(names);
    }
    if out.get("conversion") == Some(&serde_json::json!({"strategy": "None"})) {
        out.remove("conversion");
    }
    remove_if(&mut out, "preserveUnknownFields", &Value::Bool(false));
    if let Some(Value::Array(versions)) = out.remove("versions") {
        let keyed = versions
            .iter()
            .map(|v| {
                let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
                (format!("[{name}]"), normalize_version(v))
            })
            .collect::<Map<_, _>>();
        out.insert("versions".into(), Value::Object(keyed));
    }
    Value::Object(out)
}

fn normalize_names(names: &mut Value) {
    let Some(names) = names.as_object_mut() else {
        return;
    };
    if let Some(kind) = names.get("kind").and_then(Value::as_str).map(str::to_owned) {
        remove_if(names, "listKind", &Value::String(format!("{kind}List")));
        remove_if(names, "singular", &Value::String(kind.to_lowercase()));
    }
    for key in ["shortNames", "categories"] {
        normalize_set(names, key);
    }
}

fn normalize_version(version: &Value) -> Value {
    let Some(version) = version.as_object() else {
        return version.clone();
    };
    let mut out = version.clone();
    remove_if(&mut out, "deprecated", &Value::Bool(false));
    for key in ["additionalPrinterColumns", "selectableFields"] {
        remove_if(&mut out, key, &Value::Array(Vec::new()));
    }
    if let Some(root) = out
        .get_mut("schema")
        .and_then(|s| s.get_mut("openAPIV3Schema"))
    {
        *root = normalize_schema(root);
    }
    Value::Object(out)
}

/// The normal form of one JSON schema node and everything below it.
pub fn normalize_schema(schema: &Value) -> Value {
    let Some(schema) = schema.as_object() else {
        // `additionalProperties: true` and the like.
        return schema.clone();
    };
    let mut out = schema.clone();
    out.remove("description");
    for key in FALSE_BY_DEFAULT {
        remove_if(&mut out, key, &Value::Bool(false));
    }
    normalize_set(&mut out, "enum");
    normalize_set(&mut out, "required");
    for key in SUBSCHEMA_KEYS {
        match out.get_mut(*key) {
            Some(Value::Array(list)) => list.iter_mut().for_each(|s| *s = normalize_schema(s)),
            Some(sub) => *sub = normalize_schema(sub),
            None => {}
        }
    }
    for key in SUBSCHEMA_MAP_KEYS {
        if let Some(Value::Object(map)) = out.get_mut(*key) {
            // `dependencies` values may be string lists; normalize_schema leaves
            // non-objects alone.
            map.values_mut().for_each(|s| *s = normalize_schema(s));
        }
    }
    remove_if(&mut out, "properties", &Value::Object(Map::new()));
    for key in SUBSCHEMA_LIST_KEYS {
        if let Some(Value::Array(list)) = out.get_mut(*key) {
            list.iter_mut().for_each(|s| *s = normalize_schema(s));
        }
    }
    Value::Object(out)
}

/// Sorts and dedups a set-valued list; an empty one is removed.
fn normalize_set(obj: &mut Map<String, Value>, key: &str) {
    if let Some(Value::Array(list)) = obj.get_mut(key) {
        list.sort_by_key(canonical);
        list.dedup();
        if list.is_empty() {
            obj.remove(key);
        }
    }
}

fn remove_if(obj: &mut Map<String, Value>, key: &str, default: &Value) {
    if obj.get(key) == Some(default) {
        obj.remove(key);
    }
}

/// A stable text form of a JSON value, for sorting and messages.
fn canonical(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One difference between two normal forms, "left" and "right" (for instance
/// installed and desired, or upstream and generated).
#[derive(Clone, Debug, PartialEq)]
pub enum Difference {
    /// `path` exists only on the left.
    OnlyLeft { path: String, value: Value },
    /// `path` exists only on the right.
    OnlyRight { path: String, value: Value },
    /// Both sides have `path`, with different values.
    Changed {
        path: String,
        left: Value,
        right: Value,
    },
    /// A set-valued list differs; `left`/`right` are the whole sets.
    Set {
        path: String,
        left: Vec<Value>,
        right: Vec<Value>,
    },
}

impl Difference {
    /// Where the difference is, e.g. `spec.versions[v1alpha1].served`.
    pub fn path(&self) -> &str {
        match self {
            Difference::OnlyLeft { path, .. }
            | Difference::OnlyRight { path, .. }
            | Difference::Changed { path, .. }
            | Difference::Set { path, .. } => path,
        }
    }

    /// The last path segment: the key that differs (`enum`, `required`, a
    /// property name, `[v1beta1]`...).
    pub fn key(&self) -> &str {
        let path = self.path();
        let dot = path.rfind('.').map_or(0, |i| i + 1);
        let bracket = path.rfind('[').unwrap_or(0);
        &path[dot.max(bracket)..]
    }

    /// Members of a set-valued list found only on the left.
    pub fn only_left_members(&self) -> Vec<&Value> {
        match self {
            Difference::Set { left, right, .. } => {
                left.iter().filter(|v| !right.contains(v)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Members of a set-valued list found only on the right.
    pub fn only_right_members(&self) -> Vec<&Value> {
        match self {
            Difference::Set { left, right, .. } => {
                right.iter().filter(|v| !left.contains(v)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// One line for a person, naming the two sides, e.g.
    /// `…op.enum: upstream has [Ge, In], generated has [In] (only upstream: [Ge])`.
    pub fn render(&self, left_name: &str, right_name: &str) -> String {
        match self {
            Difference::OnlyLeft { path, value } => {
                format!(
                    "{path}: {left_name} has {}, {right_name} has nothing",
                    brief(value)
                )
            }
            Difference::OnlyRight { path, value } => {
                format!(
                    "{path}: {left_name} has nothing, {right_name} has {}",
                    brief(value)
                )
            }
            Difference::Changed { path, left, right } => format!(
                "{path}: {left_name} has {}, {right_name} has {}",
                brief(left),
                brief(right)
            ),
            Difference::Set { path, left, right } => {
                let mut line = format!(
                    "{path}: {left_name} has {}, {right_name} has {}",
                    list(left.iter()),
                    list(right.iter())
                );
                let only_left = self.only_left_members();
                if !only_left.is_empty() {
                    line.push_str(&format!(
                        " (only {left_name}: {})",
                        list(only_left.into_iter())
                    ));
                }
                let only_right = self.only_right_members();
                if !only_right.is_empty() {
                    line.push_str(&format!(
                        " (only {right_name}: {})",
                        list(only_right.into_iter())
                    ));
                }
                line
            }
        }
    }
}

fn list<'a>(values: impl Iterator<Item = &'a Value>) -> String {
    format!("[{}]", values.map(canonical).collect::<Vec<_>>().join(", "))
}

/// Compact JSON, cut short: whole subschemas can be long.
fn brief(v: &Value) -> String {
    const MAX: usize = 160;
    let text = v.to_string();
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Every difference between two normal forms, in path order.
pub fn diff(left: &Value, right: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    diff_at(String::new(), None, left, right, &mut out);
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() || key.starts_with('[') {
        format!("{path}{key}")
    } else {
        format!("{path}.{key}")
    }
}

fn diff_at(
    path: String,
    key: Option<&str>,
    left: &Value,
    right: &Value,
    out: &mut Vec<Difference>,
) {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            let mut keys: Vec<&String> = l.keys().chain(r.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let sub = join(&path, k);
                match (l.get(k), r.get(k)) {
                    (Some(lv), Some(rv)) => diff_at(sub, Some(k), lv, rv, out),
                    (Some(lv), None) => out.push(Difference::OnlyLeft {
                        path: sub,
                        value: lv.clone(),
                    }),
                    (None, Some(rv)) => out.push(Difference::OnlyRight {
                        path: sub,
                        value: rv.clone(),
                    }),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(l), Value::Array(r)) if key.is_some_and(|k| SET_KEYS.contains(&k)) => {
            let same = l.len() == r.len() && l.iter().all(|v| r.contains(v));
            if !same {
                out.push(Difference::Set {
                    path,
                    left: l.clone(),
                    right: r.clone(),
                });
            }
        }
        _ if left == right => {}
        _ => out.push(Difference::Changed {
            path,
            left: left.clone(),
            right: right.clone(),
        }),
    }
}

#[cfg(test)]
mod tests;
