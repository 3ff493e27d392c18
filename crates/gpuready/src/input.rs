//! Reading node dumps and profile files, with errors that name the file, the
//! document and the field.
//!
//! Files are read the way kubectl reads them (UTF-8 or UTF-16 with a byte-order
//! mark; one JSON value, or a YAML stream read as YAML 1.1 like kubectl: see
//! [`yaml`]) and the items of a `List` are streamed, JSON and YAML alike: each is
//! parsed, checked and turned into its typed object on its own, so memory stays
//! near the size of the input instead of holding the whole file as a tree next
//! to the typed copy.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use gpuready_api::GpuNodeProfile;
use gpuready_api::dra::ResourceSlice;
use gpuready_api::nfd::NodeFeature;
use k8s_openapi::api::core::v1::Node;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess};
use serde_json::Value;

mod yaml;
use yaml::ListDoc;
pub use yaml::{MAX_DEPTH, MAX_OBJECT_CHARS};

/// Input that cannot be used. Always maps to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Encoding { path: PathBuf, message: String },
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
    #[error(
        "{path}: no {expected} objects found: the file holds no document, only empty ones or comments (a command whose output went to it may have failed); where there are none, kubectl writes an empty List: {{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": []}}"
    )]
    Empty {
        path: PathBuf,
        expected: &'static str,
    },
    #[error("{path}: stopped reading after {after} problems")]
    Stopped { path: PathBuf, after: usize },
    /// Every problem of a file, as the API server lists every problem of an
    /// object: one per line, each worded like a single error.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\nerror: "))]
    Several(Vec<InputError>),
}

impl InputError {
    /// One error, or all of them; None when there are none.
    fn from_all(mut errors: Vec<InputError>) -> Option<InputError> {
        match errors.len() {
            0 => None,
            1 => Some(errors.remove(0)),
            _ => Some(InputError::Several(errors)),
        }
    }
}

/// Deeper flow nesting (`[[[…` or `{{{…`) than any Kubernetes object needs. The
/// YAML scanner's time grows with the square of this depth, so it is bounded
/// before parsing, the way serde_json's recursion limit bounds JSON.
pub const MAX_FLOW_DEPTH: usize = 256;

/// The text of a file: UTF-8 (a byte-order mark is dropped) or UTF-16 with a
/// byte-order mark, as kubectl accepts. Invalid UTF-8 names the byte offset.
fn read_text(path: &Path) -> Result<String, InputError> {
    let bytes = std::fs::read(path).map_err(|source| InputError::Read {
        path: path.to_owned(),
        source,
    })?;
    let encoding = |message: String| InputError::Encoding {
        path: path.to_owned(),
        message,
    };
    let utf16 = |body: &[u8], from: fn([u8; 2]) -> u16, name: &str| {
        if !body.len().is_multiple_of(2) {
            return Err(encoding(format!(
                "{name} text with an odd number of bytes ({})",
                body.len() + 2
            )));
        }
        let units = body.chunks_exact(2).map(|c| from([c[0], c[1]]));
        char::decode_utf16(units)
            .enumerate()
            .map(|(i, c)| {
                c.map_err(|_| {
                    encoding(format!(
                        "not valid {name}: unpaired surrogate at byte {}",
                        2 + 2 * i
                    ))
                })
            })
            .collect::<Result<String, _>>()
    };
    match bytes.as_slice() {
        [0xFF, 0xFE, body @ ..] => return utf16(body, u16::from_le_bytes, "UTF-16LE"),
        [0xFE, 0xFF, body @ ..] => return utf16(body, u16::from_be_bytes, "UTF-16BE"),
        _ => {}
    }
    // UTF-8, converted in place: a copy would double the peak for a large dump.
    let mut bytes = bytes;
    let bom = if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        bytes.drain(..3);
        3
    } else {
        0
    };
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..at].iter().filter(|b| **b == b'\n').count();
        encoding(format!(
            "not valid UTF-8 at byte {} (line {line}): save the file as UTF-8 (or UTF-16 with a byte-order mark)",
            at + bom
        ))
    })
}

/// The line where flow nesting in `text` passes [`MAX_FLOW_DEPTH`], if it
/// does. (Dense but shallow flow text needs no such bound any more: the YAML
/// reader streams items and bounds each object, see [`yaml`].) Brackets inside quoted scalars and comments are text, not nesting: a
/// valid `kubectl get nodes -o yaml` dump whose annotation holds 300 `[` is
/// read, as its JSON form is. A quote opens a quoted scalar only where a scalar
/// may begin (line start, after a space, `[`, `{`, `,` or `:`); inside a plain
/// scalar (`it's`) it is a letter, so a stray quote cannot hide real nesting
/// from this bound.
fn flow_too_deep(text: &str) -> Option<usize> {
    #[derive(PartialEq)]
    enum In {
        Plain,
        Single,
        Double,
        Comment,
    }
    let mut state = In::Plain;
    let mut depth = 0usize;
    let mut line = 1;
    let mut prev = b'\n';
    let mut bytes = text.bytes().peekable();
    while let Some(b) = bytes.next() {
        if b == b'\n' {
            line += 1;
        }
        let at_start = matches!(
            prev,
            b'\n' | b' ' | b'\t' | b'[' | b'{' | b',' | b':' | b'-' | b'?'
        );
        match state {
            In::Comment if b == b'\n' => state = In::Plain,
            In::Comment => {}
            // '' is a quote inside a single-quoted scalar.
            In::Single if b == b'\'' => {
                if bytes.peek() == Some(&b'\'') {
                    bytes.next();
                } else {
                    state = In::Plain;
                }
            }
            In::Single => {}
            In::Double if b == b'\\' => {
                bytes.next();
            }
            In::Double if b == b'"' => state = In::Plain,
            In::Double => {}
            In::Plain => match b {
                b'\'' if at_start => state = In::Single,
                b'"' if at_start => state = In::Double,
                b'#' if matches!(prev, b'\n' | b' ' | b'\t') => state = In::Comment,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        return Some(line);
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = b;
    }
    None
}

/// Whether the text is one JSON value. kubectl reads a file as YAML unless it
/// is a single JSON document; a YAML stream may still start with `{`, so a line
/// `---` (which a JSON string cannot hold: it has no raw newlines) means YAML.
fn is_single_json(text: &str) -> bool {
    let t = text.trim_start();
    (t.starts_with('{') || t.starts_with('['))
        && !text
            .lines()
            .any(|l| l == "---" || l.starts_with("--- ") || l.starts_with("---\t"))
}

/// Receives each object (or why it cannot become JSON: field, message) with its
/// 0-based index in `items` (None for a document that is the object itself).
type Sink<'a> =
    dyn FnMut(Option<usize>, Result<Value, (String, String)>) -> Result<(), InputError> + 'a;

/// Where a document's objects go while it is parsed: the caller's sink, and the
/// sink's typed error, kept while serde unwinds with a placeholder message.
struct DocCtx<'a> {
    sink: RefCell<&'a mut Sink<'a>>,
    failed: RefCell<Option<InputError>>,
    /// The document, where it was a list.
    list: RefCell<Option<ListDoc>>,
}

impl DocCtx<'_> {
    fn give(&self, index: Option<usize>, item: Value) -> Result<(), String> {
        let result = (self.sink.borrow_mut())(index, Ok(item));
        result.map_err(|e| {
            *self.failed.borrow_mut() = Some(e);
            SINK_FAILED.to_owned()
        })
    }
}

/// Sent up through serde when the sink failed; the real error is in `failed`.
const SINK_FAILED: &str = "input rejected";

/// Streams a document: a map's `items` list element by element, every other key
/// kept (they are small: apiVersion, kind, metadata). A document without `items`
/// is one object.
struct DocSeed<'c, 'a>(&'c DocCtx<'a>);

impl<'de> DeserializeSeed<'de> for DocSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> de::Visitor<'de> for DocSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object or List")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(()) // an empty YAML document
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut rest = serde_json::Map::new();
        let mut items = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                let n = map.next_value_seed(ItemsSeed(self.0))?;
                items = Some(items.unwrap_or(0) + n);
            } else {
                // A key twice: the last wins, as kubectl reads it.
                rest.insert(key, map.next_value::<Value>()?);
            }
        }
        if let Some(n) = items {
            *self.0.list.borrow_mut() = Some(ListDoc::of(1, &rest, n));
            return Ok(());
        }
        self.0
            .give(None, Value::Object(rest))
            .map_err(de::Error::custom)
    }
}

struct ItemsSeed<'c, 'a>(&'c DocCtx<'a>);

/// Streams `items`; its value is how many there were.
impl<'de> DeserializeSeed<'de> for ItemsSeed<'_, '_> {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> de::Visitor<'de> for ItemsSeed<'_, '_> {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("items: a list of objects")
    }
    fn visit_unit<E: de::Error>(self) -> Result<usize, E> {
        Ok(0) // `items: null`
    }
    fn visit_none<E: de::Error>(self) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut index = 0;
        while let Some(item) = seq.next_element::<Value>()? {
            self.0.give(Some(index), item).map_err(de::Error::custom)?;
            index += 1;
        }
        Ok(index)
    }
}

/// Runs one document through the sink; the sink's own error wins over the
/// placeholder serde carried up. Returns the document's list header, where it
/// was a list.
fn one_document<'de, 'a, D>(
    de: D,
    sink: &'a mut Sink<'a>,
    syntax: impl FnOnce(String) -> InputError,
) -> Result<Option<ListDoc>, InputError>
where
    D: Deserializer<'de>,
    D::Error: fmt::Display,
{
    let ctx = DocCtx {
        sink: RefCell::new(sink),
        failed: RefCell::new(None),
        list: RefCell::new(None),
    };
    let result = DocSeed(&ctx).deserialize(de).map_err(|e| e.to_string());
    if let Some(e) = ctx.failed.into_inner() {
        return Err(e);
    }
    result.map_err(syntax)?;
    Ok(ctx.list.into_inner())
}

/// Calls `sink(doc, index, object)` for every object of a file, streaming;
/// returns the documents that were lists (`items`), however many items each
/// held.
fn for_each_object(
    path: &Path,
    mut sink: impl FnMut(
        usize,
        Option<usize>,
        Result<Value, (String, String)>,
    ) -> Result<(), InputError>,
) -> Result<Vec<ListDoc>, InputError> {
    let text = read_text(path)?;
    let syntax = |doc: usize| {
        move |message: String| InputError::Syntax {
            path: path.to_owned(),
            doc,
            message,
        }
    };
    if is_single_json(&text) {
        let mut de = serde_json::Deserializer::from_str(&text);
        let mut per_doc = |index: Option<usize>, value| sink(1, index, value);
        let list = one_document(&mut de, &mut per_doc, syntax(1))?;
        de.end().map_err(|e| syntax(1)(e.to_string()))?;
        return Ok(list.into_iter().collect());
    }
    if let Some(line) = flow_too_deep(&text) {
        return Err(syntax(1)(format!(
            "flow collections ([ or {{) nested deeper than {MAX_FLOW_DEPTH} levels at line {line}: no Kubernetes object needs that"
        )));
    }
    yaml::for_each_item(&text, &mut sink).map_err(|stop| match stop {
        yaml::Stop::Syntax(doc, message) => syntax(doc)(message),
        yaml::Stop::Sink(e) => e,
    })
}

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
fn objects<T: DeserializeOwned>(
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

/// Nodes as `kubectl get nodes -o json` (or `-o yaml`) prints them, handed to
/// `each` one by one as they are read (and dropped after it).
pub fn for_each_node(path: &Path, each: &mut dyn FnMut(&Node)) -> Result<(), InputError> {
    objects(
        path,
        "v1",
        "Node",
        |_: &mut Value| Vec::new(),
        |n: Node, _| {
            each(&n);
            Vec::new()
        },
    )
    .map(|_| ())
}

/// ResourceSlices as `kubectl get resourceslices -o json` prints them.
pub fn read_resource_slices(path: &Path) -> Result<Vec<ResourceSlice>, InputError> {
    let mut out = Vec::new();
    objects(
        path,
        "resource.k8s.io/v1",
        "ResourceSlice",
        |_: &mut Value| Vec::new(),
        |s: ResourceSlice, _| {
            out.push(s);
            Vec::new()
        },
    )?;
    Ok(out)
}

/// The DRA driver's ComputeDomainCliques as `kubectl get computedomaincliques
/// -A -o json` prints them.
pub fn read_compute_domain_cliques(
    path: &Path,
) -> Result<Vec<gpuready_api::compute_domain::ComputeDomainClique>, InputError> {
    let mut out = Vec::new();
    objects(
        path,
        "resource.nvidia.com/v1beta1",
        "ComputeDomainClique",
        |_: &mut Value| Vec::new(),
        |c: gpuready_api::compute_domain::ComputeDomainClique, _| {
            out.push(c);
            Vec::new()
        },
    )?;
    Ok(out)
}

/// DeviceTaintRules, anyone's, as `kubectl get devicetaintrules -o json`
/// prints them.
pub fn read_device_taint_rules(
    path: &Path,
) -> Result<Vec<gpuready_api::device_taint_rule::DeviceTaintRule>, InputError> {
    let mut out = Vec::new();
    objects(
        path,
        "resource.k8s.io/v1",
        "DeviceTaintRule",
        |_: &mut Value| Vec::new(),
        |r: gpuready_api::device_taint_rule::DeviceTaintRule, _| {
            out.push(r);
            Vec::new()
        },
    )?;
    Ok(out)
}

/// ResourceClaims as `kubectl get resourceclaims -A -o json` prints them
/// (only the scheduler's extended-resource claims are read from them).
pub fn read_resource_claims(
    path: &Path,
) -> Result<Vec<gpuready_api::resource_claim::ResourceClaim>, InputError> {
    let mut out = Vec::new();
    objects(
        path,
        "resource.k8s.io/v1",
        "ResourceClaim",
        |_: &mut Value| Vec::new(),
        |c: gpuready_api::resource_claim::ResourceClaim, _| {
            out.push(c);
            Vec::new()
        },
    )?;
    Ok(out)
}

/// NFD NodeFeatures as `kubectl get nodefeatures -A -o json` prints them.
/// ConfigMaps (probe report carriers, for `check --probe-reports`): a List,
/// single objects, multi-document YAML, as `kubectl get configmaps -o yaml`
/// prints them. Which of them carry reports is the core's business
/// (`gpuready_core::probe::Carriers`).
pub fn read_configmaps(
    path: &Path,
) -> Result<Vec<k8s_openapi::api::core::v1::ConfigMap>, InputError> {
    let mut out = Vec::new();
    objects(
        path,
        "v1",
        "ConfigMap",
        |_: &mut Value| Vec::new(),
        |c: k8s_openapi::api::core::v1::ConfigMap, _| {
            out.push(c);
            Vec::new()
        },
    )?;
    Ok(out)
}

pub fn read_node_features(path: &Path) -> Result<Vec<NodeFeature>, InputError> {
    let mut out = Vec::new();
    objects(
        path,
        "nfd.k8s-sigs.io/v1alpha1",
        "NodeFeature",
        |_: &mut Value| Vec::new(),
        |f: NodeFeature, _| match gpuready_core::evidence::node_feature_node(&f) {
            Some(_) => {
                out.push(f);
                Vec::new()
            }
            None => vec![(
                format!(
                    "metadata.labels[{}]",
                    gpuready_api::keys::nfd::NODE_NAME_LABEL
                ),
                "required: it names the node the features belong to".to_owned(),
            )],
        },
    )?;
    Ok(out)
}

/// Profiles of several files, checked with the same rules the API server applies
/// at admission, and refused when two share a name: the API server holds one
/// object per name, so the second would replace the first (kubectl apply) or be
/// refused (create), never sit beside it.
pub fn read_all_profiles(paths: &[PathBuf]) -> Result<Vec<GpuNodeProfile>, InputError> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut errors = Vec::new();
    for path in paths {
        let read = objects(
            path,
            "gpuready.io/v1alpha1",
            "GpuNodeProfile",
            |raw: &mut Value| {
                // What the server stores: nulls of non-nullable fields dropped,
                // integral floats (1000.0, 1.5e7) of integer fields as integers.
                gpuready_api::validate::prune_nulls(raw);
                gpuready_api::validate::integral_numbers(raw);
                // Strict like `kubectl apply` (server-side field validation
                // Strict): a misspelt field would otherwise be dropped silently
                // and the check would judge a different profile.
                gpuready_api::validate::unknown_fields(raw)
                    .into_iter()
                    .map(|field| (field, "unknown field (misspelt?)".to_owned()))
                    .collect()
            },
            |p: GpuNodeProfile, doc| {
                let mut problems: Vec<(String, String)> = p
                    .validate()
                    .into_iter()
                    .map(|e| (e.field, e.message))
                    .collect();
                if let Err(e) = gpuready_core::select::profile_selector(&p) {
                    problems.push(("spec.nodeSelector".into(), e.message));
                }
                let name = p.metadata.name.clone().unwrap_or_default();
                let here = format!("{} document {doc}", path.display());
                if let Some(first) = seen.insert(name.clone(), here) {
                    problems.push((
                        "metadata.name".into(),
                        format!(
                            "{name:?} is also the name of the profile in {first}: the API server keeps one object per name (give each profile its own name)"
                        ),
                    ));
                }
                if problems.is_empty() {
                    out.push(p);
                }
                problems
            },
        );
        if let Err(e) = read {
            errors.push(e);
        }
    }
    match InputError::from_all(errors) {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod depth_tests {
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
}

#[cfg(test)]
mod empty_list_tests {
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
}
