//! Tests of `node`, in their own file beside it.

use super::*;
use gpuready_core::plan::{TaintChange, TaintChangeKind};
use k8s_openapi::api::core::v1::NodeCondition;
use std::collections::BTreeMap;

#[test]
fn the_node_patch_carries_taints_labels_annotations_and_the_version_read() {
    let mut node = Node::default();
    node.metadata.resource_version = Some("41".into());
    let changes = NodeChanges {
        taint: Some(TaintChange {
            taints: vec![],
            kind: TaintChangeKind::Remove,
            ours: None,
        }),
        labels: Some(BTreeMap::from([
            (keys::LABEL_READY.to_owned(), Some("true".to_owned())),
            ("example.com/pool".to_owned(), None),
        ])),
        annotations: Some(BTreeMap::from([(keys::ANNOTATION_TAINT.to_owned(), None)])),
        ..NodeChanges::default()
    };
    let patch = node_patch(&node, &changes).expect("patch");
    assert_eq!(
        patch,
        json!({
            "metadata": {
                "resourceVersion": "41",
                "labels": { "gpuready.io/ready": "true", "example.com/pool": null },
                "annotations": { "gpuready.io/taint": null },
            },
            "spec": { "taints": null },
        })
    );
    // Without a taint change the list is not sent at all.
    let labels_only = NodeChanges {
        taint: None,
        ..changes
    };
    assert!(
        node_patch(&node, &labels_only)
            .expect("patch")
            .get("spec")
            .is_none()
    );
}

#[test]
fn the_condition_patch_names_only_gpureadys_types() {
    let c = ConditionChange {
        set: vec![NodeCondition {
            type_: keys::CONDITION_GPU_READY.into(),
            status: "False".into(),
            ..NodeCondition::default()
        }],
        remove: vec!["GpuReadyDriver".into()],
    };
    let patch = condition_patch(Some("42".into()), &c).expect("patch");
    assert_eq!(
        patch,
        json!({
            "metadata": { "resourceVersion": "42" },
            "status": { "conditions": [
                { "type": "GpuReady", "status": "False" },
                { "type": "GpuReadyDriver", "$patch": "delete" },
            ]},
        })
    );
}
