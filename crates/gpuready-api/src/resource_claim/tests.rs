//! Tests of `resource_claim`, in their own file beside it.

use super::*;
use serde_json::json;

/// A claim as the scheduler writes one for `nvidia.com/gpu: 1`.
fn claim() -> ResourceClaim {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "trainer-0-extended-resources-x7k2p",
            "namespace": "ml",
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "trainer-0",
                                 "uid": "u1", "controller": true}]
        },
        "spec": {"devices": {"requests": [{"name": "container-0-request-0",
            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}},
        "status": {
            "allocation": {"devices": {"results": [{"request": "container-0-request-0",
                "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-3"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "trainer-0", "uid": "u1"}]
        }
    }))
    .expect("claim parses")
}

#[test]
fn reads_the_schedulers_claim() {
    let c = claim();
    assert!(c.is_extended_resource_claim());
    assert_eq!(c.allocated()[0].device, "gpu-3");
    assert_eq!(c.pods(), ["ml/trainer-0"]);
    assert_eq!(c.allocated_node(), Some("node-a"));
    let mut unreserved = c.clone();
    if let Some(s) = unreserved.status.as_mut() {
        s.reserved_for.clear();
    }
    assert_eq!(unreserved.pods(), ["ml/trainer-0"], "the owner stands in");
    let mut plain = c;
    plain.metadata.annotations = None;
    assert!(!plain.is_extended_resource_claim());
}

#[test]
fn tolerations_follow_kubernetes_rules() {
    let t = |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| {
        DeviceToleration {
            key: key.map(str::to_owned),
            operator: op.map(str::to_owned),
            value: value.map(str::to_owned),
            effect: effect.map(str::to_owned),
        }
    };
    let k = "gpuready.io/device-not-ready";
    let v = Some("FatalXid");
    assert!(t(None, Some("Exists"), None, None).tolerates(k, v, "NoExecute"));
    assert!(!t(None, None, None, None).tolerates(k, v, "NoExecute"));
    assert!(t(Some(k), Some("Exists"), None, Some("NoExecute")).tolerates(k, v, "NoExecute"));
    assert!(!t(Some(k), Some("Exists"), None, Some("NoSchedule")).tolerates(k, v, "NoExecute"));
    assert!(t(Some(k), None, v, None).tolerates(k, v, "NoExecute"));
    assert!(!t(Some(k), Some("Equal"), Some("Other"), None).tolerates(k, v, "NoExecute"));
    assert!(!t(Some("other"), Some("Exists"), None, None).tolerates(k, v, "NoExecute"));
}
