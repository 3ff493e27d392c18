//! The profile's `fabric` block: what multi-node NVLink readiness (IMEX, cliques,
//! ComputeDomainCliques) requires of a node.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::health::ProbePolicy;

/// What multi-node NVLink readiness requires of a node.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.imexMode) || self.imexMode != 'HostManaged' || !has(self.computeDomainCliques) || self.computeDomainCliques == 'Ignore'").message("fabric.computeDomainCliques must be Ignore with fabric.imexMode HostManaged: the DRA driver writes no ComputeDomainCliques in host-managed IMEX mode, so every node would read Unknown"))]
pub struct FabricExpectation {
    /// The cliques the nodes must sit in, as GFD's `nvidia.com/gpu.clique`
    /// spells them: `<cluster UUID>.<clique ID>`. One entry makes every node
    /// of the profile one NVLink domain (a rack); empty: any well-formed clique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new("self.all(c, c.matches('^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\\\.[0-9]{1,10}$'))").message("fabric.cliques must be NVLink cliques as nvidia.com/gpu.clique spells them: <cluster UUID>.<clique ID>, e.g. 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"))]
    pub cliques: Vec<String>,

    /// Minimum driver for the fabric's IMEX daemons. Default `570.158.01`,
    /// what the NVIDIA DRA driver's ComputeDomains need (IMEX daemons with DNS
    /// names); none with `imexMode: HostManaged`, where the driver runs no
    /// IMEX daemon and checks no minimum.
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]{0,8}\\\\.(0|[1-9][0-9]{0,8})(\\\\.[0-9]{1,9})?$')").message("fabric.minDriverVersion must look like 570.158.01 (at most 9 digits a part, no leading zero in the first two)"))]
    #[schemars(length(max = 32))]
    pub min_driver_version: Option<String>,

    /// What a node without a probe report means for the per-GPU fabric state:
    /// `Unknown` (default: the clique label alone does not show that every GPU
    /// registered, GFD leaves a failed one out), `Blocking`, or `Ignore` (judge
    /// the label and the driver only; the message says so).
    #[serde(default = "default_unknown")]
    pub when_probe_missing: ProbePolicy,

    /// A node label naming the NVLink domain a node belongs to (a rack label,
    /// e.g. `example.com/nvl-rack`): every node of the profile sharing a value
    /// of it must sit in one clique. A node in a minority clique of its group
    /// is not ready (`CliqueSplit`); with no majority, every node of the group
    /// is (docs/fabric.md). Absent: nodes are not compared with each other.
    #[schemars(length(max = 317))]
    #[x_kube(validation = Rule::new("!format.qualifiedName().validate(self).hasValue()").message("fabric.groupByLabel must be a valid label key, like example.com/nvl-rack"))]
    pub group_by_label: Option<String>,

    /// The NVIDIA DRA driver's ComputeDomainCliques (`resource.nvidia.com/v1beta1`):
    /// `Ignore` (default: not read), `Check` (every entry naming the node must
    /// be in the node's clique with its IMEX daemon `Ready`; a node no
    /// ComputeDomain uses now is fine), or `Require` (as `Check`, and some
    /// ComputeDomainClique must list the node). Where the API is not served
    /// the layer is Unknown (`ComputeDomainCliquesUnread`).
    #[serde(default)]
    pub compute_domain_cliques: ComputeDomainCliquePolicy,

    /// Who runs the node's IMEX daemon, as the NVIDIA DRA driver is set up
    /// (its `imex.mode`): `DriverManaged` (the driver's default: the host's
    /// `nvidia-imex.service` must not be enabled) or `HostManaged` (it must be
    /// installed and running, with `IMEX_CMD_ENABLED=1` and its control
    /// socket). Judged from what the probe reads of the host's files (the
    /// chart's `probe.imex.enabled`); absent: not checked.
    // `default` says "optional" to schemars, which cannot see the Option
    // through `schema_with`.
    #[serde(default)]
    #[schemars(schema_with = "not_nullable::<ImexMode>")]
    pub imex_mode: Option<ImexMode>,
}

/// The schema of an optional enum without `nullable`: the API server checks a
/// null against `enum` too, so a nullable enum refuses `field: null`, where a
/// field that is not nullable has its null pruned (read as absent, like the
/// other optional fields' nulls).
fn not_nullable<T: JsonSchema>(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<T>()
}

/// Who runs a node's IMEX daemon (the NVIDIA DRA driver's `imex.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ImexMode {
    /// The DRA driver runs one per ComputeDomain; the host service must be
    /// disabled.
    DriverManaged,
    /// The host's `nvidia-imex.service` runs it; the driver only hands out
    /// channels.
    HostManaged,
}

/// How the Fabric layer reads the DRA driver's ComputeDomainCliques.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ComputeDomainCliquePolicy {
    /// Not read.
    #[default]
    Ignore,
    /// The entries naming the node must agree with its clique and be Ready.
    Check,
    /// As `Check`, and at least one ComputeDomainClique must list the node.
    Require,
}

fn default_unknown() -> ProbePolicy {
    ProbePolicy::Unknown
}
