//! Matching `nvidia.com/gpu.product` against a profile's names and globs, tolerant
//! of the spellings the same card takes across drivers and sharing modes.

/// The card's name with the `NVIDIA-` prefix (absent on older drivers) and the
/// `-SHARED` suffix (time-slicing/MPS) removed, so both spellings compare equal.
pub fn normalize(product: &str) -> &str {
    let p = strip_prefix_ci(product, "NVIDIA-").unwrap_or(product);
    strip_suffix_ci(p, "-SHARED").unwrap_or(p)
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    s.get(..prefix.len())
        .filter(|head| head.eq_ignore_ascii_case(prefix))
        .map(|_| &s[prefix.len()..])
}

pub(crate) fn strip_suffix_ci<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = s.len().checked_sub(suffix.len())?;
    s.get(cut..)
        .filter(|tail| tail.eq_ignore_ascii_case(suffix))
        .map(|_| &s[..cut])
}

/// Whether `product` matches one pattern: an exact name or a glob, compared
/// case-insensitively after normalizing both sides.
pub fn matches(pattern: &str, product: &str) -> bool {
    let (pat, prod) = (normalize(pattern), normalize(product));
    if pat.eq_ignore_ascii_case(prod) {
        return true;
    }
    let opts = glob::MatchOptions {
        case_sensitive: false,
        require_literal_separator: false,
        require_literal_leading_dot: false,
    };
    // A pattern like `NVIDIA-*` normalizes to `*`; match the raw forms too so a
    // glob over the prefix itself still works.
    [(pat, prod), (pattern, product)]
        .iter()
        .any(|(pat, prod)| glob::Pattern::new(pat).is_ok_and(|g| g.matches_with(prod, opts)))
}

/// NVML's product name (`NVIDIA H200`, as the DRA driver publishes it) in
/// GFD's label spelling (`NVIDIA-H200`): GFD turns whitespace into `-` and drops
/// what a label value cannot hold, so one profile list matches both sources.
pub fn from_nvml_name(name: &str) -> String {
    name.split_whitespace()
        .collect::<Vec<_>>()
        .join("-")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect()
}

pub fn matches_any(patterns: &[String], product: &str) -> bool {
    patterns.iter().any(|p| matches(p, product))
}

#[cfg(test)]
mod tests;
