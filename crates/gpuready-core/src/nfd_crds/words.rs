//! What each NFD CRD outcome is called and the sentences that say it: the
//! `NfdCrds` condition the controller writes on profiles, and the lines
//! `gpuready nfd-crds diff|apply` print. Pure, so the controller and the CLI
//! word the same outcome the same way and tests pin the text without a cluster.

use std::fmt::Write as _;

use gpuready_api::keys::nfd_crd_reasons as reasons;
use gpuready_api::nfd::NfdCrdRelease;
use gpuready_api::nfd::compare::{self, normalize_crd};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::{CrdClass, CrdVerdict, NfdCrdCondition, NfdCrdPlan};

/// The four states, in the order reports list them (the metric's `state` label).
pub const STATES: [&str; 4] = ["missing", "older", "current", "newer"];

/// `missing`, `older`, `current` or `newer`: the metric's `state` label.
pub fn state_label(class: &CrdClass) -> &'static str {
    match class {
        CrdClass::Missing => "missing",
        CrdClass::Older { .. } => "older",
        CrdClass::Current => "current",
        CrdClass::Newer { .. } => "newer",
    }
}

/// `v0.15`, or a phrase when the installed set matched no known release.
pub fn release_name(r: Option<NfdCrdRelease>) -> String {
    r.map_or_else(|| "an unrecognised release".to_owned(), |r| r.to_string())
}

/// `v0.18 (NFD v0.18.x-v0.19.x)`.
pub fn carried() -> String {
    let r = NfdCrdRelease::CARRIED;
    format!("{r} ({})", r.nfd_releases())
}

/// `create X` or `upgrade X from v0.15 (changes: …)`, for messages.
pub fn describe_verdict(v: &CrdVerdict) -> String {
    match &v.class {
        CrdClass::Missing => format!("create {}", v.name),
        CrdClass::Older {
            installed_release,
            changes,
        } => format!(
            "upgrade {} from {} ({})",
            v.name,
            release_name(*installed_release),
            changes.join("; ")
        ),
        CrdClass::Current => format!("{}: current", v.name),
        CrdClass::Newer { reason } => format!("{}: newer, left alone: {reason}", v.name),
    }
}

/// What a person can do about an API error with this HTTP status code (`None`:
/// no response, e.g. the server is unreachable).
pub fn hint_for_status(code: Option<u16>) -> &'static str {
    match code {
        Some(401 | 403) => {
            "the identity in use needs get, list, watch, patch and create on \
             customresourcedefinitions (apiextensions.k8s.io), at least for the three \
             *.nfd.k8s-sigs.io names; or set --nfd-crds=check (read only) or off"
        }
        Some(409 | 422) => {
            "the API server refused gpuready's CRD; `gpuready nfd-crds diff` shows how the \
             installed one differs (please report this as a gpuready bug)"
        }
        _ => "check that the API server is reachable; the controller retries with backoff",
    }
}

/// What a person can do about a CRD that was applied but is not Established.
pub const NOT_ESTABLISHED_HINT: &str = "see the CRD's status conditions (`kubectl get crd <name> -o yaml`); \
     NamesAccepted=False means another CRD claims the same names";

/// The condition when the CRDs could not be read.
pub fn read_failed_condition(error: &str, hint: &str) -> NfdCrdCondition {
    NfdCrdCondition::new(false, reasons::READ_FAILED, format!("{error}; {hint}"))
}

/// The condition when nothing needs applying: Current, or NewerLeftAlone.
pub fn resting_condition(plan: &NfdCrdPlan) -> NfdCrdCondition {
    let newer: Vec<String> = plan
        .newer()
        .map(|(name, reason)| format!("{name}: {reason}"))
        .collect();
    if newer.is_empty() {
        NfdCrdCondition::new(
            true,
            reasons::CURRENT,
            format!(
                "the NFD CRDs match release {} that gpuready carries",
                carried()
            ),
        )
    } else {
        NfdCrdCondition::new(
            true,
            reasons::NEWER_LEFT_ALONE,
            format!(
                "newer than release {} that gpuready carries, left alone: {}",
                carried(),
                newer.join("; ")
            ),
        )
    }
}

/// Check mode: what apply would do, or the resting condition.
pub fn check_condition(plan: &NfdCrdPlan) -> NfdCrdCondition {
    let changes: Vec<String> = plan
        .verdicts
        .iter()
        .filter(|v| v.class.needs_apply())
        .map(describe_verdict)
        .collect();
    if changes.is_empty() {
        return resting_condition(plan);
    }
    let newer: Vec<String> = plan
        .newer()
        .map(|(name, reason)| format!("; left alone: {name}: {reason}"))
        .collect();
    NfdCrdCondition::new(
        false,
        reasons::CHECK_ONLY_WOULD_CHANGE,
        format!(
            "--nfd-crds=check, nothing written; to reach release {} gpuready would {}{}. Run \
             `gpuready nfd-crds apply` or set --nfd-crds=apply",
            carried(),
            changes.join("; "),
            newer.concat()
        ),
    )
}

/// What an apply pass did, for the condition and the Event: Upgraded when it
/// upgraded anything, else Installed. Deliberately free of per-field detail and
/// times, so that the same outcome gives the same text.
pub fn applied_condition(before: &NfdCrdPlan, applied: &[&CrdVerdict]) -> NfdCrdCondition {
    let names = |f: fn(&CrdClass) -> bool| {
        applied
            .iter()
            .filter(|v| f(&v.class))
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>()
    };
    let created = names(|c| *c == CrdClass::Missing);
    let upgraded = names(|c| matches!(c, CrdClass::Older { .. }));
    let mut parts = Vec::new();
    if !upgraded.is_empty() {
        parts.push(format!(
            "upgraded {} from {}",
            upgraded.join(", "),
            release_name(before.installed_release)
        ));
    }
    if !created.is_empty() {
        parts.push(format!("created {}", created.join(", ")));
    }
    let mut message = format!(
        "{} to release {}; Established",
        parts.join(" and "),
        carried()
    );
    for (name, reason) in before.newer() {
        let _ = write!(message, "; left alone: {name}: {reason}");
    }
    let reason = if upgraded.is_empty() {
        reasons::INSTALLED
    } else {
        reasons::UPGRADED
    };
    NfdCrdCondition::new(true, reason, message)
}

/// The condition after a failed apply (`not_established`: the apply went
/// through but the wait for Established did not): Missing when a CRD to create
/// was among them, else Outdated, or NotEstablished.
pub fn apply_failed_condition(
    to_apply: &[&CrdVerdict],
    not_established: bool,
    error: &str,
    hint: &str,
) -> NfdCrdCondition {
    let (reason, what) = if not_established {
        (reasons::NOT_ESTABLISHED, "applied, but")
    } else if to_apply.iter().any(|v| v.class == CrdClass::Missing) {
        (reasons::MISSING, "could not create or upgrade them:")
    } else {
        (reasons::OUTDATED, "could not create or upgrade them:")
    };
    let message = format!(
        "NFD CRDs to create or upgrade: {}; {what} {error}; {hint}",
        to_apply
            .iter()
            .map(|v| format!("{} ({})", v.name, state_label(&v.class)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    NfdCrdCondition::new(false, reason, message)
}

/// The condition when an apply went through yet the read-back still differs.
pub fn not_converged_condition(stuck: &[&CrdVerdict]) -> NfdCrdCondition {
    NfdCrdCondition::new(
        false,
        reasons::APPLY_DID_NOT_CONVERGE,
        format!(
            "applied gpuready's CRDs, yet the API server's copy still differs: {}; gpuready \
             will not re-apply until the CRD changes (a mutating admission webhook may be \
             rewriting it; please report this as a gpuready bug)",
            stuck
                .iter()
                .map(|v| describe_verdict(v))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    )
}

/// A step of the apply → wait Established procedure, as the CLI prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyStep<'a> {
    /// A CRD the procedure does not apply (Current or Newer).
    LeftAlone(&'a CrdVerdict),
    /// About to server-side apply gpuready's copy (Missing or Older).
    Applying(&'a CrdVerdict),
    /// The apply request succeeded.
    Applied(&'a str),
    /// Waiting until the API server serves the CRD.
    Waiting(&'a str),
    /// The CRD is Established.
    Established(&'a str),
}

impl ApplyStep<'_> {
    /// The progress line `gpuready nfd-crds apply` prints for this step, if
    /// any; `installed` is the release recognised before applying.
    pub fn line(&self, installed: Option<NfdCrdRelease>) -> Option<String> {
        match self {
            ApplyStep::LeftAlone(v) => match &v.class {
                CrdClass::Newer { reason } => Some(format!(
                    "{}: newer than gpuready's, left alone: {reason}",
                    v.name
                )),
                _ => Some(format!("{}: current, nothing to do", v.name)),
            },
            ApplyStep::Applying(v) => Some(if v.class == CrdClass::Missing {
                format!("{}: missing, creating", v.name)
            } else {
                format!("{}: older ({}), upgrading", v.name, release_name(installed))
            }),
            ApplyStep::Applied(_) => None,
            ApplyStep::Waiting(name) => Some(format!("{name}: waiting until Established")),
            ApplyStep::Established(name) => Some(format!("{name}: Established")),
        }
    }
}

/// The first line of `apply`: what gpuready carries, what is installed.
pub fn apply_header(plan: &NfdCrdPlan) -> String {
    format!(
        "gpuready carries the NFD CRDs of release {}; installed: {}",
        carried(),
        release_name(plan.installed_release)
    )
}

/// The error `apply` ends with when the read-back still differs.
pub fn still_differs_line(still: &[&CrdVerdict]) -> String {
    format!(
        "applied, yet the API server's copy still differs: {} (a mutating admission \
         webhook may be rewriting CRDs; please report this as a gpuready bug)",
        still
            .iter()
            .map(|v| describe_verdict(v))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// The last line of a successful `apply`: `done: 1 created, 2 already current`.
pub fn done_line(before: &NfdCrdPlan) -> String {
    let summary: Vec<String> = STATES
        .into_iter()
        .filter_map(|state| {
            let n = before
                .verdicts
                .iter()
                .filter(|v| state_label(&v.class) == state)
                .count();
            let done = match state {
                "missing" => "created",
                "older" => "upgraded",
                "current" => "already current",
                _ => "newer, left alone",
            };
            (n > 0).then(|| format!("{n} {done}"))
        })
        .collect();
    format!("done: {}", summary.join(", "))
}

/// Every difference between an installed CRD and gpuready's `desired` (the plan
/// lists only the first few, for messages), one line each.
pub fn all_changes(
    installed: &CustomResourceDefinition,
    desired: &CustomResourceDefinition,
) -> Vec<String> {
    let normal = |c: &CustomResourceDefinition| {
        serde_json::to_value(c)
            .map(|v| normalize_crd(&v))
            .unwrap_or_default()
    };
    compare::diff(&normal(installed), &normal(desired))
        .iter()
        .map(|d| d.render("installed", "gpuready"))
        .collect()
}

/// The human-readable diff: a header, then one entry per CRD. `installed`
/// gives the full list of changes of older CRDs (against `desired`); without
/// it the plan's shortened list is shown.
pub fn render_diff(
    plan: &NfdCrdPlan,
    desired: &[CustomResourceDefinition],
    installed: &[CustomResourceDefinition],
) -> String {
    let by_name = |list: &'_ [CustomResourceDefinition], name: &str| {
        list.iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .cloned()
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gpuready carries the NFD CRDs of release {}; installed: {}",
        carried(),
        plan.installed_release
            .map_or_else(|| "none recognised".to_owned(), |r| r.to_string())
    );
    for v in &plan.verdicts {
        match &v.class {
            CrdClass::Missing => {
                let _ = writeln!(out, "{}: missing; apply would create it", v.name);
            }
            CrdClass::Older {
                installed_release,
                changes,
            } => {
                let _ = writeln!(
                    out,
                    "{}: older (installed release {}); apply would upgrade it:",
                    v.name,
                    release_name(*installed_release)
                );
                let full = by_name(installed, &v.name)
                    .zip(by_name(desired, &v.name))
                    .map(|(have, want)| all_changes(&have, &want))
                    .filter(|all| !all.is_empty());
                for c in full.as_ref().unwrap_or(changes) {
                    let _ = writeln!(out, "    {c}");
                }
            }
            CrdClass::Current => {
                let _ = writeln!(out, "{}: current", v.name);
            }
            CrdClass::Newer { reason } => {
                let _ = writeln!(
                    out,
                    "{}: newer than gpuready's; apply leaves it alone: {reason}",
                    v.name
                );
            }
        }
    }
    out
}

/// The line after the diff: what to run, or that there is nothing to do.
pub fn diff_closing_line(plan: &NfdCrdPlan) -> &'static str {
    if plan.to_apply().next().is_some() {
        "Run `gpuready nfd-crds apply` (or the controller with --nfd-crds=apply) to make these changes."
    } else {
        "Nothing to do."
    }
}

#[cfg(test)]
mod tests;
