//! The profile watch, tolerant of objects that do not deserialize: profiles are
//! watched as untyped objects and typed one by one, so one profile the Rust types
//! cannot hold (a number past u32 admitted by an older CRD, say) is reported — an
//! error log, a Warning Event on it and a status kstatus reads as Failed
//! (`Ready=False`, `Stalled=True`, reason `InvalidProfile`) — and skipped,
//! instead of failing the whole list, leaving the caches unsynced and the
//! controller writing nothing.
//!
//! kube-core's `DeserializeGuard` isolates a bad object the same way, but what
//! it keeps of the failure is serde's message alone ("invalid value: integer
//! `4294967296`, expected u32"); typing through `serde_path_to_error` here puts
//! the field path in front of it (`spec.resources.nvidia.com/gpu: …`) in the log, the Event and
//! the status condition, which is what tells a person which line of the
//! profile to fix. That path is why this module stays.

use std::collections::BTreeMap;

use futures::{Stream, StreamExt};
use gpuready_api::{GpuNodeProfile, keys};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::events::{EventType, Recorder};
use kube::runtime::watcher;
use kube::{Client, Resource};
use tracing::error;

use crate::controller::event::event;
use crate::readers::{dynamic_api, to_profile};

type DynEvent = Result<watcher::Event<DynamicObject>, watcher::Error>;
type TypedEvent = Result<watcher::Event<GpuNodeProfile>, watcher::Error>;

/// Types every profile of the watch; those that fail are reported once per
/// resourceVersion and left out (a bad update keeps the last good version).
pub fn typed(
    events: impl Stream<Item = DynEvent>,
    recorder: Recorder,
    client: Client,
) -> impl Stream<Item = TypedEvent> {
    let mut reported: BTreeMap<String, String> = BTreeMap::new();
    events.filter_map(move |event| {
        let out = match event {
            Err(e) => Some(Err(e)),
            Ok(watcher::Event::Init) => Some(Ok(watcher::Event::Init)),
            Ok(watcher::Event::InitDone) => Some(Ok(watcher::Event::InitDone)),
            Ok(watcher::Event::Apply(o)) => {
                convert(o, &mut reported, &recorder, &client).map(|p| Ok(watcher::Event::Apply(p)))
            }
            Ok(watcher::Event::InitApply(o)) => convert(o, &mut reported, &recorder, &client)
                .map(|p| Ok(watcher::Event::InitApply(p))),
            Ok(watcher::Event::Delete(o)) => {
                reported.remove(o.metadata.name.as_deref().unwrap_or_default());
                // The store forgets by name: a placeholder does when the object
                // itself cannot be typed.
                let p = to_profile(&o).ok().or_else(|| placeholder(&o));
                p.map(|p| Ok(watcher::Event::Delete(p)))
            }
        };
        std::future::ready(out)
    })
}

/// Says in the profile's status that gpuready cannot read it, unless it says
/// so already (the status write is itself a change of the object: written
/// again each time, it would be seen again, and again).
fn mark_unreadable(client: &Client, o: &DynamicObject, why: &str) {
    let message: String = format!("gpuready cannot read this profile and skips it: {why}")
        .chars()
        .take(1024)
        .collect();
    let conditions = o
        .data
        .pointer("/status/conditions")
        .and_then(serde_json::Value::as_array);
    let says_so = conditions.is_some_and(|cs| {
        cs.iter().any(|c| {
            c["type"] == keys::CONDITION_READY
                && c["reason"] == keys::REASON_INVALID_PROFILE
                && c["message"] == message.as_str()
        })
    });
    let Some(name) = o.metadata.name.clone().filter(|_| !says_so) else {
        return;
    };
    let now = jiff::Timestamp::now().to_string();
    let condition = |type_: &str, status: &str| {
        serde_json::json!({
            "type": type_, "status": status, "reason": keys::REASON_INVALID_PROFILE,
            "message": message, "lastTransitionTime": now,
            "observedGeneration": o.metadata.generation,
        })
    };
    let body = serde_json::json!({
        "apiVersion": GpuNodeProfile::api_version(&()),
        "kind": GpuNodeProfile::kind(&()),
        "metadata": { "name": name },
        "status": {
            "observedGeneration": o.metadata.generation,
            "conditions": [condition(keys::CONDITION_READY, "False"), condition(gpuready_core::status::CONDITION_STALLED, "True")],
        },
    });
    let api = dynamic_api(client.clone());
    tokio::spawn(async move {
        if let Err(e) = api
            .patch_status(
                &name,
                &PatchParams::apply(keys::FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
        {
            error!(profile = %name, error = %e, "marking the unreadable profile in its status failed");
        }
    });
}

fn placeholder(o: &DynamicObject) -> Option<GpuNodeProfile> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": GpuNodeProfile::api_version(&()),
        "kind": GpuNodeProfile::kind(&()),
        "metadata": o.metadata,
        "spec": { "nodeSelector": {} },
    }))
    .ok()
}

fn convert(
    o: DynamicObject,
    reported: &mut BTreeMap<String, String>,
    recorder: &Recorder,
    client: &Client,
) -> Option<GpuNodeProfile> {
    match to_profile(&o) {
        Ok(p) => {
            reported.remove(o.metadata.name.as_deref().unwrap_or_default());
            Some(p)
        }
        Err(why) => {
            let name = o.metadata.name.clone().unwrap_or_default();
            let rv = o.metadata.resource_version.clone().unwrap_or_default();
            if reported.insert(name.clone(), rv.clone()) != Some(rv) {
                error!(profile = %name, error = %why, "GpuNodeProfile cannot be read; skipped until it is fixed");
                let reference = ObjectReference {
                    api_version: Some(GpuNodeProfile::api_version(&()).into()),
                    kind: Some(GpuNodeProfile::kind(&()).into()),
                    name: Some(name),
                    uid: o.metadata.uid.clone(),
                    resource_version: o.metadata.resource_version.clone(),
                    ..ObjectReference::default()
                };
                let event = event(
                    EventType::Warning,
                    keys::REASON_INVALID_PROFILE,
                    "Read",
                    &format!("gpuready cannot read this profile and skips it: {why}"),
                );
                let recorder = recorder.clone();
                tokio::spawn(async move {
                    let _ = recorder.publish(&event, &reference).await;
                });
                mark_unreadable(client, &o, &why);
            }
            None
        }
    }
}
