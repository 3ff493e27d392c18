//! Which GpuNodeProfile governs a node: exactly one, none, or a conflict.

use std::collections::BTreeMap;

use gpuready_api::GpuNodeProfile;
use kube_core::{ResourceExt, Selector, SelectorExt};

/// The outcome of matching a node's labels against every profile's selector.
#[derive(Debug)]
pub enum Governance<'a> {
    /// No profile selects the node.
    Ungoverned,
    Governed(&'a GpuNodeProfile),
    /// Several profiles select the node; gpuready leaves it as it is.
    Conflict(Vec<String>),
}

/// A profile whose selector cannot be parsed (an unknown operator, say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GpuNodeProfile {profile}: spec.nodeSelector: {message}")]
pub struct SelectorError {
    pub profile: String,
    pub message: String,
}

/// A parsed selector per profile, built once per profile generation.
pub fn profile_selector(profile: &GpuNodeProfile) -> Result<Selector, SelectorError> {
    Selector::try_from(profile.spec.node_selector.clone()).map_err(|e| SelectorError {
        profile: profile.name_any(),
        message: e.to_string(),
    })
}

/// Matches a node against profiles (with their parsed selectors). Profiles being
/// deleted are not considered: their nodes are released.
pub fn govern<'a>(
    labels: &BTreeMap<String, String>,
    profiles: &[(&'a GpuNodeProfile, &Selector)],
) -> Governance<'a> {
    let matched: Vec<&GpuNodeProfile> = profiles
        .iter()
        .filter(|(p, _)| p.metadata.deletion_timestamp.is_none())
        .filter(|(_, sel)| sel.matches(labels))
        .map(|(p, _)| *p)
        .collect();
    match matched.as_slice() {
        [] => Governance::Ungoverned,
        [one] => Governance::Governed(one),
        many => {
            let mut names: Vec<String> = many.iter().map(|p| p.name_any()).collect();
            names.sort();
            Governance::Conflict(names)
        }
    }
}
