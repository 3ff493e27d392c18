//! What every node reconcile shares: the clients, caches, settings and the
//! senders into other tasks. Built once by the wiring (`mod.rs`); this module
//! imports none of the modules that use it, so data flows one way.

use std::collections::HashMap;
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
use super::evidence::EvidenceStores;
use super::gating::Gate;
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
    /// Taint writes first; the rest of a node's writes wait for a quiet moment.
    pub gate: Arc<Gate>,
    /// True once both caches have been listed. Tasks other than the controller's
    /// own wait on this, never on `Store::wait_until_ready`: kube-runtime's
    /// `DelayedInit` keeps a single waker, so of several tasks waiting on one
    /// store only the last to poll is woken and the others sleep until something
    /// else polls them (a node reconcile stalled until its 30 s timeout).
    pub caches_ready: watch::Receiver<bool>,
    /// The safety brake of every profile (fed by reconciles and the status task).
    pub brakes: Brakes,
    /// Asks the controller to reconcile a node (see `status::pass`).
    pub requeue: mpsc::UnboundedSender<ObjectRef<Node>>,
    /// Node → resourceVersion gpuready's last write to it returned, until a
    /// reconcile finds the cache at that version.
    pub(super) last_writes: LastWrites,
    /// ResourceSlices and NodeFeatures per node (see `evidence`).
    pub evidence: Arc<EvidenceStores>,
    /// Reports of `gpuready probe`, when `--probe-namespace` is set.
    pub probe_reports: Option<ProbeReports>,
    /// Nodes whose last write the API server refused (admission, RBAC), with
    /// their profile and the server's reason: the status task says so on the
    /// profile until a write to the node passes again.
    pub refused: Refused,
}

/// Node → (profile, the API server's reason) for writes the server refused.
#[derive(Clone, Default)]
pub struct Refused(Arc<Mutex<HashMap<String, (String, String)>>>);

impl Refused {
    pub fn note(&self, node: &str, profile: &str, reason: &str) {
        if let Ok(mut r) = self.0.lock() {
            r.insert(node.to_owned(), (profile.to_owned(), reason.to_owned()));
        }
    }

    /// Forgets the node; true if it was listed (its profile's status changes).
    pub fn clear(&self, node: &str) -> Option<String> {
        self.0
            .lock()
            .ok()
            .and_then(|mut r| r.remove(node))
            .map(|(p, _)| p)
    }

    /// How many of the profile's nodes are refused, and the first one (by
    /// name) with its reason.
    pub fn of_profile(
        &self,
        profile: &str,
        exists: impl Fn(&str) -> bool,
    ) -> Option<(usize, String, String)> {
        let r = self.0.lock().ok()?;
        let mut mine: Vec<(&String, &String)> = r
            .iter()
            .filter(|(n, (p, _))| p == profile && exists(n))
            .map(|(n, (_, why))| (n, why))
            .collect();
        mine.sort();
        let (node, why) = mine.first()?;
        Some((mine.len(), (*node).clone(), (*why).clone()))
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

    /// How many nodes the profile matched at its last status write (the
    /// brake's denominator between two passes of the status task).
    pub fn matched_nodes(&self, profile: &str) -> usize {
        self.profiles
            .find(|p| p.name_any() == profile)
            .and_then(|p| {
                p.status
                    .as_ref()
                    .map(|s| usize::try_from(s.matched_nodes).unwrap_or(0))
            })
            .unwrap_or(0)
    }

    /// Remembers the resourceVersion gpuready's own write left the node at.
    pub fn note_write(&self, node: &str, resource_version: String) {
        self.last_writes.insert(node, resource_version);
    }

    /// Whether the cached copy of the node may predate gpuready's last write to
    /// it (it shows another version). Answers once per write: the caller reads
    /// the node from the API when true.
    pub fn cache_may_be_behind(&self, node: &str, cached: Option<&str>) -> bool {
        self.last_writes
            .take(node)
            .is_some_and(|rv| Some(rv.as_str()) != cached)
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
}

/// Node → resourceVersion of gpuready's last write to it. Shared with the node
/// watch, which forgets a node when it is deleted (the map never outgrows the
/// fleet).
#[derive(Clone, Default)]
pub struct LastWrites(Arc<Mutex<HashMap<String, String>>>);

impl LastWrites {
    fn insert(&self, node: &str, rv: String) {
        if let Ok(mut w) = self.0.lock() {
            w.insert(node.to_owned(), rv);
        }
    }

    fn take(&self, node: &str) -> Option<String> {
        self.0.lock().ok().and_then(|mut w| w.remove(node))
    }

    /// Whether this watch event of the node only echoes gpuready's own last
    /// write to it, while its remaining writes wait at the gate and taint work
    /// is under way: judging it could only defer it again (the gate hands the
    /// node back when the taints are done), so it triggers no reconcile and the
    /// cores stay with the taints still queued. Only the node's own watch event
    /// is filtered; a profile or evidence change still queues the node. The
    /// write is forgotten once seen: the cache has caught up with it.
    pub fn is_echo_waiting_at(&self, gate: &Gate, node: &CachedNode) -> bool {
        let name = node.name_any();
        gate.busy()
            && gate.is_pending(&name)
            && node
                .resource_version()
                .is_some_and(|rv| self.take_if_equal(&name, &rv))
    }

    fn take_if_equal(&self, node: &str, rv: &str) -> bool {
        let Ok(mut w) = self.0.lock() else {
            return false;
        };
        if w.get(node).is_some_and(|last| last == rv) {
            w.remove(node);
            return true;
        }
        false
    }

    pub fn forget(&self, node: &str) {
        let _ = self.take(node);
    }

    pub fn len(&self) -> usize {
        self.0.lock().map(|w| w.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_is_recognised_once_and_only_at_the_version_written() {
        let w = LastWrites::default();
        w.insert("a", "7".into());
        assert!(!w.take_if_equal("a", "6"), "an older copy is not the echo");
        assert_eq!(w.len(), 1, "and the write is still remembered");
        assert!(w.take_if_equal("a", "7"));
        assert!(w.is_empty(), "the cache has caught up");
        assert!(!w.take_if_equal("a", "7"));
    }

    fn cached(name: &str, rv: &str) -> CachedNode {
        let mut node = Node::default();
        node.metadata.name = Some(name.into());
        node.metadata.resource_version = Some(rv.into());
        CachedNode::from_node(node)
    }

    #[test]
    fn only_the_echo_of_a_node_waiting_at_a_busy_gate_is_filtered() {
        let gate = Gate::new(2);
        let w = LastWrites::default();
        w.insert("a", "7".into());
        assert!(
            !w.is_echo_waiting_at(&gate, &cached("a", "7")),
            "no taint work under way: judged as usual"
        );
        gate.note_taint_write();
        assert!(
            !w.is_echo_waiting_at(&gate, &cached("a", "7")),
            "a node not waiting at the gate is judged"
        );
        gate.defer("a");
        assert!(
            !w.is_echo_waiting_at(&gate, &cached("a", "8")),
            "someone else's newer write is judged"
        );
        assert!(w.is_echo_waiting_at(&gate, &cached("a", "7")));
        assert!(w.is_empty(), "the write is forgotten once its echo is seen");
    }
}
