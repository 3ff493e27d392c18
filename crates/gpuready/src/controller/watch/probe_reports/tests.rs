//! Tests of `probe_reports`, in their own file beside it.

use super::*;
use std::collections::BTreeMap;

fn cm(report: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("gpuready-probe-n1".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            PROBE_REPORT_DATA_KEY.to_owned(),
            report.to_owned(),
        )])),
        ..Default::default()
    }
}

#[test]
fn heartbeat_alone_is_no_change() {
    let a = cm(r#"{"apiVersion":"v","generatedAt":"2026-11-30T12:00:00Z","gpus":[]}"#);
    let b = cm(r#"{"apiVersion":"v","generatedAt":"2026-11-30T12:01:00Z","gpus":[]}"#);
    let c = cm(r#"{"apiVersion":"v","generatedAt":"2026-11-30T12:01:00Z","gpus":[{"index":0}]}"#);
    assert_eq!(substance(&a), substance(&b));
    assert_ne!(substance(&b), substance(&c));
    assert_eq!(node_of("gpuready-probe-n1").as_deref(), Some("n1"));
    assert_eq!(node_of("other"), None);
}
