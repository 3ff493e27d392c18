//! The status of an outside judge's Node condition that means broken: read by
//! a profile's External layer and named by the presets in `keys::external`.
//! A module of its own so `keys` need not import `profile`, which imports it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The condition status that means broken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BrokenWhen {
    #[default]
    True,
    False,
}

impl BrokenWhen {
    pub fn as_str(self) -> &'static str {
        match self {
            BrokenWhen::True => "True",
            BrokenWhen::False => "False",
        }
    }
}
