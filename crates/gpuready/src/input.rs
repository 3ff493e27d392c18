//! Reading node dumps and profile files, with errors that name the file, the
//! document and the field.

use std::path::{Path, PathBuf};

use gpuready_api::GpuNodeProfile;
use gpuready_api::dra::ResourceSlice;
use gpuready_api::nfd::NodeFeature;
use k8s_openapi::api::core::v1::Node;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Input that cannot be used. Always maps to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: document {doc}: not valid YAML or JSON: {message}")]
    Syntax {
        path: PathBuf,
        doc: usize,
        message: String,
    },
    #[error("{path}: document {doc}{what}: {field}: {message}")]
    Field {
        path: PathBuf,
        doc: usize,
        what: String,
        field: String,
        message: String,
    },
    #[error("{path}: no {expected} objects found")]
    Empty {
        path: PathBuf,
        expected: &'static str,
    },
    /// Every problem of a file, as the API server lists every problem of an
    /// object: one per line, each worded like a single error.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\nerror: "))]
    Several(Vec<InputError>),
}

/// Splits a file into documents: one JSON value, or a YAML stream. Each comes
/// with its 1-based position in the file; empty documents are skipped but still
/// counted, so messages number documents the way the file shows them.
fn documents(path: &Path) -> Result<Vec<(usize, Value)>, InputError> {
    let text = std::fs::read_to_string(path).map_err(|source| InputError::Read {
        path: path.to_owned(),
        source,
    })?;
    if text.trim_start().starts_with('{') || text.trim_start().starts_with('[') {
        return serde_json::from_str::<Value>(&text)
            .map(|v| vec![(1, v)])
            .map_err(|e| InputError::Syntax {
                path: path.to_owned(),
                doc: 1,
                message: e.to_string(),
            });
    }
    let mut docs = Vec::new();
    for (i, de) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
        let v = serde::Deserialize::deserialize(de).map_err(|e: serde_yaml_ng::Error| {
            InputError::Syntax {
                path: path.to_owned(),
                doc: i + 1,
                message: e.to_string(),
            }
        })?;
        if !matches!(v, Value::Null) {
            docs.push((i + 1, v));
        }
    }
    Ok(docs)
}

/// Objects of one kind from a file: single objects, `List`s (`items`), or both.
/// `check` runs on each parsed object and returns every (field, message) it
/// finds. Problems are collected over the whole file, not stopped at the first.
fn objects<T: DeserializeOwned>(
    path: &Path,
    api_version: Option<&str>,
    kind: &'static str,
    check: impl Fn(&T, &Value) -> Vec<(String, String)>,
) -> Result<Vec<T>, InputError> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (doc_no, doc) in documents(path)? {
        let items: Vec<(String, Value)> = match doc.get("items") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(j, v)| (format!(", items[{j}]"), v.clone()))
                .collect(),
            _ => vec![(String::new(), doc)],
        };
        for (at, item) in items {
            let name = item
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(|n| format!(" ({kind} {n})"))
                .unwrap_or_default();
            let what = format!("{at}{name}");
            let fail = |field: String, message: String| InputError::Field {
                path: path.to_owned(),
                doc: doc_no,
                what: what.clone(),
                field,
                message,
            };
            let found_kind = item.get("kind").and_then(Value::as_str).unwrap_or("");
            let found_api = item.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            if found_kind != kind || api_version.is_some_and(|a| a != found_api) {
                errors.push(fail(
                    "kind".into(),
                    format!(
                        "expected {}{kind}, found {found_api} {found_kind}",
                        api_version.map(|a| format!("{a} ")).unwrap_or_default()
                    ),
                ));
                continue;
            }
            if name.is_empty() {
                errors.push(fail("metadata.name".into(), "required".into()));
                continue;
            }
            let obj: T = match serde_path_to_error::deserialize(item.clone()) {
                Ok(obj) => obj,
                Err(e) => {
                    errors.push(fail(e.path().to_string(), e.inner().to_string()));
                    continue;
                }
            };
            let problems = check(&obj, &item);
            if problems.is_empty() {
                out.push(obj);
            }
            errors.extend(
                problems
                    .into_iter()
                    .map(|(field, message)| fail(field, message)),
            );
        }
    }
    if errors.len() == 1 {
        return Err(errors.remove(0));
    }
    if !errors.is_empty() {
        return Err(InputError::Several(errors));
    }
    if out.is_empty() {
        return Err(InputError::Empty {
            path: path.to_owned(),
            expected: kind,
        });
    }
    Ok(out)
}

/// Nodes as `kubectl get nodes -o json` (or `-o yaml`) prints them.
pub fn read_nodes(path: &Path) -> Result<Vec<Node>, InputError> {
    objects(path, None, "Node", |_, _| Vec::new())
}

/// ResourceSlices as `kubectl get resourceslices -o json` prints them.
pub fn read_resource_slices(path: &Path) -> Result<Vec<ResourceSlice>, InputError> {
    objects(path, Some("resource.k8s.io/v1"), "ResourceSlice", |_, _| {
        Vec::new()
    })
}

/// NFD NodeFeatures as `kubectl get nodefeatures -A -o json` prints them.
pub fn read_node_features(path: &Path) -> Result<Vec<NodeFeature>, InputError> {
    objects(
        path,
        Some("nfd.k8s-sigs.io/v1alpha1"),
        "NodeFeature",
        |f: &NodeFeature, _| match gpuready_core::evidence::node_feature_node(f) {
            Some(_) => Vec::new(),
            None => vec![(
                format!(
                    "metadata.labels[{}]",
                    gpuready_api::keys::nfd::NODE_NAME_LABEL
                ),
                "required: it names the node the features belong to".to_owned(),
            )],
        },
    )
}

/// Profiles, checked with the same rules the API server applies at admission.
pub fn read_profiles(path: &Path) -> Result<Vec<GpuNodeProfile>, InputError> {
    objects(
        path,
        Some("gpuready.io/v1alpha1"),
        "GpuNodeProfile",
        |p: &GpuNodeProfile, raw: &Value| {
            // Strict like `kubectl apply`: a misspelt field would otherwise be
            // dropped silently and the check would judge a different profile.
            let known = serde_json::to_value(&p.spec).unwrap_or(Value::Null);
            let mut problems = Vec::new();
            if let Some(spec) = raw.get("spec") {
                unknown_fields(spec, &known, "spec", &mut problems);
            }
            problems.extend(p.validate().into_iter().map(|e| (e.field, e.message)));
            if let Err(e) = gpuready_core::select::profile_selector(p) {
                problems.push(("spec.nodeSelector".to_owned(), e.message));
            }
            problems
        },
    )
}

/// Every key of `raw` that the typed round trip `known` does not have, as a
/// problem. Empty values are skipped: the types omit empty lists and maps when
/// serializing.
fn unknown_fields(raw: &Value, known: &Value, path: &str, out: &mut Vec<(String, String)>) {
    let (Value::Object(raw), Value::Object(known)) = (raw, known) else {
        return;
    };
    // Free-form maps (labels, resources, selector labels) hold user keys.
    if [
        "spec.readyLabels",
        "spec.resources",
        "spec.nodeSelector.matchLabels",
    ]
    .contains(&path)
    {
        return;
    }
    for (key, value) in raw {
        let here = format!("{path}.{key}");
        let empty = match value {
            Value::Null => true,
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        };
        match known.get(key) {
            None if !empty => out.push((here, "unknown field (misspelt?)".to_owned())),
            Some(k) => unknown_fields(value, k, &here, out),
            None => {}
        }
    }
}
