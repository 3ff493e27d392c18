//! Every name gpuready writes or reads by contract, in one place: field managers,
//! label/annotation/taint keys, condition types and reasons.

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

/// Reasons shared by the engine, the controller and the CLI.
pub mod reasons {
    pub const READY: &str = "Ready";
    pub const CONFLICT: &str = "Conflict";
    pub const MALFORMED_LABEL: &str = "MalformedLabel";
    pub const NODE_NOT_READY: &str = "NodeNotReady";
    pub const NO_NODES: &str = "NoMatchingNodes";
    pub const NODES_NOT_READY: &str = "NodesNotReady";
    /// Profile `Ready=True` of an `Observe` profile with not-ready nodes: a
    /// report-only profile has nothing left to reconcile, so it is done (kstatus
    /// Current) while its nodes are reported, not ready, in the counts.
    pub const OBSERVED_NODES_NOT_READY: &str = "ObservedNodesNotReady";

    // Evidence beyond GFD labels (docs/evidence.md names what triggers each).
    /// DRA expected but the node has no `gpu.nvidia.com` ResourceSlice.
    pub const NO_RESOURCE_SLICE: &str = "NoResourceSlice";
    /// The newest pool generation is not fully published yet (or is being replaced).
    pub const RESOURCE_POOL_INCOMPLETE: &str = "ResourcePoolIncomplete";
    /// Enough devices are published, but NoSchedule/NoExecute device taints leave too few usable.
    pub const DEVICES_TAINTED: &str = "DevicesTainted";
    /// DRA expected but ResourceSlices could not be read (API not served, not watched).
    pub const DRA_EVIDENCE_UNAVAILABLE: &str = "DraEvidenceUnavailable";
    /// The DRA driver's health monitor tainted devices `gpu.nvidia.com/gpu-lost`:
    /// a GPU fell off the bus.
    pub const GPU_LOST: &str = "GpuLost";
    /// Ready under DRA, but the driver's health monitor could not watch some
    /// devices (`gpu.nvidia.com/unmonitored`): their XIDs go unseen.
    pub const DEVICES_UNMONITORED: &str = "DevicesUnmonitored";
    /// MIG geometry (`spec.mig`): mig-manager has not applied the config yet
    /// (`nvidia.com/mig.config.state=pending`).
    pub const MIG_CONFIG_PENDING: &str = "MigConfigPending";
    /// `nvidia.com/mig.config.state=rebooting`: mig-manager reboots the node to apply it.
    pub const MIG_CONFIG_REBOOTING: &str = "MigConfigRebooting";
    /// `nvidia.com/mig.config.state=failed`: mig-manager could not apply the config.
    pub const MIG_CONFIG_FAILED: &str = "MigConfigFailed";
    /// No `nvidia.com/mig.config.state`, or a value mig-manager does not write.
    pub const MIG_CONFIG_STATE_UNKNOWN: &str = "MigConfigStateUnknown";
    /// `nvidia.com/mig.config` names another configuration than the profile's `mig.config`.
    pub const MIG_CONFIG_MISMATCH: &str = "MigConfigMismatch";
    /// Fewer MIG devices of a profile than `mig.devices` needs.
    pub const MIG_DEVICES_MISSING: &str = "MigDevicesMissing";
    /// GFD's single MIG strategy labels the node `<model>-MIG-INVALID`: its MIG
    /// layout does not fit the strategy, so no device is advertised.
    pub const MIG_STRATEGY_INVALID: &str = "MigStrategyInvalid";
    /// A profile without `mig` (full GPUs) governs a node whose GPUs GFD's
    /// single strategy shows partitioned into MIG devices.
    pub const MIG_PARTITIONED: &str = "MigPartitioned";
    /// Device gating: fewer ready GPUs remain than `deviceGating.minReadyGpus`
    /// once gpuready's DeviceTaintRules took the bad devices out.
    pub const TOO_FEW_READY_DEVICES: &str = "TooFewReadyDevices";
    /// Device gating with `escalation.extendedResourcePods: TaintNode`: pods
    /// hold a device escalated to `NoExecute` as a DRA-backed extended
    /// resource, which Kubernetes does not evict (kubernetes #141290), so the
    /// node's taint escalates to `NoExecute` instead.
    pub const EXTENDED_RESOURCE_PODS_NOT_EVICTED: &str = "ExtendedResourcePodsNotEvicted";
    /// A GPU attribute the profile needs is not in the node's ResourceSlices.
    pub const DRA_ATTRIBUTE_MISSING: &str = "DraAttributeMissing";
    /// Ready under DRA: the pool's usable devices cover what the profile needs.
    pub const DRA_DEVICES_AVAILABLE: &str = "DraDevicesAvailable";
    /// Ready: GPU attributes come from ResourceSlices instead of GFD labels.
    pub const DRA_ATTRIBUTES: &str = "DraAttributes";
    /// `gpu.maxGpusPerNumaNode`: a NUMA node holds more GPUs than the profile
    /// allows (a BIOS NUMA setting that collapsed the topology, say).
    pub const TOO_MANY_GPUS_PER_NUMA_NODE: &str = "TooManyGpusPerNumaNode";
    /// NFD's PCI scan shows more NVIDIA GPUs than the stack advertises.
    pub const GPU_NOT_ADVERTISED: &str = "GpuNotAdvertised";
    /// The stack advertises more GPUs than NFD's PCI scan finds (a GPU fell off the bus).
    pub const GPU_MISSING_FROM_BUS: &str = "GpuMissingFromBus";
    /// Ready (Hardware): the DRA driver publishes GPUs for the node.
    pub const SEEN_BY_DRA_DRIVER: &str = "SeenByDraDriver";
    /// Ready (Hardware): NFD's NodeFeature lists NVIDIA GPUs on the PCI bus.
    pub const NVIDIA_GPUS_ON_BUS: &str = "NvidiaGpusOnBus";
    /// GFD runs in vfio mode (compute capability -1, driver `unknown`) on a node
    /// judged as a container node.
    pub const GFD_VFIO_MODE: &str = "GfdVfioMode";
    /// `nvidia.com/gpu.workload.config` names another workload than the profile serves.
    pub const WORKLOAD_MISMATCH: &str = "WorkloadMismatch";
    /// vm-passthrough / vm-vgpu node: no sandbox device plugin resource is advertised.
    pub const SANDBOX_RESOURCE_MISSING: &str = "SandboxResourceMissing";
    /// Ready: sandbox device plugin resources cover what the profile needs.
    pub const SANDBOX_RESOURCES: &str = "SandboxResources";
    /// Ready: a layer that only applies to container workloads, on a VM-workload node.
    pub const NOT_APPLICABLE_TO_WORKLOAD: &str = "NotApplicableToWorkload";
    /// vGPU guest whose driver branch differs from the host's vGPU manager branch.
    pub const VGPU_BRANCH_MISMATCH: &str = "VgpuBranchMismatch";
    /// GpuReady reason once a node is not ready for longer than `notReadyDeadline`.
    pub const NOT_READY_DEADLINE_EXCEEDED: &str = "NotReadyDeadlineExceeded";
}

/// The NVIDIA DRA driver's ResourceSlices (`resource.k8s.io/v1`).
pub mod dra {
    /// `spec.driver` of the GPU kubelet plugin.
    pub const DRIVER: &str = "gpu.nvidia.com";
    pub const API_GROUP: &str = "resource.k8s.io";
    pub const API_VERSION: &str = "v1";
    pub const KIND: &str = "ResourceSlice";
    pub const PLURAL: &str = "resourceslices";
    pub const ATTR_TYPE: &str = "type";
    pub const ATTR_UUID: &str = "uuid";
    pub const ATTR_PARENT_UUID: &str = "parentUUID";
    pub const ATTR_PRODUCT: &str = "productName";
    pub const ATTR_ARCHITECTURE: &str = "architecture";
    pub const ATTR_COMPUTE: &str = "cudaComputeCapability";
    pub const ATTR_DRIVER: &str = "driverVersion";
    pub const ATTR_CUDA_DRIVER: &str = "cudaDriverVersion";
    pub const ATTR_PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";
    /// Kubernetes' standard NUMA attribute (stable in 1.37): an `int`, or an
    /// `ints` list when the driver's `DRAListTypeAttributes` gate is on.
    pub const ATTR_NUMA_NODE: &str = "resource.kubernetes.io/numaNode";
    /// The DRA driver v0.4.x's own NUMA attribute on VFIO devices (an `int`),
    /// before it moved to [`ATTR_NUMA_NODE`].
    pub const ATTR_NUMA_LEGACY: &str = "numa";
    /// MIG devices: the nvidia-smi profile name, e.g. `1g.18gb`.
    pub const ATTR_MIG_PROFILE: &str = "profile";
    /// The driver's health monitor: an XID (value = the XID; `NoSchedule`
    /// when fatal, `None` for the ignored application XIDs).
    pub const TAINT_XID: &str = "gpu.nvidia.com/xid";
    /// The driver's health monitor: the GPU fell off the bus (`NoSchedule`, on every device).
    pub const TAINT_GPU_LOST: &str = "gpu.nvidia.com/gpu-lost";
    /// The driver's health monitor could not register for the device's events (`None`).
    pub const TAINT_UNMONITORED: &str = "gpu.nvidia.com/unmonitored";
    pub const CAPACITY_MEMORY: &str = "memory";
    pub const TYPE_GPU: &str = "gpu";
    pub const TYPE_MIG: &str = "mig";
    pub const TYPE_VFIO: &str = "vfio";
    /// `ResourceClaim`: read for the claims the scheduler makes for DRA-backed
    /// extended resources (KEP-5004), which the device taint eviction
    /// controller does not evict (kubernetes #141290).
    pub const CLAIM_KIND: &str = "ResourceClaim";
    pub const CLAIM_PLURAL: &str = "resourceclaims";
    /// On the claim the scheduler makes for a pod's DRA-backed extended
    /// resources; its one valid value is `"true"` (k8s.io/api `resource/v1`
    /// `ExtendedResourceClaimAnnotation`).
    pub const ANNOTATION_EXTENDED_RESOURCE_CLAIM: &str =
        "resource.kubernetes.io/extended-resource-claim";
}

/// gpuready's own `resource.k8s.io/v1` DeviceTaintRules: one per bad device
/// of a profile with `deviceGating` (docs/taints.md, "Per-device gating").
pub mod device_rules {
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
}

/// The Fabric layer's reasons (docs/fabric.md).
pub mod fabric {
    /// Ready: the node is in an expected clique and every GPU registered.
    pub const FABRIC_READY: &str = "FabricReady";
    /// No `nvidia.com/gpu.clique` label.
    pub const CLIQUE_LABEL_MISSING: &str = "CliqueLabelMissing";
    /// The label is not `<cluster UUID>.<clique ID>`.
    pub const CLIQUE_LABEL_MALFORMED: &str = "CliqueLabelMalformed";
    /// The node's clique is not one of `fabric.cliques`.
    pub const UNEXPECTED_CLIQUE: &str = "UnexpectedClique";
    /// A GPU's NVML fabric clique or cluster differs from the label.
    pub const CLIQUE_MISMATCH: &str = "CliqueMismatch";
    /// A GPU's fabric registration is not completed, or completed with an error.
    pub const FABRIC_REGISTRATION_INCOMPLETE: &str = "FabricRegistrationIncomplete";
    /// NVML reports no fabric for a GPU of a node the profile wants on one.
    pub const GPU_NOT_ON_FABRIC: &str = "GpuNotOnFabric";
    /// No probe report to read the per-GPU fabric state from.
    pub const FABRIC_STATE_UNREAD: &str = "FabricStateUnread";
    /// The driver is older than IMEX needs (`fabric.minDriverVersion`).
    pub const DRIVER_TOO_OLD_FOR_IMEX: &str = "DriverTooOldForImex";
    /// The node lacks the label `fabric.groupByLabel` names.
    pub const GROUP_LABEL_MISSING: &str = "GroupLabelMissing";
    /// The node's clique is not its group's majority clique (or there is none).
    pub const CLIQUE_SPLIT: &str = "CliqueSplit";
    /// The other nodes of the group were not read.
    pub const CLIQUE_GROUP_UNREAD: &str = "CliqueGroupUnread";
    /// A ComputeDomainClique lists the node in another clique than its label's.
    pub const COMPUTE_DOMAIN_CLIQUE_MISMATCH: &str = "ComputeDomainCliqueMismatch";
    /// A ComputeDomainClique lists the node's IMEX daemon `NotReady`.
    pub const IMEX_DAEMON_NOT_READY: &str = "ImexDaemonNotReady";
    /// `computeDomainCliques: Require` and no ComputeDomainClique lists the node.
    pub const NOT_IN_COMPUTE_DOMAIN: &str = "NotInComputeDomain";
    /// ComputeDomainCliques are not served or not readable.
    pub const COMPUTE_DOMAIN_CLIQUES_UNREAD: &str = "ComputeDomainCliquesUnread";
    /// `imexMode: DriverManaged` and the host's `nvidia-imex.service` is enabled.
    pub const IMEX_SERVICE_CONFLICTS: &str = "ImexServiceConflicts";
    /// `imexMode: HostManaged` and the host's IMEX is not installed or masked.
    pub const IMEX_SERVICE_MISSING: &str = "ImexServiceMissing";
    /// `imexMode: HostManaged` and the config lacks `IMEX_CMD_ENABLED=1` or
    /// `IMEX_CMD_UNIX_DOMAIN_PATH`.
    pub const IMEX_CONFIG_INCOMPLETE: &str = "ImexConfigIncomplete";
    /// `imexMode: HostManaged` and no control socket where the config says.
    pub const IMEX_SOCKET_MISSING: &str = "ImexSocketMissing";
    /// The probe report says nothing of the host's IMEX files, or could not
    /// read them.
    pub const IMEX_STATE_UNREAD: &str = "ImexStateUnread";
    /// NVML's GPU recovery action is RECOVER_IMEX_DOMAIN on a GPU of the node:
    /// its IMEX domain needs recovery (judged here, never by Health).
    pub const IMEX_DOMAIN_RECOVERY_REQUIRED: &str = "ImexDomainRecoveryRequired";
}

/// The NVIDIA DRA driver's ComputeDomainCliques (`compute_domain.rs`).
pub mod compute_domains {
    pub const API_GROUP: &str = "resource.nvidia.com";
    pub const API_VERSION: &str = "v1beta1";
    pub const KIND: &str = "ComputeDomainClique";
    pub const PLURAL: &str = "computedomaincliques";
    /// The ComputeDomain's UID, on each clique object.
    pub const LABEL_COMPUTE_DOMAIN: &str = "resource.nvidia.com/computeDomain";
    /// A daemon's `status` while its IMEX daemon can broker memory exchanges.
    pub const STATUS_READY: &str = "Ready";
}

/// Outside Node conditions the External layer's presets read (docs/external.md
/// names the document each comes from), and the External layer's reasons.
pub mod external {
    use crate::condition::BrokenWhen;

    /// Amazon EKS node monitoring agent (aws/eks-node-monitoring-agent,
    /// `docs/node-health-issues.adoc`; EKS user guide "Detect node health
    /// issues with the EKS node monitoring agent"): `True` while healthy.
    pub const EKS: &[(&str, BrokenWhen)] = &[("AcceleratedHardwareReady", BrokenWhen::False)];
    /// AKS node-problem-detector (MicrosoftDocs/azure-aks-docs
    /// `articles/aks/node-problem-detector.md`, "GPU only" rows, and
    /// `aks-managed-gpu-nodes.md`): `True` names the problem.
    pub const AKS: &[(&str, BrokenWhen)] = &[
        ("GPUMissing", BrokenWhen::True),
        ("XIDErrors", BrokenWhen::True),
        ("NVLinkStatusInactive", BrokenWhen::True),
        ("UnhealthyNvidiaDevicePlugin", BrokenWhen::True),
        ("UnhealthyNvidiaDCGMServices", BrokenWhen::True),
    ];
    /// Nebius Managed Kubernetes (docs.nebius.com, "Health checks and automatic
    /// recovery of Managed Service for Kubernetes nodes"): `False` when every
    /// GPU health check passed.
    pub const NEBIUS: &[(&str, BrokenWhen)] = &[("NebiusGPUError", BrokenWhen::True)];
    /// Meta GCM health checks under node-problem-detector (GCM docs,
    /// "Kubernetes Deployment", default health checks).
    pub const META_GCM: &[(&str, BrokenWhen)] = &[
        ("GcmXidErrorsProblem", BrokenWhen::True),
        ("GcmSmiEccProblem", BrokenWhen::True),
        ("GcmSmiDisconnectedProblem", BrokenWhen::True),
        ("GcmProcZombieProblem", BrokenWhen::True),
        ("GcmDcgmiNvlinkStatusProblem", BrokenWhen::True),
        ("GcmDcgmiDiagProblem", BrokenWhen::True),
    ];
    /// GKE's GPU device plugin (GoogleCloudPlatform/container-engine-accelerators
    /// `pkg/gpu/nvidia/health_check/health_checker.go`, PR #497 and #516):
    /// added `True` when a critical XID is seen, its reason a JSON object of
    /// the XIDs (`{"48":true,"79":true}`), its message the node's boot ID;
    /// removed once the node has rebooted. Absent on a healthy node.
    pub const GKE: &[(&str, BrokenWhen)] = &[(GKE_XID_CRITICAL_ERROR, BrokenWhen::True)];
    /// The condition type of [`GKE`].
    pub const GKE_XID_CRITICAL_ERROR: &str = "XidCriticalError";
    /// node-problem-detector's permanent node conditions that GPU remediation
    /// treats as fatal (kubernetes/node-problem-detector `config/kernel-monitor.json`
    /// and `config/readonly-monitor.json`; NVSentinel's opt-in
    /// `values-npd-remediation.yaml` replaces the node on the last three):
    /// `False` from NPD's start while healthy, `True` names the fault.
    pub const NPD: &[(&str, BrokenWhen)] = &[
        ("KernelDeadlock", BrokenWhen::True),
        ("ReadonlyFilesystem", BrokenWhen::True),
        ("XfsShutdown", BrokenWhen::True),
        ("CperHardwareErrorFatal", BrokenWhen::True),
    ];

    /// Ready: every outside condition read says healthy.
    pub const HEALTHY: &str = "ExternalSignalsHealthy";
    /// NotReady: an outside judge calls the node broken.
    pub const BROKEN: &str = "ExternalSignalBroken";
    /// Unknown: a condition's heartbeat is older than `maxHeartbeatAgeSeconds`.
    pub const STALE: &str = "ExternalSignalStale";
    /// Unknown: a condition reads `Unknown` (its agent cannot tell).
    pub const UNKNOWN: &str = "ExternalSignalUnknown";
    /// Unknown or NotReady (`whenMissing`): a named condition is not on the node.
    pub const MISSING: &str = "ExternalSignalMissing";
}

/// The node's lifecycle beside its layers (docs/operations.md, "Lifecycle"):
/// the labels the NVIDIA GPU operator, its driver manager and mig-manager
/// write while they change a node, the taints other readiness gates hold, the
/// repair annotation an operator writes, and the reasons gpuready gives each.
/// gpuready only reads these labels and taints; it never writes them.
pub mod lifecycle {
    /// k8s-operator-libs' upgrade controller (GPU operator v26.7.0): where a
    /// node is in a driver upgrade, one of [`UPGRADE_STATES`].
    pub const DRIVER_UPGRADE_STATE: &str = "nvidia.com/gpu-driver-upgrade-state";
    /// The 12 values of [`DRIVER_UPGRADE_STATE`], in the order the upgrade
    /// controller moves a node through them (`consts.go` of k8s-operator-libs).
    pub const UPGRADE_STATES: [&str; 12] = [
        UPGRADE_REQUIRED,
        "cordon-required",
        "wait-for-jobs-required",
        "pod-deletion-required",
        "drain-required",
        "node-maintenance-required",
        "post-maintenance-required",
        "pod-restart-required",
        "validation-required",
        "uncordon-required",
        UPGRADE_DONE,
        UPGRADE_FAILED,
    ];
    /// Queued for an upgrade: "no actions are performed at this stage" (the
    /// node still serves; the controller picks it when a slot of the wave frees).
    pub const UPGRADE_REQUIRED: &str = "upgrade-required";
    pub const UPGRADE_DONE: &str = "upgrade-done";
    pub const UPGRADE_FAILED: &str = "upgrade-failed";
    /// `nvidia.com/gpu.deploy.<operand>`: whether the GPU operator deploys an operand.
    pub const DEPLOY_LABEL_PREFIX: &str = "nvidia.com/gpu.deploy.";
    /// GPU operator v26.7.0 (`controllers/state_manager.go`, PR #2607): `true`
    /// on every GPU node it manages, for third-party GPU clients such as
    /// gpuready's probe. k8s-driver-manager v0.12.0 sets it to
    /// [`PAUSED_FOR_DRIVER_UPGRADE`] before unloading the driver, mig-manager
    /// v0.15.0 to [`PAUSED_FOR_MIG_CHANGE`] while it re-partitions, and both
    /// set it back to `true` after. The chart's probe requires it absent or
    /// `true` (docs/probe.md, "Maintenance").
    pub const DEPLOY_CLIENT: &str = "nvidia.com/gpu.deploy.client";
    /// The driver manager evicted the operand for a driver upgrade.
    pub const PAUSED_FOR_DRIVER_UPGRADE: &str = "paused-for-driver-upgrade";
    /// mig-manager evicted the operand while it re-partitions the GPUs.
    pub const PAUSED_FOR_MIG_CHANGE: &str = "paused-for-mig-change";
    /// Values of `nvidia.com/mig.config.state` (mig-parted `reconfigure.go`).
    pub const MIG_PENDING: &str = "pending";
    pub const MIG_REBOOTING: &str = "rebooting";
    pub const MIG_FAILED: &str = "failed";
    /// NVIDIA NodeWright's startup taint (v0.18.0 and later), removed once
    /// every runtime-required package is applied.
    pub const NODEWRIGHT_TAINT: &str = "nodewright.nvidia.com";
    /// The same taint under NodeWright's former name, Skyhook (still accepted).
    pub const SKYHOOK_TAINT: &str = "skyhook.nvidia.com";
    /// The prefix readiness controllers share (node-readiness-controller rules,
    /// gpuready's own default): every key there that is not gpuready's belongs
    /// to another gate.
    pub const READINESS_TAINT_PREFIX: &str = "readiness.k8s.io/";
    /// NVSentinel's fault-handling state (NVIDIA/NVSentinel
    /// `commons/pkg/statemanager/statemanager.go`): absent on a healthy node,
    /// else one of [`NVSENTINEL_STATES`] while it quarantines (cordons),
    /// drains and remediates the node.
    pub const NVSENTINEL_STATE: &str = "dgxc.nvidia.com/nvsentinel-state";
    /// The values of [`NVSENTINEL_STATE`], in the order NVSentinel moves a
    /// node through them; `drain-failed` and `remediation-failed` are terminal.
    pub const NVSENTINEL_STATES: [&str; 7] = [
        "quarantined",
        "draining",
        "drain-succeeded",
        "drain-failed",
        "remediating",
        "remediation-succeeded",
        "remediation-failed",
    ];
    /// NVSentinel's release taint (ADR-040, NVIDIA/NVSentinel PR #1316): the
    /// node is handed to an external remediation system; the value is the
    /// ExternalRemediationRequest's name.
    pub const NVSENTINEL_EXTERNAL_REMEDIATION_TAINT: &str =
        "nvsentinel.nvidia.com/external-remediation";
    /// NodeWright's persistent cordon (`runtimeRequiredCordonAfter`,
    /// NVIDIA/nodewright PR #401, `docs/runtime_required.md`): set with the
    /// cordon when the runtime-required taint comes off; an outside validator
    /// releases the node by removing it and uncordoning in one patch.
    pub const NODEWRIGHT_RUNTIME_REQUIRED_CORDON: &str =
        "nodewright.nvidia.com/runtimeRequiredCordon";
    /// NodeWright's cordon ownership, one annotation per NodeWright whose
    /// interrupt holds the node (`cordon_<name>`; NodeWright
    /// `docs/architecture/interrupt-flow.md`).
    pub const NODEWRIGHT_CORDON_PREFIX: &str = "nodewright.nvidia.com/cordon_";
    /// The same under NodeWright's former name, Skyhook
    /// (`operator/internal/wrapper/node.go`).
    pub const SKYHOOK_CORDON_PREFIX: &str = "skyhook.nvidia.com/cordon_";
    /// Written by an operator, never by gpuready: when the node's GPUs were
    /// repaired, as an RFC 3339 time (every GPU) or a JSON object of GPU UUID
    /// to RFC 3339 time. Faults recorded before it no longer count.
    pub const ANNOTATION_REPAIRED_AT: &str = "gpuready.io/repaired-at";

    /// GpuReady reason: a driver upgrade is taking the node through its steps.
    pub const DRIVER_UPGRADE_IN_PROGRESS: &str = "DriverUpgradeInProgress";
    /// GpuReady reason: the upgrade controller gave up (`upgrade-failed`).
    pub const DRIVER_UPGRADE_FAILED: &str = "DriverUpgradeFailed";
    /// GpuReady reason: mig-manager re-partitions the GPUs (`pending`, `rebooting`).
    pub const MIG_RECONFIGURING: &str = "MigReconfiguring";
    /// GpuReady reason: GPU operator operands are paused (`paused-for-*`)
    /// without an upgrade or MIG state that explains it.
    pub const OPERANDS_PAUSED: &str = "OperandsPaused";
    /// GpuReady reason: maintenance lasted longer than `maintenance.deadlineSeconds`.
    pub const MAINTENANCE_STUCK: &str = "MaintenanceStuck";
    /// GpuReady reason: the GPU stack is ready, another readiness gate holds the node.
    pub const WAITING_FOR_GATE: &str = "WaitingForGate";
    /// Profile `Ready=True` reason while nodes are in maintenance (and none fails).
    pub const NODES_IN_MAINTENANCE: &str = "NodesInMaintenance";
    /// Profile `Ready=True` reason while nodes wait for other gates (and none fails).
    pub const NODES_WAITING_FOR_GATE: &str = "NodesWaitingForGate";
    /// Node Event: the repair annotation was refused (the note says why).
    pub const EVENT_REPAIR_REFUSED: &str = "RepairRefused";
}

/// Reasons of the Health layer (and of [`CONDITION_PROBE_HEALTHY`]), judged on
/// the report of `gpuready probe`. docs/probe.md says what each means and what
/// to do.
pub mod health_reasons {
    /// Ready: NVML answers and nothing in the report is wrong.
    pub const PROBE_HEALTHY: &str = "ProbeHealthy";
    /// No report for the node while the profile requires one.
    pub const PROBE_MISSING: &str = "ProbeMissing";
    /// The report is older than `probe.maxReportAgeSeconds`: the probe stopped.
    pub const PROBE_REPORT_STALE: &str = "ProbeReportStale";
    /// The carrier holds something that is not a report this gpuready reads.
    pub const PROBE_REPORT_INVALID: &str = "ProbeReportInvalid";
    /// Unknown: the probe released the GPUs because its node is in maintenance
    /// (a driver upgrade, a MIG change, GPU clients paused); also while a
    /// paused report outlives the maintenance, until it is fresh no more.
    pub const PROBE_PAUSED: &str = "ProbePausedForMaintenance";
    /// NVML could not be loaded or initialised inside the probe's container.
    pub const NVML_UNUSABLE: &str = "NvmlUnusable";
    /// NVML sees fewer GPUs than the profile or the node's labels say.
    pub const GPUS_MISSING: &str = "GpusMissing";
    /// Volatile uncorrectable ECC errors since the driver loaded.
    pub const UNCORRECTABLE_ECC: &str = "UncorrectableEccErrors";
    /// A row remapping (or page retirement) waits for a GPU reset.
    pub const ROW_REMAP_PENDING: &str = "RowRemapPending";
    /// Row remapping failed: no spare rows left.
    pub const ROW_REMAP_FAILED: &str = "RowRemapFailed";
    /// An XID from the profile's fatal list was seen since the probe started.
    pub const FATAL_XID: &str = "FatalXid";
    /// GFD's labels contradict NVML (product, memory, compute capability, driver).
    pub const LABELS_CONTRADICT_PROBE: &str = "LabelsContradictProbe";
    /// A device node a container needs (`/dev/nvidiactl`, `/dev/nvidia-uvm`,
    /// `/dev/nvidia-uvm-tools`, `/dev/nvidia<N>`) is missing in the probe's container.
    pub const DEVICE_NODE_MISSING: &str = "DeviceNodeMissing";
    /// A GPU's NVSwitch fabric registration is not completed, or failed.
    pub const FABRIC_NOT_READY: &str = "FabricNotReady";
    /// The CUDA driver API could not be loaded or `cuInit` failed (by CUDA error name).
    pub const CUDA_INIT_FAILED: &str = "CudaInitFailed";
    /// A GPU returned wrong data in the compute check (copy or kernel result).
    pub const COMPUTE_MISMATCH: &str = "ComputeMismatch";
    /// A CUDA call of the compute check failed on a GPU (context, allocation, copy, launch).
    pub const COMPUTE_CHECK_FAILED: &str = "ComputeCheckFailed";
    /// No compute check has run: it was skipped (GPUs busy, exclusive mode, MIG).
    pub const COMPUTE_CHECK_SKIPPED: &str = "ComputeCheckSkipped";
    /// The latest compute check ran on another stack or too long ago.
    pub const COMPUTE_CHECK_STALE: &str = "ComputeCheckStale";
    /// NVML's GPU recovery action is GPU_RESET.
    pub const GPU_RESET_REQUIRED: &str = "GpuResetRequired";
    /// NVML's GPU recovery action is NODE_REBOOT.
    pub const NODE_REBOOT_REQUIRED: &str = "NodeRebootRequired";
    /// NVML's GPU recovery action is DRAIN_P2P (quiesce peer-to-peer traffic).
    pub const DRAIN_REQUIRED: &str = "DrainRequired";
    /// NVML's GPU recovery action is DRAIN_AND_RESET (reduced capacity).
    pub const DRAIN_AND_RESET_REQUIRED: &str = "DrainAndResetRequired";
    /// NVML's GPU recovery action is BUS_RESET (reset the GPU's PCIe bus).
    pub const BUS_RESET_REQUIRED: &str = "BusResetRequired";
    /// NVML's GPU recovery action is SYSTEM_REBOOT (reboot the system).
    pub const SYSTEM_REBOOT_REQUIRED: &str = "SystemRebootRequired";
    /// NVML's GPU recovery action is a value this gpuready does not know.
    pub const RECOVERY_ACTION_REQUIRED: &str = "RecoveryActionRequired";
}

/// Reasons of the [`CONDITION_NFD_CRDS`] profile condition. True means the NFD
/// CRDs are fine for NFD and gpuready as they are (current, just installed or
/// upgraded, or newer than gpuready's and left alone); False means something
/// needs a person (Check mode would change them, an apply failed).
pub mod nfd_crd_reasons {
    /// True: the installed CRDs match the set gpuready carries.
    pub const CURRENT: &str = "Current";
    /// True: gpuready created the missing CRDs.
    pub const INSTALLED: &str = "Installed";
    /// True: gpuready upgraded older CRDs (and created missing ones).
    pub const UPGRADED: &str = "Upgraded";
    /// True: some CRDs are newer than gpuready's and were left alone.
    pub const NEWER_LEFT_ALONE: &str = "NewerLeftAlone";
    /// False: `--nfd-crds=check` and gpuready would create or upgrade some.
    pub const CHECK_ONLY_WOULD_CHANGE: &str = "CheckOnlyWouldChange";
    /// False: a CRD is missing and creating it failed.
    pub const MISSING: &str = "Missing";
    /// False: a CRD is older and upgrading it failed.
    pub const OUTDATED: &str = "Outdated";
    /// False: applied, but the CRD did not become Established in time.
    pub const NOT_ESTABLISHED: &str = "NotEstablished";
    /// False: applied, yet the API server's copy still differs from gpuready's;
    /// gpuready stops re-applying until the CRD changes.
    pub const APPLY_DID_NOT_CONVERGE: &str = "ApplyDidNotConverge";
    /// False: the CRDs could not be read.
    pub const READ_FAILED: &str = "ReadFailed";
}

/// Event reasons on Nodes and GpuNodeProfiles (the NFD CRD ones are in
/// [`nfd_crd_event_reasons`]).
pub mod event_reasons {
    /// Node: `GpuReady` turned True.
    pub const GPU_READY: &str = "GpuReady";
    /// Node: `GpuReady` turned False; the verdict's reason is appended.
    pub const GPU_NOT_READY_PREFIX: &str = "GpuNotReady";
    /// Profile: `Ready` turned True.
    pub const PROFILE_READY: &str = "ProfileReady";
    /// Profile: `Ready` turned False.
    pub const PROFILE_NOT_READY: &str = "ProfileNotReady";
    /// Profile: the safety brake engaged.
    pub const SAFETY_BRAKE_ENGAGED: &str = "SafetyBrakeEngaged";
    /// Profile: the safety brake released.
    pub const SAFETY_BRAKE_RELEASED: &str = "SafetyBrakeReleased";
    /// Profile: escalations to `NoExecute` started to be held back (the
    /// safety brake, or the `NoExecute` budget).
    pub const NO_EXECUTE_HELD: &str = "NoExecuteHeld";
    /// Node: gpuready wrote a DeviceTaintRule for one of its devices.
    pub const DEVICE_TAINTED: &str = "DeviceTainted";
    /// Node: gpuready deleted its DeviceTaintRule of a device (recovered, or
    /// no longer gated by a profile).
    pub const DEVICE_TAINT_REMOVED: &str = "DeviceTaintRemoved";
    /// Node: the API server refused gpuready's write to it (the reason is in
    /// the note).
    pub const WRITE_REFUSED: &str = "WriteRefused";
    /// Profile: a burst spent the profile's per-node Event budget; the note
    /// counts the node Events not posted, by reason.
    pub const NODE_EVENTS_HELD: &str = "NodeEventsHeld";
}

/// Event reasons on GpuNodeProfiles when gpuready changes the NFD CRDs, fails
/// to, or (check mode) finds that it would (the condition's reasons are in
/// [`nfd_crd_reasons`]).
pub mod nfd_crd_event_reasons {
    pub const INSTALLED: &str = "NfdCrdsInstalled";
    pub const UPGRADED: &str = "NfdCrdsUpgraded";
    pub const WOULD_CHANGE: &str = "NfdCrdsWouldChange";
    pub const APPLY_FAILED: &str = "NfdCrdsApplyFailed";
}

/// Reasons of the [`CONDITION_SAFETY_BRAKE`] profile condition.
pub mod brake_reasons {
    /// True: too many nodes turned not-ready at once; new taints are held back.
    pub const TOO_MANY_NODES_TURNED_NOT_READY: &str = "TooManyNodesTurnedNotReady";
    /// False: taints are applied normally.
    pub const RELEASED: &str = "Released";
}

/// Labels published by GPU Feature Discovery, the GPU operator and the device plugin.
pub mod nvidia {
    pub const GPU_PRESENT: &str = "nvidia.com/gpu.present";
    pub const GPU_PRODUCT: &str = "nvidia.com/gpu.product";
    pub const GPU_MEMORY: &str = "nvidia.com/gpu.memory";
    pub const GPU_COUNT: &str = "nvidia.com/gpu.count";
    pub const GPU_FAMILY: &str = "nvidia.com/gpu.family";
    /// GFD: the NVLink clique of the node's fabric-attached GPUs,
    /// `<cluster UUID>.<clique ID>` (only when they all agree).
    pub const GPU_CLIQUE: &str = "nvidia.com/gpu.clique";
    pub const GPU_COMPUTE_MAJOR: &str = "nvidia.com/gpu.compute.major";
    pub const GPU_COMPUTE_MINOR: &str = "nvidia.com/gpu.compute.minor";
    pub const GPU_REPLICAS: &str = "nvidia.com/gpu.replicas";
    pub const GFD_TIMESTAMP: &str = "nvidia.com/gfd.timestamp";
    pub const MIG_STRATEGY: &str = "nvidia.com/mig.strategy";
    pub const DRIVER_FULL: &str = "nvidia.com/cuda.driver-version.full";
    pub const DRIVER_MAJOR: &str = "nvidia.com/cuda.driver-version.major";
    pub const DRIVER_MINOR: &str = "nvidia.com/cuda.driver-version.minor";
    pub const DRIVER_REVISION: &str = "nvidia.com/cuda.driver-version.revision";
    pub const DRIVER_MAJOR_OLD: &str = "nvidia.com/cuda.driver.major";
    pub const DRIVER_MINOR_OLD: &str = "nvidia.com/cuda.driver.minor";
    pub const DRIVER_REV_OLD: &str = "nvidia.com/cuda.driver.rev";
    pub const RUNTIME_FULL: &str = "nvidia.com/cuda.runtime-version.full";
    pub const RUNTIME_MAJOR: &str = "nvidia.com/cuda.runtime-version.major";
    pub const RUNTIME_MINOR: &str = "nvidia.com/cuda.runtime-version.minor";
    pub const RUNTIME_MAJOR_OLD: &str = "nvidia.com/cuda.runtime.major";
    pub const RUNTIME_MINOR_OLD: &str = "nvidia.com/cuda.runtime.minor";
    /// Default extended resource of the device plugin.
    pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
    /// The GPU operator's per-node workload: `container`, `vm-passthrough`, `vm-vgpu`.
    pub const WORKLOAD_CONFIG: &str = "nvidia.com/gpu.workload.config";
    /// GFD inside a vGPU guest: `true` when the GPU is a vGPU.
    pub const VGPU_PRESENT: &str = "nvidia.com/vgpu.present";
    /// GFD inside a vGPU guest: the host vGPU manager's branch, e.g. `r550_40`.
    pub const VGPU_HOST_BRANCH: &str = "nvidia.com/vgpu.host-driver-branch";
    /// GFD inside a vGPU guest: the host vGPU manager's version, e.g. `550.54.16`.
    pub const VGPU_HOST_VERSION: &str = "nvidia.com/vgpu.host-driver-version";
    /// Prefix of MIG extended resources under the `mixed` strategy.
    pub const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";
    /// mig-manager: the MIG configuration the node should have (`all-1g.18gb`).
    pub const MIG_CONFIG: &str = "nvidia.com/mig.config";
    /// mig-manager: `pending`, `rebooting`, `success` or `failed`.
    pub const MIG_CONFIG_STATE: &str = "nvidia.com/mig.config.state";
    /// GFD, mixed strategy: `nvidia.com/mig-<profile>.count` (`+` written `.`).
    pub const MIG_LABEL_PREFIX: &str = "nvidia.com/mig-";
    pub const MIG_COUNT_SUFFIX: &str = ".count";
}

/// Labels published by Node Feature Discovery.
pub mod nfd {
    pub const LABEL_PREFIX: &str = "feature.node.kubernetes.io/";
    pub const PCI_PREFIX: &str = "feature.node.kubernetes.io/pci-";
    pub const PCI_SUFFIX: &str = ".present";
    pub const NVIDIA_VENDOR: &str = "10de";
    /// Label naming the node a NodeFeature object describes.
    pub const NODE_NAME_LABEL: &str = "nfd.node.kubernetes.io/node-name";
    /// NodeFeature instance set of PCI devices (attributes `class`, `vendor`, `device`).
    pub const PCI_DEVICE_FEATURE: &str = "pci.device";
    /// PCI classes of GPUs: VGA-compatible (0300) and 3D controller (0302).
    pub const GPU_PCI_CLASSES: [&str; 2] = ["0300", "0302"];
}
