//! `gpuready check`: the engine over node dumps or a live cluster (read-only),
//! printed as a table, JSON or YAML. It reads what `gpuready run` reads — the
//! Nodes, profiles, ResourceSlices, NodeFeatures, gpuready's DeviceTaintRules,
//! the DRA driver's ComputeDomainCliques and the probe report ConfigMaps — and
//! hands them to the same engine.
//!
//! This file only names the parts: the flags (`args`), the live reads
//! (`live`), the evidence read beside the Nodes (`extra`), the engine over
//! the nodes (`engine`), the table (`table`, `changes`) and the offline check
//! that spills its report (`spill`).

use jiff::Timestamp;

use crate::input::{self, InputError};

mod args;
mod changes;
mod engine;
mod extra;
mod live;
mod table;

/// The offline check that spills its report as it judges (what `main` runs
/// for `--nodes`); it builds on this module, never the other way round.
pub mod spill;

pub use args::{CheckArgs, Output};
pub(crate) use engine::judge_each;
pub use engine::{CheckReport, Summary, judge, run_engine};
pub(crate) use extra::read_evidence_files_for;
pub use extra::{ExtraEvidence, GroupedNodes};
pub use live::{LiveError, check_cluster, check_live};
pub use table::render_to;
pub(crate) use table::{TableRow, node_details, table_foot, table_head};

/// Offline check over files: profiles and evidence first (a bad profile is
/// reported before a large dump is read), then each node judged as it is read.
pub fn check_files(args: &CheckArgs) -> Result<CheckReport, InputError> {
    let profiles = input::read_all_profiles(&args.profiles)?;
    let extra = read_evidence_files_for(&profiles, args)?;
    judge(
        &profiles,
        &extra,
        args.now.unwrap_or_else(Timestamp::now),
        |each| {
            for n in &args.nodes {
                input::for_each_node(n, &mut *each)?;
            }
            Ok(())
        },
    )
}
