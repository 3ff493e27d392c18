//! What the harness promises, checked against a real API server: admin access,
//! RBAC on, impersonation, kubectl/helm wiring, restart on the same port with the
//! data kept, and one shared environment per test binary.

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use gpuready_testenv::{TestEnv, unique_name};

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

/// Who the API server thinks the client is.
async fn whoami(client: Client) -> (String, Vec<String>) {
    let review: SelfSubjectReview = Api::all(client)
        .create(
            &PostParams::default(),
            &from_json(
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
            ),
        )
        .await
        .expect("SelfSubjectReview");
    let user = review.status.and_then(|s| s.user_info).expect("user info");
    (
        user.username.unwrap_or_default(),
        user.groups.unwrap_or_default(),
    )
}

fn run(mut cmd: std::process::Command) -> String {
    let out = cmd.output().expect("run command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[tokio::test]
async fn own_environment_end_to_end() {
    let mut env = TestEnv::start().await.expect("start test environment");
    println!("start-up took {:?}", env.startup_time());

    // Admin is system:masters.
    let (user, groups) = whoami(env.client().expect("client")).await;
    assert_eq!(user, "admin");
    assert!(groups.contains(&"system:masters".to_owned()), "{groups:?}");

    // Impersonating a service account gives its identity, and RBAC is enforced.
    let ns = env.create_namespace("sa").await.expect("namespace");
    let sa = env
        .client_as_service_account(&ns, "gpuready")
        .expect("sa client");
    let (user, groups) = whoami(sa.clone()).await;
    assert_eq!(user, format!("system:serviceaccount:{ns}:gpuready"));
    assert!(
        groups.contains(&format!("system:serviceaccounts:{ns}")),
        "{groups:?}"
    );
    let nodes: Api<Node> = Api::all(sa.clone());
    let denied = nodes
        .list(&ListParams::default())
        .await
        .expect_err("RBAC must deny an unbound service account");
    assert!(
        matches!(&denied, kube::Error::Api(s) if s.code == 403),
        "{denied:?}"
    );
    let role = unique_name("list-nodes");
    let admin = env.client().expect("client");
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &PostParams::default(),
            &from_json(json!({
                "metadata": {"name": role},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
            })),
        )
        .await
        .expect("cluster role");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &from_json(json!({
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": "gpuready", "namespace": ns}],
            })),
        )
        .await
        .expect("cluster role binding");
    // The RBAC authorizer reads roles and bindings from its own informers, so a
    // binding takes effect a moment after it is created: poll, bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match nodes.list(&ListParams::default()).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 403 && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("allowed once bound: {e:?}"),
        }
    }

    // A plain user with groups.
    let (user, groups) = whoami(env.client_as("jane", &["devs"]).expect("client")).await;
    assert_eq!(user, "jane");
    assert!(groups.contains(&"devs".to_owned()), "{groups:?}");

    // kubectl and helm talk to this environment.
    let names = run({
        let mut c = env.kubectl();
        c.args(["get", "namespaces", "-o", "name"]);
        c
    });
    assert!(names.contains(&format!("namespace/{ns}")), "{names}");
    let can_i = run({
        let mut c = env.kubectl();
        c.args([
            "auth",
            "can-i",
            "list",
            "nodes",
            &format!("--as=system:serviceaccount:{ns}:gpuready"),
        ]);
        c
    });
    assert_eq!(can_i.trim(), "yes");
    run({
        let mut c = env.helm();
        c.args(["list", "--all-namespaces"]);
        c
    });

    // Restart in place: same URL, data kept, an existing client recovers.
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    cms.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "before-restart"}, "data": {"k": "v"}})),
    )
    .await
    .expect("configmap");
    let url = env.apiserver_url();
    let old_pid = env.apiserver_pid();
    env.stop_apiserver();
    assert_eq!(env.apiserver_pid(), None);
    cms.get("before-restart")
        .await
        .expect_err("API server is down");
    let began = std::time::Instant::now();
    env.start_apiserver().await.expect("start again");
    println!("restart took {:?}", began.elapsed());
    assert_eq!(env.apiserver_url(), url);
    assert_ne!(env.apiserver_pid(), old_pid);
    let cm = cms.get("before-restart").await.expect("data survives");
    assert_eq!(
        cm.data.and_then(|d| d.get("k").cloned()).as_deref(),
        Some("v")
    );
    env.restart_apiserver().await.expect("restart");
    cms.get("before-restart")
        .await
        .expect("after restart_apiserver");

    // Drop tears everything down.
    let pids = [env.etcd_pid(), env.apiserver_pid().expect("running")];
    let dir = env.dir().to_owned();
    drop(env);
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z")),
            "PID {pid} survived Drop"
        );
    }
    assert!(!dir.exists(), "Drop removes {}", dir.display());
}

/// Both tests get the same processes; each isolates itself with its own namespace.
#[tokio::test]
async fn shared_environment_a() {
    shared_once().await;
}

#[tokio::test]
async fn shared_environment_b() {
    shared_once().await;
}

async fn shared_once() {
    let env = TestEnv::shared().await.expect("shared environment");
    let again = TestEnv::shared().await.expect("shared environment");
    assert!(std::ptr::eq(env, again));
    let ns = env.create_namespace("shared").await.expect("namespace");
    // A client made in this test's runtime works even though another test's
    // runtime may have started the environment.
    Api::<ConfigMap>::namespaced(env.client().expect("client"), &ns)
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "mine"}})),
        )
        .await
        .expect("configmap in my namespace");
}
