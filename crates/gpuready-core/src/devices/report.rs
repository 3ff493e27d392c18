//! What device gating says of a node: its bad devices, the escalations under
//! way, and the pods a `NoExecute` device taint leaves running
//! ([`DeviceGatingReport`]).

use serde::Serialize;

/// One device gpuready takes out of service.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BadDevice {
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// Machine reason (`FatalXid`, `ProductMismatch`, …): the value of the
    /// device taint gpuready writes.
    pub reason: String,
    pub message: String,
    /// The profile escalates this reason: the escalation rule's state.
    pub escalation: Option<EscalationState>,
    /// Pods that hold this device as a DRA-backed extended resource while
    /// gpuready's taint on it is, or is to turn, `NoExecute`: Kubernetes'
    /// device taint eviction does not evict them (kubernetes #141290).
    pub not_evicted: Option<NotEvicted>,
}

/// The pods a `NoExecute` device taint of gpuready's leaves running because
/// they hold the device as a DRA-backed extended resource (KEP-5004): the
/// device taint eviction controller reads only `pod.spec.resourceClaims`
/// (kubernetes #141290, open; fix proposed in kubernetes PR #142289).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotEvicted {
    /// `namespace/name`, sorted.
    pub pods: Vec<String>,
    /// gpuready's taint on the device is `NoExecute` now (not a dry run, not
    /// an `Observe` profile's).
    pub no_execute_now: bool,
    /// In words, naming the device, the pods and the upstream issue.
    pub message: String,
}

/// The upstream issue every word about these pods names.
pub const EXTENDED_RESOURCE_EVICTION_ISSUE: &str = "kubernetes #141290";

/// Pod names a message lists before it says how many more.
const PODS_NAMED: usize = 5;

impl NotEvicted {
    pub(super) fn new(
        device: &str,
        pods: Vec<String>,
        no_execute_now: bool,
        observe: bool,
    ) -> NotEvicted {
        let n = pods.len();
        let mut named = pods
            .iter()
            .take(PODS_NAMED)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if n > PODS_NAMED {
            named.push_str(&format!(" and {} more", n - PODS_NAMED));
        }
        let verb = if observe {
            "would not be evicted by Kubernetes under NoExecute"
        } else if no_execute_now {
            "are not evicted by Kubernetes"
        } else {
            "will not be evicted by Kubernetes when the taint turns NoExecute"
        };
        NotEvicted {
            message: format!(
                "{n} pod(s) hold {device} as a DRA extended resource and {verb} ({EXTENDED_RESOURCE_EVICTION_ISSUE}): {named}"
            ),
            pods,
            no_execute_now,
        }
    }
}

/// A bad device's escalation to `NoExecute`: a second rule of gpuready's
/// beside the device's own, effect `None` while its dry run lasts (counted
/// from the rule's creationTimestamp, which the API server sets), then
/// `NoExecute`. An `Observe` profile's stays `None`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EscalationState {
    /// The escalation rule's effect now: `None` or `NoExecute`.
    pub effect: &'static str,
    /// RFC 3339: when the dry run ends (or ended).
    pub no_execute_at: String,
    /// The rule's `EvictionInProgress` condition, `status: message`.
    pub eviction: Option<String>,
    /// Due, but held with effect `None`: the safety brake is engaged, or the
    /// profile's share of devices under `NoExecute` is at its limit
    /// (`crate::no_execute`), in words.
    pub held: Option<String>,
}

/// The verdict over the devices of one node under device gating.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceGatingReport {
    /// Every bad device, sorted by device name.
    pub bad: Vec<BadDevice>,
    /// Physical GPUs with a usable device left: not bad, not tainted
    /// NoSchedule/NoExecute by the DRA driver.
    pub ready_gpus: usize,
    /// Below this many ready GPUs the node is tainted too.
    pub min_ready_gpus: usize,
    /// Seconds until an escalation's dry run ends.
    #[serde(skip)]
    pub recheck_after_seconds: Option<u64>,
    /// Devices in the node's pool: its share of the profile's `NoExecute`
    /// budget's denominator.
    #[serde(skip)]
    pub devices: usize,
}

impl DeviceGatingReport {
    /// `gpu-3 (FatalXid), gpu-5 (UncorrectableEccErrors)`.
    pub fn describe(&self) -> String {
        self.bad
            .iter()
            .map(|b| format!("{} ({})", b.device, b.reason))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
