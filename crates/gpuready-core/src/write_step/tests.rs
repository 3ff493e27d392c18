//! Tests of `write_step`, in their own file beside it.

use super::*;
use crate::plan::{ConditionChange, TaintChange, TaintChangeKind};
use gpuready_api::keys;
use std::collections::BTreeMap;

pub(crate) fn taint() -> Option<TaintChange> {
    Some(TaintChange {
        taints: vec![],
        kind: TaintChangeKind::Add,
        ours: None,
    })
}

pub(crate) fn conditions() -> Option<ConditionChange> {
    Some(ConditionChange {
        set: vec![],
        remove: vec!["GpuReadyDriver".into()],
    })
}

pub(crate) fn labels() -> Option<BTreeMap<String, Option<String>>> {
    Some(BTreeMap::from([
        (keys::LABEL_READY.to_owned(), Some("false".to_owned())),
        (keys::LABEL_PROFILE.to_owned(), Some("p".to_owned())),
    ]))
}

pub(crate) fn full() -> NodeChanges {
    NodeChanges {
        taint: taint(),
        labels: labels(),
        annotations: Some(BTreeMap::from([
            (keys::ANNOTATION_TAINT.to_owned(), None),
            (keys::ANNOTATION_LABELS.to_owned(), None),
        ])),
        conditions: conditions(),
        ..NodeChanges::default()
    }
}

const QUIET: GateView = GateView {
    taint_work_ahead: false,
    released: false,
};
const BUSY: GateView = GateView {
    taint_work_ahead: true,
    released: false,
};
pub(crate) const GOV: GovernanceKind = GovernanceKind::Governed;

#[test]
fn nothing_to_change_sends_nothing() {
    let none = NodeChanges::default();
    assert_eq!(
        step(&none, GOV, CrdView::Confirmed, BUSY),
        WriteStep::Nothing
    );
    assert_eq!(
        step(&none, GovernanceKind::Ungoverned, CrdView::Missing, QUIET),
        WriteStep::Nothing,
        "a node with nothing to release needs no CRD check"
    );
}

#[test]
fn a_quiet_cluster_writes_everything_at_once() {
    assert_eq!(
        step(&full(), GOV, CrdView::Unconfirmed, QUIET),
        WriteStep::Write {
            changes: full(),
            rest_deferred: false
        },
        "a governed node does not wait for the CRD guard"
    );
}

#[test]
fn with_taint_work_ahead_a_taint_goes_now_alone_and_the_rest_waits() {
    let WriteStep::Write {
        changes,
        rest_deferred,
    } = step(&full(), GOV, CrdView::Confirmed, BUSY)
    else {
        panic!("the taint is written now");
    };
    assert!(rest_deferred);
    assert!(changes.taint.is_some());
    assert_eq!(
        changes.labels,
        labels(),
        "a taint added takes `ready=false` and the profile label with it"
    );
    assert!(changes.conditions.is_none(), "the condition waits");
    assert_eq!(
        changes.annotations,
        Some(BTreeMap::from([(keys::ANNOTATION_TAINT.to_owned(), None)])),
        "the annotation recording the taint goes with it; the labels' list waits"
    );
    // A taint removed goes before `ready=true`: a tainted node never
    // reads ready.
    let mut release = full();
    if let Some(t) = release.taint.as_mut() {
        t.kind = TaintChangeKind::Remove;
    }
    if let Some(l) = release.labels.as_mut() {
        l.insert(keys::LABEL_READY.to_owned(), Some("true".to_owned()));
    }
    let (now, rest) = release.gating_part();
    assert!(now.taint.is_some() && rest.labels.is_some());
    // ... with the profile label it sets (issue 49: the chart's policy
    // lets a taint go only from a node labelled with a profile), and
    // before every other label.
    assert_eq!(
        now.labels,
        Some(BTreeMap::from([(
            keys::LABEL_PROFILE.to_owned(),
            Some("p".to_owned())
        )])),
        "a taint removed goes with the profile label and before every other label"
    );
    // A release removes the profile label with the rest, after the taint.
    if let Some(l) = release.labels.as_mut() {
        l.insert(keys::LABEL_PROFILE.to_owned(), None);
    }
    let (now, rest) = release.gating_part();
    assert_eq!(now.labels, None, "a release's label removals wait");
    assert!(
        rest.labels
            .is_some_and(|l| l.contains_key(keys::LABEL_PROFILE))
    );
    // A taint change with nothing else leaves nothing to wait.
    let (alone, _) = full().gating_part();
    assert_eq!(
        step(&alone, GOV, CrdView::Confirmed, BUSY),
        WriteStep::Write {
            changes: alone,
            rest_deferred: false
        }
    );
}

#[test]
fn with_taint_work_ahead_a_node_without_taint_change_defers_all() {
    let labels_and_condition = NodeChanges {
        labels: labels(),
        conditions: conditions(),
        ..NodeChanges::default()
    };
    assert_eq!(
        step(&labels_and_condition, GOV, CrdView::Confirmed, BUSY),
        WriteStep::Defer
    );
    let released = GateView {
        released: true,
        ..BUSY
    };
    assert!(
        matches!(
            step(&labels_and_condition, GOV, CrdView::Confirmed, released),
            WriteStep::Write {
                rest_deferred: false,
                ..
            }
        ),
        "handed back: what waited goes, whatever is queued since"
    );
}

#[test]
fn a_taint_held_by_the_brake_is_reported_and_the_rest_written() {
    let held = NodeChanges {
        labels: labels(),
        conditions: conditions(),
        taint_held_by_brake: true,
        ..NodeChanges::default()
    };
    assert_eq!(
        step(&held, GOV, CrdView::Confirmed, QUIET),
        WriteStep::HoldByBrake {
            changes: held.clone()
        }
    );
    assert!(!step(&held, GOV, CrdView::Confirmed, QUIET).writes_taint());
    assert_eq!(
        step(&held, GOV, CrdView::Confirmed, BUSY),
        WriteStep::Defer,
        "its writes are not taint writes"
    );
}

#[test]
fn a_release_waits_for_the_crd_guard() {
    let release = NodeChanges {
        taint: taint(),
        ..NodeChanges::default()
    };
    let un = GovernanceKind::Ungoverned;
    assert_eq!(
        step(&release, un, CrdView::Missing, QUIET),
        WriteStep::HoldByCrdGuard
    );
    assert!(needs_crd(&release, un));
    assert!(!needs_crd(&NodeChanges::default(), un));
    assert!(!needs_crd(&release, GOV));
    assert_eq!(
        step(&release, un, CrdView::Unconfirmed, QUIET),
        WriteStep::HoldByCrdGuard,
        "a CRD that could not be confirmed holds"
    );
    assert!(step(&release, un, CrdView::Confirmed, BUSY).writes_taint());
}

pub(crate) fn cond_only() -> NodeChanges {
    NodeChanges {
        conditions: conditions(),
        ..NodeChanges::default()
    }
}

pub(crate) fn taint_only() -> NodeChanges {
    NodeChanges {
        taint: taint(),
        ..NodeChanges::default()
    }
}
