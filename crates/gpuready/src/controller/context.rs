//! What every node reconcile shares: the clients, caches, settings and the
//! senders into other tasks. Built once by the wiring (`mod.rs`); this module
//! imports none of the modules that use it, so data flows one way.

use std::sync::{Arc, Mutex};

use gpuready_api::GpuNodeProfile;
use gpuready_core::event_budget::EventBudget;
use gpuready_core::tally::NodeVerdict;
use gpuready_core::{NodeAssessment, NodeFacts};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use super::config::RunArgs;
use crate::controller::crd_guard::CrdGuard;
use crate::controller::ledger::Ledger;
use crate::controller::mailbox::StatusSender;
use crate::controller::metrics::Metrics;
use crate::controller::status_input::StatusInput;
use crate::controller::watch::cached::CachedNode;
use crate::controller::watch::evidence::EvidenceStores;
use crate::controller::watch::groups::Groups;
use crate::controller::watch::probe_reports::ProbeReports;

/// Shared state of one running controller.
pub struct Context {
    pub client: Client,
    pub args: RunArgs,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub profiles: Store<GpuNodeProfile>,
    /// The node cache, compact (see `watch/cached.rs`).
    pub nodes: Store<CachedNode>,
    /// Verdicts and other news for the status task, which owns the tally.
    pub(super) status: StatusSender,
    /// Holds releases while the GpuNodeProfile CRD is missing.
    pub crd: Arc<CrdGuard>,
    /// The node book behind one lock: the write ledger and the one queue in
    /// front of kube, every profile's brake, the refused nodes and the
    /// error backoff (see `ledger.rs`).
    pub ledger: Arc<Ledger>,
    /// True once both caches have been listed. Tasks other than the controller's
    /// own wait on this, never on `Store::wait_until_ready`: kube-runtime's
    /// `DelayedInit` keeps a single waker, so of several tasks waiting on one
    /// store only the last to poll is woken and the others sleep until something
    /// else polls them (a node reconcile stalled until its 30 s timeout).
    pub caches_ready: watch::Receiver<bool>,
    /// ResourceSlices and NodeFeatures per node (see `evidence`).
    pub evidence: Arc<EvidenceStores>,
    /// The nodes of each `fabric.groupByLabel` group (see `groups`).
    pub groups: Arc<Groups>,
    /// Reports of `gpuready probe`, when `--probe-namespace` is set.
    pub probe_reports: Option<ProbeReports>,
    /// How many per-node Events a burst may post, per profile (its one owner:
    /// `write/events.rs` admits and summarizes through it).
    pub node_events: Mutex<EventBudget>,
}

impl Context {
    /// Hands a node's verdict to the status task (the tally). Never blocks.
    pub fn report_verdict(&self, node: &str, a: &NodeAssessment) {
        self.status.tell(StatusInput::Verdict {
            node: node.to_owned(),
            verdict: NodeVerdict::of(a).map(Box::new),
        });
    }

    /// Tells the status task a profile's status may have changed (a node's
    /// refusal began or ended). Never blocks.
    pub fn profile_changed(&self, profile: String) {
        self.status.tell(StatusInput::Profile(profile));
    }

    /// Waits until both caches have been listed once; false if they never will be.
    pub async fn wait_for_caches(&self) -> bool {
        self.caches_ready.clone().wait_for(|r| *r).await.is_ok()
    }

    /// The node's facts with the evidence read beside it attached: its
    /// ResourceSlices and NodeFeatures, and its probe report (when reports are read).
    pub fn facts_of(&self, node: &Node) -> NodeFacts {
        let name = node.name_any();
        let facts = NodeFacts::from_node(node).with_evidence(self.evidence.for_node(&name));
        let probe = self
            .probe_reports
            .as_ref()
            .and_then(|r| r.evidence(&facts.name));
        facts.with_probe(probe)
    }

    /// The facts with the node's `fabric.groupByLabel` group attached, when
    /// its profile groups nodes (see `groups`).
    pub fn with_group(
        &self,
        mut facts: NodeFacts,
        profiles: &[(&GpuNodeProfile, &kube::core::Selector)],
    ) -> NodeFacts {
        facts.evidence.clique_group = self.groups.group_of(&facts, profiles, &self.nodes);
        facts
    }
}
