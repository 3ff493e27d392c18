//! A node's planned writes in words: the `would:` line of the table, one
//! phrase per kind of change.

use gpuready_core::NodeAssessment;

/// The planned writes in words, one phrase per kind of change — exactly what
/// `gpuready run` would send for this node.
pub(super) fn describe_changes(a: &NodeAssessment) -> Vec<String> {
    use gpuready_api::keys;
    use gpuready_core::TaintChangeKind;
    let c = &a.changes;
    let mut out = Vec::new();
    let taint_text = |t: &k8s_openapi::api::core::v1::Taint| {
        format!(
            "{}={}:{}",
            t.key,
            t.value.as_deref().unwrap_or(""),
            t.effect
        )
    };
    if let Some(t) = &c.taint {
        let ours = t.ours.as_ref().map(taint_text).unwrap_or_default();
        out.push(match t.kind {
            TaintChangeKind::Add => format!("add taint {ours}"),
            TaintChangeKind::Replace => format!("replace the readiness taint with {ours}"),
            TaintChangeKind::Remove => "remove the readiness taint".to_owned(),
        });
    }
    if c.taint_held_by_brake {
        out.push("taint held back by the safety brake".to_owned());
    }
    for r in &c.device_taint_rules {
        use gpuready_core::devices::RuleAction;
        let effect = r
            .rule
            .as_ref()
            .map(|r| r.spec.taint.effect.as_str())
            .unwrap_or("");
        out.push(match r.action {
            RuleAction::Create => format!(
                "create DeviceTaintRule {} ({}:{effect}) for device {}",
                r.name,
                r.reason.as_deref().unwrap_or(""),
                r.device
            ),
            RuleAction::Update => format!(
                "update DeviceTaintRule {} ({}:{effect}) for device {}",
                r.name,
                r.reason.as_deref().unwrap_or(""),
                r.device
            ),
            RuleAction::Delete => {
                format!("delete DeviceTaintRule {} (device {})", r.name, r.device)
            }
            RuleAction::Status => {
                let c = r.condition.as_ref();
                format!(
                    "set {}={} ({}) on DeviceTaintRule {}: {}",
                    keys::device_rules::CONDITION_PODS_NOT_EVICTED,
                    c.map(|c| c.status.as_str()).unwrap_or(""),
                    r.reason.as_deref().unwrap_or(""),
                    r.name,
                    r.message.as_deref().unwrap_or("")
                )
            }
        });
    }
    if let Some(ann) = &c.annotations {
        if c.taint.is_none()
            && let Some(Some(held)) = ann.get(keys::ANNOTATION_TAINT)
        {
            out.push(format!("adopt the taint {held} already on the node"));
        }
        if matches!(ann.get(keys::ANNOTATION_RELEASED), Some(Some(_))) {
            out.push("mark the node released (UntilFirstReady)".to_owned());
        }
    }
    if let Some(l) = &c.labels {
        let set: Vec<String> = l
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
            .collect();
        let removed: Vec<&str> = l
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.as_str())
            .collect();
        if !set.is_empty() {
            out.push(format!("set labels {}", set.join(",")));
        }
        if !removed.is_empty() {
            out.push(format!("remove labels {}", removed.join(",")));
        }
    }
    if !c.foreign_labels_left.is_empty() {
        out.push(format!(
            "leave labels {} (set by another writer)",
            c.foreign_labels_left.join(",")
        ));
    }
    if let Some(conds) = &c.conditions {
        if !conds.set.is_empty() {
            let s: Vec<String> = conds
                .set
                .iter()
                .map(|c| format!("{}={}", c.type_, c.status))
                .collect();
            out.push(format!("set condition {}", s.join(", ")));
        }
        if !conds.remove.is_empty() {
            out.push(format!("remove condition {}", conds.remove.join(", ")));
        }
    }
    out
}
