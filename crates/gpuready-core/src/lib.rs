//! gpuready's pure readiness engine: Node → facts → per-layer verdict → planned
//! node changes. Synchronous, no client, no clock: time is an input.

pub mod assess;
pub mod brake;
pub mod compat;
pub mod devices;
pub mod evaluate;
pub mod evidence;
pub mod facts;
pub mod health;
pub mod nfd_crds;
pub mod plan;
pub mod product;
pub mod select;
pub mod status;
pub mod tally;
pub mod version;
pub mod write_step;

pub use assess::{GovernanceKind, Judgement, NodeAssessment, assess, judge};
pub use evaluate::{LayerReport, LayerResult, Status, evaluate};
pub use evidence::{Evidence, Source};
pub use facts::NodeFacts;
pub use plan::{ConditionChange, NodeChanges, PlanOptions, TaintChange, TaintChangeKind};
