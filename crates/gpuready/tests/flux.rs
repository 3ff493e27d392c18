//! The Flux layout in `deploy/flux/` and the kstatus compatibility of
//! GpuNodeProfile status, against a real kube-apiserver.
//!
//! - The layout is consistent: the HelmRelease points at this chart and version,
//!   remediates installs and upgrades, its values pass the chart's schema; the
//!   profiles Kustomization depends on the release's Kustomization and
//!   health-checks every profile it applies; the profiles are accepted by the CRD.
//!   (Flux's own CRDs are not in the test cluster, so the Flux objects are checked
//!   field by field here, not by the API server.)
//! - Flux's health assessment reads profiles right: the generic kstatus rules
//!   (implemented below as kstatus states them) give Current / InProgress / Failed
//!   / Terminating for profiles the controller reconciled, and the CEL
//!   `healthCheckExprs` of the layout, evaluated by the API server's own CEL (a
//!   ValidatingAdmissionPolicy per expression), agree — and, unlike plain kstatus,
//!   never call a profile without a verdict Current.
//!
//! Both tests share this binary's control plane; the kstatus test runs the only
//! controller in it.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use gpuready_api::GpuNodeProfile;
use gpuready_testenv::{TestEnv, unique_name};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use support::*;

const FLUX: &str = "deploy/flux";

/// The shared control plane with the chart's copy of the CRD.
async fn env() -> &'static TestEnv {
    shared_env_with_crds(&[CHART_CRD]).await
}

/// Every YAML document under `deploy/flux`, with the file it came from.
fn flux_documents() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut dirs = vec![repo_root().join(FLUX)];
    while let Some(dir) = dirs.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                let rel = path
                    .strip_prefix(repo_root())
                    .expect("under the repo")
                    .display()
                    .to_string();
                let text = std::fs::read_to_string(&path).expect("read YAML");
                out.extend(yaml_documents(&text).into_iter().map(|d| (rel.clone(), d)));
            }
        }
    }
    out
}

fn one<'a>(docs: &'a [(String, Value)], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "exactly one {kind} {name} in {FLUX}");
    found[0]
}

/// The Flux Kustomization named `name` (as opposed to a kustomize kustomization.yaml).
fn flux_kustomization<'a>(docs: &'a [(String, Value)], name: &str) -> &'a Value {
    docs.iter()
        .map(|(_, d)| d)
        .find(|d| {
            d["kind"] == "Kustomization"
                && d["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("kustomize.toolkit.fluxcd.io/"))
                && d["metadata"]["name"] == name
        })
        .unwrap_or_else(|| panic!("no Flux Kustomization {name}"))
}

#[tokio::test]
async fn flux_layout_installs_this_chart_and_health_checks_every_profile() {
    let env = env().await;
    let docs = flux_documents();
    let chart: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(chart_dir().join("Chart.yaml")).expect("Chart.yaml"),
    )
    .expect("Chart.yaml");

    // Source and release.
    let repo = one(&docs, "HelmRepository", "gpuready");
    let url = repo["spec"]["url"].as_str().expect("url");
    // The OCI repository the release workflow pushes the chart to.
    assert_eq!(url, "oci://ghcr.io/gpuready/charts");
    assert_eq!(repo["spec"]["type"], "oci", "an OCI HelmRepository");
    let hr = one(&docs, "HelmRelease", "gpuready");
    assert_eq!(hr["apiVersion"], "helm.toolkit.fluxcd.io/v2");
    let spec = &hr["spec"];
    assert_eq!(spec["chart"]["spec"]["chart"], chart["name"]);
    let constraint = spec["chart"]["spec"]["version"].as_str().expect("version");
    let version = chart["version"].as_str().expect("chart version");
    let prefix = constraint.trim_end_matches('x');
    assert!(
        constraint.ends_with(".x") && version.starts_with(prefix),
        "chart {version} satisfies {constraint}"
    );
    let source = &spec["chart"]["spec"]["sourceRef"];
    assert_eq!(source["kind"], "HelmRepository");
    assert_eq!(source["name"], repo["metadata"]["name"]);
    assert_eq!(source["namespace"], repo["metadata"]["namespace"]);
    for phase in ["install", "upgrade"] {
        assert!(
            spec[phase]["remediation"]["retries"]
                .as_i64()
                .is_some_and(|r| r > 0),
            "{phase} remediation"
        );
        assert_eq!(spec[phase]["crds"], "CreateReplace", "{phase}.crds");
    }
    assert_eq!(spec["upgrade"]["remediation"]["strategy"], "rollback");
    let ns = hr["metadata"]["namespace"].as_str().expect("namespace");
    let namespace = one(&docs, "Namespace", ns);
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );

    // The release's values pass the chart's schema and render.
    let values = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(
        values.path(),
        serde_json::to_string(&spec["values"]).expect("values JSON"),
    )
    .expect("write values");
    let rendered = render(
        env,
        "gpuready",
        ns,
        &["-f", values.path().to_str().expect("utf-8")],
    )
    .await;
    let rendered = yaml_documents(&rendered);
    let image = &find_doc(&rendered, "Deployment", None)["spec"]["template"]["spec"]["containers"]
        [0]["image"];
    assert!(
        image
            .as_str()
            .is_some_and(|i| i.starts_with("ghcr.io/gpuready/gpuready:")),
        "{image}"
    );

    // The two Flux Kustomizations: the release's waits for it, the profiles' depends on it.
    let release_ks = flux_kustomization(&docs, "gpuready");
    assert_eq!(
        release_ks["spec"]["wait"], true,
        "health-checks the HelmRelease"
    );
    let release_path = release_ks["spec"]["path"].as_str().expect("path");
    let profiles_ks = flux_kustomization(&docs, "gpuready-profiles");
    assert_eq!(
        profiles_ks["spec"]["dependsOn"],
        json!([{ "name": "gpuready" }])
    );
    let profiles_path = profiles_ks["spec"]["path"].as_str().expect("path");
    let hr_file = docs
        .iter()
        .find(|(_, d)| d["kind"] == "HelmRelease")
        .map(|(f, _)| f.clone())
        .expect("HelmRelease file");
    assert!(
        hr_file.starts_with(release_path.trim_start_matches("./")),
        "{hr_file} under {release_path}"
    );

    // kustomize builds both folders; the profiles one holds only GpuNodeProfiles,
    // every one health-checked, and the API server accepts them.
    let release_build = must(
        kubectl(
            env,
            &[
                "kustomize",
                &repo_root().join(release_path).display().to_string(),
            ],
        ),
        None,
        "kubectl kustomize of the release folder",
    )
    .await;
    let built: BTreeSet<String> = yaml_documents(&release_build)
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        built,
        ["HelmRelease", "HelmRepository", "Namespace"]
            .map(String::from)
            .into()
    );
    let profiles_build = must(
        kubectl(
            env,
            &[
                "kustomize",
                &repo_root().join(profiles_path).display().to_string(),
            ],
        ),
        None,
        "kubectl kustomize of the profiles folder",
    )
    .await;
    let profiles: Vec<Value> = yaml_documents(&profiles_build);
    assert!(!profiles.is_empty());
    let checked: BTreeSet<&str> = profiles_ks["spec"]["healthChecks"]
        .as_array()
        .expect("healthChecks")
        .iter()
        .filter(|h| h["kind"] == "GpuNodeProfile" && h["apiVersion"] == "gpuready.io/v1alpha1")
        .filter_map(|h| h["name"].as_str())
        .collect();
    for p in &profiles {
        assert_eq!(p["kind"], "GpuNodeProfile");
        let name = p["metadata"]["name"].as_str().expect("name");
        assert!(
            checked.contains(name),
            "profile {name} is not health-checked"
        );
    }
    let exprs = &profiles_ks["spec"]["healthCheckExprs"][0];
    assert_eq!(exprs["kind"], "GpuNodeProfile");
    must(
        kubectl(env, &["apply", "--dry-run=server", "-f", "-"]),
        Some(&profiles_build),
        "server dry run of the profiles",
    )
    .await;
}

/// kstatus's result for an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KStatus {
    InProgress,
    Failed,
    Current,
    Terminating,
}

/// The generic rules of kstatus (sigs.k8s.io/cli-utils/pkg/kstatus/status), which
/// Flux applies to custom resources, in kstatus's order: a deletionTimestamp is
/// Terminating; a `status.observedGeneration` different from
/// `metadata.generation` is InProgress; a `Reconciling` condition True is
/// InProgress, a `Stalled` one True is Failed; then the `Ready` condition: True is
/// Current, anything else InProgress; and with none of these, Current.
fn kstatus(obj: &Value) -> (KStatus, String) {
    if obj["metadata"]["deletionTimestamp"].is_string() {
        return (KStatus::Terminating, "being deleted".into());
    }
    let generation = obj["metadata"]["generation"].as_i64();
    if let Some(observed) = obj["status"]["observedGeneration"].as_i64()
        && Some(observed) != generation
    {
        return (
            KStatus::InProgress,
            format!("generation {generation:?}, observed {observed}"),
        );
    }
    let conditions = obj["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in &conditions {
        match (c["type"].as_str(), c["status"].as_str()) {
            (Some("Reconciling"), Some("True")) => {
                return (KStatus::InProgress, format!("Reconciling: {}", c["reason"]));
            }
            (Some("Stalled"), Some("True")) => {
                return (KStatus::Failed, format!("Stalled: {}", c["reason"]));
            }
            _ => {}
        }
    }
    if let Some(ready) = conditions.iter().find(|c| c["type"] == "Ready") {
        let why = format!("Ready={}: {}", ready["status"], ready["reason"]);
        return match ready["status"].as_str() {
            Some("True") => (KStatus::Current, why),
            _ => (KStatus::InProgress, why),
        };
    }
    (KStatus::Current, "no status to go by".into())
}

async fn profile_json(client: &Client, name: &str) -> Value {
    serde_json::to_value(
        raw_profile_api(client)
            .get(name)
            .await
            .expect("get profile"),
    )
    .expect("profile JSON")
}

/// A healthy RTX 3090 node of the example, renamed and moved out of the
/// example's pool into `labels`.
fn node_like_3090(name: &str, labels: Value) -> Value {
    let mut node = example_nodes(EXAMPLE)
        .into_iter()
        .find(|n| n["metadata"]["name"] == "gpu-3090")
        .expect("gpu-3090 in the example");
    node["metadata"]["name"] = json!(name);
    let labels_obj = node["metadata"]["labels"].as_object_mut().expect("labels");
    labels_obj.remove("gpu-pool");
    for (k, v) in labels.as_object().expect("labels") {
        node["metadata"]["labels"][k] = v.clone();
    }
    node
}

fn profile(name: &str, match_labels: Value) -> Value {
    json!({
        "apiVersion": "gpuready.io/v1alpha1", "kind": "GpuNodeProfile",
        "metadata": { "name": name },
        "spec": {
            "nodeSelector": { "matchLabels": match_labels },
            "gpu": { "products": ["NVIDIA-GeForce-RTX-3090"] },
            "minDriverVersion": "570.0",
        },
    })
}

/// Evaluates the layout's CEL health expressions with the API server's CEL: one
/// ValidatingAdmissionPolicy per expression (rooted at `object.` as admission
/// expressions are), bound by a label; a server-side dry-run patch that adds the
/// label is allowed exactly when the expression is true for the stored profile.
struct CelProbe {
    client: Client,
    label: String,
    names: Vec<String>,
}

impl CelProbe {
    async fn install(client: &Client, exprs: &[(&str, String)]) -> CelProbe {
        let label = "cel-probe.gpuready.test/expr".to_owned();
        let vap = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicy",
            ),
            "validatingadmissionpolicies",
        );
        let binding = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicyBinding",
            ),
            "validatingadmissionpolicybindings",
        );
        let policies: Api<DynamicObject> = Api::all_with(client.clone(), &vap);
        let bindings: Api<DynamicObject> = Api::all_with(client.clone(), &binding);
        let mut names = Vec::new();
        // A policy that is always false goes last: once it denies, the others
        // (created before it) are loaded too.
        let mut all: Vec<(&str, String)> = exprs.to_vec();
        all.push(("sentinel", "false".into()));
        for (which, expr) in &all {
            let name = unique_name(&format!("cel-{which}"));
            let policy = json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": { "name": name },
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": { "resourceRules": [{
                        "apiGroups": ["gpuready.io"], "apiVersions": ["v1alpha1"],
                        "operations": ["UPDATE"], "resources": ["gpunodeprofiles"],
                    }]},
                    "validations": [{ "expression": rooted(expr), "message": format!("{which} is false") }],
                },
            });
            let bind = json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": { "name": name },
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": { "objectSelector": { "matchLabels": { label.clone(): which } } },
                },
            });
            let pp = PatchParams::apply("gpuready-tests").force();
            policies
                .patch(&name, &pp, &Patch::Apply(&policy))
                .await
                .unwrap_or_else(|e| panic!("policy for {which}: {e}"));
            bindings
                .patch(&name, &pp, &Patch::Apply(&bind))
                .await
                .unwrap_or_else(|e| panic!("binding for {which}: {e}"));
            names.push(name);
        }
        CelProbe {
            client: client.clone(),
            label,
            names,
        }
    }

    /// Whether expression `which` is true for profile `name`.
    async fn eval(&self, name: &str, which: &str) -> bool {
        let patch = json!({ "metadata": { "labels": { self.label.clone(): which } } });
        let params = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        match raw_profile_api(&self.client)
            .patch(name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => true,
            Err(kube::Error::Api(s)) if s.message.contains("ValidatingAdmissionPolicy") => false,
            Err(e) => panic!("evaluating {which} on {name}: {e}"),
        }
    }

    async fn wait_loaded(&self, name: &str) {
        for _ in 0..100 {
            if !self.eval(name, "sentinel").await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("the ValidatingAdmissionPolicies never took effect");
    }

    async fn remove(self) {
        for plural in [
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicies",
        ] {
            let kind = if plural.ends_with("bindings") {
                "ValidatingAdmissionPolicyBinding"
            } else {
                "ValidatingAdmissionPolicy"
            };
            let api: Api<DynamicObject> = Api::all_with(
                self.client.clone(),
                &ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
                    plural,
                ),
            );
            for n in &self.names {
                let _ = api.delete(n, &DeleteParams::default()).await;
            }
        }
    }
}

/// Roots a Flux health expression (whose variables are the object's top-level
/// fields) at `object.`, as admission expressions are.
fn rooted(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len() + 32);
    let mut rest = expr;
    while let Some(c) = rest.chars().next() {
        let boundary = out
            .chars()
            .last()
            .is_none_or(|p| !(p.is_alphanumeric() || matches!(p, '_' | '.' | '?' | '\'')));
        if boundary {
            for root in ["status", "metadata", "spec"] {
                if rest.starts_with(root)
                    && !rest[root.len()..]
                        .chars()
                        .next()
                        .is_some_and(|n| n.is_alphanumeric() || n == '_')
                {
                    out.push_str("object.");
                    break;
                }
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[tokio::test]
async fn kstatus_and_the_flux_health_expressions_read_reconciled_profiles() {
    let env = env().await;
    let client = env.client().expect("client");

    // Example nodes (one ready, two not) under the example profile; a pool of one
    // ready node; two profiles claiming the same node; a profile matching nothing.
    create_example_nodes(&client, EXAMPLE).await;
    apply_example_profiles(&client, EXAMPLE).await;
    create_dumped_node(
        &client,
        &node_like_3090("solo-1", json!({ "pool": "solo" })),
    )
    .await;
    create_dumped_node(
        &client,
        &node_like_3090("twin-1", json!({ "pool": "twin" })),
    )
    .await;
    apply_profile_json(&client, profile("solo", json!({ "pool": "solo" }))).await;
    apply_profile_json(&client, profile("twin-a", json!({ "pool": "twin" }))).await;
    apply_profile_json(&client, profile("twin-b", json!({ "pool": "twin" }))).await;
    apply_profile_json(&client, profile("nobody", json!({ "pool": "none" }))).await;
    // A report-only profile whose node is not ready (24 GiB < 48 GB asked).
    create_dumped_node(
        &client,
        &node_like_3090("watch-1", json!({ "pool": "watch" })),
    )
    .await;
    let mut watch = profile("watch", json!({ "pool": "watch" }));
    watch["spec"]["mode"] = json!("Observe");
    watch["spec"]["gpu"]["minMemoryMib"] = json!(48000);
    apply_profile_json(&client, watch).await;

    // Before gpuready has looked, plain kstatus calls a profile Current.
    let fresh = profile_json(&client, "solo").await;
    assert_eq!(
        kstatus(&fresh).0,
        KStatus::Current,
        "kstatus's default without status"
    );

    let run = start_controller(env, test_args());
    let expected = [
        ("solo", KStatus::Current),
        ("nobody", KStatus::Current),
        ("ampere-ada", KStatus::InProgress),
        ("twin-a", KStatus::Failed),
        ("twin-b", KStatus::Failed),
        // Observe with a not-ready node: nothing to reconcile, so Current.
        ("watch", KStatus::Current),
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut seen = Vec::new();
        for (name, want) in expected {
            let p = profile_json(&client, name).await;
            let (got, why) = kstatus(&p);
            let judged = p["status"]["observedGeneration"] == p["metadata"]["generation"];
            seen.push((name, judged && got == want, got, why));
        }
        if seen.iter().all(|s| s.1) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "profiles did not reach their kstatus in 60s: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for (name, want) in expected {
        let (got, why) = kstatus(&profile_json(&client, name).await);
        println!("{name}: {got:?} ({why})");
        assert_eq!(got, want, "{name}");
    }
    let ampere: GpuNodeProfile = Api::all(client.clone())
        .get("ampere-ada")
        .await
        .expect("profile");
    assert_eq!(ampere.status.as_ref().map(|s| s.not_ready_nodes), Some(2));
    // What `kubectl get gnp` shows in its Status column (the Ready reason).
    let ready_reason = |p: &Value| {
        p["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .map(|c| (c["status"].clone(), c["reason"].clone()))
    };
    assert_eq!(
        ready_reason(&profile_json(&client, "twin-a").await),
        Some((json!("False"), json!("Conflict"))),
        "a conflict is named as one"
    );
    let watch = profile_json(&client, "watch").await;
    assert_eq!(
        ready_reason(&watch),
        Some((json!("True"), json!("ObservedNodesNotReady"))),
        "{watch}"
    );
    assert_eq!(watch["status"]["notReadyNodes"], 1, "still counted");

    // The layout's CEL expressions, by the API server's CEL, agree.
    let docs = flux_documents();
    let exprs = &flux_kustomization(&docs, "gpuready-profiles")["spec"]["healthCheckExprs"][0];
    let expr = |k: &str| exprs[k].as_str().expect("expression").to_owned();
    let probe = CelProbe::install(
        &client,
        &[
            ("current", expr("current")),
            ("failed", expr("failed")),
            ("inprogress", expr("inProgress")),
        ],
    )
    .await;
    probe.wait_loaded("solo").await;
    let verdict = |which: &str| -> KStatus {
        match which {
            "current" => KStatus::Current,
            "failed" => KStatus::Failed,
            _ => KStatus::InProgress,
        }
    };
    for (name, want) in expected {
        let mut truths = Vec::new();
        for which in ["current", "failed", "inprogress"] {
            if probe.eval(name, which).await {
                truths.push(verdict(which));
            }
        }
        assert_eq!(truths, [want], "{name}: expressions true for {truths:?}");
    }

    // A spec change gpuready has not judged yet: InProgress for both readers.
    run.stop().await.expect("clean stop");
    raw_profile_api(&client)
        .patch(
            "solo",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "readyLabels": { "example.org/pool": "solo" } } })),
        )
        .await
        .expect("edit profile");
    let edited = profile_json(&client, "solo").await;
    assert_eq!(kstatus(&edited).0, KStatus::InProgress, "{edited}");
    assert!(probe.eval("solo", "inprogress").await);
    assert!(!probe.eval("solo", "current").await);
    // A profile gpuready never saw: no status at all. kstatus says Current (the
    // gap the expressions close); no expression can say Current.
    apply_profile_json(&client, profile("unseen", json!({ "pool": "later" }))).await;
    assert_eq!(
        kstatus(&profile_json(&client, "unseen").await).0,
        KStatus::Current
    );
    assert!(!probe.eval("unseen", "current").await);
    assert!(!probe.eval("unseen", "failed").await);

    // gpuready judges the new generation: Current again.
    let run = start_controller(env, test_args());
    eventually(60, "solo Current after the edit", || async {
        let p = profile_json(&client, "solo").await;
        (kstatus(&p).0 == KStatus::Current
            && p["status"]["observedGeneration"] == p["metadata"]["generation"])
            .then_some(())
    })
    .await;
    assert!(probe.eval("solo", "current").await);
    run.stop().await.expect("clean stop");

    // Deletion held by a finalizer: Terminating.
    let api = raw_profile_api(&client);
    api.patch(
        "nobody",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": ["gpuready.test/hold"] } })),
    )
    .await
    .expect("add finalizer");
    api.delete("nobody", &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(
        kstatus(&profile_json(&client, "nobody").await).0,
        KStatus::Terminating
    );
    api.patch(
        "nobody",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .expect("remove finalizer");
    probe.remove().await;
}

#[test]
fn rooting_touches_only_top_level_fields() {
    assert_eq!(
        rooted("status.?observedGeneration.orValue(-1) != metadata.generation && c.status == 'x'"),
        "object.status.?observedGeneration.orValue(-1) != object.metadata.generation && c.status == 'x'"
    );
    assert_eq!(rooted("(statusx || spec.a)"), "(statusx || object.spec.a)");
    assert_eq!(rooted("'status' == x"), "'status' == x");
}
