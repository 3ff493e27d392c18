//! The repair annotation: how an operator tells gpuready "this GPU was
//! repaired at T". XID sources never report "healthy", so without it a fault
//! recorded once would count for as long as its record lives. Faults the
//! probe recorded before the repair time no longer count — the report is
//! filtered before any layer or device judges it, so gpuready's own
//! DeviceTaintRules for them go too — and, the annotation living on the Node,
//! this holds across probe restarts. A time in the future or before the node
//! existed is refused and changes nothing. Pure: the annotation, the node's
//! creation and `now` are inputs.

use std::collections::BTreeMap;

use gpuready_api::keys::lifecycle::ANNOTATION_REPAIRED_AT;
use gpuready_api::probe::ProbeReport;
use jiff::Timestamp;
use serde::Serialize;

/// Clock skew tolerated between the operator's clock and gpuready's. (No
/// message here names `now`: it ends up in the node's condition, and a
/// clock-driven message would rewrite it at every reconcile.)
const MAX_SKEW_SECONDS: i64 = 60;

/// A repair mark as written: when every GPU, or each GPU by UUID, was repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairMark {
    pub all: Option<Timestamp>,
    pub gpus: BTreeMap<String, Timestamp>,
}

impl RepairMark {
    /// The repair time that covers a fault record of `gpu` (a UUID, or the
    /// probe's `index:N` / lost-GPU names, which only an all-GPU mark covers).
    fn covering(&self, gpu: &str) -> Option<Timestamp> {
        match (self.all, self.gpus.get(gpu)) {
            (Some(a), Some(g)) => Some(a.max(*g)),
            (a, g) => a.or(g.copied()),
        }
    }
}

/// What the annotation does to this judgement.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairOutcome {
    /// The annotation as written.
    pub value: String,
    /// Why it was refused (then it changes nothing).
    pub refused: Option<String>,
    /// Fault records it took out of the judgement.
    pub cleared: usize,
}

impl RepairOutcome {
    /// A note for the `GpuReady` message: a refusal always; an accepted mark
    /// only while it clears something (the message stays the same otherwise).
    pub fn note(&self) -> Option<String> {
        match &self.refused {
            Some(why) => Some(format!(
                "the repair annotation {ANNOTATION_REPAIRED_AT}={:?} is refused and changes nothing: {why}",
                self.value
            )),
            None if self.cleared > 0 => Some(format!(
                "{} fault record(s) from before the repair ({ANNOTATION_REPAIRED_AT}) no longer count",
                self.cleared
            )),
            None => None,
        }
    }
}

/// Reads the annotation: an RFC 3339 time (every GPU), or a JSON object of
/// GPU UUID to RFC 3339 time. `Err` says why it is refused.
pub fn parse(
    value: &str,
    created: Option<Timestamp>,
    now: Timestamp,
) -> Result<RepairMark, String> {
    let check = |what: &str, raw: &str| -> Result<Timestamp, String> {
        let t: Timestamp = raw.trim().parse().map_err(|e| {
            format!("{what} {raw:?} is not an RFC 3339 time like 2026-12-01T10:00:00Z ({e})")
        })?;
        if t.as_second() > now.as_second() + MAX_SKEW_SECONDS {
            return Err(format!(
                "{what} {t} is in the future (more than {MAX_SKEW_SECONDS}s ahead of gpuready's clock): write the time the repair was done, not a planned one"
            ));
        }
        if let Some(c) = created
            && t < c
        {
            return Err(format!(
                "{what} {t} is before the node was created ({c}): it cannot be a repair of this node"
            ));
        }
        Ok(t)
    };
    let trimmed = value.trim();
    if trimmed.starts_with('{') {
        let map: BTreeMap<String, String> = serde_json::from_str(trimmed).map_err(|e| {
            format!(
                "not a JSON object of GPU UUID to RFC 3339 time like {{\"GPU-…\": \"2026-12-01T10:00:00Z\"}} ({e})"
            )
        })?;
        if map.is_empty() {
            return Err("the JSON object names no GPU".into());
        }
        let mut mark = RepairMark::default();
        for (uuid, t) in &map {
            if !uuid.starts_with("GPU-") {
                return Err(format!(
                    "{uuid:?} is not a GPU UUID (GPU-…, as nvidia-smi -L and the probe report name it)"
                ));
            }
            mark.gpus
                .insert(uuid.clone(), check(&format!("the time of {uuid}"), t)?);
        }
        Ok(mark)
    } else {
        Ok(RepairMark {
            all: Some(check("the time", trimmed)?),
            gpus: BTreeMap::new(),
        })
    }
}

/// The annotation judged, and the report with the faults it repaired taken
/// out (`None` when it takes nothing out, or there is no report).
pub fn apply(
    value: Option<&str>,
    created: Option<Timestamp>,
    now: Timestamp,
    report: Option<&ProbeReport>,
) -> (Option<RepairOutcome>, Option<ProbeReport>) {
    let Some(value) = value else {
        return (None, None);
    };
    let mark = match parse(value, created, now) {
        Ok(m) => m,
        Err(why) => {
            return (
                Some(RepairOutcome {
                    value: value.to_owned(),
                    refused: Some(why),
                    cleared: 0,
                }),
                None,
            );
        }
    };
    let mut cleared = 0;
    let filtered = report.and_then(|r| {
        let mut r = r.clone();
        r.events.records.retain(|e| {
            // A record seen again after the repair is a new fault: it counts.
            let repaired = mark.covering(&e.gpu).is_some_and(|at| {
                e.last_seen
                    .parse::<Timestamp>()
                    .is_ok_and(|last| last <= at)
            });
            cleared += usize::from(repaired);
            !repaired
        });
        (cleared > 0).then_some(r)
    });
    (
        Some(RepairOutcome {
            value: value.to_owned(),
            refused: None,
            cleared,
        }),
        filtered,
    )
}

#[cfg(test)]
mod tests;
