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
