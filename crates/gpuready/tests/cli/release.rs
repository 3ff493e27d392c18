//! The release path without any tool: `.github/workflows/release.yml` runs on a
//! `v*` tag, builds the Dockerfile for linux/amd64 and linux/arm64 and pushes it
//! to ghcr.io/gpuready/gpuready, pushes the chart to oci://ghcr.io/gpuready/charts
//! after the image; the chart, the raw manifests and the Flux layout point at
//! those coordinates. (`tests/lint-workflows.sh` lints the workflow with
//! actionlint on top of this.)

use crate::support;

use serde_json::Value;
use support::*;

const IMAGE: &str = "ghcr.io/gpuready/gpuready";
const CHART_REPO: &str = "oci://ghcr.io/gpuready/charts";

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo_root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(rel: &str) -> Value {
    serde_yaml_ng::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every step of a job, as JSON.
fn steps<'a>(wf: &'a Value, job: &str) -> &'a Vec<Value> {
    wf["jobs"][job]["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("job {job} has no steps"))
}

fn uses<'a>(wf: &'a Value, job: &str, action: &str) -> &'a Value {
    steps(wf, job)
        .iter()
        .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(action)))
        .unwrap_or_else(|| panic!("job {job} does not use {action}"))
}

#[test]
fn the_workflow_publishes_a_multi_arch_image_then_the_chart_on_a_tag() {
    let wf = yaml(".github/workflows/release.yml");
    // YAML 1.1 would read `on` as a boolean; serde_yaml_ng keeps it a string key.
    assert_eq!(wf["on"]["push"]["tags"], serde_json::json!(["v*"]));
    assert!(
        wf["on"]["push"].get("branches").is_none(),
        "only tags release"
    );
    assert_eq!(wf["env"]["IMAGE"], IMAGE);
    assert_eq!(wf["env"]["CHART_REPO"], CHART_REPO);

    let build = &uses(&wf, "image", "docker/build-push-action@")["with"];
    assert_eq!(build["file"], "Dockerfile");
    assert_eq!(build["push"], true);
    let platforms: Vec<&str> = build["platforms"]
        .as_str()
        .expect("platforms")
        .split(',')
        .map(str::trim)
        .collect();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"]);
    assert!(
        build["tags"]
            .as_str()
            .is_some_and(|t| t.starts_with("${{ env.IMAGE }}:")),
        "{build}"
    );
    uses(&wf, "image", "docker/setup-buildx-action@");
    uses(&wf, "image", "docker/setup-qemu-action@");
    assert_eq!(wf["jobs"]["image"]["permissions"]["packages"], "write");

    // The chart goes out after the image, as an OCI artifact.
    let needs = &wf["jobs"]["chart"]["needs"];
    assert!(
        needs
            .as_array()
            .is_some_and(|n| n.iter().any(|j| j == "image")),
        "{needs}"
    );
    let script: String = steps(&wf, "chart")
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect();
    assert!(script.contains("helm package charts/gpuready"), "{script}");
    assert!(
        script.contains("helm push") && script.contains("$CHART_REPO"),
        "{script}"
    );
    // The tag must match the chart before anything is pushed.
    let check: String = steps(&wf, "version")
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect();
    assert!(
        check.contains("Chart.yaml") && check.contains("exit 1"),
        "{check}"
    );
    for job in ["image", "chart"] {
        let needs = &wf["jobs"][job]["needs"];
        let has = needs == "version"
            || needs
                .as_array()
                .is_some_and(|n| n.iter().any(|j| j == "version"));
        assert!(has, "{job} waits for the version check");
    }
}

#[test]
fn chart_manifests_and_flux_point_at_the_published_coordinates() {
    let values = yaml("charts/gpuready/values.yaml");
    assert_eq!(values["image"]["repository"], IMAGE);
    let chart = yaml("charts/gpuready/Chart.yaml");
    assert_eq!(chart["name"], "gpuready", "pushed as {CHART_REPO}/gpuready");
    assert_eq!(
        chart["version"], chart["appVersion"],
        "the release workflow requires version == appVersion == the tag"
    );
    let app = chart["appVersion"].as_str().expect("appVersion");
    assert!(
        read("deploy/manifests/gpuready.yaml").contains(&format!("image: \"{IMAGE}:{app}\"")),
        "the raw manifests use the published image"
    );
    let repo = yaml("deploy/flux/gpuready/helmrepository.yaml");
    assert_eq!(repo["spec"]["type"], "oci");
    assert_eq!(repo["spec"]["url"], CHART_REPO);
    let release = yaml_file("deploy/flux/gpuready/helmrelease.yaml");
    assert!(
        release
            .iter()
            .all(|d| d["spec"]["values"]["image"]["repository"].is_null()),
        "the Flux release keeps the chart's published image"
    );
}

/// The probe's glibc image (Dockerfile target `probe`) is published beside the
/// operator's, under the name the chart's `probe.image` points at.
#[test]
fn the_workflow_publishes_the_probe_image_the_chart_uses() {
    let wf = yaml(".github/workflows/release.yml");
    let probe = steps(&wf, "image")
        .iter()
        .find(|s| s["with"]["target"] == "probe")
        .expect("a build of the probe target");
    assert_eq!(probe["with"]["push"], true);
    assert_eq!(probe["with"]["file"], "Dockerfile");
    let tags = probe["with"]["tags"].as_str().expect("tags");
    assert!(tags.starts_with("${{ env.PROBE_IMAGE }}:"), "{tags}");
    let values = yaml("charts/gpuready/values.yaml");
    assert_eq!(
        wf["env"]["PROBE_IMAGE"],
        values["probe"]["image"]["repository"]
    );
    assert!(
        read("Dockerfile").contains(" AS probe\n"),
        "the Dockerfile has a probe stage"
    );
}
