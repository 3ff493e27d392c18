//! YAML streams read event by event into JSON objects, the way kubectl turns
//! YAML into the JSON it sends.
//!
//! The structure (indentation, flow collections, quoting, anchors) is parsed by
//! saphyr-parser, whose events arrive one at a time: a `List`'s `items` are
//! handed on one by one as they end, and no tree of the whole document is ever
//! held (serde_yaml_ng collects every event of a document before reading any:
//! 19 MB of YAML took 864 MB, issue 24).
//!
//! The meaning of plain scalars is written here, because no Rust crate reads
//! them as kubectl does: kubectl and `kubectl apply`'s server-side cousins read
//! YAML with sigs.k8s.io/yaml over go-yaml v2, which resolves YAML 1.1 scalars
//! (`yes`, `on`, `y`, `Off` are booleans, `0777` is octal, `1_000` is 1000),
//! where serde_yaml_ng and saphyr resolve YAML 1.2 (all of those are strings or
//! other numbers there). [`scalar::resolve_plain`] follows go-yaml v2's resolve.go; the
//! differential test (tests/api/profile_differential.rs) checks it against a real
//! kubectl and API server. Merge keys (`<<`) are applied in go-yaml v2's order
//! (each entry set in turn, so a later key overrides an earlier one), and a key
//! given twice keeps its last value.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Value};

mod scalar;
use scalar::{resolve, resolve_plain};

/// Nesting of collections (block or flow) deeper than any Kubernetes object
/// needs; refused before it is built.
pub const MAX_DEPTH: usize = 256;

/// The longest text of one object (a `List`'s item, or a document that is one
/// object), in characters: the API server takes no request body over 3 MiB, so
/// no object it returns is longer, and an object's parsed form costs many times
/// its text. Refused as soon as an object passes it, before it is built.
pub const MAX_OBJECT_CHARS: usize = 3 * 1024 * 1024;

/// Values that aliases (`*a`) may add beyond the events read so far: a
/// "billion laughs" of nested aliases is refused instead of expanded.
const ALIAS_ALLOWANCE: usize = 100_000;

/// An object, or why one cannot become JSON (field, message), with its
/// document number (from 1) and its index in `items` (None for a document
/// that is the object itself).
pub type Item = Result<Value, (String, String)>;

/// A document that was a list (it had `items`): its number (from 1), its
/// `kind` and `apiVersion` where they are text, and how many items it held.
/// An empty one is what `kubectl get` prints where there is nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct ListDoc {
    pub doc: usize,
    pub kind: Option<String>,
    pub api_version: Option<String>,
    pub items: usize,
}

impl ListDoc {
    /// The list's header, from the document's keys other than `items`.
    pub fn of(doc: usize, header: &Map<String, Value>, items: usize) -> ListDoc {
        let text = |k: &str| header.get(k).and_then(Value::as_str).map(str::to_owned);
        ListDoc {
            doc,
            kind: text("kind"),
            api_version: text("apiVersion"),
            items,
        }
    }
}

/// Why reading stopped: the text is not YAML, not objects, or past a bound
/// (document number, message); or the sink's own error.
pub enum Stop<E> {
    Syntax(usize, String),
    Sink(E),
}

#[derive(PartialEq, Clone, Copy)]
enum Role {
    /// A document's top-level mapping.
    Root,
    /// The root's `items`, streamed.
    Items,
    Inner,
}

enum Key {
    Str(String),
    /// A plain `<<`.
    Merge,
}

enum Body {
    Seq(Vec<Value>),
    Map(Map<String, Value>, Option<Key>),
}

struct Frame {
    body: Body,
    anchor: usize,
    role: Role,
}

struct Reader<'s, F> {
    sink: &'s mut F,
    doc: usize,
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Value, usize)>,
    events: usize,
    alias_values: usize,
    /// Where the object being read began (character index), while one is.
    object_start: Option<usize>,
    /// The first value of the current object that cannot become JSON.
    object_error: Option<(String, String)>,
    next_index: usize,
    had_items: bool,
    line: usize,
    lists: Vec<ListDoc>,
}

/// Calls `sink(doc, index, item)` for every object of a YAML stream, in order;
/// returns the documents that were lists.
pub fn for_each_item<E, F>(text: &str, sink: &mut F) -> Result<Vec<ListDoc>, Stop<E>>
where
    F: FnMut(usize, Option<usize>, Item) -> Result<(), E>,
{
    let mut reader = Reader {
        sink,
        doc: 0,
        stack: Vec::new(),
        anchors: HashMap::new(),
        events: 0,
        alias_values: 0,
        object_start: None,
        object_error: None,
        next_index: 0,
        had_items: false,
        line: 1,
        lists: Vec::new(),
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| Stop::Syntax(reader.doc.max(1), e.to_string()))?;
        reader.events += 1;
        reader.line = span.start.line();
        if let Some(start) = reader.object_start
            && span.end.index().saturating_sub(start) > MAX_OBJECT_CHARS
        {
            return Err(reader.syntax(format!(
                "{} longer than {MAX_OBJECT_CHARS} characters by line {}: the API server takes no object that large, so no dump holds one",
                reader.object_name(),
                reader.line
            )));
        }
        if reader.event(event, span.start.index())? {
            break;
        }
    }
    Ok(reader.lists)
}

impl<E, F> Reader<'_, F>
where
    F: FnMut(usize, Option<usize>, Item) -> Result<(), E>,
{
    fn syntax(&self, message: String) -> Stop<E> {
        Stop::Syntax(self.doc.max(1), message)
    }

    fn object_name(&self) -> String {
        if self.in_items() {
            format!("items[{}]", self.next_index)
        } else {
            "the object".to_owned()
        }
    }

    fn in_items(&self) -> bool {
        self.stack.get(1).is_some_and(|f| f.role == Role::Items)
    }

    /// Handles one event; true at the end of the stream.
    fn event(&mut self, event: Event<'_>, at: usize) -> Result<bool, Stop<E>> {
        match event {
            Event::StreamEnd => return Ok(true),
            Event::StreamStart | Event::Nothing | Event::DocumentEnd => {}
            Event::DocumentStart(_) => {
                self.doc += 1;
                self.anchors.clear();
                self.had_items = false;
                self.next_index = 0;
                self.object_error = None;
            }
            Event::SequenceStart(anchor, _) => {
                let role = match self.stack.last() {
                    None => {
                        return Err(self.syntax(format!(
                            "a list at line {}: expected a Kubernetes object or List",
                            self.line
                        )));
                    }
                    Some(Frame {
                        role: Role::Root,
                        body: Body::Map(_, Some(Key::Str(k))),
                        ..
                    }) if k == "items" && anchor == 0 => Role::Items,
                    Some(_) => Role::Inner,
                };
                if role == Role::Items {
                    self.had_items = true;
                    self.object_start = None;
                }
                self.push(Body::Seq(Vec::new()), anchor, role, at)?;
            }
            Event::MappingStart(anchor, _) => {
                let role = if self.stack.is_empty() {
                    self.object_start = Some(at);
                    self.object_error = None;
                    Role::Root
                } else {
                    Role::Inner
                };
                self.push(Body::Map(Map::new(), None), anchor, role, at)?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = self.stack.pop() else {
                    return Ok(false);
                };
                match frame.role {
                    Role::Items => {
                        if let Some(Frame {
                            body: Body::Map(_, key),
                            ..
                        }) = self.stack.last_mut()
                        {
                            *key = None;
                        }
                    }
                    Role::Root => {
                        let error = self.object_error.take();
                        self.object_start = None;
                        let Body::Map(map, _) = frame.body else {
                            return Ok(false);
                        };
                        if self.had_items {
                            self.lists
                                .push(ListDoc::of(self.doc, &map, self.next_index));
                        } else {
                            let item = match error {
                                Some(e) => Err(e),
                                None => Ok(Value::Object(map)),
                            };
                            (self.sink)(self.doc, None, item).map_err(Stop::Sink)?;
                        }
                    }
                    Role::Inner => {
                        let value = match frame.body {
                            Body::Seq(items) => Value::Array(items),
                            Body::Map(map, _) => Value::Object(map),
                        };
                        self.complete(value, frame.anchor, false)?;
                    }
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                if self.stack.is_empty() {
                    // An empty document is `null`: nothing in it.
                    if style == ScalarStyle::Plain
                        && tag.is_none()
                        && matches!(resolve_plain(&text), Ok(Value::Null))
                    {
                        return Ok(false);
                    }
                    return Err(self.syntax(format!(
                        "a scalar at line {}: expected a Kubernetes object or List",
                        self.line
                    )));
                }
                self.item_may_start(at);
                let merge = style == ScalarStyle::Plain && tag.is_none() && text == "<<";
                let value = match resolve(text, style, tag.as_deref()) {
                    Ok(v) => v,
                    Err(message) => {
                        self.fail(message);
                        Value::Null
                    }
                };
                self.complete(value, anchor, merge)?;
            }
            Event::Alias(id) => {
                let Some((value, count)) = self.anchors.get(&id) else {
                    return Err(self.syntax(format!(
                        "an alias at line {} to an anchor of another document",
                        self.line
                    )));
                };
                let (value, count) = (value.clone(), *count);
                self.alias_values += count;
                if self.alias_values > self.events + ALIAS_ALLOWANCE {
                    return Err(self.syntax(format!(
                        "aliases (*name) expand to {} values by line {}: more than any Kubernetes object holds",
                        self.alias_values, self.line
                    )));
                }
                self.item_may_start(at);
                self.complete(value, 0, false)?;
            }
        }
        Ok(false)
    }

    fn top_is_items(&self) -> bool {
        self.stack.last().is_some_and(|f| f.role == Role::Items)
    }

    /// A value read straight under a List's `items` is one object: it starts
    /// at `at`, with no error of the item before it.
    fn item_may_start(&mut self, at: usize) {
        if self.top_is_items() {
            self.object_start = Some(at);
            self.object_error = None;
        }
    }

    fn push(&mut self, body: Body, anchor: usize, role: Role, at: usize) -> Result<(), Stop<E>> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(self.syntax(format!(
                "collections nested deeper than {MAX_DEPTH} levels at line {}: no Kubernetes object needs that",
                self.line
            )));
        }
        self.item_may_start(at);
        self.stack.push(Frame { body, anchor, role });
        Ok(())
    }

    /// Records the first problem of the current object, at its field.
    fn fail(&mut self, message: String) {
        if self.object_error.is_some() {
            return;
        }
        let from = if self.in_items() { 2 } else { 0 };
        let mut path = String::new();
        for frame in self.stack.iter().skip(from) {
            match &frame.body {
                Body::Map(_, Some(Key::Str(k))) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                }
                Body::Map(_, Some(Key::Merge)) => path.push_str(".<<"),
                Body::Map(_, None) => {}
                Body::Seq(items) => path.push_str(&format!("[{}]", items.len())),
            }
        }
        if path.is_empty() {
            path.push('.');
        }
        self.object_error = Some((path, message));
    }

    /// A finished value: kept under its anchor, then given to its parent.
    fn complete(&mut self, value: Value, anchor: usize, merge: bool) -> Result<(), Stop<E>> {
        if anchor != 0 {
            self.anchors
                .insert(anchor, (value.clone(), count_values(&value)));
        }
        let Some(role) = self.stack.last().map(|f| f.role) else {
            return Ok(());
        };
        if role == Role::Items {
            let item = match self.object_error.take() {
                Some(e) => Err(e),
                None => Ok(value),
            };
            return self.give(item);
        }
        let Some(top) = self.stack.last_mut() else {
            return Ok(());
        };
        let mut problem = None;
        match &mut top.body {
            Body::Seq(items) => items.push(value),
            Body::Map(_, key @ None) => {
                *key = Some(if merge {
                    Key::Merge
                } else {
                    match value {
                        Value::String(s) => Key::Str(s),
                        Value::Number(n) => Key::Str(n.to_string()),
                        Value::Bool(b) => Key::Str(b.to_string()),
                        other => {
                            problem = Some(format!("a map key must be a string, found {other}"));
                            Key::Str(String::new())
                        }
                    }
                });
            }
            Body::Map(map, key @ Some(_)) => match key.take() {
                Some(Key::Str(k)) if role == Role::Root && k == "items" => {
                    // `items` read whole (it had an anchor), or null (an
                    // empty List); anything else is no List.
                    self.had_items = true;
                    match value {
                        Value::Null => {}
                        Value::Array(list) => {
                            for item in list {
                                self.give(Ok(item))?;
                            }
                        }
                        other => {
                            return Err(self.syntax(format!(
                                "items before line {}: expected a list of objects, found {other}",
                                self.line
                            )));
                        }
                    }
                }
                Some(Key::Str(k)) => {
                    // A key twice: the last wins, as kubectl reads it.
                    map.insert(k, value);
                }
                Some(Key::Merge) => {
                    if let Err(e) = merge_into(map, value) {
                        problem = Some(e);
                    }
                }
                None => {}
            },
        }
        if let Some(message) = problem {
            self.fail(message);
        }
        Ok(())
    }

    /// One item of `items` to the sink.
    fn give(&mut self, item: Item) -> Result<(), Stop<E>> {
        let index = self.next_index;
        self.next_index += 1;
        self.object_start = None;
        (self.sink)(self.doc, Some(index), item).map_err(Stop::Sink)
    }
}

/// go-yaml v2's merge: a mapping's entries set in turn (overriding what came
/// before), a list's mappings from last to first (so the first wins).
fn merge_into(map: &mut Map<String, Value>, value: Value) -> Result<(), String> {
    let wrong = || "YAML merge key (<<): expected a mapping or a list of mappings".to_owned();
    match value {
        Value::Object(m) => map.extend(m),
        Value::Array(list) => {
            if !list.iter().all(Value::is_object) {
                return Err(wrong());
            }
            for m in list.into_iter().rev() {
                if let Value::Object(m) = m {
                    map.extend(m);
                }
            }
        }
        _ => return Err(wrong()),
    }
    Ok(())
}

fn count_values(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count_values).sum(),
        Value::Object(m) => m.values().map(count_values).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
