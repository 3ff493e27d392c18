//! `gpuready nfd-crds print | diff | apply`: the NFD CRD reconciler by hand, for
//! people who want to see what gpuready would do to a cluster or act without
//! running the controller (same classification, same field manager).

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use gpuready_api::crd::{nfd_crds, to_yaml};
use gpuready_api::nfd::compare::{self, normalize_crd};
use gpuready_core::nfd_crds::{CrdClass, NfdCrdPlan, plan};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;

use crate::controller::config::parse_duration;
use crate::controller::nfd::{
    self, NfdCrdError, apply_crd, carried, desired, read_installed, read_plan, release_name,
    state_label, wait_established,
};

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
    match read_plan(&api).await {
        Ok(plan) => Ok((api, plan)),
        Err(e) => Err(report(&e)),
    }
}

fn report(e: &NfdCrdError) -> u8 {
    eprintln!("error: {e}\nhint: {}", e.hint());
    EXIT_ERROR
}

/// Every difference between an installed CRD and gpuready's (the plan lists
/// only the first few, for messages), one line each.
pub fn all_changes(installed: &CustomResourceDefinition, name: &str) -> Vec<String> {
    let Some(want) = desired(name) else {
        return Vec::new();
    };
    let normal = |c: &CustomResourceDefinition| {
        serde_json::to_value(c)
            .map(|v| normalize_crd(&v))
            .unwrap_or_default()
    };
    compare::diff(&normal(installed), &normal(&want))
        .iter()
        .map(|d| d.render("installed", "gpuready"))
        .collect()
}

/// The human-readable diff: a header, then one entry per CRD. `installed`
/// gives the full list of changes of older CRDs; without it the plan's
/// shortened list is shown.
pub fn render_diff(plan: &NfdCrdPlan, installed: &[CustomResourceDefinition]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gpuready carries the NFD CRDs of release {}; installed: {}",
        carried(),
        plan.installed_release
            .map_or_else(|| "none recognised".to_owned(), |r| r.to_string())
    );
    for v in &plan.verdicts {
        match &v.class {
            CrdClass::Missing => {
                let _ = writeln!(out, "{}: missing; apply would create it", v.name);
            }
            CrdClass::Older {
                installed_release,
                changes,
            } => {
                let _ = writeln!(
                    out,
                    "{}: older (installed release {}); apply would upgrade it:",
                    v.name,
                    release_name(*installed_release)
                );
                let full = installed
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(v.name.as_str()))
                    .map(|c| all_changes(c, &v.name))
                    .filter(|all| !all.is_empty());
                for c in full.as_ref().unwrap_or(changes) {
                    let _ = writeln!(out, "    {c}");
                }
            }
            CrdClass::Current => {
                let _ = writeln!(out, "{}: current", v.name);
            }
            CrdClass::Newer { reason } => {
                let _ = writeln!(
                    out,
                    "{}: newer than gpuready's; apply leaves it alone: {reason}",
                    v.name
                );
            }
        }
    }
    out
}

async fn diff(args: &ClusterArgs) -> u8 {
    let client = match client(args).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_ERROR;
        }
    };
    let installed = match read_installed(&Api::all(client)).await {
        Ok(i) => i,
        Err(e) => return report(&e),
    };
    let plan = plan(&nfd_crds(), &installed);
    print!("{}", render_diff(&plan, &installed));
    if plan.to_apply().next().is_some() {
        println!(
            "Run `gpuready nfd-crds apply` (or the controller with --nfd-crds=apply) to make these changes."
        );
        EXIT_WOULD_CHANGE
    } else {
        println!("Nothing to do.");
        EXIT_NOTHING_TO_DO
    }
}

async fn apply(args: &ApplyArgs) -> u8 {
    let (api, before) = match cluster_plan(&args.cluster).await {
        Ok(p) => p,
        Err(code) => return code,
    };
    println!(
        "gpuready carries the NFD CRDs of release {}; installed: {}",
        carried(),
        release_name(before.installed_release)
    );
    let mut applied = Vec::new();
    for v in &before.verdicts {
        match &v.class {
            CrdClass::Current => println!("{}: current, nothing to do", v.name),
            CrdClass::Newer { reason } => {
                println!("{}: newer than gpuready's, left alone: {reason}", v.name);
            }
            CrdClass::Missing | CrdClass::Older { .. } => {
                let Some(crd) = desired(&v.name) else {
                    continue;
                };
                let what = if v.class == CrdClass::Missing {
                    "missing, creating".to_owned()
                } else {
                    format!(
                        "older ({}), upgrading",
                        release_name(before.installed_release)
                    )
                };
                println!("{}: {what}", v.name);
                if let Err(e) = apply_crd(&api, &crd).await {
                    return report(&e);
                }
                applied.push(v.name.as_str());
            }
        }
    }
    for name in &applied {
        println!("{name}: waiting until Established");
        if let Err(e) = wait_established(&api, name, args.timeout).await {
            return report(&e);
        }
        println!("{name}: Established");
    }
    // Read back, so "done" means the API server's copy is what gpuready wants.
    let after = match read_plan(&api).await {
        Ok(p) => p,
        Err(e) => return report(&e),
    };
    let still: Vec<String> = after
        .verdicts
        .iter()
        .filter(|v| v.class.needs_apply())
        .map(nfd::describe_verdict)
        .collect();
    if !still.is_empty() {
        eprintln!(
            "error: applied, yet the API server's copy still differs: {} (a mutating admission \
             webhook may be rewriting CRDs; please report this as a gpuready bug)",
            still.join("; ")
        );
        return EXIT_ERROR;
    }
    let summary: Vec<String> = ["missing", "older", "current", "newer"]
        .into_iter()
        .filter_map(|state| {
            let n = before
                .verdicts
                .iter()
                .filter(|v| state_label(&v.class) == state)
                .count();
            let done = match state {
                "missing" => "created",
                "older" => "upgraded",
                "current" => "already current",
                _ => "newer, left alone",
            };
            (n > 0).then(|| format!("{n} {done}"))
        })
        .collect();
    println!("done: {}", summary.join(", "));
    EXIT_NOTHING_TO_DO
}
