//! What turns watch events into work: a node's deletion (seen, or missed
//! during a watch gap) told to the book and the status task, the profile
//! events that can change a verdict, a trigger for a cached node asked for at
//! the book, and watch errors dropped once the watcher has backed off. Out of
//! `mod.rs` so the wiring reads as the list of its steps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use gpuready_api::GpuNodeProfile;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tracing::{info, warn};

use crate::controller::crd_guard::CrdGuard;
use crate::controller::ledger::Ledger;
use crate::controller::mailbox::StatusSender;
use crate::controller::status_input::StatusInput;
use crate::controller::watch::cached::CachedNode;

/// On a node's deletion: the status task drops its verdict and the gate's
/// ledger forgets it. A deletion missed during a watch gap (a 410, an API
/// server restart) sends no Delete: the re-list replaces the cache at its
/// `InitDone`, so the nodes cached at its `Init` and not cached after it are
/// passed down the same path, as the profile stream does for profiles. The
/// names are read from the cache at `Init` (before the re-list's objects
/// replace it) and dropped at `InitDone`: a re-list costs one pass over the
/// fleet, as its LIST already does, and nothing is kept between re-lists. A
/// queued ledger entry of such a node is also forgotten when the Controller
/// reports it not found (see `run_node_controller`).
pub(super) fn node_gone(
    status: StatusSender,
    ledger: Arc<Ledger>,
    nodes: Store<CachedNode>,
) -> impl FnMut(&Result<watcher::Event<CachedNode>, watcher::Error>) {
    let mut before_relist: Option<Vec<Arc<CachedNode>>> = None;
    move |event| {
        let gone = |name: String| {
            ledger.forget(&name);
            status.tell(StatusInput::NodeGone(name));
        };
        match event {
            Ok(watcher::Event::Delete(n)) => gone(n.name_any()),
            // The reflector buffers a re-list and swaps it in at InitDone, so
            // here the cache still holds what the last list and watch left.
            Ok(watcher::Event::Init) => before_relist = Some(nodes.state()),
            Ok(watcher::Event::InitDone) => {
                for n in before_relist.take().unwrap_or_default() {
                    if nodes.get(&ObjectRef::from_obj(n.as_ref())).is_none() {
                        info!(node = %n.name_any(), "node deleted while the watch was down");
                        gone(n.name_any());
                    }
                }
            }
            _ => {}
        }
    }
}

/// Logs and drops watch errors once the watcher's own backoff has handled them.
/// Passed on, they would make the Controller back off *again* on its trigger
/// stream, pausing every watch at once (exponential up to 30 s, reset only after
/// two quiet minutes): after an API server restart a node change waited ~30 s
/// to be seen, the expected 410 re-list counting as one more failure.
pub(super) fn drop_watch_errors<K>(
    kind: &'static str,
    stream: impl futures::Stream<Item = Result<K, watcher::Error>>,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> {
    stream.filter(move |r| {
        if let Err(e) = r {
            warn!(kind, error = %e, "watch failed; the watcher retries with backoff");
        }
        std::future::ready(r.is_ok())
    })
}

/// Profile events that can change a node's verdict: a new spec (generation),
/// deletion, or a profile seen for the first time. Status writes — gpuready's own,
/// after every burst of reconciles — are dropped, or each would re-queue every
/// node of the profile.
///
/// Deletion is decided from the set of profiles, not from Delete events alone: a
/// re-list after a watch gap (a 410, an API server restart) produces no Delete
/// for a profile removed meanwhile, so at the end of each re-list every profile
/// seen before and missing now is passed on as deleted.
type ProfileEvent = Result<watcher::Event<GpuNodeProfile>, watcher::Error>;
type ProfileTriggers =
    futures::stream::Iter<std::vec::IntoIter<Result<GpuNodeProfile, watcher::Error>>>;

pub(super) fn profile_triggers(
    status: StatusSender,
    crd: Arc<CrdGuard>,
) -> impl FnMut(ProfileEvent) -> ProfileTriggers {
    // Name → (generation, being deleted) and the last object seen.
    let mut seen: BTreeMap<String, ((Option<i64>, bool), GpuNodeProfile)> = BTreeMap::new();
    let mut relisted: Option<BTreeSet<String>> = None;
    move |event| {
        let mut out = Vec::new();
        let changed = |p: GpuNodeProfile, out: &mut Vec<_>| {
            status.tell(StatusInput::Profile(p.name_any()));
            out.push(Ok(p));
        };
        match event {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                let name = p.name_any();
                if let Some(r) = relisted.as_mut() {
                    r.insert(name.clone());
                }
                let key = (
                    p.metadata.generation,
                    p.metadata.deletion_timestamp.is_some(),
                );
                if seen.get(&name).map(|(k, _)| *k) != Some(key) {
                    seen.insert(name, (key, p.clone()));
                    changed(p, &mut out);
                }
            }
            Ok(watcher::Event::Delete(p)) => {
                crd.note_profile_deletion();
                seen.remove(&p.name_any());
                changed(p, &mut out);
            }
            Ok(watcher::Event::Init) => relisted = Some(BTreeSet::new()),
            Ok(watcher::Event::InitDone) => {
                let present = relisted.take().unwrap_or_default();
                let gone: Vec<String> = seen
                    .keys()
                    .filter(|n| !present.contains(*n))
                    .cloned()
                    .collect();
                if !gone.is_empty() {
                    crd.note_profile_deletion();
                }
                for name in gone {
                    if let Some((_, p)) = seen.remove(&name) {
                        info!(profile = %name, "profile deleted while the watch was down");
                        changed(p, &mut out);
                    }
                }
            }
            Err(e) => out.push(Err(e)),
        }
        futures::stream::iter(out)
    }
}

/// Asks for a triggered node at the book when the cache holds it (a trigger
/// for a node not cached reconciles nothing, so it must not count as work
/// ahead).
pub(super) fn ask_if_cached(
    ledger: Arc<Ledger>,
    nodes: Store<CachedNode>,
) -> impl FnMut(&ObjectRef<CachedNode>) {
    move |r| {
        if nodes.get(r).is_some() {
            ledger.ask(&r.name, None);
        }
    }
}

/// The other tasks name nodes as `ObjectRef<Node>`; the controller's queue
/// holds `CachedNode`s, the same object by name.
pub(super) fn cached_ref(r: &ObjectRef<Node>) -> ObjectRef<CachedNode> {
    ObjectRef::new(&r.name)
}
