//! The cluster readers `check` and `run` share: the GpuNodeProfile API read
//! untyped and typed one object at a time (so one profile the Rust types
//! cannot hold is named with its field path, not a failed list), and the
//! DRA ResourceSlice API read untyped (so a cluster without DRA, or with a
//! newer slice schema, is a reading, not an error). Outside the controller so
//! that `check` reads the cluster the way `run` does without reaching into it.

use gpuready_api::GpuNodeProfile;
use gpuready_api::dra::ResourceSlice;
use gpuready_api::keys;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, Resource};

/// The profiles API, untyped.
pub fn dynamic_api(client: Client) -> Api<DynamicObject> {
    Api::all_with(client, &ApiResource::erase::<GpuNodeProfile>(&()))
}

/// The profile an untyped object holds, or why the Rust types cannot hold it
/// (`field.path: message`). `gpuready check` types a live list the same way.
pub fn to_profile(o: &DynamicObject) -> Result<GpuNodeProfile, String> {
    let mut value = serde_json::to_value(o).map_err(|e| e.to_string())?;
    if let Some(obj) = value.as_object_mut() {
        obj.insert("apiVersion".into(), GpuNodeProfile::api_version(&()).into());
        obj.insert("kind".into(), GpuNodeProfile::kind(&()).into());
    }
    serde_path_to_error::deserialize(value).map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

/// The ResourceSlice API resource (served since Kubernetes 1.34).
pub fn slice_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            keys::dra::API_GROUP,
            keys::dra::API_VERSION,
            keys::dra::KIND,
        ),
        keys::dra::PLURAL,
    )
}

/// gpuready's typed view of a dynamic ResourceSlice; `None` if it does not parse.
pub fn slice_from_dynamic(o: DynamicObject) -> Option<ResourceSlice> {
    let mut value = o.data;
    if let Some(obj) = value.as_object_mut() {
        obj.insert(
            "metadata".into(),
            serde_json::to_value(&o.metadata).unwrap_or_default(),
        );
    }
    serde_json::from_value(value).ok()
}
