//! `gpuready nfd-crds print | diff | apply`: the NFD CRD reconciler by hand, for
//! people who want to see what gpuready would do to a cluster or act without
//! running the controller (same classification, same field manager).

use std::process::ExitCode;
use std::time::Duration;

use gpuready_api::crd::{nfd_crds, to_yaml};
use gpuready_core::nfd_crds::NfdCrdPlan;
use gpuready_core::nfd_crds::words;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;

use crate::cli::parse_duration;
use crate::nfd_io::{self, NfdCrdError};

/// Exit code of `diff` when the cluster is as gpuready wants it.
pub const EXIT_NOTHING_TO_DO: u8 = 0;
/// Exit code of `diff` when `apply` would create or upgrade a CRD.
pub const EXIT_WOULD_CHANGE: u8 = 1;
/// Exit code for errors (no cluster, no permission, refused apply).
pub const EXIT_ERROR: u8 = 2;

#[derive(Debug, clap::Args)]
pub struct NfdCrdsArgs {
    #[command(subcommand)]
    pub command: NfdCrdsCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum NfdCrdsCommand {
    /// Print the NFD CRDs gpuready carries, as YAML (the same as
    /// deploy/crds/nfd-crds.yaml). Pipe it to `kubectl apply --server-side -f -`
    /// to install them without gpuready, or to `kubectl diff` to compare.
    Print,
    /// Compare the cluster's NFD CRDs with gpuready's, one line per CRD:
    /// missing, older (with what gpuready would change), current, or newer
    /// (left alone, with why). Reads only.
    ///
    /// Exit code: 0 when `apply` has nothing to do (all current, or newer),
    /// 1 when `apply` would create or upgrade a CRD, 2 on errors.
    Diff(ClusterArgs),
    /// Create missing and upgrade older NFD CRDs by server-side apply (field
    /// manager `gpuready`, forced, so an earlier Helm or kubectl install does not
    /// conflict), then wait until they are Established. Never deletes a CRD and
    /// never downgrades one: newer CRDs are left alone. Needs get, list, watch,
    /// patch and create on customresourcedefinitions.
    ///
    /// Exit code: 0 when the CRDs are current (or newer) afterwards, 2 on errors.
    Apply(ApplyArgs),
}

/// The cluster flags, shared with `check` and `run`.
pub use crate::cluster::ClusterArgs;

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// How long each applied CRD may take to become Established.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Runs the subcommand and returns its exit code.
pub fn run(args: NfdCrdsArgs) -> ExitCode {
    match args.command {
        NfdCrdsCommand::Print => print(),
        NfdCrdsCommand::Diff(cluster) => block_on(async move { diff(&cluster).await }),
        NfdCrdsCommand::Apply(apply_args) => block_on(async move { apply(&apply_args).await }),
    }
}

fn block_on(f: impl Future<Output = u8>) -> ExitCode {
    match crate::one_shot_runtime() {
        Some(runtime) => ExitCode::from(runtime.block_on(f)),
        None => ExitCode::from(EXIT_ERROR),
    }
}

fn print() -> ExitCode {
    match to_yaml(&nfd_crds()) {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: rendering the NFD CRDs: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

async fn client(args: &ClusterArgs) -> Result<kube::Client, String> {
    args.client()
        .await
        .map(|(client, _)| client)
        .map_err(|e| e.to_string())
}

async fn cluster_plan(
    args: &ClusterArgs,
) -> Result<(Api<CustomResourceDefinition>, NfdCrdPlan), u8> {
    let client = client(args).await.map_err(|e| {
        eprintln!("error: {e}");
        EXIT_ERROR
    })?;
    let api = Api::all(client);
    match nfd_io::read_plan(&api).await {
        Ok(plan) => Ok((api, plan)),
        Err(e) => Err(report(&e)),
    }
}

fn report(e: &NfdCrdError) -> u8 {
    eprintln!("error: {e}\nhint: {}", e.hint());
    EXIT_ERROR
}

/// The human-readable diff (worded in `gpuready_core::nfd_crds::words`).
pub fn render_diff(plan: &NfdCrdPlan, installed: &[CustomResourceDefinition]) -> String {
    words::render_diff(plan, &nfd_crds(), installed)
}

async fn diff(args: &ClusterArgs) -> u8 {
    let client = match client(args).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_ERROR;
        }
    };
    let read = match nfd_io::read_back(&Api::all(client)).await {
        Ok(r) => r,
        Err(e) => return report(&e),
    };
    print!("{}", render_diff(&read.plan, &read.installed));
    println!("{}", words::diff_closing_line(&read.plan));
    if read.plan.to_apply().next().is_some() {
        EXIT_WOULD_CHANGE
    } else {
        EXIT_NOTHING_TO_DO
    }
}

async fn apply(args: &ApplyArgs) -> u8 {
    let (api, before) = match cluster_plan(&args.cluster).await {
        Ok(p) => p,
        Err(code) => return code,
    };
    println!("{}", words::apply_header(&before));
    let all: Vec<_> = before.verdicts.iter().collect();
    let installed = before.installed_release;
    let after = match nfd_io::apply_and_read_back(&api, &all, args.timeout, |step| {
        if let Some(line) = step.line(installed) {
            println!("{line}");
        }
    })
    .await
    {
        Ok(read) => read.plan,
        Err(e) => return report(&e),
    };
    let still: Vec<_> = after
        .verdicts
        .iter()
        .filter(|v| v.class.needs_apply())
        .collect();
    if !still.is_empty() {
        eprintln!("error: {}", words::still_differs_line(&still));
        return EXIT_ERROR;
    }
    println!("{}", words::done_line(&before));
    EXIT_NOTHING_TO_DO
}
