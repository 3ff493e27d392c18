//! The start-up rows: gpuready started on a fleet it has never written — with
//! `--startup-tainted`, every node registered with its readiness taint, so
//! each node's first verdict is one write (its untaint) — timed until every
//! first verdict and until converged, in pairs with the floor's halves: its
//! one write a node (its own taint taken off, timed by the same watch as
//! gpuready), with `--floor-verdict-write` the same write carrying the
//! verdict labels (what gpuready's first verdict carried before the taint
//! went alone), and, with `--floor-converge`, the writes gpuready must send
//! to converge a node (on a tainted fleet: the taint alone, the labels, the
//! condition).
//! The pairs alternate which half goes first (the API server on two shared
//! cores drifts by a fifth between minutes, more than the difference
//! measured), and each ratio divides the two halves of one pair.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use gpuready_testenv::TestEnv;
use kube::Client;
use tokio::sync::watch;

use crate::args::Args;
use crate::controller::{Controller, sample};
use crate::error::Error;
use crate::observe::{Counts, LONG_WAIT, wait_counts};
use crate::server::{quiet_server, server_cpu};
use crate::stats::{kinds, median, ratio, secs};
use crate::{floor, process};

/// gpuready's half of a pair.
#[derive(Clone, Debug, Default)]
pub struct GpureadyStart {
    /// From its start until the observer saw no node tainted
    /// (`--startup-tainted`): every node's first verdict.
    pub first_verdicts: Option<Duration>,
    /// From its start until every node had `GpuReady=True`.
    pub converged: Duration,
    /// Its CPU, its API requests by method, and kube-apiserver + etcd CPU,
    /// from its start until every first verdict was seen.
    pub cpu_first_verdicts: f64,
    pub requests_first_verdicts: BTreeMap<String, u64>,
    pub server_cpu_first_verdicts: f64,
    /// Its CPU until converged.
    pub cpu: f64,
    /// Its RSS once converged, and its peak until then (KiB).
    pub rss_kib: (u64, u64),
}

/// The floor's half of a pair.
#[derive(Clone, Debug, Default)]
pub struct FloorStart {
    /// Its taint taken off every node.
    pub untaint: Seen,
    /// `--floor-verdict-write`: its taint off with the verdict labels in one
    /// write a node (the write of gpuready's first verdict), timed alike.
    pub verdict_write: Option<Seen>,
    /// `--floor-converge`: gpuready's start-up writes, timed by its client.
    pub converge: Option<Duration>,
}

/// gpuready's half: started on the fleet as it is (it has never written it,
/// or [`forget`] took its writes back), timed until every first verdict and
/// until converged. Returns the running controller.
pub async fn gpuready_half(
    bin: &Path,
    env: &TestEnv,
    args: &Args,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
) -> Result<(Controller, GpureadyStart), Error> {
    let mut run = GpureadyStart::default();
    quiet_server(env).await;
    let server0 = server_cpu(env);
    let spawned = Instant::now();
    let ctl = Controller::start(bin, env, args)?;
    if args.startup_tainted {
        let at = wait_counts(counts, "every node untainted", LONG_WAIT, |c| {
            c.tainted == 0
        })
        .await?;
        run.first_verdicts = Some(at - spawned);
        run.server_cpu_first_verdicts = server_cpu(env) - server0;
        run.cpu_first_verdicts = ctl.cpu();
        run.requests_first_verdicts = sample(ctl.port).requests;
        eprintln!(
            "[{n}] gpuready: every first verdict (untaint) from start in {:.1?}",
            at - spawned
        );
    }
    let at = wait_counts(counts, "every GpuReady=True", LONG_WAIT, |c| {
        c.condition_true == n
    })
    .await?;
    run.converged = at - spawned;
    run.cpu = ctl.cpu();
    run.rss_kib = process::rss_kib(ctl.pid());
    eprintln!(
        "[{n}] gpuready: converged from start in {:.1?}",
        run.converged
    );
    Ok((ctl, run))
}

/// One floor untaint as the observer saw it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seen {
    /// From the floor's first request (its list) until the observer saw no
    /// node carry its taint.
    pub elapsed: Duration,
    /// kube-apiserver + etcd CPU over it.
    pub server_cpu: f64,
}

/// The floor's taint put on every node (setup), then taken off by `untaint`
/// from a quiet control plane, timed until the observer saw it gone.
async fn floor_untaint_seen<F>(
    floor_client: &Client,
    env: &TestEnv,
    args: &Args,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    untaint: F,
) -> Result<Seen, Error>
where
    F: std::future::Future<Output = Result<floor::FloorRun, Error>>,
{
    floor::run(floor_client, usize::from(args.concurrency), true).await?;
    wait_counts(counts, "every node floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == n
    })
    .await?;
    quiet_server(env).await;
    let server0 = server_cpu(env);
    let began = Instant::now();
    untaint.await?;
    let at = wait_counts(counts, "no node floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == 0
    })
    .await?;
    Ok(Seen {
        elapsed: at - began,
        server_cpu: server_cpu(env) - server0,
    })
}

/// The floor's half (gpuready stopped): its taint put on every node
/// (setup), then taken off, timed until the observer saw it gone; with
/// `--floor-verdict-write` the same with the verdict labels in the untaint
/// (taken off again, setup); then, with `--floor-converge`, gpuready's
/// start-up writes timed by its client and taken back (setup).
pub async fn floor_half(
    floor_client: &Client,
    env: &TestEnv,
    args: &Args,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
) -> Result<FloorStart, Error> {
    let c = usize::from(args.concurrency);
    let untaint = floor::run(floor_client, c, false);
    let mut half = FloorStart {
        untaint: floor_untaint_seen(floor_client, env, args, counts, n, untaint).await?,
        ..FloorStart::default()
    };
    eprintln!(
        "[{n}] floor: untaint seen in {:.1?} (start-up pair)",
        half.untaint.elapsed
    );
    if args.floor_verdict_write {
        let untaint = floor::untaint_with_labels(floor_client, c);
        let seen = floor_untaint_seen(floor_client, env, args, counts, n, untaint).await?;
        half.verdict_write = Some(seen);
        let undone = floor::unlabel(floor_client, c).await?;
        eprintln!(
            "[{n}] floor: untaint with the verdict labels seen in {:.1?}; labels off in {:.1?} (setup)",
            seen.elapsed, undone.elapsed
        );
    }
    if args.floor_converge {
        // On a fleet registered tainted, gpuready's first verdicts come alone
        // (the gate sends each taint before any label): the floor's
        // start-up begins with its own taint on every node, taken off first.
        if args.startup_tainted {
            floor::run(floor_client, c, true).await?;
        }
        quiet_server(env).await;
        let f = floor::converge(floor_client, c, false, args.startup_tainted).await?;
        half.converge = Some(f.elapsed);
        let undone = floor::converge(floor_client, c, true, false).await?;
        eprintln!(
            "[{n}] floor: start-up's writes {:.1?} ({} writes, {} conflicts); undone in {:.1?} (setup)",
            f.elapsed, f.writes, f.conflicts, undone.elapsed
        );
    }
    Ok(half)
}

/// Takes gpuready's writes back from every node (it is stopped), so its next
/// half meets the fleet as created.
pub async fn forget(
    client: &Client,
    args: &Args,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
) -> Result<(), Error> {
    let taint = args
        .startup_tainted
        .then_some(gpuready_api::keys::DEFAULT_TAINT_KEY);
    let undone = floor::forget_gpuready(client, args.setup_concurrency, taint).await?;
    let want_tainted = if taint.is_some() { n } else { 0 };
    wait_counts(counts, "the fleet as created again", LONG_WAIT, |c| {
        c.tainted == want_tainted && c.condition_true == 0 && c.condition_false == 0
    })
    .await?;
    eprintln!(
        "[{n}] gpuready's writes taken back in {:.1?} (setup)",
        undone.elapsed
    );
    Ok(())
}

fn each<T>(runs: &[T], f: impl Fn(&T) -> String) -> String {
    runs.iter().map(f).collect::<Vec<_>>().join(", ")
}

/// Per pair, `a ÷ b`; the median ratio first, then each pair's.
fn pair_ratios(a: &[Duration], b: &[Duration]) -> String {
    let r: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64().max(0.001))
        .collect();
    if r.is_empty() {
        return "–".into();
    }
    format!(
        "**{:.2}×** ({})",
        median(&r),
        each(&r, |x| format!("{x:.2}×"))
    )
}

/// The median of `runs`, then each.
fn durations(runs: &[Duration]) -> String {
    if runs.is_empty() {
        "–".to_owned()
    } else {
        format!("{} ({})", secs(median(runs)), each(runs, |d| secs(*d)))
    }
}

/// A floor's row (`floor_row`), then gpuready's runs (`ours`) divided by it
/// pair by pair (`ratio_row`).
fn floor_and_ratio(
    line: &mut impl FnMut(&str, &dyn Fn(&Pairs) -> String),
    floor_row: &str,
    ratio_row: &str,
    floor: impl Fn(&Pairs) -> Vec<Duration>,
    ours: impl Fn(&Pairs) -> Vec<Duration>,
) {
    line(floor_row, &|r| durations(&floor(r)));
    line(ratio_row, &|r| pair_ratios(&ours(r), &floor(r)));
}

/// What the start-up rows read of one fleet size.
pub struct Pairs<'a> {
    /// gpuready's halves, pair by pair.
    pub gpuready: &'a [GpureadyStart],
    /// The floor's halves, pair by pair.
    pub floor: &'a [FloorStart],
    /// The floor's untaint of every node, its client alone (before the pairs).
    pub floor_untaint_alone: Duration,
}

/// The start-up rows of the table.
pub fn rows(line: &mut impl FnMut(&str, &dyn Fn(&Pairs) -> String)) {
    let first = |r: &Pairs| -> Vec<Duration> {
        r.gpuready.iter().filter_map(|s| s.first_verdicts).collect()
    };
    let floor_untaint =
        |r: &Pairs| -> Vec<Duration> { r.floor.iter().map(|f| f.untaint.elapsed).collect() };
    let floor_converge =
        |r: &Pairs| -> Vec<Duration> { r.floor.iter().filter_map(|f| f.converge).collect() };
    let floor_verdict = |r: &Pairs| -> Vec<Duration> {
        r.floor
            .iter()
            .filter_map(|f| f.verdict_write.map(|v| v.elapsed))
            .collect()
    };
    let converged =
        |r: &Pairs| -> Vec<Duration> { r.gpuready.iter().map(|s| s.converged).collect() };
    line(
        "start-up pairs (gpuready's half and the floor's, alternating which goes first)",
        &|r| r.gpuready.len().to_string(),
    );
    line(
        "gpuready: start-up, every node's first verdict (its untaint; --startup-tainted), median (each)",
        &|r| durations(&first(r)),
    );
    floor_and_ratio(
        line,
        "floor: one write a node (its taint off, seen by the same watch), median (each)",
        "gpuready's first verdicts ÷ the floor's one write, pair by pair: median (each)",
        floor_untaint,
        first,
    );
    floor_and_ratio(
        line,
        "floor: the write of a first verdict a node (its taint off with the verdict labels, one patch; --floor-verdict-write), median (each)",
        "gpuready's first verdicts ÷ the floor's same write, pair by pair: median (each)",
        floor_verdict,
        first,
    );
    line(
        "kube-apiserver + etcd CPU: the floor's untaint / its untaint with the verdict labels (each pair)",
        &|r| {
            each(r.floor, |f| match f.verdict_write {
                Some(v) => format!("{:.1} / {:.1} s", f.untaint.server_cpu, v.server_cpu),
                None => "–".into(),
            })
        },
    );
    line(
        "gpuready: start-up, converged (from process start), median (each)",
        &|r| durations(&converged(r)),
    );
    floor_and_ratio(
        line,
        "floor: start-up's writes, a node: its taint off alone (--startup-tainted), a label patch, a condition (--floor-converge, its client), median (each)",
        "gpuready converged ÷ the floor's start-up writes, pair by pair: median (each)",
        floor_converge,
        converged,
    );
    cost_rows(line);
}

/// What a start-up cost: gpuready's CPU, requests and memory, the API
/// server's CPU beside the floor's, and converged against the floor alone.
fn cost_rows(line: &mut impl FnMut(&str, &dyn Fn(&Pairs) -> String)) {
    line(
        "gpuready: until every first verdict: CPU; API requests by method (first pair)",
        &|r| match r.gpuready.first() {
            Some(s) if s.first_verdicts.is_some() => format!(
                "{:.1} s; {}",
                s.cpu_first_verdicts,
                kinds(&s.requests_first_verdicts)
            ),
            _ => "–".into(),
        },
    );
    line(
        "kube-apiserver + etcd CPU: the floor's untaint / gpuready until every first verdict (each pair)",
        &|r| {
            each(
                &r.gpuready.iter().zip(r.floor).collect::<Vec<_>>(),
                |(g, f)| {
                    format!(
                        "{:.1} / {:.1} s",
                        f.untaint.server_cpu, g.server_cpu_first_verdicts
                    )
                },
            )
        },
    );
    line("gpuready: CPU for start-up (each)", &|r| {
        each(r.gpuready, |s| format!("{:.1} s", s.cpu))
    });
    line(
        "gpuready: RSS converged from start / peak until then (last pair)",
        &|r| match r.gpuready.last() {
            Some(s) => format!(
                "{:.1} / {:.1} MiB",
                s.rss_kib.0 as f64 / 1024.0,
                s.rss_kib.1 as f64 / 1024.0
            ),
            None => "–".into(),
        },
    );
    line(
        "gpuready: start-up, converged ÷ the floor's one write a node (its client alone, before the pairs)",
        &|r| {
            r.gpuready
                .first()
                .map_or_else(|| "–".into(), |s| ratio(s.converged, r.floor_untaint_alone))
        },
    );
}
