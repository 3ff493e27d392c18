//! Tests of `written`, in their own file beside it.

use super::*;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

#[test]
fn a_whole_node_answer_reads_as_its_name_and_version() {
    let answer = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-1",
            "resourceVersion": "4242",
            "labels": { "gpuready.io/ready": "true" },
            "managedFields": [{ "manager": "kubelet", "fieldsV1": { "f:status": {} } }],
        },
        "spec": { "taints": [{ "key": "k", "effect": "NoSchedule" }] },
        "status": { "images": [{ "names": ["a", "b"], "sizeBytes": 1 }] },
    });
    let n: WrittenNode = serde_json::from_value(answer).expect("answer");
    assert_eq!(n.name_any(), "gpu-1");
    assert_eq!(n.resource_version().as_deref(), Some("4242"));
    // The address is the Node's.
    assert_eq!(
        <WrittenNode as kube::Resource>::url_path(&(), None),
        <Node as kube::Resource>::url_path(&(), None)
    );
}
