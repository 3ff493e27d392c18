//! A CRD's schemas walked version by version, in a leaf module: the
//! GpuNodeProfile CRD (`crd`) and the NFD CRDs (`nfd::crds`) both adjust
//! theirs, and `crd` already imports `nfd`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};

/// Applies `f` to the root schema of every version of `crd`: the generated
/// CRDs (ours and NFD's) are adjusted per version, and a version without a
/// schema has nothing to adjust.
pub(crate) fn for_each_schema(
    crd: &mut CustomResourceDefinition,
    mut f: impl FnMut(&mut JSONSchemaProps),
) {
    let roots = crd
        .spec
        .versions
        .iter_mut()
        .filter_map(|v| v.schema.as_mut()?.open_api_v3_schema.as_mut());
    roots.for_each(&mut f);
}
