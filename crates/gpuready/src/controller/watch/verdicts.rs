//! Verdicts without plans: the profiles with their parsed selectors, and the
//! engine's verdict on one node. The node reconciler judges with these before
//! it plans; the status task's start-up count reads only the verdict and never plans.

use std::sync::Arc;

use gpuready_api::GpuNodeProfile;
use gpuready_core::{NodeAssessment, NodeFacts, judge};
use jiff::Timestamp;
use kube::ResourceExt;
use kube::core::Selector;
use tracing::warn;

/// Profiles with their parsed selectors. A profile whose selector cannot be
/// parsed selects nothing (the schema prevents it; its status says so).
pub fn profiles_with_selectors(
    profiles: &[Arc<GpuNodeProfile>],
) -> Vec<(Arc<GpuNodeProfile>, Selector)> {
    profiles
        .iter()
        .filter_map(|p| match gpuready_core::select::profile_selector(p) {
            Ok(s) => Some((p.clone(), s)),
            Err(e) => {
                warn!(profile = %p.name_any(), error = %e, "ignoring profile with an invalid selector");
                None
            }
        })
        .collect()
}

/// The verdict on one node, with no write planned (`changes` empty): for
/// readers of verdicts such as profile status.
pub fn verdict_of(
    facts: &NodeFacts,
    profiles: &[(Arc<GpuNodeProfile>, Selector)],
    now: Timestamp,
) -> NodeAssessment {
    let pairs: Vec<(&GpuNodeProfile, &Selector)> =
        profiles.iter().map(|(p, s)| (p.as_ref(), s)).collect();
    judge(facts, &pairs, now).verdict
}
