//! The `gpuready` command: `check`, `crd`, and (in-cluster) `run`.

mod check;
mod input;

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Tells, node by node and layer by layer, whether a GPU node is really ready.
#[derive(Debug, Parser)]
#[command(name = "gpuready", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Judge nodes against GpuNodeProfiles and print every layer's verdict.
    ///
    /// Exit code: 0 when every governed node is ready, 1 when one is not (or is
    /// in conflict), 2 for input that cannot be used.
    Check(check::CheckArgs),
    /// Print the GpuNodeProfile CRD generated from gpuready's types.
    Crd {
        /// Write the committed copies in the repository instead of printing.
        #[arg(long)]
        write: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => run_check(&args),
        Command::Crd { write } => run_crd(write),
    }
}

fn run_check(args: &check::CheckArgs) -> ExitCode {
    if args.nodes.is_empty() {
        eprintln!("error: --nodes FILE is required (live cluster mode is not available in this build)");
        return ExitCode::from(2);
    }
    let report = match check::check_files(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match check::render(&report, args.output) {
        Ok(text) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
        Err(e) => {
            eprintln!("error: rendering the report: {e}");
            return ExitCode::from(2);
        }
    }
    if report.summary.governed + report.summary.conflicts == 0 {
        eprintln!("warning: no GpuNodeProfile selects any of these nodes; check the profiles' nodeSelector");
    }
    ExitCode::from(report.exit_code())
}

fn run_crd(write: bool) -> ExitCode {
    let yaml = match gpuready_api::crd::to_yaml(&[gpuready_api::crd::gpu_node_profile_crd()]) {
        Ok(y) => y,
        Err(e) => {
            eprintln!("error: rendering the CRD: {e}");
            return ExitCode::from(2);
        }
    };
    if !write {
        print!("{yaml}");
        return ExitCode::SUCCESS;
    }
    for rel in gpuready_api::crd::COMMITTED_GPUREADY_CRD_PATHS {
        if let Err(e) = std::fs::write(rel, &yaml) {
            eprintln!("error: {rel}: {e} (run from the repository root)");
            return ExitCode::from(2);
        }
        eprintln!("wrote {rel}");
    }
    ExitCode::SUCCESS
}
