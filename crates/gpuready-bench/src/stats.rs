//! Small figures and their texts (percentiles, medians, ratios, seconds),
//! shared by the phases and the table so neither imports the other for them.

use std::collections::BTreeMap;
use std::time::Duration;

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The median (of an even count, the upper middle: no averaging of two runs).
pub fn median<T: Copy + Default + PartialOrd>(runs: &[T]) -> T {
    let mut v = runs.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// "median (run 1, run 2, …)", or just the time for a single run.
pub fn spread(runs: &[Duration]) -> String {
    if runs.len() < 2 {
        return secs(median(runs));
    }
    let each: Vec<String> = runs
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64()))
        .collect();
    format!("{} ({})", secs(median(runs)), each.join(", "))
}

pub fn ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        "–".into()
    } else {
        format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64())
    }
}

pub fn kinds(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
