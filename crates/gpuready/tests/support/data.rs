//! Test tables read as data: the YAML files of a folder under
//! `crates/gpuready/tests/fixtures`, so a case is a few lines a reader can check
//! against the rule it tests, and adding one needs no Rust. A few tags stand
//! for values too long or too many to write out (a 1 MiB label key, 65 list
//! items), so the file says what the value is rather than spelling it:
//!
//! - `!repeat [text, n]`: `text` n times;
//! - `!concat [a, b, ...]`: the strings joined (each may itself be a tag);
//! - `!list {count: n, item: v, from: 0}`: n copies of `v`, every `{i}` in its
//!   strings replaced by the copy's index, counted from `from` (default 0);
//! - `!map {count: n, key: k, value: v, from: 0}`: n entries, `{i}` in `k` and
//!   `v` replaced the same way;
//! - `!range [a, b]`: the integers a, a+1, ..., b-1.

use std::path::PathBuf;

use serde_json::{Map, Value};
use serde_yaml_ng::Value as Yaml;

/// `crates/gpuready/tests/fixtures/<dir>`.
pub fn fixtures_dir(dir: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
}

/// Every `*.yaml` file of `fixtures/<dir>`, sorted by name, as `(file name,
/// document)` with the tags expanded. A folder without files is an error: the
/// table moved, it did not become empty.
pub fn read_tables(dir: &str) -> Vec<(String, Value)> {
    let path = fixtures_dir(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.yaml in {}", path.display());
    files
        .iter()
        .map(|file| {
            let name = file
                .file_name()
                .and_then(|n| n.to_str())
                .expect("utf-8 file name")
                .to_owned();
            let text =
                std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let yaml: Yaml = serde_yaml_ng::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let doc = expand(yaml).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            (format!("{dir}/{name}"), doc)
        })
        .collect()
}

/// A YAML value as JSON, the tags above replaced by what they stand for.
pub fn expand(v: Yaml) -> Result<Value, String> {
    Ok(match v {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => serde_json::to_value(&n).map_err(|e| format!("number {n}: {e}"))?,
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(items) => {
            Value::Array(items.into_iter().map(expand).collect::<Result<_, _>>()?)
        }
        Yaml::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let Value::String(k) = expand(k)? else {
                    return Err("a mapping key that is not a string".into());
                };
                out.insert(k, expand(v)?);
            }
            Value::Object(out)
        }
        Yaml::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let arg = expand(tagged.value)?;
            tag_value(&tag, &arg).map_err(|e| format!("{tag} {arg}: {e}"))?
        }
    })
}

fn tag_value(tag: &str, arg: &Value) -> Result<Value, String> {
    match tag {
        "!repeat" => match arg.as_array().map(Vec::as_slice) {
            Some([Value::String(text), n]) => Ok(Value::String(text.repeat(count(n)?))),
            _ => Err("wants [text, n]".into()),
        },
        "!concat" => {
            let parts = arg.as_array().ok_or("wants a list of strings")?;
            parts
                .iter()
                .map(|p| p.as_str().ok_or("wants a list of strings"))
                .collect::<Result<String, _>>()
                .map(Value::String)
                .map_err(str::to_owned)
        }
        "!list" => {
            let (from, n) = counted(arg)?;
            let item = arg.get("item").ok_or("wants an item")?;
            Ok(Value::Array(
                (from..from + n).map(|i| with_index(item, i)).collect(),
            ))
        }
        "!map" => {
            let (from, n) = counted(arg)?;
            let key = arg
                .get("key")
                .and_then(Value::as_str)
                .ok_or("wants a key")?;
            let value = arg.get("value").ok_or("wants a value")?;
            let map: Map<String, Value> = (from..from + n)
                .map(|i| (key.replace("{i}", &i.to_string()), with_index(value, i)))
                .collect();
            if map.len() != n {
                return Err("its key does not name every entry apart (no {i}?)".into());
            }
            Ok(Value::Object(map))
        }
        "!range" => match arg.as_array().map(Vec::as_slice) {
            Some([a, b]) => Ok(Value::Array(
                (count(a)?..count(b)?).map(Value::from).collect(),
            )),
            _ => Err("wants [from, to]".into()),
        },
        _ => Err("unknown tag".into()),
    }
}

fn count(v: &Value) -> Result<usize, String> {
    v.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("{v} is not a count"))
}

/// `from` (default 0) and `count` of a `!list` or `!map`.
fn counted(arg: &Value) -> Result<(usize, usize), String> {
    let n = count(arg.get("count").ok_or("wants a count")?)?;
    let from = arg.get("from").map(count).transpose()?.unwrap_or(0);
    Ok((from, n))
}

/// `v` with every `{i}` in its strings and keys replaced by `i`.
fn with_index(v: &Value, i: usize) -> Value {
    let i_text = i.to_string();
    match v {
        Value::String(s) => Value::String(s.replace("{i}", &i_text)),
        Value::Array(items) => Value::Array(items.iter().map(|x| with_index(x, i)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, x)| (k.replace("{i}", &i_text), with_index(x, i)))
                .collect(),
        ),
        other => other.clone(),
    }
}
