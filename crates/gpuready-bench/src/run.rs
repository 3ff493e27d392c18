//! One fleet size from start to end: the fleet built, then each phase in turn
//! on one control plane, each filling its part of the [`Row`]. Out of
//! `main.rs` so the binary's root only reads arguments and prints the table.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuready::controller::Metrics;
use gpuready::controller::requests;
use gpuready_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::sync::watch;

use crate::args::Args;
use crate::controller::{Controller, diff, repo_root, restart, sample};
use crate::error::Error;
use crate::observe::{self, Counts, LONG_WAIT, wait_counts};
use crate::rounds::{Side, floor_round, gpuready_round};
use crate::row::Row;
use crate::server::{node_bytes, quiet_server, server_memory, tuning};
use crate::stats::percentile;
use crate::{dra, fault, fleet, floor, join, process, startup};

/// Every phase of one fleet size, measured in order into one [`Row`].
pub async fn bench(n: usize, args: &Args, bin: &Path) -> Result<Row, Error> {
    let mut row = Row {
        nodes: n,
        ..Row::default()
    };
    let env = build_fleet(n, args, &mut row).await?;
    if args.setup_only {
        row.mem_end = server_memory(&env);
        return Ok(row);
    }
    let admin = env.client()?;
    if args.faults > 0 {
        fault::prepare(&admin).await?;
    }
    let floor_client = floor_alone(&env, args, n, &mut row).await?;

    // From here on, the floor is timed the way gpuready is: by the observer's
    // watch, which runs (on the same cores, against the same API server) during
    // every phase, until it sees every node tainted, then untainted.
    let (mut counts, observer) = observe::start(admin.clone());
    wait_counts(
        &mut counts,
        "the observer lists every node",
        LONG_WAIT,
        |c| c.nodes == n,
    )
    .await?;
    let mut run = Run {
        n,
        args,
        bin,
        env,
        admin,
        floor_client,
        counts,
    };
    run.phases(&mut row).await?;
    row.mem_end = server_memory(&run.env);
    observer.abort();
    Ok(row)
}

/// Starts the control plane, creates the fleet, and measures the API server
/// with it: start-up again with the fleet in etcd, a full paged LIST, memory.
pub async fn build_fleet(n: usize, args: &Args, row: &mut Row) -> Result<TestEnv, Error> {
    let mut env = TestEnv::start_with(&tuning()).await?;
    row.server_start_empty = env.startup_time();
    let admin = env.client()?;
    fleet::install_crd(&admin, &repo_root()).await?;
    fleet::apply_profile(&admin, "999.0").await?;
    let started = Instant::now();
    let taint = args
        .startup_tainted
        .then_some(gpuready_api::keys::DEFAULT_TAINT_KEY);
    fleet::create_nodes(&admin, n, args.setup_concurrency, taint).await?;
    row.create = started.elapsed();
    row.node_bytes_created = node_bytes(&admin, &fleet::node_name(0)).await?;
    eprintln!("[{n}] {n} nodes created in {:.1?}", row.create);
    drop(admin);

    let began = Instant::now();
    env.restart_apiserver().await?;
    let admin = env.client()?;
    let nodes: Api<Node> = Api::all(admin.clone());
    nodes.list_metadata(&ListParams::default().limit(1)).await?;
    row.server_restart_with_fleet = began.elapsed();
    let began = Instant::now();
    let mut params = ListParams::default().limit(500);
    let mut listed = 0;
    loop {
        let page = nodes.list(&params).await?;
        listed += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    row.server_list_all = began.elapsed();
    row.mem_created = server_memory(&env);
    eprintln!(
        "[{n}] API server: ready again with the fleet in {:.1?}, listed {listed} nodes in {:.1?}; RSS kube-apiserver {:.0} MiB, etcd {:.0} MiB",
        row.server_restart_with_fleet,
        row.server_list_all,
        row.mem_created.apiserver.0 as f64 / 1024.0,
        row.mem_created.etcd.0 as f64 / 1024.0
    );
    Ok(env)
}

/// The bench's own CPU seconds (the floor client runs in it).
fn self_cpu() -> f64 {
    process::cpu_seconds(std::process::id())
}

/// The floor, at gpuready's client settings, timed by its client alone (no
/// watch on the fleet yet); returns that client for the later phases.
async fn floor_alone(env: &TestEnv, args: &Args, n: usize, row: &mut Row) -> Result<Client, Error> {
    let limiter = requests::limiter(args.client_qps, args.client_burst);
    let floor_client =
        requests::limited_client(env.config(), Arc::new(Metrics::default()), limiter)?;
    let cpu0 = self_cpu();
    let t = floor::run(&floor_client, usize::from(args.concurrency), true).await?;
    row.floor_taint = t.elapsed;
    let u = floor::run(&floor_client, usize::from(args.concurrency), false).await?;
    row.floor_untaint = u.elapsed;
    row.floor_writes = t.writes + u.writes;
    row.floor_cpu = self_cpu() - cpu0;
    eprintln!(
        "[{n}] floor: taint {:.1?}, untaint {:.1?} ({} conflicts)",
        t.elapsed,
        u.elapsed,
        t.conflicts + u.conflicts
    );
    Ok(floor_client)
}

/// What every phase after the fleet's creation works with.
struct Run<'a> {
    n: usize,
    args: &'a Args,
    bin: &'a Path,
    env: TestEnv,
    admin: Client,
    /// The floor's client, at gpuready's client settings.
    floor_client: Client,
    counts: watch::Receiver<Counts>,
}

impl Run<'_> {
    /// The phases in the order the table reads them; gpuready's controller
    /// passes from one to the next (stopped while the floor writes, started
    /// again when gpuready's turn comes).
    async fn phases(&mut self, row: &mut Row) -> Result<(), Error> {
        let ctl = self.startup_pairs(row).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        row.node_bytes_ready = node_bytes(&self.admin, &fleet::node_name(0)).await?;
        let ctl = self.rounds(ctl, row).await?;
        self.single_changes(&ctl, row).await?;
        self.at_rest(&ctl, row).await?;
        if self.args.faults > 0 {
            let rounds = usize::from(self.args.fault_rounds);
            row.faults = Some(
                fault::phase(
                    &self.admin,
                    &mut self.counts,
                    self.n,
                    self.args.faults,
                    rounds,
                )
                .await?,
            );
        }
        let ctl = self.join_storms(Some(ctl), row).await?;
        let ctl = if self.args.dra_updates > 0 {
            let ctl = self.controller(ctl).await?;
            let (env, admin, floor) = (&mut self.env, &self.admin, &self.floor_client);
            let dra =
                dra::phase(ctl, env, admin, floor, &mut self.counts, self.args, self.n).await?;
            row.dra = Some(dra);
            None
        } else {
            ctl
        };
        if self.args.first_taint_probe {
            self.first_taint_probe(ctl, row).await?;
        } else {
            drop(ctl);
        }
        Ok(())
    }

    /// The running controller, or one started again and settled.
    async fn controller(&self, ctl: Option<Controller>) -> Result<Controller, Error> {
        match ctl {
            Some(c) => Ok(c),
            None => restart(self.bin, &self.env, self.args, self.n).await,
        }
    }

    /// Start-up pairs, alternating which half goes first and ending with
    /// gpuready's, whose controller the rest of the run goes on with.
    async fn startup_pairs(&mut self, row: &mut Row) -> Result<Option<Controller>, Error> {
        let (n, args) = (self.n, self.args);
        fleet::apply_profile(&self.admin, "570.0").await?;
        let pairs = usize::from(args.startup_repeats);
        let mut ctl = None;
        let mut fleet_fresh = true;
        for pair in 0..pairs {
            let order = Side::ending_with_gpuready(pair, pairs);
            for side in order {
                match side {
                    Side::Floor => {
                        drop(ctl.take());
                        let half = startup::floor_half(
                            &self.floor_client,
                            &self.env,
                            args,
                            &mut self.counts,
                            n,
                        )
                        .await?;
                        row.startup_floor.push(half);
                    }
                    Side::Gpuready => {
                        drop(ctl.take());
                        if !fleet_fresh {
                            startup::forget(&self.admin, args, &mut self.counts, n).await?;
                        }
                        let (c, run) =
                            startup::gpuready_half(self.bin, &self.env, args, &mut self.counts, n)
                                .await?;
                        row.startup.push(run);
                        ctl = Some(c);
                        fleet_fresh = false;
                    }
                }
            }
        }
        Ok(ctl)
    }

    /// The fleet-wide rounds. They alternate which side goes first (…;
    /// gpuready, floor; floor, gpuready): the API server on a small machine
    /// speeds up and slows down over minutes, and a side always run first or
    /// last would carry that drift. The last round ends with gpuready, so the
    /// process measured at rest below has been through a burst. gpuready is
    /// stopped while the floor writes (it would judge every floor taint) and
    /// started again, and left to settle, before its next phase.
    async fn rounds(
        &mut self,
        mut ctl: Option<Controller>,
        row: &mut Row,
    ) -> Result<Controller, Error> {
        let (n, args) = (self.n, self.args);
        let rounds = usize::from(args.repeats);
        for round in 0..rounds {
            let order = Side::ending_with_gpuready(round, rounds);
            for side in order {
                match side {
                    Side::Floor => {
                        drop(ctl.take());
                        floor_round(&self.floor_client, args, &mut self.counts, n, row).await?;
                    }
                    Side::Gpuready => {
                        let c = self.controller(ctl.take()).await?;
                        gpuready_round(&c, &self.env, &self.admin, &mut self.counts, n, round, row)
                            .await?;
                        row.channels_storm = sample(c.port).channels;
                        ctl = Some(c);
                    }
                }
            }
        }
        self.controller(ctl).await
    }

    /// Single-node changes: a label flips the product, gpuready taints; back,
    /// untaints.
    async fn single_changes(&mut self, ctl: &Controller, row: &mut Row) -> Result<(), Error> {
        let (n, args) = (self.n, self.args);
        let node = fleet::node_name(n / 2);
        let mut reactions = Vec::new();
        let perf = match &args.perf {
            Some(dir) => Some(
                Command::new("perf")
                    .args(["record", "-F", "499", "--call-graph", "dwarf,16384", "-o"])
                    .arg(dir.join(format!("perf-{n}.data")))
                    .args(["-p", &ctl.pid().to_string()])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()?,
            ),
            None => None,
        };
        let cpu2 = ctl.cpu();
        for _ in 0..args.flips {
            for (product, want_tainted) in [
                ("NVIDIA-Bench-Other", true),
                (gpuready_testenv::rtx3090::PRODUCT, false),
            ] {
                if let Some(d) = self.flip(&node, product, want_tainted).await? {
                    reactions.push(d);
                }
            }
        }
        let flips = (2 * args.flips).max(1) as f64;
        row.cpu_per_change_ms = (ctl.cpu() - cpu2) * 1000.0 / flips;
        if let Some(mut perf) = perf {
            // SIGINT, so perf writes its file out (a kill would leave it unreadable).
            let _ = Command::new("kill")
                .args(["-INT", &perf.id().to_string()])
                .status();
            let _ = perf.wait();
        }
        reactions.sort();
        row.reaction_p50 = percentile(&reactions, 0.50);
        row.reaction_p99 = percentile(&reactions, 0.99);
        Ok(())
    }

    /// One single-node change: the product label set, until the observer
    /// sees the node's taint and condition follow; the taint's reaction time.
    async fn flip(
        &mut self,
        node: &str,
        product: &str,
        want_tainted: bool,
    ) -> Result<Option<Duration>, Error> {
        let sent = Instant::now();
        set_product(&self.admin, node, product).await?;
        wait_counts(
            &mut self.counts,
            "the single node reacts",
            Duration::from_secs(60),
            |c| {
                c.state.get(node).is_some_and(|s| {
                    s.tainted == want_tainted && s.gpu_ready == Some(!want_tainted)
                })
            },
        )
        .await?;
        // The taint is what protects workloads: its change is what counts
        // (the condition may follow later, after the gate's quiet period).
        let seen = self.counts.borrow().taint_changed.get(node).copied();
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(seen.map(|at| at.saturating_duration_since(sent)))
    }

    /// gpuready at rest: the converged fleet, nothing changing.
    async fn at_rest(&self, ctl: &Controller, row: &mut Row) -> Result<(), Error> {
        tokio::time::sleep(Duration::from_secs(3)).await;
        // One scrape each side: the request count and the kinds cover the same window.
        let before = sample(ctl.port);
        let rest = Instant::now();
        let rest_cpu0 = ctl.cpu();
        tokio::time::sleep(Duration::from_secs(self.args.rest_seconds)).await;
        row.rest_cpu = ctl.cpu() - rest_cpu0;
        let after = sample(ctl.port);
        row.rest_window = rest.elapsed();
        row.rest_writes = process::write_requests(&diff(&after.requests, &before.requests));
        row.rest_writes_by_kind = diff(&after.writes, &before.writes);
        row.rest_series = after.series;
        row.channels_rest = after.channels;
        (row.rss_rest_kib, row.rss_peak_kib) = process::rss_kib(ctl.pid());
        Ok(())
    }

    /// The join storms. Each storm's two sides back to back, alternating
    /// which goes first, so the API server's drift over minutes falls on
    /// both.
    async fn join_storms(
        &mut self,
        mut ctl: Option<Controller>,
        row: &mut Row,
    ) -> Result<Option<Controller>, Error> {
        let (n, args) = (self.n, self.args);
        let storms = args.storms();
        if let Some(&largest) = storms.iter().max() {
            join::warm_up(
                &self.admin,
                &mut self.counts,
                n,
                largest,
                args.setup_concurrency,
            )
            .await?;
        }
        for (k, &j) in storms.iter().enumerate() {
            let order = if k % 2 == 0 {
                [Side::Gpuready, Side::Floor]
            } else {
                [Side::Floor, Side::Gpuready]
            };
            let mut storm = join::JoinRow::default();
            let mut floor_side = join::JoinSide::default();
            for side in order {
                match side {
                    Side::Gpuready => {
                        let c = self.controller(ctl.take()).await?;
                        quiet_server(&self.env).await;
                        storm = join::gpuready_storm(
                            &c,
                            &self.admin,
                            &mut self.counts,
                            n,
                            j,
                            args.setup_concurrency,
                        )
                        .await?;
                        ctl = Some(c);
                    }
                    Side::Floor => {
                        drop(ctl.take());
                        quiet_server(&self.env).await;
                        floor_side = join::floor_storm(
                            &self.floor_client,
                            &self.admin,
                            &mut self.counts,
                            n,
                            j,
                            usize::from(args.concurrency),
                            args.setup_concurrency,
                        )
                        .await?;
                    }
                }
            }
            storm.floor = floor_side;
            row.joins.push(storm);
        }
        Ok(ctl)
    }

    /// `--first-taint-probe`: one more profile change breaks every node and
    /// only its first taint is timed; gpuready is stopped still tainting.
    async fn first_taint_probe(
        &mut self,
        ctl: Option<Controller>,
        row: &mut Row,
    ) -> Result<(), Error> {
        let n = self.n;
        let ctl = self.controller(ctl).await?;
        let broke = Instant::now();
        fleet::apply_profile(&self.admin, "999.0").await?;
        let first = wait_counts(&mut self.counts, "a node tainted", LONG_WAIT, |c| {
            c.tainted > 0
        })
        .await?;
        row.first_taint.push(first - broke);
        eprintln!(
            "[{n}] gpuready: first taint seen {:.0?} after the profile change (probe)",
            first - broke
        );
        drop(ctl);
        Ok(())
    }
}

/// Sets one node's product label (a single-node change).
async fn set_product(client: &Client, node: &str, product: &str) -> Result<(), Error> {
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({ "metadata": { "labels": { "nvidia.com/gpu.product": product } } }),
            ),
        )
        .await?;
    Ok(())
}
