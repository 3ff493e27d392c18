//! Tests of `metrics`, in their own file beside it.

use super::*;
use crate::controller::error::Error;

fn not_ready(node: &str, reason: &str) -> NodeNotReady {
    NodeNotReady {
        profile: "p".into(),
        node: node.into(),
        mode: "Enforce".into(),
        state: "not_ready".into(),
        layer: "DevicePlugin".into(),
        reason: reason.into(),
    }
}

fn lines(m: &Metrics) -> Vec<String> {
    m.encode()
        .lines()
        .filter(|l| l.starts_with("gpuready_node_"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn node_series_follow_the_tally_and_go_when_their_profile_goes() {
    let m = Metrics::default();
    let series = |nodes: &[(&str, &str)]| NodeSeries {
        not_ready: nodes.iter().map(|(n, r)| not_ready(n, r)).collect(),
        ..NodeSeries::default()
    };
    m.set_node_series(
        "p",
        series(&[("a", "DevicesUnhealthy"), ("b", "NoGfdLabels")]),
    );
    assert_eq!(lines(&m).len(), 2, "{:?}", lines(&m));
    // b repaired, a's reason changed: b's series goes, a's old one too.
    m.set_node_series("p", series(&[("a", "DriverTooOld")]));
    let now = lines(&m);
    assert_eq!(now.len(), 1, "{now:?}");
    assert!(
        now[0].contains("node=\"a\"") && now[0].contains("DriverTooOld"),
        "{now:?}"
    );
    m.retain_node_series(|p| p != "p");
    assert!(lines(&m).is_empty(), "{:?}", lines(&m));
}

#[test]
fn error_and_retry_counters_start_at_zero() {
    let text = Metrics::default().encode();
    for kind in Error::KINDS {
        assert!(
            text.contains(&format!(
                "gpuready_reconcile_errors_total{{kind=\"{kind}\"}} 0"
            )),
            "{text}"
        );
    }
    assert!(text.contains("gpuready_api_retryable_responses_total{code=\"429\"} 0"));
}
