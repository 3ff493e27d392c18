//! The [`kube::Resource`] impl every hand-written API type needs for kube's
//! `Api<T>`, written once: each type names its kind, group, version, plural
//! and scope, and keeps its `metadata` field.

/// Implements [`kube::Resource`] for `$ty` (a struct with a `metadata:
/// ObjectMeta` field) from its API's constants.
macro_rules! static_resource {
    ($ty:ty, $scope:ty, kind: $kind:expr, group: $group:expr, version: $version:expr, plural: $plural:expr $(,)?) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($kind)
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($group)
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($version)
            }
            fn api_version(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Owned(format!("{}/{}", $group, $version))
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($plural)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pub(crate) use static_resource;
