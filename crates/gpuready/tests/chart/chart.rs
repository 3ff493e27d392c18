//! The Helm chart as rendered, against a real kube-apiserver: `helm lint` and
//! the values schema refusing wrong values by name, server-side dry runs with
//! defaults and with every optional feature, the restricted Pod Security
//! Standard, and the raw manifests (kept equal to `helm template`, applied
//! server-side). The chart's other tests are the `chart_*.rs` binaries beside
//! this one (RBAC, upgrade, monitoring, evidence, probe, escalation); what they
//! share is in `support/chart.rs`.
//!
//! ServiceMonitor and PrometheusRule are validated against stand-in CRDs
//! (`tests/fixtures/monitoring-standin-crds.yaml`: the subset of the
//! monitoring.coreos.com/v1 schema the chart uses), since the test cluster has no
//! prometheus-operator. Regenerate the raw manifests with
//! `UPDATE_MANIFESTS=1 cargo test -p gpuready --test chart raw_manifests`.

use crate::support;

use std::collections::BTreeSet;

use gpuready_api::keys;
use gpuready_testenv::{TestEnv, unique_name};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::*;

const MANIFESTS: &str = "deploy/manifests/gpuready.yaml";

const MANIFESTS_NAMESPACE: &str = "gpuready-system";

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
  timeToReadyHigh: {enabled: true, thresholdSeconds: 1200, window: 12h}
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

fn kinds(docs: &[Value]) -> BTreeSet<String> {
    docs.iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn helm_lint_is_clean_and_wrong_values_are_refused_by_name() {
    let env = chart_env().await;
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
    let env = chart_env().await;
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
        (
            "GpuReadyTimeToReadyHigh",
            "gpuready_time_to_ready_seconds_bucket{",
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
    let env = chart_env().await;
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
    let env = chart_env().await;
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
