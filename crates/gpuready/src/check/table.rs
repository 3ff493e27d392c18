//! The report as text: the table `check` prints by default, and the JSON or
//! YAML it writes as it renders them.

use std::io::Write as _;

use gpuready_core::report::NodeState;
use gpuready_core::wide_rules::WideRule;
use gpuready_core::{GovernanceKind, NodeAssessment};

use super::args::Output;
use super::changes::describe_changes;
use super::engine::{CheckReport, Summary};

/// Writes the report as it is rendered (no copy of the whole text in memory:
/// a 100k-node JSON report is hundreds of MB).
pub fn render_to(
    report: &CheckReport,
    output: Output,
    out: &mut dyn std::io::Write,
) -> Result<(), std::io::Error> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    match output {
        Output::Json => {
            serde_json::to_writer_pretty(&mut out, report)?;
            writeln!(out)?;
        }
        Output::Yaml => {
            serde_yaml_ng::to_writer(&mut out, report).map_err(std::io::Error::other)?
        }
        Output::Table => render_table(report, &mut out)?,
    }
    out.flush()
}

/// Text as the table shows it: control characters (a newline or escape in a node
/// name from a dump) escaped, so no input can forge rows or move the cursor.
fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(char::is_control) {
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect::<String>()
            .into()
    } else {
        s.into()
    }
}

/// The width of a column of `texts` as the table shows them, at least `min`.
fn width<'a>(texts: impl Iterator<Item = &'a str>, min: usize) -> usize {
    texts
        .map(|t| printable(t).chars().count())
        .fold(min, usize::max)
}

fn yes_no(ready: Option<bool>) -> &'static str {
    match ready {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    }
}

fn render_table(report: &CheckReport, s: &mut dyn std::io::Write) -> std::io::Result<()> {
    let rows: Vec<TableRow<'_>> = report.nodes.iter().map(TableRow::of).collect();
    table_head(&rows, s)?;
    for n in &report.nodes {
        node_details(n, s)?;
    }
    table_foot(
        &report.summary,
        &report.taint_refused,
        &report.wide_rules,
        &report.now,
        s,
    )
}

/// A node's row in the table's first part.
pub(crate) struct TableRow<'a> {
    pub name: &'a str,
    /// The PROFILE column: the profile, `(conflict)` or `(none)`.
    pub profile: &'a str,
    pub ready: Option<bool>,
    pub reason: &'a str,
}

impl<'a> TableRow<'a> {
    pub fn of(n: &'a NodeAssessment) -> TableRow<'a> {
        TableRow {
            name: &n.name,
            profile: match n.governance {
                GovernanceKind::Conflict => "(conflict)",
                GovernanceKind::Ungoverned => "(none)",
                GovernanceKind::Governed => n.profile.as_deref().unwrap_or("-"),
            },
            ready: n.ready,
            reason: &n.reason,
        }
    }
}

/// The table's header and one row per node, columns as wide as the widest
/// name and profile.
pub(crate) fn table_head(rows: &[TableRow<'_>], s: &mut dyn std::io::Write) -> std::io::Result<()> {
    let w_node = width(rows.iter().map(|r| r.name), 4);
    let w_prof = width(rows.iter().map(|r| r.profile), 7);
    writeln!(
        s,
        "{:w_node$}  {:w_prof$}  READY  REASON",
        "NODE", "PROFILE"
    )?;
    for r in rows {
        writeln!(
            s,
            "{:w_node$}  {:w_prof$}  {:5}  {}",
            printable(r.name),
            printable(r.profile),
            yes_no(r.ready),
            printable(r.reason)
        )?;
    }
    Ok(())
}

/// One node's part of the table's second part: its verdict, layers and what
/// gpuready would change.
pub(crate) fn node_details(n: &NodeAssessment, s: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(s)?;
    match n.governance {
        GovernanceKind::Ungoverned => {
            writeln!(
                s,
                "{}: ungoverned — {}",
                printable(&n.name),
                printable(&n.message)
            )?;
        }
        GovernanceKind::Conflict => {
            writeln!(
                s,
                "{}: CONFLICT — {}",
                printable(&n.name),
                printable(&n.message)
            )?;
        }
        GovernanceKind::Governed => {
            let verdict = match n.state {
                Some(NodeState::Ready) => "READY",
                Some(NodeState::Maintenance) => "IN MAINTENANCE",
                Some(NodeState::WaitingForGate) => "WAITING FOR GATE",
                Some(NodeState::NotReady) | None => "NOT READY",
            };
            let observe = if n.observe {
                " (Observe mode: no writes)"
            } else {
                ""
            };
            writeln!(
                s,
                "{}: {verdict} under GpuNodeProfile {}{observe}",
                printable(&n.name),
                printable(n.profile.as_deref().unwrap_or("-"))
            )?;
            let w_reason = width(n.layers.iter().map(|l| l.reason.as_str()), 6);
            // At least 16 wide, as before, and wide enough for every
            // source's name (`ComputeDomainCliques` is 20).
            let w_evidence = n
                .layers
                .iter()
                .map(|l| l.evidence.as_str().len())
                .max()
                .unwrap_or(16)
                .max(16);
            writeln!(
                s,
                "  {:16}  {:8}  {:w_reason$}  {:w_evidence$}  MESSAGE",
                "LAYER", "STATUS", "REASON", "EVIDENCE"
            )?;
            for l in &n.layers {
                let gate = if l.gating { "" } else { " (not gating)" };
                writeln!(
                    s,
                    "  {:16}  {:8}  {:w_reason$}  {:w_evidence$}  {}{gate}",
                    l.layer.as_str(),
                    l.status.as_str(),
                    printable(&l.reason),
                    l.evidence.as_str(),
                    printable(&l.message)
                )?;
            }
            if let Some(d) = &n.deadline_passed {
                writeln!(s, "  deadline: {}", printable(&d.describe()))?;
            }
            if let Some(m) = &n.lifecycle.maintenance {
                writeln!(
                    s,
                    "  maintenance: {} ({}): {}",
                    m.reason,
                    printable(&m.detail),
                    printable(&m.message)
                )?;
            }
            for g in &n.lifecycle.gates {
                writeln!(s, "  held by: {}", printable(&g.describe()))?;
            }
            if let Some(note) = n.lifecycle.repair.as_ref().and_then(|r| r.note()) {
                writeln!(s, "  repair: {}", printable(&note))?;
            }
            // The node's last finished wait, from its gpuready.io/timeline.
            if let Some(r) = &n.timeline {
                writeln!(s, "  last wait: {}", r.describe())?;
            }
            for e in &n.escalations {
                writeln!(
                    s,
                    "  escalation: {} ({}) effect {}, NoExecute at {}{}",
                    printable(&e.device),
                    printable(&e.reason),
                    e.effect,
                    e.no_execute_at,
                    e.eviction
                        .as_deref()
                        .map(|v| format!("; eviction: {}", printable(v)))
                        .unwrap_or_default()
                )?;
            }
            for m in &n.not_evicted {
                writeln!(s, "  not evicted: {}", printable(m))?;
            }
        }
    }
    let changes = describe_changes(n);
    if !changes.is_empty() {
        writeln!(s, "  would: {}", printable(&changes.join("; ")))?;
    }
    Ok(())
}

/// The table's last lines: nodes whose taint was refused, and the counts.
pub(crate) fn table_foot(
    m: &Summary,
    taint_refused: &[String],
    wide_rules: &[WideRule],
    now: &str,
    s: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    if !wide_rules.is_empty() {
        writeln!(
            s,
            "\n{} DeviceTaintRule(s) evict across the cluster (reported only; gpuready changes no one else's rule):",
            wide_rules.len()
        )?;
        for r in wide_rules {
            writeln!(s, "  {}", printable(&r.message))?;
        }
    }
    if !taint_refused.is_empty() {
        writeln!(
            s,
            "\n{} node(s) not gated as their verdict says: {} last time ({}); see their GpuReady condition",
            taint_refused.len(),
            gpuready_api::keys::TAINT_REFUSED,
            printable(&taint_refused.join(", "))
        )?;
    }
    writeln!(
        s,
        "\n{} governed node(s): {} ready, {} not ready{}{}; {} conflict(s); {} ungoverned (as of {now})",
        m.governed,
        m.ready,
        m.not_ready,
        if m.maintenance > 0 {
            format!(", {} in maintenance", m.maintenance)
        } else {
            String::new()
        },
        if m.waiting_for_gate > 0 {
            format!(", {} waiting for another gate", m.waiting_for_gate)
        } else {
            String::new()
        },
        m.conflicts,
        m.ungoverned
    )
}
