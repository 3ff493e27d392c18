//! Tests of `repair`, in their own file beside it.

use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().expect("time")
}

#[test]
fn times_and_per_gpu_objects_parse_and_bad_ones_are_refused_with_why() {
    let now = t("2026-12-01T12:00:00Z");
    let created = Some(t("2026-11-01T00:00:00Z"));
    let all = parse("2026-12-01T10:00:00Z", created, now).expect("time");
    assert_eq!(all.all, Some(t("2026-12-01T10:00:00Z")));
    let per = parse(r#"{"GPU-a": "2026-12-01T10:00:00Z"}"#, created, now).expect("json");
    assert_eq!(per.gpus.len(), 1);
    // A minute of skew is tolerated; more is the future.
    assert!(parse("2026-12-01T12:00:30Z", created, now).is_ok());
    for (value, why) in [
        ("2026-12-02T10:00:00Z", "in the future"),
        ("2026-10-01T10:00:00Z", "before the node was created"),
        ("yesterday", "not an RFC 3339 time"),
        ("{}", "names no GPU"),
        (r#"{"gpu-3": "2026-12-01T10:00:00Z"}"#, "not a GPU UUID"),
        (r#"{"GPU-a": "2027-01-01T00:00:00Z"}"#, "in the future"),
        (r#"["GPU-a"]"#, "not an RFC 3339 time"),
    ] {
        let e = parse(value, created, now).expect_err(value);
        assert!(e.contains(why), "{value}: {e}");
    }
}
