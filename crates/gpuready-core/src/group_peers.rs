//! A node's peers under its profile's `fabric.groupByLabel`: which profile
//! governs the node and the label it groups by, and which of the nodes
//! carrying the same value that profile governs too. Above `clique_groups`
//! (the plain index and rule), because it needs the selection of profiles.

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::GpuNodeProfile;
use gpuready_api::keys::nvidia;
use gpuready_api::validate::is_owned_key;
use kube_core::{ResourceExt, Selector};

use crate::assess::selectable_labels;
use crate::clique_groups::CliqueGroup;
use crate::facts::NodeFacts;
use crate::select::{Governance, govern};

/// The label keys the profiles group nodes by.
pub fn group_keys<'a>(profiles: impl IntoIterator<Item = &'a GpuNodeProfile>) -> BTreeSet<String> {
    profiles
        .into_iter()
        .filter_map(|p| p.spec.fabric.as_ref()?.group_by_label.clone())
        .collect()
}

/// The node's group as the Fabric layer reads it (`Evidence::clique_group`):
/// `None` when its profile groups nothing or the node lacks the label.
/// `candidates(key, value)`: the nodes carrying `key=value` with their labels,
/// from the caller's index.
pub fn read_group<I>(
    facts: &NodeFacts,
    profiles: &[(&GpuNodeProfile, &Selector)],
    candidates: impl FnOnce(&str, &str) -> I,
) -> Option<CliqueGroup>
where
    I: IntoIterator<Item = (String, BTreeMap<String, String>)>,
{
    let (p, key, value) = group_of(facts, profiles)?;
    let found = candidates(&key, &value);
    Some(clique_group(&facts.name, p, &key, &value, found, profiles))
}

/// The profile governing the node, when it groups nodes by a label the node
/// carries: the profile, the label key and the node's value of it.
pub fn group_of<'a>(
    facts: &NodeFacts,
    profiles: &[(&'a GpuNodeProfile, &Selector)],
) -> Option<(&'a GpuNodeProfile, String, String)> {
    let Governance::Governed(p) = govern(&selectable_labels(facts, profiles), profiles) else {
        return None;
    };
    let key = p.spec.fabric.as_ref()?.group_by_label.as_ref()?;
    let value = facts.labels.get(key)?;
    Some((p, key.clone(), value.clone()))
}

/// The group of `node` under `profile`: of the `candidates` (the nodes that
/// carry `label=value`, with their labels), those other than `node` that the
/// same profile governs. A peer's labels are matched without gpuready's own
/// keys, as the node's own are (`selectable_labels`); the `readyLabels` keys
/// gpuready wrote on a peer are not known here, which only matters to a
/// selector naming one, and the CRD refuses those.
pub fn clique_group(
    node: &str,
    profile: &GpuNodeProfile,
    label: &str,
    value: &str,
    candidates: impl IntoIterator<Item = (String, BTreeMap<String, String>)>,
    profiles: &[(&GpuNodeProfile, &Selector)],
) -> CliqueGroup {
    let name = profile.name_any();
    let mut peers = BTreeMap::new();
    for (peer, mut labels) in candidates {
        if peer == node || labels.get(label).map(String::as_str) != Some(value) {
            continue;
        }
        labels.retain(|k, _| !is_owned_key(k));
        if matches!(govern(&labels, profiles), Governance::Governed(p) if p.name_any() == name) {
            peers.insert(peer, labels.remove(nvidia::GPU_CLIQUE));
        }
    }
    CliqueGroup {
        label: label.to_owned(),
        value: value.to_owned(),
        peers,
    }
}
