//! Types that stand for a Node in kube's requests and caches (the watch's
//! `CachedNode`, a write's `WrittenNode`): one macro gives each the Node's
//! resource identity, so their addresses cannot drift apart.

/// Implements `kube::Resource` for `$ty` as the Node it stands for, its
/// metadata in the field `$meta`: `Api<$ty>` sends the requests `Api<Node>`
/// sends, and kube's caches and `ObjectRef`s treat it as that Node.
macro_rules! node_resource {
    ($ty:ty, $meta:ident) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = k8s_openapi::ClusterResourceScope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Node as k8s_openapi::Resource>::KIND.into()
            }

            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Node as k8s_openapi::Resource>::GROUP.into()
            }

            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Node as k8s_openapi::Resource>::VERSION.into()
            }

            fn api_version(_: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Node as k8s_openapi::Resource>::API_VERSION.into()
            }

            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                <k8s_openapi::api::core::v1::Node as k8s_openapi::Resource>::URL_PATH_SEGMENT.into()
            }

            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.$meta
            }

            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.$meta
            }
        }
    };
}

pub(crate) use node_resource;
