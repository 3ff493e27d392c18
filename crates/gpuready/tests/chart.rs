//! The install path against a real kube-apiserver: the Helm chart (lint, schema,
//! server-side dry runs with defaults and with every optional feature, the
//! restricted Pod Security Standard, `helm install`, `helm upgrade` of the CRD,
//! profiles from values, uninstall keeping the CRD), the raw manifests (kept equal
//! to `helm template`, applied server-side), and the RBAC: gpuready run in-process
//! as the chart's ServiceAccount converges an example (sufficient) and is refused
//! what it must not do (minimal). One test records how the API server authorizes
//! a server-side apply that creates an object, which the ClusterRole relies on.
//!
//! ServiceMonitor and PrometheusRule are validated against stand-in CRDs
//! (`tests/fixtures/monitoring-standin-crds.yaml`: the subset of the
//! monitoring.coreos.com/v1 schema the chart uses), since the test cluster has no
//! prometheus-operator. Regenerate the raw manifests with
//! `UPDATE_MANIFESTS=1 cargo test -p gpuready --test chart raw_manifests`.

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use gpuready_api::{GpuNodeProfile, keys};
use gpuready_testenv::{TestEnv, unique_name};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use support::*;

const RELEASE: &str = "gpuready";
const MANIFESTS: &str = "deploy/manifests/gpuready.yaml";
const MANIFESTS_NAMESPACE: &str = "gpuready-system";
const MONITORING_CRDS: &str = "crates/gpuready/tests/fixtures/monitoring-standin-crds.yaml";
const NFD_CRDS: [&str; 3] = [
    "nodefeatures.nfd.k8s-sigs.io",
    "nodefeaturerules.nfd.k8s-sigs.io",
    "nodefeaturegroups.nfd.k8s-sigs.io",
];

/// Values that turn every optional feature of the chart on.
const ALL_FEATURES: &str = r#"
metrics:
  service:
    annotations: {prometheus.io/scrape: "true"}
  serviceMonitor:
    enabled: true
    labels: {release: prometheus}
    relabelings:
      - action: replace
        targetLabel: cluster
        replacement: test
    metricRelabelings:
      - action: drop
        sourceLabels: [__name__]
        regex: gpuready_api_requests_total
prometheusRule:
  enabled: true
  labels: {release: prometheus}
  alertLabels: {team: gpu-platform}
  additionalRules:
    - alert: GpuReadyReconcileErrors
      expr: sum(rate(gpuready_reconcile_errors_total[5m])) > 0
      for: 10m
      labels: {severity: info}
profiles:
  rtx3090:
    nodeSelector:
      matchLabels: {gpu-pool: rtx3090}
    gpu:
      products: [NVIDIA-GeForce-RTX-3090]
      minMemoryMib: 24000
    minDriverVersion: "570.0"
    taint:
      key: example.org/gpu-not-ready
  observe-only:
    nodeSelector:
      matchExpressions:
        - {key: gpu-pool, operator: In, values: [a100]}
    mode: Observe
extraReadinessTaintKeys: [example.org/other-gate]
tolerations:
  - {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}
imagePullSecrets: [{name: regcred}]
priorityClassName: system-cluster-critical
podAnnotations: {example.org/note: all-features}
podLabels: {example.org/tier: control}
commonLabels: {example.org/team: gpu-platform}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels: {app.kubernetes.io/name: gpuready}
nodeSelector: {kubernetes.io/os: linux}
controller:
  nodeLabelSelector: nvidia.com/gpu.present=true
  nfdCrds: check
  extraArgs: [--concurrency=4]
  extraEnv: [{name: GPUREADY_EXAMPLE, value: "1"}]
serviceAccount:
  annotations: {example.org/owner: gpu-platform}
leaderElection:
  leaseName: gpuready-leader
image:
  digest: sha256:0000000000000000000000000000000000000000000000000000000000000000
"#;

/// The shared control plane with the GpuNodeProfile CRD (the chart's copy) and
/// the monitoring stand-in CRDs installed, once per test binary.
async fn shared_env() -> &'static TestEnv {
    shared_env_with_crds(&[CHART_CRD, MONITORING_CRDS]).await
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn kinds(docs: &[Value]) -> BTreeSet<String> {
    docs.iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn helm_lint_is_clean_and_wrong_values_are_refused_by_name() {
    let env = shared_env().await;
    let chart = chart_dir();
    let chart = path_str(&chart);
    let lint = must(helm(env, &["lint", "--strict", chart]), None, "helm lint").await;
    assert!(lint.contains("0 chart(s) failed"), "{lint}");
    let (_dir, all) = temp_file("all-features.yaml", ALL_FEATURES);
    let lint = must(
        helm(env, &["lint", "--strict", chart, "-f", path_str(&all)]),
        None,
        "helm lint with every feature",
    )
    .await;
    assert!(lint.contains("0 chart(s) failed"), "{lint}");

    // Each wrong value fails rendering with a message naming the key.
    let cases: &[(&[&str], &str)] = &[
        (
            &["--set", "controller.nfdCrds=sometimes"],
            "at '/controller/nfdCrds': value must be one of 'apply', 'check', 'off'",
        ),
        (
            &["--set", "replicaCnt=3"],
            "additional properties 'replicaCnt' not allowed",
        ),
        (&["--set", "replicaCount=0"], "at '/replicaCount'"),
        (
            &["--set", "controller.heartbeat=5 minutes"],
            "at '/controller/heartbeat'",
        ),
        (
            &["--set", "controller.safetyBrake.threshold=1.5"],
            "at '/controller/safetyBrake/threshold'",
        ),
        (
            &["--set", "image.pullPolicy=Sometimes"],
            "at '/image/pullPolicy'",
        ),
        (
            &["--set", "metrics.serviceMonitor.interval=often"],
            "at '/metrics/serviceMonitor/interval'",
        ),
        (
            &["--set", "profiles.Not_A_Name.nodeSelector.matchLabels.a=b"],
            "invalid propertyName 'Not_A_Name'",
        ),
        (
            &["--set", "profiles.p1.gpu.products[0]=x"],
            "missing property 'nodeSelector'",
        ),
        (
            &["--set", "leaderElection.enabled=false"],
            "leaderElection.enabled is false",
        ),
        (
            &[
                "--set",
                "metrics.service.enabled=false",
                "--set",
                "metrics.serviceMonitor.enabled=true",
            ],
            "metrics.serviceMonitor.enabled needs metrics.service.enabled",
        ),
        (
            &["--set", "podDisruptionBudget.minAvailable=2"],
            "must be lower than replicaCount",
        ),
    ];
    for (args, expected) in cases {
        let mut full = vec!["template", "x", chart];
        full.extend_from_slice(args);
        let out = run(helm(env, &full), None).await;
        assert!(
            !out.ok,
            "{args:?} should be refused, rendered:\n{}",
            out.stdout
        );
        assert!(
            out.stderr.contains(expected),
            "{args:?}: expected {expected:?} in:\n{}",
            out.stderr
        );
    }
    // One replica without leader election is allowed, and then has no PDB.
    let single = render(
        env,
        RELEASE,
        "default",
        &[
            "--set",
            "replicaCount=1",
            "--set",
            "leaderElection.enabled=false",
        ],
    )
    .await;
    let docs = yaml_documents(&single);
    assert!(!kinds(&docs).contains("PodDisruptionBudget"));
    let args =
        &find_doc(&docs, "Deployment", None)["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .expect("args")
            .contains(&json!("--leader-elect=false"))
    );
}

#[tokio::test]
async fn rendered_chart_passes_server_dry_run_with_defaults_and_with_every_feature() {
    let env = shared_env().await;
    let ns = env
        .create_namespace("chart-dry-run")
        .await
        .expect("namespace");

    // Defaults: exactly these objects, accepted by the API server.
    let defaults = render(env, RELEASE, &ns, &[]).await;
    let docs = yaml_documents(&defaults);
    let expected: BTreeSet<String> = [
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "Deployment",
        // The pre-delete hook that releases the nodes on `helm uninstall`.
        "Job",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    .map(String::from)
    .into();
    assert_eq!(kinds(&docs), expected);
    let out = must(
        kubectl(env, &["apply", "--dry-run=server", "-f", "-"]),
        Some(&defaults),
        "server dry run of the defaults",
    )
    .await;
    assert_eq!(out.lines().count(), docs.len(), "{out}");

    // The Deployment is what gpuready needs and matches the Dockerfile.
    let deploy = find_doc(&docs, "Deployment", None);
    assert_eq!(deploy["spec"]["replicas"], 2);
    let pod = &deploy["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let app_version = chart_app_version();
    assert_eq!(
        c["image"],
        format!("ghcr.io/gpuready/gpuready:{app_version}"),
        "the chart points at the image the release workflow publishes"
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for a in [
        "run",
        "--leader-elect=true",
        "--lease-name=gpuready",
        "--nfd-crds=apply",
        "--http-addr=0.0.0.0:8080",
    ] {
        assert!(args.contains(&a), "{a} missing from {args:?}");
    }
    for (var, field) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        let env_var = c["env"]
            .as_array()
            .expect("env")
            .iter()
            .find(|e| e["name"] == var)
            .unwrap_or_else(|| panic!("{var} not set"));
        assert_eq!(env_var["valueFrom"]["fieldRef"]["fieldPath"], field);
    }
    // The current default and the earlier one (nodes registered with it).
    assert_eq!(
        pod["tolerations"],
        json!([
            { "key": keys::PREVIOUS_DEFAULT_TAINT_KEYS[0], "operator": "Exists" },
            { "key": keys::DEFAULT_TAINT_KEY, "operator": "Exists" },
        ])
    );
    let (uid, gid) = dockerfile_user();
    assert_eq!(pod["securityContext"]["runAsUser"], uid);
    assert_eq!(pod["securityContext"]["runAsGroup"], gid);
    let pdb = find_doc(&docs, "PodDisruptionBudget", None);
    assert_eq!(pdb["spec"]["minAvailable"], 1);

    // Every feature on: the optional kinds appear and are accepted too.
    let (_dir, values) = temp_file("all-features.yaml", ALL_FEATURES);
    let all = render(
        env,
        RELEASE,
        &ns,
        &[
            "-f",
            path_str(&values),
            "--api-versions",
            "gpuready.io/v1alpha1/GpuNodeProfile",
        ],
    )
    .await;
    let docs = yaml_documents(&all);
    for kind in ["ServiceMonitor", "PrometheusRule", "GpuNodeProfile"] {
        assert!(kinds(&docs).contains(kind), "{kind} not rendered");
    }
    let out = must(
        kubectl(env, &["apply", "--dry-run=server", "-f", "-"]),
        Some(&all),
        "server dry run with every feature",
    )
    .await;
    assert_eq!(out.lines().count(), docs.len(), "{out}");
    let pod = &find_doc(&docs, "Deployment", None)["spec"]["template"]["spec"];
    let tolerated: BTreeSet<&str> = pod["tolerations"]
        .as_array()
        .expect("tolerations")
        .iter()
        .filter_map(|t| t["key"].as_str())
        .collect();
    let want: BTreeSet<&str> = [
        keys::DEFAULT_TAINT_KEY,
        keys::PREVIOUS_DEFAULT_TAINT_KEYS[0],
        "example.org/gpu-not-ready",
        "example.org/other-gate",
        "dedicated",
    ]
    .into();
    assert_eq!(tolerated, want, "profile taint keys are tolerated");
    assert_eq!(
        pod["containers"][0]["image"],
        "ghcr.io/gpuready/gpuready@sha256:0000000000000000000000000000000000000000000000000000000000000000"
    );
    let rules = find_doc(&docs, "PrometheusRule", None)["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| {
            (
                r["alert"].as_str().unwrap_or_default().to_owned(),
                r["expr"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect::<Vec<_>>();
    for (alert, metric) in [
        ("GpuReadyNodeNotReady", "gpuready_node_not_ready{"),
        ("GpuReadyNfdCrdsOutdated", "gpuready_nfd_crd_state{"),
        (
            "GpuReadySafetyBrakeEngaged",
            "gpuready_safety_brake_engaged{",
        ),
    ] {
        assert!(
            rules.iter().any(|(a, e)| a == alert && e.contains(metric)),
            "{alert} over {metric} missing: {rules:?}"
        );
    }
    // With --nfd-crds=check the ClusterRole grants no CRD write at all.
    let role = find_doc(&docs, "ClusterRole", None);
    assert!(
        !role["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| r["resources"] == json!(["customresourcedefinitions"])
                && r["verbs"]
                    .as_array()
                    .is_some_and(|v| v.contains(&json!("patch")))),
        "{role}"
    );

    // The stand-in CRDs have teeth: a misspelt ServiceMonitor field is refused.
    let typo = all.replace("scrapeTimeout:", "scrapeTimout:");
    let out = run(
        kubectl(env, &["apply", "--dry-run=server", "-f", "-"]),
        Some(&typo),
    )
    .await;
    assert!(
        !out.ok
            && out
                .stderr
                .contains("unknown field \"spec.endpoints[0].scrapeTimout\""),
        "{}",
        out.stderr
    );
}

fn chart_app_version() -> String {
    let text = std::fs::read_to_string(chart_dir().join("Chart.yaml")).expect("Chart.yaml");
    let chart: Value = serde_yaml_ng::from_str(&text).expect("Chart.yaml");
    chart["appVersion"].as_str().expect("appVersion").to_owned()
}

/// `USER uid:gid` of the Dockerfile's final stage.
fn dockerfile_user() -> (u32, u32) {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).expect("Dockerfile");
    let user = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER line");
    let (u, g) = user.trim().split_once(':').expect("USER uid:gid");
    (u.parse().expect("uid"), g.parse().expect("gid"))
}

#[tokio::test]
async fn restricted_namespace_admits_the_deployment_and_its_pod() {
    let env = shared_env().await;
    let client = env.client().expect("client");
    let ns = unique_name("restricted");
    let namespace: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": { "name": ns, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
            "pod-security.kubernetes.io/warn": "restricted",
            "pod-security.kubernetes.io/audit": "restricted",
        }},
    }))
    .expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");

    let docs = yaml_documents(&render(env, RELEASE, &ns, &[]).await);
    let deploy = find_doc(&docs, "Deployment", None).clone();
    // Deployments are only warned about; no warning means the template complies.
    let out = run(
        kubectl(env, &["apply", "--dry-run=server", "-f", "-"]),
        Some(&serde_json::to_string(&deploy).expect("json")),
    )
    .await;
    assert!(out.ok, "{}", out.stderr);
    assert!(
        !out.stderr.contains("PodSecurity"),
        "PodSecurity warning: {}",
        out.stderr
    );

    // No controller manager makes pods here, so create the pod the Deployment
    // would make, with a server-side dry run: enforce=restricted admits it.
    let template = &deploy["spec"]["template"];
    let pod = |spec: &Value| -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "gpuready-template", "namespace": ns,
                          "labels": template["metadata"]["labels"] },
            "spec": spec,
        }))
        .expect("pod")
    };
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    pods.create(&dry, &pod(&template["spec"]))
        .await
        .expect("the restricted namespace admits gpuready's pod");

    // Control: without the container securityContext the same pod is refused,
    // so the admission above was a real check.
    let mut weaker = template["spec"].clone();
    weaker["containers"][0]
        .as_object_mut()
        .expect("container")
        .remove("securityContext");
    let err = pods
        .create(&dry, &pod(&weaker))
        .await
        .expect_err("a pod without the securityContext is refused");
    assert!(
        err.to_string()
            .contains("violates PodSecurity \"restricted:latest\""),
        "{err}"
    );
}

/// The raw manifests: a Namespace, then `helm template` with default values,
/// without the chart's hooks (`kubectl apply` would run the uninstall hook at
/// once: it stops the controller).
async fn expected_manifests(env: &TestEnv) -> String {
    let rendered = render(env, RELEASE, MANIFESTS_NAMESPACE, &["--no-hooks"]).await;
    format!(
        "# gpuready, rendered from charts/gpuready with default values:\n\
         #   helm template {RELEASE} charts/gpuready --namespace {MANIFESTS_NAMESPACE} --no-hooks\n\
         # plus the Namespace below. Do not edit: change the chart, then run\n\
         #   UPDATE_MANIFESTS=1 cargo test -p gpuready --test chart raw_manifests\n\
         # Install: kubectl apply --server-side -f {MANIFESTS}\n\
         # The image is the published ghcr.io/gpuready/gpuready; to run your own build,\n\
         # point the Deployment at it (see charts/gpuready/README.md, \"Image\").\n\
         ---\n\
         apiVersion: v1\n\
         kind: Namespace\n\
         metadata:\n  \
           name: {MANIFESTS_NAMESPACE}\n  \
           labels:\n    \
             pod-security.kubernetes.io/enforce: restricted\n\
         {rendered}"
    )
}

#[tokio::test]
async fn raw_manifests_are_the_chart_rendered_with_defaults_and_apply_server_side() {
    let env = shared_env().await;
    let expected = expected_manifests(env).await;
    let path = repo_root().join(MANIFESTS);
    if std::env::var_os("UPDATE_MANIFESTS").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, &expected).expect("write manifests");
    }
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{MANIFESTS}: {e}; run with UPDATE_MANIFESTS=1"));
    if committed != expected {
        let diff = similar::TextDiff::from_lines(&committed, &expected)
            .unified_diff()
            .header(MANIFESTS, "helm template")
            .to_string();
        panic!("{MANIFESTS} is out of date; run with UPDATE_MANIFESTS=1.\n{diff}");
    }

    // The README's raw-manifest path, as written there.
    let out = must(
        kubectl(env, &["apply", "--server-side", "-f", path_str(&path)]),
        None,
        "kubectl apply --server-side of the raw manifests",
    )
    .await;
    assert_eq!(
        out.lines().count(),
        yaml_documents(&committed).len(),
        "{out}"
    );
    let client = env.client().expect("client");
    wait_established(&client, &[CRD_NAME]).await;
    let deploy = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
        client.clone(),
        MANIFESTS_NAMESPACE,
    )
    .get(RELEASE)
    .await
    .expect("the Deployment exists");
    assert_eq!(deploy.spec.and_then(|s| s.replicas), Some(2));
    // Applying again changes nothing (no field fights with the defaults).
    let again = must(
        kubectl(env, &["apply", "--server-side", "-f", path_str(&path)]),
        None,
        "second apply",
    )
    .await;
    assert!(
        again.lines().all(|l| l.ends_with("serverside-applied")),
        "{again}"
    );
}

/// What RBAC does with a server-side apply that creates an object — the facts the
/// ClusterRole's CRD rules rest on, checked on the real API server with CRDs of a
/// throwaway group:
/// 1. an apply that would create needs `create`, not just `patch`;
/// 2. that `create` is authorized with the object's name, so `resourceNames`
///    limits it (the apply of a name outside the list is refused);
/// 3. a POST create is refused even for a listed name: its name is unknown at
///    authorization time, so `create` with `resourceNames` never allows a POST.
#[tokio::test]
async fn server_side_apply_that_creates_needs_create_and_resource_names_limit_it() {
    let env = shared_env().await;
    let admin = env.client().expect("client");
    let group = format!("{}.rbac-probe.gpuready.test", unique_name("g"));
    let crd = |plural: &str| -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": format!("{plural}.{group}") },
            "spec": {
                "group": group,
                "names": { "kind": plural.to_uppercase(), "plural": plural },
                "scope": "Cluster",
                "versions": [{ "name": "v1", "served": true, "storage": true,
                    "schema": { "openAPIV3Schema": { "type": "object" } } }],
            },
        }))
        .expect("crd")
    };
    let (listed, also_listed, unlisted) = (crd("widgets"), crd("gadgets"), crd("gizmos"));
    let user = unique_name("rbac-probe");
    let role = |verbs: &[&str]| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": user },
            "rules": [{
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "verbs": verbs,
                "resourceNames": [listed.name_any(), also_listed.name_any()],
            }],
        })
    };
    let apply_admin = |v: Value| {
        let admin = admin.clone();
        async move {
            let gvk_api: Api<kube::api::DynamicObject> = Api::all_with(
                admin,
                &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                    "rbac.authorization.k8s.io",
                    "v1",
                    v["kind"].as_str().expect("kind"),
                )),
            );
            gvk_api
                .patch(
                    v["metadata"]["name"].as_str().expect("name"),
                    &PatchParams::apply("gpuready-tests").force(),
                    &Patch::Apply(&v),
                )
                .await
                .expect("apply RBAC object");
        }
    };
    apply_admin(role(&["get", "patch"])).await;
    apply_admin(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": user },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))
    .await;
    let as_user: Api<CustomResourceDefinition> =
        Api::all(env.client_as(&user, &[]).expect("client"));
    let ssa = |c: &CustomResourceDefinition| {
        let api = as_user.clone();
        let c = c.clone();
        async move {
            api.patch(
                &c.name_any(),
                &PatchParams::apply("gpuready").force(),
                &Patch::Apply(&c),
            )
            .await
        }
    };

    // 1. patch alone: the apply that would create is refused, as a create.
    let err = eventually(10, "the binding to take effect", || async {
        match ssa(&listed).await {
            Err(e) if e.to_string().contains("cannot create resource") => Some(e),
            _ => None,
        }
    })
    .await;
    assert_eq!(status_code(&err), Some(403), "{err}");

    // 2. create + patch, limited by name: the listed name applies, others not.
    apply_admin(role(&["get", "patch", "create"])).await;
    eventually(10, "apply creates the listed CRD", || async {
        ssa(&listed).await.ok()
    })
    .await;
    let err = ssa(&unlisted).await.expect_err("unlisted name refused");
    assert_eq!(status_code(&err), Some(403), "{err}");
    // ... and the same apply again (an update now) is allowed by `patch`.
    ssa(&listed).await.expect("re-apply");

    // 3. a POST create is refused even for a listed name.
    let err = as_user
        .create(&PostParams::default(), &also_listed)
        .await
        .expect_err("POST create refused");
    assert_eq!(status_code(&err), Some(403), "{err}");
    ssa(&also_listed)
        .await
        .expect("the same CRD by server-side apply is allowed");

    let crds: Api<CustomResourceDefinition> = Api::all(admin);
    for c in [&listed, &also_listed] {
        let _ = crds.delete(&c.name_any(), &DeleteParams::default()).await;
    }
}

/// Installs the chart as release `gpuready` into `ns` and returns helm's output.
async fn helm_install(env: &TestEnv, ns: &str, extra: &[&str]) -> String {
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

#[tokio::test]
async fn helm_install_then_gpuready_as_its_service_account_converges_and_is_refused_the_rest() {
    let env = TestEnv::start().await.expect("test control plane");
    let admin = env.client().expect("client");
    let ns = "gpuready-system";
    helm_install(&env, ns, &[]).await;

    // The release's objects are in the cluster and the CRD is Established.
    let status = must(
        helm(&env, &["status", RELEASE, "-n", ns, "-o", "json"]),
        None,
        "helm status",
    )
    .await;
    let status: Value = serde_json::from_str(&status).expect("helm status JSON");
    assert_eq!(status["info"]["status"], "deployed", "{status}");
    let manifest = must(
        helm(&env, &["get", "manifest", RELEASE, "-n", ns]),
        None,
        "helm get manifest",
    )
    .await;
    for doc in yaml_documents(&manifest) {
        let (kind, name) = (
            doc["kind"].as_str().expect("kind"),
            doc["metadata"]["name"].as_str().expect("name"),
        );
        let namespace = doc["metadata"]["namespace"].as_str();
        let mut get = vec!["get", kind, name, "-o", "name"];
        if let Some(n) = namespace {
            get.extend(["-n", n]);
        }
        must(kubectl(&env, &get), None, &format!("{kind} {name} exists")).await;
    }
    wait_established(&admin, &[CRD_NAME]).await;

    // gpuready, run as the chart's ServiceAccount, converges the example.
    let nodes = create_example_nodes(&admin, EXAMPLE).await;
    assert_eq!(nodes.len(), 3);
    let profiles = apply_example_profiles(&admin, EXAMPLE).await;
    assert_eq!(profiles, ["ampere-ada"]);
    let identity = "gpuready-7d4b9c-abcde";
    let args = run_args(&[
        "--leader-elect=true",
        &format!("--lease-name={RELEASE}"),
        &format!("--lease-namespace={ns}"),
        &format!("--identity={identity}"),
        "--nfd-crds=apply",
    ]);
    let run = start_controller_with(service_account_config(&env, ns, RELEASE), args);
    let node_api: Api<Node> = Api::all(admin.clone());
    let expected = [
        ("gpu-3090", "True", "Ready"),
        ("gpu-4070tis", "False", "DevicesUnhealthy"),
        ("gpu-3090-b", "False", "GfdLabelsStale"),
    ];
    eventually(60, "nodes converge to the example's verdicts", || async {
        for (name, status, reason) in expected {
            let n = node_api.get(name).await.ok()?;
            let tainted = taint_keys(&n).contains(&keys::DEFAULT_TAINT_KEY.to_owned());
            let ready_label = n.labels().get(keys::LABEL_READY).cloned();
            let want_label = if status == "True" { "true" } else { "false" };
            let ok = gpu_ready(&n) == Some((status.into(), reason.into()))
                && tainted == (status != "True")
                && ready_label.as_deref() == Some(want_label);
            if !ok {
                return None;
            }
        }
        Some(())
    })
    .await;
    let profile_api: Api<GpuNodeProfile> = Api::all(admin.clone());
    let crd_api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    eventually(60, "profile status and NFD CRDs converge", || async {
        let s = profile_api.get("ampere-ada").await.ok()?.status?;
        let nfd_ok = s
            .conditions
            .iter()
            .any(|c| c.type_ == keys::CONDITION_NFD_CRDS && c.status == "True");
        (s.matched_nodes == 3 && s.ready_nodes == 1 && s.not_ready_nodes == 2 && nfd_ok)
            .then_some(())
    })
    .await;
    for name in NFD_CRDS {
        wait_established(&admin, &[name]).await;
        let crd = crd_api.get(name).await.expect("NFD CRD");
        assert!(
            crd.managed_fields()
                .iter()
                .any(|m| m.manager.as_deref() == Some(keys::FIELD_MANAGER)),
            "{name} applied by gpuready"
        );
        assert_eq!(
            run.sample(&format!(
                "gpuready_nfd_crd_state{{crd=\"{name}\",state=\"current\"}}"
            )),
            1.0,
            "{name} current"
        );
    }
    let lease = Api::<Lease>::namespaced(admin.clone(), ns)
        .get(RELEASE)
        .await
        .expect("the Lease exists");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(identity)
    );
    let events = Api::<Event>::namespaced(admin.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("events");
    let ours = events
        .items
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("gpuready"))
        .count();
    assert!(ours > 0, "gpuready published Events in `default`");
    assert_eq!(
        run.sample("gpuready_reconcile_errors_total{kind=\"forbidden\"}"),
        0.0,
        "no reconcile was refused"
    );
    assert_eq!(run.sample("gpuready_leader"), 1.0);
    println!(
        "as the ServiceAccount: {} write requests, {} reads",
        run.writes_sent(),
        run.reads_sent()
    );
    run.stop().await.expect("clean stop");

    // ... and is refused everything else it could be tempted to do.
    let sa = env
        .client_as_service_account(ns, RELEASE)
        .expect("SA client");
    let refused = |what: &str, r: Result<(), kube::Error>| match r {
        Err(e) if status_code(&e) == Some(403) => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    };
    refused(
        "list Secrets in its namespace",
        list::<Secret>(&sa, Some(ns)).await,
    );
    refused("list Secrets cluster-wide", list::<Secret>(&sa, None).await);
    refused(
        "get a Secret in kube-system",
        Api::<Secret>::namespaced(sa.clone(), "kube-system")
            .get("anything")
            .await
            .map(drop),
    );
    refused("list ConfigMaps", list::<ConfigMap>(&sa, Some(ns)).await);
    refused("list Pods", list::<Pod>(&sa, None).await);
    let sa_nodes: Api<Node> = Api::all(sa.clone());
    refused(
        "delete a Node",
        sa_nodes
            .delete("gpu-3090", &DeleteParams::default())
            .await
            .map(drop),
    );
    let node = node_api.get("gpu-3090").await.expect("node");
    refused(
        "replace (PUT) a Node",
        sa_nodes
            .replace("gpu-3090", &PostParams::default(), &node)
            .await
            .map(drop),
    );
    let sa_crds: Api<CustomResourceDefinition> = Api::all(sa.clone());
    let foreign: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.example.org" },
        "spec": { "group": "example.org", "scope": "Cluster",
            "names": { "kind": "Widget", "plural": "widgets" },
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object" } } }] },
    }))
    .expect("crd");
    refused(
        "create a foreign CRD by server-side apply",
        sa_crds
            .patch(
                "widgets.example.org",
                &PatchParams::apply("gpuready").force(),
                &Patch::Apply(&foreign),
            )
            .await
            .map(drop),
    );
    refused(
        "create a foreign CRD by POST",
        sa_crds
            .create(&PostParams::default(), &foreign)
            .await
            .map(drop),
    );
    refused(
        "list all CRDs",
        list::<CustomResourceDefinition>(&sa, None).await,
    );
    refused(
        "patch its own GpuNodeProfile CRD (Helm owns it)",
        sa_crds
            .patch(
                CRD_NAME,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
            )
            .await
            .map(drop),
    );
    refused(
        "delete an NFD CRD",
        sa_crds
            .delete(NFD_CRDS[0], &DeleteParams::default())
            .await
            .map(drop),
    );
    let sa_profiles: Api<GpuNodeProfile> = Api::all(sa.clone());
    refused(
        "change a profile's spec",
        sa_profiles
            .patch(
                "ampere-ada",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"mode": "Observe"}})),
            )
            .await
            .map(drop),
    );
    refused(
        "delete a profile",
        sa_profiles
            .delete("ampere-ada", &DeleteParams::default())
            .await
            .map(drop),
    );
    let sa_leases: Api<Lease> = Api::namespaced(sa.clone(), ns);
    refused(
        "delete its Lease",
        sa_leases
            .delete(RELEASE, &DeleteParams::default())
            .await
            .map(drop),
    );
    refused(
        "read another Lease",
        sa_leases.get("someone-else").await.map(drop),
    );
    refused(
        "read Leases in kube-system",
        Api::<Lease>::namespaced(sa.clone(), "kube-system")
            .get(RELEASE)
            .await
            .map(drop),
    );
    let event: Event = serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": { "name": "probe", "namespace": "kube-system" },
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "gpuready", "reportingInstance": identity,
        "action": "Probe", "reason": "Probe", "type": "Normal",
    }))
    .expect("event");
    refused(
        "write Events outside `default`",
        Api::<Event>::namespaced(sa.clone(), "kube-system")
            .create(&PostParams::default(), &event)
            .await
            .map(drop),
    );
}

/// Lists `K` in `ns` (or cluster-wide) with a raw request, so one helper serves
/// namespaced and cluster-scoped kinds alike.
async fn list<K>(client: &Client, ns: Option<&str>) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let req = http::Request::get(K::url_path(&(), ns))
        .body(Vec::new())
        .expect("request");
    client
        .request::<kube::core::ObjectList<K>>(req)
        .await
        .map(drop)
}

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

/// Sample names gpuready exports, from the metric registry's `# TYPE` lines (a
/// family only shows up once it has a sample, so each gets one).
fn exported_samples() -> BTreeSet<String> {
    use gpuready::controller::metrics::{
        CrdState, Kind, NodeLayer, NodeNotReady, NodeSeries, Profile, ProfileLayer, ProfileNode,
        ProfileState,
    };
    let m = gpuready::controller::Metrics::default();
    let (profile, s) = ("p".to_owned(), "s".to_owned());
    m.nodes
        .get_or_create(&ProfileState {
            profile: profile.clone(),
            state: s.clone(),
        })
        .set(1);
    m.layer_ready
        .get_or_create(&ProfileLayer {
            profile: profile.clone(),
            layer: s.clone(),
        })
        .set(1);
    m.brake
        .get_or_create(&Profile {
            profile: profile.clone(),
        })
        .set(1);
    m.tainted_devices.get_or_create(&Profile { profile }).set(1);
    // The per-node families, from one not-ready node with a gated GPU.
    let node = |s: &str| s.to_owned();
    m.set_node_series(
        "p",
        NodeSeries {
            not_ready: [NodeNotReady {
                profile: node("p"),
                node: node("n"),
                mode: node("Enforce"),
                state: node("not_ready"),
                layer: node("Health"),
                reason: node("ProbeMissing"),
            }]
            .into(),
            layers: [NodeLayer {
                profile: node("p"),
                node: node("n"),
                layer: node("Health"),
                reason: node("ProbeMissing"),
            }]
            .into(),
            tainted_devices: [(
                ProfileNode {
                    profile: node("p"),
                    node: node("n"),
                },
                1,
            )]
            .into(),
        },
    );
    m.reconcile_errors
        .get_or_create(&Kind { kind: s.clone() })
        .inc();
    m.count_write("labels");
    m.count_request("GET", false);
    m.nfd_crds
        .get_or_create(&CrdState {
            crd: s.clone(),
            state: s,
        })
        .set(1);
    let text = m.encode();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// Every `gpuready_*` metric name in the PromQL strings of a JSON/YAML tree.
fn used_metrics(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(i) = rest.find("gpuready_") {
                let tail = &rest[i..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                    .unwrap_or(tail.len());
                out.insert(tail[..end].to_owned());
                rest = &tail[end..];
            }
        }
        Value::Array(a) => a.iter().for_each(|x| used_metrics(x, out)),
        Value::Object(o) => o.values().for_each(|x| used_metrics(x, out)),
        _ => {}
    }
}

#[tokio::test]
async fn dashboard_and_alerts_use_only_metrics_gpuready_exports() {
    let env = shared_env().await;
    let exported = exported_samples();
    assert!(exported.contains("gpuready_nodes"), "{exported:?}");

    let text = std::fs::read_to_string(repo_root().join("deploy/grafana/gpuready-dashboard.json"))
        .expect("dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut exprs = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        used_metrics(&panel["targets"], &mut exprs);
    }
    used_metrics(&dashboard["templating"], &mut exprs);
    // A name regex (`__name__=~"gpuready_node_.*"`) leaves its prefix: it must
    // match an exported metric.
    let unknown: Vec<_> = exprs
        .difference(&exported)
        .filter(|m| !(m.ends_with('_') && exported.iter().any(|e| e.starts_with(m.as_str()))))
        .collect();
    assert!(
        unknown.is_empty(),
        "the dashboard queries unknown metrics {unknown:?}"
    );
    for needed in [
        "gpuready_nodes",
        "gpuready_layer_ready_nodes",
        "gpuready_reconcile_duration_seconds_bucket",
        "gpuready_reconcile_errors_total",
        "gpuready_writes_total",
        "gpuready_safety_brake_engaged",
        "gpuready_leader",
        "gpuready_nfd_crd_state",
        "gpuready_node_not_ready",
        "gpuready_node_layer_not_ready",
        "gpuready_node_tainted_devices",
        "gpuready_tainted_devices",
    ] {
        assert!(
            exprs.contains(needed),
            "the dashboard does not show {needed}"
        );
    }

    let rules = render(
        env,
        RELEASE,
        "default",
        &["--set", "prometheusRule.enabled=true"],
    )
    .await;
    let docs = yaml_documents(&rules);
    let mut alerts = BTreeSet::new();
    used_metrics(
        &find_doc(&docs, "PrometheusRule", None)["spec"],
        &mut alerts,
    );
    let unknown: Vec<_> = alerts.difference(&exported).collect();
    assert!(
        unknown.is_empty(),
        "the alerts use unknown metrics {unknown:?}"
    );
}

/// A DynamicObject API for a resource given by group, version, kind, plural.
/// nfd-worker's NodeFeature for `node`: `gpus` NVIDIA H200s (class 0302) and a NIC.
fn node_feature_json(node: &str, ns: &str, gpus: usize) -> Value {
    let mut elements =
        vec![json!({"attributes": {"class": "0200", "vendor": "1af4", "device": "1041"}})];
    elements.extend(
        (0..gpus)
            .map(|_| json!({"attributes": {"class": "0302", "vendor": "10de", "device": "2335"}})),
    );
    json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {"name": node, "namespace": ns, "labels": {"nfd.node.kubernetes.io/node-name": node}},
        "spec": {"features": {"instances": {"pci.device": {"elements": elements}}}},
    })
}

/// ResourceSlices and NodeFeatures on the real API server drive the taint on and
/// off, with gpuready running as the chart's ServiceAccount: its ClusterRole's
/// list/watch on exactly those two resources is sufficient, and it can write
/// neither.
#[tokio::test]
async fn resource_slices_and_node_features_drive_the_taint_as_the_service_account() {
    let env = TestEnv::start().await.expect("test control plane");
    let admin = env.client().expect("client");
    let ns = "gpuready-system";
    helm_install(&env, ns, &[]).await;
    wait_established(&admin, &[CRD_NAME]).await;
    // The NodeFeature CRD, as NFD's chart would install it.
    install_crds(&env, "deploy/crds/nfd-crds.yaml", "nfd").await;
    let nfd_ns = "node-feature-discovery";
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": nfd_ns}})).expect("ns"),
        )
        .await
        .expect("namespace");

    let node = "gpu-h200-01";
    create_node(
        &admin,
        node,
        [
            ("pool".to_owned(), "dra".to_owned()),
            (
                "feature.node.kubernetes.io/pci-0302_10de.present".to_owned(),
                "true".to_owned(),
            ),
        ]
        .into(),
        0,
        json!([]),
    )
    .await;
    apply_profile(
        &admin,
        r#"
apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata: { name: h200-dra }
spec:
  nodeSelector: { matchLabels: { pool: dra } }
  evidence: DRA
  gpu: { products: [NVIDIA-H200], count: 1, minMemoryMib: 140000 }
  minDriverVersion: "580.159.04"
  cudaVersion: "13.0"
  maxLabelAgeSeconds: 0
"#,
    )
    .await;
    let run = start_controller_with(service_account_config(&env, ns, RELEASE), test_args());
    let nodes: Api<Node> = Api::all(admin.clone());
    let expect = |status: &'static str, reason: &'static str| {
        let nodes = nodes.clone();
        async move {
            eventually(60, &format!("GpuReady={status} {reason}"), || async {
                let n = nodes.get(node).await.ok()?;
                let tainted = taint_keys(&n).contains(&keys::DEFAULT_TAINT_KEY.to_owned());
                let ok = gpu_ready(&n) == Some((status.into(), reason.into()))
                    && tainted == (status != "True");
                if !ok {
                    // Shown only when the test fails: what the node says instead.
                    println!("waiting: GpuReady {:?}, tainted {tainted}", gpu_ready(&n));
                }
                ok.then_some(())
            })
            .await;
        }
    };
    expect("False", keys::reasons::NO_RESOURCE_SLICE).await;

    // The DRA driver publishes its slice: ready, untainted.
    let slices = dynamic_api(
        &admin,
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        None,
    );
    let fixture = std::fs::read_to_string(
        repo_root().join("crates/gpuready-core/tests/fixtures/evidence/dra-h200-1gpu.yaml"),
    )
    .expect("fixture");
    let mut slice: Value = serde_yaml_ng::from_str(&fixture).expect("slice");
    slice["metadata"] = json!({"name": "h200-gpu-slice"});
    slices
        .create(
            &PostParams::default(),
            &serde_json::from_value(slice.clone()).expect("slice"),
        )
        .await
        .expect("create slice");
    expect("True", "Ready").await;
    // `gpuready check` against the cluster reads the same slices and agrees.
    let report = live_report(&admin).await;
    let a = report
        .nodes
        .iter()
        .find(|a| a.name == node)
        .expect("node in the live report");
    assert_eq!(a.ready, Some(true), "{}: {}", a.reason, a.message);

    // Health: the driver taints gpu-0 (XID 79, NoSchedule).
    let taint = json!({"spec": {"devices": [{
        "name": "gpu-0",
        "attributes": slice["spec"]["devices"][0]["attributes"],
        "capacity": slice["spec"]["devices"][0]["capacity"],
        "taints": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}],
    }]}});
    slices
        .patch(
            "h200-gpu-slice",
            &PatchParams::default(),
            &Patch::Merge(&taint),
        )
        .await
        .expect("taint the device");
    expect("False", keys::reasons::DEVICES_TAINTED).await;
    let healed = json!({"spec": {"devices": slice["spec"]["devices"]}});
    slices
        .patch(
            "h200-gpu-slice",
            &PatchParams::default(),
            &Patch::Merge(&healed),
        )
        .await
        .expect("untaint the device");
    expect("True", "Ready").await;

    // NFD's PCI scan: two GPUs on the bus, one published.
    let features = dynamic_api(
        &admin,
        "nfd.k8s-sigs.io",
        "v1alpha1",
        "NodeFeature",
        "nodefeatures",
        Some(nfd_ns),
    );
    features
        .create(
            &PostParams::default(),
            &serde_json::from_value(node_feature_json(node, nfd_ns, 2)).expect("nf"),
        )
        .await
        .expect("create NodeFeature");
    expect("False", keys::reasons::GPU_NOT_ADVERTISED).await;
    features
        .patch(
            node,
            &PatchParams::apply("nfd-worker").force(),
            &Patch::Apply(&node_feature_json(node, nfd_ns, 1)),
        )
        .await
        .expect("update NodeFeature");
    expect("True", "Ready").await;

    // The slice goes away (kubelet wipes it when the plugin stops).
    slices
        .delete("h200-gpu-slice", &DeleteParams::default())
        .await
        .expect("delete slice");
    expect("False", keys::reasons::NO_RESOURCE_SLICE).await;
    assert_eq!(
        run.sample("gpuready_reconcile_errors_total{kind=\"forbidden\"}"),
        0.0,
        "no reconcile was refused"
    );
    run.stop().await.expect("clean stop");

    // Read-only: the ServiceAccount writes neither source.
    let sa = env
        .client_as_service_account(ns, RELEASE)
        .expect("SA client");
    let err = dynamic_api(
        &sa,
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        None,
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(slice).expect("slice"),
    )
    .await
    .expect_err("SA cannot create ResourceSlices");
    assert_eq!(status_code(&err), Some(403), "{err}");
    let err = dynamic_api(
        &sa,
        "nfd.k8s-sigs.io",
        "v1alpha1",
        "NodeFeature",
        "nodefeatures",
        Some(nfd_ns),
    )
    .delete(node, &DeleteParams::default())
    .await
    .expect_err("SA cannot delete NodeFeatures");
    assert_eq!(status_code(&err), Some(403), "{err}");
    // ... and gets would need `get`, which it does not have either.
    let err = dynamic_api(
        &sa,
        "nfd.k8s-sigs.io",
        "v1alpha1",
        "NodeFeature",
        "nodefeatures",
        Some(nfd_ns),
    )
    .get(node)
    .await
    .expect_err("no get on NodeFeatures");
    assert_eq!(status_code(&err), Some(403), "{err}");
}

/// The probe's chart values on a GPU cluster (the CRD left to the shared env).
const PROBE_VALUES: &[&str] = &[
    "--set",
    "probe.enabled=true",
    "--set",
    "crds.install=false",
    "--set-string",
    "probe.nodeSelector.nvidia\\.com/gpu\\.present=true",
];

fn args_of(container: &Value) -> Vec<String> {
    container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn probe_daemonset_reaches_the_gpus_without_requesting_one_and_passes_restricted() {
    let env = shared_env().await;
    let ns = env
        .create_namespace("chart-probe")
        .await
        .expect("namespace");
    let release = unique_name("gr");
    let text = render(env, &release, &ns, PROBE_VALUES).await;
    let docs = yaml_documents(&text);
    let probe = format!("{release}-gpuready-probe");

    let ds = find_doc(&docs, "DaemonSet", Some(&probe));
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["runtimeClassName"], "nvidia");
    assert_eq!(pod["serviceAccountName"], probe.as_str());
    assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.present"], "true");
    let c = &pod["containers"][0];
    assert_eq!(args_of(c)[0], "probe");
    // The glibc image (the driver's NVML cannot be loaded by a static musl binary).
    assert_eq!(
        c["image"],
        format!("ghcr.io/gpuready/gpuready-probe:{}", chart_app_version())
    );
    let env_of = |name: &str| -> Value {
        c["env"]
            .as_array()
            .expect("env")
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{name} not set"))
            .clone()
    };
    assert_eq!(env_of("NVIDIA_VISIBLE_DEVICES")["value"], "all");
    // compute for the CUDA compute check (libcuda, /dev/nvidia-uvm), utility for NVML.
    assert_eq!(
        env_of("NVIDIA_DRIVER_CAPABILITIES")["value"],
        "compute,utility"
    );
    let args = args_of(c);
    assert!(
        args.contains(&"--compute-check=auto".to_owned()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--compute-check-request-file=/etc/gpuready/podinfo/annotations".to_owned()),
        "{args:?}"
    );
    // The request annotation arrives through the downward API, no API read.
    assert_eq!(
        pod["volumes"][0]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        "metadata.annotations"
    );
    // libcuda's context took 205 MB of RSS in the check's child on the H200.
    assert_eq!(c["resources"]["limits"]["memory"], "384Mi");
    assert_eq!(
        env_of("NODE_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "spec.nodeName"
    );
    // No GPU is requested: the probe must see the GPUs the workloads hold.
    assert!(
        !c["resources"].to_string().contains("nvidia.com"),
        "{}",
        c["resources"]
    );
    // It runs where the readiness taint keeps everything else away.
    let tolerations = pod["tolerations"].as_array().expect("tolerations");
    assert!(
        tolerations
            .iter()
            .any(|t| t["key"] == keys::DEFAULT_TAINT_KEY && t["operator"] == "Exists"),
        "{tolerations:?}"
    );
    assert_eq!(c["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    // Its pods are not the controller's: no selector of the Deployment, the
    // PodDisruptionBudget or the Service matches them.
    let pod_labels = ds["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .expect("pod labels");
    let deploy = find_doc(&docs, "Deployment", None);
    let selector = deploy["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("selector");
    assert!(
        selector.iter().any(|(k, v)| pod_labels.get(k) != Some(v)),
        "the Deployment's selector {selector:?} matches the probe's pods {pod_labels:?}"
    );
    // The controller reads the reports from the release namespace.
    assert!(
        args_of(&deploy["spec"]["template"]["spec"]["containers"][0])
            .contains(&format!("--probe-namespace={ns}"))
    );

    // Accepted by the API server in a namespace enforcing the restricted Pod
    // Security Standard, without a warning.
    let out = dry_run_under_pod_security(
        env,
        &ns,
        &[
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/warn=restricted",
        ],
        &text,
    )
    .await;
    assert!(!out.stderr.contains("PodSecurity"), "{}", out.stderr);
    assert_eq!(out.stdout.lines().count(), docs.len(), "{}", out.stdout);
}

/// `probe.imex.enabled`: the host's `/etc`, read-only, for the IMEX files
/// (docs/fabric.md); off by default. A hostPath is outside the restricted and
/// baseline Pod Security Standards, which the API server says.
#[tokio::test]
async fn probe_imex_mounts_the_host_etc_read_only_and_only_when_asked() {
    let env = shared_env().await;
    let ns = env.create_namespace("chart-imex").await.expect("namespace");
    let release = unique_name("gr");
    let probe = format!("{release}-gpuready-probe");
    let pod_of = |text: &str| {
        find_doc(&yaml_documents(text), "DaemonSet", Some(&probe))["spec"]["template"]["spec"]
            .clone()
    };
    let off = pod_of(&render(env, &release, &ns, PROBE_VALUES).await);
    assert!(!off.to_string().contains("hostPath"), "{off}");
    assert!(
        !args_of(&off["containers"][0])
            .iter()
            .any(|a| a.starts_with("--host-root"))
    );

    let mut values = PROBE_VALUES.to_vec();
    values.extend(["--set", "probe.imex.enabled=true"]);
    let text = render(env, &release, &ns, &values).await;
    let pod = pod_of(&text);
    let c = &pod["containers"][0];
    assert!(args_of(c).contains(&"--host-root=/host".to_owned()), "{c}");
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "host-etc")
        .expect("host-etc volume")
        .clone();
    assert_eq!(
        volume["hostPath"],
        json!({ "path": "/etc", "type": "Directory" })
    );
    let mounts = c["volumeMounts"].as_array().expect("mounts");
    assert!(
        mounts.contains(&json!({ "name": "host-etc", "mountPath": "/host/etc", "readOnly": true })),
        "{mounts:?}"
    );
    // The compute check's downward-API volume stays beside it.
    assert!(mounts.iter().any(|m| m["name"] == "podinfo"), "{mounts:?}");
    // The API server takes it, and warns where the restricted standard applies.
    let out = dry_run_under_pod_security(
        env,
        &ns,
        &["pod-security.kubernetes.io/warn=restricted"],
        &text,
    )
    .await;
    assert!(
        out.stderr.contains("PodSecurity") && out.stderr.contains("\"host-etc\""),
        "{}",
        out.stderr
    );
}

/// Labels the namespace with Pod Security levels, then applies `text` with a
/// server-side dry run there, which must succeed (the warnings are in stderr).
async fn dry_run_under_pod_security(env: &TestEnv, ns: &str, levels: &[&str], text: &str) -> Out {
    let mut args = vec!["label", "namespace", ns];
    args.extend_from_slice(levels);
    must(kubectl(env, &args), None, "label namespace").await;
    let out = run(
        kubectl(env, &["apply", "--dry-run=server", "-f", "-"]),
        Some(text),
    )
    .await;
    assert!(out.ok, "{}\n{}", out.stdout, out.stderr);
    out
}

/// A client acting as the probe's ServiceAccount with a token bound to `node`
/// (the API server puts the node's name in the token's user extra, which the
/// chart's admission policy checks); `None`: a token bound to no node.
fn as_probe(env: &TestEnv, ns: &str, sa: &str, node: Option<&str>) -> Client {
    let mut config = service_account_config(env, ns, sa);
    if let Some(node) = node {
        config.headers.push((
            http::HeaderName::from_static(
                "impersonate-extra-authentication.kubernetes.io%2fnode-name",
            ),
            http::HeaderValue::from_str(node).expect("header value"),
        ));
    }
    Client::try_from(config).expect("client")
}

#[tokio::test]
async fn probe_service_account_may_write_only_its_own_nodes_report() {
    use gpuready::probe::publish::publish;
    use gpuready_api::probe::{PROBE_REPORT_API_VERSION, ProbeReport};

    let env = shared_env().await;
    let admin = env.client().expect("client");
    let ns = env.create_namespace("probe-rbac").await.expect("namespace");
    let release = unique_name("gr");
    let text = render(env, &release, &ns, PROBE_VALUES).await;
    must(
        kubectl(env, &["apply", "--server-side", "-f", "-"]),
        Some(&text),
        "apply the rendered chart",
    )
    .await;
    let probe = format!("{release}-gpuready-probe");
    let report = |node: &str| ProbeReport {
        api_version: PROBE_REPORT_API_VERSION.into(),
        node: Some(node.into()),
        generated_at: jiff::Timestamp::now().to_string(),
        ..ProbeReport::default()
    };
    let on_n1 = as_probe(env, &ns, &probe, Some("n1"));

    // The policy takes a moment to load: wait until it refuses n2's report.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let refused = loop {
        match publish(&on_n1, &ns, "n2", &report("n2")).await {
            Err(e) => break e.to_string(),
            Ok(()) => {
                Api::<ConfigMap>::namespaced(admin.clone(), &ns)
                    .delete("gpuready-probe-n2", &DeleteParams::default())
                    .await
                    .expect("delete the report written before the policy loaded");
                assert!(
                    std::time::Instant::now() < deadline,
                    "the policy never refused"
                );
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    };
    assert!(
        refused.contains("may write only the report of the node"),
        "{refused}"
    );

    // Its own node's report: created, then updated (a heartbeat).
    publish(&on_n1, &ns, "n1", &report("n1"))
        .await
        .expect("create own report");
    publish(&on_n1, &ns, "n1", &report("n1"))
        .await
        .expect("update own report");
    // A token bound to no node writes nothing.
    let unbound = as_probe(env, &ns, &probe, None);
    assert!(publish(&unbound, &ns, "n1", &report("n1")).await.is_err());

    // RBAC: nothing to read, nothing else to write.
    let cms: Api<ConfigMap> = Api::namespaced(on_n1.clone(), &ns);
    assert_eq!(
        status_code(&cms.get("gpuready-probe-n1").await.expect_err("get")),
        Some(403)
    );
    assert_eq!(
        status_code(&cms.list(&ListParams::default()).await.expect_err("list")),
        Some(403)
    );
    assert_eq!(
        status_code(
            &cms.delete("gpuready-probe-n1", &DeleteParams::default())
                .await
                .expect_err("delete")
        ),
        Some(403)
    );
    let elsewhere = publish(&on_n1, "default", "n1", &report("n1")).await;
    assert!(elsewhere.is_err(), "wrote outside its namespace");
    let nodes: Api<Node> = Api::all(on_n1.clone());
    assert_eq!(
        status_code(
            &nodes
                .list(&ListParams::default())
                .await
                .expect_err("list nodes")
        ),
        Some(403)
    );
    let patch = json!({"metadata": {"labels": {"x": "y"}}});
    assert_eq!(
        status_code(
            &nodes
                .patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect_err("patch node")
        ),
        Some(403)
    );
    let secrets: Api<Secret> = Api::namespaced(on_n1.clone(), &ns);
    assert_eq!(
        status_code(
            &secrets
                .list(&ListParams::default())
                .await
                .expect_err("secrets")
        ),
        Some(403)
    );
    let leases: Api<Lease> = Api::namespaced(on_n1, &ns);
    assert_eq!(
        status_code(
            &leases
                .list(&ListParams::default())
                .await
                .expect_err("leases")
        ),
        Some(403)
    );

    // The controller's ServiceAccount reads the reports, and only reads them.
    let controller = Client::try_from(service_account_config(
        env,
        &ns,
        &format!("{release}-gpuready"),
    ))
    .expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(controller, &ns);
    let list = cms
        .list(&ListParams::default().labels(&format!("{}=true", keys::LABEL_PROBE_REPORT)))
        .await
        .expect("controller lists the reports");
    assert_eq!(list.items.len(), 1);
    let evidence = gpuready::controller::probe_reports::evidence_of(&list.items[0]);
    assert!(
        matches!(evidence, gpuready_core::health::ProbeEvidence::Report(_)),
        "{evidence:?}"
    );
    assert_eq!(
        status_code(
            &cms.delete("gpuready-probe-n1", &DeleteParams::default())
                .await
                .expect_err("controller deletes a report")
        ),
        Some(403)
    );
}

/// The NVIDIA DRA driver's ComputeDomainCliques, with the driver's own CRD
/// (v0.4.1, from the Go module proxy: tests/control-plane/dra-driver-crds.sh),
/// drive a profile's Fabric layer with gpuready running as the chart's
/// ServiceAccount: list/watch suffice, writes are refused, and before the CRD
/// exists the evidence reads as not read (Unknown), in `run` and `check` alike.
#[tokio::test]
async fn compute_domain_cliques_drive_the_fabric_layer_as_the_service_account() {
    let env = TestEnv::start().await.expect("test control plane");
    let admin = env.client().expect("client");
    let ns = "gpuready-system";
    helm_install(&env, ns, &[]).await;
    wait_established(&admin, &[CRD_NAME]).await;
    let node = "gb200-cd-01";
    let clique = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766";
    let mut labels = rtx3090_in("cd");
    labels.insert("nvidia.com/gpu.clique".into(), clique.into());
    create_node(&admin, node, labels, 1, json!([])).await;
    apply_profile(
        &admin,
        &rtx3090_profile(
            "cd",
            "cd",
            "fabric: {computeDomainCliques: Check, whenProbeMissing: Ignore}",
        ),
    )
    .await;
    let nodes: Api<Node> = Api::all(admin.clone());
    let expect = |status: &'static str, reason: &'static str| {
        let nodes = nodes.clone();
        async move {
            eventually(60, &format!("GpuReady={status} {reason}"), || async {
                let n = nodes.get(node).await.ok()?;
                (gpu_ready(&n) == Some((status.into(), reason.into()))).then_some(())
            })
            .await;
        }
    };
    let sa = || service_account_config(&env, ns, RELEASE);

    // No driver: the evidence is not read.
    let run = start_controller_with(sa(), test_args());
    expect("Unknown", keys::fabric::COMPUTE_DOMAIN_CLIQUES_UNREAD).await;
    run.stop().await.expect("clean stop");
    let live = live_report(&admin).await;
    let a = live.nodes.iter().find(|a| a.name == node).expect("node");
    assert_eq!(
        a.reason,
        keys::fabric::COMPUTE_DOMAIN_CLIQUES_UNREAD,
        "{}",
        a.message
    );

    // The driver's CRD, and its namespace.
    let crd = gpuready_testenv::upstream_dra::compute_domain_clique_crd().expect("driver CRD");
    install_crds(&env, crd.to_str().expect("utf-8 path"), "dra-driver").await;
    let driver_ns = "nvidia-dra-driver-gpu";
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": driver_ns}})).expect("ns"),
        )
        .await
        .expect("namespace");
    let run = start_controller_with(sa(), test_args());
    expect("True", "Ready").await;
    let cliques = dynamic_api(
        &admin,
        "resource.nvidia.com",
        "v1beta1",
        "ComputeDomainClique",
        "computedomaincliques",
        Some(driver_ns),
    );
    let domain = "5b7f1c2e-8d4a-4f0e-9c3b-2a1d6e8f0b47";
    let name = format!("{domain}.{clique}");
    let daemons = |status: &str, in_clique: &str| json!([{ "nodeName": node, "ipAddress": "10.0.12.11", "cliqueID": in_clique, "index": 0, "status": status }]);
    let object = json!({
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainClique",
        "metadata": { "name": name, "namespace": driver_ns,
            "labels": { "resource.nvidia.com/computeDomain": domain } },
        "daemons": daemons("NotReady", clique),
    });
    cliques
        .create(
            &PostParams::default(),
            &serde_json::from_value(object.clone()).expect("clique"),
        )
        .await
        .expect("create the ComputeDomainClique");
    expect("False", keys::fabric::IMEX_DAEMON_NOT_READY).await;
    let set = |d: Value| {
        let cliques = cliques.clone();
        let name = name.clone();
        async move {
            cliques
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({ "daemons": d })),
                )
                .await
                .expect("update the daemons");
        }
    };
    set(daemons("Ready", clique)).await;
    expect("True", "Ready").await;
    set(daemons("Ready", "9277d399-0674-44a9-b64e-d85bb19ce2b0.1")).await;
    expect("False", keys::fabric::COMPUTE_DOMAIN_CLIQUE_MISMATCH).await;
    cliques
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    expect("True", "Ready").await;
    assert_eq!(
        run.sample("gpuready_reconcile_errors_total{kind=\"forbidden\"}"),
        0.0,
        "no reconcile was refused"
    );
    run.stop().await.expect("clean stop");

    // Read-only: the ServiceAccount writes none.
    let sa_client = env
        .client_as_service_account(ns, RELEASE)
        .expect("SA client");
    let err = dynamic_api(
        &sa_client,
        "resource.nvidia.com",
        "v1beta1",
        "ComputeDomainClique",
        "computedomaincliques",
        Some(driver_ns),
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(object).expect("clique"),
    )
    .await
    .expect_err("SA cannot create ComputeDomainCliques");
    assert_eq!(status_code(&err), Some(403), "{err}");
}
