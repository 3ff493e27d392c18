//! Identity of an NFD CRD set: which NFD minor releases it matches, and how to
//! recognise the set installed in a cluster from its schema alone.
//!
//! Helm and kubectl installs of NFD carry no release marker (their only
//! annotation, controller-gen's version, is the same for v0.17 and v0.18), so
//! the release is read from schema features that each release added.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// Annotation gpuready writes on the NFD CRDs it generates, naming their
/// [`NfdCrdRelease`] (e.g. `v0.18`).
pub const NFD_CRD_RELEASE_ANNOTATION: &str = "gpuready.io/nfd-crd-release";

/// `metadata.name` of the NodeFeature CRD.
pub const NODE_FEATURE_CRD: &str = "nodefeatures.nfd.k8s-sigs.io";
/// `metadata.name` of the NodeFeatureRule CRD.
pub const NODE_FEATURE_RULE_CRD: &str = "nodefeaturerules.nfd.k8s-sigs.io";
/// `metadata.name` of the NodeFeatureGroup CRD (NFD v0.16+).
pub const NODE_FEATURE_GROUP_CRD: &str = "nodefeaturegroups.nfd.k8s-sigs.io";

/// A distinct NFD CRD set. NFD changes its CRDs only between some minor
/// releases, so one value covers every NFD release that shipped the same schemas.
/// Ordered oldest first; every step only adds to the schemas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NfdCrdRelease {
    /// NFD v0.14.x: NodeFeature and NodeFeatureRule; `matchExpressions` required.
    V0_14,
    /// NFD v0.15.x: adds `matchName` and rule `annotations`.
    V0_15,
    /// NFD v0.16.x and v0.17.x: adds the NodeFeatureGroup CRD.
    V0_16_17,
    /// NFD v0.18.x and v0.19.x: adds the `Ge`, `Le`, `GeLe` operators, the value
    /// `type`, and variables in NodeFeatureGroup rules.
    V0_18_19,
}

impl NfdCrdRelease {
    /// Every known set, oldest first.
    pub const ALL: [NfdCrdRelease; 4] = [
        NfdCrdRelease::V0_14,
        NfdCrdRelease::V0_15,
        NfdCrdRelease::V0_16_17,
        NfdCrdRelease::V0_18_19,
    ];

    /// The set gpuready generates from its Rust types (see [`crate::nfd`]).
    pub const CARRIED: NfdCrdRelease = NfdCrdRelease::V0_18_19;

    /// Value of [`NFD_CRD_RELEASE_ANNOTATION`]: the first NFD minor that
    /// shipped this set.
    pub fn as_str(self) -> &'static str {
        match self {
            NfdCrdRelease::V0_14 => "v0.14",
            NfdCrdRelease::V0_15 => "v0.15",
            NfdCrdRelease::V0_16_17 => "v0.16",
            NfdCrdRelease::V0_18_19 => "v0.18",
        }
    }

    /// The NFD releases known to ship this set, for messages.
    pub fn nfd_releases(self) -> &'static str {
        match self {
            NfdCrdRelease::V0_14 => "NFD v0.14.x",
            NfdCrdRelease::V0_15 => "NFD v0.15.x",
            NfdCrdRelease::V0_16_17 => "NFD v0.16.x-v0.17.x",
            NfdCrdRelease::V0_18_19 => "NFD v0.18.x-v0.19.x",
        }
    }

    /// Parses an [`NFD_CRD_RELEASE_ANNOTATION`] value.
    pub fn parse(s: &str) -> Option<NfdCrdRelease> {
        NfdCrdRelease::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Recognises the release of an installed CRD set from its schemas; CRDs
    /// other than NFD's are ignored. `None` when neither NodeFeatureRule nor
    /// NodeFeatureGroup is among them (NodeFeature is the same in every release).
    pub fn fingerprint<'a>(
        crds: impl IntoIterator<Item = &'a CustomResourceDefinition>,
    ) -> Option<NfdCrdRelease> {
        NfdCrdFingerprint::of(crds).release()
    }
}

impl std::fmt::Display for NfdCrdRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The schema facts that tell NFD CRD sets apart (nfd-crds.md §3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NfdCrdFingerprint {
    /// A NodeFeatureRule CRD is present.
    pub node_feature_rule: bool,
    /// A NodeFeatureGroup CRD is present (v0.16+).
    pub node_feature_group: bool,
    /// Some matcher accepts `matchName` (v0.15+).
    pub match_name: bool,
    /// Some `op` enum contains `Ge` (v0.18+).
    pub ge_op: bool,
}

impl NfdCrdFingerprint {
    /// Collects the facts from the NFD CRDs among `crds`.
    pub fn of<'a>(crds: impl IntoIterator<Item = &'a CustomResourceDefinition>) -> Self {
        let mut fp = NfdCrdFingerprint::default();
        for crd in crds {
            let name = crd.metadata.name.as_deref().unwrap_or_default();
            match name {
                NODE_FEATURE_RULE_CRD => fp.node_feature_rule = true,
                NODE_FEATURE_GROUP_CRD => fp.node_feature_group = true,
                _ => continue,
            }
            for version in &crd.spec.versions {
                if let Some(root) = version
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref())
                {
                    walk(root, None, &mut |field, schema| {
                        if field == Some("matchName") {
                            fp.match_name = true;
                        }
                        if field == Some("op") && enum_has(schema, "Ge") {
                            fp.ge_op = true;
                        }
                    });
                }
            }
        }
        fp
    }

    /// The release these facts identify. Each test looks for the newest
    /// evidence first, so a mixed set (say a v0.18 NodeFeatureRule whose
    /// NodeFeatureGroup was deleted) is named by its newest part; the per-CRD
    /// comparison then finds what is missing.
    pub fn release(self) -> Option<NfdCrdRelease> {
        if !self.node_feature_rule && !self.node_feature_group {
            None
        } else if self.ge_op {
            Some(NfdCrdRelease::V0_18_19)
        } else if self.node_feature_group {
            Some(NfdCrdRelease::V0_16_17)
        } else if self.match_name {
            Some(NfdCrdRelease::V0_15)
        } else {
            Some(NfdCrdRelease::V0_14)
        }
    }
}

fn enum_has(schema: &JSONSchemaProps, value: &str) -> bool {
    schema
        .enum_
        .iter()
        .flatten()
        .any(|v| v.0.as_str() == Some(value))
}

/// Visits every subschema, with the property name it sits under (if any).
fn walk<'a>(
    schema: &'a JSONSchemaProps,
    field: Option<&'a str>,
    visit: &mut impl FnMut(Option<&'a str>, &'a JSONSchemaProps),
) {
    visit(field, schema);
    for (name, sub) in schema.properties.iter().flatten() {
        walk(sub, Some(name), visit);
    }
    match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(sub)) => walk(sub, None, visit),
        Some(JSONSchemaPropsOrArray::Schemas(subs)) => {
            subs.iter().for_each(|sub| walk(sub, None, visit))
        }
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(sub)) = &schema.additional_properties {
        walk(sub, None, visit);
    }
    for list in [&schema.all_of, &schema.any_of, &schema.one_of] {
        list.iter().flatten().for_each(|sub| walk(sub, None, visit));
    }
    if let Some(sub) = &schema.not {
        walk(sub, None, visit);
    }
}
