//! Tests of `config`, in their own file beside it.

use super::*;
use clap::Parser;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn parse(args: &[&str]) -> Result<RunArgs, String> {
    Cli::try_parse_from(std::iter::once("gpuready").chain(args.iter().copied()))
        .map(|c| c.run)
        .map_err(|e| e.to_string())
}

#[test]
fn defaults_parse() {
    let run = parse(&[]).expect("defaults");
    assert_eq!(run.concurrency, 8);
    assert_eq!(
        run.heartbeat,
        Duration::ZERO,
        "off: conditions written on change only"
    );
    assert!((run.brake_threshold - 0.5).abs() < f64::EPSILON);
}

#[test]
fn nonsense_flags_are_refused_with_a_clear_message() {
    for (args, expect) in [
        (
            &["--heartbeat", "5s"][..],
            "the heartbeat (or `off`) must be at least 10s",
        ),
        (&["--heartbeat=-5m"][..], "must not be negative"),
        (
            &["--brake-threshold=-1"][..],
            "must be a share above 0 and at most 1",
        ),
        (&["--brake-threshold", "0"][..], "must be a share above 0"),
        (&["--brake-threshold", "1.5"][..], "at most 1"),
        (&["--brake-threshold", "NaN"][..], "must be a share"),
        (&["--brake-threshold", "x"][..], "is not a number"),
        (
            &["--brake-window", "0s"][..],
            "the brake window must be at least 1s",
        ),
        (&["--brake-min-nodes", "0"][..], "--brake-min-nodes"),
        (&["--concurrency", "0"][..], "--concurrency"),
        (
            &["--lease-duration-seconds", "0"][..],
            "--lease-duration-seconds",
        ),
        (
            &["--identity="][..],
            "must be 1 to 100 bytes, no control characters",
        ),
        (
            &["--identity", "x".repeat(101).as_str()][..],
            "must be 1 to 100",
        ),
    ] {
        let err = parse(args).expect_err(&format!("{args:?} must be refused"));
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    for args in [
        &["--heartbeat", "10s"][..],
        &["--heartbeat", "off"][..],
        &["--heartbeat", "0s"][..],
        &["--brake-threshold", "1"][..],
        &["--concurrency", "1"][..],
        &["--client-qps", "0"][..],
    ] {
        parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
}
