//! Publishing the report: one ConfigMap per node in gpuready's namespace,
//! written by server-side apply (RBAC: `create` and `patch` on configmaps, no
//! read; docs/probe.md says why this carrier and what the chart's admission
//! policy adds).

use gpuready_api::keys;
use gpuready_api::probe::{PROBE_REPORT_DATA_KEY, ProbeReport, configmap_name};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Field manager of the probe's applies: not gpuready's, so the controller's
/// and the probe's writes stay apart in managedFields.
pub const PROBE_FIELD_MANAGER: &str = "gpuready-probe";

/// Why a report could not be published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(
        "node name {0:?} is too long for the ConfigMap name gpuready-probe-<node> (253 characters at most)"
    )]
    NameTooLong(String),
    #[error("encoding the report: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "writing ConfigMap {namespace}/{name}: {source} (the probe needs create and patch on configmaps in its namespace)"
    )]
    Write {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The ConfigMap body for a node's report (what the probe applies; tests that
/// act as the probe apply the same).
pub fn report_configmap(
    node: &str,
    report: &ProbeReport,
) -> Result<serde_json::Value, PublishError> {
    let name = configmap_name(node).ok_or_else(|| PublishError::NameTooLong(node.to_owned()))?;
    let body = serde_json::to_string(report)?;
    Ok(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "labels": {
                keys::LABEL_PROBE_REPORT: "true",
                "app.kubernetes.io/name": "gpuready",
                "app.kubernetes.io/component": "probe",
            },
        },
        "data": { PROBE_REPORT_DATA_KEY: body },
    }))
}

/// Creates or updates the node's report ConfigMap in one request.
pub async fn publish(
    client: &Client,
    namespace: &str,
    node: &str,
    report: &ProbeReport,
) -> Result<(), PublishError> {
    let body = report_configmap(node, report)?;
    let name = configmap_name(node).ok_or_else(|| PublishError::NameTooLong(node.to_owned()))?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    api.patch(
        &name,
        &PatchParams::apply(PROBE_FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(|source| PublishError::Write {
        namespace: namespace.to_owned(),
        name: name.clone(),
        source,
    })?;
    Ok(())
}
