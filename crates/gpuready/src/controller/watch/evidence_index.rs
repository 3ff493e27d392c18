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
mod tests {
    use super::*;

    fn names(s: BTreeSet<String>) -> Vec<String> {
        s.into_iter().collect()
    }

    /// Entries of an object naming these nodes.
    fn on(nodes: &[&str]) -> Vec<(String, u8)> {
        nodes.iter().map(|n| ((*n).to_owned(), 1)).collect()
    }

    fn v(rv: &str) -> Option<String> {
        Some(rv.to_owned())
    }

    #[test]
    fn an_object_naming_many_nodes_touches_exactly_the_nodes_it_named_or_names() {
        let mut idx: Index<u8> = Index::default();
        assert_eq!(
            names(idx.put("ns/clique", v("1"), on(&["a", "b"]))),
            ["a", "b"]
        );
        assert_eq!(names(idx.put("ns/slice", v("2"), on(&["c"]))), ["c"]);
        // b leaves the clique, d joins: a, b and d, never c.
        assert_eq!(
            names(idx.put("ns/clique", v("3"), on(&["a", "d"]))),
            ["a", "b", "d"]
        );
        assert!(!idx.by_node.contains_key("b"));
        assert_eq!(idx.len(), 3);
        // Deleted: the nodes it named last.
        assert_eq!(names(idx.put("ns/clique", None, Vec::new())), ["a", "d"]);
        assert_eq!(idx.by_node.keys().collect::<Vec<_>>(), ["c"]);
        assert_eq!(idx.len(), 1);
        assert!(idx.put("ns/gone", None, Vec::new()).is_empty());
    }

    /// A fleet of slices, one per node, as a DRA driver publishes them.
    fn fleet(n: usize) -> Index<u8> {
        let mut idx = Index::default();
        for i in 0..n {
            let node = format!("node-{i}");
            idx.put(&format!("slice-{i}"), v("1"), on(&[&node]));
        }
        idx
    }

    #[test]
    fn a_slice_added_touches_only_its_node() {
        let mut idx = fleet(1000);
        let touched = idx.put("slice-new", v("5"), on(&["node-7"]));
        assert_eq!(names(touched), ["node-7"]);
        assert_eq!(idx.by_node["node-7"].len(), 2);
        assert_eq!(idx.len(), 1001);
        // Updated in place (a device taint added): its node only, counted once.
        assert_eq!(
            names(idx.put("slice-new", v("6"), on(&["node-7"]))),
            ["node-7"]
        );
        assert_eq!(idx.len(), 1001);
    }

    #[test]
    fn a_slice_moved_to_another_node_touches_the_old_node_and_the_new_one() {
        let mut idx = fleet(1000);
        let touched = idx.put("slice-3", v("2"), on(&["node-900"]));
        assert_eq!(names(touched), ["node-3", "node-900"]);
        assert!(!idx.by_node.contains_key("node-3"));
        assert_eq!(
            idx.by_node["node-900"].keys().collect::<Vec<_>>(),
            ["slice-3", "slice-900"]
        );
        assert_eq!(idx.len(), 1000);
    }

    #[test]
    fn a_slice_deleted_touches_only_its_node() {
        let mut idx = fleet(1000);
        assert_eq!(names(idx.put("slice-42", None, Vec::new())), ["node-42"]);
        assert!(!idx.by_node.contains_key("node-42"));
        assert!(!idx.nodes_of.contains_key("slice-42"));
        assert_eq!(idx.len(), 999);
        // A slice that names no node (not gpuready's, or no nodeName) touches nothing.
        assert!(idx.put("slice-shared", v("1"), Vec::new()).is_empty());
        assert_eq!(idx.len(), 999);
    }

    #[test]
    fn a_relist_touches_only_the_nodes_of_objects_that_differ() {
        let old = fleet(1000);
        let mut fresh = fleet(1000);
        // Unchanged: nothing to re-queue.
        assert!(old.changed_in(&fresh).is_empty());
        // During the gap: slice-1 updated, slice-2 moved to node-3, slice-4
        // deleted, slice-new created on node-5.
        fresh.put("slice-1", v("9"), on(&["node-1"]));
        fresh.put("slice-2", v("9"), on(&["node-3"]));
        fresh.put("slice-4", None, Vec::new());
        fresh.put("slice-new", v("9"), on(&["node-5"]));
        assert_eq!(
            names(old.changed_in(&fresh)),
            ["node-1", "node-2", "node-3", "node-4", "node-5"]
        );
    }
}
