//! How one evidence source is followed: whether its API is served (looked
//! for again while it is not), then its watch applied to its per-node index,
//! re-queuing the nodes whose objects changed.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::controller::mailbox::RequeueSender;
use crate::controller::watch::evidence_index::{Index, SourceState};

/// How often an absent API is looked for again (DRA enabled or NFD installed
/// after gpuready started).
/// One LIST a minute while absent: gpuready itself may install the NodeFeature
/// CRD (`--nfd-crds=apply`) just after it starts.
const REDISCOVER: Duration = Duration::from_secs(60);

/// Finds out whether the API is served, then keeps `state` in step with the
/// watch, re-queuing the nodes whose objects changed.
#[allow(clippy::too_many_arguments)]
pub(super) async fn follow<K, T>(
    kind: &'static str,
    api: Api<K>,
    labels: Option<String>,
    key: impl Fn(&K) -> String,
    entries: impl Fn(K) -> Vec<(String, T)>,
    state: &RwLock<SourceState<T>>,
    settled: impl Fn(bool),
    changed: impl Fn(&Index<T>),
    relist: Option<Arc<Notify>>,
    requeue: RequeueSender,
    stop: CancellationToken,
) where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let absent = || {
        set(state, SourceState::Absent);
        settled(true);
    };
    if !served(kind, &api, labels.as_deref(), absent, &stop).await {
        return;
    }
    info!(kind, "watching as evidence");
    let mut buffer: Index<T> = Index::default();
    let mut config = watcher::Config::default();
    if let Some(l) = &labels {
        config = config.labels(l);
    }
    let mut events = std::pin::pin!(watcher(api.clone(), config.clone()).default_backoff());
    loop {
        let ev = tokio::select! {
            _ = stop.cancelled() => return,
            () = asked(relist.as_deref()) => {
                // A fresh watcher lists again; its `InitDone` swaps the index
                // and re-queues the nodes whose entries differ.
                events.set(watcher(api.clone(), config.clone()).default_backoff());
                continue;
            }
            ev = events.next() => ev,
        };
        let Some(ev) = ev else { return };
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                warn!(kind, error = %e, "watch failed; the watcher retries with backoff");
                continue;
            }
        };
        let mut touched = BTreeSet::new();
        match ev {
            Event::Init => buffer = Index::default(),
            Event::InitApply(o) => {
                let (k, v) = (key(&o), o.resource_version());
                buffer.put(&k, v, entries(o));
            }
            Event::InitDone => {
                // A re-list: the nodes of the objects that differ. The first
                // list (or one after the API was absent): every node it names,
                // since a reconcile may have judged them without it.
                let fresh = std::mem::take(&mut buffer);
                if let Ok(mut s) = state.write() {
                    match &*s {
                        SourceState::Synced(old) => touched = old.changed_in(&fresh),
                        SourceState::Pending | SourceState::Absent => {
                            touched.extend(fresh.by_node.keys().cloned());
                        }
                    }
                    *s = SourceState::Synced(fresh);
                }
                settled(true);
            }
            // An object that moved to other nodes (or stopped naming one)
            // leaves the nodes it named before.
            Event::Apply(o) => {
                let (k, v) = (key(&o), o.resource_version());
                let e = entries(o);
                if let Ok(mut s) = state.write()
                    && let SourceState::Synced(idx) = &mut *s
                {
                    touched = idx.put(&k, v, e);
                }
            }
            Event::Delete(o) => {
                if let Ok(mut s) = state.write()
                    && let SourceState::Synced(idx) = &mut *s
                {
                    touched = idx.put(&key(&o), None, Vec::new());
                }
            }
        }
        if !touched.is_empty()
            && let Ok(SourceState::Synced(idx)) = state.read().as_deref()
        {
            changed(idx);
        }
        for n in touched {
            requeue.requeue(&n);
        }
    }
}

/// Waits until the API answers a LIST (of one object): `true` then, `false`
/// if stopped first. While it is not served or not readable (404, 403),
/// `absent` is called and the API is looked for again every [`REDISCOVER`].
pub(crate) async fn served<K>(
    kind: &'static str,
    api: &Api<K>,
    labels: Option<&str>,
    absent: impl Fn(),
    stop: &CancellationToken,
) -> bool
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut logged = false;
    loop {
        let mut probe = ListParams::default().limit(1);
        if let Some(l) = labels {
            probe = probe.labels(l);
        }
        match api.list(&probe).await {
            Ok(_) => return true,
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
                if !logged {
                    warn!(
                        kind,
                        code = s.code,
                        "not served or not readable: this evidence is Unknown; looking again every {}s",
                        REDISCOVER.as_secs()
                    );
                    logged = true;
                }
                absent();
            }
            Err(e) => {
                debug!(kind, error = %e, "probing the API failed; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return false,
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
                continue;
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(REDISCOVER) => {}
        }
    }
}

/// Resolves when `relist` is notified; never without one.
async fn asked(relist: Option<&Notify>) {
    match relist {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

fn set<T>(state: &RwLock<SourceState<T>>, new: SourceState<T>) {
    if let Ok(mut s) = state.write() {
        *s = new;
    }
}
