//! NFD's API (`nfd.k8s-sigs.io/v1alpha1`) as Rust types, and the NFD CRDs gpuready
//! installs when a cluster lacks them or has an older set.
//!
//! gpuready carries the CRD set of **NFD v0.19.0** — the NFD the NVIDIA charts
//! bundle in their newest releases — which is the same set NFD v0.18.x ships
//! ([`NfdCrdRelease::V0_18_19`], annotation `gpuready.io/nfd-crd-release: v0.18`).
//! The CRDs are generated from the types below ([`generate`], exposed as
//! [`crate::crd::nfd_crds`]) and tested field by field against the upstream file
//! (`tests/schemas/nfd_conformance.rs`). Use those, not `NodeFeature::crd()` and friends:
//! the derive alone gives `nullable` fields, a `title` and no object-meta fields,
//! which upstream does not have (see `crds.rs` for why each change is made).
//!
//! # Bumping to a newer NFD release
//!
//! 1. Add `<tag>` to `tests/control-plane/nfd-crds.versions` (the tests fetch its
//!    `deployment/base/nfd-crds/nfd-api-crds.yaml` from the Go module proxy and
//!    cache it; it never goes into this repo).
//! 2. Set [`UPSTREAM_REFERENCE`] to `<tag>`, and add `<tag>` with its release to
//!    the `UPSTREAM` table in `tests/schemas/nfd_conformance.rs` (a listed release
//!    missing from that table fails the test).
//! 3. Run `cargo test -p gpuready-api --test schemas nfd_conformance::`.
//!    * No difference: the release shipped the same CRDs (as v0.19.0 did after
//!      v0.18). Widen the text of [`NfdCrdRelease::nfd_releases`] and this header,
//!      and stop: the release identity and the generated YAML stay as they are.
//!    * Differences are listed path by path (`…rules.items…op.enum: upstream has
//!      [..], generated has [..]`): change the types in this module until none is left.
//! 4. If the schemas changed: add a variant to [`NfdCrdRelease`] (newest last, so
//!    the ordering holds) with its annotation value in `as_str`, teach
//!    [`NfdCrdFingerprint`] a schema feature only the new set has, set
//!    [`NfdCrdRelease::CARRIED`] to it, and map the previous reference file to the
//!    previous release in the `UPSTREAM` table. In `gpuready-core`'s `nfd_crds`
//!    tests, move the previous tags from "current" to "older".
//! 5. Regenerate the committed YAML with
//!    `UPDATE_CRDS=1 cargo test -p gpuready-api --test schemas crd_drift::`, run the
//!    tests (including `crates/gpuready/tests/api/nfd_crds_apiserver.rs` against a
//!    real API server), and commit.

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
