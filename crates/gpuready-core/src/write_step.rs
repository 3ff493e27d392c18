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
pub(crate) mod tests;
