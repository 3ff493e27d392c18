//! What gpuready reads back from its own writes to a Node: the resourceVersion
//! the write left, nothing else. The API server answers each PATCH with the
//! whole Node (about 8 KB of JSON with its images and managedFields); decoded
//! into k8s-openapi's `Node`, that was about a tenth of gpuready's CPU in a
//! 10,000-node start-up (docs/performance.md), for one string. Here serde
//! walks past the rest without building it. (Asking the server for the
//! metadata alone, `as=PartialObjectMetadata`, was measured too: it cost the
//! API server more than it saved.)

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use crate::controller::node_resource::node_resource;

/// A Node as a write's answer: its name and new resourceVersion only.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "Answer")]
pub struct WrittenNode {
    metadata: ObjectMeta,
}

/// The answer's shape as serde reads it: every other field is skipped.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    metadata: AnswerMeta,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnswerMeta {
    name: Option<String>,
    resource_version: Option<String>,
}

impl From<Answer> for WrittenNode {
    fn from(a: Answer) -> Self {
        WrittenNode {
            metadata: ObjectMeta {
                name: a.metadata.name,
                resource_version: a.metadata.resource_version,
                ..ObjectMeta::default()
            },
        }
    }
}

// Addressed as the Node it was written to (`Api<WrittenNode>` sends the
// same requests as `Api<Node>`).
node_resource!(WrittenNode, metadata);

#[cfg(test)]
mod tests {
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
}
