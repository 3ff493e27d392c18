//! What every node reconcile shares: the clients, caches, settings and the
//! senders into other tasks. Built once by the wiring (`mod.rs`); this module
//! imports none of the modules that use it, so data flows one way.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use gpuready_api::GpuNodeProfile;
use gpuready_core::tally::NodeVerdict;
use gpuready_core::{NodeAssessment, NodeFacts};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, watch};

use super::backoff::ErrorBackoff;
use super::brakes::Brakes;
use super::cached::CachedNode;
use super::config::RunArgs;
use super::crd_guard::CrdGuard;
use super::error::RefusedWrite;
use super::evidence::EvidenceStores;
use super::gating::Gate;
use super::groups::Groups;
use super::metrics::Metrics;
use super::probe_reports::ProbeReports;
use super::status_input::StatusInput;

/// Shared state of one running controller.
pub struct Context {
    pub client: Client,
    pub args: RunArgs,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub profiles: Store<GpuNodeProfile>,
    /// The node cache, compact (see `cached.rs`).
    pub nodes: Store<CachedNode>,
    /// Verdicts and other news for the status task, which owns the tally.
    pub(super) status: mpsc::UnboundedSender<StatusInput>,
    /// Holds releases while the GpuNodeProfile CRD is missing.
    pub crd: Arc<CrdGuard>,
    /// Per-node backoff after failed reconciles.
    pub errors: ErrorBackoff,
    /// The write ledger (taint work first; deferred nodes; gpuready's last
    /// write to each node), one type behind one lock (see `gating.rs`).
    pub gate: Arc<Gate>,
    /// True once both caches have been listed. Tasks other than the controller's
    /// own wait on this, never on `Store::wait_until_ready`: kube-runtime's
    /// `DelayedInit` keeps a single waker, so of several tasks waiting on one
    /// store only the last to poll is woken and the others sleep until something
    /// else polls them (a node reconcile stalled until its 30 s timeout).
    pub caches_ready: watch::Receiver<bool>,
    /// The safety brake of every profile: turns recorded by reconciles,
    /// engaged and released by counts (see `brakes.rs`).
    pub brakes: Brakes,
    /// Each profile's matched node count from the status task's tally (its
    /// only sender): the brake's denominator between two of its passes.
    pub matched: watch::Receiver<Arc<BTreeMap<String, usize>>>,
    /// Asks the controller to reconcile a node (see `status::pass`).
    pub requeue: mpsc::UnboundedSender<ObjectRef<Node>>,
    /// ResourceSlices and NodeFeatures per node (see `evidence`).
    pub evidence: Arc<EvidenceStores>,
    /// The nodes of each `fabric.groupByLabel` group (see `groups`).
    pub groups: Arc<Groups>,
    /// Reports of `gpuready probe`, when `--probe-namespace` is set.
    pub probe_reports: Option<ProbeReports>,
    /// Nodes whose last write the API server refused (admission, RBAC), with
    /// their profile and the server's reason: the status task says so on the
    /// profile until a write to the node passes again.
    pub refused: Refused,
}

/// One refused node: its profile, the API server's reason, what it refused.
type RefusedEntry = (String, String, RefusedWrite);

/// Node → its [`RefusedEntry`], for writes the server refused.
#[derive(Clone, Default)]
pub struct Refused(Arc<Mutex<HashMap<String, RefusedEntry>>>);

/// One profile's refused nodes: how many, by what was refused, and the first
/// one (by name) with its reason.
#[derive(Debug, PartialEq, Eq)]
pub struct RefusedNodes {
    pub taint: usize,
    pub other: usize,
    pub first: String,
    pub why: String,
}

impl Refused {
    pub fn note(&self, node: &str, profile: &str, reason: &str, what: RefusedWrite) {
        if let Ok(mut r) = self.0.lock() {
            r.insert(
                node.to_owned(),
                (profile.to_owned(), reason.to_owned(), what),
            );
        }
    }

    /// Forgets the node; true if it was listed (its profile's status changes).
    pub fn clear(&self, node: &str) -> Option<String> {
        self.0
            .lock()
            .ok()
            .and_then(|mut r| r.remove(node))
            .map(|(p, ..)| p)
    }

    /// The profile's refused nodes among those that still exist.
    pub fn of_profile(&self, profile: &str, exists: impl Fn(&str) -> bool) -> Option<RefusedNodes> {
        let r = self.0.lock().ok()?;
        let mut mine: Vec<(&String, &String, RefusedWrite)> = r
            .iter()
            .filter(|(n, (p, ..))| p == profile && exists(n))
            .map(|(n, (_, why, what))| (n, why, *what))
            .collect();
        mine.sort();
        let (first, why, _) = mine.first()?;
        let taint = mine
            .iter()
            .filter(|(.., w)| *w == RefusedWrite::Taint)
            .count();
        Some(RefusedNodes {
            taint,
            other: mine.len() - taint,
            first: (*first).clone(),
            why: format!("{}: {why}", mine[0].2.sentence()),
        })
    }
}

impl Context {
    /// Hands a node's verdict to the status task (the tally). Never blocks.
    pub fn report_verdict(&self, node: &str, a: &NodeAssessment) {
        let _ = self.status.send(StatusInput::Verdict {
            node: node.to_owned(),
            verdict: NodeVerdict::of(a),
        });
    }

    /// How many nodes the profile matched at the status task's last pass.
    pub fn matched_nodes(&self, profile: &str) -> usize {
        self.matched.borrow().get(profile).copied().unwrap_or(0)
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
