//! Every name gpuready writes or reads by contract, in one place: field managers,
//! label/annotation/taint keys, condition types and reasons.
//!
//! The names every layer shares are here; the names of one role each (a
//! layer's reasons, another system's labels) are its children under `keys/`.

/// Field manager of every gpuready write: the node merge patch, the node
/// condition patch and the server-side apply of profile status.
pub const FIELD_MANAGER: &str = "gpuready";
/// Field manager of the taint merge patches of gpuready before 0.2 (kept so the
/// admission policy and readers of managedFields can still name it).
pub const TAINT_FIELD_MANAGER: &str = "gpuready-taints";

/// API group of gpuready's own resources.
pub const GROUP: &str = "gpuready.io";
/// Prefix of every label, annotation and taint key gpuready owns.
pub const KEY_PREFIX: &str = "gpuready.io/";
/// The key domain gpuready owns: every label key in it (or in a subdomain of
/// it) is gpuready's to write, so no profile may select on one and no
/// `readyLabels` entry may name one — a selector that reads what gpuready
/// writes changes with gpuready's own writes (a write storm).
pub const OWNED_KEY_DOMAIN: &str = "gpuready.io";

/// Default readiness taint key: under `readiness.k8s.io/`, the prefix Karpenter
/// (v1.13 and later) treats as a startup taint and Cluster Autoscaler 1.36 can be
/// told with `--startup-taint-prefix`, and unique to gpuready so it owns the key
/// exactly (docs/taints.md).
pub const DEFAULT_TAINT_KEY: &str = "readiness.k8s.io/gpuready-not-ready";
/// Default keys of earlier gpuready releases. A taint with one of them (and the
/// profile's effect) on a node whose profile uses the current default is
/// gpuready's: the upgrade moves it to the new key in the same
/// resourceVersion-locked patch, so the node is never untainted in between.
pub const PREVIOUS_DEFAULT_TAINT_KEYS: &[&str] = &["gpuready.io/not-ready"];
/// Default readiness taint value.
pub const DEFAULT_TAINT_VALUE: &str = "true";

/// `true` or `false`: the node's overall GPU verdict.
pub const LABEL_READY: &str = "gpuready.io/ready";
/// Name of the GpuNodeProfile that governs the node.
pub const LABEL_PROFILE: &str = "gpuready.io/profile";
/// `key:effect` of the taint gpuready holds on the node (set in the same request
/// that adds or adopts it). Release after the node leaves every profile removes
/// exactly this taint, and only if a profile could have named its key.
pub const ANNOTATION_TAINT: &str = "gpuready.io/taint";
/// Comma-separated label keys gpuready set on the node and owns beyond its
/// own verdict labels ([`NODE_LABELS_WRITTEN`], its by exact name): a
/// profile's `readyLabels`. Absent when there are none. gpuready never writes
/// or deletes such a key unless this lists it or the node lacks it (a key
/// another writer set is left alone). Annotations written by earlier builds
/// list the verdict labels too; they are read the same and not rewritten.
pub const ANNOTATION_LABELS: &str = "gpuready.io/labels";
/// UntilFirstReady marker: RFC 3339 time the taint was first released. Written in
/// the same request that removes the taint, so a crash cannot separate the two.
pub const ANNOTATION_RELEASED: &str = "gpuready.io/released-at";

/// `true` while the node has been not ready for longer than its profile's
/// `notReadyDeadline` (only when the deadline asks for the label): a marker for
/// remediation systems. gpuready itself never deletes, drains or cordons.
pub const LABEL_DEADLINE_EXCEEDED: &str = "gpuready.io/not-ready-deadline-exceeded";

/// Every label key gpuready writes on a Node, by exact name (never by prefix:
/// other `gpuready.io/` keys on a node are not gpuready's). The chart's
/// admission policy lists the same keys (the chart test keeps them equal).
pub const NODE_LABELS_WRITTEN: &[&str] = &[LABEL_DEADLINE_EXCEEDED, LABEL_PROFILE, LABEL_READY];

/// Every annotation key gpuready writes on a Node, by exact name (an
/// operator's `gpuready.io/repaired-at` is read, never written).
pub const NODE_ANNOTATIONS_WRITTEN: &[&str] = &[
    ANNOTATION_LABELS,
    ANNOTATION_RELEASED,
    ANNOTATION_TAINT,
    ANNOTATION_TIMELINE,
];

/// The node's last finished wait for readiness, written with the change that
/// makes it Ready: `kind=join started=<RFC 3339> seconds=300 Node=0 Driver=120
/// …` (seconds after the start at which each step first went Ready). About
/// 150 bytes; how a new leader knows the profile's recent joins.
pub const ANNOTATION_TIMELINE: &str = "gpuready.io/timeline";

/// Node condition carrying the overall verdict.
pub const CONDITION_GPU_READY: &str = "GpuReady";
/// Prefix of the optional per-layer node conditions (`GpuReadyDriver`, ...).
pub const CONDITION_LAYER_PREFIX: &str = "GpuReady";

/// Node condition: the verdict of gpuready's Health layer on what `gpuready
/// probe` read through NVML. Written by the controller (which already holds
/// `nodes/status`), so the probe itself needs no permission on Nodes. Named with
/// the `GpuReady` prefix so everything that recognises gpuready's conditions by
/// it (the facts parser, the chart's admission policy) covers it too.
pub const CONDITION_PROBE_HEALTHY: &str = "GpuReadyProbe";

/// Annotation on a probe pod asking for a compute check: every new value runs
/// one (once the GPUs are idle and the minimum interval has passed). The probe
/// reads it from its downward-API volume, so it needs no API access for it.
pub const ANNOTATION_COMPUTE_CHECK_REQUEST: &str = "gpuready.io/compute-check-request";

/// Label on every probe report ConfigMap, selecting them for the controller's watch.
pub const LABEL_PROBE_REPORT: &str = "gpuready.io/probe-report";

/// Profile condition: every governed node is ready (kstatus `Ready`).
pub const CONDITION_READY: &str = "Ready";
/// Profile condition: new taints are held back because too many nodes failed at once.
pub const CONDITION_SAFETY_BRAKE: &str = "SafetyBrake";
/// Profile condition: state of the NFD CRDs in the cluster.
pub const CONDITION_NFD_CRDS: &str = "NfdCrds";

/// Key namespaces other systems own. A profile may not choose a taint key or a
/// ready label under one of these domains (or a subdomain of one): gpuready would
/// add and remove a key that Kubernetes, the NVIDIA stack, NFD or an autoscaler
/// writes and reads. `x-k8s.io` is named apart because it is no subdomain of
/// `k8s.io` (Cluster API's `node.cluster.x-k8s.io/uninitialized` taint).
/// The CEL rules in profile.rs spell the same list; a test keeps them equal.
///
/// The cloud providers' domains are in the list too: AKS taints and labels
/// under `kubernetes.azure.com/`, GKE under `cloud.google.com/` and
/// `*.gke.io/`, EKS under `eks.amazonaws.com/`, OKE under `oraclecloud.com`.
pub const RESERVED_KEY_DOMAINS: &[&str] = &[
    "kubernetes.io",
    "k8s.io",
    "x-k8s.io",
    "nvidia.com",
    "karpenter.sh",
    "karpenter.k8s.aws",
    "azure.com",
    "cloud.google.com",
    "gke.io",
    "amazonaws.com",
    "oraclecloud.com",
];

/// Extended-resource domains Kubernetes reserves for itself: no device plugin
/// advertises a resource there, so a profile requiring one could never be ready.
pub const RESERVED_RESOURCE_DOMAINS: &[&str] = &["kubernetes.io", "k8s.io"];

/// Taint-key prefixes inside reserved domains that exist *for* readiness
/// controllers like gpuready: Karpenter treats `readiness.k8s.io/` taints as
/// startup taints, Cluster Autoscaler the other two (docs/taints.md says which to
/// use with which autoscaler). Exactly these prefixes, no subdomain of them.
pub const AUTOSCALER_TAINT_PREFIXES: &[&str] = &[
    "readiness.k8s.io/",
    "startup-taint.cluster-autoscaler.kubernetes.io/",
    "ignore-taint.cluster-autoscaler.kubernetes.io/",
];

/// Reason of the profile's `Ready`/`Stalled` conditions while the API server
/// refuses gpuready's writes to some of its nodes.
pub const REASON_WRITES_REFUSED: &str = "WritesRefused";
/// How a node's `GpuReady` message says the API server refused gpuready's
/// taint (an admission policy, RBAC): the node is not gated as its verdict
/// says. `gpuready check` counts the nodes whose condition says so.
pub const TAINT_REFUSED: &str = "the API server refused gpuready's taint";
/// How a node's `GpuReady` message says the API server refused another of
/// gpuready's writes to it (a label, an annotation).
pub const WRITE_REFUSED: &str = "the API server refused gpuready's write to this node";

/// Reason of the profile's `Ready`/`Stalled` conditions when the profile breaks a
/// rule the API server should have enforced (admitted by an older CRD, say).
pub const REASON_INVALID_PROFILE: &str = "InvalidProfile";

pub mod brake_reasons;
pub mod compute_domains;
pub mod device_rules;
pub mod dra;
pub mod event_reasons;
pub mod external;
pub mod fabric;
pub mod health_reasons;
pub mod lifecycle;
pub mod nfd;
pub mod nfd_crd_event_reasons;
pub mod nfd_crd_reasons;
pub mod nvidia;
pub mod reasons;
