//! The markdown table: one column per fleet size, one line per figure, each
//! phase's lines in the order the run measures them. Each phase module writes
//! its own lines from its own figures; the adapters here hand it that part of a
//! [`Row`], so no phase imports the row.

use std::time::Duration;

use crate::args::Args;
use crate::dra::{self, DraRow};
use crate::fault::{self, FaultRow};
use crate::join::{self, JoinRow};
use crate::row::Row;
use crate::server::NodeBytes;
use crate::startup::{self, Pairs};
use crate::stats::{kinds, median, ratio, secs, spread};

/// One fleet-wide phase, as the table reads it from a row.
struct Phase {
    name: &'static str,
    /// What starts gpuready's phase.
    cause: &'static str,
    floor_alone: fn(&Row) -> Duration,
    floor_seen: fn(&Row) -> &[Duration],
    gpuready: fn(&Row) -> &[Duration],
}

const TAINT_ALL: Phase = Phase {
    name: "taint all",
    cause: "the profile change",
    floor_alone: |r| r.floor_taint,
    floor_seen: |r| &r.floor_taint_seen,
    gpuready: |r| &r.taint_all,
};

const UNTAINT_ALL: Phase = Phase {
    name: "untaint all",
    cause: "the profile fix",
    floor_alone: |r| r.floor_untaint,
    floor_seen: |r| &r.floor_untaint_seen,
    gpuready: |r| &r.untaint_all,
};

/// The floor alone, and with `--repeats` above 0 the floor seen, gpuready,
/// and their ratio.
fn phase_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String), p: &Phase, runs: bool) {
    line(&format!("floor: {}, its client alone", p.name), &|r| {
        secs((p.floor_alone)(r))
    });
    if !runs {
        return;
    }
    line(
        &format!("floor: {}, seen by the observer (median; each run)", p.name),
        &|r| spread((p.floor_seen)(r)),
    );
    line(
        &format!("gpuready: {}, from {} (median; each run)", p.name, p.cause),
        &|r| spread((p.gpuready)(r)),
    );
    line(
        &format!("gpuready ÷ floor ({}, medians, both seen)", p.name),
        &|r| ratio(median((p.gpuready)(r)), median((p.floor_seen)(r))),
    );
}

pub fn table(rows: &[Row], args: &Args) -> String {
    let mut out = String::new();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    out.push_str(&format!(
        "Measured {} on {cores} core(s); client qps {} burst {} (0: no client-side limit), concurrency {}, {} run(s) of each fleet-wide phase.\n\n",
        jiff::Timestamp::now().strftime("%Y-%m-%d"),
        args.client_qps,
        args.client_burst,
        args.concurrency,
        args.repeats
    ));
    out.push_str("| | ");
    out.push_str(
        &rows
            .iter()
            .map(|r| format!("{} nodes", r.nodes))
            .collect::<Vec<_>>()
            .join(" | "),
    );
    out.push_str(" |\n|---|");
    out.push_str(&"---|".repeat(rows.len()));
    out.push('\n');
    let mut line = |name: &str, f: &dyn Fn(&Row) -> String| {
        out.push_str(&format!("| {name} | "));
        out.push_str(&rows.iter().map(f).collect::<Vec<_>>().join(" | "));
        out.push_str(" |\n");
    };
    server_rows(&mut line, args);
    if !args.setup_only {
        startup_rows(&mut line);
        gpuready_rows(&mut line, args.repeats > 0);
        join_rows(&mut line, &args.storms());
        if args.faults > 0 {
            fault_rows(&mut line);
        }
        if args.dra_updates > 0 {
            dra_rows(&mut line);
        }
    }
    for w in rows.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let nodes = (b.nodes as f64 - a.nodes as f64).max(1.0);
        let kb = |a: u64, b: u64| (b as f64 - a as f64) * 1024.0 / nodes / 1000.0;
        out.push_str(&format!(
            "\n{}→{} nodes: API server RSS growth {:.1} KB per node, etcd {:.1} KB per node (after creating the fleet)",
            a.nodes,
            b.nodes,
            kb(a.mem_created.apiserver.0, b.mem_created.apiserver.0),
            kb(a.mem_created.etcd.0, b.mem_created.etcd.0),
        ));
        if args.setup_only {
            out.push_str(".\n");
            continue;
        }
        out.push_str(&format!(
            "; gpuready RSS growth {:.1} KB per node; CPU per single-node change {:.2}× the {}-node figure.\n",
            kb(a.rss_rest_kib, b.rss_rest_kib),
            b.cpu_per_change_ms / a.cpu_per_change_ms.max(f64::MIN_POSITIVE),
            a.nodes
        ));
    }
    out
}

fn mib(kib: u64) -> String {
    format!("{:.0}", kib as f64 / 1024.0)
}

/// The control plane's rows: start-up, creation, LIST, memory.
fn server_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String), args: &Args) {
    line(
        "API server: start-up, empty (etcd, then kube-apiserver ready)",
        &|r| secs(r.server_start_empty),
    );
    line(
        &format!(
            "fleet created (one POST a node, {} in flight; setup, not measured against a floor)",
            args.setup_concurrency
        ),
        &|r| {
            format!(
                "{} ({:.0} nodes/s)",
                secs(r.create),
                r.nodes as f64 / r.create.as_secs_f64().max(0.001)
            )
        },
    );
    line(
        "API server: start-up with the fleet in etcd (killed, started again, until ready and a first LIST)",
        &|r| secs(r.server_restart_with_fleet),
    );
    line("API server: paged LIST of every node (500 a page)", &|r| {
        secs(r.server_list_all)
    });
    line("RSS kube-apiserver / etcd, fleet created (MiB)", &|r| {
        format!(
            "{} / {}",
            mib(r.mem_created.apiserver.0),
            mib(r.mem_created.etcd.0)
        )
    });
    line("RSS kube-apiserver / etcd at the end; peak (MiB)", &|r| {
        format!(
            "{} / {}; {} / {}",
            mib(r.mem_end.apiserver.0),
            mib(r.mem_end.etcd.0),
            mib(r.mem_end.apiserver.1),
            mib(r.mem_end.etcd.1)
        )
    });
}

/// gpuready's and the floor's rows; those of the fleet-wide phases only where
/// they ran (`runs`: `--repeats` above 0), so no row reads 0 s for a phase
/// that was not timed.
fn gpuready_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String), runs: bool) {
    line(
        "one Node's JSON: as created → ready → not ready (bytes; gpuready's managedFields within)",
        &|r| {
            let b = |x: &NodeBytes| {
                if x.total == 0 {
                    "–".to_owned()
                } else {
                    format!("{} ({})", x.total, x.gpuready_managed_fields)
                }
            };
            format!(
                "{} → {} → {}",
                b(&r.node_bytes_created),
                b(&r.node_bytes_ready),
                b(&r.node_bytes_not_ready)
            )
        },
    );
    phase_rows(line, &TAINT_ALL, runs);
    // Timed by every taint-all run and by `--first-taint-probe`.
    line(
        "gpuready: first taint seen, from the profile change (median)",
        &|r| {
            if r.first_taint.is_empty() {
                "–".to_owned()
            } else {
                format!("{} ms", median(&r.first_taint).as_millis())
            }
        },
    );
    if runs {
        taint_phase_rows(line);
    }
    phase_rows(line, &UNTAINT_ALL, runs);
    line("floor: writes (both phases, its client alone)", &|r| {
        r.floor_writes.to_string()
    });
    line("floor: client CPU (both phases, its client alone)", &|r| {
        format!("{:.1} s", r.floor_cpu)
    });
    if runs {
        untaint_phase_rows(line);
    }
    rest_rows(line);
}

/// What gpuready sent and spent until the last taint of a taint-all phase.
fn taint_phase_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    line(
        "gpuready: other writes before the last taint was seen (first run)",
        &|r| kinds(&r.writes_before_last_taint),
    );
    line(
        "gpuready: CPU until the last taint was seen (median)",
        &|r| format!("{:.1} s", median(&r.cpu_until_last_taint)),
    );
    line(
        "gpuready: API requests and reconciles until the last taint was seen (first run)",
        &|r| {
            format!(
                "{}; reconciles {}",
                kinds(&r.requests_before_last_taint),
                r.reconciles_before_last_taint
            )
        },
    );
}

/// gpuready's writes, etcd's growth and gpuready's CPU over both fleet-wide
/// phases.
fn untaint_phase_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    line("gpuready: writes while tainting (first run)", &|r| {
        kinds(&r.writes_taint_phase)
    });
    line("gpuready: writes while untainting (first run)", &|r| {
        kinds(&r.writes_untaint_phase)
    });
    line(
        "etcd's database grown by gpuready's taint + untaint bursts (first run, MiB)",
        &|r| format!("{:.1}", r.etcd_growth_burst as f64 / (1u64 << 20) as f64),
    );
    line("gpuready: node writes + Events per transition", &|r| {
        let total: u64 = r
            .writes_taint_phase
            .iter()
            .chain(r.writes_untaint_phase.iter())
            .filter(|(k, _)| k.as_str() != "profile_status")
            .map(|(_, v)| v)
            .sum();
        format!("{:.2}", total as f64 / (2 * r.nodes).max(1) as f64)
    });
    line("gpuready: CPU, taint all (median)", &|r| {
        format!("{:.1} s", median(&r.cpu_taint_phase))
    });
    line("gpuready: CPU, untaint all (median)", &|r| {
        format!("{:.1} s", median(&r.cpu_untaint_phase))
    });
}

/// Single changes and rest: measured in every run.
fn rest_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    line("gpuready: CPU per single-node change", &|r| {
        format!("{:.1} ms", r.cpu_per_change_ms)
    });
    line("gpuready: label→taint reaction p50 / p99", &|r| {
        format!(
            "{} / {} ms",
            r.reaction_p50.as_millis(),
            r.reaction_p99.as_millis()
        )
    });
    line("gpuready: RSS at rest / peak", &|r| {
        format!(
            "{:.1} / {:.1} MiB",
            r.rss_rest_kib as f64 / 1024.0,
            r.rss_peak_kib as f64 / 1024.0
        )
    });
    line("gpuready: CPU at rest (ms per second)", &|r| {
        format!(
            "{:.1}",
            r.rest_cpu * 1000.0 / r.rest_window.as_secs_f64().max(1.0)
        )
    });
    line(
        "gpuready: samples in one /metrics scrape at rest (of them per-node `gpuready_node_*`)",
        &|r| format!("{} ({})", r.rest_series.0, r.rest_series.1),
    );
    line(
        "gpuready: deepest channel since its start, at rest (start-up, rounds, single changes) / after the join storms",
        &|r| format!("{} / {}", r.channels_rest, r.channels_storm),
    );
    line("gpuready: writes/s at rest", &|r| {
        format!(
            "{:.3} ({} in {:.0} s; by kind: {})",
            r.rest_writes as f64 / r.rest_window.as_secs_f64().max(1.0),
            r.rest_writes,
            r.rest_window.as_secs_f64(),
            kinds(&r.rest_writes_by_kind)
        )
    });
}

/// The start-up rows, each cell given its size's pairs.
fn startup_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    startup::rows(&mut |name: &str, cell: &dyn Fn(&Pairs) -> String| {
        line(name, &|r: &Row| {
            cell(&Pairs {
                gpuready: &r.startup,
                floor: &r.startup_floor,
                floor_untaint_alone: r.floor_untaint,
            })
        });
    });
}

/// The join-storm rows, each cell given its size's storms.
fn join_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String), storms: &[usize]) {
    join::rows(
        &mut |name: &str, cell: &dyn Fn(&[JoinRow]) -> String| {
            line(name, &|r: &Row| cell(&r.joins));
        },
        storms,
    );
}

/// The fault → gate rows; "–" for a size that has none.
fn fault_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    fault::rows(&mut |name: &str, cell: &dyn Fn(&FaultRow) -> String| {
        line(name, &|r: &Row| {
            r.faults.as_ref().map_or_else(|| "–".into(), cell)
        });
    });
}

/// The DRA rows; "–" for a size that has none.
fn dra_rows(line: &mut impl FnMut(&str, &dyn Fn(&Row) -> String)) {
    dra::rows(&mut |name: &str, cell: &dyn Fn(&DraRow) -> String| {
        line(name, &|r: &Row| {
            r.dra.as_ref().map_or_else(|| "–".into(), cell)
        });
    });
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// Two fleet sizes with a figure in each phase's part: faults only at the
    /// second, DRA only at the first, three join storms (two of one size).
    fn fixture_rows() -> Vec<Row> {
        let d = |s: f64| Duration::from_secs_f64(s);
        let mut rows = Vec::new();
        for (i, n) in [1000usize, 5000].into_iter().enumerate() {
            let k = (i + 1) as f64;
            let mut join = join::JoinRow::default();
            join.gpuready.p99 = d(1.5 * k);
            join.floor.p99 = d(0.7 * k);
            join.gpuready.create = d(2.0);
            join.floor.create = d(1.0 + k);
            join.metric = vec![(1.0, 3), (5.0, 10), (f64::INFINITY, 12)];
            join.writes.insert("event".into(), 4);
            let mut fault = fault::FaultRow::default();
            fault.single.from_sent = vec![d(0.1), d(0.3)];
            fault.single.from_returned = vec![d(0.05), d(0.2)];
            fault.single_floor.from_sent = vec![d(0.02 * k)];
            fault.single_floor.from_returned = vec![d(0.01)];
            fault.restore = vec![d(3.25), d(4.5)];
            let startup = startup::GpureadyStart {
                first_verdicts: Some(d(10.0 * k)),
                converged: d(20.0 * k),
                cpu: 3.0,
                ..Default::default()
            };
            let startup_floor = startup::FloorStart {
                untaint: startup::Seen {
                    elapsed: d(5.0 * k),
                    server_cpu: 1.5,
                },
                verdict_write: (i == 0).then_some(startup::Seen {
                    elapsed: d(6.0),
                    server_cpu: 2.0,
                }),
                converge: Some(d(7.0)),
            };
            let mut row = Row {
                nodes: n,
                server_start_empty: d(1.0),
                create: d(10.0 * k),
                floor_taint: d(3.0 * k),
                floor_untaint: d(4.0 * k),
                floor_taint_seen: vec![d(3.1), d(3.5), d(2.9)],
                floor_untaint_seen: vec![d(4.1)],
                taint_all: vec![d(6.0), d(5.0), d(7.0)],
                untaint_all: vec![d(8.0), d(9.0)],
                first_taint: vec![d(0.25), d(0.5)],
                cpu_taint_phase: vec![1.0, 2.0],
                rss_rest_kib: 40_000 * (i as u64 + 1),
                cpu_per_change_ms: 1.5 * k,
                reaction_p50: d(0.12),
                reaction_p99: d(0.9),
                rest_window: d(75.0),
                rest_writes: 3,
                rest_series: (120, 80),
                startup: vec![startup.clone(), startup],
                startup_floor: vec![startup_floor.clone(), startup_floor],
                joins: vec![join.clone(), join.clone(), join],
                faults: (i == 1).then_some(fault),
                dra: (i == 0).then(|| DraRow {
                    updates: 3,
                    taint: d(2.0),
                    floor_taint: d(1.0),
                    ..Default::default()
                }),
                etcd_growth_burst: 3 << 20,
                ..Row::default()
            };
            row.mem_created.apiserver = (500_000 * (i as u64 + 1), 0);
            row.mem_created.etcd = (100_000, 0);
            row.node_bytes_ready = NodeBytes {
                total: 3000,
                gpuready_managed_fields: 400,
            };
            row.writes_taint_phase.insert("node".into(), n as u64);
            row.requests_before_last_taint
                .insert("PATCH".into(), n as u64);
            rows.push(row);
        }
        rows
    }

    /// The cells of the line named `name`, one per fleet size.
    fn cells<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("| {name} | ")))
            .unwrap_or_else(|| panic!("no line {name:?} in:\n{table}"));
        line.trim_end_matches(" |").split(" | ").skip(1).collect()
    }

    /// Each phase's lines get their part of every row through the adapters
    /// here: one cell per size, "–" where a size has none of it.
    #[test]
    fn every_line_has_a_cell_per_size_and_a_missing_part_reads_dash() {
        let rows = fixture_rows();
        let args = Args::parse_from([
            "b",
            "--faults",
            "5",
            "--dra-updates",
            "3",
            "--joins",
            "200,200,2000",
        ]);
        let text = table(&rows, &args);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| |"))
            .collect();
        assert!(lines.len() > 80, "{text}");
        for l in &lines {
            assert_eq!(l.matches(" | ").count(), rows.len(), "{l}");
        }
        let fault_floor =
            "fault → gate, one node at a time: floor, the bench's own taint written → seen";
        assert_eq!(cells(&text, fault_floor)[0], "–");
        assert_eq!(
            cells(&text, "DRA: slices changed (a device taint on, then off)"),
            ["3", "–"]
        );
        assert_eq!(
            cells(
                &text,
                "join storms of 200 (2): gpuready's p99 ÷ the floor's, storm by storm: median (each)"
            ),
            ["**2.14** (2.14, 2.14)"; 2]
        );
        assert_eq!(
            cells(
                &text,
                "gpuready: start-up, converged ÷ the floor's one write a node (its client alone, before the pairs)"
            ),
            ["5.00×"; 2]
        );
        // --setup-only: the control plane's lines alone.
        let setup = table(&rows, &Args::parse_from(["b", "--setup-only"]));
        assert_eq!(setup.lines().filter(|l| l.starts_with("| ")).count(), 7);
    }
}
