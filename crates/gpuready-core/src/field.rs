//! One value read from a label or a resource quantity: present, absent, or
//! malformed with the offending key and why. The type every input parser
//! (Node labels, GFD, DRA attributes) records its findings in, so the layer
//! that needs a value can say why it is missing.

use std::collections::BTreeMap;

/// A value read from a label (or resource quantity).
#[derive(Clone, Debug, PartialEq)]
pub enum Field<T> {
    /// The key is not on the node.
    Absent,
    /// The key is there but its value cannot be used.
    Malformed(Malformed),
    Present(T),
}

/// Where and why a value could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    pub key: String,
    pub value: String,
    pub why: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={:?}: {}", self.key, self.value, self.why)
    }
}

impl<T> Field<T> {
    pub fn present(&self) -> Option<&T> {
        match self {
            Field::Present(v) => Some(v),
            _ => None,
        }
    }

    pub fn malformed(&self) -> Option<&Malformed> {
        match self {
            Field::Malformed(m) => Some(m),
            _ => None,
        }
    }

    pub fn is_absent(&self) -> bool {
        matches!(self, Field::Absent)
    }
}

/// The label `key` parsed by `parse`: absent, present, or malformed with why.
pub(crate) fn read<T>(
    labels: &BTreeMap<String, String>,
    key: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Field<T> {
    match labels.get(key) {
        None => Field::Absent,
        Some(v) => match parse(v) {
            Ok(t) => Field::Present(t),
            Err(why) => Field::Malformed(Malformed {
                key: key.to_owned(),
                value: v.clone(),
                why,
            }),
        },
    }
}
