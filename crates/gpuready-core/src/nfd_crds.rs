//! Pure classification of the NFD CRDs installed in a cluster against the set
//! gpuready carries: what to create or upgrade by server-side apply, what to leave.
//!
//! Helm installs CRDs once and never upgrades them, so clusters keep whatever
//! NFD release first installed them. gpuready upgrades older sets and creates
//! missing CRDs, but never downgrades: a CRD with anything gpuready's lacks is
//! left alone and reported, because applying ours would drop fields that a newer
//! NFD writes (the API server would then prune them from stored objects).
//!
//! No client and no I/O: the caller reads the CRDs and applies the plan.

use std::fmt;

use gpuready_api::nfd::compare::{Difference, diff, normalize_crd};
use gpuready_api::nfd::{NFD_CRD_RELEASE_ANNOTATION, NfdCrdRelease};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

pub mod words;

/// How many differences a message lists before it says "and N more".
const MAX_LISTED: usize = 5;

/// The state of one installed CRD relative to gpuready's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CrdClass {
    /// Not installed: create it.
    Missing,
    /// Installed, and lacks part of gpuready's API: apply gpuready's.
    Older {
        /// Release recognised from the installed set's schemas, if any.
        installed_release: Option<NfdCrdRelease>,
        /// What gpuready's CRD adds or changes, one line each (capped).
        changes: Vec<String>,
    },
    /// Same API as gpuready's (descriptions and server-added fields aside):
    /// no write.
    Current,
    /// Has something gpuready's lacks, or differs where the API server allows
    /// no change: leave it alone and report why.
    Newer { reason: String },
}

impl CrdClass {
    /// Whether the plan applies gpuready's CRD (Missing or Older).
    pub fn needs_apply(&self) -> bool {
        matches!(self, CrdClass::Missing | CrdClass::Older { .. })
    }
}

/// The `NfdCrds` condition every profile carries: the NFD CRD reconciler's
/// outcome, handed to the status task, which writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfdCrdCondition {
    /// True when the CRDs are fine as they are (see `keys::nfd_crd_reasons`).
    pub ready: bool,
    pub reason: String,
    pub message: String,
}

impl NfdCrdCondition {
    pub fn new(ready: bool, reason: &str, message: String) -> Self {
        NfdCrdCondition {
            ready,
            reason: reason.to_owned(),
            message,
        }
    }
}

/// The verdict on one of gpuready's CRDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrdVerdict {
    /// `metadata.name` of the CRD, e.g. `nodefeaturerules.nfd.k8s-sigs.io`.
    pub name: String,
    pub class: CrdClass,
}

/// What to do with the NFD CRDs, one verdict per CRD gpuready carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfdCrdPlan {
    /// The release gpuready's CRDs belong to.
    pub carried: NfdCrdRelease,
    /// The release recognised from the installed CRDs, if any are installed.
    pub installed_release: Option<NfdCrdRelease>,
    /// In the order of the desired CRDs.
    pub verdicts: Vec<CrdVerdict>,
}

impl NfdCrdPlan {
    /// The verdict on one CRD, by name.
    pub fn class_of(&self, name: &str) -> Option<&CrdClass> {
        self.verdicts
            .iter()
            .find(|v| v.name == name)
            .map(|v| &v.class)
    }

    /// Names of the CRDs to server-side apply (Missing or Older), in order.
    pub fn to_apply(&self) -> impl Iterator<Item = &str> {
        self.verdicts
            .iter()
            .filter(|v| v.class.needs_apply())
            .map(|v| v.name.as_str())
    }

    /// CRDs left alone because the installed one is newer, with the reason.
    pub fn newer(&self) -> impl Iterator<Item = (&str, &str)> {
        self.verdicts.iter().filter_map(|v| match &v.class {
            CrdClass::Newer { reason } => Some((v.name.as_str(), reason.as_str())),
            _ => None,
        })
    }

    /// True when every CRD is Current: nothing to write, nothing to report.
    pub fn is_noop(&self) -> bool {
        self.verdicts.iter().all(|v| v.class == CrdClass::Current)
    }
}

impl fmt::Display for NfdCrdPlan {
    /// One line per CRD, for logs and condition messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let installed = self
            .installed_release
            .map_or_else(|| "none recognised".to_owned(), |r| r.to_string());
        write!(
            f,
            "NFD CRDs: gpuready carries {} ({}), installed: {installed}",
            self.carried,
            self.carried.nfd_releases()
        )?;
        for v in &self.verdicts {
            match &v.class {
                CrdClass::Missing => write!(f, "\n{}: missing, will create", v.name)?,
                CrdClass::Older { changes, .. } => write!(
                    f,
                    "\n{}: older, will upgrade ({} change(s))",
                    v.name,
                    changes.len()
                )?,
                CrdClass::Current => write!(f, "\n{}: current", v.name)?,
                CrdClass::Newer { reason } => write!(f, "\n{}: left alone: {reason}", v.name)?,
            }
        }
        Ok(())
    }
}

/// Classifies every desired CRD against what is installed.
///
/// `installed` holds the CRDs found in the cluster, matched to the desired ones
/// by `metadata.name`; other CRDs may be among them and are ignored (so the
/// `Option` per name from a get-or-none read can be passed as
/// `results.iter().flatten()`). They may be passed exactly as read from the API
/// server: metadata, status and server defaults are not compared.
pub fn plan<'a>(
    desired: &[CustomResourceDefinition],
    installed: impl IntoIterator<Item = &'a CustomResourceDefinition>,
) -> NfdCrdPlan {
    let desired_names: Vec<&str> = desired
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    let installed: Vec<&CustomResourceDefinition> = installed
        .into_iter()
        .filter(|c| {
            c.metadata
                .name
                .as_deref()
                .is_some_and(|n| desired_names.contains(&n))
        })
        .collect();
    let installed_release = NfdCrdRelease::fingerprint(installed.iter().copied());
    let verdicts = desired
        .iter()
        .map(|want| {
            let name = want.metadata.name.clone().unwrap_or_default();
            let have = installed
                .iter()
                .copied()
                .find(|c| c.metadata.name.as_deref() == Some(name.as_str()));
            let class = classify(want, have, installed_release);
            CrdVerdict { name, class }
        })
        .collect();
    NfdCrdPlan {
        carried: NfdCrdRelease::CARRIED,
        installed_release,
        verdicts,
    }
}

/// Classifies one CRD. `installed_release` is the release recognised for the
/// whole installed set (see [`NfdCrdRelease::fingerprint`]): it is reported with
/// Older, and a release newer than the carried one makes the CRD Newer.
pub fn classify(
    desired: &CustomResourceDefinition,
    installed: Option<&CustomResourceDefinition>,
    installed_release: Option<NfdCrdRelease>,
) -> CrdClass {
    let Some(installed) = installed else {
        return CrdClass::Missing;
    };

    // A CRD written by a newer gpuready names its release; trust that over the
    // schema, which may differ only in ways this build cannot interpret.
    if let Some(mark) = installed
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NFD_CRD_RELEASE_ANNOTATION))
    {
        match NfdCrdRelease::parse(mark) {
            Some(r) if r > NfdCrdRelease::CARRIED => {
                return CrdClass::Newer {
                    reason: format!(
                        "written for NFD CRD release {r}, newer than {} carried here",
                        NfdCrdRelease::CARRIED
                    ),
                };
            }
            Some(_) => {}
            None => {
                return CrdClass::Newer {
                    reason: format!(
                        "annotated {NFD_CRD_RELEASE_ANNOTATION}={mark}, a release this gpuready does not know"
                    ),
                };
            }
        }
    }
    if let Some(r) = installed_release.filter(|r| *r > NfdCrdRelease::CARRIED) {
        return CrdClass::Newer {
            reason: format!(
                "installed NFD CRDs are release {r}, newer than {} carried here",
                NfdCrdRelease::CARRIED
            ),
        };
    }

    // The API server refuses a CRD whose spec drops a version still listed in
    // status.storedVersions, so such a CRD cannot take ours anyway.
    let desired_versions: Vec<&str> = desired
        .spec
        .versions
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    let stored_elsewhere: Vec<&str> = installed
        .status
        .iter()
        .flat_map(|s| s.stored_versions.iter().flatten())
        .map(String::as_str)
        .filter(|v| !desired_versions.contains(v))
        .collect();
    if !stored_elsewhere.is_empty() {
        return CrdClass::Newer {
            reason: format!(
                "objects are stored as {}, a version gpuready's CRD does not have",
                stored_elsewhere.join(", ")
            ),
        };
    }

    let diffs = diff(&normal_form(installed), &normal_form(desired));
    if diffs.is_empty() {
        return CrdClass::Current;
    }

    // Differences gpuready may not apply over, in the order they are reported.
    let refusals = [
        (
            is_immutable as fn(&Difference) -> bool,
            "differs where the API server allows no change",
        ),
        (is_extra, "has what gpuready's CRD lacks"),
    ];
    for (refuses, why) in refusals {
        let found: Vec<&Difference> = diffs.iter().filter(|d| refuses(d)).collect();
        if !found.is_empty() {
            return CrdClass::Newer {
                reason: format!("{why}: {}", listing(found.into_iter())),
            };
        }
    }
    CrdClass::Older {
        installed_release,
        changes: diffs
            .iter()
            .take(MAX_LISTED)
            .map(|d| d.render("installed", "gpuready"))
            .chain(
                (diffs.len() > MAX_LISTED)
                    .then(|| format!("and {} more", diffs.len() - MAX_LISTED)),
            )
            .collect(),
    }
}

fn normal_form(crd: &CustomResourceDefinition) -> Value {
    // Serializing k8s-openapi types to a JSON value cannot fail (string keys
    // only); Null would compare as "everything differs", never as Current.
    serde_json::to_value(crd)
        .map(|v| normalize_crd(&v))
        .unwrap_or(Value::Null)
}

/// Something the installed CRD has and gpuready's lacks: a property, an enum
/// value, a version, a subresource, a short name, a keyword. Applying ours
/// would remove it, so it marks the installed CRD as newer.
///
/// The exception is `required`: an installed-only required entry is a
/// restriction that a later release lifted (v0.14 required `matchExpressions`),
/// so ours is the newer one there.
fn is_extra(d: &Difference) -> bool {
    match d {
        Difference::OnlyLeft { .. } => d.key() != "required",
        Difference::Set { .. } => d.key() != "required" && !d.only_left_members().is_empty(),
        Difference::OnlyRight { .. } | Difference::Changed { .. } => false,
    }
}

/// Fields the API server refuses to change on an existing CRD.
fn is_immutable(d: &Difference) -> bool {
    matches!(d.path(), "spec.scope" | "spec.group" | "spec.names.plural")
}

fn listing<'a>(diffs: impl ExactSizeIterator<Item = &'a Difference>) -> String {
    let total = diffs.len();
    let mut parts: Vec<String> = diffs
        .take(MAX_LISTED)
        .map(|d| d.render("installed", "gpuready"))
        .collect();
    if total > MAX_LISTED {
        parts.push(format!("and {} more", total - MAX_LISTED));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests;
