//! The node write path's one decision, pure: from a node's plan, what is known
//! of the GpuNodeProfile CRD, and where the node stands in the write ledger,
//! whether to write now, defer, hold (by the safety brake or the CRD guard) or
//! skip a watch event as the echo of gpuready's own write. The controller asks
//! [`step`] once per plan (through `node_book::NodeBook::step`) and runs one
//! `match` of I/O (`crates/gpuready/src/controller/write/node.rs`); the ledger the
//! answer depends on ([`WriteLedger`](crate::write_ledger::WriteLedger)) is
//! plain data, part of the
//! `NodeBook` the controller keeps behind one lock (`controller/ledger.rs`).
//!
//! # Priority, not timing
//!
//! Every pending taint write goes before any label, condition or Event write,
//! across all nodes. "Pending" is what the ledger sees: nodes queued for a
//! reconcile and not yet judged, and reconciles judged to write a taint (or a
//! DeviceTaintRule) and not done yet. A node whose changes include a taint
//! sends the taint alone at once — with the annotations that record it, its
//! DeviceTaintRules, `gpuready.io/ready` unless it turns `true` and
//! `gpuready.io/profile` unless the taint only goes: the smallest write that
//! gates it ([`NodeChanges::gating_part`]) — and defers its other labels and
//! annotations, its conditions and its Event; a node with no taint to change
//! defers everything — but only while such work is ahead of it. On a quiet
//! cluster nothing waits: the node patch carries taint, labels and
//! annotations together, as one write.
//!
//! Deferred nodes are handed back only when no taint work is pending at all:
//! each is queued again behind every taint work the ledger holds
//! (`crate::write_ledger`), so a node that joins while the deferred writes
//! drain goes before all of them not started yet, and kube's reconcile slots
//! are the only throttle. A handed-back node's own reconcile is not taint
//! work for the others. Two bounds keep deferred writes from starving when
//! taint work never stops: a deferred node is also handed back once
//! everything queued before it is done and
//! [`HOLD_TICKETS`](crate::write_ledger::HOLD_TICKETS) reconciles have been
//! queued after it.
//! No clock is read: the same events in the same order give the same writes.

use crate::{GovernanceKind, NodeChanges};

/// What the CRD guard knows of the GpuNodeProfile CRD now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrdView {
    /// Read and found healthy after the last profile deletion seen.
    Confirmed,
    /// Found missing or being deleted, recently enough to trust.
    Missing,
    /// Not known since the last profile deletion: read it before a release.
    Unconfirmed,
}

/// Where the node stands at the gate (from
/// [`WriteLedger::view`](crate::write_ledger::WriteLedger::view)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateView {
    /// Taint work is pending for other nodes (queued, or judged to write one).
    pub taint_work_ahead: bool,
    /// The node was deferred and handed back: what waited goes now.
    pub released: bool,
}

/// What the reconciler does with a plan.
#[derive(Clone, Debug, PartialEq)]
pub enum WriteStep {
    /// Nothing differs from the node: no request.
    Nothing,
    /// Send these changes now. `rest_deferred`: the node's labels, other
    /// annotations and conditions (and the Event they would bring) were
    /// taken out and wait at the gate.
    Write {
        changes: NodeChanges,
        rest_deferred: bool,
    },
    /// Send nothing yet: taint writes are ahead of this node's label,
    /// condition and Event writes. The node waits at the gate.
    Defer,
    /// The safety brake holds this node's new taint back; the rest (labels,
    /// the condition saying why) is sent now.
    HoldByBrake { changes: NodeChanges },
    /// A release of a node no profile governs, while the CRD is missing (its
    /// deletion deletes every profile) or not confirmed: nothing is sent, the
    /// node is looked at again later. The controller confirms the CRD before
    /// it asks whenever [`needs_crd`] says so, so `Unconfirmed` reaching here
    /// means the read failed: holding is the safe side.
    HoldByCrdGuard,
    /// The API server refused these very changes a moment ago (admission,
    /// RBAC): nothing is sent until the node's backoff has passed — whatever
    /// triggers the reconcile meanwhile (another controller's label writes
    /// do, every few seconds) — unless the changes are new. The refusal
    /// stays reported.
    HoldByRefusal { retry_after_seconds: u64 },
}

impl WriteStep {
    /// This step, for the rest of a plan whose taint waits out a refusal:
    /// nothing to send becomes a hold until the backoff has passed.
    pub fn or_refusal(self, retry_after_seconds: u64) -> WriteStep {
        match self {
            WriteStep::Nothing => WriteStep::HoldByRefusal {
                retry_after_seconds,
            },
            other => other,
        }
    }

    /// Whether this step sends a gating write (a taint or a DeviceTaintRule):
    /// the ledger counts it as taint work until the reconcile is done.
    pub fn writes_taint(&self) -> bool {
        match self {
            WriteStep::Write { changes, .. } | WriteStep::HoldByBrake { changes } => {
                gating(changes)
            }
            _ => false,
        }
    }
}

/// Changes that keep workloads off broken hardware: the node's taint, and the
/// per-device DeviceTaintRules.
fn gating(c: &NodeChanges) -> bool {
    c.taint.is_some() || !c.device_taint_rules.is_empty()
}

/// The one decision of the node write path.
pub fn step(
    changes: &NodeChanges,
    governance: GovernanceKind,
    crd: CrdView,
    gate: GateView,
) -> WriteStep {
    if changes.is_empty() {
        return WriteStep::Nothing;
    }
    if needs_crd(changes, governance) && crd != CrdView::Confirmed {
        return WriteStep::HoldByCrdGuard;
    }
    if gate.released || !gate.taint_work_ahead {
        return if changes.taint_held_by_brake {
            WriteStep::HoldByBrake {
                changes: changes.clone(),
            }
        } else {
            WriteStep::Write {
                changes: changes.clone(),
                rest_deferred: false,
            }
        };
    }
    if !gating(changes) {
        return WriteStep::Defer;
    }
    let (now, rest) = changes.gating_part();
    WriteStep::Write {
        changes: now,
        rest_deferred: !rest.is_empty(),
    }
}

/// Whether the plan releases a node because no profile governs it: such a
/// write waits for the GpuNodeProfile CRD to be confirmed healthy (its
/// deletion deletes every profile, which must not release every node).
pub fn needs_crd(changes: &NodeChanges, governance: GovernanceKind) -> bool {
    !changes.is_empty() && governance == GovernanceKind::Ungoverned
}

#[cfg(test)]
pub(crate) mod tests {
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
}
