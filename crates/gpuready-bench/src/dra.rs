//! The DRA rows (`--dra-updates`): one ResourceSlice a node, some of them
//! changed, gpuready's taints timed against a floor that writes each slice and
//! then its node's taint, and the re-lists after an API server restart.

use std::time::{Duration, Instant};

use gpuready_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;

use crate::args::Args;
use crate::controller::{Controller, quiet, sample};
use crate::error::Error;
use crate::observe::{Counts, LONG_WAIT, wait_counts};
use crate::stats::{ratio, secs};
use crate::{fleet, floor};

/// The DRA rows of one fleet size (`--dra-updates`).
#[derive(Debug, Default)]
pub struct DraRow {
    /// Slices changed (at most one a node).
    pub updates: usize,
    /// One slice a node published (setup concurrency).
    pub publish: Duration,
    /// From the first slice published until gpuready went quiet, every node
    /// judged from its slice (and still ready).
    pub settle: Duration,
    pub taint: Duration,
    pub untaint: Duration,
    pub floor_taint: Duration,
    pub floor_untaint: Duration,
    /// The bench's slice writes alone, within gpuready's taint phase.
    pub slices_sent: Duration,
    /// gpuready's reconciles from the first update until every changed node
    /// had GpuReady=False.
    pub reconciles_taint: u64,
    /// gpuready's CPU over both phases, per slice update.
    pub cpu_per_update_ms: f64,
    /// Over the 20 s after the API server was restarted (nothing changed).
    pub relist_reconciles: u64,
    pub relist_cpu: f64,
}

/// The DRA rows (`--dra-updates`), on the converged controller, which it
/// stops before the floor's half.
#[allow(clippy::too_many_arguments)]
pub async fn phase(
    ctl: Controller,
    env: &mut TestEnv,
    admin: &Client,
    floor_client: &Client,
    counts: &mut watch::Receiver<Counts>,
    args: &Args,
    n: usize,
) -> Result<DraRow, Error> {
    let m = args.dra_updates.min(n);
    let c = usize::from(args.concurrency);
    let mut dra = DraRow {
        updates: m,
        ..DraRow::default()
    };
    publish(&ctl, admin, counts, args, n, &mut dra).await?;
    gpuready_half(&ctl, admin, counts, n, c, &mut dra).await?;
    relist(&ctl, env, counts, n, &mut dra).await?;
    // The floor's half, gpuready stopped: each slice, then its node's taint.
    drop(ctl);
    floor_half(floor_client, counts, n, c, &mut dra).await?;
    Ok(dra)
}

/// Every node gets its slice: judged from it now (the same RTX 3090), and
/// still ready.
async fn publish(
    ctl: &Controller,
    admin: &Client,
    counts: &mut watch::Receiver<Counts>,
    args: &Args,
    n: usize,
    dra: &mut DraRow,
) -> Result<(), Error> {
    let before = sample(ctl.port).reconciles;
    let began = Instant::now();
    fleet::put_slices(admin, 0..n, false, args.setup_concurrency).await?;
    dra.publish = began.elapsed();
    quiet(ctl, before + n as u64).await?;
    wait_counts(counts, "every node ready from its slice", LONG_WAIT, |c| {
        c.condition_true == n && c.tainted == 0
    })
    .await?;
    dra.settle = began.elapsed();
    let probe = Api::<Node>::all(admin.clone())
        .get(&fleet::node_name(0))
        .await?;
    let reason = probe
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| {
            c.into_iter()
                .find(|c| c.type_ == gpuready_api::keys::CONDITION_GPU_READY)
        })
        .and_then(|c| c.reason)
        .unwrap_or_default();
    eprintln!(
        "[{n}] DRA: {n} slices published in {:.1?}, gpuready quiet after {:.1?} (GpuReady reason {reason})",
        dra.publish, dra.settle
    );
    Ok(())
}

/// gpuready's half: `dra.updates` slices get a device taint, then lose it.
async fn gpuready_half(
    ctl: &Controller,
    admin: &Client,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    c: usize,
    dra: &mut DraRow,
) -> Result<(), Error> {
    let m = dra.updates;
    let s0 = sample(ctl.port);
    let cpu0 = ctl.cpu();
    let t0 = Instant::now();
    fleet::put_slices(admin, 0..m, true, c).await?;
    dra.slices_sent = t0.elapsed();
    let at = wait_counts(counts, "the changed nodes tainted", LONG_WAIT, |c| {
        c.tainted == m
    })
    .await?;
    dra.taint = at - t0;
    wait_counts(counts, "the changed nodes GpuReady=False", LONG_WAIT, |c| {
        c.condition_false == m
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    dra.reconciles_taint = sample(ctl.port).reconciles.saturating_sub(s0.reconciles);
    let t1 = Instant::now();
    fleet::put_slices(admin, 0..m, false, c).await?;
    let at = wait_counts(counts, "the changed nodes untainted", LONG_WAIT, |c| {
        c.tainted == 0
    })
    .await?;
    dra.untaint = at - t1;
    wait_counts(counts, "every GpuReady=True again", LONG_WAIT, |c| {
        c.condition_true == n
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    dra.cpu_per_update_ms = (ctl.cpu() - cpu0) * 1000.0 / (2 * m).max(1) as f64;
    eprintln!(
        "[{n}] DRA: gpuready followed {m} slice updates: taint {:.1?}, untaint {:.1?}",
        dra.taint, dra.untaint
    );
    Ok(())
}

/// Every watch re-lists after an API server restart; nothing changed, so
/// nothing needs judging.
async fn relist(
    ctl: &Controller,
    env: &mut TestEnv,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    dra: &mut DraRow,
) -> Result<(), Error> {
    let s1 = sample(ctl.port);
    let cpu1 = ctl.cpu();
    env.restart_apiserver().await?;
    tokio::time::sleep(Duration::from_secs(20)).await;
    dra.relist_reconciles = sample(ctl.port).reconciles.saturating_sub(s1.reconciles);
    dra.relist_cpu = ctl.cpu() - cpu1;
    eprintln!(
        "[{n}] DRA: {} reconciles, {:.2} s CPU in the 20 s after the API server restart",
        dra.relist_reconciles, dra.relist_cpu
    );
    // The observer's watch re-listed too: wait until it sees the fleet again.
    wait_counts(
        counts,
        "the observer sees every node again",
        LONG_WAIT,
        |c| c.nodes == n && c.condition_true == n,
    )
    .await?;
    Ok(())
}

/// The floor's half (gpuready stopped): each slice, then its node's taint.
async fn floor_half(
    floor_client: &Client,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    c: usize,
    dra: &mut DraRow,
) -> Result<(), Error> {
    let m = dra.updates;
    let t2 = Instant::now();
    floor::run_after_slices(floor_client, c, m, true).await?;
    let at = wait_counts(counts, "the changed nodes floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == m
    })
    .await?;
    dra.floor_taint = at - t2;
    let t3 = Instant::now();
    floor::run_after_slices(floor_client, c, m, false).await?;
    let at = wait_counts(counts, "no node floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == 0
    })
    .await?;
    dra.floor_untaint = at - t3;
    eprintln!(
        "[{n}] DRA: floor, slice then node: taint {:.1?}, untaint {:.1?}",
        dra.floor_taint, dra.floor_untaint
    );
    Ok(())
}

/// The DRA rows of the table, each cell read from one fleet size's [`DraRow`].
pub fn rows(line: &mut impl FnMut(&str, &dyn Fn(&DraRow) -> String)) {
    line(
        "DRA: one ResourceSlice a node published (setup) → gpuready quiet, every node judged from it",
        &|d| format!("{} (published in {})", secs(d.settle), secs(d.publish)),
    );
    line("DRA: slices changed (a device taint on, then off)", &|d| {
        d.updates.to_string()
    });
    line(
        "DRA: floor, each slice written then its node's taint, seen by the observer (on / off)",
        &|d| format!("{} / {}", secs(d.floor_taint), secs(d.floor_untaint)),
    );
    line(
        "DRA: gpuready, the slices written → their nodes' taints seen (on / off)",
        &|d| format!("{} / {}", secs(d.taint), secs(d.untaint)),
    );
    line("DRA: gpuready ÷ floor (on / off)", &|d| {
        format!(
            "{} / {}",
            ratio(d.taint, d.floor_taint),
            ratio(d.untaint, d.floor_untaint)
        )
    });
    line(
        "DRA: the bench's slice writes alone, within gpuready's taint phase",
        &|d| secs(d.slices_sent),
    );
    line(
        "DRA: reconciles until every changed node had GpuReady=False",
        &|d| d.reconciles_taint.to_string(),
    );
    line("DRA: gpuready CPU per slice update", &|d| {
        format!("{:.1} ms", d.cpu_per_update_ms)
    });
    line(
        "DRA: the API server restarted (every watch re-lists, nothing changed): reconciles, CPU in the next 20 s",
        &|d| format!("{}, {:.2} s", d.relist_reconciles, d.relist_cpu),
    );
}
