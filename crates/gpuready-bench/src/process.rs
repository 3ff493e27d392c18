//! Reading a running controller from outside: CPU seconds and memory from
//! /proc (Linux), and counters from its /metrics endpoint.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// User + system CPU seconds of a process (all its threads).
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name (field 2) may hold spaces; fields after its ')' are fixed.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 overall, 12 and 13 after the ')'.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / TICKS_PER_SECOND
}

/// (current RSS, peak RSS) in KiB.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The text of `http://127.0.0.1:<port>/metrics`.
pub fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out.split("\r\n\r\n").nth(1).unwrap_or("").to_owned())
}

/// Samples of one counter family by one label: `gpuready_writes_total` by
/// `kind` gives {"taint": 10, ...}.
pub fn family(text: &str, name: &str, label: &str) -> BTreeMap<String, u64> {
    let prefix = format!("{name}{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| {
            let value = l.split(&format!("{label}=\"")).nth(1)?.split('"').next()?;
            let n = l.rsplit(' ').next()?.parse::<f64>().ok()?;
            // Counters are whole numbers.
            Some((value.to_owned(), n.max(0.0) as u64))
        })
        .collect()
}

/// Write requests (anything but GET and WATCH) among requests by method
/// (`gpuready_api_requests_total`).
pub fn write_requests(by_method: &BTreeMap<String, u64>) -> u64 {
    by_method
        .iter()
        .filter(|(m, _)| m.as_str() != "GET" && m.as_str() != "WATCH")
        .map(|(_, n)| n)
        .sum()
}

/// Samples in a scrape (every line but comments): all of them, and those of
/// the per-node families (`gpuready_node_…`), whose count follows the fleet
/// up to their cap.
pub fn series(text: &str) -> (usize, usize) {
    let samples = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    samples.fold((0, 0), |(all, node), l| {
        (all + 1, node + usize::from(l.starts_with("gpuready_node_")))
    })
}

/// One histogram's cumulative buckets `(le, count)`, summed over every series
/// of `name` whose labels hold `matching` (`kind="join"`), in bucket order.
pub fn buckets(text: &str, name: &str, matching: &str) -> Vec<(f64, u64)> {
    let prefix = format!("{name}_bucket{{");
    let mut by_le: BTreeMap<String, u64> = BTreeMap::new();
    for l in text.lines().filter(|l| l.starts_with(&prefix)) {
        // `le` as a label of its own: `profile="…"` ends in `le="` too.
        let le = [",le=\"", "{le=\""]
            .iter()
            .find_map(|p| l.split(p).nth(1))
            .and_then(|v| v.split('"').next());
        let (Some(le), Some(n)) = (le, l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        else {
            continue;
        };
        if l.contains(matching) {
            *by_le.entry(le.to_owned()).or_default() += n.max(0.0) as u64;
        }
    }
    let mut out: Vec<(f64, u64)> = by_le
        .into_iter()
        .filter_map(|(le, n)| Some((le.replace("+Inf", "inf").parse::<f64>().ok()?, n)))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// `after - before`, bucket by bucket: what was observed between two scrapes.
pub fn bucket_diff(after: &[(f64, u64)], before: &[(f64, u64)]) -> Vec<(f64, u64)> {
    after
        .iter()
        .map(|&(le, n)| {
            let was = before.iter().find(|(l, _)| *l == le).map_or(0, |b| b.1);
            (le, n.saturating_sub(was))
        })
        .collect()
}

/// The `q` quantile of cumulative buckets as Prometheus' `histogram_quantile`
/// computes it: the bucket holding the rank, linear within it (the first
/// bucket from 0; a rank in `+Inf` gives the last finite bound).
pub fn quantile(buckets: &[(f64, u64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut below = (0.0, 0u64);
    for &(le, n) in buckets {
        if n as f64 >= rank {
            if le.is_infinite() {
                return Some(below.0);
            }
            let inside = (n - below.1) as f64;
            let share = if inside > 0.0 {
                (rank - below.1 as f64) / inside
            } else {
                1.0
            };
            return Some(below.0 + (le - below.0) * share);
        }
        below = (le, n);
    }
    Some(below.0)
}

/// The index of the bucket `(previous bound, le]` that holds `seconds`.
pub fn bucket_of(buckets: &[(f64, u64)], seconds: f64) -> usize {
    buckets
        .iter()
        .position(|(le, _)| seconds <= *le)
        .unwrap_or(buckets.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = "\
# HELP gpuready_time_to_ready_seconds x
gpuready_time_to_ready_seconds_bucket{profile=\"a\",kind=\"join\",le=\"1.0\"} 0
gpuready_time_to_ready_seconds_bucket{profile=\"a\",kind=\"join\",le=\"2.0\"} 50
gpuready_time_to_ready_seconds_bucket{profile=\"a\",kind=\"join\",le=\"5.0\"} 100
gpuready_time_to_ready_seconds_bucket{profile=\"a\",kind=\"join\",le=\"+Inf\"} 100
gpuready_time_to_ready_seconds_bucket{profile=\"a\",kind=\"fault\",le=\"1.0\"} 7
gpuready_node_ready{node=\"n1\"} 1
";

    #[test]
    fn a_quantile_is_read_as_prometheus_reads_it() {
        let b = buckets(SCRAPE, "gpuready_time_to_ready_seconds", "kind=\"join\"");
        assert_eq!(
            b,
            vec![(1.0, 0), (2.0, 50), (5.0, 100), (f64::INFINITY, 100)]
        );
        // Rank 50 of 100 ends the 1–2 s bucket; rank 99 is 49/50 into 2–5 s.
        assert_eq!(quantile(&b, 0.5), Some(2.0));
        let p99 = quantile(&b, 0.99).unwrap_or_default();
        assert!((p99 - 4.94).abs() < 1e-9, "{p99}");
        assert_eq!(bucket_of(&b, 4.9), 2);
        assert_eq!(bucket_of(&b, 0.3), 0);
        let none = bucket_diff(&b, &b);
        assert_eq!(quantile(&none, 0.99), None);
        assert_eq!(series(SCRAPE), (6, 1));
    }
}
