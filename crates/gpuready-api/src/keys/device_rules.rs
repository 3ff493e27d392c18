//! gpuready's own `resource.k8s.io/v1` DeviceTaintRules: one per bad device
//! of a profile with `deviceGating` (docs/taints.md, "Per-device gating").

pub const KIND: &str = "DeviceTaintRule";
pub const PLURAL: &str = "devicetaintrules";
/// Prefix of every rule name gpuready writes.
pub const NAME_PREFIX: &str = "gpuready-";
/// Label on every rule gpuready writes (with [`LABEL_OWNED_VALUE`]); a rule is
/// gpuready's only with this label AND the name prefix.
pub const LABEL_OWNED: &str = "gpuready.io/device-taint-rule";
pub const LABEL_OWNED_VALUE: &str = "true";
/// Annotation: the node the rule was written for (node names may be longer
/// than a label value).
pub const ANNOTATION_NODE: &str = "gpuready.io/node";
/// Annotation: why the device is bad (a reason, e.g. `FatalXid`).
pub const ANNOTATION_REASON: &str = "gpuready.io/reason";
/// Key of the device taint gpuready's rules set; the value is the reason.
pub const TAINT_KEY: &str = "gpuready.io/device-not-ready";
/// The one condition gpuready writes into `status.conditions` of its own
/// rules (server-side apply on `devicetaintrules/status`, field manager
/// [`crate::keys::FIELD_MANAGER`], never forced): `True` while pods hold
/// the rule's device as a DRA-backed extended resource, which Kubernetes'
/// device taint eviction does not evict (kubernetes #141290). The list is
/// a map keyed by `type`; the eviction controller applies only its own
/// `EvictionInProgress` (KEP-5055, `DeviceTaintRuleStatus`).
pub const CONDITION_PODS_NOT_EVICTED: &str = "GpuReadyPodsNotEvicted";
/// Reasons of [`CONDITION_PODS_NOT_EVICTED`].
pub mod condition_reasons {
    /// `True`: gpuready's taint on the device is `NoExecute` now and
    /// such pods stay.
    pub const NOT_EVICTED: &str = "ExtendedResourcePodsNotEvicted";
    /// `True`: not `NoExecute` yet (an escalation's dry run) or never (an
    /// `Observe` profile): such pods would stay under `NoExecute`.
    pub const WOULD_NOT_BE_EVICTED: &str = "ExtendedResourcePodsWouldNotBeEvicted";
    /// `False`: no such pod holds the device any more.
    pub const NONE: &str = "NoExtendedResourcePods";
}
