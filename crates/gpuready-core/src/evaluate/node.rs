//! The Node layer: kubelet's `Ready` condition.

use super::verdict::{Verdict, not_ready, ready, unknown};
use crate::facts::{ConditionStatus, NodeFacts};

pub(super) fn node_layer(facts: &NodeFacts) -> Verdict {
    let k = &facts.kubelet;
    let detail = if k.message.is_empty() {
        String::new()
    } else {
        format!(": {}", k.message)
    };
    match k.status {
        ConditionStatus::True => ready("KubeletReady", "kubelet reports Ready"),
        ConditionStatus::False => not_ready(
            "KubeletNotReady",
            format!("kubelet reports NotReady{detail}"),
        ),
        ConditionStatus::Unknown => unknown(
            "KubeletStatusUnknown",
            format!("kubelet stopped posting status{detail}"),
        ),
        ConditionStatus::Missing => unknown(
            "KubeletStatusUnknown",
            "the node has no Ready condition yet",
        ),
    }
}
