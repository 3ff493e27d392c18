//! The join-storm rows: J healthy GPU nodes join a governed fleet at once,
//! each registered with the readiness taint (kubelet's `--register-with-taints`),
//! and each is timed from its creation to its untaint as the observer's watch
//! sees it — gpuready against a floor client that only watches and untaints.
//! Every joiner is deleted again after its phase, so each storm meets the
//! same fleet.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gpuready_api::keys;
use kube::Client;
use tokio::sync::watch;

use crate::controller::{Controller, diff, sample};
use crate::error::Error;
use crate::observe::{Counts, LONG_WAIT, wait_counts};
use crate::stats::{kinds, median, percentile, ratio, secs};
use crate::{fleet, floor, process};

/// One side of one storm.
#[derive(Clone, Debug, Default)]
pub struct JoinSide {
    /// All J POSTs, from the first sent to the last answered.
    pub create: Duration,
    /// Each joiner from its creation to its untaint: p50, p99, max.
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// The mean reconcile (gpuready) or untaint (the floor) meanwhile: wall
    /// time, `--concurrency` of them in flight.
    pub mean_write: Duration,
}

/// One storm of J joiners, both sides.
#[derive(Clone, Debug, Default)]
pub struct JoinRow {
    pub floor: JoinSide,
    pub gpuready: JoinSide,
    /// From the first POST until every joiner had GpuReady=True.
    pub gpuready_conditions: Duration,
    /// gpuready's writes other than node patches sent before the last
    /// joiner's untaint was seen (the gate defers them).
    pub writes_before_last_untaint: BTreeMap<String, u64>,
    /// gpuready's writes for the whole storm, by kind.
    pub writes: BTreeMap<String, u64>,
    /// gpuready's API requests by method, and its reconciles, until the last
    /// joiner's untaint was seen.
    pub requests_before_last_untaint: BTreeMap<String, u64>,
    pub reconciles_before_last_untaint: u64,
    /// gpuready's CPU seconds from the first POST until the last untaint.
    pub cpu_until_last_untaint: f64,
    /// Failed reconciles by kind over the whole storm.
    pub errors: BTreeMap<String, u64>,
    /// `gpuready_time_to_ready_seconds{kind="join"}` observed over the storm
    /// (the buckets after less those before): what a dashboard shows of it.
    pub metric: Vec<(f64, u64)>,
}

impl JoinRow {
    /// The storm's p99 as Prometheus reads it from the histogram, beside the
    /// watch's, and whether they agree within a bucket (the same bucket or
    /// the next): the record counts whole seconds from `creationTimestamp`.
    fn metric_against_watch(&self) -> String {
        let count = self.metric.last().map_or(0, |b| b.1);
        let Some(p99) = process::quantile(&self.metric, 0.99) else {
            return "– (no joins observed: a gpuready without the histogram)".into();
        };
        let watch = self.gpuready.p99.as_secs_f64();
        let (a, b) = (
            process::bucket_of(&self.metric, p99),
            process::bucket_of(&self.metric, watch),
        );
        let bounds = |i: usize| {
            let upper = self.metric.get(i).map_or(f64::INFINITY, |x| x.0);
            let lower = i
                .checked_sub(1)
                .and_then(|j| self.metric.get(j))
                .map_or(0.0, |x| x.0);
            format!("{lower}–{upper} s")
        };
        let verdict = match a.abs_diff(b) {
            0 => "the same bucket",
            1 => "the next bucket",
            _ => "**more than a bucket apart**",
        };
        format!(
            "{p99:.2} s ({}; {count} joins counted) / {watch:.2} s ({}): {verdict}",
            bounds(a),
            bounds(b)
        )
    }
}

/// Creation → untaint for each joiner, from `changed` (when the observer saw
/// each node's taint go on or off last).
fn side(
    create: Duration,
    created: &[(String, Instant)],
    changed: &std::collections::HashMap<String, Instant>,
) -> JoinSide {
    let mut named: Vec<(Duration, &str)> = created
        .iter()
        .filter_map(|(name, at)| {
            Some((
                changed.get(name)?.saturating_duration_since(*at),
                name.as_str(),
            ))
        })
        .collect();
    named.sort();
    let slowest: Vec<String> = named
        .iter()
        .rev()
        .take(3)
        .map(|(d, n)| format!("{n} {d:.2?}"))
        .collect();
    eprintln!("  the slowest joiners: {}", slowest.join(", "));
    let each: Vec<Duration> = named.into_iter().map(|(d, _)| d).collect();
    JoinSide {
        create,
        p50: percentile(&each, 0.50),
        p99: percentile(&each, 0.99),
        max: each.last().copied().unwrap_or_default(),
        mean_write: Duration::ZERO,
    }
}

/// Deletes the joiners and waits until the observer sees the fleet as before.
async fn remove_joiners(
    admin: &Client,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    j: usize,
    concurrency: usize,
) -> Result<(), Error> {
    fleet::delete_nodes(admin, n..n + j, concurrency).await?;
    wait_counts(counts, "the joiners gone", LONG_WAIT, |c| c.nodes == n).await?;
    Ok(())
}

/// One storm of `j` joiners, untimed, before the first measured one: the
/// API server's first creations of the joiners' names were the slowest of a
/// run (the first 200-storm's joiners took twice as long to create as the
/// next ones, 2026-12-05), and whichever side met them first carried that.
/// They carry a taint no one takes off; gpuready, if running, judges them.
pub async fn warm_up(
    admin: &Client,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    j: usize,
    concurrency: usize,
) -> Result<(), Error> {
    let began = Instant::now();
    fleet::create_joiners(admin, n..n + j, "bench.example.com/warm-up", concurrency).await?;
    wait_counts(counts, "the warm-up joiners seen", LONG_WAIT, |c| {
        c.nodes == n + j
    })
    .await?;
    remove_joiners(admin, counts, n, j, concurrency).await?;
    eprintln!(
        "[{n}] {j} joiners created and removed to warm up in {:.1?} (setup)",
        began.elapsed()
    );
    Ok(())
}

/// gpuready's side of a storm of `j`, on the converged controller.
pub async fn gpuready_storm(
    ctl: &Controller,
    admin: &Client,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    j: usize,
    concurrency: usize,
) -> Result<JoinRow, Error> {
    let before = sample(ctl.port);
    let cpu0 = ctl.cpu();
    let began = Instant::now();
    let created =
        fleet::create_joiners(admin, n..n + j, keys::DEFAULT_TAINT_KEY, concurrency).await?;
    let create = began.elapsed();
    wait_counts(counts, "every joiner untainted", LONG_WAIT, |c| {
        c.nodes == n + j && c.tainted == 0
    })
    .await?;
    let untainted = sample(ctl.port);
    let cpu_until_last_untaint = ctl.cpu() - cpu0;
    let mut gpuready = side(create, &created, &counts.borrow().taint_changed);
    gpuready.mean_write = Duration::from_secs_f64(
        (untainted.reconcile_seconds - before.reconcile_seconds).max(0.0)
            / untainted
                .reconciles
                .saturating_sub(before.reconciles)
                .max(1) as f64,
    );
    let done = wait_counts(counts, "every joiner GpuReady=True", LONG_WAIT, |c| {
        c.condition_true == n + j
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = sample(ctl.port);
    eprintln!(
        "[{n}] gpuready: {j} joiners created in {create:.1?}, untainted p50 {:.2?} / p99 {:.2?} / max {:.2?}, every GpuReady=True after {:.1?}",
        gpuready.p50,
        gpuready.p99,
        gpuready.max,
        done - began
    );
    remove_joiners(admin, counts, n, j, concurrency).await?;
    Ok(JoinRow {
        gpuready,
        gpuready_conditions: done - began,
        writes_before_last_untaint: diff(&untainted.writes, &before.writes)
            .into_iter()
            .filter(|(k, _)| k != "node")
            .collect(),
        writes: diff(&after.writes, &before.writes),
        requests_before_last_untaint: diff(&untainted.requests, &before.requests),
        reconciles_before_last_untaint: untainted.reconciles.saturating_sub(before.reconciles),
        cpu_until_last_untaint,
        errors: diff(&after.errors, &before.errors),
        metric: process::bucket_diff(&after.join_buckets, &before.join_buckets),
        ..JoinRow::default()
    })
}

/// The floor's side of a storm of `j` (gpuready stopped).
pub async fn floor_storm(
    floor_client: &Client,
    admin: &Client,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    j: usize,
    concurrency: usize,
    setup_concurrency: usize,
) -> Result<JoinSide, Error> {
    let (listed, ready) = tokio::sync::oneshot::channel();
    let spent = std::sync::Arc::new(floor::WriteTime::default());
    let untainter = tokio::spawn(floor::untaint_joiners(
        floor_client.clone(),
        concurrency,
        listed,
        spent.clone(),
    ));
    ready
        .await
        .map_err(|_| Error::Other("the floor's watch stopped before its first list".into()))?;
    let began = Instant::now();
    let created =
        fleet::create_joiners(admin, n..n + j, floor::FLOOR_TAINT, setup_concurrency).await?;
    let create = began.elapsed();
    let seen = wait_counts(counts, "every joiner floor-untainted", LONG_WAIT, |c| {
        c.nodes == n + j && c.floor_tainted == 0
    })
    .await;
    untainter.abort();
    seen?;
    let mut floor = side(create, &created, &counts.borrow().floor_taint_changed);
    floor.mean_write = spent.mean();
    eprintln!(
        "[{n}] floor: {j} joiners created in {create:.1?}, untainted p50 {:.2?} / p99 {:.2?} / max {:.2?}",
        floor.p50, floor.p99, floor.max
    );
    remove_joiners(admin, counts, n, j, setup_concurrency).await?;
    Ok(floor)
}

/// Seconds with two decimals.
fn secs2(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

fn triple(s: &JoinSide) -> String {
    format!(
        "{} / {} / {} s (each write {:.0} ms)",
        secs2(s.p50),
        secs2(s.p99),
        secs2(s.max),
        s.mean_write.as_secs_f64() * 1000.0
    )
}

fn rate(j: usize, s: &JoinSide) -> String {
    format!(
        "{:.1} s ({:.0}/s)",
        s.create.as_secs_f64(),
        j as f64 / s.create.as_secs_f64().max(0.001)
    )
}

/// Over every storm of `j` joiners, gpuready's figure against the floor's in
/// the same storm: the median and each.
fn over_storms(joins: &[JoinRow], storms: &[usize], j: usize, f: OfStorm) -> String {
    let each: Vec<f64> = storms
        .iter()
        .zip(joins)
        .filter(|(size, _)| **size == j)
        .map(|(_, s)| f(s))
        .collect();
    if each.is_empty() {
        return "–".into();
    }
    let shown: Vec<String> = each.iter().map(|x| format!("{x:.2}")).collect();
    format!("**{:.2}** ({})", median(&each), shown.join(", "))
}

/// One number of a storm's row.
type OfStorm = fn(&JoinRow) -> f64;

/// The ratios of gpuready's side to the floor's over the storms of one size,
/// each with its row's words.
const STORM_RATIOS: [(&str, OfStorm); 2] = [
    ("gpuready's p99 ÷ the floor's, storm by storm", |s| {
        s.gpuready.p99.as_secs_f64() / s.floor.p99.as_secs_f64().max(0.001)
    }),
    (
        "the joiners' creation in gpuready's run ÷ in the floor's",
        |s| s.gpuready.create.as_secs_f64() / s.floor.create.as_secs_f64().max(0.001),
    ),
];

/// The join-storm rows of the table (each cell reads one fleet size's
/// storms, in `storms`' order), one block per storm, then per size
/// stormed more than once the storms together.
pub fn rows(line: &mut impl FnMut(&str, &dyn Fn(&[JoinRow]) -> String), storms: &[usize]) {
    rows_each(line, storms);
    let mut sizes: Vec<usize> = storms.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    for j in sizes {
        let times = storms.iter().filter(|s| **s == j).count();
        if times < 2 {
            continue;
        }
        for (what, of) in STORM_RATIOS {
            line(
                &format!("join storms of {j} ({times}): {what}: median (each)"),
                &|r| over_storms(r, storms, j, of),
            );
        }
    }
}

fn rows_each(line: &mut impl FnMut(&str, &dyn Fn(&[JoinRow]) -> String), storms: &[usize]) {
    for (k, &j) in storms.iter().enumerate() {
        let cell = move |joins: &[JoinRow], f: &dyn Fn(&JoinRow) -> String| {
            joins.get(k).map_or_else(|| "–".into(), f)
        };
        line(
            &format!("join storm of {j}: floor, creation → untaint p50 / p99 / max (mean untaint)"),
            &|r| cell(r, &|s| triple(&s.floor)),
        );
        line(
            &format!(
                "join storm of {j}: gpuready, creation → untaint p50 / p99 / max (mean reconcile)"
            ),
            &|r| cell(r, &|s| triple(&s.gpuready)),
        );
        line(
            &format!("join storm of {j}: gpuready ÷ floor (p99)"),
            &|r| cell(r, &|s| ratio(s.gpuready.p99, s.floor.p99)),
        );
        line(
            &format!("join storm of {j}: the joiners created, floor run / gpuready run"),
            &|r| {
                cell(r, &|s| {
                    format!(
                        "{} / {}; gpuready's {:+.0} %",
                        rate(j, &s.floor),
                        rate(j, &s.gpuready),
                        (s.gpuready.create.as_secs_f64() / s.floor.create.as_secs_f64().max(0.001)
                            - 1.0)
                            * 100.0
                    )
                })
            },
        );
        line(
            &format!(
                "join storm of {j}: p99 from `gpuready_time_to_ready_seconds{{kind=\"join\"}}` / from the watch"
            ),
            &|r| cell(r, &|s| s.metric_against_watch()),
        );
        line(
            &format!("join storm of {j}: gpuready, every joiner GpuReady=True after"),
            &|r| cell(r, &|s| secs(s.gpuready_conditions)),
        );
        line(
            &format!(
                "join storm of {j}: gpuready, API requests, reconciles and CPU until the last untaint"
            ),
            &|r| {
                cell(r, &|s| {
                    format!(
                        "{}; reconciles {} (failed in the storm: {}); CPU {:.1} s",
                        kinds(&s.requests_before_last_untaint),
                        s.reconciles_before_last_untaint,
                        kinds(&s.errors),
                        s.cpu_until_last_untaint
                    )
                })
            },
        );
        line(
            &format!("join storm of {j}: gpuready, other writes before the last untaint / in all"),
            &|r| {
                cell(r, &|s| {
                    format!(
                        "{} / {}",
                        kinds(&s.writes_before_last_untaint),
                        kinds(&s.writes)
                    )
                })
            },
        );
    }
}
