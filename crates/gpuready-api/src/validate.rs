//! Offline validation of a GpuNodeProfile: the same rules the CRD schema enforces
//! at admission, so `gpuready check` rejects what the API server would.

use crate::profile::GpuNodeProfileSpec;

// The spec's own rules, type by type.
mod spec;

/// One rule a profile breaks: the field path and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// Dotted numbers of `min_parts..=max_parts` parts of 1 to 9 digits each: nine
/// digits always fit the engine's u32, so an admitted version always parses.
fn is_version(s: &str, min_parts: usize, max_parts: usize) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    (min_parts..=max_parts).contains(&parts.len())
        && parts
            .iter()
            .all(|p| (1..=9).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the first `first` parts of a dotted version have no leading zero
/// (`0` itself is allowed after the first part, and the first part must not be
/// 0): `08.6` and `0580.065.06` are refused, `580.65.06` is not — NVIDIA
/// writes the revision with two digits.
fn no_leading_zeros(s: &str, first: usize) -> bool {
    s.split('.').take(first).enumerate().all(|(i, p)| {
        if i == 0 {
            !p.starts_with('0')
        } else {
            p == "0" || !p.starts_with('0')
        }
    })
}

/// A Kubernetes object name as the API server requires it of cluster-scoped
/// custom resources: a DNS-1123 subdomain.
pub fn is_object_name(s: &str) -> bool {
    is_dns_subdomain(s)
}

/// Whether a key's prefix (before the first `/`) is one of `domains` or a
/// subdomain of one. Keys without a prefix are in no domain.
pub fn in_domains(key: &str, domains: &[&str]) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        domains.iter().any(|d| {
            prefix == *d
                || prefix
                    .strip_suffix(d)
                    .is_some_and(|rest| rest.ends_with('.'))
        })
    })
}

/// A label key gpuready writes itself: in [`crate::keys::OWNED_KEY_DOMAIN`] or
/// a subdomain of it (`gpuready.io/ready`, `gpuready.io/profile`, any future
/// one). The CRD's CEL rules spell the same test as [`OWNED_KEY_CEL_REGEX`].
pub fn is_owned_key(key: &str) -> bool {
    in_domains(key, &[crate::keys::OWNED_KEY_DOMAIN])
}

/// The regular expression the CRD's CEL rules match a key against for
/// [`is_owned_key`], as a CEL string literal spells it (a test keeps the two in
/// step).
pub const OWNED_KEY_CEL_REGEX: &str = "'^([^/]*\\\\.)?gpuready\\\\.io/'";

/// A taint key another system owns: in a reserved domain and not under one of
/// the autoscaler-recognised prefixes.
pub fn is_reserved_taint_key(key: &str) -> bool {
    in_domains(key, crate::keys::RESERVED_KEY_DOMAINS)
        && !crate::keys::AUTOSCALER_TAINT_PREFIXES
            .iter()
            .any(|p| key.starts_with(p))
}

/// A product pattern the engine can compile: exact text with `*`, `?` and
/// bracket classes, every `[` closed by a `]` around a non-empty class, no `**`.
/// The CRD's CEL rule is the same regular expression
/// `^([^\[\]]|\[(![^\[\]]+|[^!\[\]][^\[\]]*)\])*$` plus "no `**`".
pub fn is_product_pattern(p: &str) -> bool {
    if p.contains("**") {
        return false;
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        match c {
            ']' => return false,
            '[' => {
                let mut class = String::new();
                loop {
                    match chars.next() {
                        None | Some('[') => return false,
                        Some(']') => break,
                        Some(ch) => class.push(ch),
                    }
                }
                if class.is_empty() || class == "!" || has_descending_range(&class) {
                    return false;
                }
            }
            _ => {}
        }
    }
    glob::Pattern::new(p).is_ok()
}

/// The letters and digits in code-point order: a class range between two of
/// them runs low to high when the first comes first here.
const RANGE_ORDER: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Whether a class body (between `[` and `]`) holds a range between letters or
/// digits that runs high to low (`z-a`): it matches no character, so the
/// pattern could never match a product (issue 32 found `[z-a]` admitted). Any
/// letter or digit, `-`, then a lower one, at any place in the class — the
/// CRD's rule spells out the same pairs.
fn has_descending_range(class: &str) -> bool {
    let rank = |c: char| RANGE_ORDER.find(c);
    let chars: Vec<char> = class.chars().collect();
    chars
        .windows(3)
        .any(|w| w[1] == '-' && matches!((rank(w[0]), rank(w[2])), (Some(a), Some(b)) if a > b))
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

fn is_label_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// A Kubernetes qualified name: `[prefix/]name`.
pub fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(key),
    }
}

/// A Kubernetes label value (may be empty).
pub fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_label_name(value)
}

/// GFD's `nvidia.com/gpu.clique` value, `<cluster UUID>.<clique ID>`
/// (k8s-device-plugin `internal/lm/imex.go`: the UUID lower-case and
/// hyphenated, the clique ID a decimal `uint32`): the UUID's 32 hex digits
/// without hyphens and the ID, or `None` when it is not that shape.
pub fn parse_clique(value: &str) -> Option<(String, u32)> {
    let (uuid, id) = value.rsplit_once('.')?;
    let groups: Vec<&str> = uuid.split('-').collect();
    let shape_ok = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| {
            g.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
    let id_ok = (1..=10).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit());
    if !shape_ok || !id_ok {
        return None;
    }
    Some((groups.concat(), id.parse().ok()?))
}

/// A Node condition type an External layer may name: 1 to 316 characters of
/// letters, digits, `-`, `_`, `.` and `/`, alphanumeric at both ends (the CEL
/// rule on `external.conditions[].type` spells the same).
pub fn is_condition_type(t: &str) -> bool {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/');
    (1..=316).contains(&t.len())
        && t.bytes().all(ok)
        && t.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && t.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// A MIG profile name as nvidia-smi and the DRA driver spell it (`1g.18gb`,
/// `1g.18gb+me`) or GFD does (`1g.18gb.me`): the CRD's pattern
/// `^[0-9]+g\.[0-9]+gb([.+][a-z0-9+.]+)?$`.
pub fn is_mig_profile(name: &str) -> bool {
    let Some((g, rest)) = name.split_once("g.") else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(gb_at) = rest.find("gb") else {
        return false;
    };
    let (mem, tail) = (&rest[..gb_at], &rest[gb_at + 2..]);
    digits(g)
        && digits(mem)
        && (tail.is_empty()
            || (tail.len() >= 2
                && (tail.starts_with('.') || tail.starts_with('+'))
                && tail[1..].bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'+' || b == b'.'
                })))
}

/// Whether a GpuNodeProfile may name `key` as its taint key (the rules
/// admission applies to `taint.key`). The engine asks it too: a taint its
/// ownership annotation names is gpuready's only if a profile could have set
/// that key, so an edited annotation cannot make gpuready remove, say, a cordon
/// taint.
pub fn is_profile_taint_key(key: &str) -> bool {
    is_qualified_name(key) && !is_reserved_taint_key(key)
}

impl GpuNodeProfileSpec {
    /// Label keys the node selector reads.
    pub fn selector_keys(&self) -> Vec<&str> {
        let s = &self.node_selector;
        s.match_labels
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .chain(s.match_expressions.iter().flatten().map(|e| e.key.as_str()))
            .collect()
    }
}

/// Most entries in `matchLabels` and in `matchExpressions`, and values per expression.
pub const MAX_SELECTOR_LABELS: usize = 32;
pub const MAX_SELECTOR_EXPRESSIONS: usize = 32;
pub const MAX_SELECTOR_VALUES: usize = 64;

/// The rules the CRD schema puts on `spec.nodeSelector` (fields relative to it):
/// what the API server checks for a Deployment's selector, plus size bounds so
/// the CEL cost stays within budget.
pub fn node_selector_errors(
    s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut fail = |field: String, message: String| errors.push(FieldError { field, message });
    let labels = s.match_labels.as_ref();
    if labels.is_some_and(|l| l.len() > MAX_SELECTOR_LABELS) {
        fail(
            ".matchLabels".into(),
            format!("at most {MAX_SELECTOR_LABELS} entries"),
        );
    }
    for (k, v) in labels.into_iter().flatten() {
        if !is_qualified_name(k) {
            fail(
                ".matchLabels".into(),
                format!("{k:?} must be a valid label key, like example.com/gpu-pool"),
            );
        } else if is_owned_key(k) {
            fail(".matchLabels".into(), owned_selector_key(k));
        }
        if v.len() > 63 || !is_label_value(v) {
            fail(
                ".matchLabels".into(),
                format!("{k}={v:?}: values must be valid label values"),
            );
        }
    }
    let exprs = s.match_expressions.as_deref().unwrap_or_default();
    if exprs.len() > MAX_SELECTOR_EXPRESSIONS {
        fail(
            ".matchExpressions".into(),
            format!("at most {MAX_SELECTOR_EXPRESSIONS} entries"),
        );
    }
    for (i, e) in exprs.iter().enumerate() {
        let at = |f: &str| format!(".matchExpressions[{i}]{f}");
        if !is_qualified_name(&e.key) {
            fail(
                at(".key"),
                format!("{:?} must be a valid label key", truncated(&e.key)),
            );
        } else if is_owned_key(&e.key) {
            fail(at(".key"), owned_selector_key(&e.key));
        }
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => fail(
                at(".values"),
                format!("operator {} needs at least one value", e.operator),
            ),
            "Exists" | "DoesNotExist" if !values.is_empty() => fail(
                at(".values"),
                format!("operator {} takes no values", e.operator),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => fail(
                at(".operator"),
                format!(
                    "{:?}: must be In, NotIn, Exists or DoesNotExist",
                    truncated(other)
                ),
            ),
        }
        if values.len() > MAX_SELECTOR_VALUES {
            fail(
                at(".values"),
                format!("at most {MAX_SELECTOR_VALUES} values"),
            );
        }
        if let Some(v) = values.iter().find(|v| v.len() > 63 || !is_label_value(v)) {
            fail(
                at(".values"),
                format!("{:?} must be a valid label value", truncated(v)),
            );
        }
    }
    errors
}

fn owned_selector_key(key: &str) -> String {
    format!(
        "{:?} is a key gpuready writes itself ({}/): a selector on it would change with gpuready's own writes",
        truncated(key),
        crate::keys::OWNED_KEY_DOMAIN
    )
}

/// At most 64 characters of a value for a message: a 1 MB key must not become
/// a 1 MB error.
fn truncated(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

impl crate::GpuNodeProfile {
    /// Every rule the whole object breaks: its name, then its spec.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let name = self.metadata.name.as_deref().unwrap_or_default();
        if !is_object_name(name) {
            errors.push(FieldError {
                field: "metadata.name".into(),
                message: format!(
                    "{:?} must be a DNS-1123 subdomain like ampere-ada: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
                    truncated(name)
                ),
            });
        } else if name.len() > 63 {
            errors.push(FieldError {
                field: "metadata.name".into(),
                message: format!(
                    "{name:?} is longer than 63 characters: gpuready writes it as the value of the gpuready.io/profile node label"
                ),
            });
        }
        errors.extend(self.spec.validate());
        errors
    }
}

/// The profile's OpenAPI schema, as the CRD publishes it (computed once).
fn profile_schema() -> &'static serde_json::Value {
    static SCHEMA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let crd = crate::crd::gpu_node_profile_crd();
        crd.spec
            .versions
            .first()
            .and_then(|v| v.schema.as_ref())
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_default()
    })
}

/// Fields of a raw profile that the CRD schema does not know, as paths like
/// `spec.gpu.prodcts`. The API server refuses them under field validation
/// `Strict` (what kubectl asks for), whatever their value — an empty list too.
/// `metadata` and `status` are left to the server's own rules.
pub fn unknown_fields(raw: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(raw), Some(props)) = (
        raw.as_object(),
        profile_schema()
            .get("properties")
            .and_then(|p| p.as_object()),
    ) {
        for (key, value) in raw {
            match key.as_str() {
                "apiVersion" | "kind" | "metadata" | "status" => {}
                _ => match props.get(key) {
                    Some(schema) => unknown_in(value, schema, key, &mut out),
                    None => out.push(key.clone()),
                },
            }
        }
    }
    out
}

fn unknown_in(
    value: &serde_json::Value,
    schema: &serde_json::Value,
    path: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            if schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true)
            {
                return;
            }
            for (key, v) in map {
                let here = format!("{path}.{key}");
                match key_schema(schema, key) {
                    Some(s) => unknown_in(v, s, &here, out),
                    None => out.push(here),
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    unknown_in(v, s, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Drops `null` values of fields the schema does not mark `nullable`, as the API
/// server does before defaulting (a `readyLabels` entry `key: null` is stored as
/// no entry, `matchLabels: {pool: null}` as an empty selector): offline must
/// judge the object the server would store.
pub fn prune_nulls(raw: &mut serde_json::Value) {
    if let Some(schema) = profile_schema().as_object() {
        prune_in(raw, &serde_json::Value::Object(schema.clone()));
    }
}

/// Turns integral floats (`1000.0`, `1.5e7`) of fields the schema types as
/// integers into integers, as the API server accepts them: the Rust types
/// would refuse a float where a `u32` is due, and offline would refuse what the
/// server stores.
pub fn integral_numbers(raw: &mut serde_json::Value) {
    if let Some(schema) = profile_schema().as_object() {
        integral_in(raw, &serde_json::Value::Object(schema.clone()));
    }
}

/// The schema of an object's member `key`: its entry in `properties`, else
/// `additionalProperties` where that is a schema (a map's values). One lookup
/// so the unknown-field, null-pruning and integer walks read the same tree.
fn key_schema<'a>(schema: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// Calls `f` on each member or item of `value` that its schema describes,
/// with that schema: the descent the null-pruning and integer walks share.
fn for_each_child(
    value: &mut serde_json::Value,
    schema: &serde_json::Value,
    f: fn(&mut serde_json::Value, &serde_json::Value),
) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if let Some(sub) = key_schema(schema, key) {
                    f(v, sub);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                items.iter_mut().for_each(|v| f(v, sub));
            }
        }
        _ => {}
    }
}

fn integral_in(value: &mut serde_json::Value, schema: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) if schema.get("type").and_then(Value::as_str) == Some("integer") => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0) {
                // Exact up to 2^53; larger floats are not integers JSON can carry.
                if f.abs() < 9_007_199_254_740_992.0 {
                    // Lossless: |f| < 2^53 and f has no fraction.
                    #[allow(clippy::cast_possible_truncation)]
                    let i = f as i64;
                    *value = Value::from(i);
                }
            }
        }
        _ => for_each_child(value, schema, integral_in),
    }
}

fn prune_in(value: &mut serde_json::Value, schema: &serde_json::Value) {
    use serde_json::Value;
    if let Value::Object(map) = value {
        map.retain(|key, v| {
            let sub = key_schema(schema, key);
            let nullable =
                sub.and_then(|s| s.get("nullable")).and_then(Value::as_bool) == Some(true);
            !(v.is_null() && sub.is_some() && !nullable)
        });
    }
    for_each_child(value, schema, prune_in);
}

#[cfg(test)]
mod tests;
