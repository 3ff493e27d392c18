//! Tests of `status`, in their own file beside it.

use super::*;

/// A selector that reads a key another profile's readyLabels sets is named
/// on the profile; an independent one, or its own readyLabels, is not.
#[test]
fn a_selector_reading_another_profiles_ready_label_is_reported() {
    let profile =
        |name: &str, spec: serde_json::Value| -> std::sync::Arc<gpuready_api::GpuNodeProfile> {
            std::sync::Arc::new(
                serde_json::from_value(serde_json::json!({
                    "apiVersion": "gpuready.io/v1alpha1", "kind": "GpuNodeProfile",
                    "metadata": { "name": name }, "spec": spec,
                }))
                .expect("profile"),
            )
        };
    let gold = profile(
        "gold",
        serde_json::json!({ "nodeSelector": { "matchLabels": { "pool": "a" } },
            "readyLabels": { "example.com/tier": "gold" } }),
    );
    let by_tier = profile(
        "by-tier",
        serde_json::json!({ "nodeSelector": { "matchExpressions": [
            { "key": "example.com/tier", "operator": "In", "values": ["gold"] }] } }),
    );
    let all = vec![gold.clone(), by_tier.clone()];
    let why = selector_feedback(&by_tier, &all).expect("reported");
    assert!(
        why.contains("example.com/tier") && why.contains("gold"),
        "{why}"
    );
    assert_eq!(selector_feedback(&gold, &all), None);
    // Issue 32: a profile that reads the label only on nodes the setter
    // can never govern works as written: not reported.
    for (name, selector) in [
        (
            "pool-b",
            serde_json::json!({ "matchLabels": { "pool": "b", "example.com/tier": "gold" } }),
        ),
        (
            "not-a",
            serde_json::json!({ "matchExpressions": [
            { "key": "pool", "operator": "NotIn", "values": ["a"] },
            { "key": "example.com/tier", "operator": "Exists" }] }),
        ),
        (
            "no-pool",
            serde_json::json!({ "matchExpressions": [
            { "key": "pool", "operator": "DoesNotExist" },
            { "key": "example.com/tier", "operator": "In", "values": ["gold"] }] }),
        ),
    ] {
        let p = profile(name, serde_json::json!({ "nodeSelector": selector }));
        let all = vec![gold.clone(), p.clone()];
        assert_eq!(selector_feedback(&p, &all), None, "{name}");
    }
    // ... but one that may meet the setter's nodes is.
    let overlapping = profile(
        "pool-in",
        serde_json::json!({ "nodeSelector": { "matchExpressions": [
            { "key": "pool", "operator": "In", "values": ["a", "b"] },
            { "key": "example.com/tier", "operator": "NotIn", "values": ["gold"] }] } }),
    );
    let all = vec![gold.clone(), overlapping.clone()];
    assert!(selector_feedback(&overlapping, &all).is_some());
}

#[test]
fn an_invalid_profile_is_ready_false_and_stalled() {
    let profile: gpuready_api::GpuNodeProfile = serde_json::from_value(serde_json::json!({
        "apiVersion": "gpuready.io/v1alpha1", "kind": "GpuNodeProfile",
        "metadata": { "name": "p", "generation": 2 },
        "spec": { "nodeSelector": { "matchExpressions": [
            { "key": "pool", "operator": "In" }] } },
    }))
    .expect("profile");
    let why = profile_problem(&profile).expect("invalid");
    assert!(why.contains("needs at least one value"), "{why}");
    let now = Timestamp::UNIX_EPOCH;
    let base = profile_status("p", Some(2), &[], &ExtraConditions::default(), None, now);
    let s = mark_invalid(base, &why, Some(2), None, now);
    let get = |t: &str| s.conditions.iter().find(|c| c.type_ == t).expect(t);
    assert_eq!(get("Ready").status, "False");
    assert_eq!(get("Ready").reason, "InvalidProfile");
    assert_eq!(get("Stalled").status, "True");
    assert_eq!(get("Stalled").reason, "InvalidProfile");
    assert_eq!(
        s.conditions.iter().filter(|c| c.type_ == "Ready").count(),
        1
    );
}
