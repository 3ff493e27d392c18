//! Objects of one kind read from a file: each checked for its apiVersion,
//! kind and name, then typed, with every problem of the file collected.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::InputError;
use super::stream::for_each_object;
use super::yaml::ListDoc;

/// A boolean where text was expected is most often YAML 1.1 at work: kubectl,
/// and so the API server, reads a plain `y`, `n`, `yes`, `no`, `on`, `off` (in
/// any of three casings) as a boolean, and so does `check`.
fn with_yaml_hint(message: String) -> String {
    if ["boolean", "found true", "found false"]
        .iter()
        .any(|b| message.contains(b))
    {
        format!(
            "{message} (kubectl reads YAML 1.1: a plain y, n, yes, no, on, off is a boolean; quote it to mean text)"
        )
    } else {
        message
    }
}

/// Problems reported for one file before reading stops.
const MAX_PROBLEMS: usize = 100;

/// Objects of one kind from a file: single objects, `List`s (`items`), or both.
/// `check` runs on each raw object before it is typed and returns every
/// (field, message) it finds; `keep` takes each typed object and returns its
/// problems too. Problems are collected over the whole file, not stopped at the
/// first; only unreadable text (encoding, syntax) stops the reading.
pub(super) fn objects<T: DeserializeOwned>(
    path: &Path,
    api_version: &str,
    kind: &'static str,
    check: impl Fn(&mut Value) -> Vec<(String, String)>,
    mut keep: impl FnMut(T, usize) -> Vec<(String, String)>,
) -> Result<usize, InputError> {
    let mut count = 0;
    let mut errors = Vec::new();
    let lists = for_each_object(path, |doc_no, index, item| {
        // A file of a million broken items is not worth a million messages
        // (they cost more memory than the file).
        if errors.len() >= MAX_PROBLEMS {
            let mut all = std::mem::take(&mut errors);
            all.push(InputError::Stopped {
                path: path.to_owned(),
                after: MAX_PROBLEMS,
            });
            return Err(InputError::Several(all));
        }
        let at = index.map(|j| format!(", items[{j}]")).unwrap_or_default();
        let item = match item {
            Ok(item) => item,
            Err((field, message)) => {
                errors.push(InputError::Field {
                    path: path.to_owned(),
                    doc: doc_no,
                    what: at,
                    field,
                    message,
                });
                return Ok(());
            }
        };
        let found_kind = item.get("kind").and_then(Value::as_str);
        let found_api = item.get("apiVersion").and_then(Value::as_str);
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(|n| format!(" ({} {n})", found_kind.unwrap_or(kind)))
            .unwrap_or_default();
        let what = format!("{at}{name}");
        let fail = |field: &str, message: String| InputError::Field {
            path: path.to_owned(),
            doc: doc_no,
            what: what.clone(),
            field: field.to_owned(),
            message,
        };
        match found_api {
            None => {
                errors.push(fail(
                    "apiVersion",
                    format!("required: expected apiVersion: {api_version}"),
                ));
                return Ok(());
            }
            Some(a) if a != api_version && found_kind == Some(kind) => {
                errors.push(fail(
                    "apiVersion",
                    format!("expected {api_version} for a {kind}, found {a:?}"),
                ));
                return Ok(());
            }
            _ => {}
        }
        if found_kind != Some(kind) {
            errors.push(fail(
                "kind",
                format!(
                    "expected {kind} ({api_version}), found {} ({})",
                    found_kind.unwrap_or("no kind"),
                    found_api.unwrap_or_default(),
                ),
            ));
            return Ok(());
        }
        if name.is_empty() {
            let message = match item.pointer("/metadata/name") {
                None | Some(Value::Null) => "required".to_owned(),
                Some(other) => with_yaml_hint(format!("expected a string, found {other}")),
            };
            errors.push(fail("metadata.name", message));
            return Ok(());
        }
        let mut item = item;
        let problems = check(&mut item);
        let obj: T = match serde_path_to_error::deserialize(item) {
            Ok(obj) => obj,
            Err(e) => {
                errors.extend(problems.into_iter().map(|(f, m)| fail(&f, m)));
                errors.push(fail(
                    &e.path().to_string(),
                    with_yaml_hint(e.inner().to_string()),
                ));
                return Ok(());
            }
        };
        count += 1;
        let problems: Vec<_> = problems.into_iter().chain(keep(obj, doc_no)).collect();
        errors.extend(problems.into_iter().map(|(f, m)| fail(&f, m)));
        Ok(())
    })?;
    for l in &lists {
        if let Some(message) = empty_list_of_another_kind(l, kind) {
            errors.push(InputError::Field {
                path: path.to_owned(),
                doc: l.doc,
                what: String::new(),
                field: "kind".to_owned(),
                message,
            });
        }
    }
    if let Some(e) = InputError::from_all(errors) {
        return Err(e);
    }
    // An empty List is no objects, as kubectl prints it where there are none
    // (a cluster without DRA has no ResourceSlices); a file without any
    // document is no answer at all.
    if count == 0 && lists.is_empty() {
        return Err(InputError::Empty {
            path: path.to_owned(),
            expected: kind,
        });
    }
    Ok(count)
}

/// Why an empty list is not one of `kind`: `kubectl get` prints `List`, the
/// API `<kind>List`; an empty list of anything else is some other file (its
/// items, had it any, would each be refused for their kind).
fn empty_list_of_another_kind(list: &ListDoc, kind: &str) -> Option<String> {
    if list.items > 0 {
        return None;
    }
    match list.kind.as_deref() {
        Some("List") => None,
        Some(k) if k.strip_suffix("List") == Some(kind) => None,
        found => Some(format!(
            "an empty list of {}: expected List or {kind}List",
            found.map_or_else(|| "no kind".to_owned(), |k| format!("kind {k}"))
        )),
    }
}
