//! NFD's API (`nfd.k8s-sigs.io/v1alpha1`) as Rust types, and the NFD CRDs gpuready
//! installs when a cluster lacks them or has an older set.
//!
//! gpuready carries the CRD set of **NFD v0.19.0** — the NFD the NVIDIA charts
//! bundle in their newest releases — which is the same set NFD v0.18.x ships
//! ([`NfdCrdRelease::V0_18_19`], annotation `gpuready.io/nfd-crd-release: v0.18`).
//! The CRDs are generated from the types below ([`generate`], exposed as
//! [`crate::crd::nfd_crds`]) and tested field by field against the upstream file
//! (`tests/nfd_conformance.rs`).
//!
//! # Bumping to a newer NFD release
//!
//! 1. Put the release's `deployment/helm/node-feature-discovery/crds/nfd-api-crds.yaml`
//!    into `shared/data/nfd-crds/<tag>.yaml` (test data; it never goes into this repo).
//! 2. Set [`UPSTREAM_REFERENCE`] to `<tag>` and add the file to the release table
//!    in `tests/nfd_conformance.rs`.
//! 3. Run `cargo test -p gpuready-api --test nfd_conformance`. No difference: the
//!    release shipped the same CRDs; update the texts of [`NfdCrdRelease::V0_18_19`]
//!    (name, `nfd_releases`) and stop. Differences are listed path by path: change
//!    the types in this module until the test passes.
//! 4. If the schemas changed: add a variant to [`NfdCrdRelease`] (newest last),
//!    teach [`NfdCrdFingerprint`] a schema feature that only the new set has,
//!    and set [`NfdCrdRelease::CARRIED`] to it.
//! 5. Regenerate the committed YAML with
//!    `UPDATE_CRDS=1 cargo test -p gpuready-api --test crd_drift`, and commit.

pub mod compare;
mod crds;
pub mod feature;
pub mod group;
pub mod matcher;
pub mod release;
pub mod rule;

pub use crds::generate;
pub use feature::{
    AttributeFeatureSet, Features, FlagFeatureSet, InstanceFeature, InstanceFeatureSet, Nil,
    NodeFeature, NodeFeatureSpec,
};
pub use group::{
    FeatureGroupNode, GroupRule, NodeFeatureGroup, NodeFeatureGroupSpec, NodeFeatureGroupStatus,
};
pub use matcher::{FeatureMatcherTerm, MatchAnyElem, MatchExpression, MatchOp, VALUE_TYPE_VERSION};
pub use release::{
    NFD_CRD_RELEASE_ANNOTATION, NODE_FEATURE_CRD, NODE_FEATURE_GROUP_CRD, NODE_FEATURE_RULE_CRD,
    NfdCrdFingerprint, NfdCrdRelease,
};
pub use rule::{NodeFeatureRule, NodeFeatureRuleSpec, Rule};

/// The upstream NFD tag whose CRD file the generated CRDs are tested against.
pub const UPSTREAM_REFERENCE: &str = "v0.19.0";

/// API group of NFD's resources.
pub const GROUP: &str = "nfd.k8s-sigs.io";
