//! The node cache's groups for `fabric.groupByLabel` (the core's
//! `GroupIndex`): kept in step with every node event, so a node's verdict can
//! read its peers' cliques without a scan of the fleet, and a change of a
//! node re-queues only the nodes of its groups. The label keys indexed follow
//! the profiles: a reconcile that finds them changed rebuilds the index from
//! the cache once.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};

use gpuready_api::GpuNodeProfile;
use gpuready_core::NodeFacts;
use gpuready_core::clique_groups::{CliqueGroup, GroupIndex};
use gpuready_core::group_peers::{group_keys, read_group};
use kube::core::Selector;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use kube::{Resource, ResourceExt};

use super::cached::CachedNode;
use crate::controller::mailbox::RequeueSender;

/// The index, and the nodes a re-list has listed so far.
#[derive(Default)]
pub struct Groups {
    inner: Mutex<(GroupIndex, Option<BTreeSet<String>>)>,
}

impl Groups {
    fn lock(&self) -> MutexGuard<'_, (GroupIndex, Option<BTreeSet<String>>)> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A node watch event, after the cache took it: the index follows, and
    /// the other nodes of every group the change touched are re-queued. A
    /// re-list drops the nodes it no longer lists (a deletion missed during a
    /// watch gap sends no Delete).
    pub fn on_event(&self, event: &Event<CachedNode>, requeue: &RequeueSender) {
        let touched = {
            let mut guard = self.lock();
            let (index, relisted) = &mut *guard;
            if index.keys().is_empty() {
                return;
            }
            match event {
                Event::Apply(n) | Event::InitApply(n) => {
                    if let (Event::InitApply(_), Some(seen)) = (event, relisted.as_mut()) {
                        seen.insert(n.name_any());
                    }
                    index.update(&n.name_any(), n.labels().into_iter().flat_map(|l| l.iter()))
                }
                Event::Delete(n) => index.remove(&n.name_any()),
                Event::Init => {
                    *relisted = Some(BTreeSet::new());
                    Vec::new()
                }
                Event::InitDone => {
                    let seen = relisted.take().unwrap_or_default();
                    let gone: Vec<String> = index
                        .nodes()
                        .filter(|n| !seen.contains(*n))
                        .map(str::to_owned)
                        .collect();
                    gone.iter().flat_map(|n| index.remove(n)).collect()
                }
            }
        };
        for n in touched {
            requeue.requeue(&n);
        }
    }

    /// The node's group as the Fabric layer reads it (`None` when its profile
    /// groups nothing). Rebuilds the index first when the profiles' label
    /// keys changed: under the lock, so a node event cannot slip between the
    /// cache scan and the new keys.
    pub fn group_of(
        &self,
        facts: &NodeFacts,
        profiles: &[(&GpuNodeProfile, &Selector)],
        nodes: &Store<CachedNode>,
    ) -> Option<CliqueGroup> {
        let keys = group_keys(profiles.iter().map(|(p, _)| *p));
        if keys.is_empty() && self.lock().0.keys().is_empty() {
            return None;
        }
        let mut guard = self.lock();
        let index = &mut guard.0;
        if *index.keys() != keys {
            let all = nodes.state();
            index.rebuild(
                keys,
                all.iter().map(|n| {
                    (
                        n.meta().name.as_deref().unwrap_or_default(),
                        n.labels().into_iter().flat_map(|l| l.iter()),
                    )
                }),
            );
        }
        // The peers' labels from the cache: a group is a rack (18 nodes of
        // an NVL72), so this is small; the store's own lock is never held
        // while this one is taken (node events take it after the cache).
        read_group(facts, profiles, |key, value| {
            index
                .members(key, value)
                .filter_map(|n| {
                    let labels = nodes.get(&ObjectRef::new(n))?.labels()?.to_map();
                    Some((n.to_owned(), labels))
                })
                .collect::<Vec<_>>()
        })
    }
}
