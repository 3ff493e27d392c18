//! Tests of `scalar`, in their own file beside it.

use super::*;
use serde_json::json;

#[test]
fn plain_scalars_resolve_as_go_yaml_v2() {
    for (text, want) in [
        ("yes", json!(true)),
        ("Yes", json!(true)),
        ("ON", json!(true)),
        ("y", json!(true)),
        ("off", json!(false)),
        ("N", json!(false)),
        ("yEs", json!("yEs")),
        ("~", json!(null)),
        ("0777", json!(511)),
        ("0x1F", json!(31)),
        ("0o17", json!(15)),
        ("0b101", json!(5)),
        ("-0b101", json!(-5)),
        ("1_000", json!(1000)),
        ("+5", json!(5)),
        ("08", json!(8)),
        ("1000.0", json!(1000)),
        ("1.5e7", json!(15_000_000)),
        ("1.5", json!(1.5)),
        (".5", json!(0.5)),
        ("1e400", json!("1e400")),
        ("18446744073709551615", json!(18_446_744_073_709_551_615u64)),
        ("-9223372036854775808", json!(i64::MIN)),
        ("2026-01-01", json!("2026-01-01")),
        ("1.2.3", json!("1.2.3")),
        ("580.65.06", json!("580.65.06")),
        ("-", json!("-")),
        ("0", json!(0)),
    ] {
        assert_eq!(resolve_plain(text), Ok(want), "{text}");
    }
    assert!(resolve_plain(".nan").is_err());
    assert!(resolve_plain("-.Inf").is_err());
}
