//! The classification's cases: each installed form of the NFD CRDs against
//! the carried set, and the plan and messages each gives.

use std::collections::BTreeMap;

use gpuready_api::crd::nfd_crds;
use gpuready_api::nfd::{NODE_FEATURE_CRD, NODE_FEATURE_GROUP_CRD, NODE_FEATURE_RULE_CRD};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinitionStatus, JSON, JSONSchemaProps,
    JSONSchemaPropsOrArray,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};

use super::*;

/// Upstream NFD CRDs from the one test-support loader; `None` (after it
/// printed that the case did not run) for an older release this run cannot read.
fn upstream(tag: &str) -> Option<Vec<CustomResourceDefinition>> {
    gpuready_testenv::upstream_nfd::crds(tag).expect("upstream NFD CRDs")
}

/// A release the Go module proxy serves: fetched and cached, never skipped.
fn served(tag: &str) -> Vec<CustomResourceDefinition> {
    upstream(tag).expect("a release the Go module proxy serves is never skipped")
}

/// What the API server returns for a CRD it stores: ids, timestamps,
/// managedFields, an extra annotation, default conversion, status.
fn as_read_back(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let m = &mut crd.metadata;
    m.uid = Some("6c1f0b9e-0000-4000-8000-000000000001".into());
    m.resource_version = Some("4242".into());
    m.generation = Some(3);
    m.creation_timestamp = Some(Time(Default::default()));
    m.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("helm".into()),
        operation: Some("Update".into()),
        ..Default::default()
    }]);
    m.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert("meta.helm.sh/release-name".into(), "gpu-operator".into());
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "None".into(),
        webhook: None,
    });
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    crd.spec.names.singular = Some(crd.spec.names.kind.to_lowercase());
    crd.status = Some(CustomResourceDefinitionStatus {
        accepted_names: Some(crd.spec.names.clone()),
        conditions: Some(vec![]),
        stored_versions: Some(vec!["v1alpha1".into()]),
    });
    crd
}

fn class_of<'a>(plan: &'a NfdCrdPlan, name: &str) -> &'a CrdClass {
    plan.class_of(name).expect("verdict")
}

fn rule_root(crd: &mut CustomResourceDefinition) -> &mut JSONSchemaProps {
    crd.spec.versions[0]
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .expect("schema")
}

fn get<'a>(
    crds: &'a mut [CustomResourceDefinition],
    name: &str,
) -> &'a mut CustomResourceDefinition {
    crds.iter_mut()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .expect("crd")
}

#[test]
fn nothing_installed_means_all_missing() {
    let plan = plan(&nfd_crds(), []);
    assert_eq!(plan.installed_release, None);
    assert!(plan.verdicts.iter().all(|v| v.class == CrdClass::Missing));
    assert_eq!(
        plan.to_apply().collect::<Vec<_>>(),
        [
            NODE_FEATURE_CRD,
            NODE_FEATURE_GROUP_CRD,
            NODE_FEATURE_RULE_CRD
        ]
    );
}

#[test]
fn older_releases_are_upgraded() {
    let cases = [
        ("v0.14.6", NfdCrdRelease::V0_14, true),
        ("v0.15.7", NfdCrdRelease::V0_15, true),
        ("v0.16.9", NfdCrdRelease::V0_16_17, false),
        ("v0.17.4", NfdCrdRelease::V0_16_17, false),
    ];
    for (tag, release, nfg_missing) in cases {
        let Some(installed) = upstream(tag) else {
            continue;
        };
        let installed: Vec<_> = installed.into_iter().map(as_read_back).collect();
        let plan = plan(&nfd_crds(), &installed);
        assert_eq!(plan.installed_release, Some(release), "{tag}");
        // NodeFeature has not changed since v0.14.
        assert_eq!(
            class_of(&plan, NODE_FEATURE_CRD),
            &CrdClass::Current,
            "{tag}"
        );
        match class_of(&plan, NODE_FEATURE_RULE_CRD) {
            CrdClass::Older {
                installed_release,
                changes,
            } => {
                assert_eq!(*installed_release, Some(release), "{tag}");
                assert!(!changes.is_empty(), "{tag}");
            }
            other => panic!("{tag}: NodeFeatureRule is {other:?}"),
        }
        let nfg = class_of(&plan, NODE_FEATURE_GROUP_CRD);
        if nfg_missing {
            assert_eq!(nfg, &CrdClass::Missing, "{tag}");
        } else {
            assert!(matches!(nfg, CrdClass::Older { .. }), "{tag}: {nfg:?}");
        }
        assert_eq!(plan.newer().count(), 0, "{tag}");
        assert!(!plan.is_noop());
    }
}

#[test]
fn older_lists_what_gpuready_adds() {
    let installed = served("v0.17.4");
    let plan = plan(&nfd_crds(), &installed);
    let CrdClass::Older { changes, .. } = class_of(&plan, NODE_FEATURE_GROUP_CRD) else {
        panic!("expected Older");
    };
    let text = changes.join("\n");
    assert!(text.contains("(only gpuready: [Ge, GeLe, Le])"), "{text}");
    assert!(
        text.contains("and "),
        "more than {MAX_LISTED} changes are capped: {text}"
    );
}

#[test]
fn v0_14_required_match_expressions_is_not_mistaken_for_newer() {
    // v0.14 requires `matchExpressions`, which later releases made optional:
    // an installed-only `required` entry is a lifted restriction, not an
    // extra capability.
    let Some(installed) = upstream("v0.14.6") else {
        return;
    };
    let want = nfd_crds();
    let find = |crds: &[CustomResourceDefinition]| {
        crds.iter()
            .find(|c| c.metadata.name.as_deref() == Some(NODE_FEATURE_RULE_CRD))
            .cloned()
            .expect("rule CRD")
    };
    let (have, want) = (find(&installed), find(&want));
    let diffs = diff(&normal_form(&have), &normal_form(&want));
    assert!(
        diffs
            .iter()
            .any(|d| d.key() == "required" && !d.only_left_members().is_empty()),
        "the v0.14 file should require more than ours"
    );
    assert!(matches!(
        classify(&want, Some(&have), None),
        CrdClass::Older { .. }
    ));
}

#[test]
fn current_releases_need_no_write() {
    for tag in ["v0.18.3", "v0.19.0"] {
        let installed: Vec<_> = served(tag).into_iter().map(as_read_back).collect();
        let plan = plan(&nfd_crds(), &installed);
        assert!(plan.is_noop(), "{tag}: {plan}");
        assert_eq!(plan.to_apply().count(), 0);
        assert_eq!(plan.installed_release, Some(NfdCrdRelease::V0_18_19));
    }
    // Ours, read back after we applied them.
    let ours: Vec<_> = nfd_crds().into_iter().map(as_read_back).collect();
    assert!(plan(&nfd_crds(), &ours).is_noop());
}

#[test]
fn other_crds_are_ignored() {
    let mut installed = served("v0.19.0");
    let mut stranger = installed[0].clone();
    stranger.metadata.name = Some("widgets.example.com".into());
    stranger.spec.group = "example.com".into();
    installed.push(stranger);
    let plan = plan(&nfd_crds(), &installed);
    assert!(plan.is_noop());
    assert_eq!(plan.verdicts.len(), 3);
}

#[test]
fn extra_version_is_newer() {
    let mut installed = served("v0.19.0");
    let rule = get(&mut installed, NODE_FEATURE_RULE_CRD);
    let mut v2 = rule.spec.versions[0].clone();
    v2.name = "v1alpha2".into();
    v2.storage = false;
    rule.spec.versions.push(v2);
    let plan = plan(&nfd_crds(), &installed);
    let CrdClass::Newer { reason } = class_of(&plan, NODE_FEATURE_RULE_CRD) else {
        panic!("expected Newer: {plan}");
    };
    assert!(reason.contains("spec.versions[v1alpha2]"), "{reason}");
    assert_eq!(plan.to_apply().count(), 0);
    assert_eq!(plan.newer().count(), 1);
}

#[test]
fn extra_field_is_newer_even_if_other_parts_are_older() {
    // A v0.17 rule CRD (lacks Ge, type) that also has a field ours lacks.
    let mut installed = served("v0.17.4");
    let rule = get(&mut installed, NODE_FEATURE_RULE_CRD);
    let spec = rule_root(rule)
        .properties
        .as_mut()
        .and_then(|p| p.get_mut("spec"))
        .expect("spec");
    spec.properties.get_or_insert_with(BTreeMap::new).insert(
        "priority".into(),
        JSONSchemaProps {
            type_: Some("integer".into()),
            ..Default::default()
        },
    );
    let plan = plan(&nfd_crds(), &installed);
    let CrdClass::Newer { reason } = class_of(&plan, NODE_FEATURE_RULE_CRD) else {
        panic!("expected Newer: {plan}");
    };
    assert!(
        reason.contains("properties.spec.properties.priority"),
        "{reason}"
    );
    // The others are still planned independently.
    assert!(matches!(
        class_of(&plan, NODE_FEATURE_GROUP_CRD),
        CrdClass::Older { .. }
    ));
}

#[test]
fn extra_enum_value_is_newer() {
    let mut installed = served("v0.19.0");
    let group = get(&mut installed, NODE_FEATURE_GROUP_CRD);
    // Add a hypothetical operator to the top-level matchName op enum.
    let op = rule_root(group)
        .properties
        .as_mut()
        .and_then(|p| p.get_mut("spec"))
        .and_then(|s| s.properties.as_mut())
        .and_then(|p| p.get_mut("featureGroupRules"))
        .and_then(|r| match r.items.as_mut() {
            Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s),
            _ => None,
        })
        .and_then(|i| i.properties.as_mut())
        .and_then(|p| p.get_mut("matchFeatures"))
        .and_then(|m| match m.items.as_mut() {
            Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s),
            _ => None,
        })
        .and_then(|t| t.properties.as_mut())
        .and_then(|p| p.get_mut("matchName"))
        .and_then(|n| n.properties.as_mut())
        .and_then(|p| p.get_mut("op"))
        .expect("op");
    op.enum_
        .get_or_insert_with(Vec::new)
        .push(JSON(Value::String("Matches".into())));
    let plan = plan(&nfd_crds(), &installed);
    let CrdClass::Newer { reason } = class_of(&plan, NODE_FEATURE_GROUP_CRD) else {
        panic!("expected Newer: {plan}");
    };
    assert!(reason.contains("(only installed: [Matches])"), "{reason}");
    assert_eq!(class_of(&plan, NODE_FEATURE_RULE_CRD), &CrdClass::Current);
}

#[test]
fn newer_gpuready_annotation_is_respected() {
    let mut installed = nfd_crds();
    for crd in &mut installed {
        crd.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(NFD_CRD_RELEASE_ANNOTATION.into(), "v0.21".into());
    }
    let plan = plan(&nfd_crds(), &installed);
    assert_eq!(plan.newer().count(), 3, "{plan}");

    // An older mark on a schema equal to ours is not worth a write.
    let mut installed = nfd_crds();
    for crd in &mut installed {
        crd.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(NFD_CRD_RELEASE_ANNOTATION.into(), "v0.16".into());
    }
    assert!(plan_is_noop(&installed));
}

fn plan_is_noop(installed: &[CustomResourceDefinition]) -> bool {
    plan(&nfd_crds(), installed).is_noop()
}

#[test]
fn stored_version_we_lack_is_newer() {
    let mut installed: Vec<_> = served("v0.19.0").into_iter().map(as_read_back).collect();
    let nf = get(&mut installed, NODE_FEATURE_CRD);
    if let Some(status) = nf.status.as_mut() {
        status.stored_versions = Some(vec!["v1alpha1".into(), "v1beta1".into()]);
    }
    let plan = plan(&nfd_crds(), &installed);
    assert!(
        matches!(class_of(&plan, NODE_FEATURE_CRD), CrdClass::Newer { reason } if reason.contains("v1beta1")),
        "{plan}"
    );
}

#[test]
fn immutable_difference_is_left_alone() {
    // Any upstream release: the scope is the same in all of them. v0.17 is
    // served by the Go module proxy, so this runs on a plain clone.
    let mut installed = served("v0.17.4");
    get(&mut installed, NODE_FEATURE_RULE_CRD).spec.scope = "Namespaced".into();
    let plan = plan(&nfd_crds(), &installed);
    assert!(
        matches!(class_of(&plan, NODE_FEATURE_RULE_CRD), CrdClass::Newer { reason } if reason.contains("spec.scope")),
        "{plan}"
    );
}

#[test]
fn display_names_every_crd() {
    let Some(installed) = upstream("v0.15.7") else {
        return;
    };
    let text = plan(&nfd_crds(), &installed).to_string();
    assert!(
        text.starts_with(
            "NFD CRDs: gpuready carries v0.18 (NFD v0.18.x-v0.19.x), installed: v0.15"
        ),
        "{text}"
    );
    assert!(
        text.contains("nodefeaturegroups.nfd.k8s-sigs.io: missing, will create"),
        "{text}"
    );
    assert!(
        text.contains("nodefeatures.nfd.k8s-sigs.io: current"),
        "{text}"
    );
}
