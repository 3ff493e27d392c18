//! `gpuready-bench`: gpuready at fleet scale against a real kube-apiserver, side
//! by side with a floor client, in one run per fleet size. Prints a markdown
//! table (docs/performance.md explains every row).
//!
//! ```text
//! cargo run --release -p gpuready-bench -- --nodes 1000,5000
//! ```
//!
//! This root only reads the arguments, runs each size ([`run::bench`]) and
//! prints the table; no module imports it back.

mod args;
mod controller;
mod dra;
mod error;
mod fault;
mod fleet;
mod floor;
mod join;
mod observe;
mod process;
mod rounds;
mod row;
mod run;
mod server;
mod startup;
mod stats;
mod table;

use std::path::PathBuf;

use clap::Parser;

use args::Args;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // --setup-only never starts gpuready: no build for it.
    let built = if args.setup_only {
        Ok(PathBuf::new())
    } else {
        controller::gpuready_binary(&args)
    };
    let bin = match built {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut rows = Vec::new();
    for &n in &args.nodes {
        match run::bench(n, &args, &bin).await {
            Ok(r) => rows.push(r),
            Err(e) => {
                eprintln!("error at {n} nodes: {e}");
                return std::process::ExitCode::from(1);
            }
        }
        // Partial results survive a later failure.
        eprintln!("{}", table::table(&rows, &args));
    }
    println!("{}", table::table(&rows, &args));
    std::process::ExitCode::SUCCESS
}
