//! Tests of `wide_rules`, in their own file beside it.

use super::*;
use serde_json::json;

fn rule(name: &str, selector: serde_json::Value, effect: &str) -> DeviceTaintRule {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"deviceSelector": selector, "taint": {"key": "k", "effect": effect}}
    }))
    .expect("rule")
}

#[test]
fn a_relist_replaces_and_updates_add_and_remove() {
    let mut w = WideRules::default();
    w.apply(Event::Init);
    w.apply(Event::InitApply(rule("all", json!({}), "NoExecute")));
    w.apply(Event::InitApply(rule(
        "one",
        json!({"pool": "n", "device": "gpu-0"}),
        "NoExecute",
    )));
    assert!(w.now.is_empty(), "nothing counts before the list is done");
    w.apply(Event::InitDone);
    assert_eq!(w.now.keys().collect::<Vec<_>>(), ["all"]);
    w.apply(Event::Apply(rule(
        "drv",
        json!({"driver": "gpu.nvidia.com"}),
        "NoExecute",
    )));
    assert_eq!(w.now.len(), 2);
    // Narrowed to a pool: no longer wide.
    w.apply(Event::Apply(rule("all", json!({"pool": "n"}), "NoExecute")));
    assert_eq!(w.now.keys().collect::<Vec<_>>(), ["drv"]);
    w.apply(Event::Delete(rule(
        "drv",
        json!({"driver": "gpu.nvidia.com"}),
        "NoExecute",
    )));
    assert!(w.now.is_empty());
    // A re-list drops what went while the watch was down.
    w.apply(Event::Apply(rule("x", json!({}), "NoExecute")));
    w.apply(Event::Init);
    w.apply(Event::InitDone);
    assert!(w.now.is_empty());
}
