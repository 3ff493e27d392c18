//! The install path: the Helm chart rendered and installed by helm itself, YAML
//! streams read as documents, and a client configuration that acts as a
//! ServiceAccount, so the chart's RBAC is tested by the API server that
//! enforces it. What the `chart*.rs` test binaries share lives here.

use std::path::{Path, PathBuf};

use gpuready_testenv::TestEnv;
use serde_json::Value;

use super::{helm, must, repo_root};

/// The release name the chart tests install and render as.
pub const RELEASE: &str = "gpuready";

pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/gpuready")
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The chart's `appVersion`: the tag of the images it points at.
pub fn chart_app_version() -> String {
    let text = std::fs::read_to_string(chart_dir().join("Chart.yaml")).expect("Chart.yaml");
    let chart: Value = serde_yaml_ng::from_str(&text).expect("Chart.yaml");
    chart["appVersion"].as_str().expect("appVersion").to_owned()
}

/// Installs the chart as release `gpuready` into `ns` and returns helm's output.
pub async fn helm_install(env: &TestEnv, ns: &str, extra: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "install",
        RELEASE,
        path_str(&chart),
        "--namespace",
        ns,
        "--create-namespace",
    ];
    args.extend_from_slice(extra);
    must(helm(env, &args), None, "helm install").await
}

/// `helm template <release> charts/gpuready -n <namespace> <extra>`.
pub async fn render(env: &TestEnv, release: &str, namespace: &str, extra: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        release,
        chart.to_str().expect("utf-8 path"),
        "--namespace",
        namespace,
    ];
    args.extend_from_slice(extra);
    must(helm(env, &args), None, "helm template").await
}

/// The documents of a YAML stream, empty ones left out.
pub fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| <Value as serde::Deserialize>::deserialize(doc).expect("YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

/// The documents of a repository file, empty ones left out.
pub fn yaml_file(rel: &str) -> Vec<Value> {
    let path = repo_root().join(rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    yaml_documents(&text)
}

/// The one document of `kind` (and `name`, when given).
pub fn find_doc<'a>(docs: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && name.is_none_or(|n| d["metadata"]["name"] == n))
        .unwrap_or_else(|| panic!("no {kind} {name:?} in the rendered chart"))
}

/// The admin config of `env`, impersonating service account `namespace/name`
/// with the groups a token of that account carries (as
/// `TestEnv::client_as_service_account` does), for a client built differently.
pub fn service_account_config(env: &TestEnv, namespace: &str, name: &str) -> kube::Config {
    let mut config = env.config();
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:{name}"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".into(),
    ]);
    config
}

/// The admin config of `env`, impersonating the plain user `user` (in
/// `system:authenticated` only): its rights are exactly what a test granted.
pub fn as_user(env: &TestEnv, user: &str) -> kube::Config {
    let mut config = env.config();
    config.auth_info.impersonate = Some(user.to_owned());
    config.auth_info.impersonate_groups = Some(vec!["system:authenticated".into()]);
    config
}
