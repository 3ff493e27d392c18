//! The NVIDIA DRA driver's `resource.nvidia.com/v1beta1` `ComputeDomainClique`:
//! one object per ComputeDomain and NVLink clique, in the driver's namespace,
//! named `<computeDomainUID>.<cliqueID>`, listing the IMEX daemon of every
//! node of the clique that the ComputeDomain uses (`daemons[]`: `nodeName`,
//! `ipAddress`, `cliqueID`, `index`, `status` `Ready`/`NotReady`). Read only:
//! the Fabric layer judges the entries naming a node.
//!
//! The shape is the driver's own (kubernetes-sigs/dra-driver-nvidia-gpu
//! v0.4.1, `api/nvidia.com/resource/v1beta1/computedomainclique.go`, and its
//! CRD `deployments/helm/dra-driver-nvidia-gpu/crds/
//! resource.nvidia.com_computedomaincliques.yaml`): `daemons` sits at the top
//! of the object, beside `metadata`, not under a `spec`. Hand-written, as the
//! driver publishes no Rust types; unknown fields are ignored so a newer
//! driver's object still parses. The [`kube::Resource`] impl is what kube's
//! `Api<ComputeDomainClique>` needs.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::keys::compute_domains as keys;

/// One ComputeDomainClique.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ComputeDomainClique {
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// A list-map keyed by `nodeName`: one entry per node.
    #[serde(default)]
    pub daemons: Vec<DaemonInfo>,
}

/// One node's IMEX daemon in the clique.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DaemonInfo {
    pub node_name: String,
    #[serde(default)]
    pub ip_address: String,
    /// The NVLink clique, as the node's `nvidia.com/gpu.clique` spells it:
    /// `<cluster UUID>.<clique ID>` (the driver's kubelet plugin builds it
    /// from NVML the way GFD does).
    #[serde(rename = "cliqueID", default)]
    pub clique_id: String,
    /// The daemon's DNS index within the clique ((cliqueID, index) is unique).
    #[serde(default)]
    pub index: i64,
    /// `Ready` while the IMEX daemon can broker GPU memory exchanges,
    /// `NotReady` otherwise (the CRD's default, so an older daemon that writes
    /// none reads `NotReady`).
    pub status: Option<String>,
}

impl DaemonInfo {
    pub fn is_ready(&self) -> bool {
        self.status.as_deref() == Some(keys::STATUS_READY)
    }
}

impl ComputeDomainClique {
    /// The ComputeDomain's UID: its label, else the name's part before the
    /// first `.` (`<computeDomainUID>.<cliqueID>`).
    pub fn compute_domain(&self) -> Option<&str> {
        self.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::LABEL_COMPUTE_DOMAIN))
            .map(String::as_str)
            .or_else(|| self.metadata.name.as_deref()?.split('.').next())
    }

    /// `namespace/name`, for messages and as the watch's key.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }
}

crate::resource::static_resource!(
    ComputeDomainClique,
    kube::core::NamespaceResourceScope,
    kind: keys::KIND,
    group: keys::API_GROUP,
    version: keys::API_VERSION,
    plural: keys::PLURAL,
);
