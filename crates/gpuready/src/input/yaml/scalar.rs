//! A YAML scalar's meaning as kubectl reads it (YAML 1.1, go-yaml v2's
//! resolve.go), apart from the reader of the stream's structure: no Rust crate
//! reads plain scalars this way.

use std::borrow::Cow;

use saphyr_parser::{ScalarStyle, Tag};
use serde_json::Value;

/// A scalar as JSON: plain ones resolved as YAML 1.1 (go-yaml v2), quoted and
/// block scalars are strings; a core-schema tag (`!!str`, `!!int`, …) decides,
/// any other tag leaves the text a string (as go-yaml v2 does).
pub(super) fn resolve(
    text: Cow<'_, str>,
    style: ScalarStyle,
    tag: Option<&Tag>,
) -> Result<Value, String> {
    match tag {
        Some(t) if t.is_yaml_core_schema() => {
            let fits = |v: &Value| match t.suffix.as_str() {
                "null" => v.is_null(),
                "bool" => v.is_boolean(),
                "int" => v.is_i64() || v.is_u64(),
                "float" => v.is_number(),
                _ => false,
            };
            match t.suffix.as_str() {
                "null" | "bool" | "int" | "float" => {
                    let v = resolve_plain(&text)?;
                    if fits(&v) {
                        Ok(v)
                    } else {
                        Err(format!("cannot read {text:?} as !!{}", t.suffix))
                    }
                }
                _ => Ok(Value::String(text.into_owned())),
            }
        }
        None if style == ScalarStyle::Plain => resolve_plain(&text),
        _ => Ok(Value::String(text.into_owned())),
    }
}

/// A plain scalar as go-yaml v2 resolves it (YAML 1.1), then as JSON the way
/// sigs.k8s.io/yaml marshals it (an integral float is written as an integer,
/// which the API server stores as one). Non-finite numbers are refused: JSON,
/// and so the API server, cannot hold them.
pub fn resolve_plain(s: &str) -> Result<Value, String> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Ok(Value::Bool(true));
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Ok(Value::Bool(false));
        }
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => {
            return Err(format!(
                "{s} is not a number JSON (and so the API server) can hold"
            ));
        }
        _ => {}
    }
    let string = || Ok(Value::String(s.to_owned()));
    match s.as_bytes()[0] {
        b'.' => {
            if is_float(s, false) {
                return Ok(float(s));
            }
            string()
        }
        b'0'..=b'9' | b'+' | b'-' => {
            let plain = s.replace('_', "");
            if let Some(v) = go_int(&plain) {
                return Ok(v);
            }
            if is_float(&plain, true) {
                return Ok(float(&plain));
            }
            string()
        }
        _ => string(),
    }
}

/// `strconv.ParseInt(s, 0, 64)`, then `ParseUint` (no sign): a sign, then
/// `0x`, `0o`, `0b` or a leading `0` (octal) or decimal digits.
fn go_int(s: &str) -> Option<Value> {
    let (negative, signed, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, true, &s[1..]),
        Some(b'+') => (false, true, &s[1..]),
        _ => (false, false, s),
    };
    let (radix, digits) = match rest.get(..2) {
        Some("0x" | "0X") => (16, &rest[2..]),
        Some("0o" | "0O") => (8, &rest[2..]),
        Some("0b" | "0B") => (2, &rest[2..]),
        _ if rest.len() > 1 && rest.starts_with('0') => (8, &rest[1..]),
        _ => (10, rest),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        if magnitude <= i64::MAX as u64 + 1 {
            return Some(Value::from(0i64.wrapping_sub_unsigned(magnitude)));
        }
        return None;
    }
    if magnitude <= i64::MAX as u64 || !signed {
        return Some(Value::from(magnitude));
    }
    None
}

/// go-yaml v2's float form `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
/// (`signed_start`), or `\.[0-9]+([eE][-+]?[0-9]+)?` (what Go's ParseFloat
/// takes of a text starting with `.`); past f64's range it is a string, as
/// Go's ParseFloat then fails.
fn is_float(s: &str, signed_start: bool) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if signed_start && matches!(b.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let from = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - from
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if !signed_start || digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len() && s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// A float as the JSON kubectl sends: Go writes an integral float below 1e21
/// without a fraction, and the server reads that as an integer.
fn float(s: &str) -> Value {
    let f: f64 = s.parse().unwrap_or(0.0);
    if f.fract() == 0.0 && f.abs() < 9.2e18 {
        return Value::from(f as i64);
    }
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests;
