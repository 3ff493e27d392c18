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
mod tests;
