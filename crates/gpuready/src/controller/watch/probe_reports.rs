//! The probe reports the controller reads: a watch on the report ConfigMaps in
//! one namespace (`--probe-namespace`), cached, keyed per node. A report that
//! changes in substance re-queues only its node; a heartbeat that changes only
//! `generatedAt` re-queues nothing (staleness is a scheduled re-check).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use futures::{Stream, StreamExt};
use gpuready_api::probe::{PROBE_CONFIGMAP_PREFIX, PROBE_REPORT_DATA_KEY};
use gpuready_core::probe::{self, ProbeEvidence};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::utils::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tracing::warn;

/// The cached reports.
#[derive(Clone)]
pub struct ProbeReports {
    store: Store<ConfigMap>,
    namespace: String,
}

impl ProbeReports {
    /// The node's report as the engine reads it; `None` when it has none.
    /// The core's lookup over this cache: `gpuready check` reads reports
    /// through the same function.
    pub fn evidence(&self, node: &str) -> Option<ProbeEvidence> {
        probe::evidence_for(node, |name| {
            self.store
                .get(&ObjectRef::new(name).within(&self.namespace))
        })
    }
}

/// What a report ConfigMap says, for the engine (the core's reading).
pub fn evidence_of(cm: &ConfigMap) -> ProbeEvidence {
    probe::evidence_of(cm)
}

/// Starts the watch: the cache, and the stream of nodes to reconcile. The
/// stream must be polled for the cache to fill.
pub fn watch(
    client: Client,
    namespace: &str,
) -> (
    ProbeReports,
    impl Stream<Item = ObjectRef<Node>> + Send + 'static,
) {
    let (reader, writer) = reflector::store::<ConfigMap>();
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let cfg = watcher::Config::default().labels(&probe::carrier_selector());
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let stream = watcher(api, cfg)
        .default_backoff()
        .reflect(writer)
        .filter_map(move |event| {
            let out = match event {
                Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => {
                    let key = substance(&cm);
                    let name = cm.name_any();
                    (seen.insert(name.clone(), key) != Some(key))
                        .then(|| node_of(&name))
                        .flatten()
                }
                Ok(watcher::Event::Delete(cm)) => {
                    let name = cm.name_any();
                    seen.remove(&name);
                    node_of(&name)
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                Err(e) => {
                    warn!(error = %e, "probe report watch failed; the watcher retries with backoff");
                    None
                }
            };
            std::future::ready(out.map(|n| ObjectRef::<Node>::new(&n)))
        });
    (
        ProbeReports {
            store: reader,
            namespace: namespace.to_owned(),
        },
        stream,
    )
}

fn node_of(configmap: &str) -> Option<String> {
    configmap
        .strip_prefix(PROBE_CONFIGMAP_PREFIX)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
}

/// A hash of the report without its heartbeat fields, so a probe that only
/// refreshes `generatedAt` triggers no reconcile.
fn substance(cm: &ConfigMap) -> u64 {
    let mut h = DefaultHasher::new();
    match cm.data.as_ref().and_then(|d| d.get(PROBE_REPORT_DATA_KEY)) {
        Some(json) => match serde_json::from_str::<serde_json::Value>(json) {
            Ok(mut v) => {
                if let Some(o) = v.as_object_mut() {
                    o.remove("generatedAt");
                }
                v.to_string().hash(&mut h);
            }
            Err(_) => json.hash(&mut h),
        },
        None => 0u8.hash(&mut h),
    }
    h.finish()
}

#[cfg(test)]
mod tests;
