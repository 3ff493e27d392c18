//! The External layer: the verdicts of other judges a profile names — a cloud
//! provider's GPU health agent, node-problem-detector checks — read from the
//! Node conditions their agents write, with the status that means broken and,
//! optionally, how old a verdict's heartbeat may be. A preset whose agent
//! writes its condition only while a problem holds (GKE's device plugin)
//! reads an absent condition as healthy.

use gpuready_api::keys::external as reasons;
use gpuready_api::{BrokenWhen, GpuNodeProfileSpec, ProbePolicy};
use jiff::Timestamp;

use super::verdict::{Verdict, not_ready, ready, unknown};
use crate::evidence::Source;
use crate::facts::NodeFacts;

/// How soon to look again at a node whose verdict is stale: its heartbeat
/// coming back changes no status, so no watch event would re-judge it.
const STALE_RECHECK_SECONDS: u64 = 60;

/// Whether the profile names outside judges at all.
pub(super) fn applies(spec: &GpuNodeProfileSpec) -> bool {
    spec.external.is_some()
}

/// One condition the profile reads, and who writes it.
struct Wanted {
    type_: String,
    broken_when: BrokenWhen,
    writer: String,
    /// Its agent writes it only while a problem holds: absent is healthy.
    absent_is_healthy: bool,
    /// How a broken verdict of its agent clears, where the agent has its own way.
    clears: Option<&'static str>,
}

/// The presets' conditions, then the profile's own; a type named twice is
/// read once, by the profile's own entry (it says which status is broken).
fn wanted(spec: &GpuNodeProfileSpec) -> Vec<Wanted> {
    let Some(x) = &spec.external else {
        return Vec::new();
    };
    let mut out: Vec<Wanted> = Vec::new();
    for c in &x.conditions {
        out.push(Wanted {
            type_: c.type_.clone(),
            broken_when: c.broken_when,
            writer: "external.conditions".to_owned(),
            absent_is_healthy: false,
            clears: None,
        });
    }
    for p in &x.presets {
        for (t, broken_when) in p.conditions() {
            if !out.iter().any(|w| w.type_ == *t) {
                out.push(Wanted {
                    type_: (*t).to_owned(),
                    broken_when: *broken_when,
                    writer: format!("{} (preset {})", p.writer(), p.as_str()),
                    absent_is_healthy: p.absent_is_healthy(),
                    clears: p.clears(),
                });
            }
        }
    }
    out
}

/// The verdict, and when to judge again (the next heartbeat to go stale).
pub(super) fn external_layer(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    now: Timestamp,
) -> (Verdict, Option<u64>) {
    let Some(x) = &spec.external else {
        return (ready(reasons::HEALTHY, "no outside judge is named"), None);
    };
    let mut broken = Vec::new();
    let mut stale = Vec::new();
    let mut unknowns = Vec::new();
    let mut missing = Vec::new();
    let mut absent = Vec::new();
    let mut healthy = Vec::new();
    let mut recheck: Option<u64> = None;
    let mut clears: Vec<&str> = Vec::new();
    for w in wanted(spec) {
        let Some(c) = facts.outside_conditions.iter().find(|c| c.type_ == w.type_) else {
            if w.absent_is_healthy {
                absent.push((w.writer, w.type_));
            } else {
                missing.push((w.writer, w.type_));
            }
            continue;
        };
        let said = format!("{}={}{}", c.type_, c.status, details(c));
        if let Some(max) = x.max_heartbeat_age_seconds {
            let beat = c
                .last_heartbeat_time
                .as_ref()
                .or(c.last_transition_time.as_ref())
                .map(|t| t.0);
            match beat {
                Some(t) => {
                    let age = now.as_second() - t.as_second();
                    let left = i64::from(max) - age;
                    if left < 0 {
                        stale.push((
                            w.writer.clone(),
                            format!("{} (last heartbeat {age} s ago, limit {max} s)", c.type_),
                        ));
                        recheck = Some(
                            recheck.map_or(STALE_RECHECK_SECONDS, |r| r.min(STALE_RECHECK_SECONDS)),
                        );
                    } else {
                        let due = u64::try_from(left).unwrap_or(0) + 1;
                        recheck = Some(recheck.map_or(due, |r| r.min(due)));
                    }
                }
                None => stale.push((
                    w.writer.clone(),
                    format!("{} (no heartbeat or transition time)", c.type_),
                )),
            }
        }
        match c.status.as_str() {
            s if s == w.broken_when.as_str() => {
                let how = w
                    .clears
                    .unwrap_or("the condition clears when its agent finds the node healthy again");
                if !clears.contains(&how) {
                    clears.push(how);
                }
                broken.push((w.writer, said));
            }
            "True" | "False" => healthy.push((w.writer, said)),
            _ => unknowns.push((w.writer, said)),
        }
    }
    let v = if !broken.is_empty() {
        not_ready(
            reasons::BROKEN,
            format!(
                "an outside judge calls the node broken: {}: fix what it names; {}",
                by_writer(&broken),
                clears.join("; ")
            ),
        )
    } else if !stale.is_empty() {
        unknown(
            reasons::STALE,
            format!(
                "outside verdicts too old to trust: {}: is the agent that writes them still running on the node?",
                by_writer(&stale)
            ),
        )
    } else if !unknowns.is_empty() {
        unknown(
            reasons::UNKNOWN,
            format!("an outside judge cannot tell: {}", by_writer(&unknowns)),
        )
    } else if !missing.is_empty() && x.when_missing != ProbePolicy::Ignore {
        let message = format!(
            "not on the node: {}: is the agent that writes them deployed on this pool? (external.whenMissing is {:?})",
            by_writer(&missing),
            x.when_missing
        );
        match x.when_missing {
            ProbePolicy::Blocking => not_ready(reasons::MISSING, message),
            _ => unknown(reasons::MISSING, message),
        }
    } else {
        let mut parts = Vec::new();
        if !healthy.is_empty() {
            parts.push(format!(
                "every outside verdict read is healthy: {}",
                by_writer(&healthy)
            ));
        }
        if !absent.is_empty() {
            parts.push(format!(
                "not on the node, which means healthy (written only while a problem holds): {}",
                by_writer(&absent)
            ));
        }
        if parts.is_empty() {
            parts.push("no named outside condition is on the node".to_owned());
        }
        if !missing.is_empty() {
            parts.push(format!(
                "not on the node (ignored, external.whenMissing Ignore): {}",
                by_writer(&missing)
            ));
        }
        ready(reasons::HEALTHY, parts.join("; "))
    };
    (v.via(Source::NodeConditions), recheck)
}

/// ` (reason: message)` of a condition, or as much of it as is set; GKE's
/// `XidCriticalError` with its XIDs in words.
fn details(c: &k8s_openapi::api::core::v1::NodeCondition) -> String {
    let reason = c.reason.as_deref().unwrap_or_default();
    let message = c.message.as_deref().unwrap_or_default();
    if c.type_ == reasons::GKE_XID_CRITICAL_ERROR
        && let Some(xids) = gke_xids(reason)
    {
        return match message {
            "" => format!(" ({xids})"),
            m if m.starts_with("GPU-") => format!(" ({xids} on {m})"),
            m => format!(" ({xids}; recorded in boot {m})"),
        };
    }
    match (reason, message) {
        ("", "") => String::new(),
        (r, "") => format!(" ({r})"),
        ("", m) => format!(" ({m})"),
        (r, m) => format!(" ({r}: {m})"),
    }
}

/// `XIDs 48, 79` from the reason GKE's device plugin writes on
/// `XidCriticalError`: a JSON object whose keys are the XIDs seen
/// (`{"48":true,"79":true}`). `None` for a reason of any other shape (it is
/// then shown as written).
fn gke_xids(reason: &str) -> Option<String> {
    let seen: serde_json::Map<String, serde_json::Value> = serde_json::from_str(reason).ok()?;
    let mut xids: Vec<(Option<u64>, &str)> = seen
        .iter()
        .filter(|(_, v)| v.as_bool() != Some(false))
        .map(|(k, _)| (k.trim().parse().ok(), k.as_str()))
        .collect();
    if xids.is_empty() {
        return None;
    }
    // Numbers in order, then any key that is not one, as written.
    xids.sort_by(|a, b| (a.0.is_none(), a.0, a.1).cmp(&(b.0.is_none(), b.0, b.1)));
    let list: Vec<&str> = xids.iter().map(|(_, k)| *k).collect();
    Some(format!(
        "{} {}",
        if list.len() == 1 { "XID" } else { "XIDs" },
        list.join(", ")
    ))
}

/// `writer: a, b; other writer: c`, in the order read (a writer's conditions
/// are read together, presets one after another).
fn by_writer(items: &[(String, String)]) -> String {
    let mut out: Vec<(String, Vec<&str>)> = Vec::new();
    for (writer, text) in items {
        match out.last_mut() {
            Some((w, texts)) if w == writer => texts.push(text),
            _ => out.push((writer.clone(), vec![text])),
        }
    }
    out.iter()
        .map(|(w, texts)| format!("{w}: {}", texts.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}
