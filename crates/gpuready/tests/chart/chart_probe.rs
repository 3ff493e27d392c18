//! The chart's probe DaemonSet (`probe.enabled`) against a real kube-apiserver:
//! it reaches the GPUs without requesting one and passes the restricted Pod
//! Security Standard, `probe.imex.enabled` mounts the host's `/etc` read-only
//! and only when asked, and the probe's ServiceAccount may write only its own
//! node's report; by default it leaves a node whose GPU clients the GPU
//! operator paused (`nvidia.com/gpu.deploy.client`) and may read Nodes, never
//! write them.

use crate::support;

use gpuready_api::keys;
use gpuready_testenv::{TestEnv, unique_name};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

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
    let env = chart_env().await;
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
    let env = chart_env().await;
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

    let env = chart_env().await;
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
    // Nodes: read (its own, by field selector, to sit out maintenance), never written.
    let nodes: Api<Node> = Api::all(on_n1.clone());
    nodes
        .list(&ListParams::default().fields("metadata.name=n1"))
        .await
        .expect("the probe lists its own node");
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
    let evidence = gpuready::controller::watch::probe_reports::evidence_of(&list.items[0]);
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

/// `probe.maintenance`: by default a required node affinity keeps the probe on
/// nodes whose `nvidia.com/gpu.deploy.client` is absent or `true`, ANDed with
/// each of the user's required terms (node selector terms are ORed, so each
/// becomes two), and the probe may read Nodes; both can be turned off.
#[tokio::test]
async fn probe_steps_aside_for_gpu_maintenance_by_node_affinity() {
    use keys::lifecycle::DEPLOY_CLIENT;

    let env = chart_env().await;
    let ns = env
        .create_namespace("chart-maint")
        .await
        .expect("namespace");
    let release = unique_name("gr");
    let probe = format!("{release}-gpuready-probe");
    let absent = json!({ "key": DEPLOY_CLIENT, "operator": "DoesNotExist" });
    let is_true = json!({ "key": DEPLOY_CLIENT, "operator": "In", "values": ["true"] });
    let terms_of = |docs: &[Value]| -> Value {
        find_doc(docs, "DaemonSet", Some(&probe))["spec"]["template"]["spec"]["affinity"]
            ["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"]
            .clone()
    };

    // Defaults: the two terms alone, the nodeSelector untouched beside them,
    // read access to Nodes, and the probe told to watch its node.
    let text = render(env, &release, &ns, PROBE_VALUES).await;
    let docs = yaml_documents(&text);
    assert_eq!(
        terms_of(&docs),
        json!([{ "matchExpressions": [absent] }, { "matchExpressions": [is_true] }])
    );
    let pod = &find_doc(&docs, "DaemonSet", Some(&probe))["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.present"], "true");
    assert!(args_of(&pod["containers"][0]).contains(&"--watch-node=true".to_owned()));
    let role = find_doc(&docs, "ClusterRole", Some(&probe));
    assert_eq!(
        role["rules"],
        json!([{ "apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"] }])
    );
    let binding = find_doc(&docs, "ClusterRoleBinding", Some(&probe));
    assert_eq!(binding["subjects"][0]["name"], probe.as_str());
    assert_eq!(binding["subjects"][0]["namespace"], ns.as_str());

    // The user's affinity: each required term ANDed with each of ours, the
    // rest of the affinity kept.
    let (_dir, user) = temp_file(
        "affinity.yaml",
        r#"
probe:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: pool, operator: In, values: [a, b]}]
          - matchFields: [{key: metadata.name, operator: In, values: [n1]}]
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 1
          preference:
            matchExpressions: [{key: zone, operator: In, values: [z1]}]
"#,
    );
    let mut values = PROBE_VALUES.to_vec();
    values.extend(["-f", path_str(&user)]);
    let docs = yaml_documents(&render(env, &release, &ns, &values).await);
    let pool = json!({ "key": "pool", "operator": "In", "values": ["a", "b"] });
    let field = json!([{ "key": "metadata.name", "operator": "In", "values": ["n1"] }]);
    assert_eq!(
        terms_of(&docs),
        json!([
            { "matchExpressions": [pool, absent] },
            { "matchExpressions": [pool, is_true] },
            { "matchExpressions": [absent], "matchFields": field },
            { "matchExpressions": [is_true], "matchFields": field },
        ])
    );
    let affinity =
        &find_doc(&docs, "DaemonSet", Some(&probe))["spec"]["template"]["spec"]["affinity"];
    assert_eq!(
        affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"],
        1
    );
    // The API server takes the merged affinity.
    let text = render(env, &release, &ns, &values).await;
    let out = run(
        kubectl(env, &["apply", "--dry-run=server", "-f", "-"]),
        Some(&text),
    )
    .await;
    assert!(out.ok, "{}\n{}", out.stdout, out.stderr);

    // Both off: no affinity of ours (the user's stays as given), no Node read.
    values.extend([
        "--set",
        "probe.maintenance.stepAside=false",
        "--set",
        "probe.maintenance.watchNode=false",
    ]);
    let docs = yaml_documents(&render(env, &release, &ns, &values).await);
    let terms = terms_of(&docs);
    assert_eq!(terms.as_array().map(Vec::len), Some(2), "{terms}");
    assert!(!terms.to_string().contains(DEPLOY_CLIENT), "{terms}");
    assert!(
        !docs
            .iter()
            .any(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == probe.as_str()),
        "a ClusterRole for the probe without watchNode"
    );
    let pod = &find_doc(&docs, "DaemonSet", Some(&probe))["spec"]["template"]["spec"];
    assert!(args_of(&pod["containers"][0]).contains(&"--watch-node=false".to_owned()));
    let only_step_aside_off = [
        PROBE_VALUES,
        &["--set", "probe.maintenance.stepAside=false"],
    ]
    .concat();
    let off = render(env, &release, &ns, &only_step_aside_off).await;
    let docs = yaml_documents(&off);
    let pod = &find_doc(&docs, "DaemonSet", Some(&probe))["spec"]["template"]["spec"];
    assert!(pod["affinity"].is_null(), "{}", pod["affinity"]);
}
