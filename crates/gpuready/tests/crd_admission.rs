//! The committed GpuNodeProfile CRD against a real kube-apiserver: it installs,
//! its printer columns and descriptions reach kubectl, every bound and CEL rule in
//! `crates/gpuready-api/src/profile.rs` refuses a bad profile with its own message,
//! and good profiles (including every example under deploy/examples) are accepted.
//!
//! All tests share one control plane (see gpuready-testenv) and use unique names.
//! Needs the binaries from `tests/control-plane/build.sh`.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuready_api::{GpuNodeProfile, Mode, TaintEffect, TaintPolicy};
use gpuready_testenv::{TestEnv, unique_name};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use support::*;

fn committed_crd() -> CustomResourceDefinition {
    let mut crds = read_crds(&repo_root().join(CRD_FILE));
    assert_eq!(crds.len(), 1, "{CRD_FILE} should hold one CRD");
    crds.remove(0)
}

/// The shared environment with the committed CRD installed and Established
/// (installed once per test binary).
async fn env() -> &'static TestEnv {
    shared_env_with_crds(&[CRD_FILE]).await
}

fn profiles(env: &TestEnv) -> Api<GpuNodeProfile> {
    Api::all(env.client().expect("client"))
}

/// The smallest valid spec; bad cases change one thing in it.
fn minimal_spec() -> Value {
    json!({ "nodeSelector": { "matchLabels": { "nvidia.com/gpu.present": "true" } } })
}

#[tokio::test]
async fn crd_installs_and_becomes_established() {
    let env = env().await;
    let crd = Api::<CustomResourceDefinition>::all(env.client().expect("client"))
        .get(CRD_NAME)
        .await
        .expect("CRD");
    let status = crd.status.expect("status");
    let conditions = status.conditions.unwrap_or_default();
    for wanted in ["NamesAccepted", "Established"] {
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == wanted && c.status == "True"),
            "{wanted} not True: {conditions:?}"
        );
    }
    let names = status.accepted_names.expect("accepted names");
    assert_eq!(names.short_names, Some(vec!["gnp".to_owned()]));
    assert_eq!(names.categories, Some(vec!["gpuready".to_owned()]));
}

#[tokio::test]
async fn kubectl_get_shows_the_printer_columns() {
    let env = env().await;
    let name = unique_name("columns");
    let spec = json!({
        "nodeSelector": { "matchLabels": { "pool": "a100" } },
        "mode": "Observe",
        "gpu": { "products": ["NVIDIA-A100-*"] },
    });
    create_raw_profile(&env.client().expect("client"), &raw_profile(&name, spec))
        .await
        .expect("good profile");
    profiles(env)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "matchedNodes": 3, "readyNodes": 2, "notReadyNodes": 1,
                "conditions": [{
                    "type": "Ready", "status": "False", "reason": "NodesNotReady",
                    "message": "1 of 3 nodes not ready",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }],
            }})),
        )
        .await
        .expect("status update");

    for resource in ["gpunodeprofiles", "gnp", "gpunodeprofile.gpuready.io"] {
        let mut cmd = env.kubectl();
        cmd.args(["get", resource, &name]);
        let Out {
            ok,
            stdout: out,
            stderr: err,
            ..
        } = run(cmd, None).await;
        assert!(ok, "kubectl get {resource}: {err}");
        let lines: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            lines[0],
            [
                "NAME",
                "MODE",
                "MATCHED",
                "READY",
                "NOT-READY",
                "STATUS",
                "AGE"
            ],
            "kubectl get {resource}:\n{out}"
        );
        assert_eq!(
            lines[1][..6],
            [name.as_str(), "Observe", "3", "2", "1", "NodesNotReady"],
            "kubectl get {resource}:\n{out}"
        );
    }

    // Maintenance, Waiting (for another gate) and Product are priority 1:
    // only in the wide output.
    let mut cmd = env.kubectl();
    cmd.args(["get", "gnp", &name, "-o", "wide"]);
    let Out {
        ok,
        stdout: out,
        stderr: err,
        ..
    } = run(cmd, None).await;
    assert!(ok, "{err}");
    assert!(
        out.lines().next().is_some_and(|h| h.contains("MAINTENANCE")
            && h.contains("WAITING")
            && h.contains("PRODUCT")),
        "{out}"
    );
    assert!(out.contains("NVIDIA-A100-*"), "{out}");

    // The category works too: `kubectl get gpuready`.
    let mut cmd = env.kubectl();
    cmd.args(["get", "gpuready", "-o", "name"]);
    let Out {
        ok,
        stdout: out,
        stderr: err,
        ..
    } = run(cmd, None).await;
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("gpunodeprofile.gpuready.io/{name}")),
        "{out}"
    );
}

#[tokio::test]
async fn kubectl_explain_shows_field_descriptions() {
    let env = env().await;
    // The OpenAPI document is republished asynchronously after the CRD lands.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let out = loop {
        let mut cmd = env.kubectl();
        cmd.args(["explain", "gpunodeprofile.spec"]);
        let Out {
            ok,
            stdout: out,
            stderr: err,
            ..
        } = run(cmd, None).await;
        if ok && out.contains("nodeSelector") {
            break out;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "kubectl explain never showed the schema: {out}{err}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for text in [
        "What a set of GPU nodes must have to be called ready",
        "Which nodes this profile governs",
        "Minimum NVIDIA driver version",
        "Continuous",
        "gatingLayers",
        "readyLabels",
    ] {
        assert!(out.contains(text), "explain lacks {text:?}:\n{out}");
    }
    let mut cmd = env.kubectl();
    cmd.args(["explain", "gnp.spec.gpu.minComputeCapability"]);
    let Out {
        ok,
        stdout: out,
        stderr: err,
        ..
    } = run(cmd, None).await;
    assert!(ok, "{err}");
    assert!(out.contains("Minimum compute capability"), "{out}");
}

/// One bad profile per schema bound or CEL rule.
struct Bad {
    /// `(schema path, keyword)` this case covers; see `schema_rules`.
    covers: (&'static str, &'static str),
    /// Shown in failures.
    what: &'static str,
    /// The spec: `minimal_spec()` with one change.
    spec: Value,
    /// Fragments the server's message must contain (rule message or bound text).
    expect: &'static [&'static str],
    /// A fixed object name instead of a unique one (for rules on the name).
    name: Option<String>,
}

/// `minimal_spec()` with the top-level spec fields in `changes` replaced.
fn spec_with(changes: Value) -> Value {
    let mut spec = minimal_spec();
    if let (Some(spec), Some(changes)) = (spec.as_object_mut(), changes.as_object()) {
        for (k, v) in changes {
            spec.insert(k.clone(), v.clone());
        }
    }
    spec
}

fn bad_cases() -> Vec<Bad> {
    let long = |n: usize| "1".repeat(n);
    let many_labels: serde_json::Map<String, Value> = (0..17)
        .map(|i| (format!("example.com/l{i}"), json!("x")))
        .collect();
    let many_resources: serde_json::Map<String, Value> = (0..17)
        .map(|i| (format!("example.com/r{i}"), json!(1)))
        .collect();
    let taint = |changes: Value| {
        let mut t = json!({ "key": "readiness.k8s.io/gpuready-not-ready", "value": "true", "effect": "NoSchedule" });
        if let (Some(t), Some(c)) = (t.as_object_mut(), changes.as_object()) {
            t.extend(c.clone());
        }
        spec_with(json!({ "taint": t }))
    };
    let b = |covers: (&'static str, &'static str),
             what: &'static str,
             spec: Value,
             expect: &'static [&'static str]| Bad {
        covers,
        what,
        spec,
        expect,
        name: None,
    };
    vec![
        b(
            ("spec", "required:nodeSelector"),
            "no nodeSelector",
            json!({ "mode": "Observe" }),
            &["spec.nodeSelector: Required value"],
        ),
        b(
            ("spec.minDriverVersion", "rule"),
            "driver version with letters",
            spec_with(json!({ "minDriverVersion": "580.x" })),
            &[
                "spec.minDriverVersion",
                "minDriverVersion must look like 580.65.06 or 570.26",
            ],
        ),
        b(
            ("spec.minDriverVersion", "maxLength"),
            "driver version too long",
            spec_with(json!({ "minDriverVersion": format!("1.{}", long(31)) })),
            &["spec.minDriverVersion", "may not be more than 32 bytes"],
        ),
        b(
            ("spec.cudaVersion", "rule"),
            "CUDA version with a patch part",
            spec_with(json!({ "cudaVersion": "12.4.1" })),
            &[
                "spec.cudaVersion",
                "cudaVersion must be a CUDA release like 12.4 or 13.0",
            ],
        ),
        b(
            ("spec.cudaVersion", "maxLength"),
            "CUDA version too long",
            spec_with(json!({ "cudaVersion": format!("1.{}", long(15)) })),
            &["spec.cudaVersion", "may not be more than 16 bytes"],
        ),
        b(
            ("spec.gatingLayers", "rule"),
            "repeated gating layer",
            spec_with(json!({ "gatingLayers": ["Driver", "Driver"] })),
            &["spec.gatingLayers", "gatingLayers must not repeat a layer"],
        ),
        b(
            ("spec.gatingLayers", "minItems"),
            "no gating layer",
            spec_with(json!({ "gatingLayers": [] })),
            &["spec.gatingLayers", "should have at least 1 items"],
        ),
        // Names the API server itself refuses for a cluster-scoped object (a
        // DNS-1123 subdomain), which `check` must refuse the same way.
        Bad {
            name: Some("UPPER".into()),
            ..b(
                ("", "rule"),
                "upper-case profile name",
                minimal_spec(),
                &["metadata.name"],
            )
        },
        Bad {
            name: Some("a b".into()),
            ..b(
                ("", "rule"),
                "profile name with a space",
                minimal_spec(),
                &["metadata.name"],
            )
        },
        Bad {
            name: Some("été".into()),
            ..b(
                ("", "rule"),
                "non-ASCII profile name",
                minimal_spec(),
                &["metadata.name"],
            )
        },
        Bad {
            name: Some("a_b".into()),
            ..b(
                ("", "rule"),
                "profile name with '_'",
                minimal_spec(),
                &["metadata.name"],
            )
        },
        Bad {
            name: Some(format!("a{}", "b".repeat(63))),
            ..b(
                ("", "rule"),
                "profile name longer than 63 characters",
                minimal_spec(),
                &["metadata.name must be at most 63 characters"],
            )
        },
        b(
            ("spec.gatingLayers", "maxItems"),
            "eleven gating layers",
            spec_with(
                json!({ "gatingLayers": ["Node", "Hardware", "Driver", "DevicePlugin",
                "FeatureDiscovery", "Profile", "Compatibility", "Health", "Fabric", "External", "Node"] }),
            ),
            &["spec.gatingLayers", "must have at most 10 items"],
        ),
        b(
            ("spec.gatingLayers[]", "enum"),
            "unknown gating layer",
            spec_with(json!({ "gatingLayers": ["Kernel"] })),
            &["spec.gatingLayers[0]", "Unsupported value: \"Kernel\""],
        ),
        b(
            ("spec.resources", "rule"),
            "resource name without a domain",
            spec_with(json!({ "resources": { "gpu": 1 } })),
            &[
                "spec.resources",
                "resources must map a domain-qualified resource name",
            ],
        ),
        b(
            ("spec.resources", "rule"),
            "resource quantity 0",
            spec_with(json!({ "resources": { "nvidia.com/gpu": 0 } })),
            &["spec.resources", "to a quantity of at least 1"],
        ),
        b(
            ("spec.resources", "maxProperties"),
            "17 resources",
            spec_with(json!({ "resources": many_resources })),
            &["spec.resources", "must have at most 16 items"],
        ),
        b(
            ("spec.resources{}", "minimum"),
            "negative resource quantity",
            spec_with(json!({ "resources": { "nvidia.com/gpu": -1 } })),
            &[
                "spec.resources.nvidia.com/gpu",
                "should be greater than or equal to 0",
            ],
        ),
        b(
            ("spec.resources{}", "maximum"),
            "resource quantity over u32 (the bound the uint32 format stood for)",
            spec_with(json!({ "resources": { "nvidia.com/gpu": 4_294_967_296_u64 } })),
            &[
                "spec.resources.nvidia.com/gpu",
                "should be less than or equal to",
            ],
        ),
        b(
            ("spec.maxLabelAgeSeconds", "maximum"),
            "label age over a week",
            spec_with(json!({ "maxLabelAgeSeconds": 604801 })),
            &[
                "spec.maxLabelAgeSeconds",
                "should be less than or equal to 604800",
            ],
        ),
        b(
            ("spec.maxLabelAgeSeconds", "minimum"),
            "negative label age",
            spec_with(json!({ "maxLabelAgeSeconds": -1 })),
            &[
                "spec.maxLabelAgeSeconds",
                "should be greater than or equal to 0",
            ],
        ),
        b(
            ("spec.probe.whenMissing", "enum"),
            "unknown missing-probe policy",
            spec_with(json!({ "probe": { "whenMissing": "Block" } })),
            &["spec.probe.whenMissing", "Unsupported value: \"Block\""],
        ),
        b(
            ("spec.probe.maxReportAgeSeconds", "maximum"),
            "report age over a day",
            spec_with(json!({ "probe": { "maxReportAgeSeconds": 86401 } })),
            &[
                "spec.probe.maxReportAgeSeconds",
                "should be less than or equal to 86400",
            ],
        ),
        b(
            ("spec.probe.maxReportAgeSeconds", "minimum"),
            "negative report age",
            spec_with(json!({ "probe": { "maxReportAgeSeconds": -1 } })),
            &[
                "spec.probe.maxReportAgeSeconds",
                "should be greater than or equal to 0",
            ],
        ),
        b(
            ("spec.probe.computeCheck.whenSkipped", "enum"),
            "unknown skipped-check policy",
            spec_with(json!({ "probe": { "computeCheck": { "whenSkipped": "Block" } } })),
            &[
                "spec.probe.computeCheck.whenSkipped",
                "Unsupported value: \"Block\"",
            ],
        ),
        b(
            ("spec.probe.computeCheck.whenStale", "enum"),
            "unknown stale-check policy",
            spec_with(json!({ "probe": { "computeCheck": { "whenStale": "Never" } } })),
            &[
                "spec.probe.computeCheck.whenStale",
                "Unsupported value: \"Never\"",
            ],
        ),
        b(
            ("spec.probe.computeCheck.maxAgeSeconds", "maximum"),
            "compute check age over a year",
            spec_with(json!({ "probe": { "computeCheck": { "maxAgeSeconds": 31536001 } } })),
            &[
                "spec.probe.computeCheck.maxAgeSeconds",
                "should be less than or equal to 31536000",
            ],
        ),
        b(
            ("spec.probe.computeCheck.maxAgeSeconds", "minimum"),
            "negative compute check age",
            spec_with(json!({ "probe": { "computeCheck": { "maxAgeSeconds": -1 } } })),
            &[
                "spec.probe.computeCheck.maxAgeSeconds",
                "should be greater than or equal to 0",
            ],
        ),
        b(
            ("spec.probe.fatalXids", "maxItems"),
            "65 fatal XIDs",
            spec_with(json!({ "probe": { "fatalXids": (200..265).collect::<Vec<u32>>() } })),
            &["spec.probe.fatalXids", "must have at most 64 items"],
        ),
        b(
            ("spec.probe.fatalXids[]", "minimum"),
            "negative XID",
            spec_with(json!({ "probe": { "fatalXids": [-1] } })),
            &[
                "spec.probe.fatalXids[0]",
                "should be greater than or equal to 0",
            ],
        ),
        b(
            ("spec.probe.fatalXids[]", "maximum"),
            "XID over u32",
            spec_with(json!({ "probe": { "fatalXids": [4_294_967_296_u64] } })),
            &["spec.probe.fatalXids[0]", "should be less than or equal to"],
        ),
        b(
            ("spec.probe.fatalXids", "rule"),
            "XID 0",
            spec_with(json!({ "probe": { "fatalXids": [79, 0] } })),
            &["probe.fatalXids must be XID numbers from 1 to 65535"],
        ),
        b(
            ("spec.probe.fatalXids", "rule"),
            "an application XID as fatal",
            spec_with(json!({ "probe": { "fatalXids": [79, 31] } })),
            &["probe.fatalXids must not list the application XIDs 13, 31, 43, 45, 68 or 109"],
        ),
        b(
            ("spec.mode", "enum"),
            "unknown mode",
            spec_with(json!({ "mode": "enforce" })),
            &["spec.mode", "Unsupported value: \"enforce\""],
        ),
        b(
            ("spec.evidence", "enum"),
            "unknown evidence",
            spec_with(json!({ "evidence": "Dra" })),
            &["spec.evidence", "Unsupported value: \"Dra\""],
        ),
        b(
            ("spec.workload", "enum"),
            "unknown workload",
            spec_with(json!({ "workload": "vm-passthrough" })),
            &["spec.workload", "Unsupported value: \"vm-passthrough\""],
        ),
        b(
            ("spec.sandboxResources", "rule"),
            "sandbox resource without a domain",
            spec_with(json!({ "sandboxResources": ["GH100_H200_SXM_141GB"] })),
            &[
                "spec.sandboxResources",
                "sandboxResources must be domain-qualified resource names",
            ],
        ),
        b(
            ("spec.sandboxResources", "maxItems"),
            "17 sandbox resources",
            spec_with(json!({ "sandboxResources": vec!["nvidia.com/X"; 17] })),
            &["spec.sandboxResources", "must have at most 16 items"],
        ),
        b(
            ("spec.sandboxResources[]", "maxLength"),
            "sandbox resource name too long",
            spec_with(json!({ "sandboxResources": [format!("nvidia.com/{}", "X".repeat(250))] })),
            &["spec.sandboxResources[0]", "may not be more than 253 bytes"],
        ),
        b(
            ("spec.notReadyDeadline", "required:seconds"),
            "deadline without seconds",
            spec_with(json!({ "notReadyDeadline": { "label": true } })),
            &["spec.notReadyDeadline.seconds: Required value"],
        ),
        b(
            ("spec.notReadyDeadline.seconds", "minimum"),
            "deadline under a minute",
            spec_with(json!({ "notReadyDeadline": { "seconds": 59 } })),
            &[
                "spec.notReadyDeadline.seconds",
                "should be greater than or equal to 60",
            ],
        ),
        b(
            ("spec.notReadyDeadline.seconds", "maximum"),
            "deadline over 30 days",
            spec_with(json!({ "notReadyDeadline": { "seconds": 2592001 } })),
            &[
                "spec.notReadyDeadline.seconds",
                "should be less than or equal to 2592000",
            ],
        ),
        b(
            ("spec.notReadyDeadline.since", "enum"),
            "unknown deadline start",
            spec_with(json!({ "notReadyDeadline": { "seconds": 600, "since": "Created" } })),
            &[
                "spec.notReadyDeadline.since",
                "Unsupported value: \"Created\"",
            ],
        ),
        b(
            ("spec.deviceGating.effect", "enum"),
            "a device taint effect nodes have but devices do not",
            spec_with(json!({ "deviceGating": { "effect": "PreferNoSchedule" } })),
            &[
                "spec.deviceGating.effect",
                "Unsupported value: \"PreferNoSchedule\"",
            ],
        ),
        b(
            ("spec.deviceGating.minReadyGpus", "minimum"),
            "no ready GPU needed",
            spec_with(json!({ "deviceGating": { "minReadyGpus": 0 } })),
            &[
                "spec.deviceGating.minReadyGpus",
                "should be greater than or equal to 1",
            ],
        ),
        b(
            ("spec.deviceGating.minReadyGpus", "maximum"),
            "more ready GPUs than a node holds",
            spec_with(json!({ "deviceGating": { "minReadyGpus": 1025 } })),
            &[
                "spec.deviceGating.minReadyGpus",
                "should be less than or equal to 1024",
            ],
        ),
        b(
            ("spec.gpu.maxGpusPerNumaNode", "minimum"),
            "no GPU allowed on a NUMA node",
            spec_with(json!({ "gpu": { "maxGpusPerNumaNode": 0 } })),
            &[
                "spec.gpu.maxGpusPerNumaNode",
                "should be greater than or equal to 1",
            ],
        ),
        b(
            ("spec.gpu.maxGpusPerNumaNode", "maximum"),
            "more GPUs per NUMA node than a node holds",
            spec_with(json!({ "gpu": { "maxGpusPerNumaNode": 1025 } })),
            &[
                "spec.gpu.maxGpusPerNumaNode",
                "should be less than or equal to 1024",
            ],
        ),
        b(
            ("spec.fabric.cliques", "rule"),
            "a clique without its cluster UUID",
            spec_with(json!({ "fabric": { "cliques": ["32766"] } })),
            &[
                "spec.fabric.cliques",
                "fabric.cliques must be NVLink cliques as nvidia.com/gpu.clique spells them",
            ],
        ),
        b(
            ("spec.fabric.cliques", "maxItems"),
            "65 cliques",
            spec_with(
                json!({ "fabric": { "cliques": (0..65).map(|i| format!("9277d399-0674-44a9-b64e-d85bb19ce2b0.{i}")).collect::<Vec<_>>() } }),
            ),
            &["spec.fabric.cliques", "must have at most 64 items"],
        ),
        b(
            ("spec.fabric.cliques[]", "maxLength"),
            "a clique of 65 characters",
            spec_with(
                json!({ "fabric": { "cliques": [format!("9277d399-0674-44a9-b64e-d85bb19ce2b0.{}", "1".repeat(28))] } }),
            ),
            &["spec.fabric.cliques[0]", "may not be more than 64 bytes"],
        ),
        b(
            ("spec.fabric.minDriverVersion", "rule"),
            "a one-part fabric driver minimum",
            spec_with(json!({ "fabric": { "minDriverVersion": "570" } })),
            &[
                "spec.fabric.minDriverVersion",
                "fabric.minDriverVersion must look like 570.158.01",
            ],
        ),
        b(
            ("spec.fabric.minDriverVersion", "maxLength"),
            "a fabric driver minimum of 33 characters",
            spec_with(
                json!({ "fabric": { "minDriverVersion": format!("570.158.{}", "1".repeat(25)) } }),
            ),
            &[
                "spec.fabric.minDriverVersion",
                "may not be more than 32 bytes",
            ],
        ),
        b(
            ("spec.fabric.whenProbeMissing", "enum"),
            "an unknown fabric.whenProbeMissing",
            spec_with(json!({ "fabric": { "whenProbeMissing": "Skip" } })),
            &[
                "spec.fabric.whenProbeMissing",
                "Unsupported value: \"Skip\"",
            ],
        ),
        b(
            ("spec.fabric.groupByLabel", "rule"),
            "a group label that is not a label key",
            spec_with(json!({ "fabric": { "groupByLabel": "rack label" } })),
            &[
                "spec.fabric.groupByLabel",
                "fabric.groupByLabel must be a valid label key, like example.com/nvl-rack",
            ],
        ),
        b(
            ("spec.fabric.groupByLabel", "maxLength"),
            "a group label of 318 characters",
            spec_with(
                json!({ "fabric": { "groupByLabel": format!("{}.example.com/{}", "a".repeat(241), "r".repeat(64)) } }),
            ),
            &["spec.fabric.groupByLabel", "may not be more than 317 bytes"],
        ),
        b(
            ("spec.fabric.computeDomainCliques", "enum"),
            "an unknown fabric.computeDomainCliques",
            spec_with(json!({ "fabric": { "computeDomainCliques": "Watch" } })),
            &[
                "spec.fabric.computeDomainCliques",
                "Unsupported value: \"Watch\"",
            ],
        ),
        b(
            ("spec.fabric.imexMode", "enum"),
            "an unknown fabric.imexMode",
            spec_with(json!({ "fabric": { "imexMode": "Host" } })),
            &["spec.fabric.imexMode", "Unsupported value: \"Host\""],
        ),
        b(
            ("spec.fabric", "rule"),
            "ComputeDomainCliques read under host-managed IMEX",
            spec_with(
                json!({ "fabric": { "imexMode": "HostManaged", "computeDomainCliques": "Check" } }),
            ),
            &[
                "spec.fabric",
                "fabric.computeDomainCliques must be Ignore with fabric.imexMode HostManaged",
            ],
        ),
        b(
            ("spec.external", "rule"),
            "an External layer that reads nothing",
            spec_with(json!({ "external": {} })),
            &[
                "spec.external",
                "external must name at least one preset or condition",
            ],
        ),
        b(
            ("spec.external.presets", "rule"),
            "a preset named twice",
            spec_with(
                json!({ "external": { "presets": ["EksNodeMonitoringAgent", "EksNodeMonitoringAgent"] } }),
            ),
            &[
                "spec.external.presets",
                "external.presets must not repeat a preset",
            ],
        ),
        b(
            ("spec.external.presets", "maxItems"),
            "nine presets",
            spec_with(json!({ "external": { "presets": vec!["EksNodeMonitoringAgent"; 9] } })),
            &["spec.external.presets", "must have at most 8 items"],
        ),
        b(
            ("spec.external.presets[]", "enum"),
            "a preset gpuready does not know",
            spec_with(json!({ "external": { "presets": ["GkeGpuHealth"] } })),
            &[
                "spec.external.presets[0]",
                "Unsupported value: \"GkeGpuHealth\"",
            ],
        ),
        b(
            ("spec.external.conditions", "rule"),
            "a condition type named twice",
            spec_with(
                json!({ "external": { "conditions": [{ "type": "GpuHealthy" }, { "type": "GpuHealthy", "brokenWhen": "False" }] } }),
            ),
            &[
                "spec.external.conditions",
                "external.conditions must not repeat a condition type",
            ],
        ),
        b(
            ("spec.external.conditions", "maxItems"),
            "33 outside conditions",
            spec_with(
                json!({ "external": { "conditions": (0..33).map(|i| json!({ "type": format!("C{i}") })).collect::<Vec<_>>() } }),
            ),
            &["spec.external.conditions", "must have at most 32 items"],
        ),
        b(
            ("spec.external.conditions[]", "required:type"),
            "an outside condition without a type",
            spec_with(json!({ "external": { "conditions": [{ "brokenWhen": "True" }] } })),
            &["spec.external.conditions[0].type", "Required value"],
        ),
        b(
            ("spec.external.conditions[].type", "minLength"),
            "an empty condition type",
            spec_with(json!({ "external": { "conditions": [{ "type": "" }] } })),
            &[
                "spec.external.conditions[0].type",
                "should be at least 1 chars long",
            ],
        ),
        b(
            ("spec.external.conditions[].type", "maxLength"),
            "a condition type of 317 characters",
            spec_with(json!({ "external": { "conditions": [{ "type": "a".repeat(317) }] } })),
            &[
                "spec.external.conditions[0].type",
                "may not be more than 316 bytes",
            ],
        ),
        b(
            ("spec.external.conditions[].type", "rule"),
            "gpuready's own condition as an outside verdict",
            spec_with(json!({ "external": { "conditions": [{ "type": "GpuReadyHealth" }] } })),
            &[
                "spec.external.conditions[0].type",
                "external.conditions[].type must not be gpuready's own GpuReady… conditions (gpuready would judge from what it writes) nor kubelet's Ready (the Node layer reads it)",
            ],
        ),
        b(
            ("spec.external.conditions[].type", "rule"),
            "a condition type with a space",
            spec_with(json!({ "external": { "conditions": [{ "type": "GPU Problem" }] } })),
            &[
                "spec.external.conditions[0].type",
                "external.conditions[].type must be a condition type like GpuHealthy or example.com/GPUProblem (letters, digits, '-', '_', '.', '/')",
            ],
        ),
        b(
            ("spec.external.conditions[].brokenWhen", "enum"),
            "Unknown as the broken status",
            spec_with(
                json!({ "external": { "conditions": [{ "type": "GpuHealthy", "brokenWhen": "Unknown" }] } }),
            ),
            &[
                "spec.external.conditions[0].brokenWhen",
                "Unsupported value: \"Unknown\"",
            ],
        ),
        b(
            ("spec.external.maxHeartbeatAgeSeconds", "minimum"),
            "a heartbeat limit below 30 s",
            spec_with(
                json!({ "external": { "presets": ["NebiusGpuHealthChecks"], "maxHeartbeatAgeSeconds": 29 } }),
            ),
            &[
                "spec.external.maxHeartbeatAgeSeconds",
                "should be greater than or equal to 30",
            ],
        ),
        b(
            ("spec.external.maxHeartbeatAgeSeconds", "maximum"),
            "a heartbeat limit above 7 days",
            spec_with(
                json!({ "external": { "presets": ["NebiusGpuHealthChecks"], "maxHeartbeatAgeSeconds": 604801 } }),
            ),
            &[
                "spec.external.maxHeartbeatAgeSeconds",
                "should be less than or equal to 604800",
            ],
        ),
        b(
            ("spec.external.whenMissing", "enum"),
            "an unknown whenMissing",
            spec_with(
                json!({ "external": { "presets": ["NebiusGpuHealthChecks"], "whenMissing": "Block" } }),
            ),
            &["spec.external.whenMissing", "Unsupported value: \"Block\""],
        ),
        b(
            ("spec.mig.config", "minLength"),
            "an empty mig-manager config name",
            spec_with(json!({ "mig": { "config": "" } })),
            &["spec.mig.config", "should be at least 1 chars long"],
        ),
        b(
            ("spec.mig.config", "maxLength"),
            "a mig-manager config name longer than a label value",
            spec_with(json!({ "mig": { "config": "c".repeat(64) } })),
            &["spec.mig.config", "may not be more than 63 bytes"],
        ),
        b(
            ("spec.mig.devices", "rule"),
            "a MIG profile name that is not one",
            spec_with(json!({ "mig": { "devices": { "1g-18gb": 7 } } })),
            &[
                "spec.mig.devices",
                "mig.devices keys must be MIG profile names",
            ],
        ),
        b(
            ("spec.mig.devices", "maxProperties"),
            "17 MIG profiles",
            spec_with(
                json!({ "mig": { "devices": (1..=17).map(|i| (format!("{i}g.{i}gb"), json!(1))).collect::<serde_json::Map<String, Value>>() } }),
            ),
            &["spec.mig.devices", "must have at most 16 items"],
        ),
        b(
            ("spec.mig.devices{}", "minimum"),
            "zero MIG devices of a profile",
            spec_with(json!({ "mig": { "devices": { "1g.18gb": 0 } } })),
            &[
                "spec.mig.devices.1g.18gb",
                "should be greater than or equal to 1",
            ],
        ),
        b(
            ("spec.mig.devices{}", "maximum"),
            "more MIG devices than any node",
            spec_with(json!({ "mig": { "devices": { "1g.18gb": 1025 } } })),
            &[
                "spec.mig.devices.1g.18gb",
                "should be less than or equal to 1024",
            ],
        ),
        b(
            ("spec.maintenance.deadlineSeconds", "minimum"),
            "a maintenance deadline shorter than a minute",
            spec_with(json!({ "maintenance": { "deadlineSeconds": 59 } })),
            &[
                "spec.maintenance.deadlineSeconds",
                "should be greater than or equal to 60",
            ],
        ),
        b(
            ("spec.maintenance.deadlineSeconds", "maximum"),
            "a maintenance deadline over 30 days",
            spec_with(json!({ "maintenance": { "deadlineSeconds": 2592001 } })),
            &[
                "spec.maintenance.deadlineSeconds",
                "should be less than or equal to 2592000",
            ],
        ),
        b(
            ("spec.escalation", "required:reasons"),
            "an escalation without reasons",
            spec_with(json!({ "escalation": { "dryRunSeconds": 60 } })),
            &["spec.escalation.reasons: Required value"],
        ),
        b(
            ("spec.escalation.reasons", "minItems"),
            "an escalation of no reason",
            spec_with(json!({ "escalation": { "reasons": [] } })),
            &["spec.escalation.reasons", "should have at least 1 items"],
        ),
        b(
            ("spec.escalation.reasons", "maxItems"),
            "17 escalating reasons",
            spec_with(
                json!({ "escalation": { "reasons": (0..17).map(|i| format!("Reason{i}")).collect::<Vec<_>>() } }),
            ),
            &["spec.escalation.reasons", "must have at most 16 items"],
        ),
        b(
            ("spec.escalation.reasons", "rule"),
            "an escalating reason that is no reason name",
            spec_with(json!({ "escalation": { "reasons": ["fatal-xid"] } })),
            &["escalation.reasons must be reason names like FatalXid"],
        ),
        b(
            ("spec.escalation.reasons", "rule"),
            "an escalating reason twice",
            spec_with(json!({ "escalation": { "reasons": ["FatalXid", "FatalXid"] } })),
            &["escalation.reasons must not repeat a reason"],
        ),
        b(
            ("spec.escalation.reasons[]", "minLength"),
            "an empty escalating reason",
            spec_with(json!({ "escalation": { "reasons": [""] } })),
            &[
                "spec.escalation.reasons[0]",
                "should be at least 1 chars long",
            ],
        ),
        b(
            ("spec.escalation.reasons[]", "maxLength"),
            "an escalating reason longer than 64",
            spec_with(json!({ "escalation": { "reasons": [format!("A{}", "b".repeat(64))] } })),
            &[
                "spec.escalation.reasons[0]",
                "may not be more than 64 bytes",
            ],
        ),
        b(
            ("spec.escalation.dryRunSeconds", "minimum"),
            "an escalation with a dry run under 10 s",
            spec_with(json!({ "escalation": { "reasons": ["FatalXid"], "dryRunSeconds": 9 } })),
            &[
                "spec.escalation.dryRunSeconds",
                "should be greater than or equal to 10",
            ],
        ),
        b(
            ("spec.escalation.dryRunSeconds", "maximum"),
            "an escalation with a dry run over 7 days",
            spec_with(
                json!({ "escalation": { "reasons": ["FatalXid"], "dryRunSeconds": 604801 } }),
            ),
            &[
                "spec.escalation.dryRunSeconds",
                "should be less than or equal to 604800",
            ],
        ),
        b(
            ("spec.taintPolicy", "enum"),
            "unknown taint policy",
            spec_with(json!({ "taintPolicy": "Once" })),
            &["spec.taintPolicy", "Unsupported value: \"Once\""],
        ),
        b(
            ("spec.readyLabels", "rule"),
            "ready label gpuready writes itself",
            spec_with(json!({ "readyLabels": { "gpuready.io/ready": "true" } })),
            &[
                "spec.readyLabels",
                "readyLabels must not name keys in gpuready's own domain",
            ],
        ),
        b(
            ("spec.readyLabels", "rule"),
            "ready label in a subdomain of gpuready's",
            spec_with(
                json!({ "readyLabels": { "x.gpuready.io/not-ready-deadline-exceeded": "true" } }),
            ),
            &[
                "spec.readyLabels",
                "readyLabels must not name keys in gpuready's own domain",
            ],
        ),
        // The write storm of issue 24: selectors that read what gpuready writes.
        b(
            ("spec.nodeSelector.matchExpressions[].key", "rule"),
            "selector NotIn on gpuready.io/ready",
            json!({ "nodeSelector": {
                "matchLabels": { "gpu-pool": "talos" },
                "matchExpressions": [{ "key": "gpuready.io/ready", "operator": "NotIn", "values": ["true"] }] } }),
            &[
                "spec.nodeSelector.matchExpressions[0].key",
                "nodeSelector must not read keys gpuready writes itself",
            ],
        ),
        b(
            ("spec.nodeSelector.matchLabels", "rule"),
            "selector on gpuready.io/ready=true",
            json!({ "nodeSelector": { "matchLabels": { "gpuready.io/ready": "true" } } }),
            &[
                "spec.nodeSelector.matchLabels",
                "nodeSelector must not read keys gpuready writes itself",
            ],
        ),
        b(
            ("spec.nodeSelector.matchLabels", "rule"),
            "selector on a future gpuready.io/ key",
            json!({ "nodeSelector": { "matchLabels": { "gpuready.io/anything-new": "x" } } }),
            &[
                "spec.nodeSelector.matchLabels",
                "nodeSelector must not read keys gpuready writes itself",
            ],
        ),
        b(
            ("spec.readyLabels", "rule"),
            "ready label key that is no label key",
            spec_with(json!({ "readyLabels": { "example.com/bad key": "x" } })),
            &[
                "spec.readyLabels",
                "readyLabels keys must be valid label keys",
            ],
        ),
        b(
            ("spec.readyLabels", "rule"),
            "ready label value that is no label value",
            spec_with(json!({ "readyLabels": { "example.com/pool": "-bad-" } })),
            &[
                "spec.readyLabels",
                "readyLabels values must be valid label values",
            ],
        ),
        b(
            ("spec.readyLabels{}", "maxLength"),
            "ready label value of 64 bytes",
            spec_with(json!({ "readyLabels": { "example.com/pool": "a".repeat(64) } })),
            &[
                "spec.readyLabels.example.com/pool",
                "may not be more than 63 bytes",
            ],
        ),
        b(
            ("spec.readyLabels", "maxProperties"),
            "17 ready labels",
            spec_with(json!({ "readyLabels": many_labels })),
            &["spec.readyLabels", "must have at most 16 items"],
        ),
        b(
            ("spec.gpu.products", "rule"),
            "empty product",
            spec_with(json!({ "gpu": { "products": [""] } })),
            &[
                "spec.gpu.products",
                "each product must be 1 to 128 characters",
            ],
        ),
        b(
            ("spec.gpu.products[]", "maxLength"),
            "product of 129 characters",
            spec_with(json!({ "gpu": { "products": ["A".repeat(129)] } })),
            &["spec.gpu.products[0]", "may not be more than 128 bytes"],
        ),
        b(
            ("spec.gpu.products", "rule"),
            "unclosed glob class",
            spec_with(json!({ "gpu": { "products": ["NVIDIA-[RTX"] } })),
            &["spec.gpu.products", "products must be valid patterns"],
        ),
        b(
            ("spec.gpu.products", "rule"),
            "double-star glob",
            spec_with(json!({ "gpu": { "products": ["NVIDIA-**"] } })),
            &["spec.gpu.products", "products must be valid patterns"],
        ),
        b(
            ("spec.gpu.products", "maxItems"),
            "33 products",
            spec_with(json!({ "gpu": { "products": vec!["H100"; 33] } })),
            &["spec.gpu.products", "must have at most 32 items"],
        ),
        b(
            ("spec.gpu.minMemoryMib", "minimum"),
            "zero memory",
            spec_with(json!({ "gpu": { "minMemoryMib": 0 } })),
            &[
                "spec.gpu.minMemoryMib",
                "should be greater than or equal to 1",
            ],
        ),
        b(
            ("spec.gpu.minMemoryMib", "maximum"),
            "16 TiB of GPU memory",
            spec_with(json!({ "gpu": { "minMemoryMib": 16777217 } })),
            &[
                "spec.gpu.minMemoryMib",
                "should be less than or equal to 16777216",
            ],
        ),
        b(
            ("spec.gpu.minComputeCapability", "rule"),
            "compute capability without minor",
            spec_with(json!({ "gpu": { "minComputeCapability": "8" } })),
            &[
                "spec.gpu.minComputeCapability",
                "minComputeCapability must look like 8.6 (major.minor",
            ],
        ),
        b(
            ("spec.gpu.minComputeCapability", "maxLength"),
            "compute capability too long",
            spec_with(json!({ "gpu": { "minComputeCapability": "8.1234567" } })),
            &[
                "spec.gpu.minComputeCapability",
                "may not be more than 8 bytes",
            ],
        ),
        b(
            ("spec.gpu.families", "maxItems"),
            "13 families",
            spec_with(json!({ "gpu": { "families": vec!["ampere"; 13] } })),
            &["spec.gpu.families", "must have at most 12 items"],
        ),
        b(
            ("spec.gpu.families[]", "enum"),
            "unknown family",
            spec_with(json!({ "gpu": { "families": ["Ampere"] } })),
            &["spec.gpu.families[0]", "Unsupported value: \"Ampere\""],
        ),
        b(
            ("spec.gpu.excludedFamilies", "maxItems"),
            "13 excluded families",
            spec_with(json!({ "gpu": { "excludedFamilies": vec!["maxwell"; 13] } })),
            &["spec.gpu.excludedFamilies", "must have at most 12 items"],
        ),
        b(
            ("spec.gpu.excludedFamilies[]", "enum"),
            "unknown excluded family",
            spec_with(json!({ "gpu": { "excludedFamilies": ["ada"] } })),
            &["spec.gpu.excludedFamilies[0]", "Unsupported value: \"ada\""],
        ),
        b(
            ("spec.gpu.count", "minimum"),
            "zero GPUs",
            spec_with(json!({ "gpu": { "count": 0 } })),
            &["spec.gpu.count", "should be greater than or equal to 1"],
        ),
        b(
            ("spec.gpu.count", "maximum"),
            "1025 GPUs",
            spec_with(json!({ "gpu": { "count": 1025 } })),
            &["spec.gpu.count", "should be less than or equal to 1024"],
        ),
        b(
            ("spec.taint", "rule"),
            "taint in the kubernetes.io namespace",
            taint(json!({ "key": "node.kubernetes.io/gpu" })),
            &[
                "spec.taint",
                "taint.key must not be in a namespace other systems own",
            ],
        ),
        b(
            ("spec.taint", "rule"),
            "taint key of the device plugin",
            taint(json!({ "key": "nvidia.com/gpu" })),
            &["spec.taint", "taint.key must not be in a namespace"],
        ),
        b(
            ("spec.taint", "rule"),
            "Karpenter's taint key",
            taint(json!({ "key": "karpenter.sh/disrupted" })),
            &["spec.taint", "taint.key must not be in a namespace"],
        ),
        b(
            ("spec.taint", "rule"),
            "a subdomain of an autoscaler prefix",
            taint(json!({ "key": "x.readiness.k8s.io/gpu" })),
            &["spec.taint", "taint.key must not be in a namespace"],
        ),
        b(
            ("spec.taint.key", "rule"),
            "taint key that is no qualified name",
            taint(json!({ "key": "gpu ready" })),
            &[
                "spec.taint.key",
                "taint.key must be a qualified name like gpuready.io/not-ready",
            ],
        ),
        b(
            ("spec.taint.key", "minLength"),
            "empty taint key",
            taint(json!({ "key": "" })),
            &["spec.taint.key", "should be at least 1 chars long"],
        ),
        b(
            ("spec.taint.key", "maxLength"),
            "taint key of 318 bytes",
            taint(json!({ "key": format!("{}/{}", "a".repeat(253), "b".repeat(64)) })),
            &["spec.taint.key", "may not be more than 317 bytes"],
        ),
        b(
            ("spec.taint.key", "rule"),
            "taint key with a 254-byte prefix",
            taint(json!({ "key": format!("{}/x", "a".repeat(254)) })),
            &[
                "spec.taint.key",
                "taint.key must be a qualified name like gpuready.io/not-ready",
            ],
        ),
        b(
            ("spec.taint.value", "rule"),
            "taint value that is no label value",
            taint(json!({ "value": "not ready" })),
            &[
                "spec.taint.value",
                "taint.value must be a valid label value",
            ],
        ),
        b(
            ("spec.taint.value", "maxLength"),
            "taint value of 64 bytes",
            taint(json!({ "value": "a".repeat(64) })),
            &["spec.taint.value", "may not be more than 63 bytes"],
        ),
        b(
            ("spec.taint.effect", "enum"),
            "unknown taint effect",
            taint(json!({ "effect": "NoExec" })),
            &["spec.taint.effect", "Unsupported value: \"NoExec\""],
        ),
        b(
            ("spec.minDriverVersion", "rule"),
            "driver version part beyond u32",
            spec_with(json!({ "minDriverVersion": "99999999999.1" })),
            &["spec.minDriverVersion", "at most 9 digits a part"],
        ),
        // Issue 24: admitted though meaningless.
        b(
            ("spec.minDriverVersion", "rule"),
            "driver version with leading zeros",
            spec_with(json!({ "minDriverVersion": "0580.065.06" })),
            &["spec.minDriverVersion", "no leading zero in the first two"],
        ),
        b(
            ("spec.cudaVersion", "rule"),
            "CUDA 99.9",
            spec_with(json!({ "cudaVersion": "99.9" })),
            &["spec.cudaVersion", "cudaVersion must be a CUDA release"],
        ),
        b(
            ("spec.gpu.minComputeCapability", "rule"),
            "compute capability 0.0",
            spec_with(json!({ "gpu": { "minComputeCapability": "0.0" } })),
            &["spec.gpu.minComputeCapability", "from 1.0, no leading zero"],
        ),
        b(
            ("spec.gpu.minComputeCapability", "rule"),
            "compute capability 08.6",
            spec_with(json!({ "gpu": { "minComputeCapability": "08.6" } })),
            &["spec.gpu.minComputeCapability", "from 1.0, no leading zero"],
        ),
        b(
            ("spec.gpu", "rule"),
            "a family both allowed and excluded",
            spec_with(json!({ "gpu": { "families": ["ampere"], "excludedFamilies": ["ampere"] } })),
            &[
                "spec.gpu",
                "gpu.families and gpu.excludedFamilies must not share a family",
            ],
        ),
        // Issue 32: admitted by both sides though meaningless.
        b(
            ("spec.gpu.families", "rule"),
            "a family listed twice",
            spec_with(json!({ "gpu": { "families": ["ampere", "hopper", "ampere"] } })),
            &[
                "spec.gpu.families",
                "gpu.families must list each family once",
            ],
        ),
        b(
            ("spec.gpu.excludedFamilies", "rule"),
            "an excluded family listed twice",
            spec_with(json!({ "gpu": { "excludedFamilies": ["maxwell", "maxwell"] } })),
            &[
                "spec.gpu.excludedFamilies",
                "gpu.excludedFamilies must list each family once",
            ],
        ),
        b(
            ("spec.gpu.products", "rule"),
            "an empty glob range",
            spec_with(json!({ "gpu": { "products": ["[z-a]"] } })),
            &[
                "spec.gpu.products",
                "products must not hold a range that matches nothing",
            ],
        ),
        b(
            ("spec.gpu.products", "rule"),
            "a descending digit range inside a product",
            spec_with(json!({ "gpu": { "products": ["NVIDIA-GeForce-RTX-30[9-0]0"] } })),
            &[
                "spec.gpu.products",
                "products must not hold a range that matches nothing",
            ],
        ),
        b(
            ("spec.gatingLayers", "rule"),
            "gating on Health alone",
            spec_with(json!({ "gatingLayers": ["Health"] })),
            &[
                "spec.gatingLayers",
                "gatingLayers must name a layer besides Health",
            ],
        ),
        b(
            ("spec.gpu.products", "rule"),
            "product ?",
            spec_with(json!({ "gpu": { "products": ["?"] } })),
            &["spec.gpu.products", "products must name something"],
        ),
        b(
            ("spec.resources", "rule"),
            "resource under kubernetes.io",
            spec_with(json!({ "resources": { "kubernetes.io/gpu": 1 } })),
            &[
                "spec.resources",
                "resources must not name a resource in kubernetes.io or k8s.io",
            ],
        ),
        b(
            ("spec.taint", "rule"),
            "AKS taint key",
            taint(json!({ "key": "kubernetes.azure.com/scalesetpriority" })),
            &[
                "spec.taint",
                "taint.key must not be in a namespace other systems own",
            ],
        ),
        b(
            ("spec.taint", "rule"),
            "GKE taint key",
            taint(json!({ "key": "cloud.google.com/gke-nodepool" })),
            &[
                "spec.taint",
                "taint.key must not be in a namespace other systems own",
            ],
        ),
        b(
            ("spec.resources{}", "maximum"),
            "resource quantity beyond u32",
            spec_with(json!({ "resources": { "nvidia.com/gpu": 4294967296u64 } })),
            &[
                "spec.resources.nvidia.com/gpu",
                "less than or equal to 4294967295",
            ],
        ),
        b(
            ("spec.readyLabels", "rule"),
            "ready label the kubelet owns",
            spec_with(json!({ "readyLabels": { "kubernetes.io/hostname": "x" } })),
            &[
                "spec.readyLabels",
                "readyLabels must not name keys other systems own",
            ],
        ),
        b(
            ("spec.readyLabels", "rule"),
            "ready label of GFD",
            spec_with(json!({ "readyLabels": { "nvidia.com/gpu.product": "x" } })),
            &[
                "spec.readyLabels",
                "readyLabels must not name keys other systems own",
            ],
        ),
        b(
            ("spec.readyLabels", "rule"),
            "ready label of a node role",
            spec_with(json!({ "readyLabels": { "node-role.kubernetes.io/gpu": "" } })),
            &[
                "spec.readyLabels",
                "readyLabels must not name keys other systems own",
            ],
        ),
        b(
            ("spec", "rule"),
            "ready label that is the selector's own key",
            json!({
                "nodeSelector": { "matchLabels": { "example.com/pool": "a" } },
                "readyLabels": { "example.com/pool": "b" },
            }),
            &["readyLabels must not name a key of nodeSelector"],
        ),
        b(
            ("spec", "rule"),
            "ready label that a selector expression reads",
            json!({
                "nodeSelector": { "matchExpressions": [
                    { "key": "example.com/pool", "operator": "Exists" }] },
                "readyLabels": { "example.com/pool": "b" },
            }),
            &["readyLabels must not name a key of nodeSelector"],
        ),
        b(
            ("spec.nodeSelector.matchLabels", "maxProperties"),
            "33 selector labels",
            json!({ "nodeSelector": { "matchLabels":
                (0..33).map(|i| (format!("example.com/l{i}"), json!("x"))).collect::<serde_json::Map<_, _>>() } }),
            &[
                "spec.nodeSelector.matchLabels",
                "must have at most 32 items",
            ],
        ),
        b(
            ("spec.nodeSelector.matchLabels", "rule"),
            "selector label key that is no label key",
            json!({ "nodeSelector": { "matchLabels": { "a b": "x" } } }),
            &[
                "spec.nodeSelector.matchLabels",
                "nodeSelector.matchLabels keys must be valid label keys",
            ],
        ),
        b(
            ("spec.nodeSelector.matchLabels", "rule"),
            "selector label value that is no label value",
            json!({ "nodeSelector": { "matchLabels": { "pool": "a b" } } }),
            &[
                "spec.nodeSelector.matchLabels",
                "nodeSelector.matchLabels values must be valid label values",
            ],
        ),
        b(
            ("spec.nodeSelector.matchLabels{}", "maxLength"),
            "selector label value of 64 bytes",
            json!({ "nodeSelector": { "matchLabels": { "pool": "a".repeat(64) } } }),
            &[
                "spec.nodeSelector.matchLabels.pool",
                "may not be more than 63 bytes",
            ],
        ),
        b(
            ("spec.nodeSelector.matchExpressions", "maxItems"),
            "33 selector expressions",
            json!({ "nodeSelector": { "matchExpressions":
                vec![json!({ "key": "pool", "operator": "Exists" }); 33] } }),
            &[
                "spec.nodeSelector.matchExpressions",
                "must have at most 32 items",
            ],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[]", "rule"),
            "In without values",
            json!({ "nodeSelector": { "matchExpressions": [{ "key": "pool", "operator": "In" }] } }),
            &[
                "spec.nodeSelector.matchExpressions[0]",
                "nodeSelector.matchExpressions: In and NotIn need at least one value",
            ],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[]", "rule"),
            "Exists with values",
            json!({ "nodeSelector": { "matchExpressions": [
                { "key": "pool", "operator": "Exists", "values": ["a"] }] } }),
            &[
                "spec.nodeSelector.matchExpressions[0]",
                "Exists and DoesNotExist take none",
            ],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[]", "required:key"),
            "selector expression without key",
            json!({ "nodeSelector": { "matchExpressions": [{ "operator": "Exists" }] } }),
            &["spec.nodeSelector.matchExpressions[0].key: Required value"],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[]", "required:operator"),
            "selector expression without operator",
            json!({ "nodeSelector": { "matchExpressions": [{ "key": "pool" }] } }),
            &["spec.nodeSelector.matchExpressions[0].operator: Required value"],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[].key", "rule"),
            "selector expression key that is no label key",
            json!({ "nodeSelector": { "matchExpressions": [{ "key": "-pool", "operator": "Exists" }] } }),
            &[
                "spec.nodeSelector.matchExpressions[0].key",
                "nodeSelector.matchExpressions key must be a valid label key",
            ],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[].key", "maxLength"),
            "selector expression key of 1 MB",
            json!({ "nodeSelector": { "matchExpressions": [
                { "key": "a".repeat(1 << 20), "operator": "Exists" }] } }),
            &[
                "spec.nodeSelector.matchExpressions[0].key",
                "may not be more than 317 bytes",
            ],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[].operator", "enum"),
            "unknown selector operator",
            json!({ "nodeSelector": { "matchExpressions": [
                { "key": "pool", "operator": "Foo", "values": ["a"] }] } }),
            &[
                "spec.nodeSelector.matchExpressions[0].operator",
                "Unsupported value: \"Foo\"",
            ],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[].values", "maxItems"),
            "65 selector values",
            json!({ "nodeSelector": { "matchExpressions": [
                { "key": "pool", "operator": "In", "values": vec!["a"; 65] }] } }),
            &[
                "spec.nodeSelector.matchExpressions[0].values",
                "must have at most 64 items",
            ],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[].values", "rule"),
            "selector value that is no label value",
            json!({ "nodeSelector": { "matchExpressions": [
                { "key": "pool", "operator": "In", "values": ["a b"] }] } }),
            &[
                "spec.nodeSelector.matchExpressions[0].values",
                "nodeSelector.matchExpressions values must be valid label values",
            ],
        ),
        b(
            ("spec.nodeSelector.matchExpressions[].values[]", "maxLength"),
            "selector value of 64 bytes",
            json!({ "nodeSelector": { "matchExpressions": [
                { "key": "pool", "operator": "In", "values": ["a".repeat(64)] }] } }),
            &[
                "spec.nodeSelector.matchExpressions[0].values[0]",
                "may not be more than 63 bytes",
            ],
        ),
    ]
}

/// Every bound and rule in the CRD schema as `(path, keyword)`, with `[]` for
/// array items and `{}` for map values. The k8s-openapi types inside (the label
/// selector, status conditions) are upstream's, not profile.rs's, and are left out.
fn schema_rules(schema: &Value, path: &str, out: &mut BTreeSet<(String, String)>) {
    if ["status.conditions"].contains(&path) {
        return;
    }
    for keyword in [
        "maxLength",
        "minLength",
        "maximum",
        "minimum",
        "maxItems",
        "minItems",
        "maxProperties",
        "minProperties",
        "pattern",
        "enum",
    ] {
        if schema.get(keyword).is_some() {
            out.insert((path.to_owned(), keyword.to_owned()));
        }
    }
    if schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
    {
        out.insert((path.to_owned(), "rule".to_owned()));
    }
    for required in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        out.insert((path.to_owned(), format!("required:{required}")));
    }
    let join = |child: &str| {
        if path.is_empty() {
            child.to_owned()
        } else {
            format!("{path}.{child}")
        }
    };
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            schema_rules(sub, &join(name), out);
        }
    }
    if let Some(items) = schema.get("items") {
        schema_rules(items, &format!("{path}[]"), out);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        schema_rules(values, &format!("{path}{{}}"), out);
    }
}

/// Every CEL rule message in the schema.
fn rule_messages(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(rules) = map
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
            {
                out.extend(
                    rules
                        .iter()
                        .filter_map(|r| r.get("message")?.as_str().map(str::to_owned)),
                );
            }
            map.values().for_each(|v| rule_messages(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| rule_messages(v, out)),
        _ => {}
    }
}

fn openapi_schema() -> Value {
    let crd = serde_json::to_value(committed_crd()).expect("json");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// The table below must grow with profile.rs: a new bound or rule without a bad
/// profile fails here, before anyone wonders whether the server enforces it.
#[test]
fn every_schema_rule_has_a_bad_profile() {
    let schema = openapi_schema();
    let mut rules = BTreeSet::new();
    schema_rules(&schema, "", &mut rules);
    let mut covered: BTreeSet<(String, String)> = bad_cases()
        .iter()
        .map(|c| (c.covers.0.to_owned(), c.covers.1.to_owned()))
        .collect();
    // Covered by their own tests: spec is always sent; the status bound is
    // exercised by `status_summary_is_bounded`.
    covered.insert((String::new(), "required:spec".into()));
    covered.insert(("status.notReadySummary".into(), "maxItems".into()));
    covered.insert(("status.notReadySummary[]".into(), "required:layer".into()));
    covered.insert(("status.notReadySummary[]".into(), "required:name".into()));
    covered.insert(("status.notReadySummary[]".into(), "required:reason".into()));
    // The tainted-device summary is bounded the same way (written by gpuready only).
    covered.insert(("status.taintedDeviceSummary".into(), "maxItems".into()));
    covered.insert((
        "status.taintedDeviceSummary[]".into(),
        "required:node".into(),
    ));
    covered.insert((
        "status.taintedDeviceSummary[]".into(),
        "required:devices".into(),
    ));
    covered.insert((
        "status.taintedDeviceSummary[].devices".into(),
        "maxItems".into(),
    ));
    // The lifecycle summaries and escalations are bounded the same way
    // (written by gpuready only).
    for (list, fields) in [
        (
            "status.maintenanceSummary",
            &["name", "reason", "detail"][..],
        ),
        (
            "status.waitingForGateSummary",
            &["name", "reason", "detail"][..],
        ),
        (
            "status.escalations",
            &["node", "device", "reason", "effect", "noExecuteAt"][..],
        ),
    ] {
        covered.insert((list.into(), "maxItems".into()));
        for f in fields {
            covered.insert((format!("{list}[]"), format!("required:{f}")));
        }
    }
    let missing: Vec<_> = rules.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "schema rules without a bad profile: {missing:?}"
    );
    let stale: Vec<_> = covered.difference(&rules).collect();
    assert!(
        stale.is_empty(),
        "bad profiles for rules the schema lacks: {stale:?}"
    );

    let mut messages = Vec::new();
    rule_messages(&schema, &mut messages);
    for message in messages {
        assert!(
            bad_cases().iter().any(|c| c
                .expect
                .iter()
                .any(|e| message.starts_with(e) || message == *e)),
            "no bad profile expects the CEL message {message:?}"
        );
    }
}

#[tokio::test]
async fn every_rule_rejects_its_bad_profile_with_its_message() {
    let env = env().await;
    let mut failures = Vec::new();
    for case in bad_cases() {
        let name = case.name.clone().unwrap_or_else(|| unique_name("bad"));
        match create_raw_profile(
            &env.client().expect("client"),
            &raw_profile(&name, case.spec.clone()),
        )
        .await
        {
            Ok(_) => failures.push(format!("{}: accepted {}", case.what, case.spec)),
            Err(kube::Error::Api(status)) => {
                let missing: Vec<_> = case
                    .expect
                    .iter()
                    .filter(|e| !status.message.contains(*e))
                    .collect();
                if status.code != 422 || !missing.is_empty() {
                    failures.push(format!(
                        "{}: HTTP {} lacks {missing:?}: {}",
                        case.what, status.code, status.message
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", case.what)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Bad profiles `GpuNodeProfileSpec::validate` still accepts although the API
/// server refuses them: schema bounds validate.rs does not repeat yet. A ratchet:
/// the test below fails when this list is wrong in either direction, so fixing
/// validate.rs means deleting lines here.
const KNOWN_OFFLINE_GAPS: &[&str] = &[];

/// `gpuready check` validates offline with `GpuNodeProfileSpec::validate`, which
/// promises to refuse what the API server refuses. Bad profiles the Rust types
/// cannot even hold (unknown enum values, negative numbers) count as refused.
#[test]
fn offline_validation_refuses_every_bad_profile() {
    let mut accepted = BTreeSet::new();
    for case in bad_cases() {
        let name = case.name.clone().unwrap_or_else(|| "bad".into());
        if let Ok(p) = serde_json::from_value::<gpuready_api::GpuNodeProfile>(raw_profile(
            &name,
            case.spec.clone(),
        )) && p.validate().is_empty()
        {
            accepted.insert(case.what);
        }
    }
    let known: BTreeSet<&str> = KNOWN_OFFLINE_GAPS.iter().copied().collect();
    let new_gaps: Vec<_> = accepted.difference(&known).collect();
    let fixed: Vec<_> = known.difference(&accepted).collect();
    assert!(
        new_gaps.is_empty(),
        "validate() accepts what the API server refuses: {new_gaps:?}"
    );
    assert!(
        fixed.is_empty(),
        "validate() now refuses {fixed:?}: remove them from KNOWN_OFFLINE_GAPS"
    );
}

#[tokio::test]
async fn status_summary_is_bounded() {
    let env = env().await;
    let name = unique_name("status");
    create_raw_profile(
        &env.client().expect("client"),
        &raw_profile(&name, minimal_spec()),
    )
    .await
    .expect("good profile");
    let summary = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({ "name": format!("node-{i}"), "layer": "Driver", "reason": "DriverMissing" }))
            .collect()
    };
    profiles(env)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "notReadySummary": summary(20) } })),
        )
        .await
        .expect("20 entries are allowed");
    let err = profiles(env)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "notReadySummary": summary(21) } })),
        )
        .await
        .expect_err("21 entries are refused");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422
            && s.message.contains("status.notReadySummary")
            && s.message.contains("must have at most 20 items")),
        "{err:?}"
    );
    let err = profiles(env)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "notReadySummary": [{ "name": "n" }] } })),
        )
        .await
        .expect_err("an entry without layer and reason is refused");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422
            && s.message.contains("status.notReadySummary[0].layer: Required value")
            && s.message.contains("status.notReadySummary[0].reason: Required value")),
        "{err:?}"
    );
}

#[tokio::test]
async fn good_profiles_are_accepted_and_defaulted() {
    let env = env().await;

    // Only the required field: the server fills in every default.
    let created = create_raw_profile(
        &env.client().expect("client"),
        &raw_profile(&unique_name("minimal"), minimal_spec()),
    )
    .await
    .expect("minimal profile");
    let spec = created.spec;
    assert_eq!(spec.mode, Mode::Enforce);
    assert_eq!(spec.taint_policy, TaintPolicy::Continuous);
    assert_eq!(spec.taint.key, "readiness.k8s.io/gpuready-not-ready");
    assert_eq!(spec.taint.value, "true");
    assert_eq!(spec.taint.effect, TaintEffect::NoSchedule);
    assert_eq!(spec.max_label_age_seconds, 3600);
    assert!(!spec.per_layer_node_conditions);
    assert!(spec.validate().is_empty());

    // Every field set, each at a limit where one exists.
    let full = json!({
        "nodeSelector": {
            "matchLabels": { "nvidia.com/gpu.present": "true" },
            "matchExpressions": [{ "key": "pool", "operator": "In", "values": ["a", "b"] }],
        },
        "gpu": {
            "products": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-*", "A".repeat(128)],
            "minMemoryMib": 16777216,
            "minComputeCapability": "10.0",
            "families": ["hopper", "ampere", "ada-lovelace"],
            "excludedFamilies": ["maxwell"],
            "count": 1024,
            "maxGpusPerNumaNode": 1024,
        },
        "fabric": {
            "cliques": ["9277d399-0674-44a9-b64e-d85bb19ce2b0.32766", "9277d399-0674-44a9-b64e-d85bb19ce2b0.4294967295"],
            "minDriverVersion": "570.158.01",
            "whenProbeMissing": "Blocking",
            "groupByLabel": "example.com/nvl-rack",
            "computeDomainCliques": "Require",
            "imexMode": "DriverManaged",
        },
        "external": {
            "presets": ["EksNodeMonitoringAgent", "AksNodeProblemDetector", "NebiusGpuHealthChecks", "MetaGcmHealthChecks"],
            "conditions": [{ "type": "example.com/GPUProblem", "brokenWhen": "True" }, { "type": "GpuHealthy", "brokenWhen": "False" }],
            "maxHeartbeatAgeSeconds": 604800,
            "whenMissing": "Blocking",
        },
        "minDriverVersion": "580.65.06",
        "cudaVersion": "12.4",
        "gatingLayers": ["Node", "Hardware", "Driver", "DevicePlugin", "FeatureDiscovery",
            "Profile", "Compatibility"],
        "resources": { "nvidia.com/gpu": 8, "nvidia.com/mig-1g.10gb": 7 },
        "maxLabelAgeSeconds": 604800,
        "mode": "Observe",
        "taintPolicy": "UntilFirstReady",
        "taint": { "key": "example.com/gpu-not-ready", "value": "", "effect": "NoExecute" },
        "readyLabels": { "example.com/gpu-pool": "h100", "ready": "a".repeat(63) },
        "perLayerNodeConditions": true,
        "evidence": "DRA",
        "workload": "VmPassthrough",
        "sandboxResources": vec!["nvidia.com/GH100_H200_SXM_141GB"; 16],
        "notReadyDeadline": { "seconds": 2592000, "since": "LastReady", "label": true },
    });
    let created = create_raw_profile(
        &env.client().expect("client"),
        &raw_profile(&unique_name("full"), full.clone()),
    )
    .await
    .expect("full profile");
    assert_eq!(
        serde_json::to_value(&created.spec).expect("json"),
        full,
        "the server kept every field as sent"
    );
    assert!(created.spec.validate().is_empty());

    // Minimum driver version with two parts; zero label age disables the check.
    let created = create_raw_profile(
        &env.client().expect("client"),
        &raw_profile(
            &unique_name("two-part"),
            spec_with(json!({ "minDriverVersion": "570.26", "maxLabelAgeSeconds": 0 })),
        ),
    )
    .await
    .expect("two-part driver version");
    assert!(created.spec.validate().is_empty());
}

/// Optional fields are `nullable` in the schema (the Rust types are `Option`), so
/// `field: null` from kubectl must pass both the bounds and the CEL rules.
#[tokio::test]
async fn explicit_nulls_are_accepted() {
    let env = env().await;
    let spec = spec_with(json!({
        "minDriverVersion": null,
        "cudaVersion": null,
        "gatingLayers": null,
        "gpu": { "minMemoryMib": null, "minComputeCapability": null, "count": null },
        "fabric": { "imexMode": null },
    }));
    create_raw_profile(
        &env.client().expect("client"),
        &raw_profile(&unique_name("nulls"), spec),
    )
    .await
    .expect("profile with explicit nulls");
}

/// Every document of every `deploy/examples/**/profiles*.yaml` is accepted by the
/// API server (server-side dry run, so example names never collide) and by the
/// offline validation.
#[tokio::test]
async fn example_profiles_are_accepted() {
    let examples = repo_root().join("deploy/examples");
    let mut files = Vec::new();
    collect_profile_files(&examples, &mut files);
    files.sort();
    // Zero files means the examples moved or were renamed, not "nothing to check".
    assert!(
        !files.is_empty(),
        "no profiles*.yaml under {}",
        examples.display()
    );

    let env = env().await;
    let client = env.client().expect("client");
    let mut failures = Vec::new();
    let mut applied = 0;
    for file in &files {
        let rel = file
            .strip_prefix(repo_root())
            .unwrap_or(file)
            .display()
            .to_string();
        for (i, doc) in yaml_documents(&std::fs::read_to_string(file).expect("example file"))
            .into_iter()
            .enumerate()
        {
            let what = format!("{rel} document {}", i + 1);
            if let Err(e) = dry_run_create(&client, &doc).await {
                failures.push(format!("{what}: {e}"));
                continue;
            }
            applied += 1;
            if doc.get("kind").and_then(Value::as_str) == Some("GpuNodeProfile") {
                match serde_json::from_value::<GpuNodeProfile>(doc.clone()) {
                    Ok(p) => {
                        let errors = p.spec.validate();
                        if !errors.is_empty() {
                            failures.push(format!("{what}: offline validation: {errors:?}"));
                        }
                    }
                    Err(e) => failures.push(format!("{what}: not a GpuNodeProfile: {e}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(applied > 0, "no documents in {files:?}");
    println!(
        "{applied} example documents from {} files accepted",
        files.len()
    );
}

fn collect_profile_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            collect_profile_files(&path, out);
        } else if name.starts_with("profiles")
            && (name.ends_with(".yaml") || name.ends_with(".yml"))
        {
            out.push(path);
        }
    }
}

/// Creates any object with `dryRun=All`: full validation and admission, nothing stored.
async fn dry_run_create(client: &kube::Client, doc: &Value) -> Result<(), String> {
    let object: DynamicObject = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let types = object.types.clone().ok_or("no apiVersion/kind")?;
    let gvk = GroupVersionKind::try_from(&types).map_err(|e| e.to_string())?;
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("discovering {gvk:?}: {e}"))?;
    let api: Api<DynamicObject> = match caps.scope {
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        kube::discovery::Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            object.metadata.namespace.as_deref().unwrap_or("default"),
            &resource,
        ),
    };
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&params, &object)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Applying the committed CRD prints no warning: the API server warned
/// `unrecognized format "uint32"` for every unsigned field on every apply before
/// the generator replaced those formats by their bounds.
#[tokio::test]
async fn applying_the_crd_prints_no_warning() {
    let env = env().await;
    let out = env
        .kubectl()
        .args([
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager",
            "gpuready-tests",
        ])
        .args(["--dry-run=server", "-f"])
        .arg(repo_root().join(CRD_FILE))
        .output()
        .expect("run kubectl");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("Warning"),
        "kubectl apply printed a warning: {stderr}"
    );
}
