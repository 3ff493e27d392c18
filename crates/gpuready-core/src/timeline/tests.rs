//! Tests of `timeline`, in their own file beside it.

use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().expect("time")
}

fn join(seconds: u64, steps: &[(Step, u64)]) -> ReadyRecord {
    ReadyRecord {
        kind: EpisodeKind::Join,
        started: t("2026-12-07T00:00:00Z"),
        seconds,
        steps: steps.iter().copied().collect(),
    }
}

#[test]
fn the_annotation_reads_back_as_written() {
    let r = join(
        300,
        &[
            (Step::Layer(Layer::Node), 0),
            (Step::Layer(Layer::Driver), 120),
            (Step::Gates, 300),
        ],
    );
    let text = r.to_string();
    assert_eq!(
        text,
        "kind=join started=2026-12-07T00:00:00Z seconds=300 Node=0 Driver=120 Gates=300"
    );
    assert_eq!(ReadyRecord::parse(&text), Some(r));
}

#[test]
fn anything_else_is_ignored_and_unknown_steps_are_skipped() {
    assert_eq!(ReadyRecord::parse("hello"), None);
    assert_eq!(ReadyRecord::parse("kind=join seconds=3"), None);
    assert_eq!(
        ReadyRecord::parse("kind=join started=2026-12-07T00:00:00Z seconds=x"),
        None
    );
    let r = ReadyRecord::parse("kind=fault started=2026-12-07T00:00:00Z seconds=5 Later=3")
        .expect("parses");
    assert!(r.steps.is_empty());
}

#[test]
fn the_longest_hold_is_the_gap_before_a_step() {
    let r = join(
        9,
        &[
            (Step::Layer(Layer::Node), 0),
            (Step::Layer(Layer::Driver), 3),
            (Step::Layer(Layer::DevicePlugin), 6),
            (Step::Layer(Layer::FeatureDiscovery), 9),
            (Step::Layer(Layer::Profile), 9),
        ],
    );
    assert_eq!(
        r.longest_hold(),
        Some((Step::Layer(Layer::Driver), 3)),
        "the first of equal holds"
    );
    assert_eq!(
        r.describe(),
        "join of 9s (from 2026-12-07T00:00:00Z to 2026-12-07T00:00:09Z): Node +0s, Driver +3s, DevicePlugin +6s, FeatureDiscovery +9s, Profile +9s; held longest by Driver (3s)"
    );
}

#[test]
fn percentiles_are_nearest_rank_over_the_windows_joins() {
    let now = t("2026-12-07T12:00:00Z");
    let mut records: Vec<ReadyRecord> = (1..=10)
        .map(|i| join(i * 10, &[(Step::Layer(Layer::Driver), i * 10)]))
        .collect();
    records.push(ReadyRecord {
        kind: EpisodeKind::Fault,
        ..join(5000, &[])
    });
    let mut old = join(9999, &[]);
    old.started = t("2026-12-05T00:00:00Z");
    records.push(old);
    let joins: Vec<JoinTime> = records.iter().filter_map(ReadyRecord::join_time).collect();
    let got = time_to_ready(&joins, now, STATUS_WINDOW_SECONDS).expect("joins");
    assert_eq!(
        got,
        TimeToReady {
            joins: 10,
            p50_seconds: 50,
            p90_seconds: 90,
            max_seconds: 100,
            slowest_step: Some(Step::Layer(Layer::Driver)),
        }
    );
    assert_eq!(
        time_to_ready(&joins[10..], now, STATUS_WINDOW_SECONDS),
        None
    );
}
