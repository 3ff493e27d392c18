//! What every subcommand's flags share (`run`, `probe`, `nfd-crds`,
//! `release`): durations written as people write them, and the log format.
//! Its own module so a subcommand takes these without depending on another's
//! flags.

use std::time::Duration;

/// How the process logs: text for a terminal, JSON for a log pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Parses `30s`, `5m`, `1h30m` (jiff's friendly duration format).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("{s:?} is not a duration like 30s, 5m or 1h: {e}"))?;
    d.try_into()
        .map_err(|_| format!("{s:?} must not be negative"))
}
