//! The pieces every profile condition is made of: a kstatus condition, a
//! bounded list of node names, a count as the status's `int32` holds it.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition kstatus reads as "needs a human": nodes in conflict.
pub const CONDITION_STALLED: &str = "Stalled";

/// How many node names a profile condition message lists.
pub(super) const MAX_NAMES_IN_MESSAGE: usize = 5;

pub(super) fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time: Time(now),
    }
}

/// `shown` (at most MAX_NAMES_IN_MESSAGE names, in order) out of `total`.
pub(super) fn names_message(shown: &[String], total: usize) -> String {
    let shown: Vec<&str> = shown
        .iter()
        .take(MAX_NAMES_IN_MESSAGE)
        .map(String::as_str)
        .collect();
    let more = total.saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// A count as the status's `int32` field holds it (saturating).
pub(super) fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
