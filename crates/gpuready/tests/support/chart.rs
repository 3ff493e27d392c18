//! The install path: the Helm chart rendered by helm itself, YAML streams read
//! as documents, and a client configuration that acts as a ServiceAccount, so
//! the chart's RBAC is tested by the API server that enforces it.

use std::path::PathBuf;

use gpuready_testenv::TestEnv;
use serde_json::Value;

use super::{helm, must, repo_root};

pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/gpuready")
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
