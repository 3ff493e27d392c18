//! The chart's RBAC against a real kube-apiserver: after `helm install`, gpuready
//! run in-process as the chart's ServiceAccount converges an example
//! (sufficient) and is refused what it must not do (minimal). One test records
//! how the API server authorizes a server-side apply that creates an object,
//! which the ClusterRole's CRD rules rely on.

use crate::support;

use gpuready_api::{GpuNodeProfile, keys};
use gpuready_testenv::{TestEnv, unique_name};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use support::*;

const NFD_CRDS: [&str; 3] = [
    "nodefeatures.nfd.k8s-sigs.io",
    "nodefeaturerules.nfd.k8s-sigs.io",
    "nodefeaturegroups.nfd.k8s-sigs.io",
];

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
    let env = chart_env().await;
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
