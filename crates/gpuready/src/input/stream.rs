//! Every object of a file streamed to a sink, JSON and YAML alike: a `List`'s
//! items one by one, never the whole file as a tree beside the typed copy.

use std::cell::RefCell;
use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess};
use serde_json::Value;

use super::error::InputError;
use super::text::{MAX_FLOW_DEPTH, flow_too_deep, is_single_json, read_text};
use super::yaml::{self, ListDoc};

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
pub(super) fn for_each_object(
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
