//! A file's text as kubectl reads it, before any parsing: its encoding, the
//! bound on flow nesting, and whether it is one JSON value or a YAML stream.

use std::path::Path;

use super::error::InputError;

/// Deeper flow nesting (`[[[…` or `{{{…`) than any Kubernetes object needs. The
/// YAML scanner's time grows with the square of this depth, so it is bounded
/// before parsing, the way serde_json's recursion limit bounds JSON.
pub const MAX_FLOW_DEPTH: usize = 256;

/// The text of a file: UTF-8 (a byte-order mark is dropped) or UTF-16 with a
/// byte-order mark, as kubectl accepts. Invalid UTF-8 names the byte offset.
pub(super) fn read_text(path: &Path) -> Result<String, InputError> {
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
/// reader streams items and bounds each object, see [`super::yaml`].) Brackets inside quoted scalars and comments are text, not nesting: a
/// valid `kubectl get nodes -o yaml` dump whose annotation holds 300 `[` is
/// read, as its JSON form is. A quote opens a quoted scalar only where a scalar
/// may begin (line start, after a space, `[`, `{`, `,` or `:`); inside a plain
/// scalar (`it's`) it is a letter, so a stray quote cannot hide real nesting
/// from this bound.
pub(super) fn flow_too_deep(text: &str) -> Option<usize> {
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
pub(super) fn is_single_json(text: &str) -> bool {
    let t = text.trim_start();
    (t.starts_with('{') || t.starts_with('['))
        && !text
            .lines()
            .any(|l| l == "---" || l.starts_with("--- ") || l.starts_with("---\t"))
}

#[cfg(test)]
mod depth_tests;
