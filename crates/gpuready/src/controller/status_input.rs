//! The messages the status task is sent: node reconciles, the node watch and
//! the profile watch hand it news through one typed channel, and the task owns
//! everything it builds from them (the tally). Its own module so that senders
//! and the receiver depend on it, not on each other.

use gpuready_core::NodeAssessment;
use gpuready_core::tally::NodeVerdict;

/// What the status task is told. Senders never wait: the mailbox
/// (`mailbox.rs`) is bounded, and over its capacity keeps the latest message
/// per node or profile — the task needs only the latest.
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

/// What a message is about: the newer message about the same node or profile
/// supersedes the older one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum StatusKey {
    Node(String),
    Profile(String),
}

impl StatusInput {
    /// A node's verdict, as the tally keeps it.
    pub fn verdict(node: &str, a: &NodeAssessment) -> Self {
        StatusInput::Verdict {
            node: node.to_owned(),
            verdict: NodeVerdict::of(a).map(Box::new),
        }
    }

    pub fn key(&self) -> StatusKey {
        match self {
            StatusInput::Verdict { node, .. } | StatusInput::NodeGone(node) => {
                StatusKey::Node(node.clone())
            }
            StatusInput::Profile(p) => StatusKey::Profile(p.clone()),
        }
    }
}
