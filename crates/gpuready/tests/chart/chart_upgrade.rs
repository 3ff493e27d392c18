//! The chart after its first install, on a real kube-apiserver: profiles from
//! values (created by the upgrade once the CRD is served), `helm upgrade` of the
//! CRD, and `helm uninstall` keeping the CRD.

use crate::support;

use std::path::Path;

use gpuready_api::GpuNodeProfile;
use gpuready_testenv::{TestEnv, unique_name};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::{Value, json};
use support::*;

/// Copies a folder tree (the chart) into `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[tokio::test]
async fn helm_upgrade_updates_the_crd_creates_profiles_and_uninstall_keeps_the_crd() {
    let env = TestEnv::start().await.expect("test control plane");
    let admin = env.client().expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let profiles: Api<GpuNodeProfile> = Api::all(admin.clone());
    let ns = "gpuready-system";
    let (_dir, values) = temp_file(
        "values.yaml",
        r#"
profiles:
  rtx3090:
    nodeSelector:
      matchLabels: {gpu-pool: rtx3090}
    gpu:
      products: [NVIDIA-GeForce-RTX-3090]
"#,
    );

    // First install: the CRD comes, the profile cannot yet (and NOTES says so).
    let notes = helm_install(&env, ns, &["-f", path_str(&values)]).await;
    assert!(
        notes.contains("WARNING: the profiles in values (rtx3090) were NOT created"),
        "{notes}"
    );
    wait_established(&admin, &[CRD_NAME]).await;
    assert!(profiles.get_opt("rtx3090").await.expect("get").is_none());
    let crd = crds.get(CRD_NAME).await.expect("CRD");
    assert_eq!(
        crd.annotations()
            .get("helm.sh/resource-policy")
            .map(String::as_str),
        Some("keep")
    );

    // The next upgrade creates it, as a resource of the release.
    let chart = chart_dir();
    let notes = must(
        helm(
            &env,
            &[
                "upgrade",
                RELEASE,
                path_str(&chart),
                "-n",
                ns,
                "--reuse-values",
            ],
        ),
        None,
        "helm upgrade",
    )
    .await;
    assert!(
        notes.contains("Profiles from this release: rtx3090"),
        "{notes}"
    );
    let p = profiles.get("rtx3090").await.expect("profile created");
    assert_eq!(
        p.labels()
            .get("app.kubernetes.io/instance")
            .map(String::as_str),
        Some(RELEASE)
    );

    // A newer chart whose CRD gained a field: `helm upgrade` updates the CRD.
    let newer = tempfile::tempdir().expect("temp dir");
    copy_tree(&chart, newer.path());
    let crd_file = newer
        .path()
        .join("files/crds/gpunodeprofiles.gpuready.io.yaml");
    let text = std::fs::read_to_string(&crd_file).expect("chart CRD");
    let (header, body) = text.split_once("---\n").expect("header then document");
    let mut doc: Value = serde_yaml_ng::from_str(body).expect("CRD YAML");
    doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["upgradeProbe"] = json!({
        "type": "string",
        "description": "A field only the upgrade test's chart has.",
    });
    std::fs::write(
        &crd_file,
        format!(
            "{header}---\n{}",
            serde_yaml_ng::to_string(&doc).expect("YAML")
        ),
    )
    .expect("write CRD");
    let with_field = |value: &str| {
        json!({
            "apiVersion": "gpuready.io/v1alpha1", "kind": "GpuNodeProfile",
            "metadata": { "name": unique_name("probe") },
            "spec": { "nodeSelector": { "matchLabels": { "a": "b" } }, "upgradeProbe": value },
        })
        .to_string()
    };
    let before = run(
        kubectl(&env, &["create", "--dry-run=server", "-f", "-"]),
        Some(&with_field("before")),
    )
    .await;
    assert!(
        !before.ok
            && before
                .stderr
                .contains("unknown field \"spec.upgradeProbe\""),
        "the old CRD does not know the field: {}",
        before.stderr
    );
    must(
        helm(
            &env,
            &[
                "upgrade",
                RELEASE,
                path_str(newer.path()),
                "-n",
                ns,
                "--reuse-values",
            ],
        ),
        None,
        "helm upgrade to the newer chart",
    )
    .await;
    let crd = crds.get(CRD_NAME).await.expect("CRD");
    let spec_props = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("spec"))
        .and_then(|s| s.properties.as_ref())
        .expect("spec properties");
    assert!(
        spec_props.contains_key("upgradeProbe"),
        "helm upgrade updated the CRD in the cluster"
    );
    eventually(30, "the API server serves the new field", || async {
        run(
            kubectl(&env, &["create", "--dry-run=server", "-f", "-"]),
            Some(&with_field("after")),
        )
        .await
        .ok
        .then_some(())
    })
    .await;
    assert!(profiles.get_opt("rtx3090").await.expect("get").is_some());

    // Uninstall: the CRD stays (resource-policy keep) and is still served.
    // Without hooks: this API server has no controller-manager to run the
    // pre-delete Job (cluster_e2e runs it in a real cluster).
    must(
        helm(&env, &["uninstall", RELEASE, "-n", ns, "--no-hooks"]),
        None,
        "helm uninstall",
    )
    .await;
    let crd = crds
        .get(CRD_NAME)
        .await
        .expect("the CRD survives uninstall");
    assert!(crd.metadata.deletion_timestamp.is_none());
    wait_established(&admin, &[CRD_NAME]).await;
}
