//! Feature matchers shared by NodeFeatureRule and NodeFeatureGroup: the
//! `matchFeatures` / `matchAny` terms and the expression operators.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only value type NFD defines so far: compare values as versions (for the
/// ordering operators `Gt`, `Ge`, `Lt`, `Le`, `GtLt`, `GeLe`).
pub const VALUE_TYPE_VERSION: &str = "version";

/// Operator of a [`MatchExpression`].
///
/// The variant order is the order of the CRD enum (NFD keeps each ordering
/// operator next to its inclusive twin).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum MatchOp {
    /// The input equals one of the values.
    In,
    /// The input equals none of the values.
    NotIn,
    /// The input matches one of the values taken as regular expressions.
    InRegexp,
    /// The element exists (no values).
    Exists,
    /// The element does not exist (no values).
    DoesNotExist,
    /// The input is greater than the single value.
    Gt,
    /// The input is greater than or equal to the single value (NFD v0.18+).
    Ge,
    /// The input is less than the single value.
    Lt,
    /// The input is less than or equal to the single value (NFD v0.18+).
    Le,
    /// The input lies strictly between the two values.
    GtLt,
    /// The input lies between the two values, both ends included (NFD v0.18+).
    GeLe,
    /// The input is the boolean `true` (no values).
    IsTrue,
    /// The input is the boolean `false` (no values).
    IsFalse,
}

impl MatchOp {
    /// Every operator, in CRD enum order.
    pub const ALL: [MatchOp; 13] = [
        MatchOp::In,
        MatchOp::NotIn,
        MatchOp::InRegexp,
        MatchOp::Exists,
        MatchOp::DoesNotExist,
        MatchOp::Gt,
        MatchOp::Ge,
        MatchOp::Lt,
        MatchOp::Le,
        MatchOp::GtLt,
        MatchOp::GeLe,
        MatchOp::IsTrue,
        MatchOp::IsFalse,
    ];

    /// The operator as spelled in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchOp::In => "In",
            MatchOp::NotIn => "NotIn",
            MatchOp::InRegexp => "InRegexp",
            MatchOp::Exists => "Exists",
            MatchOp::DoesNotExist => "DoesNotExist",
            MatchOp::Gt => "Gt",
            MatchOp::Ge => "Ge",
            MatchOp::Lt => "Lt",
            MatchOp::Le => "Le",
            MatchOp::GtLt => "GtLt",
            MatchOp::GeLe => "GeLe",
            MatchOp::IsTrue => "IsTrue",
            MatchOp::IsFalse => "IsFalse",
        }
    }
}

impl std::fmt::Display for MatchOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One test applied to an input: an operator and the values it compares with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MatchExpression {
    /// How the input is compared with `value`.
    pub op: MatchOp,

    /// Operands of `op`: none for Exists, DoesNotExist, IsTrue and IsFalse; one for
    /// Gt, Ge, Lt and Le; two for GtLt and GeLe; one or more otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub value: Vec<String>,

    /// How the operands are interpreted by the ordering operators; `version`
    /// compares them as versions (NFD v0.18+). Unset: as integers.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub value_type: Option<String>,
}

/// Tests against one feature set (such as `kernel.loadedmodule` or `pci.device`),
/// applied to each of its elements.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureMatcherTerm {
    /// Name of the feature set, e.g. `pci.device`.
    pub feature: String,

    /// Tests keyed by attribute name, all of which an element must pass. Optional
    /// since NFD v0.15 (a term may use `matchName` alone).
    pub match_expressions: Option<BTreeMap<String, MatchExpression>>,

    /// Test on the element name itself (NFD v0.15+).
    pub match_name: Option<MatchExpression>,
}

/// One alternative of `matchAny`: a list of terms that must all match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchAnyElem {
    /// Terms that must all match for this alternative to match.
    pub match_features: Vec<FeatureMatcherTerm>,
}
