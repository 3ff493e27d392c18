//! Tests of `clock_metrics`, in their own file beside it.

use super::*;

#[test]
fn a_profile_has_a_fixed_number_of_series_and_they_go_with_it() {
    let mut registry = Registry::default();
    let m = ClockMetrics::register(&mut registry);
    m.start("p");
    m.start("p");
    let text = || {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encodes");
        out
    };
    let series = |t: &str| t.lines().filter(|l| !l.starts_with('#')).count();
    // 4 kinds × (18 buckets + +Inf + sum + count), 11 steps × 21, 2 sources × 15.
    assert_eq!(series(&text()), 4 * 21 + 11 * 21 + 2 * 15);
    let r =
        ReadyRecord::parse("kind=join started=2026-12-07T00:00:00Z seconds=95 Node=0 Driver=61")
            .expect("record");
    m.observe_wait("p", &r);
    m.observe_gate("p", GateSource::Probe, 0.2);
    let t = text();
    assert!(
        t.contains(r#"time_to_ready_seconds_bucket{le="120.0",profile="p",kind="join"} 1"#),
        "{t}"
    );
    assert!(t.contains(r#"layer_ready_seconds_bucket{le="90.0",profile="p",layer="Driver"} 1"#));
    assert!(t.contains(r#"time_to_gate_seconds_bucket{le="0.25",profile="p",source="probe"} 1"#));
    m.retain(|_| false);
    assert_eq!(series(&text()), 0);
}
