//! The fault → gate rows (`--faults M`): on the converged fleet, the bench
//! acts as the probe of M nodes and publishes a report with a fatal XID
//! (XID 79, the GPU fell off the bus) exactly as the probe does (its
//! ConfigMap, one server-side apply), timed until the observer's watch sees
//! gpuready's taint on the node — one node at a time, then all M at once.
//! The floor is the bench's own taint written on the same nodes, seen through
//! the same watch: what gating costs once the decision is made. Each fault is
//! undone by a report without the XID, seen untainted before the next.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use gpuready::probe::publish::publish;
use gpuready_api::probe::{
    EccState, EventKind, EventLog, EventRecord, GpuState, NvmlState, PROBE_REPORT_API_VERSION,
    ProbeReport, RowRemapping,
};
use gpuready_testenv::rtx3090;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

use crate::error::Error;
use crate::observe::{Counts, LONG_WAIT, wait_counts};
use crate::stats::{percentile, ratio};
use crate::{fleet, floor};

/// Where the bench publishes the reports (gpuready's `--probe-namespace`).
pub const NAMESPACE: &str = "gpuready-bench-probe";

/// The XID of every fault: in the default fatal list.
const XID: u64 = 79;

/// How long one node may take to be gated or released.
const ONE_NODE: Duration = Duration::from_secs(60);

/// Fault → gate of one kind of phase, per fault: from the write sent and
/// from the write returned until the watch saw the gate.
#[derive(Clone, Debug, Default)]
pub struct Times {
    pub from_sent: Vec<Duration>,
    pub from_returned: Vec<Duration>,
}

impl Times {
    fn push(&mut self, sent: Instant, returned: Instant, seen: Instant) {
        self.from_sent.push(seen.saturating_duration_since(sent));
        self.from_returned
            .push(seen.saturating_duration_since(returned));
    }

    /// `p50 / p99 / max` in milliseconds, from the write returned and, in
    /// parentheses, from it sent.
    pub fn cell(&self) -> String {
        let q = |v: &[Duration]| {
            let mut v = v.to_vec();
            v.sort();
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            format!(
                "{:.0} / {:.0} / {:.0}",
                ms(percentile(&v, 0.50)),
                ms(percentile(&v, 0.99)),
                ms(v.last().copied().unwrap_or_default())
            )
        };
        if self.from_returned.is_empty() {
            return "–".into();
        }
        format!(
            "{} ms ({} ms from sent; {} faults)",
            q(&self.from_returned),
            q(&self.from_sent),
            self.from_returned.len()
        )
    }

    /// The p99 from the write returned, or from it sent.
    pub fn p99(&self, from_sent: bool) -> Duration {
        let mut v = if from_sent {
            self.from_sent.clone()
        } else {
            self.from_returned.clone()
        };
        v.sort();
        percentile(&v, 0.99)
    }
}

/// The fault → gate rows of one fleet size.
#[derive(Clone, Debug, Default)]
pub struct FaultRow {
    pub faults: usize,
    pub rounds: usize,
    pub single: Times,
    pub single_floor: Times,
    pub burst: Times,
    pub burst_floor: Times,
    /// The M reports without the XID written at once, until every node was
    /// untainted and GpuReady=True again (each round).
    pub restore: Vec<Duration>,
}

/// Creates the reports' namespace (before gpuready starts: it watches it).
pub async fn prepare(admin: &Client) -> Result<(), Error> {
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE },
    }))?;
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// The report the probe publishes on node `i` (an RTX 3090 agreeing with the
/// node's GFD labels), with XID 79 recorded when `fault`.
fn report(i: usize, fault: bool) -> ProbeReport {
    let now = jiff::Timestamp::now().to_string();
    let uuid = format!("GPU-{i:08x}-0000-4000-8000-{i:012x}");
    let records = if fault {
        vec![EventRecord {
            gpu: uuid.clone(),
            kind: EventKind::Xid,
            xid: Some(XID),
            count: 1,
            first_seen: now.clone(),
            last_seen: now.clone(),
        }]
    } else {
        Vec::new()
    };
    ProbeReport {
        api_version: PROBE_REPORT_API_VERSION.into(),
        node: Some(fleet::node_name(i)),
        generated_at: now,
        probe_started_at: "2026-12-07T00:00:00Z".into(),
        probe_version: env!("CARGO_PKG_VERSION").into(),
        nvml: NvmlState {
            usable: true,
            library: Some("libnvidia-ml.so.1".into()),
            ..NvmlState::default()
        },
        driver_version: Some(rtx3090::DRIVER.into()),
        cuda_driver_version: Some(rtx3090::CUDA.into()),
        device_count: Some(1),
        gpus: vec![GpuState {
            index: 0,
            uuid: Some(uuid),
            name: Some(rtx3090::NVML_NAME.into()),
            memory_mib: Some(rtx3090::MEMORY_MIB.into()),
            compute_capability: Some("8.6".into()),
            ecc: Some(EccState::default()),
            row_remapping: Some(RowRemapping::default()),
            ..GpuState::default()
        }],
        events: EventLog {
            monitored: true,
            records,
            ..EventLog::default()
        },
        ..ProbeReport::default()
    }
}

/// Publishes node `i`'s report; returns when the write was sent and when it
/// returned.
async fn put_report(client: &Client, i: usize, fault: bool) -> Result<(Instant, Instant), Error> {
    let r = report(i, fault);
    let sent = Instant::now();
    publish(client, NAMESPACE, &fleet::node_name(i), &r)
        .await
        .map_err(|e| Error::Other(e.to_string()))?;
    Ok((sent, Instant::now()))
}

/// Puts the floor's taint on node `i` (or takes it off): one merge patch of
/// its taint list, which holds nothing else on a ready node. Returns when the
/// write was sent and when it returned.
async fn put_floor_taint(client: &Client, i: usize, on: bool) -> Result<(Instant, Instant), Error> {
    let taints = if on {
        json!([{ "key": floor::FLOOR_TAINT, "value": "fault", "effect": "NoSchedule" }])
    } else {
        serde_json::Value::Null
    };
    let sent = Instant::now();
    Api::<Node>::all(client.clone())
        .patch(
            &fleet::node_name(i),
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "taints": taints } })),
        )
        .await?;
    Ok((sent, Instant::now()))
}

/// Which side writes: gpuready's gate (a report) or the floor's (a taint).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gate {
    Gpuready,
    Floor,
}

impl Gate {
    async fn write(self, client: &Client, i: usize, on: bool) -> Result<(Instant, Instant), Error> {
        match self {
            Gate::Gpuready => put_report(client, i, on).await,
            Gate::Floor => put_floor_taint(client, i, on).await,
        }
    }

    fn on(self, c: &Counts, node: &str) -> bool {
        c.state.get(node).is_some_and(|s| match self {
            Gate::Gpuready => s.tainted,
            Gate::Floor => s.floor_tainted,
        })
    }

    /// Released: for gpuready also ready again, so the next fault starts from
    /// a converged node.
    fn off(self, c: &Counts, node: &str) -> bool {
        c.state.get(node).is_some_and(|s| match self {
            Gate::Gpuready => !s.tainted && s.gpu_ready == Some(true),
            Gate::Floor => !s.floor_tainted,
        })
    }

    fn changed(self, c: &Counts, node: &str) -> Option<Instant> {
        let m = match self {
            Gate::Gpuready => &c.taint_changed,
            Gate::Floor => &c.floor_taint_changed,
        };
        m.get(node).copied()
    }
}

/// The M nodes faulted: spread over the fleet.
fn chosen(n: usize, m: usize) -> Vec<usize> {
    (0..m).map(|k| k * n / m.max(1)).collect()
}

/// One node at a time: gated, timed, released.
async fn one_at_a_time(
    gate: Gate,
    client: &Client,
    counts: &mut watch::Receiver<Counts>,
    nodes: &[usize],
    times: &mut Times,
) -> Result<(), Error> {
    for &i in nodes {
        let name = fleet::node_name(i);
        let (sent, returned) = gate.write(client, i, true).await?;
        wait_counts(counts, "the faulted node gated", ONE_NODE, |c| {
            gate.on(c, &name)
        })
        .await?;
        if let Some(seen) = gate.changed(&counts.borrow(), &name) {
            times.push(sent, returned, seen);
        }
        gate.write(client, i, false).await?;
        wait_counts(counts, "the faulted node released", ONE_NODE, |c| {
            gate.off(c, &name)
        })
        .await?;
    }
    Ok(())
}

/// Every node at once (one write each, all in flight): each timed from its
/// own write. Returns how long the release of all of them took.
async fn all_at_once(
    gate: Gate,
    client: &Client,
    counts: &mut watch::Receiver<Counts>,
    nodes: &[usize],
    times: &mut Times,
) -> Result<Duration, Error> {
    let writes = |on: bool| {
        futures::stream::iter(nodes.iter().copied())
            .map(move |i| async move { Ok::<_, Error>((i, gate.write(client, i, on).await?)) })
            .buffer_unordered(nodes.len().max(1))
            .try_collect::<HashMap<usize, (Instant, Instant)>>()
    };
    let names: Vec<String> = nodes.iter().map(|&i| fleet::node_name(i)).collect();
    let written = writes(true).await?;
    wait_counts(counts, "every faulted node gated", LONG_WAIT, |c| {
        names.iter().all(|n| gate.on(c, n))
    })
    .await?;
    {
        let c = counts.borrow();
        for (i, (sent, returned)) in &written {
            if let Some(seen) = gate.changed(&c, &fleet::node_name(*i)) {
                times.push(*sent, *returned, seen);
            }
        }
    }
    let began = Instant::now();
    writes(false).await?;
    let at = wait_counts(counts, "every faulted node released", LONG_WAIT, |c| {
        names.iter().all(|n| gate.off(c, n))
    })
    .await?;
    Ok(at - began)
}

/// The fault rows on the converged fleet of `n` (gpuready running with
/// `--probe-namespace` [`NAMESPACE`]); the reports are deleted at the end,
/// so they cannot go stale under later phases.
pub async fn phase(
    admin: &Client,
    counts: &mut watch::Receiver<Counts>,
    n: usize,
    m: usize,
    rounds: usize,
) -> Result<FaultRow, Error> {
    let nodes = chosen(n, m.min(n));
    let mut row = FaultRow {
        faults: nodes.len(),
        rounds,
        ..FaultRow::default()
    };
    for round in 0..rounds {
        // Alternating which side goes first: the API server drifts.
        let order = if round % 2 == 0 {
            [Gate::Gpuready, Gate::Floor]
        } else {
            [Gate::Floor, Gate::Gpuready]
        };
        for gate in order {
            let times = match gate {
                Gate::Gpuready => &mut row.single,
                Gate::Floor => &mut row.single_floor,
            };
            one_at_a_time(gate, admin, counts, &nodes, times).await?;
        }
        for gate in order {
            match gate {
                Gate::Gpuready => {
                    let r = all_at_once(gate, admin, counts, &nodes, &mut row.burst).await?;
                    row.restore.push(r);
                }
                Gate::Floor => {
                    all_at_once(gate, admin, counts, &nodes, &mut row.burst_floor).await?;
                }
            }
        }
        eprintln!(
            "[{n}] faults, round {}: one at a time {}; {} at once {}; floor {} / {}",
            round + 1,
            row.single.cell(),
            nodes.len(),
            row.burst.cell(),
            row.single_floor.cell(),
            row.burst_floor.cell()
        );
    }
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), NAMESPACE);
    cms.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    // Judged without a report again: nothing to write, but let it settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    wait_counts(
        counts,
        "every node ready after the faults",
        LONG_WAIT,
        |c| c.tainted == 0 && c.condition_true == n,
    )
    .await?;
    Ok(row)
}

/// The ratios: gpuready from the report's write returned (the probe's part
/// done), the floor from its write sent (a gate written and seen, the least
/// any gate costs once decided).
const RATIO_ONE: &str = "fault → gate, one node at a time: gpuready from the report written ÷ floor from its taint sent (p99)";
const RATIO_ALL: &str = "fault → gate, M nodes at once: gpuready from the report written ÷ floor from its taint sent (p99)";

/// The table's rows, each cell read from one fleet size's [`FaultRow`].
pub fn rows(line: &mut impl FnMut(&str, &dyn Fn(&FaultRow) -> String)) {
    line(
        "fault → gate, one node at a time: gpuready, report with XID 79 written → taint seen, p50 / p99 / max",
        &|f| f.single.cell(),
    );
    line(
        "fault → gate, one node at a time: floor, the bench's own taint written → seen",
        &|f| f.single_floor.cell(),
    );
    line(RATIO_ONE, &|f| {
        ratio(f.single.p99(false), f.single_floor.p99(true))
    });
    line(
        "fault → gate, M nodes at once: gpuready, report with XID 79 written → taint seen, p50 / p99 / max",
        &|f| format!("M = {}, {} rounds: {}", f.faults, f.rounds, f.burst.cell()),
    );
    line(
        "fault → gate, M nodes at once: floor, the bench's own taints written → seen",
        &|f| f.burst_floor.cell(),
    );
    line(RATIO_ALL, &|f| {
        ratio(f.burst.p99(false), f.burst_floor.p99(true))
    });
    line(
        "fault → gate, M nodes at once: reports without the XID → every node untainted and GpuReady=True (each round)",
        &|f| {
            let each: Vec<String> = f
                .restore
                .iter()
                .map(|d| format!("{:.2}", d.as_secs_f64()))
                .collect();
            format!("{} s", each.join(", "))
        },
    );
}
