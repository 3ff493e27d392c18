//! The messages the status task is sent: node reconciles, the node watch and
//! the profile watch hand it news through one typed channel, and the task owns
//! everything it builds from them (the tally). Its own module so that senders
//! and the receiver depend on it, not on each other.

use gpuready_core::tally::NodeVerdict;

/// What the status task is told. Senders never wait: the channel is unbounded
/// and the task drains it faster than reconciles fill it (a message costs a
/// map lookup).
#[derive(Debug)]
pub enum StatusInput {
    /// A node's verdict after a reconcile (`None`: no profile governs it),
    /// boxed: a verdict is far larger than the other messages.
    Verdict {
        node: String,
        verdict: Option<Box<NodeVerdict>>,
    },
    /// The node left the cache.
    NodeGone(String),
    /// A profile was created, changed or deleted: its status needs a pass
    /// (observedGeneration, a selector that now matches nothing).
    Profile(String),
}
