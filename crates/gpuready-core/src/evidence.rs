//! Evidence beyond the Node object: the NVIDIA DRA driver's ResourceSlices and
//! NFD's NodeFeature PCI scan, parsed once into typed facts the layers judge.
//! Pure: callers hand in the objects they read; nothing here talks to a cluster.
//!
//! [`Evidence`] is the bundle that rides on [`crate::facts::NodeFacts`]; a new source is one more field here, defaulting to "not read".

use std::collections::BTreeMap;

use gpuready_api::compute_domain::ComputeDomainClique;
use gpuready_api::dra::ResourceSlice;
use gpuready_api::keys::nfd;
use gpuready_api::nfd::NodeFeature;
use gpuready_api::resource_claim::ResourceClaim;
use serde::Serialize;

mod device;
mod pool;

pub use device::{DeviceKind, DraDevice, quantity_mib};
pub use pool::{DraEvidence, DraPool};

/// Which evidence a layer's verdict rests on. Shown by `check` and appended to
/// status messages, so a reader knows which object to look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Source {
    /// kubelet's `Ready` node condition.
    Kubelet,
    /// NFD's `feature.node.kubernetes.io/pci-*` labels or `nvidia.com/gpu.present`.
    NfdLabels,
    /// NFD's NodeFeature object (`pci.device` instances).
    NodeFeature,
    /// GPU Feature Discovery's `nvidia.com/*` labels.
    GfdLabels,
    /// Extended resources in the Node's `status.allocatable`/`capacity`.
    Allocatable,
    /// The sandbox (KubeVirt) device plugin's extended resources.
    SandboxResources,
    /// ResourceSlices of driver `gpu.nvidia.com`.
    ResourceSlices,
    /// The profile alone (a check that does not apply to this workload).
    Profile,
    /// The report of `gpuready probe` (NVML on the node).
    ProbeReport,
    /// NVIDIA mig-manager's `nvidia.com/mig.config` and `mig.config.state` labels.
    MigManagerLabels,
    /// Node conditions other judges write (a provider's GPU health agent,
    /// node-problem-detector): the External layer.
    NodeConditions,
    /// The `nvidia.com/gpu.clique` labels of the other nodes of the node's
    /// `fabric.groupByLabel` group.
    GroupCliques,
    /// The NVIDIA DRA driver's ComputeDomainCliques (`resource.nvidia.com`).
    ComputeDomainCliques,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Kubelet => "Kubelet",
            Source::NfdLabels => "NfdLabels",
            Source::NodeFeature => "NodeFeature",
            Source::GfdLabels => "GfdLabels",
            Source::Allocatable => "Allocatable",
            Source::SandboxResources => "SandboxResources",
            Source::ResourceSlices => "ResourceSlices",
            Source::Profile => "Profile",
            Source::ProbeReport => "ProbeReport",
            Source::MigManagerLabels => "MigManagerLabels",
            Source::NodeConditions => "NodeConditions",
            Source::GroupCliques => "GroupCliques",
            Source::ComputeDomainCliques => "ComputeDomainCliques",
        }
    }

    /// Sources the Node object alone gives: status messages stay as they were
    /// for them, and name any other source.
    pub fn is_node_object(self) -> bool {
        matches!(
            self,
            Source::Kubelet
                | Source::NfdLabels
                | Source::GfdLabels
                | Source::Allocatable
                | Source::MigManagerLabels
                | Source::NodeConditions
        )
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Evidence about one node that lives outside its Node object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    pub dra: DraEvidence,
    /// NFD's PCI scan; `None` when no NodeFeature with `pci.device` was read
    /// (NFD absent, its CRD not installed, or not asked for): the bus count is
    /// then Unknown, never a failure.
    pub bus: Option<BusFacts>,
    /// The DeviceTaintRules gpuready owns for this node; `None` when they were
    /// not read (the API is not served, or not readable): device gating then
    /// falls back to gating the whole node, since no rule could be written.
    pub device_rules: Option<Vec<gpuready_api::device_taint_rule::DeviceTaintRule>>,
    /// The other nodes of the node's `fabric.groupByLabel` group and their
    /// cliques; `None` when not read (the profile groups nothing, or the
    /// caller did not look).
    pub clique_group: Option<crate::clique_groups::CliqueGroup>,
    /// The NVIDIA DRA driver's ComputeDomainClique entries naming the node;
    /// `None` when they were not read (the API is not served or not readable,
    /// or offline without `--compute-domain-cliques`).
    pub compute_domains: Option<Vec<CliqueMembership>>,
    /// The devices of this node that pods hold through the claim the
    /// scheduler made for their DRA-backed extended resources; `None` when
    /// ResourceClaims were not read (not served, not readable, offline
    /// without `--resource-claims`). Only what device gating needs: the
    /// controller keeps the claims on devices gpuready taints `NoExecute`.
    pub extended_resource_holds: Option<Vec<ExtendedResourceHold>>,
}

/// One device a pod holds as a DRA-backed extended resource (KEP-5004): an
/// allocation result of a claim the scheduler made for the pod. Kubernetes'
/// device taint eviction does not evict such pods (kubernetes #141290).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtendedResourceHold {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// `namespace/name` of the pods holding it.
    pub pods: Vec<String>,
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// The device taints the allocation tolerates.
    pub tolerations: Vec<gpuready_api::resource_claim::DeviceToleration>,
}

impl ExtendedResourceHold {
    /// Every device of an extended-resource claim, with the node it is on:
    /// the allocation's node selector, else the pool's name (the NVIDIA DRA
    /// driver names its pool after the node). Nothing for any other claim, or
    /// one not allocated.
    pub fn of_claim(c: &ResourceClaim) -> Vec<(String, ExtendedResourceHold)> {
        if !c.is_extended_resource_claim() {
            return Vec::new();
        }
        let claim = format!(
            "{}/{}",
            c.metadata.namespace.as_deref().unwrap_or_default(),
            c.metadata.name.as_deref().unwrap_or_default()
        );
        let pods = c.pods();
        let node = c.allocated_node();
        c.allocated()
            .iter()
            .map(|r| {
                (
                    node.unwrap_or(&r.pool).to_owned(),
                    ExtendedResourceHold {
                        claim: claim.clone(),
                        pods: pods.clone(),
                        driver: r.driver.clone(),
                        pool: r.pool.clone(),
                        device: r.device.clone(),
                        tolerations: r.tolerations.clone(),
                    },
                )
            })
            .collect()
    }

    /// Whether this hold is on the device `driver/pool/device`.
    pub fn is_on(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.driver == driver && self.pool == pool && self.device == device
    }

    /// Whether the allocation tolerates the taint `key=value:effect`.
    pub fn tolerates(&self, key: &str, value: Option<&str>, effect: &str) -> bool {
        self.tolerations
            .iter()
            .any(|t| t.tolerates(key, value, effect))
    }
}

/// One ComputeDomainClique entry naming a node: the node's IMEX daemon in one
/// ComputeDomain's clique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CliqueMembership {
    /// `namespace/name` of the ComputeDomainClique.
    pub object: String,
    /// The ComputeDomain's UID.
    pub compute_domain: Option<String>,
    /// `<cluster UUID>.<clique ID>`, as `nvidia.com/gpu.clique` spells it.
    pub clique_id: String,
    pub index: i64,
    /// The daemon's `status` as written (`Ready`, `NotReady`; empty: none,
    /// which the CRD's default makes `NotReady`).
    pub status: String,
}

impl CliqueMembership {
    /// Every entry of one ComputeDomainClique, with the node it names.
    pub fn of_clique(c: &ComputeDomainClique) -> Vec<(String, CliqueMembership)> {
        let object = c.key();
        let domain = c.compute_domain().map(str::to_owned);
        c.daemons
            .iter()
            .filter(|d| !d.node_name.is_empty())
            .map(|d| {
                (
                    d.node_name.clone(),
                    CliqueMembership {
                        object: object.clone(),
                        compute_domain: domain.clone(),
                        clique_id: d.clique_id.clone(),
                        index: d.index,
                        status: d.status.clone().unwrap_or_default(),
                    },
                )
            })
            .collect()
    }

    pub fn is_ready(&self) -> bool {
        self.status == gpuready_api::keys::compute_domains::STATUS_READY
    }
}

impl Evidence {
    /// Builds the bundle for node `node` from what the caller read. `None` means
    /// the source was not read at all (API not served, offline without the file).
    pub fn for_node(
        node: &str,
        slices: Option<&[&ResourceSlice]>,
        node_features: Option<&[&NodeFeature]>,
    ) -> Evidence {
        Evidence {
            dra: slices.map_or(DraEvidence::NotRead, |s| DraEvidence::from_slices(node, s)),
            bus: node_features.and_then(BusFacts::from_node_features),
            device_rules: None,
            clique_group: None,
            compute_domains: None,
            extended_resource_holds: None,
        }
    }

    /// The same evidence with the DeviceTaintRules gpuready owns for the node.
    pub fn with_device_rules(
        mut self,
        rules: Option<Vec<gpuready_api::device_taint_rule::DeviceTaintRule>>,
    ) -> Evidence {
        self.device_rules = rules;
        self
    }

    /// The same evidence with the node's extended-resource holds (`None`:
    /// ResourceClaims were not read).
    pub fn with_extended_resource_holds(
        mut self,
        holds: Option<Vec<ExtendedResourceHold>>,
    ) -> Evidence {
        self.extended_resource_holds = holds;
        self
    }
}

/// The objects read beside the Nodes, indexed per node. `None` for a source
/// that was not read at all (its API is not served, or no file was given).
#[derive(Debug, Default)]
pub struct EvidenceIndex<'a> {
    slices: Option<BTreeMap<&'a str, Vec<&'a ResourceSlice>>>,
    node_features: Option<BTreeMap<&'a str, Vec<&'a NodeFeature>>>,
    /// One ComputeDomainClique names many nodes: its entries by node.
    compute_domains: Option<BTreeMap<String, Vec<CliqueMembership>>>,
    /// The devices pods hold as DRA-backed extended resources, by node.
    holds: Option<BTreeMap<String, Vec<ExtendedResourceHold>>>,
}

/// `(node, item)` pairs gathered by node, in the order read: every list the
/// index keeps is looked up by node name, so each is built the same way.
fn by_node<K: Ord, V>(pairs: impl IntoIterator<Item = (K, V)>) -> BTreeMap<K, Vec<V>> {
    let mut out: BTreeMap<K, Vec<V>> = BTreeMap::new();
    for (node, item) in pairs {
        out.entry(node).or_default().push(item);
    }
    out
}

impl<'a> EvidenceIndex<'a> {
    pub fn new(
        slices: Option<&'a [ResourceSlice]>,
        node_features: Option<&'a [NodeFeature]>,
    ) -> EvidenceIndex<'a> {
        EvidenceIndex {
            slices: slices.map(|all| {
                by_node(
                    all.iter()
                        .filter_map(|s| s.spec.node_name.as_deref().map(|n| (n, s))),
                )
            }),
            node_features: node_features.map(|all| {
                by_node(
                    all.iter()
                        .filter_map(|f| node_feature_node(f).map(|n| (n, f))),
                )
            }),
            compute_domains: None,
            holds: None,
        }
    }

    /// The same index with the ResourceClaims read (`None`: not read): only
    /// the scheduler's extended-resource claims are kept.
    pub fn with_resource_claims(mut self, claims: Option<&[ResourceClaim]>) -> EvidenceIndex<'a> {
        self.holds = claims.map(|all| by_node(all.iter().flat_map(ExtendedResourceHold::of_claim)));
        self
    }

    /// The same index with the ComputeDomainCliques read (`None`: not read).
    pub fn with_compute_domain_cliques(
        mut self,
        cliques: Option<&[ComputeDomainClique]>,
    ) -> EvidenceIndex<'a> {
        self.compute_domains =
            cliques.map(|all| by_node(all.iter().flat_map(CliqueMembership::of_clique)));
        self
    }

    pub fn for_node(&self, node: &str) -> Evidence {
        let slices = self
            .slices
            .as_ref()
            .map(|m| m.get(node).map(Vec::as_slice).unwrap_or_default());
        let features = self
            .node_features
            .as_ref()
            .map(|m| m.get(node).map(Vec::as_slice).unwrap_or_default());
        let mut e = Evidence::for_node(node, slices, features);
        e.compute_domains = self
            .compute_domains
            .as_ref()
            .map(|m| m.get(node).cloned().unwrap_or_default());
        e.extended_resource_holds = self
            .holds
            .as_ref()
            .map(|m| m.get(node).cloned().unwrap_or_default());
        e
    }
}

/// The node a NodeFeature describes: its `nfd.node.kubernetes.io/node-name`
/// label (nfd-worker names the object after the node too, but other sources
/// such as GFD do not).
pub fn node_feature_node(f: &NodeFeature) -> Option<&str> {
    f.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(nfd::NODE_NAME_LABEL))
        .map(String::as_str)
}

/// NVIDIA GPUs on the PCI bus, from NFD's NodeFeature `pci.device` instances.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BusFacts {
    /// Devices of vendor 10de with class 0300 (VGA) or 0302 (3D controller).
    pub gpus: u32,
    /// Count per PCI device ID (`2335`), to tell a node with two models.
    pub models: BTreeMap<String, u32>,
    /// Name of the NodeFeature object(s) read, for messages.
    pub objects: Vec<String>,
}

impl BusFacts {
    /// `None` when no object carries a PCI scan (nfd-worker's object is the one
    /// that does; GFD's own NodeFeature carries labels only).
    pub fn from_node_features(objects: &[&NodeFeature]) -> Option<BusFacts> {
        let mut bus = BusFacts::default();
        let mut scanned = false;
        for o in objects {
            let Some(set) = o.spec.features.instances.get(nfd::PCI_DEVICE_FEATURE) else {
                continue;
            };
            scanned = true;
            bus.objects
                .push(o.metadata.name.clone().unwrap_or_default());
            for e in &set.elements {
                let attr = |k: &str| e.attributes.get(k).map(String::as_str).unwrap_or("");
                if attr("vendor") == nfd::NVIDIA_VENDOR
                    && nfd::GPU_PCI_CLASSES.contains(&attr("class"))
                {
                    bus.gpus += 1;
                    *bus.models.entry(attr("device").to_owned()).or_default() += 1;
                }
            }
        }
        scanned.then_some(bus)
    }

    /// `10de:2335 ×8` style summary of the models.
    pub fn describe(&self) -> String {
        self.models
            .iter()
            .map(|(id, n)| format!("10de:{id} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
