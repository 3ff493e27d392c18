//! A profile change queues the nodes it may affect, found in chunks by a task
//! of its own: at 100,000 nodes the whole mapping took about a quarter of a
//! second of the 780 ms the first taint took to appear, and kube's watch mapper
//! would run it all before queueing one node. Here each chunk is queued once
//! found, so the first node is judged while the rest are still being matched,
//! and the gate counts the mapping as taint work ahead until its last chunk is
//! queued: no label, condition or Event goes before a taint it may still
//! bring.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use gpuready_api::{GpuNodeProfile, keys};
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};
use kube::runtime::reflector::Store;
use tracing::debug;

use crate::controller::ledger::Ledger;
use crate::controller::watch::cached::CachedNode;

/// Nodes matched between two queueings: a few milliseconds of matching on one
/// core, so the first taint waits for one chunk, not the fleet.
const CHUNK: usize = 1_000;

/// Finds and queues every cached node `profile` may affect (see the module
/// comment); spawned once per profile event.
pub async fn queue_nodes_of(
    nodes: Store<CachedNode>,
    ledger: Arc<Ledger>,
    profile: GpuNodeProfile,
) {
    let started = Instant::now();
    let mapping = ledger.unnamed_work();
    let affects = Affects::new(&profile);
    let state = nodes.state();
    let mut count = 0;
    let mut first_queued = None;
    for chunk in state.chunks(CHUNK) {
        for n in chunk.iter().filter(|n| affects.node(n)) {
            ledger.ask(&n.name_any(), None);
            count += 1;
        }
        if count > 0 && first_queued.is_none() {
            first_queued = Some(started.elapsed());
        }
        tokio::task::yield_now().await;
    }
    drop(mapping);
    // Where a profile change's first taint waits (issue 35).
    debug!(
        profile = %profile.name_any(), nodes = count, ?first_queued, all_queued = ?started.elapsed(),
        "profile change queued the nodes it may affect"
    );
}

/// Whether a node may be affected by a change of one profile: it carries the
/// profile's label (the profile may have just stopped selecting it), or the
/// profile's selector matches it now. "Matches" as the engine matches: over
/// the node's labels less what gpuready wrote itself (`selectable_labels`), so
/// a profile whose selector reads a label another profile sets (`NotIn [true]`
/// of a readyLabels key) re-queues the nodes it now conflicts on — it used to
/// take a restart (issue 32).
struct Affects<'a> {
    profile: &'a GpuNodeProfile,
    name: String,
    /// `None`: the selector does not parse; only the labelled nodes are affected.
    selector: Option<Selector>,
    reads: Vec<&'a str>,
}

impl<'a> Affects<'a> {
    fn new(profile: &'a GpuNodeProfile) -> Self {
        Affects {
            profile,
            name: profile.name_any(),
            selector: gpuready_core::select::profile_selector(profile).ok(),
            reads: profile.spec.selector_keys(),
        }
    }

    fn node(&self, n: &CachedNode) -> bool {
        let labels = n.labels();
        if labels.and_then(|l| l.get(keys::LABEL_PROFILE)) == Some(self.name.as_str()) {
            return true;
        }
        let Some(selector) = &self.selector else {
            return false;
        };
        if selector.selects_all() {
            return true;
        }
        // A selector decides from the keys it reads alone, so only those are
        // copied out of the packed labels (a handful, not the node's dozens).
        let read: BTreeMap<String, String> = self
            .reads
            .iter()
            .filter_map(|k| Some(((*k).to_owned(), labels?.get(k)?.to_owned())))
            .collect();
        // The engine matches over the labels less what gpuready wrote itself;
        // only when a key read here is one of those is the node's full facts
        // needed (read for this one check, never kept).
        if read.keys().any(|k| n.may_have_written_label(k)) {
            let facts = gpuready_core::NodeFacts::from_node(&n.to_node());
            let pair = [(self.profile, selector)];
            selector.matches(&gpuready_core::assess::selectable_labels(&facts, &pair))
        } else {
            selector.matches(&read)
        }
    }
}
