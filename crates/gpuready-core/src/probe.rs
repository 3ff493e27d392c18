//! The probe report as an input: what `gpuready probe` published in its
//! ConfigMap (`gpuready-probe-<node>`, data key `report.json`), read into the
//! [`ProbeEvidence`] a node's facts carry. Both readers of reports, the
//! controller's watch cache and `gpuready check` (live, or over ConfigMap
//! files), find a node's carrier through [`evidence_for`], so the two cannot
//! read one report two ways. Judging the report is the Health layer's business.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use gpuready_api::keys;
use gpuready_api::probe::{
    PROBE_REPORT_API_VERSION, PROBE_REPORT_DATA_KEY, PROBE_REPORT_READ_VERSIONS, ProbeReport,
    configmap_name,
};
use k8s_openapi::api::core::v1::ConfigMap;

/// What the controller (or `check`) found in the node's report carrier.
#[derive(Clone, Debug, PartialEq)]
pub enum ProbeEvidence {
    Report(Box<ProbeReport>),
    /// The carrier exists but holds no report this gpuready reads: why.
    Invalid(String),
}

/// Why a carrier's content is not a usable report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("not a probe report: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "apiVersion {0:?} is neither {PROBE_REPORT_API_VERSION} nor an older version this gpuready reads: a probe newer than this gpuready; run the same version for both"
    )]
    Version(String),
}

/// Parses the JSON a probe published, refusing versions this gpuready does not
/// know. v1 reads as v2 without the compute check, fabric and device nodes.
pub fn parse_report(json: &str) -> Result<ProbeReport, ReportError> {
    let report: ProbeReport = serde_json::from_str(json)?;
    if !PROBE_REPORT_READ_VERSIONS.contains(&report.api_version.as_str()) {
        return Err(ReportError::Version(report.api_version));
    }
    Ok(report)
}

impl ProbeEvidence {
    /// The evidence for a carrier's text: the report, or why it is unusable.
    pub fn from_json(json: &str) -> ProbeEvidence {
        match parse_report(json) {
            Ok(r) => ProbeEvidence::Report(Box::new(r)),
            Err(e) => ProbeEvidence::Invalid(e.to_string()),
        }
    }
}

/// Whether a ConfigMap is a report carrier: it bears the label the probe sets
/// and the controller's watch selects on (`gpuready.io/probe-report=true`).
pub fn is_report_carrier(cm: &ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::LABEL_PROBE_REPORT))
        .is_some_and(|v| v == "true")
}

/// The label selector that lists report carriers, as the watch uses it.
pub fn carrier_selector() -> String {
    format!("{}=true", keys::LABEL_PROBE_REPORT)
}

/// What a report ConfigMap says, for the engine: the report, or why it is
/// unusable (no `report.json`, not JSON, a version this gpuready does not read).
pub fn evidence_of(cm: &ConfigMap) -> ProbeEvidence {
    match cm.data.as_ref().and_then(|d| d.get(PROBE_REPORT_DATA_KEY)) {
        Some(json) => ProbeEvidence::from_json(json),
        None => ProbeEvidence::Invalid(format!(
            "ConfigMap {} has no data key {PROBE_REPORT_DATA_KEY}",
            cm.metadata.name.as_deref().unwrap_or_default()
        )),
    }
}

/// A node's probe evidence: its carrier (the ConfigMap named for it), found by
/// `find`, read with [`evidence_of`]; `None` when the node has no carrier.
/// `find` is the caller's lookup by ConfigMap name: the controller's reflector
/// store, or [`Carriers`] over listed or read ConfigMaps.
pub fn evidence_for<C: Borrow<ConfigMap>>(
    node: &str,
    find: impl FnOnce(&str) -> Option<C>,
) -> Option<ProbeEvidence> {
    let name = configmap_name(node)?;
    let cm = find(&name)?;
    Some(evidence_of(cm.borrow()))
}

/// Report carriers by ConfigMap name, as the controller's watch holds them:
/// only labelled ConfigMaps count ([`is_report_carrier`]). Read from a list or
/// from files, where the watch's label selector did not filter them already.
#[derive(Clone, Debug, Default)]
pub struct Carriers(BTreeMap<String, ConfigMap>);

impl Carriers {
    pub fn new(configmaps: impl IntoIterator<Item = ConfigMap>) -> Carriers {
        Carriers(
            configmaps
                .into_iter()
                .filter(is_report_carrier)
                .filter_map(|cm| Some((cm.metadata.name.clone()?, cm)))
                .collect(),
        )
    }

    /// The node's probe evidence ([`evidence_for`] over these carriers).
    pub fn evidence_for(&self, node: &str) -> Option<ProbeEvidence> {
        evidence_for(node, |name| self.0.get(name))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
