//! CRDs in the test cluster: installing gpuready's own (and the chart's copy,
//! or any file of CRDs) and waiting until the API server serves them, and NFD's
//! upstream CRD files (from `gpuready_testenv::upstream_nfd`) with objects of
//! their kinds.

use std::path::{Path, PathBuf};

use gpuready_testenv::{TestEnv, upstream_nfd};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{TEST_MANAGER, repo_root, yaml_documents};

/// The GpuNodeProfile CRD's name and its committed, generated file.
pub const CRD_NAME: &str = "gpunodeprofiles.gpuready.io";
pub const CRD_FILE: &str = "deploy/crds/gpunodeprofiles.gpuready.io.yaml";
/// The chart's copy of it (a test keeps the two equal).
pub const CHART_CRD: &str = "charts/gpuready/files/crds/gpunodeprofiles.gpuready.io.yaml";
/// Stand-ins for prometheus-operator's CRDs (the subset of the
/// monitoring.coreos.com/v1 schema the chart uses), so the API server validates
/// the chart's ServiceMonitor and PrometheusRule without the operator.
pub const MONITORING_CRDS: &str = "crates/gpuready/tests/fixtures/monitoring-standin-crds.yaml";

/// A fresh control plane (controllers are cluster-wide, so each test owns one)
/// with the GpuNodeProfile CRD installed and Established.
pub async fn env_with_crd() -> TestEnv {
    let env = TestEnv::start().await.expect("test control plane");
    install_crds(&env, CRD_FILE, TEST_MANAGER).await;
    env
}

/// The test binary's shared control plane (see `TestEnv::shared`) with the
/// CRDs of `files` (repo-relative) installed once, by the first caller; every
/// caller in one binary names the same files.
pub async fn shared_env_with_crds(files: &[&str]) -> &'static TestEnv {
    static INSTALLED: tokio::sync::OnceCell<Vec<String>> = tokio::sync::OnceCell::const_new();
    let env = TestEnv::shared().await.expect("test control plane");
    let installed = INSTALLED
        .get_or_init(|| async {
            for file in files {
                install_crds(env, file, TEST_MANAGER).await;
            }
            files.iter().map(|f| (*f).to_owned()).collect()
        })
        .await;
    assert_eq!(installed, files, "one set of CRDs per test binary");
    env
}

/// The shared control plane with the GpuNodeProfile CRD (the chart's copy) and
/// the monitoring stand-in CRDs installed, once per test binary.
pub async fn chart_env() -> &'static TestEnv {
    shared_env_with_crds(&[CHART_CRD, MONITORING_CRDS]).await
}

/// Waits until every named CRD is Established (served, schema structural).
pub async fn wait_established(client: &Client, names: &[&str]) {
    gpuready_testenv::crds::wait_established(client, names)
        .await
        .unwrap_or_else(|e| panic!("CRDs {names:?} Established: {e}"));
}

/// The CRDs of a YAML file (one or more documents).
pub fn read_crds(path: &Path) -> Vec<CustomResourceDefinition> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    yaml_documents(&text)
        .into_iter()
        .map(|doc| {
            serde_json::from_value(doc)
                .unwrap_or_else(|e| panic!("{}: not a CRD: {e}", path.display()))
        })
        .collect()
}

/// Server-side applies the CRDs of a YAML file (repo-relative) as `manager` and
/// waits until they are Established.
pub async fn install_crds(env: &TestEnv, rel: &str, manager: &str) {
    let client = env.client().expect("client");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in read_crds(&repo_root().join(rel)) {
        api.patch(
            &crd.name_any(),
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} from {rel}: {e}", crd.name_any()));
        wait_established(&client, &[&crd.name_any()]).await;
    }
}

// ---------------------------------------------------------------- NFD

/// An upstream NFD release's CRD file, or `None` for an older release this run
/// cannot read (the loader has printed that the test did not run, and why).
pub fn upstream_path(tag: &str) -> Option<PathBuf> {
    upstream_nfd::file(tag).expect("upstream NFD CRDs")
}

/// A release the Go module proxy serves: fetched and cached, never skipped.
pub fn served_path(tag: &str) -> PathBuf {
    upstream_path(tag).expect("a release the Go module proxy serves is never skipped")
}

/// An untyped API for objects of `group/version` `kind` (resource `plural`),
/// cluster-wide or in `namespace`: for kinds gpuready has no Rust type for, or
/// objects the types must not filter.
pub fn dynamic_api(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// GpuNodeProfiles, untyped.
pub fn raw_profile_api(client: &Client) -> Api<DynamicObject> {
    dynamic_api(
        client,
        "gpuready.io",
        "v1alpha1",
        "GpuNodeProfile",
        "gpunodeprofiles",
        None,
    )
}

/// An API for NFD objects of `kind` (`nfd.k8s-sigs.io/v1alpha1`), cluster-wide
/// or in `namespace`.
pub fn nfd_api(client: &Client, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let plural = format!("{}s", kind.to_lowercase());
    dynamic_api(
        client,
        "nfd.k8s-sigs.io",
        "v1alpha1",
        kind,
        &plural,
        namespace,
    )
}

/// An NFD object of `kind` with `spec`.
pub fn nfd_object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": kind,
        "metadata": { "name": name },
        "spec": spec,
    }))
    .expect("NFD object")
}

/// Adds an integer field `field` to the `spec` of a CRD's first version: what a
/// later NFD release might ship, which gpuready must leave alone.
pub fn add_spec_field(crd: &mut CustomResourceDefinition, field: &str) {
    let spec = crd.spec.versions[0]
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|r| r.properties.as_mut())
        .and_then(|p| p.get_mut("spec"))
        .expect("spec schema");
    spec.properties.get_or_insert_with(Default::default).insert(
        field.into(),
        JSONSchemaProps {
            type_: Some("integer".into()),
            ..Default::default()
        },
    );
}
