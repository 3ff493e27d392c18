//! Turns the derived NFD CRDs into the shape upstream NFD ships. kube's derive
//! gets the fields, types, enums and required lists right; this step adds what
//! it cannot express and removes what it adds on its own.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use super::feature::NodeFeature;
use super::group::NodeFeatureGroup;
use super::release::{NFD_CRD_RELEASE_ANNOTATION, NfdCrdRelease};
use super::rule::NodeFeatureRule;
use crate::crd_schemas::for_each_schema;

/// The NFD CRDs of [`NfdCrdRelease::CARRIED`], in upstream's file order.
pub fn generate() -> Vec<CustomResourceDefinition> {
    [
        NodeFeature::crd(),
        NodeFeatureGroup::crd(),
        NodeFeatureRule::crd(),
    ]
    .into_iter()
    .map(shape)
    .collect()
}

fn shape(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    // Our provenance mark: installed upstream CRDs carry none, so its presence
    // also tells that gpuready wrote the CRD.
    crd.metadata.annotations = Some(BTreeMap::from([(
        NFD_CRD_RELEASE_ANNOTATION.to_owned(),
        NfdCrdRelease::CARRIED.as_str().to_owned(),
    )]));
    // Upstream spells listKind out; the API server would default it to the same.
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    for_each_schema(&mut crd, shape_root);
    crd
}

fn shape_root(root: &mut JSONSchemaProps) {
    // schemars names the root schema after the Rust type; upstream has no title.
    root.title = None;
    drop_nullable(root);
    // kube's derive leaves the object-meta fields out of the schema (the API
    // server validates them anyway); upstream lists them, so we do too.
    let props = root.properties.get_or_insert_with(BTreeMap::new);
    props.insert(
        "apiVersion".to_owned(),
        string_prop("API group and version of the object, e.g. nfd.k8s-sigs.io/v1alpha1."),
    );
    props.insert(
        "kind".to_owned(),
        string_prop("Kind of the object, in CamelCase."),
    );
    props.insert(
        "metadata".to_owned(),
        JSONSchemaProps {
            type_: Some("object".to_owned()),
            ..Default::default()
        },
    );
}

fn string_prop(description: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        description: Some(description.to_owned()),
        type_: Some("string".to_owned()),
        ..Default::default()
    }
}

/// kube marks every `Option` field `nullable: true`. NFD's Go types are
/// `omitempty` fields that are never sent as `null`, and neither are ours
/// (`skip_serializing_if`), so upstream's "optional but not nullable" is the
/// faithful encoding; the API server drops explicit nulls of such fields.
fn drop_nullable(schema: &mut JSONSchemaProps) {
    schema.nullable = None;
    for sub in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        drop_nullable(sub);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(sub)) => drop_nullable(sub),
        Some(JSONSchemaPropsOrArray::Schemas(subs)) => subs.iter_mut().for_each(drop_nullable),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(sub)) = &mut schema.additional_properties {
        drop_nullable(sub);
    }
    for list in [&mut schema.all_of, &mut schema.any_of, &mut schema.one_of] {
        list.iter_mut().flatten().for_each(drop_nullable);
    }
}
