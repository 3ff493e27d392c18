//! What the controller reads and keeps: the node cache (pruned and packed),
//! the profile watch, the evidence beside the nodes, the probe reports, the
//! `fabric.groupByLabel` groups, the verdicts judged from them, and anyone's
//! DeviceTaintRules that evict across the cluster. Nothing
//! in this room writes to the API server but the profile watch's own
//! "cannot read" status.

pub mod cached;
pub mod evidence;
pub mod evidence_follow;
pub mod evidence_index;
pub mod groups;
pub mod initial_list;
pub mod probe_reports;
pub mod profiles;
pub mod prune;
pub mod verdicts;
pub mod watched;
pub mod wide_rules;
