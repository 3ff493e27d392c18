//! Tests of `evidence`, in their own file beside it.

use super::*;

fn claim(pod: &str, devices: &[&str], extended: bool) -> ResourceClaim {
    let results: Vec<serde_json::Value> = devices
        .iter()
        .map(|d| serde_json::json!({"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": d}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{pod}-extended-resources-x"), "namespace": "ml",
            "annotations": if extended {
                serde_json::json!({"resource.kubernetes.io/extended-resource-claim": "true"})
            } else { serde_json::json!({}) }},
        "status": {"allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": "u"}]}
    }))
    .expect("claim")
}

fn key(device: &str) -> DeviceKey {
    ("gpu.nvidia.com".into(), "n1".into(), device.into())
}

#[test]
fn only_extended_resource_claims_on_wanted_devices_are_kept_one_entry_per_node() {
    let wanted: BTreeSet<DeviceKey> = [key("gpu-3"), key("gpu-5")].into();
    // Two wanted devices of one claim: one entry for the node, both holds.
    let kept = holds_on(&claim("p", &["gpu-3", "gpu-5", "gpu-6"], true), &wanted);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].0, "n1", "the pool names the node");
    let devices: Vec<&str> = kept[0].1.iter().map(|h| h.device.as_str()).collect();
    assert_eq!(devices, ["gpu-3", "gpu-5"]);
    assert!(holds_on(&claim("p", &["gpu-6"], true), &wanted).is_empty());
    assert!(
        holds_on(&claim("p", &["gpu-3"], false), &wanted).is_empty(),
        "a pod's own claim"
    );
    assert!(holds_on(&claim("p", &["gpu-3"], true), &BTreeSet::new()).is_empty());
}

#[tokio::test]
async fn the_claim_watch_lists_again_only_when_a_device_joins() {
    let (tx, rx) = watch::channel(BTreeSet::from([key("gpu-3")]));
    let relist = Arc::new(Notify::new());
    let stop = CancellationToken::new();
    let task = tokio::spawn(relist_on_growth(rx, relist.clone(), stop.clone()));
    let asked = |ms| {
        let r = relist.clone();
        async move {
            tokio::time::timeout(Duration::from_millis(ms), r.notified())
                .await
                .is_ok()
        }
    };
    // A device leaves: nothing to list.
    tx.send_replace(BTreeSet::new());
    assert!(!asked(RELIST_DELAY.as_millis() as u64 + 500).await);
    // Two join at once: one list, after the delay.
    tx.send_replace(BTreeSet::from([key("gpu-3"), key("gpu-4")]));
    assert!(asked(RELIST_DELAY.as_millis() as u64 + 2000).await);
    assert!(!asked(300).await, "asked once");
    stop.cancel();
    task.await.expect("task ends");
}
