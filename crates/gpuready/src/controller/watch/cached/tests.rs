//! Tests of `cached`, in their own file beside it.

use super::*;
use gpuready_core::NodeFacts;

fn assert_same_facts(n: &Node) {
    let cached = CachedNode::from_node(n.clone());
    let expanded = cached.to_node();
    let name = n.metadata.name.as_deref().unwrap_or_default();
    assert_eq!(
        NodeFacts::from_node(&expanded),
        NodeFacts::from_node(n),
        "{name}: facts"
    );
    let mut pruned = n.clone();
    prune_node(&mut pruned);
    assert_eq!(node_relevance(&expanded), node_relevance(&pruned), "{name}");
    assert_eq!(Some(cached.relevance()), node_relevance(&pruned), "{name}");
    // The cheap check never misses a label the facts say gpuready wrote
    // (the profile → node mapping falls back to the facts on it).
    let facts = NodeFacts::from_node(n);
    let own_domain = facts
        .labels
        .keys()
        .filter(|k| gpuready_api::validate::is_owned_key(k));
    for k in facts.owned.labels.iter().chain(own_domain) {
        assert!(cached.may_have_written_label(k), "{name}: {k}");
    }
    // A second round trip changes nothing.
    let again = CachedNode::from_node(expanded.clone()).to_node();
    assert_eq!(again, expanded, "{name}: round trip");
    assert_eq!(kube::ResourceExt::name_any(&cached), name);
    assert_eq!(
        kube::ResourceExt::resource_version(&cached),
        n.metadata.resource_version
    );
}

#[test]
fn the_prune_tests_full_node_keeps_its_facts() {
    assert_same_facts(&super::super::prune::tests::full_node());
}

#[test]
fn every_example_clusters_node_keeps_its_facts() {
    for item in super::super::prune::tests::example_nodes() {
        let node: Node = serde_json::from_value(item).expect("node");
        assert_same_facts(&node);
    }
}

#[test]
fn the_packed_map_finds_every_key_and_no_other() {
    let m = BTreeMap::from([
        ("a".to_owned(), "1".to_owned()),
        (
            "nvidia.com/gpu.product".to_owned(),
            "NVIDIA-A100".to_owned(),
        ),
        ("pool".to_owned(), String::new()),
        ("z".to_owned(), "last".to_owned()),
    ]);
    let p = PackedMap::from_map(&m);
    assert_eq!(p.len(), 4);
    for (k, v) in &m {
        assert_eq!(p.get(k), Some(v.as_str()), "{k}");
    }
    for k in ["", "b", "nvidia.com/gpu", "zz"] {
        assert_eq!(p.get(k), None, "{k}");
    }
    assert_eq!(p.to_map::<String>(), m);
    let empty = PackedMap::from_map::<String>(&BTreeMap::new());
    assert!(empty.is_empty() && empty.get("a").is_none());
    assert_eq!(PackedMap::default().iter().count(), 0);
}

#[test]
fn labels_gpuready_may_have_written_are_its_domain_and_its_annotation() {
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "n1",
            "labels": {"pool.example.com/ready": "true", "pool": "a", "gpuready.io/profile": "p"},
            "annotations": {"gpuready.io/labels": "pool.example.com/ready,gpuready.io/profile"}
        }
    }))
    .expect("node");
    let cached = CachedNode::from_node(node);
    assert!(cached.may_have_written_label("pool.example.com/ready"));
    assert!(cached.may_have_written_label("gpuready.io/anything"));
    assert!(!cached.may_have_written_label("pool"));
    assert!(!cached.may_have_written_label("pool.example.com/read"));
}
