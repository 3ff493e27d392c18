//! One evidence source's per-node index, and what its watch has established:
//! the data the evidence watches keep, apart from the tasks that keep it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::RwLock;

/// One source's entries, per node, by object key, and the reverse map: for
/// each object, its resourceVersion and the nodes it names (one
/// ComputeDomainClique names many nodes). An update or deletion touches only
/// the nodes the object named or names, and a re-list only the nodes of the
/// objects that differ: the work of a change is O(what changed), never a walk
/// of the index.
#[derive(Debug)]
pub(super) struct Index<T> {
    pub(super) by_node: BTreeMap<String, BTreeMap<String, T>>,
    nodes_of: BTreeMap<String, Named>,
    /// Entries in all, kept as they come and go (the DeviceTaintRule gauge
    /// reads it after every change).
    entries: usize,
}

/// What the reverse map keeps of one object.
#[derive(Debug, Default, PartialEq, Eq)]
struct Named {
    /// The object's resourceVersion (`None` if the server sent none): equal
    /// at a re-list means the same object, so its nodes are not re-queued.
    version: Option<String>,
    nodes: BTreeSet<String>,
}

impl<T> Default for Index<T> {
    fn default() -> Self {
        Index {
            by_node: BTreeMap::new(),
            nodes_of: BTreeMap::new(),
            entries: 0,
        }
    }
}

impl<T> Index<T> {
    /// The object `key`, at resourceVersion `version`, now has these entries
    /// (none: it is gone, or names no node). Returns every node whose entries
    /// changed: those it named before and those it names now.
    pub(super) fn put(
        &mut self,
        key: &str,
        version: Option<String>,
        entries: Vec<(String, T)>,
    ) -> BTreeSet<String> {
        let mut touched = self.nodes_of.remove(key).unwrap_or_default().nodes;
        for n in &touched {
            if let Some(objs) = self.by_node.get_mut(n) {
                if objs.remove(key).is_some() {
                    self.entries -= 1;
                }
                if objs.is_empty() {
                    self.by_node.remove(n);
                }
            }
        }
        let mut now = BTreeSet::new();
        for (n, e) in entries {
            if self
                .by_node
                .entry(n.clone())
                .or_default()
                .insert(key.to_owned(), e)
                .is_none()
            {
                self.entries += 1;
            }
            now.insert(n);
        }
        touched.extend(now.iter().cloned());
        if !now.is_empty() {
            self.nodes_of.insert(
                key.to_owned(),
                Named {
                    version,
                    nodes: now,
                },
            );
        }
        touched
    }

    /// Entries in all.
    pub(super) fn len(&self) -> usize {
        self.entries
    }

    /// The nodes whose entries differ between `self` (before a re-list) and
    /// `fresh` (the re-list): the nodes of every object added, removed, or at
    /// another resourceVersion. One pass over both objects' maps, as the
    /// re-list's LIST is one pass over the objects; an unchanged object
    /// re-queues nothing.
    pub(super) fn changed_in(&self, fresh: &Index<T>) -> BTreeSet<String> {
        let mut touched = BTreeSet::new();
        for (key, was) in &self.nodes_of {
            if fresh.nodes_of.get(key) != Some(was) {
                touched.extend(was.nodes.iter().cloned());
            }
        }
        for (key, now) in &fresh.nodes_of {
            if self.nodes_of.get(key) != Some(now) {
                touched.extend(now.nodes.iter().cloned());
            }
        }
        touched
    }
}

/// What a source's watch has established.
#[derive(Debug)]
pub(super) enum SourceState<T> {
    /// Not listed yet.
    Pending,
    /// The API is not served (or not readable): "not read".
    Absent,
    Synced(Index<T>),
}

/// The entries of `node` in a synced source; `None` while it is not read.
pub(super) fn read<T: Clone>(state: &RwLock<SourceState<T>>, node: &str) -> Option<Vec<T>> {
    match &*state.read().ok()? {
        SourceState::Synced(idx) => Some(
            idx.by_node
                .get(node)
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default(),
        ),
        SourceState::Pending | SourceState::Absent => None,
    }
}

#[cfg(test)]
mod tests;
