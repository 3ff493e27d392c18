//! NFD CRD I/O, the one home of it: read the three CRDs, server-side apply
//! gpuready's copies, wait until they are Established, read them back. Both
//! `gpuready nfd-crds` and the controller's NFD CRD reconciler call it; what
//! each outcome is called and how it is worded is decided in
//! `gpuready_core::nfd_crds` (pure), so the two cannot drift apart.

use std::time::Duration;

use gpuready_api::crd::nfd_crds;
use gpuready_api::keys;
use gpuready_api::nfd::{NODE_FEATURE_CRD, NODE_FEATURE_GROUP_CRD, NODE_FEATURE_RULE_CRD};
use gpuready_core::nfd_crds::words::{ApplyStep, NOT_ESTABLISHED_HINT, hint_for_status};
use gpuready_core::nfd_crds::{CrdVerdict, NfdCrdPlan, plan};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};

/// The NFD CRDs gpuready manages, in the order it applies them.
pub const NFD_CRD_NAMES: [&str; 3] = [
    NODE_FEATURE_CRD,
    NODE_FEATURE_GROUP_CRD,
    NODE_FEATURE_RULE_CRD,
];

/// How long an applied CRD may take to become Established. The API server
/// usually needs well under a second; a minute covers a loaded control plane.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// A failed read, apply or wait, naming the CRD.
#[derive(Debug, thiserror::Error)]
pub enum NfdCrdError {
    #[error("reading CRD {name}: {source}")]
    Read { name: String, source: kube::Error },
    #[error("applying CRD {name}: {source}")]
    Apply { name: String, source: kube::Error },
    #[error(
        "CRD {name} was applied but is not Established after {}s ({conditions})",
        waited.as_secs()
    )]
    NotEstablished {
        name: String,
        waited: Duration,
        conditions: String,
    },
}

impl NfdCrdError {
    /// What a person can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            NfdCrdError::Read { source, .. } | NfdCrdError::Apply { source, .. } => {
                hint_for_status(match source {
                    kube::Error::Api(s) => Some(s.code),
                    _ => None,
                })
            }
            NfdCrdError::NotEstablished { .. } => NOT_ESTABLISHED_HINT,
        }
    }
}

/// Reads the installed NFD CRDs: one GET each, absent ones left out.
pub async fn read_installed(
    api: &Api<CustomResourceDefinition>,
) -> Result<Vec<CustomResourceDefinition>, NfdCrdError> {
    let mut found = Vec::with_capacity(NFD_CRD_NAMES.len());
    for name in NFD_CRD_NAMES {
        let crd = api
            .get_opt(name)
            .await
            .map_err(|source| NfdCrdError::Read {
                name: name.to_owned(),
                source,
            })?;
        found.extend(crd);
    }
    Ok(found)
}

/// Reads the installed NFD CRDs and classifies them against gpuready's.
pub async fn read_plan(api: &Api<CustomResourceDefinition>) -> Result<NfdCrdPlan, NfdCrdError> {
    Ok(read_back(api).await?.plan)
}

/// gpuready's CRD named `name`.
pub fn desired(name: &str) -> Option<CustomResourceDefinition> {
    nfd_crds()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
}

/// Server-side applies gpuready's CRD with force: conflicts with the managers
/// of an earlier Helm or kubectl install are resolved in gpuready's favour,
/// which is the point (the plan has already ruled out downgrades).
pub async fn apply_crd(
    api: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
) -> Result<CustomResourceDefinition, NfdCrdError> {
    let name = crd.name_any();
    api.patch(
        &name,
        &PatchParams::apply(keys::FIELD_MANAGER).force(),
        &Patch::Apply(crd),
    )
    .await
    .map_err(|source| NfdCrdError::Apply { name, source })
}

/// Waits until the CRD is Established (its resources are served).
pub async fn wait_established(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    timeout: Duration,
) -> Result<(), NfdCrdError> {
    let cond = await_condition(api.clone(), name, conditions::is_crd_established());
    match tokio::time::timeout(timeout, cond).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(NfdCrdError::NotEstablished {
            name: name.to_owned(),
            waited: timeout,
            conditions: format!("watching it failed: {e}"),
        }),
        Err(_) => {
            let conditions = match api.get_opt(name).await {
                Ok(Some(crd)) => crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .map(|c| {
                        format!(
                            "{}={} {}",
                            c.type_,
                            c.status,
                            c.message.as_deref().unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                Ok(None) => "it no longer exists".to_owned(),
                Err(e) => format!("reading its status failed: {e}"),
            };
            Err(NfdCrdError::NotEstablished {
                name: name.to_owned(),
                waited: timeout,
                conditions,
            })
        }
    }
}

/// The CRDs as the API server has them, and their classification.
pub struct ReadBack {
    pub installed: Vec<CustomResourceDefinition>,
    pub plan: NfdCrdPlan,
}

/// Reads the CRDs and classifies them.
pub async fn read_back(api: &Api<CustomResourceDefinition>) -> Result<ReadBack, NfdCrdError> {
    let installed = read_installed(api).await?;
    let plan = plan(&nfd_crds(), &installed);
    Ok(ReadBack { installed, plan })
}

/// The procedure: server-side apply gpuready's copy of every verdict that needs
/// it (in order; the others are only reported as left alone), then wait until
/// each applied CRD is Established, then read all of them back, so "done" means
/// the API server's copy is what gpuready wants. `step` hears of each step as it
/// happens (the CLI prints them, the controller logs and counts). A failed read
/// during the read-back is `NfdCrdError::Read`; apply and wait failures are
/// `Apply` and `NotEstablished`.
pub async fn apply_and_read_back(
    api: &Api<CustomResourceDefinition>,
    verdicts: &[&CrdVerdict],
    timeout: Duration,
    mut step: impl FnMut(ApplyStep<'_>),
) -> Result<ReadBack, NfdCrdError> {
    let mut applied = Vec::new();
    for v in verdicts {
        if !v.class.needs_apply() {
            step(ApplyStep::LeftAlone(v));
            continue;
        }
        let Some(crd) = desired(&v.name) else {
            continue;
        };
        step(ApplyStep::Applying(v));
        apply_crd(api, &crd).await?;
        step(ApplyStep::Applied(&v.name));
        applied.push(v.name.as_str());
    }
    for name in applied {
        step(ApplyStep::Waiting(name));
        wait_established(api, name, timeout).await?;
        step(ApplyStep::Established(name));
    }
    read_back(api).await
}
