//! `gpuready check` over files with the report spilled as it is judged: each
//! node's part of the report is rendered the moment the node is judged and
//! written to an unnamed temporary file, and only a small row per node (its
//! name, the table's columns, where its part lies) stays in memory until the
//! report is written in name order. The report is byte for byte the one
//! [`super::render_to`] writes from a whole [`super::CheckReport`]; what it
//! no longer needs is every assessment in memory at once (issue 32: 1,000,000
//! governed not-ready nodes took 5.48 GB, about 5.5 KB each). Kept here
//! rather than in a crate: no crate sorts serde output spilled to disk.

use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use gpuready_core::NodeAssessment;
use gpuready_core::tally::NodeCounts;
use jiff::Timestamp;

use super::{
    CheckArgs, CheckReport, Output, TableRow, node_details, read_evidence_files_for, table_foot,
    table_head,
};
use crate::input::{self, InputError};

/// What a streamed check ends with: the counts, for the exit code and the
/// warning about an empty selection.
#[derive(Debug)]
pub struct Checked {
    pub summary: NodeCounts,
    pub taint_refused: usize,
}

impl Checked {
    /// As [`CheckReport::exit_code`].
    pub fn exit_code(&self) -> u8 {
        u8::from(self.summary.not_ready > 0 || self.summary.conflicts > 0 || self.taint_refused > 0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    #[error(transparent)]
    Input(#[from] InputError),
    /// The temporary file (`TMPDIR`) that holds the report's parts.
    #[error("the temporary file for the report: {0}")]
    Io(#[from] std::io::Error),
}

/// One judged node: what the table's first part shows, and where its part of
/// the report lies in the temporary file.
struct Row {
    name: String,
    /// Shared between the nodes that show the same text (a few profiles and
    /// reasons for a whole fleet).
    profile: Arc<str>,
    reason: Arc<str>,
    ready: Option<bool>,
    at: u64,
    len: u64,
}

/// The same `Arc<str>` for the same text.
#[derive(Default)]
struct Interned(HashMap<String, Arc<str>>);

impl Interned {
    fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.0.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.0.insert(s.to_owned(), a.clone());
        a
    }
}

/// Offline check over files, written to `out` as `output`, holding one small
/// row per node instead of its assessment. The counts come back beside how
/// writing the report went (a closed pipe still has a verdict).
pub fn check_files_to(
    args: &CheckArgs,
    output: Output,
    out: &mut dyn Write,
) -> Result<(Checked, std::io::Result<()>), SpillError> {
    let profiles = input::read_all_profiles(&args.profiles)?;
    let extra = read_evidence_files_for(&profiles, args)?;
    let now = args.now.unwrap_or_else(Timestamp::now);
    let mut spill = BufWriter::with_capacity(1 << 16, tempfile::tempfile()?);
    let mut rows: Vec<Row> = Vec::new();
    let mut summary = NodeCounts::default();
    let mut taint_refused = Vec::new();
    let mut interned = Interned::default();
    let mut at = 0u64;
    let mut failed: Option<std::io::Error> = None;
    super::judge_each(
        &profiles,
        &extra,
        now,
        |each| {
            for n in &args.nodes {
                input::for_each_node(n, &mut *each)?;
            }
            Ok(())
        },
        |a, refused| {
            summary.add_assessment(&a);
            if refused {
                taint_refused.push(a.name.clone());
            }
            if failed.is_some() {
                return;
            }
            let part = match part_of(&a, output) {
                Ok(p) => p,
                Err(e) => {
                    failed = Some(e);
                    return;
                }
            };
            if let Err(e) = spill.write_all(&part) {
                failed = Some(e);
                return;
            }
            let row = TableRow::of(&a);
            rows.push(Row {
                name: a.name.clone(),
                profile: interned.get(row.profile),
                reason: interned.get(row.reason),
                ready: a.ready,
                at,
                len: part.len() as u64,
            });
            at += part.len() as u64;
        },
    )?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    taint_refused.sort();
    let checked = Checked {
        summary,
        taint_refused: taint_refused.len(),
    };
    let spilled = spill.into_inner().map_err(|e| e.into_error())?;
    let shell = CheckReport {
        now: now.to_string(),
        nodes: Vec::new(),
        summary,
        taint_refused,
        wide_rules: extra.wide_rules.clone(),
    };
    let written = write_report(&rows, spilled, shell, output, out);
    Ok((checked, written))
}

/// The report from the rows (in name order) and their parts in `spilled`.
fn write_report(
    rows: &[Row],
    spilled: std::fs::File,
    shell: CheckReport,
    output: Output,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut spilled = BufReader::with_capacity(1 << 16, spilled);
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let mut copy_parts = |out: &mut dyn Write, between: &[u8]| -> std::io::Result<()> {
        let mut buf = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            if i > 0 {
                out.write_all(between)?;
            }
            spilled.seek(SeekFrom::Start(r.at))?;
            buf.resize(usize::try_from(r.len).unwrap_or(usize::MAX), 0);
            spilled.read_exact(&mut buf)?;
            out.write_all(&buf)?;
        }
        Ok(())
    };
    // The report without its nodes, then the nodes spliced in where serde
    // writes the empty list.
    let mut splice = |out: &mut dyn Write, text: &str, how: &Splice| -> std::io::Result<()> {
        let (head, tail) = split_at(text, how.empty)?;
        out.write_all(head.as_bytes())?;
        if rows.is_empty() {
            out.write_all(how.empty.as_bytes())?;
        } else {
            out.write_all(how.open)?;
            copy_parts(out, how.between)?;
            out.write_all(how.close)?;
        }
        out.write_all(tail.as_bytes())
    };
    match output {
        Output::Json => {
            let text = serde_json::to_string_pretty(&shell).map_err(std::io::Error::other)?;
            splice(&mut out, &text, &JSON_NODES)?;
            writeln!(out)?;
        }
        Output::Yaml => {
            let text = serde_yaml_ng::to_string(&shell).map_err(std::io::Error::other)?;
            splice(&mut out, &text, &YAML_NODES)?;
        }
        Output::Table => {
            let table: Vec<TableRow<'_>> = rows
                .iter()
                .map(|r| TableRow {
                    name: &r.name,
                    profile: &r.profile,
                    ready: r.ready,
                    reason: &r.reason,
                })
                .collect();
            table_head(&table, &mut out)?;
            drop(table);
            copy_parts(&mut out, b"")?;
            table_foot(
                &shell.summary,
                &shell.taint_refused,
                &shell.wide_rules,
                &shell.now,
                &mut out,
            )?;
        }
    }
    out.flush()
}

/// One node's part of the report, as it appears inside the whole one: a
/// pretty JSON object indented as an item of `nodes`, a YAML sequence item,
/// or the node's block of the table's second part.
fn part_of(a: &NodeAssessment, output: Output) -> std::io::Result<Vec<u8>> {
    match output {
        Output::Json => {
            let text = serde_json::to_string_pretty(a).map_err(std::io::Error::other)?;
            Ok(indented(&text, "    ", "    ").into_bytes())
        }
        Output::Yaml => {
            let text = serde_yaml_ng::to_string(a).map_err(std::io::Error::other)?;
            Ok(indented(&text, "- ", "  ").into_bytes())
        }
        Output::Table => {
            let mut buf = Vec::new();
            node_details(a, &mut buf)?;
            Ok(buf)
        }
    }
}

/// `text` with `first` before its first line and `rest` before every other
/// non-empty line (a JSON string holds no raw newline; a YAML block scalar's
/// lines move with the mapping that holds them).
fn indented(text: &str, first: &str, rest: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i == 0 {
            out.push_str(first);
        } else if line != "\n" {
            out.push_str(rest);
        }
        out.push_str(line);
    }
    out
}

/// Where a format's shell holds the nodes (the empty list serde writes) and
/// how the spilled parts are written there: JSON and YAML splice alike.
struct Splice {
    empty: &'static str,
    open: &'static [u8],
    between: &'static [u8],
    close: &'static [u8],
}

const JSON_NODES: Splice = Splice {
    empty: "\"nodes\": []",
    open: b"\"nodes\": [\n",
    between: b",\n",
    close: b"\n  ]",
};

const YAML_NODES: Splice = Splice {
    empty: "nodes: []\n",
    open: b"nodes:\n",
    between: b"",
    close: b"",
};

fn split_at<'a>(text: &'a str, marker: &str) -> std::io::Result<(&'a str, &'a str)> {
    let i = text
        .find(marker)
        .ok_or_else(|| std::io::Error::other(format!("the report's shell lacks {marker:?}")))?;
    Ok((&text[..i], &text[i + marker.len()..]))
}

#[cfg(test)]
mod tests;
