//! What the rules applied to the assembled report read, in a module of its
//! own: `evaluate` builds it and its rule modules read it, and neither
//! imports the other for it.

use gpuready_api::GpuNodeProfileSpec;
use jiff::Timestamp;

use crate::facts::NodeFacts;

/// What the rules applied to the assembled report read: the profile, the
/// node's (repaired) facts and the time. One argument, so each rule's
/// signature names only what it changes, the report.
pub(super) struct Judged<'a> {
    pub(super) spec: &'a GpuNodeProfileSpec,
    pub(super) facts: &'a NodeFacts,
    pub(super) now: Timestamp,
}
