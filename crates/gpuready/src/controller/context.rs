//! What every node reconcile shares: the clients, caches, settings and the
//! senders into other tasks. Built once by the wiring (`mod.rs`); this module
//! imports none of the modules that use it, so data flows one way.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpuready_api::GpuNodeProfile;
use gpuready_core::NodeFacts;
use gpuready_core::event_budget::EventBudget;
use k8s_openapi::api::core::v1::Node;
use kube::core::Selector;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use super::config::RunArgs;
use super::error::Error;
use crate::controller::crd_guard::CrdGuard;
use crate::controller::ledger::Ledger;
use crate::controller::mailbox::StatusSender;
use crate::controller::metrics::Metrics;
use crate::controller::status_input::StatusInput;
use crate::controller::watch::cached::CachedNode;
use crate::controller::watch::evidence::EvidenceStores;
use crate::controller::watch::groups::Groups;
use crate::controller::watch::probe_reports::ProbeReports;

/// Shared state of one running controller: what a reconcile reads (the
/// caches), what it writes through (the client, the node book, the Events,
/// the CRD guard) and whom it tells (the status task).
pub struct Context {
    pub client: Client,
    pub args: RunArgs,
    pub metrics: Arc<Metrics>,
    /// How gpuready posts Events.
    pub events: Events,
    /// What the reconcile reads, each kept by its own watch (see [`Caches`]).
    pub caches: Caches,
    /// Verdicts and other news for the status task, which owns the tally
    /// (see [`Context::tell`]).
    pub(super) status: StatusSender,
    /// Holds releases while the GpuNodeProfile CRD is missing.
    pub crd: Arc<CrdGuard>,
    /// The node book behind one lock: the write ledger and the one queue in
    /// front of kube, every profile's brake, the refused nodes and the
    /// error backoff (see `ledger.rs`).
    pub ledger: Arc<Ledger>,
}

/// What the reconcile reads, each kept by its own watch and written by no
/// reconcile: the profile and node caches, whether both are listed, and what
/// is read beside the Node (read together by [`Caches::facts_of`]).
pub struct Caches {
    pub profiles: Store<GpuNodeProfile>,
    /// The node cache, compact (see `watch/cached.rs`).
    pub nodes: Store<CachedNode>,
    /// True once both caches have been listed. Tasks other than the controller's
    /// own wait on this, never on `Store::wait_until_ready`: kube-runtime's
    /// `DelayedInit` keeps a single waker, so of several tasks waiting on one
    /// store only the last to poll is woken and the others sleep until something
    /// else polls them (a node reconcile stalled until its 30 s timeout).
    pub listed: watch::Receiver<bool>,
    /// ResourceSlices, NodeFeatures and the other evidence per node (see
    /// `watch/evidence.rs`).
    pub evidence: Arc<EvidenceStores>,
    /// The nodes of each `fabric.groupByLabel` group (see `watch/groups.rs`).
    pub groups: Arc<Groups>,
    /// Reports of `gpuready probe`, when `--probe-namespace` is set.
    pub probe_reports: Option<ProbeReports>,
}

/// How gpuready posts Events: the recorder, and how many per-node Events a
/// burst may post per profile (the budget's one owner: `write/events.rs`
/// admits and summarizes through it).
pub struct Events {
    pub recorder: Recorder,
    pub budget: Mutex<EventBudget>,
}

impl Context {
    /// Tells the status task a node's verdict, a node gone or a profile whose
    /// status may have changed. Never blocks.
    pub fn tell(&self, news: StatusInput) {
        self.status.tell(news);
    }
}

impl Caches {
    /// Waits until a reconcile can judge from the caches: both listed (an
    /// error after 30 s), and the evidence watches settled (at most 30 s,
    /// then the reconcile judges without what has not come).
    pub async fn ready_to_judge(&self) -> Result<(), Error> {
        let wait = Duration::from_secs(30);
        let synced = tokio::time::timeout(wait, self.wait_listed())
            .await
            .map_err(|_| Error::CacheNotReady("caches not synced after 30s".into()))?;
        if !synced {
            return Err(Error::CacheNotReady("the cache sync task ended".into()));
        }
        self.evidence.wait_settled(wait).await;
        Ok(())
    }

    /// Waits until both caches have been listed once; false if they never will be.
    pub async fn wait_listed(&self) -> bool {
        self.listed.clone().wait_for(|r| *r).await.is_ok()
    }

    /// The node's facts with what is read beside it attached: its
    /// ResourceSlices and NodeFeatures, its probe report (when reports are
    /// read), and its `fabric.groupByLabel` group, when the profile of
    /// `profiles` that governs it groups nodes.
    pub fn facts_of(&self, node: &Node, profiles: &[(&GpuNodeProfile, &Selector)]) -> NodeFacts {
        let name = node.name_any();
        let facts = NodeFacts::from_node(node).with_evidence(self.evidence.for_node(&name));
        let probe = self
            .probe_reports
            .as_ref()
            .and_then(|r| r.evidence(&facts.name));
        let mut facts = facts.with_probe(probe);
        facts.evidence.clique_group = self.groups.group_of(&facts, profiles, &self.nodes);
        facts
    }
}
