//! The NFD CRDs against a real kube-apiserver: the committed set installs as
//! structural and Established, upgrades a Helm-era (NFD v0.15) set in place with
//! its objects kept, and the classification in `gpuready-core` reads the API
//! server's own copies correctly (older → apply, after the apply → zero writes,
//! a newer CRD → left alone).
//!
//! NFD's CRDs are cluster-wide with fixed names, so the whole story is one test
//! on this binary's own control plane. Needs `tests/control-plane/build.sh`; the
//! Helm-era v0.15 files come from the folder `GPUREADY_EXTRA_NFD_CRDS` names
//! (the Go module proxy does not serve that release), and without it the test
//! prints that it did not run.

use crate::support;

use gpuready_api::crd::{self, COMMITTED_NFD_CRDS_PATH};
use gpuready_api::nfd::{
    NODE_FEATURE_CRD, NODE_FEATURE_GROUP_CRD, NODE_FEATURE_RULE_CRD, NfdCrdRelease,
};
use gpuready_core::nfd_crds::{CrdClass, NfdCrdPlan, plan};
use gpuready_testenv::TestEnv;
use gpuready_testenv::upstream_nfd;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

const NAMES: [&str; 3] = [
    NODE_FEATURE_CRD,
    NODE_FEATURE_GROUP_CRD,
    NODE_FEATURE_RULE_CRD,
];

/// What the controller does: read each CRD (or nothing) and plan.
async fn read_plan(crds: &Api<CustomResourceDefinition>) -> NfdCrdPlan {
    let mut found = Vec::new();
    for name in NAMES {
        found.push(crds.get_opt(name).await.expect("get CRD"));
    }
    plan(&crd::nfd_crds(), found.iter().flatten())
}

fn class<'a>(plan: &'a NfdCrdPlan, name: &str) -> &'a CrdClass {
    plan.class_of(name).expect("verdict")
}

#[tokio::test]
async fn helm_era_crds_are_upgraded_and_then_left_alone() {
    let env = TestEnv::shared().await.expect("test control plane");
    let client = env.client().expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());

    // 1. NFD v0.15 as Helm leaves it: created once, no NodeFeatureGroup. The
    // Go module proxy does not serve v0.15: without GPUREADY_EXTRA_NFD_CRDS the
    // loader says this test did not run.
    let Some(helm_era) = upstream_nfd::crds("v0.15.7").expect("upstream NFD CRDs") else {
        return;
    };
    for crd in helm_era {
        let name = crd.metadata.name.clone().expect("name");
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create v0.15 CRD");
        wait_established(&client, &[&name]).await;
    }
    let rules = nfd_api(&client, "NodeFeatureRule", None);
    rules
        .create(
            &PostParams::default(),
            &nfd_object(
                "NodeFeatureRule",
                "helm-era",
                json!({"rules": [{"name": "nvidia", "labels": {"example.com/gpu": "true"},
                    "matchFeatures": [{"feature": "pci.device",
                        "matchExpressions": {"vendor": {"op": "In", "value": ["10de"]}}}]}]}),
            ),
        )
        .await
        .expect("a v0.15 rule");
    // The stale CRD refuses the v0.18 operators.
    let ge_rule = nfd_object(
        "NodeFeatureRule",
        "driver-at-least",
        json!({"rules": [{"name": "driver", "labels": {"example.com/driver-ok": "true"},
            "matchFeatures": [{"feature": "kernel.version",
                "matchExpressions": {"full": {"op": "Ge", "value": ["6.8.0"], "type": "version"}}}]}]}),
    );
    assert!(
        rules
            .create(&PostParams::default(), &ge_rule)
            .await
            .is_err(),
        "a v0.15 CRD should refuse op Ge"
    );

    // 2. The API server's copies classify as expected.
    let before = read_plan(&crds).await;
    assert_eq!(
        before.installed_release,
        Some(NfdCrdRelease::V0_15),
        "{before}"
    );
    assert_eq!(
        class(&before, NODE_FEATURE_CRD),
        &CrdClass::Current,
        "{before}"
    );
    assert_eq!(
        class(&before, NODE_FEATURE_GROUP_CRD),
        &CrdClass::Missing,
        "{before}"
    );
    assert!(
        matches!(
            class(&before, NODE_FEATURE_RULE_CRD),
            CrdClass::Older {
                installed_release: Some(NfdCrdRelease::V0_15),
                ..
            }
        ),
        "{before}"
    );

    // 3. Apply what the plan says, from the committed file (what users get).
    let committed = read_crds(&repo_root().join(COMMITTED_NFD_CRDS_PATH));
    for name in before.to_apply() {
        let crd = committed
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .expect("committed CRD");
        crds.patch(
            name,
            &PatchParams::apply(TEST_MANAGER).force(),
            &Patch::Apply(crd),
        )
        .await
        .unwrap_or_else(|e| panic!("the API server refused {name}: {e}"));
        wait_established(&client, &[name]).await;
    }

    // 4. Next pass: nothing to do.
    let after = read_plan(&crds).await;
    assert!(after.is_noop(), "{after}");
    assert_eq!(after.installed_release, Some(NfdCrdRelease::V0_18_19));

    // 5. The old object survived, and the new API works without pruning.
    rules.get("helm-era").await.expect("v0.15 rule kept");
    rules
        .create(&PostParams::default(), &ge_rule)
        .await
        .expect("op Ge accepted after the upgrade");
    let stored = rules.get("driver-at-least").await.expect("get");
    assert_eq!(
        stored
            .data
            .pointer("/spec/rules/0/matchFeatures/0/matchExpressions/full/type"),
        Some(&json!("version")),
        "`type` must not be pruned"
    );
    let ns = env.create_namespace("nfd").await.expect("namespace");
    let groups = nfd_api(&client, "NodeFeatureGroup", Some(&ns));
    groups
        .create(
            &PostParams::default(),
            &nfd_object(
                "NodeFeatureGroup",
                "gpus",
                json!({"featureGroupRules": [{"name": "nvidia", "vars": {"gpu": "true"},
                    "matchFeatures": [{"feature": "pci.device",
                        "matchName": {"op": "In", "value": ["10de"]}}]}]}),
            ),
        )
        .await
        .expect("NodeFeatureGroup accepted");
    let group = groups.get("gpus").await.expect("get group");
    assert_eq!(
        group.data.pointer("/spec/featureGroupRules/0/vars/gpu"),
        Some(&json!("true"))
    );

    // 6. A CRD that has something ours lacks (say, from a newer NFD) is left alone.
    let mut future = crds.get(NODE_FEATURE_CRD).await.expect("get");
    future.metadata.managed_fields = None;
    future.metadata.resource_version = None;
    future.status = None;
    add_spec_field(&mut future, "priority");
    crds.patch(
        NODE_FEATURE_CRD,
        &PatchParams::apply("nfd-future").force(),
        &Patch::Apply(&future),
    )
    .await
    .expect("apply the 'future' NodeFeature CRD");
    let later = read_plan(&crds).await;
    assert!(
        matches!(class(&later, NODE_FEATURE_CRD), CrdClass::Newer { reason } if reason.contains("priority")),
        "{later}"
    );
    assert_eq!(later.to_apply().count(), 0, "{later}");
}
