//! Nodes reach kube's Controller oldest first. Once every reconcile slot is
//! busy, kube-runtime's scheduler moves the queued objects into a `HashSet`
//! and takes them in hash order, so under a backlog the first node to join a
//! storm could be judged last (measured: a join storm's p99 at about twice a
//! first-come-first-served floor's, with the same time per write; with 16
//! handed over at a time, the first three joiners of 2,000 still waited 9 s
//! for the storm to end). Every trigger passes this FIFO first, which hands
//! kube the oldest node not being reconciled already (kube would hold that
//! one until its run ends), and only while a reconcile slot is free for it
//! (or one of [`LOOKAHEAD`] places beside them), so kube never holds a
//! backlog to take in hash order. Not one node at a time:
//! kube's scheduler delays each node it is handed to the next millisecond of
//! its timer, so one at a time cost about 2 ms a node, and a 10,000-node
//! start-up spent its first 20 s handing the fleet over for its first look.
//! Kept here because kube-runtime has no ordered queue.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::Stream;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::Notify;

use crate::controller::watch::cached::CachedNode;

/// Nodes handed to kube beyond its reconcile slots (`--concurrency`): when a
/// slot frees, the next node is already due inside kube and starts at once,
/// instead of a millisecond or two later, when kube's scheduler timer has
/// fired for a node handed just then (with 8 slots and writes of 20–30 ms,
/// that gap idled each slot about one write in twenty). Two, so kube's hash
/// order among the nodes it holds can move a node back by a slot or two, not
/// by a storm.
pub const LOOKAHEAD: usize = 2;

/// The FIFO in front of kube's scheduler (see the module comment).
pub struct Admission {
    inner: Mutex<Inner>,
    /// Wakes the stream: a node was queued, or a slot freed (a run finished,
    /// a handed node was dropped).
    wake: Notify,
    /// What kube may hold at once, running or due: its reconcile slots
    /// (`--concurrency`) and the [`LOOKAHEAD`].
    slots: usize,
}

#[derive(Default)]
struct Inner {
    /// Asked for and not handed to kube yet, oldest first.
    fifo: VecDeque<ObjectRef<CachedNode>>,
    /// The names in `fifo`.
    waiting: HashSet<String>,
    /// Handed to kube and not started yet.
    handed: HashSet<String>,
    /// Being reconciled now (handed from here or started by kube itself: a
    /// timed requeue takes a slot too).
    running: HashSet<String>,
}

impl Admission {
    /// A FIFO in front of a Controller that may hold `slots` nodes at once (at
    /// least one; its reconcile slots and the lookahead): what it hands over
    /// and what runs stay within them.
    pub fn new(slots: usize) -> Self {
        Admission {
            inner: Mutex::default(),
            wake: Notify::new(),
            slots: slots.max(1),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every method leaves the sets consistent (none panics midway).
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A reconcile of the node was asked for. A node already waiting keeps
    /// its place; one handed to kube and not started yet is not queued again
    /// (its reconcile reads the cache when it starts, so it sees this change).
    pub fn push(&self, node: ObjectRef<CachedNode>) {
        {
            let mut i = self.inner();
            if i.handed.contains(&node.name) || !i.waiting.insert(node.name.clone()) {
                return;
            }
            i.fifo.push_back(node);
        }
        self.wake.notify_one();
    }

    /// The node's reconcile started (whoever asked for it): it holds its slot
    /// as running now, and is not handed over again until it finished. No
    /// slot frees here, so the stream is not woken.
    pub fn started(&self, node: &str) {
        let mut i = self.inner();
        i.running.insert(node.to_owned());
        i.handed.remove(node);
    }

    /// The node's reconcile ended, however it ended.
    pub fn finished(&self, node: &str) {
        if self.inner().running.remove(node) {
            self.wake.notify_one();
        }
    }

    /// Kube dropped its request for the node (no longer cached): its place
    /// inside kube is free.
    pub fn dropped(&self, node: &str) {
        if self.inner().handed.remove(node) {
            self.wake.notify_one();
        }
    }

    /// The next node for kube, if one waits that is not being reconciled and
    /// a slot is free for it.
    fn next(&self) -> Option<ObjectRef<CachedNode>> {
        let mut guard = self.inner();
        let i = &mut *guard;
        if i.handed.len() + i.running.len() >= self.slots {
            return None;
        }
        let at = i.fifo.iter().position(|n| !i.running.contains(&n.name))?;
        let node = i.fifo.remove(at)?;
        i.waiting.remove(&node.name);
        i.handed.insert(node.name.clone());
        Some(node)
    }

    /// The nodes for kube, in order, as room frees up (for `reconcile_on`).
    pub fn stream(self: Arc<Self>) -> impl Stream<Item = ObjectRef<CachedNode>> + Send {
        futures::stream::unfold(self, |a| async move {
            loop {
                if let Some(node) = a.next() {
                    return Some((node, a));
                }
                // A wake-up sent since `next` looked is kept as a permit.
                a.wake.notified().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn node(n: &str) -> ObjectRef<CachedNode> {
        ObjectRef::new(n)
    }

    async fn take(s: &mut (impl Stream<Item = ObjectRef<CachedNode>> + Unpin)) -> Option<String> {
        tokio::time::timeout(std::time::Duration::from_millis(50), s.next())
            .await
            .ok()
            .flatten()
            .map(|r| r.name)
    }

    #[tokio::test]
    async fn nodes_go_to_kube_oldest_first_and_only_while_it_has_room() {
        let a = Arc::new(Admission::new(3));
        let mut s = Box::pin(a.clone().stream());
        for n in ["a", "b", "c", "d", "a"] {
            a.push(node(n));
        }
        assert_eq!(take(&mut s).await.as_deref(), Some("a"));
        assert_eq!(take(&mut s).await.as_deref(), Some("b"));
        assert_eq!(take(&mut s).await.as_deref(), Some("c"));
        assert_eq!(take(&mut s).await, None, "three slots taken");
        a.push(node("b"));
        a.started("a");
        assert_eq!(take(&mut s).await, None, "a runs: its slot is taken");
        a.finished("a");
        assert_eq!(take(&mut s).await.as_deref(), Some("d"));
        a.started("b");
        a.started("c");
        a.started("d");
        a.finished("c");
        assert_eq!(take(&mut s).await, None, "b was not queued twice");
        a.push(node("b"));
        assert_eq!(take(&mut s).await, None, "b runs: kube would hold it");
        a.finished("b");
        assert_eq!(
            take(&mut s).await.as_deref(),
            Some("b"),
            "finished: handed again"
        );
    }

    #[tokio::test]
    async fn a_running_node_does_not_hold_up_the_ones_behind_it() {
        let a = Arc::new(Admission::new(2));
        let mut s = Box::pin(a.clone().stream());
        a.push(node("a"));
        assert_eq!(take(&mut s).await.as_deref(), Some("a"));
        a.started("a");
        a.push(node("a"));
        a.push(node("b"));
        assert_eq!(take(&mut s).await.as_deref(), Some("b"));
        a.started("b");
        a.finished("a");
        assert_eq!(take(&mut s).await.as_deref(), Some("a"), "its turn kept");
    }

    #[tokio::test]
    async fn a_start_kube_did_not_get_from_here_frees_nothing() {
        let a = Arc::new(Admission::new(2));
        let mut s = Box::pin(a.clone().stream());
        a.push(node("a"));
        a.push(node("b"));
        assert_eq!(take(&mut s).await.as_deref(), Some("a"));
        // A timed requeue of x starts inside kube: it takes the other slot.
        a.started("x");
        assert_eq!(take(&mut s).await, None);
        a.dropped("a");
        assert_eq!(take(&mut s).await.as_deref(), Some("b"), "a was not found");
    }
}
