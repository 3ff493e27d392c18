//! gpuready's pure readiness engine: Node → facts → per-layer verdict → planned
//! node changes. Synchronous, no client, no clock: time is an input.

// Inputs, bottom up: values and tables, then what the Node, GFD, the
// evidence beyond the Node and the probe report say.
pub mod clique_groups;
pub mod compat;
mod duration;
pub mod evidence;
pub mod facts;
pub mod field;
pub mod gfd;
pub mod neighbours;
pub mod probe;
pub mod product;
pub mod repair;
pub mod version;
pub mod write_ledger;
pub mod write_step;

// Judgements over the inputs: which profile governs a node, the per-device and
// per-layer verdicts (one file per layer under `evaluate`), the report's words.
pub mod devices;
pub mod evaluate;
pub mod group_peers;
pub mod lifecycle;
pub mod recovery;
pub mod report;
pub mod select;
pub mod wide_rules;

// What follows from a judgement: the node changes, the safety brake, the
// node book (ledger, brakes, refusals), the tallies and profile status, and
// the NFD CRD repair.
pub mod assess;
pub mod brake;
pub mod event_budget;
pub mod nfd_crds;
pub mod no_execute;
pub mod node_book;
pub mod plan;
pub mod status;
pub mod tally;

// Time: a node's open wait for readiness (`clocks`) and the record it closes
// into, with the figures profile status reads (`timeline`).
pub mod clocks;
pub mod timeline;

pub use evaluate::health;

pub use assess::{GovernanceKind, Judgement, NodeAssessment, assess, judge};
pub use evaluate::evaluate;
pub use evidence::{Evidence, Source};
pub use facts::NodeFacts;
pub use plan::{ConditionChange, NodeChanges, PlanOptions, TaintChange, TaintChangeKind};
pub use report::{LayerReport, LayerResult, Status};
