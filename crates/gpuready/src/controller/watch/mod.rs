//! What the controller reads and keeps: the node cache (pruned and packed),
//! the profile watch, the evidence beside the nodes, the probe reports, the
//! `fabric.groupByLabel` groups, the verdicts judged from them, and anyone's
//! DeviceTaintRules that evict across the cluster. Nothing
//! in this room writes to the API server but the profile watch's own
//! "cannot read" status.

pub mod cached;
pub mod evidence;
pub mod evidence_follow;
pub mod evidence_index;
pub mod groups;
pub mod initial_list;
pub mod probe_reports;
pub mod profiles;
pub mod prune;
pub mod verdicts;
pub mod watched;
pub mod wide_rules;

use tokio_util::sync::CancellationToken;

/// The stream's next item, or `None` once it ends or `stop` is cancelled:
/// every long-lived watch loop ends on either, so they share this one wait.
pub(crate) async fn next_or_stop<S>(stream: &mut S, stop: &CancellationToken) -> Option<S::Item>
where
    S: futures::Stream + Unpin,
{
    tokio::select! {
        _ = stop.cancelled() => None,
        item = futures::StreamExt::next(stream) => item,
    }
}
