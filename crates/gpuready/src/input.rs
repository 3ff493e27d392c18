//! Reading node dumps and profile files, with errors that name the file, the
//! document and the field.
//!
//! Files are read the way kubectl reads them (UTF-8 or UTF-16 with a byte-order
//! mark; one JSON value or a YAML stream, merge keys `<<` applied) and the items of
//! a `List` are streamed: each is parsed, checked and turned into its typed object
//! on its own, so memory stays near the size of the input instead of holding the
//! whole file as a JSON tree next to the typed copy.

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
    #[error("{path}: no {expected} objects found")]
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

/// At least this many bytes of YAML per flow collection (`[`, `{`), on
/// average over a file. The YAML parser holds every event of a document before
/// any of it is read, several hundred bytes each: 19 MB of `[[…]]` took 52 s and
/// 4.87 GB (issue 24). A `kubectl get -o yaml` dump has one `{}` in 40 bytes or
/// fewer (managedFields); text denser than one in 16 is refused before parsing,
/// which bounds the parser's events by the file's size as for block-style YAML.
const FLOW_BYTES_PER_COLLECTION: usize = 16;

/// Why [`flow_too_deep`] refuses a text, with the line where it noticed.
#[derive(Debug, PartialEq, Eq)]
enum FlowProblem {
    Deep(usize),
    Dense(usize),
}

/// The line where flow nesting in `text` passes [`MAX_FLOW_DEPTH`], or its
/// flow collections get denser than one in [`FLOW_BYTES_PER_COLLECTION`] bytes, if
/// they do. Brackets inside quoted scalars and comments are text, not nesting: a
/// valid `kubectl get nodes -o yaml` dump whose annotation holds 300 `[` is
/// read, as its JSON form is. A quote opens a quoted scalar only where a scalar
/// may begin (line start, after a space, `[`, `{`, `,` or `:`); inside a plain
/// scalar (`it's`) it is a letter, so a stray quote cannot hide real nesting
/// from this bound.
fn flow_too_deep(text: &str) -> Option<FlowProblem> {
    #[derive(PartialEq)]
    enum In {
        Plain,
        Single,
        Double,
        Comment,
    }
    let mut state = In::Plain;
    let mut depth = 0usize;
    let mut opened = 0usize;
    let dense = text.len() / FLOW_BYTES_PER_COLLECTION + 1024;
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
                    opened += 1;
                    if depth > MAX_FLOW_DEPTH {
                        return Some(FlowProblem::Deep(line));
                    }
                    if opened > dense {
                        return Some(FlowProblem::Dense(line));
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

/// An item as a parser produced it, turned into JSON the way kubectl converts
/// YAML: merge keys applied, non-finite numbers refused (JSON cannot carry them:
/// `.nan` would otherwise become null and the field silently vanish).
trait IntoJson: DeserializeOwned {
    /// A map of this kind from its entries (a document that is one object).
    fn object(entries: Vec<(String, Self)>) -> Self;
    fn into_json(self) -> Result<Value, (String, String)>;
}

impl IntoJson for Value {
    fn object(entries: Vec<(String, Self)>) -> Self {
        Value::Object(entries.into_iter().collect())
    }
    fn into_json(self) -> Result<Value, (String, String)> {
        Ok(self)
    }
}

/// A YAML value read the way kubectl reads one: a key given twice in one
/// mapping keeps its last value (kubectl's YAML decoder does, and the API server
/// then stores that), where serde_yaml_ng's own `Value` refuses the document.
struct KubectlYaml(serde_yaml_ng::Value);

impl<'de> serde::Deserialize<'de> for KubectlYaml {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde_yaml_ng::Value as Y;
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = KubectlYaml;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<KubectlYaml, E> {
                Ok(KubectlYaml(Y::Bool(b)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<KubectlYaml, E> {
                Ok(KubectlYaml(Y::Number(n.into())))
            }
            fn visit_u64<E>(self, n: u64) -> Result<KubectlYaml, E> {
                Ok(KubectlYaml(Y::Number(n.into())))
            }
            fn visit_f64<E>(self, n: f64) -> Result<KubectlYaml, E> {
                Ok(KubectlYaml(Y::Number(n.into())))
            }
            fn visit_str<E>(self, s: &str) -> Result<KubectlYaml, E> {
                Ok(KubectlYaml(Y::String(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<KubectlYaml, E> {
                Ok(KubectlYaml(Y::String(s)))
            }
            fn visit_unit<E>(self) -> Result<KubectlYaml, E> {
                Ok(KubectlYaml(Y::Null))
            }
            fn visit_none<E>(self) -> Result<KubectlYaml, E> {
                Ok(KubectlYaml(Y::Null))
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<KubectlYaml, D2::Error> {
                serde::Deserialize::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KubectlYaml, A::Error> {
                let mut out = Vec::new();
                while let Some(KubectlYaml(v)) = seq.next_element()? {
                    out.push(v);
                }
                Ok(KubectlYaml(Y::Sequence(out)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KubectlYaml, A::Error> {
                let mut out = serde_yaml_ng::Mapping::new();
                while let Some(KubectlYaml(k)) = map.next_key()? {
                    let KubectlYaml(v) = map.next_value()?;
                    // Last one wins, in the first one's place.
                    out.insert(k, v);
                }
                Ok(KubectlYaml(Y::Mapping(out)))
            }
            fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<KubectlYaml, A::Error> {
                use serde::de::VariantAccess;
                let (tag, contents) = data.variant::<String>()?;
                let KubectlYaml(value) = contents.newtype_variant()?;
                Ok(KubectlYaml(Y::Tagged(Box::new(
                    serde_yaml_ng::value::TaggedValue {
                        tag: serde_yaml_ng::value::Tag::new(tag),
                        value,
                    },
                ))))
            }
        }
        d.deserialize_any(V)
    }
}

impl IntoJson for KubectlYaml {
    fn object(entries: Vec<(String, Self)>) -> Self {
        KubectlYaml(<serde_yaml_ng::Value as IntoJson>::object(
            entries
                .into_iter()
                .map(|(k, KubectlYaml(v))| (k, v))
                .collect(),
        ))
    }
    fn into_json(self) -> Result<Value, (String, String)> {
        self.0.into_json()
    }
}

impl IntoJson for serde_yaml_ng::Value {
    fn object(entries: Vec<(String, Self)>) -> Self {
        serde_yaml_ng::Value::Mapping(
            entries
                .into_iter()
                .map(|(k, v)| (serde_yaml_ng::Value::String(k), v))
                .collect(),
        )
    }
    fn into_json(mut self) -> Result<Value, (String, String)> {
        self.apply_merge()
            .map_err(|e| (".".to_owned(), format!("YAML merge key (<<): {e}")))?;
        yaml_to_json(self, &mut String::new())
    }
}

fn yaml_to_json(v: serde_yaml_ng::Value, path: &mut String) -> Result<Value, (String, String)> {
    use serde_yaml_ng::Value as Y;
    let here = |path: &str| {
        if path.is_empty() {
            ".".to_owned()
        } else {
            path.to_owned()
        }
    };
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::String(s) => Value::String(s),
        Y::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::from(u)
            } else if let Some(i) = n.as_i64() {
                Value::from(i)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .ok_or_else(|| {
                        (
                            here(path),
                            format!("{n} is not a number JSON (and so the API server) can hold"),
                        )
                    })?
            }
        }
        Y::Sequence(items) => {
            let base = path.len();
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                out.push(yaml_to_json(item, path)?);
                path.truncate(base);
            }
            Value::Array(out)
        }
        Y::Mapping(map) => {
            let base = path.len();
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    other => {
                        return Err((
                            here(path),
                            format!("a map key must be a string, found {other:?}"),
                        ));
                    }
                };
                if base > 0 {
                    path.push('.');
                }
                path.push_str(&key);
                let value = yaml_to_json(v, path)?;
                path.truncate(base);
                out.insert(key, value);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(t.value, path)?,
    })
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
}

impl DocCtx<'_> {
    fn give<I: IntoJson>(&self, index: Option<usize>, item: I) -> Result<(), String> {
        let result = (self.sink.borrow_mut())(index, item.into_json());
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
struct DocSeed<'c, 'a, I>(&'c DocCtx<'a>, std::marker::PhantomData<I>);

impl<'de, I: IntoJson> DeserializeSeed<'de> for DocSeed<'_, '_, I> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, I: IntoJson> de::Visitor<'de> for DocSeed<'_, '_, I> {
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
        let mut rest: Vec<(String, I)> = Vec::new();
        let mut had_items = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                had_items = true;
                map.next_value_seed(ItemsSeed::<I>(self.0, std::marker::PhantomData))?;
            } else {
                // A key twice: the last wins, as kubectl reads it.
                let value = map.next_value::<I>()?;
                match rest.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = value,
                    None => rest.push((key, value)),
                }
            }
        }
        if had_items {
            return Ok(());
        }
        self.0
            .give(None, I::object(rest))
            .map_err(de::Error::custom)
    }
}

struct ItemsSeed<'c, 'a, I>(&'c DocCtx<'a>, std::marker::PhantomData<I>);

impl<'de, I: IntoJson> DeserializeSeed<'de> for ItemsSeed<'_, '_, I> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, I: IntoJson> de::Visitor<'de> for ItemsSeed<'_, '_, I> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("items: a list of objects")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(()) // `items: null`
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some(item) = seq.next_element::<I>()? {
            self.0.give(Some(index), item).map_err(de::Error::custom)?;
            index += 1;
        }
        Ok(())
    }
}

/// Runs one document through the sink; the sink's own error wins over the
/// placeholder serde carried up.
fn one_document<'de, 'a, I: IntoJson, D>(
    de: D,
    sink: &'a mut Sink<'a>,
    syntax: impl FnOnce(String) -> InputError,
) -> Result<(), InputError>
where
    D: Deserializer<'de>,
    D::Error: fmt::Display,
{
    let ctx = DocCtx {
        sink: RefCell::new(sink),
        failed: RefCell::new(None),
    };
    let result = DocSeed::<I>(&ctx, std::marker::PhantomData)
        .deserialize(de)
        .map_err(|e| e.to_string());
    if let Some(e) = ctx.failed.into_inner() {
        return Err(e);
    }
    result.map_err(syntax)
}

/// Calls `sink(doc, index, object)` for every object of a file, streaming.
fn for_each_object(
    path: &Path,
    mut sink: impl FnMut(
        usize,
        Option<usize>,
        Result<Value, (String, String)>,
    ) -> Result<(), InputError>,
) -> Result<(), InputError> {
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
        one_document::<Value, _>(&mut de, &mut per_doc, syntax(1))?;
        return de.end().map_err(|e| syntax(1)(e.to_string()));
    }
    match flow_too_deep(&text) {
        Some(FlowProblem::Deep(line)) => {
            return Err(syntax(1)(format!(
                "flow collections ([ or {{) nested deeper than {MAX_FLOW_DEPTH} levels at line {line}: no Kubernetes object needs that"
            )));
        }
        Some(FlowProblem::Dense(line)) => {
            return Err(syntax(1)(format!(
                "more flow collections ([ or {{) than one in {FLOW_BYTES_PER_COLLECTION} bytes by line {line}: no Kubernetes object needs that (convert the file to JSON to read it anyway)"
            )));
        }
        None => {}
    }
    for (i, de) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
        let mut per_doc = |index: Option<usize>, value| sink(i + 1, index, value);
        one_document::<KubectlYaml, _>(de, &mut per_doc, syntax(i + 1))?;
    }
    Ok(())
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
    for_each_object(path, |doc_no, index, item| {
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
            errors.push(fail("metadata.name", "required".into()));
            return Ok(());
        }
        let mut item = item;
        let problems = check(&mut item);
        let obj: T = match serde_path_to_error::deserialize(item) {
            Ok(obj) => obj,
            Err(e) => {
                errors.extend(problems.into_iter().map(|(f, m)| fail(&f, m)));
                errors.push(fail(&e.path().to_string(), e.inner().to_string()));
                return Ok(());
            }
        };
        count += 1;
        let problems: Vec<_> = problems.into_iter().chain(keep(obj, doc_no)).collect();
        errors.extend(problems.into_iter().map(|(f, m)| fail(&f, m)));
        Ok(())
    })?;
    if let Some(e) = InputError::from_all(errors) {
        return Err(e);
    }
    if count == 0 {
        return Err(InputError::Empty {
            path: path.to_owned(),
            expected: kind,
        });
    }
    Ok(count)
}

/// Nodes as `kubectl get nodes -o json` (or `-o yaml`) prints them, appended to
/// `out` one by one as they are read.
pub fn read_nodes_into(path: &Path, out: &mut Vec<Node>) -> Result<(), InputError> {
    objects(
        path,
        "v1",
        "Node",
        |_: &mut Value| Vec::new(),
        |n: Node, _| {
            out.push(n);
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
        // Shallow but dense: refused too, before the parser holds it all.
        let dense = format!("a: [{}]\n", "[],".repeat(100_000));
        assert!(matches!(flow_too_deep(&dense), Some(FlowProblem::Dense(1))));
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
