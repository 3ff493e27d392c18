//! Reasons of the [`CONDITION_SAFETY_BRAKE`](super::CONDITION_SAFETY_BRAKE)
//! profile condition.

/// True: too many nodes turned not-ready at once; new taints are held back.
pub const TOO_MANY_NODES_TURNED_NOT_READY: &str = "TooManyNodesTurnedNotReady";
/// False: taints are applied normally.
pub const RELEASED: &str = "Released";
