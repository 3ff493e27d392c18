//! The NFD CRD reconciler and `gpuready nfd-crds` against a real kube-apiserver:
//! no CRDs → installed and Established; every older upstream release, installed
//! the way Helm/kubectl do, → upgraded with its objects kept; current → zero
//! writes; newer → untouched and reported; Check mode → zero writes and a
//! condition naming the difference; `nfd-crds diff` exit codes.
//!
//! NFD's CRDs are cluster-wide with fixed names, so every test owns its control
//! plane. Needs `tests/control-plane/build.sh`; upstream files come from
//! `gpuready_testenv::upstream_nfd` (releases before v0.17 only when
//! `GPUREADY_EXTRA_NFD_CRDS` names a folder holding them; otherwise those tests
//! print that they did not run).

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuready::nfd_io::{NFD_CRD_NAMES, read_plan};
use gpuready_api::GpuNodeProfile;
use gpuready_api::keys::{self, nfd_crd_reasons as reasons};
use gpuready_api::nfd::{NODE_FEATURE_CRD, NODE_FEATURE_GROUP_CRD, NODE_FEATURE_RULE_CRD};
use gpuready_testenv::TestEnv;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::*;

const PROFILE: &str = r#"
apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata:
  name: rtx3090
spec:
  nodeSelector:
    matchLabels:
      pool: rtx3090
  gpu:
    products: ["NVIDIA-GeForce-RTX-3090"]
"#;

// ---------------------------------------------------------------- helpers

fn crd_api(client: &Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

/// `(status, reason, message)` of the profile's NfdCrds condition.
async fn nfd_condition(client: &Client) -> Option<(String, String, String)> {
    let p = Api::<GpuNodeProfile>::all(client.clone())
        .get("rtx3090")
        .await
        .ok()?;
    p.status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == keys::CONDITION_NFD_CRDS)
        .map(|c| (c.status, c.reason, c.message))
}

async fn wait_for_condition(client: &Client, status: &str, reason: &str) -> String {
    let mut last = None;
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            last = nfd_condition(client).await;
            if let Some((s, r, m)) = &last
                && s == status
                && r == reason
            {
                return m.clone();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| {
        panic!("no NfdCrds condition {status}/{reason} within 60s; last seen: {last:?}")
    })
}

/// The value of `gpuready_nfd_crd_state{crd,state}` in this controller's metrics.
fn crd_state(run: &Running, crd: &str, state: &str) -> Option<i64> {
    let needle_crd = format!("crd=\"{crd}\"");
    let needle_state = format!("state=\"{state}\"");
    run.metrics
        .encode()
        .lines()
        .find(|l| {
            l.starts_with("gpuready_nfd_crd_state{")
                && l.contains(&needle_crd)
                && l.contains(&needle_state)
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Waits until this controller's metrics say every NFD CRD is in `state`: its
/// NFD pass has run.
async fn wait_all_in_state(run: &Running, state: &str) {
    eventually(
        60,
        &format!("every NFD CRD {state} in the metrics"),
        || async {
            NFD_CRD_NAMES
                .iter()
                .all(|c| crd_state(run, c, state) == Some(1))
                .then_some(())
        },
    )
    .await;
}

/// The controller's arguments with `--nfd-crds=<mode>` (`apply`, `check`).
fn args(mode: &str) -> gpuready::controller::RunArgs {
    run_args(&[&format!("--nfd-crds={mode}")])
}

/// The Events with `reason` about the profile.
async fn profile_events(client: &Client, reason: &str) -> Vec<Event> {
    events_about(client, "rtx3090")
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// Managers that own fields of the CRD.
async fn managers(client: &Client, name: &str) -> Vec<String> {
    crd_api(client)
        .get(name)
        .await
        .expect("get CRD")
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect()
}

/// `(generation, resourceVersion)` of each NFD CRD present.
async fn versions(client: &Client) -> Vec<(String, Option<i64>, Option<String>)> {
    let api = crd_api(client);
    let mut out = Vec::new();
    for name in NFD_CRD_NAMES {
        if let Some(c) = api.get_opt(name).await.expect("get CRD") {
            out.push((
                name.to_owned(),
                c.metadata.generation,
                c.metadata.resource_version,
            ));
        }
    }
    out
}

fn rule_spec() -> Value {
    // Valid under every release: v0.14 requires matchExpressions.
    json!({"rules": [{"name": "nvidia", "labels": {"example.com/gpu": "true"},
        "matchFeatures": [{"feature": "pci.device",
            "matchExpressions": {"vendor": {"op": "In", "value": ["10de"]}}}]}]})
}

fn feature_spec() -> Value {
    json!({"labels": {"example.com/from-nfd": "yes"},
        "features": {
            "flags": {"kernel.loadedmodule": {"elements": {"nvidia": {}}}},
            "attributes": {"kernel.version": {"elements": {"full": "6.8.0"}}}}})
}

fn group_spec() -> Value {
    json!({"featureGroupRules": [{"name": "nvidia",
        "matchFeatures": [{"feature": "pci.device",
            "matchExpressions": {"vendor": {"op": "In", "value": ["10de"]}}}]}]})
}

/// A rule only a v0.18+ CRD accepts (and whose `type` an older one would prune).
fn ge_rule_spec() -> Value {
    json!({"rules": [{"name": "driver", "labels": {"example.com/driver-ok": "true"},
        "matchFeatures": [{"feature": "kernel.version",
            "matchExpressions": {"full": {"op": "Ge", "value": ["6.8.0"], "type": "version"}}}]}]})
}

// ---------------------------------------------------------------- reconciler

#[tokio::test]
async fn no_nfd_crds_are_installed_and_established_then_a_restart_writes_none() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    apply_profile(&client, PROFILE).await;

    let run = start_controller(&env, args("apply"));
    let message = wait_for_condition(&client, "True", reasons::INSTALLED).await;
    for name in NFD_CRD_NAMES {
        assert!(message.contains(name), "{message}");
    }
    wait_established(&client, &NFD_CRD_NAMES).await;
    assert!(
        read_plan(&crd_api(&client)).await.expect("plan").is_noop(),
        "installed CRDs classify as current"
    );
    for name in NFD_CRD_NAMES {
        assert!(
            managers(&client, name)
                .await
                .contains(&keys::FIELD_MANAGER.to_owned()),
            "{name} applied under gpuready's field manager"
        );
    }
    wait_all_in_state(&run, "current").await;
    assert_eq!(run.writes("crd"), 3, "one apply per CRD, no more");
    assert_eq!(crd_state(&run, NODE_FEATURE_GROUP_CRD, "missing"), Some(0));
    eventually(30, "an NfdCrdsInstalled Event on the profile", || async {
        (!profile_events(&client, "NfdCrdsInstalled").await.is_empty()).then_some(())
    })
    .await;
    // The served API works.
    nfd_api(&client, "NodeFeatureRule", None)
        .create(
            &PostParams::default(),
            &nfd_object("NodeFeatureRule", "ge", ge_rule_spec()),
        )
        .await
        .expect("a v0.18 rule is accepted");
    run.stop().await.expect("clean stop");

    // Restart: the CRDs are gpuready's own now, so nothing to write to them.
    let run = start_controller(&env, args("apply"));
    wait_all_in_state(&run, "current").await;
    wait_for_condition(&client, "True", reasons::CURRENT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "restart after install: {} crd writes, {} write requests ({} profile status)",
        run.writes("crd"),
        run.writes_sent(),
        run.writes("profile_status")
    );
    assert_eq!(run.writes("crd"), 0);
    assert_eq!(
        run.writes_sent(),
        run.writes("profile_status"),
        "only the condition's reason (Installed → Current) is written"
    );
    run.stop().await.expect("clean stop");
}

/// An older release installed by `kubectl apply` with NFD objects of its time;
/// the controller upgrades it and the objects survive.
async fn upgrades_from(tag: &str, release: &str, group_exists: bool) {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let Some(file) = upstream_path(tag) else {
        return;
    };
    kubectl_apply(&env, &file).await;
    let mut old_names = vec![NODE_FEATURE_CRD, NODE_FEATURE_RULE_CRD];
    if group_exists {
        old_names.push(NODE_FEATURE_GROUP_CRD);
    }
    wait_established(&client, &old_names).await;
    let managers_before = managers(&client, NODE_FEATURE_RULE_CRD).await;
    assert!(
        managers_before.contains(&"kubectl-client-side-apply".to_owned()),
        "{tag}: installed by client-side apply: {managers_before:?}"
    );

    // Objects written under the old schema.
    let ns = env.create_namespace("nfd").await.expect("namespace");
    let rules = nfd_api(&client, "NodeFeatureRule", None);
    let features = nfd_api(&client, "NodeFeature", Some(&ns));
    let groups = nfd_api(&client, "NodeFeatureGroup", Some(&ns));
    let pp = PostParams::default();
    rules
        .create(&pp, &nfd_object("NodeFeatureRule", "old", rule_spec()))
        .await
        .expect("old rule");
    features
        .create(&pp, &nfd_object("NodeFeature", "old", feature_spec()))
        .await
        .expect("old feature");
    if group_exists {
        groups
            .create(&pp, &nfd_object("NodeFeatureGroup", "old", group_spec()))
            .await
            .expect("old group");
    }
    assert!(
        rules
            .create(&pp, &nfd_object("NodeFeatureRule", "ge", ge_rule_spec()))
            .await
            .is_err(),
        "{tag}: the old CRD refuses op Ge"
    );
    apply_profile(&client, PROFILE).await;

    let run = start_controller(&env, args("apply"));
    let message = wait_for_condition(&client, "True", reasons::UPGRADED).await;
    assert!(
        message.contains(&format!(
            "upgraded {NODE_FEATURE_GROUP_CRD}, {NODE_FEATURE_RULE_CRD} from {release}"
        )) || message.contains(&format!("upgraded {NODE_FEATURE_RULE_CRD} from {release}")),
        "{tag}: {message}"
    );
    if !group_exists {
        assert!(
            message.contains(&format!("created {NODE_FEATURE_GROUP_CRD}")),
            "{tag}: {message}"
        );
    }
    wait_established(&client, &NFD_CRD_NAMES).await;
    let after = read_plan(&crd_api(&client)).await.expect("plan");
    assert!(after.is_noop(), "{tag}: {after}");
    wait_all_in_state(&run, "current").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // NodeFeature has not changed since v0.14: only the other two are written.
    assert_eq!(run.writes("crd"), 2, "{tag}: one apply per outdated CRD");
    assert!(
        managers(&client, NODE_FEATURE_RULE_CRD)
            .await
            .contains(&keys::FIELD_MANAGER.to_owned()),
        "{tag}: gpuready took over the fields"
    );
    eventually(30, "an NfdCrdsUpgraded Event", || async {
        (!profile_events(&client, "NfdCrdsUpgraded").await.is_empty()).then_some(())
    })
    .await;

    // The old objects read back unchanged, and the new API is served.
    let spec = |o: DynamicObject| o.data.get("spec").cloned().expect("spec");
    assert_eq!(
        spec(rules.get("old").await.expect("old rule kept")),
        rule_spec(),
        "{tag}"
    );
    assert_eq!(
        spec(features.get("old").await.expect("old feature kept")),
        feature_spec(),
        "{tag}"
    );
    if group_exists {
        assert_eq!(
            spec(groups.get("old").await.expect("old group kept")),
            group_spec(),
            "{tag}"
        );
    }
    rules
        .create(&pp, &nfd_object("NodeFeatureRule", "ge", ge_rule_spec()))
        .await
        .unwrap_or_else(|e| panic!("{tag}: op Ge refused after the upgrade: {e}"));
    assert_eq!(
        spec(rules.get("ge").await.expect("ge rule")),
        ge_rule_spec(),
        "{tag}: `type` must not be pruned"
    );
    groups
        .create(
            &pp,
            &nfd_object(
                "NodeFeatureGroup",
                "new",
                json!({"featureGroupRules": [{"name": "gpu", "vars": {"gpu": "true"},
                    "matchFeatures": [{"feature": "pci.device",
                        "matchName": {"op": "In", "value": ["10de"]}}]}]}),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("{tag}: NodeFeatureGroup refused after the upgrade: {e}"));
    println!(
        "{tag}: upgraded with {} crd writes, {} write requests in all",
        run.writes("crd"),
        run.writes_sent()
    );
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn upgrades_v0_14() {
    upgrades_from("v0.14.6", "v0.14", false).await;
}

#[tokio::test]
async fn upgrades_v0_15() {
    upgrades_from("v0.15.7", "v0.15", false).await;
}

#[tokio::test]
async fn upgrades_v0_16() {
    upgrades_from("v0.16.9", "v0.16", true).await;
}

#[tokio::test]
async fn upgrades_v0_17() {
    upgrades_from("v0.17.4", "v0.16", true).await;
}

#[tokio::test]
async fn current_crds_get_zero_writes() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    // The newest upstream file, as `kubectl apply` (or a fresh Helm install) leaves it.
    kubectl_apply(&env, &served_path("v0.19.0")).await;
    wait_established(&client, &NFD_CRD_NAMES).await;
    apply_profile(&client, PROFILE).await;
    let before = versions(&client).await;

    let run = start_controller(&env, args("apply"));
    let message = wait_for_condition(&client, "True", reasons::CURRENT).await;
    assert!(message.contains("v0.18 (NFD v0.18.x-v0.19.x)"), "{message}");
    wait_all_in_state(&run, "current").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(run.writes("crd"), 0);
    // The profile's first status and its ProfileReady Event are the only writes.
    assert_eq!(
        run.writes_sent(),
        run.writes("profile_status") + run.writes("event"),
        "besides the profile status and its Event, nothing is written"
    );
    for reason in ["NfdCrdsInstalled", "NfdCrdsUpgraded", "NfdCrdsWouldChange"] {
        assert!(profile_events(&client, reason).await.is_empty(), "{reason}");
    }
    run.stop().await.expect("clean stop");

    // A restart with the condition already in place: not one write request.
    let run = start_controller(&env, args("apply"));
    wait_all_in_state(&run, "current").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "current CRDs, restart: {} crd writes, {} write requests",
        run.writes("crd"),
        run.writes_sent()
    );
    assert_eq!(run.writes("crd"), 0);
    assert_eq!(run.writes_sent(), 0);
    run.stop().await.expect("clean stop");
    assert_eq!(versions(&client).await, before, "the CRDs were not touched");
    for name in NFD_CRD_NAMES {
        assert!(
            !managers(&client, name)
                .await
                .contains(&keys::FIELD_MANAGER.to_owned()),
            "{name}"
        );
    }
}

/// The v0.19.0 file with an extra served version on NodeFeatureRule and an
/// extra field in NodeFeature: what a later NFD might ship.
fn future_crds(dir: &Path) -> PathBuf {
    let mut crds = read_crds(&served_path("v0.19.0"));
    for crd in &mut crds {
        match crd.metadata.name.as_deref() {
            Some(NODE_FEATURE_RULE_CRD) => {
                let mut v2 = crd.spec.versions[0].clone();
                v2.name = "v1alpha2".into();
                v2.storage = false;
                crd.spec.versions.push(v2);
            }
            Some(NODE_FEATURE_CRD) => add_spec_field(crd, "priority"),
            _ => {}
        }
    }
    let mut yaml = String::new();
    for crd in &crds {
        yaml.push_str("---\n");
        yaml.push_str(&serde_yaml_ng::to_string(crd).expect("YAML"));
    }
    let path = dir.join("future-nfd-crds.yaml");
    std::fs::write(&path, yaml).expect("write future CRDs");
    path
}

#[tokio::test]
async fn newer_crds_are_left_alone_and_reported() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let tmp = tempfile::tempdir().expect("tempdir");
    kubectl_apply(&env, &future_crds(tmp.path())).await;
    wait_established(&client, &NFD_CRD_NAMES).await;
    apply_profile(&client, PROFILE).await;
    let before = versions(&client).await;

    let run = start_controller(&env, args("apply"));
    let message = wait_for_condition(&client, "True", reasons::NEWER_LEFT_ALONE).await;
    assert!(
        message.contains(NODE_FEATURE_RULE_CRD) && message.contains("v1alpha2"),
        "{message}"
    );
    assert!(
        message.contains(NODE_FEATURE_CRD) && message.contains("priority"),
        "{message}"
    );
    assert!(!message.contains(NODE_FEATURE_GROUP_CRD), "{message}");
    eventually(30, "metrics: two newer, one current", || async {
        (crd_state(&run, NODE_FEATURE_RULE_CRD, "newer") == Some(1)
            && crd_state(&run, NODE_FEATURE_CRD, "newer") == Some(1)
            && crd_state(&run, NODE_FEATURE_GROUP_CRD, "current") == Some(1))
        .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(run.writes("crd"), 0);
    run.stop().await.expect("clean stop");
    assert_eq!(versions(&client).await, before, "the CRDs were not touched");
    let rule = crd_api(&client)
        .get(NODE_FEATURE_RULE_CRD)
        .await
        .expect("rule CRD");
    assert_eq!(rule.spec.versions.len(), 2, "v1alpha2 kept");
}

#[tokio::test]
async fn check_mode_writes_nothing_and_names_the_difference() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let Some(helm_era) = upstream_path("v0.15.7") else {
        return;
    };
    kubectl_apply(&env, &helm_era).await;
    wait_established(&client, &[NODE_FEATURE_CRD, NODE_FEATURE_RULE_CRD]).await;
    apply_profile(&client, PROFILE).await;
    let before = versions(&client).await;

    let run = start_controller(&env, args("check"));
    let message = wait_for_condition(&client, "False", reasons::CHECK_ONLY_WOULD_CHANGE).await;
    assert!(
        message.contains(&format!("create {NODE_FEATURE_GROUP_CRD}")),
        "{message}"
    );
    assert!(
        message.contains(&format!("upgrade {NODE_FEATURE_RULE_CRD} from v0.15")),
        "{message}"
    );
    assert!(
        message.contains("Ge"),
        "names what the upgrade adds: {message}"
    );
    assert!(!message.contains(NODE_FEATURE_CRD), "{message}");
    eventually(30, "an NfdCrdsWouldChange Event", || async {
        (!profile_events(&client, "NfdCrdsWouldChange")
            .await
            .is_empty())
        .then_some(())
    })
    .await;
    assert_eq!(crd_state(&run, NODE_FEATURE_GROUP_CRD, "missing"), Some(1));
    assert_eq!(crd_state(&run, NODE_FEATURE_RULE_CRD, "older"), Some(1));
    assert_eq!(crd_state(&run, NODE_FEATURE_CRD, "current"), Some(1));
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "check mode: {} crd writes, {} write requests ({} profile status, {} events)",
        run.writes("crd"),
        run.writes_sent(),
        run.writes("profile_status"),
        run.writes("event")
    );
    assert_eq!(run.writes("crd"), 0);
    assert_eq!(
        run.writes_sent(),
        run.writes("profile_status") + run.writes("event"),
        "only the profile's status and Event are written"
    );
    run.stop().await.expect("clean stop");
    assert_eq!(versions(&client).await, before, "the CRDs were not touched");
}

// ---------------------------------------------------------------- CLI

/// `gpuready <args>` with `KUBECONFIG=<kubeconfig>`.
async fn gpuready(kubeconfig: &Path, args: &[&str]) -> Out {
    let mut cmd = gpuready_with_kubeconfig(kubeconfig);
    cmd.args(args);
    run(cmd, None).await
}

#[tokio::test]
async fn cli_diff_exit_codes_and_apply() {
    let env = TestEnv::start().await.expect("test control plane");
    let client = env.client().expect("client");
    let kc = env.kubeconfig_path();

    // print: the committed file.
    let printed = gpuready(kc, &["nfd-crds", "print"]).await;
    assert_eq!(printed.code, Some(0), "{}", printed.stderr);
    let committed = std::fs::read_to_string(repo_root().join("deploy/crds/nfd-crds.yaml"))
        .expect("committed NFD CRDs");
    assert_eq!(printed.stdout, committed);

    // Nothing installed: everything missing.
    let out = gpuready(kc, &["nfd-crds", "diff"]).await;
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    for name in NFD_CRD_NAMES {
        assert!(
            out.stdout
                .contains(&format!("{name}: missing; apply would create it")),
            "{}",
            out.stdout
        );
    }

    // NFD v0.15 as kubectl leaves it (the rest needs a release the Go module
    // proxy does not serve; the loader says so when it is absent).
    let Some(helm_era) = upstream_path("v0.15.7") else {
        return;
    };
    kubectl_apply(&env, &helm_era).await;
    wait_established(&client, &[NODE_FEATURE_CRD, NODE_FEATURE_RULE_CRD]).await;
    let out = gpuready(kc, &["nfd-crds", "diff"]).await;
    println!("{}", out.stdout);
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("installed: v0.15"), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("{NODE_FEATURE_CRD}: current")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "{NODE_FEATURE_RULE_CRD}: older (installed release v0.15); apply would upgrade it:"
        )),
        "{}",
        out.stdout
    );
    // Every change is listed, not the first few the condition message shows.
    let changes = out.stdout.lines().filter(|l| l.starts_with("    ")).count();
    assert!(changes > 5, "{}", out.stdout);
    assert!(
        !out.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("and ") && l.ends_with(" more")),
        "{}",
        out.stdout
    );

    // apply: creates one, upgrades one, waits for Established.
    let out = gpuready(kc, &["nfd-crds", "apply"]).await;
    println!("{}", out.stdout);
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains(&format!("{NODE_FEATURE_GROUP_CRD}: Established")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("done: 1 created, 1 upgraded, 1 already current"),
        "{}",
        out.stdout
    );
    let out = gpuready(kc, &["nfd-crds", "diff"]).await;
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("Nothing to do."), "{}", out.stdout);

    // A newer CRD: nothing to do, and apply leaves it alone.
    let tmp = tempfile::tempdir().expect("tempdir");
    kubectl_apply(&env, &future_crds(tmp.path())).await;
    let out = gpuready(kc, &["nfd-crds", "diff"]).await;
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "{NODE_FEATURE_RULE_CRD}: newer than gpuready's; apply leaves it alone"
        )),
        "{}",
        out.stdout
    );
    let out = gpuready(kc, &["nfd-crds", "apply"]).await;
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let rule = crd_api(&client)
        .get(NODE_FEATURE_RULE_CRD)
        .await
        .expect("rule CRD");
    assert_eq!(
        rule.spec.versions.len(),
        2,
        "apply left the newer CRD alone"
    );

    // Errors: 2, with a message.
    let missing = tmp.path().join("no-such-kubeconfig");
    let out = gpuready(&missing, &["nfd-crds", "diff"]).await;
    assert_eq!(out.code, Some(2), "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    let unreachable = tmp.path().join("unreachable-kubeconfig");
    let text = std::fs::read_to_string(kc).expect("kubeconfig");
    std::fs::write(
        &unreachable,
        text.replace(&env.apiserver_url(), "https://127.0.0.1:1"),
    )
    .expect("write kubeconfig");
    let out = gpuready(&unreachable, &["nfd-crds", "diff"]).await;
    assert_eq!(out.code, Some(2), "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
    let out = gpuready(kc, &["nfd-crds", "diff", "--context", "nope"]).await;
    assert_eq!(out.code, Some(2), "{}{}", out.stdout, out.stderr);
}

// ---------------------------------------------------------------- RBAC

/// A ClusterRole on the three NFD CRDs by name, bound to service account `sa`.
async fn grant_on_nfd_crds(client: &Client, sa: &str, verbs: &[&str]) {
    grant_cluster_role(
        client,
        sa,
        json!([{
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": NFD_CRD_NAMES,
            "verbs": verbs,
        }]),
        json!({ "kind": "ServiceAccount", "namespace": "default", "name": sa }),
    )
    .await;
}

/// What the README and the module docs promise: get, list, watch, patch and
/// create on the three names are enough to create, upgrade, watch and wait (an
/// apply that creates is authorised as `create` by name; the watches need no
/// cluster-wide list); without `patch` the reading side works and the error
/// says what to grant.
#[tokio::test]
async fn resource_names_rbac_is_enough_and_check_needs_no_patch() {
    use gpuready::nfd_io::{apply_crd, desired, wait_established as established};
    let env = TestEnv::start().await.expect("test control plane");
    let admin = env.client().expect("client");
    // v0.17 has the same CRD set as v0.16 (both fingerprint as V0_16_17) and the
    // Go module proxy serves it, so this runs on a plain clone.
    kubectl_apply(&env, &served_path("v0.17.4")).await;
    wait_established(&admin, &NFD_CRD_NAMES).await;
    // Missing (NodeFeature) and Older (the other two) at once.
    crd_api(&admin)
        .delete(NODE_FEATURE_CRD, &Default::default())
        .await
        .expect("delete NodeFeature CRD");
    eventually(30, "NodeFeature CRD gone", || async {
        crd_api(&admin)
            .get_opt(NODE_FEATURE_CRD)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    grant_on_nfd_crds(&admin, "nfd-reader", &["get", "list", "watch"]).await;
    grant_on_nfd_crds(
        &admin,
        "nfd-writer",
        &["get", "list", "watch", "patch", "create"],
    )
    .await;

    // Check needs only the reading verbs.
    let reader = crd_api(
        &env.client_as_service_account("default", "nfd-reader")
            .expect("client"),
    );
    let plan = eventually(30, "the reader's role in effect", || async {
        read_plan(&reader).await.ok()
    })
    .await;
    assert_eq!(plan.to_apply().count(), 3, "{plan}");
    let crd = desired(NODE_FEATURE_RULE_CRD).expect("ours");
    let err = apply_crd(&reader, &crd)
        .await
        .expect_err("no patch, no apply");
    assert!(
        err.hint()
            .contains("patch and create on customresourcedefinitions"),
        "{err}: {}",
        err.hint()
    );

    // Apply with get/list/watch/patch by name: creates, upgrades, waits.
    let writer = crd_api(
        &env.client_as_service_account("default", "nfd-writer")
            .expect("client"),
    );
    let plan = eventually(30, "the writer's role in effect", || async {
        read_plan(&writer).await.ok()
    })
    .await;
    for name in plan.to_apply().map(str::to_owned).collect::<Vec<_>>() {
        let crd = desired(&name).expect("ours");
        apply_crd(&writer, &crd)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        established(&writer, &name, Duration::from_secs(30))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let after = read_plan(&writer).await.expect("plan");
    assert!(after.is_noop(), "{after}");
}
