//! Tests of `evidence_index`, in their own file beside it.

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
