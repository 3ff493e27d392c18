//! Tests of `words`, in their own file beside it.

use super::*;
use gpuready_api::nfd::{NODE_FEATURE_CRD, NODE_FEATURE_GROUP_CRD, NODE_FEATURE_RULE_CRD};

fn verdict(name: &str, class: CrdClass) -> CrdVerdict {
    CrdVerdict {
        name: name.into(),
        class,
    }
}

fn plan_of(verdicts: Vec<CrdVerdict>) -> NfdCrdPlan {
    NfdCrdPlan {
        carried: NfdCrdRelease::CARRIED,
        installed_release: Some(NfdCrdRelease::V0_15),
        verdicts,
    }
}

#[test]
fn check_names_each_difference_and_is_false() {
    let p = plan_of(vec![
        verdict(NODE_FEATURE_CRD, CrdClass::Current),
        verdict(NODE_FEATURE_GROUP_CRD, CrdClass::Missing),
        verdict(
            NODE_FEATURE_RULE_CRD,
            CrdClass::Older {
                installed_release: Some(NfdCrdRelease::V0_15),
                changes: vec!["op.enum: (only gpuready: [Ge])".into()],
            },
        ),
    ]);
    let c = check_condition(&p);
    assert!(!c.ready);
    assert_eq!(c.reason, reasons::CHECK_ONLY_WOULD_CHANGE);
    assert!(c.message.contains("create nodefeaturegroups"), "{c:?}");
    assert!(
        c.message
            .contains("upgrade nodefeaturerules.nfd.k8s-sigs.io from v0.15 (op.enum"),
        "{c:?}"
    );
}

#[test]
fn newer_is_true_and_says_why() {
    let p = plan_of(vec![
        verdict(NODE_FEATURE_CRD, CrdClass::Current),
        verdict(
            NODE_FEATURE_RULE_CRD,
            CrdClass::Newer {
                reason: "has v1alpha2".into(),
            },
        ),
    ]);
    for c in [check_condition(&p), resting_condition(&p)] {
        assert!(c.ready);
        assert_eq!(c.reason, reasons::NEWER_LEFT_ALONE);
        assert!(
            c.message
                .contains("nodefeaturerules.nfd.k8s-sigs.io: has v1alpha2")
        );
    }
}

#[test]
fn applied_message_is_stable_and_names_both_kinds() {
    let nfg = verdict(NODE_FEATURE_GROUP_CRD, CrdClass::Missing);
    let nfr = verdict(
        NODE_FEATURE_RULE_CRD,
        CrdClass::Older {
            installed_release: Some(NfdCrdRelease::V0_15),
            changes: vec![],
        },
    );
    let p = plan_of(vec![nfg.clone(), nfr.clone()]);
    let c = applied_condition(&p, &[&nfg, &nfr]);
    assert_eq!(c.reason, reasons::UPGRADED);
    assert_eq!(
        c.message,
        "upgraded nodefeaturerules.nfd.k8s-sigs.io from v0.15 and created \
         nodefeaturegroups.nfd.k8s-sigs.io to release v0.18 (NFD v0.18.x-v0.19.x); Established"
    );
    assert_eq!(applied_condition(&p, &[&nfg]).reason, reasons::INSTALLED);
}

#[test]
fn a_failed_apply_names_what_it_tried_and_why() {
    let nfg = verdict(NODE_FEATURE_GROUP_CRD, CrdClass::Missing);
    let c = apply_failed_condition(&[&nfg], false, "boom", hint_for_status(Some(403)));
    assert_eq!(c.reason, reasons::MISSING);
    assert!(
        c.message.starts_with(
            "NFD CRDs to create or upgrade: nodefeaturegroups.nfd.k8s-sigs.io (missing); \
             could not create or upgrade them: boom; the identity in use needs"
        ),
        "{c:?}"
    );
    let c = apply_failed_condition(&[&nfg], true, "slow", NOT_ESTABLISHED_HINT);
    assert_eq!(c.reason, reasons::NOT_ESTABLISHED);
    assert!(
        c.message
            .contains("applied, but slow; see the CRD's status")
    );
}

#[test]
fn hints_tell_what_to_do() {
    assert!(hint_for_status(Some(403)).contains("patch and create on customresourcedefinitions"));
    assert!(hint_for_status(Some(422)).contains("gpuready nfd-crds diff"));
    assert!(hint_for_status(None).contains("reachable"));
}

#[test]
fn the_cli_words_each_step_and_the_summary() {
    let nfg = verdict(NODE_FEATURE_GROUP_CRD, CrdClass::Missing);
    let nf = verdict(NODE_FEATURE_CRD, CrdClass::Current);
    let nfr = verdict(
        NODE_FEATURE_RULE_CRD,
        CrdClass::Older {
            installed_release: None,
            changes: vec![],
        },
    );
    let v15 = Some(NfdCrdRelease::V0_15);
    assert_eq!(
        ApplyStep::Applying(&nfg).line(v15).as_deref(),
        Some("nodefeaturegroups.nfd.k8s-sigs.io: missing, creating")
    );
    assert_eq!(
        ApplyStep::Applying(&nfr).line(v15).as_deref(),
        Some("nodefeaturerules.nfd.k8s-sigs.io: older (v0.15), upgrading")
    );
    assert_eq!(
        ApplyStep::LeftAlone(&nf).line(v15).as_deref(),
        Some("nodefeatures.nfd.k8s-sigs.io: current, nothing to do")
    );
    assert_eq!(ApplyStep::Applied(&nf.name).line(v15), None);
    let p = plan_of(vec![nf, nfg, nfr]);
    assert_eq!(
        done_line(&p),
        "done: 1 created, 1 upgraded, 1 already current"
    );
    assert_eq!(
        apply_header(&p),
        "gpuready carries the NFD CRDs of release v0.18 (NFD v0.18.x-v0.19.x); installed: v0.15"
    );
    assert!(diff_closing_line(&p).starts_with("Run `gpuready nfd-crds apply`"));
}
