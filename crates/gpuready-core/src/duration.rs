//! Durations as messages write them, shared by the judgements that name a
//! limit (label age, deadlines) so each says `5m` the same way.

/// A duration as the messages write it: `90s`, `5m`, `6h`, `2d`.
pub(crate) fn human_seconds(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 || s % 3600 != 0 && s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}
