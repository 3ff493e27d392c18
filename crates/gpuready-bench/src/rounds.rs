//! The fleet-wide rounds: the floor and gpuready each taint every node, then
//! untaint it, timed by the observer's watch; and which side goes first.

use std::time::{Duration, Instant};

use gpuready_testenv::TestEnv;
use kube::Client;
use tokio::sync::watch;

use crate::args::Args;
use crate::controller::{Controller, diff, sample};
use crate::error::Error;
use crate::observe::{Counts, LONG_WAIT, wait_counts};
use crate::row::Row;
use crate::server::{etcd_db_bytes, node_bytes};
use crate::{fleet, floor};

/// One side of a timed pair: the floor client or gpuready.
#[derive(Clone, Copy)]
pub enum Side {
    Floor,
    Gpuready,
}

impl Side {
    /// The order of round `index` of `count`: alternating which side goes
    /// first, so drift over minutes does not land on one side, and the last
    /// round ends with gpuready (whose controller the run goes on with).
    pub fn ending_with_gpuready(index: usize, count: usize) -> [Side; 2] {
        if (count - 1 - index) % 2 == 1 {
            [Side::Gpuready, Side::Floor]
        } else {
            [Side::Floor, Side::Gpuready]
        }
    }
}

/// The floor taints every node, then untaints it, each timed until the
/// observer has seen all of it.
pub async fn floor_round(
    client: &Client,
    args: &Args,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    row: &mut Row,
) -> Result<(), Error> {
    let began = Instant::now();
    floor::run(client, usize::from(args.concurrency), true).await?;
    let at = wait_counts(counts, "every node floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == n
    })
    .await?;
    row.floor_taint_seen.push(at - began);
    let began = Instant::now();
    floor::run(client, usize::from(args.concurrency), false).await?;
    let at = wait_counts(counts, "no node floor-tainted", LONG_WAIT, |c| {
        c.floor_tainted == 0
    })
    .await?;
    row.floor_untaint_seen.push(at - began);
    eprintln!(
        "[{n}] floor, seen by the observer: taint {:.1?}, untaint {:.1?}",
        row.floor_taint_seen.last().copied().unwrap_or_default(),
        at - began,
    );
    Ok(())
}

/// gpuready taints every node (one profile change breaks them all), then
/// untaints it (the profile fixed), each timed until the observer has seen all
/// of it. The first round also records writes and requests by kind.
pub async fn gpuready_round(
    ctl: &Controller,
    env: &TestEnv,
    admin: &Client,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    round: usize,
    row: &mut Row,
) -> Result<(), Error> {
    let before = sample(ctl.port);
    let db_before = etcd_db_bytes(env);
    // Break: the driver minimum above every node's.
    let cpu0 = ctl.cpu();
    let broke = Instant::now();
    fleet::apply_profile(admin, "999.0").await?;
    let first = wait_counts(counts, "a node tainted", LONG_WAIT, |c| c.tainted > 0).await?;
    row.first_taint.push(first - broke);
    let at = wait_counts(counts, "every node tainted", LONG_WAIT, |c| c.tainted == n).await?;
    row.taint_all.push(at - broke);
    row.cpu_until_last_taint.push(ctl.cpu() - cpu0);
    if round == 0 {
        let now = sample(ctl.port);
        row.requests_before_last_taint = diff(&now.requests, &before.requests);
        row.reconciles_before_last_taint = now.reconciles.saturating_sub(before.reconciles);
        row.writes_before_last_taint = diff(&now.writes, &before.writes)
            .into_iter()
            .filter(|(k, _)| k != "node")
            .collect();
    }
    wait_counts(counts, "every GpuReady=False", LONG_WAIT, |c| {
        c.condition_false == n
    })
    .await?;
    if round == 0 {
        row.node_bytes_not_ready = node_bytes(admin, &fleet::node_name(0)).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    row.cpu_taint_phase.push(ctl.cpu() - cpu0);
    let tainted = sample(ctl.port).writes;
    if round == 0 {
        row.writes_taint_phase = diff(&tainted, &before.writes);
    }
    eprintln!("[{n}] gpuready: tainted all in {:.1?}", at - broke);

    // Repair: the profile fixed makes every node ready.
    let cpu1 = ctl.cpu();
    let repaired = Instant::now();
    fleet::apply_profile(admin, "570.0").await?;
    let at = wait_counts(counts, "every node untainted", LONG_WAIT, |c| {
        c.tainted == 0
    })
    .await?;
    row.untaint_all.push(at - repaired);
    wait_counts(counts, "every GpuReady=True", LONG_WAIT, |c| {
        c.condition_true == n
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    row.cpu_untaint_phase.push(ctl.cpu() - cpu1);
    if round == 0 {
        row.writes_untaint_phase = diff(&sample(ctl.port).writes, &tainted);
        row.etcd_growth_burst = etcd_db_bytes(env).saturating_sub(db_before);
    }
    eprintln!("[{n}] gpuready: untainted all in {:.1?}", at - repaired);
    Ok(())
}
