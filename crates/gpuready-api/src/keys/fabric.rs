//! The Fabric layer's reasons (docs/fabric.md).

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
