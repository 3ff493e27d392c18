//! Evidence beyond the Node object: the NVIDIA DRA driver's ResourceSlices and
//! NFD's NodeFeature PCI scan, parsed once into typed facts the layers judge.
//! Pure: callers hand in the objects they read; nothing here talks to a cluster.
//!
//! [`Evidence`] is the bundle that rides on [`crate::facts::NodeFacts`]; a new source is one more field here, defaulting to "not read".

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::Family;
use gpuready_api::compute_domain::ComputeDomainClique;
use gpuready_api::dra::{Device, ResourceSlice};
use gpuready_api::keys::{dra, nfd};
use gpuready_api::nfd::NodeFeature;
use gpuready_api::resource_claim::ResourceClaim;
use serde::Serialize;

use crate::field::Field;
use crate::gfd::{FamilyLabel, GfdFacts};
use crate::version::{DriverVersion, MajorMinor};

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

impl<'a> EvidenceIndex<'a> {
    pub fn new(
        slices: Option<&'a [ResourceSlice]>,
        node_features: Option<&'a [NodeFeature]>,
    ) -> EvidenceIndex<'a> {
        EvidenceIndex {
            slices: slices.map(|all| {
                let mut by_node: BTreeMap<&str, Vec<&ResourceSlice>> = BTreeMap::new();
                for s in all {
                    if let Some(n) = s.spec.node_name.as_deref() {
                        by_node.entry(n).or_default().push(s);
                    }
                }
                by_node
            }),
            node_features: node_features.map(|all| {
                let mut by_node: BTreeMap<&str, Vec<&NodeFeature>> = BTreeMap::new();
                for f in all {
                    if let Some(n) = node_feature_node(f) {
                        by_node.entry(n).or_default().push(f);
                    }
                }
                by_node
            }),
            compute_domains: None,
            holds: None,
        }
    }

    /// The same index with the ResourceClaims read (`None`: not read): only
    /// the scheduler's extended-resource claims are kept.
    pub fn with_resource_claims(mut self, claims: Option<&[ResourceClaim]>) -> EvidenceIndex<'a> {
        self.holds = claims.map(|all| {
            let mut by_node: BTreeMap<String, Vec<ExtendedResourceHold>> = BTreeMap::new();
            for (node, h) in all.iter().flat_map(ExtendedResourceHold::of_claim) {
                by_node.entry(node).or_default().push(h);
            }
            by_node
        });
        self
    }

    /// The same index with the ComputeDomainCliques read (`None`: not read).
    pub fn with_compute_domain_cliques(
        mut self,
        cliques: Option<&[ComputeDomainClique]>,
    ) -> EvidenceIndex<'a> {
        self.compute_domains = cliques.map(|all| {
            let mut by_node: BTreeMap<String, Vec<CliqueMembership>> = BTreeMap::new();
            for (node, m) in all.iter().flat_map(CliqueMembership::of_clique) {
                by_node.entry(node).or_default().push(m);
            }
            by_node
        });
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

/// What the node's `gpu.nvidia.com` ResourceSlices say.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum DraEvidence {
    /// ResourceSlices were not read (resource.k8s.io not served, or offline
    /// without `--resource-slices`).
    #[default]
    NotRead,
    /// Read, and the node has no slice of driver `gpu.nvidia.com`.
    NoSlices,
    /// The newest generation of a pool is not fully published: the driver is
    /// (re)publishing, or a slice was lost.
    Incomplete {
        pool: String,
        generation: i64,
        have: usize,
        want: i64,
    },
    /// Every slice of the newest generation of every pool is there.
    Complete(DraPool),
}

impl DraEvidence {
    /// The newest complete pool(s) of driver `gpu.nvidia.com` on `node`: per
    /// pool, only slices of the highest generation present count, and the pool is
    /// complete when `resourceSliceCount` of them are there.
    pub fn from_slices(node: &str, slices: &[&ResourceSlice]) -> DraEvidence {
        let mut pools: BTreeMap<&str, Vec<&ResourceSlice>> = BTreeMap::new();
        for s in slices {
            if s.spec.driver == dra::DRIVER && s.spec.node_name.as_deref() == Some(node) {
                pools.entry(s.spec.pool.name.as_str()).or_default().push(s);
            }
        }
        if pools.is_empty() {
            return DraEvidence::NoSlices;
        }
        let mut devices = Vec::new();
        let mut generations = Vec::new();
        for (name, slices) in &pools {
            let newest = slices.iter().map(|s| s.spec.pool.generation).max();
            let newest = newest.unwrap_or_default();
            let current: Vec<&&ResourceSlice> = slices
                .iter()
                .filter(|s| s.spec.pool.generation == newest)
                .collect();
            let want = current
                .iter()
                .map(|s| s.spec.pool.resource_slice_count)
                .max()
                .unwrap_or(1);
            if i64::try_from(current.len()).unwrap_or(i64::MAX) < want {
                return DraEvidence::Incomplete {
                    pool: (*name).to_owned(),
                    generation: newest,
                    have: current.len(),
                    want,
                };
            }
            generations.push(format!("{name}/{newest}"));
            devices.extend(current.iter().flat_map(|s| {
                let partition = s.spec.partition_type_attribute.as_deref();
                s.spec
                    .devices
                    .iter()
                    .map(move |d| DraDevice::parse(name, d, partition))
            }));
        }
        DraEvidence::Complete(DraPool {
            pools: generations,
            devices,
        })
    }

    pub fn complete(&self) -> Option<&DraPool> {
        match self {
            DraEvidence::Complete(p) => Some(p),
            _ => None,
        }
    }

    /// The node has at least one `gpu.nvidia.com` slice (complete or not).
    pub fn has_slices(&self) -> bool {
        matches!(
            self,
            DraEvidence::Incomplete { .. } | DraEvidence::Complete(_)
        )
    }
}

/// The kind of a DRA device (`type` attribute).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Gpu,
    Mig,
    Vfio,
    Other,
}

/// One device of the pool, with the attributes gpuready judges.
#[derive(Clone, Debug, PartialEq)]
pub struct DraDevice {
    /// The pool the device belongs to (the NVIDIA driver names it after the node).
    pub pool: String,
    pub name: String,
    pub kind: DeviceKind,
    pub uuid: Option<String>,
    pub parent_uuid: Option<String>,
    /// `productName` as NVML spells it (`NVIDIA H200`).
    pub product: Option<String>,
    pub architecture: Option<String>,
    pub compute: Option<MajorMinor>,
    pub driver: Option<DriverVersion>,
    pub cuda_driver: Option<MajorMinor>,
    pub memory_mib: Option<u64>,
    pub pci_bus_id: Option<String>,
    /// `key=value:effect` of every `NoSchedule`/`NoExecute` taint: each makes the
    /// device unusable for new claims.
    pub blocking_taints: Vec<String>,
    /// `key=value:effect` of every other taint (`None`, or an effect this
    /// gpuready does not know): reported, never counted against the device.
    pub informational_taints: Vec<String>,
    /// Keys of every taint, whatever its effect (`gpu.nvidia.com/gpu-lost`…).
    pub taint_keys: Vec<String>,
    /// MIG devices: the profile (`1g.18gb`).
    pub mig_profile: Option<String>,
    /// `resource.kubernetes.io/numaNode`: one NUMA node as an `int`, or every
    /// one of an `ints` list (KEP-5491); the DRA driver v0.4.x's `numa` when
    /// the standard attribute is absent. Empty: not published.
    pub numa_nodes: Vec<i64>,
    /// The NUMA node(s) came in the list form.
    pub numa_listed: bool,
    /// The value of the attribute the slice's `partitionTypeAttribute` names.
    pub partition_type: Option<String>,
}

fn describe_taint(t: &gpuready_api::dra::DeviceTaint) -> String {
    format!(
        "{}={}:{}",
        t.key,
        t.value.as_deref().unwrap_or(""),
        if t.effect.is_empty() {
            "None"
        } else {
            &t.effect
        }
    )
}

fn is_blocking(effect: &str) -> bool {
    effect == "NoSchedule" || effect == "NoExecute"
}

impl DraDevice {
    /// `partition_attribute`: the slice's `partitionTypeAttribute`, a fully
    /// qualified name; in the device's map the driver's own attributes may
    /// stand without their domain, so both spellings are looked up.
    fn parse(pool: &str, d: &Device, partition_attribute: Option<&str>) -> DraDevice {
        // A one-element list reads as the value itself (KEP-5491 list forms).
        let string = |k: &str| {
            d.attributes
                .get(k)
                .and_then(|a| a.one_string())
                .map(str::to_owned)
        };
        let version = |k: &str| {
            d.attributes
                .get(k)
                .and_then(|a| a.one_version())
                .map(str::to_owned)
        };
        let numa = d
            .attributes
            .get(dra::ATTR_NUMA_NODE)
            .or_else(|| d.attributes.get(dra::ATTR_NUMA_LEGACY));
        let partition_type = partition_attribute.and_then(|name| {
            let bare = name
                .strip_prefix(dra::DRIVER)
                .and_then(|n| n.strip_prefix('/'));
            d.attributes
                .get(name)
                .or_else(|| bare.and_then(|b| d.attributes.get(b)))
                .and_then(|a| a.one_string())
                .map(str::to_owned)
        });
        DraDevice {
            pool: pool.to_owned(),
            name: d.name.clone(),
            kind: match string(dra::ATTR_TYPE).as_deref() {
                Some(dra::TYPE_GPU) => DeviceKind::Gpu,
                Some(dra::TYPE_MIG) => DeviceKind::Mig,
                Some(dra::TYPE_VFIO) => DeviceKind::Vfio,
                _ => DeviceKind::Other,
            },
            uuid: string(dra::ATTR_UUID),
            parent_uuid: string(dra::ATTR_PARENT_UUID),
            product: string(dra::ATTR_PRODUCT),
            architecture: string(dra::ATTR_ARCHITECTURE),
            compute: version(dra::ATTR_COMPUTE).and_then(|v| semver_major_minor(&v)),
            driver: version(dra::ATTR_DRIVER).and_then(|v| DriverVersion::parse(&v).ok()),
            cuda_driver: version(dra::ATTR_CUDA_DRIVER).and_then(|v| semver_major_minor(&v)),
            memory_mib: d
                .capacity
                .get(dra::CAPACITY_MEMORY)
                .and_then(|q| quantity_mib(&q.value)),
            pci_bus_id: string(dra::ATTR_PCI_BUS_ID),
            // Effects other than NoSchedule/NoExecute (`None`, or one this
            // gpuready does not know) are informational, as the API defines.
            blocking_taints: d
                .taints
                .iter()
                .filter(|t| is_blocking(&t.effect))
                .map(describe_taint)
                .collect(),
            informational_taints: d
                .taints
                .iter()
                .filter(|t| !is_blocking(&t.effect))
                .map(describe_taint)
                .collect(),
            taint_keys: d.taints.iter().map(|t| t.key.clone()).collect(),
            mig_profile: string(dra::ATTR_MIG_PROFILE),
            numa_nodes: numa.map(|a| a.all_ints()).unwrap_or_default(),
            numa_listed: numa.is_some_and(|a| a.is_list()),
            partition_type,
        }
    }

    /// Whether the device carries a taint with this key (any effect).
    pub fn has_taint(&self, key: &str) -> bool {
        self.taint_keys.iter().any(|k| k == key)
    }

    /// The UUID of the physical GPU behind the device: its own for a full or
    /// VFIO GPU, the parent's for a MIG device.
    pub fn gpu_uuid(&self) -> Option<&str> {
        match self.kind {
            DeviceKind::Mig => self.parent_uuid.as_deref(),
            _ => self.uuid.as_deref(),
        }
    }

    pub fn usable(&self) -> bool {
        self.blocking_taints.is_empty()
    }
}

/// The devices of the node's complete pool(s).
#[derive(Clone, Debug, PartialEq)]
pub struct DraPool {
    /// `pool/generation` of each pool read.
    pub pools: Vec<String>,
    pub devices: Vec<DraDevice>,
}

impl DraPool {
    /// Physical GPUs behind the devices: full GPUs, VFIO GPUs and the distinct
    /// parents of MIG devices (a MIG-mode GPU publishes no `gpu` device).
    /// `usable_only` counts a GPU only through devices without blocking taints.
    pub fn physical_gpus(&self, usable_only: bool) -> usize {
        let mut ids = BTreeSet::new();
        for d in self.devices.iter().filter(|d| !usable_only || d.usable()) {
            match d.kind {
                DeviceKind::Gpu | DeviceKind::Vfio => {
                    ids.insert(d.uuid.clone().unwrap_or_else(|| d.name.clone()));
                }
                DeviceKind::Mig => {
                    ids.insert(
                        d.parent_uuid
                            .clone()
                            .unwrap_or_else(|| format!("parent-of-{}", d.name)),
                    );
                }
                DeviceKind::Other => {}
            }
        }
        ids.len()
    }

    /// The pool without the named devices.
    pub fn without(&self, names: &BTreeSet<&str>) -> DraPool {
        DraPool {
            pools: self.pools.clone(),
            devices: self
                .devices
                .iter()
                .filter(|d| !names.contains(d.name.as_str()))
                .cloned()
                .collect(),
        }
    }

    pub fn count(&self, kind: DeviceKind) -> usize {
        self.devices.iter().filter(|d| d.kind == kind).count()
    }

    /// Every blocking device taint, as `device: key=value:effect`.
    pub fn blocking_taints(&self) -> Vec<String> {
        self.devices
            .iter()
            .flat_map(|d| {
                d.blocking_taints
                    .iter()
                    .map(move |t| format!("{}: {t}", d.name))
            })
            .collect()
    }

    /// Every informational (`None`) device taint, as `device: key=value:effect`.
    pub fn informational_taints(&self) -> Vec<String> {
        self.devices
            .iter()
            .flat_map(|d| {
                d.informational_taints
                    .iter()
                    .map(move |t| format!("{}: {t}", d.name))
            })
            .collect()
    }

    /// Names of the devices carrying a taint with this key (any effect).
    pub fn devices_with_taint(&self, key: &str) -> Vec<&str> {
        self.devices
            .iter()
            .filter(|d| d.has_taint(key))
            .map(|d| d.name.as_str())
            .collect()
    }

    /// Physical GPUs per NUMA node (`resource.kubernetes.io/numaNode`; a MIG
    /// device counts for its parent GPU, a GPU listed on two nodes for both),
    /// and the GPUs that publish no NUMA node, by device name.
    pub fn gpus_per_numa_node(&self) -> (BTreeMap<i64, usize>, Vec<&str>) {
        let mut per_node: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
        let mut unplaced = Vec::new();
        for d in self
            .devices
            .iter()
            .filter(|d| matches!(d.kind, DeviceKind::Gpu | DeviceKind::Mig | DeviceKind::Vfio))
        {
            let gpu = d.gpu_uuid().unwrap_or(d.name.as_str()).to_owned();
            if d.numa_nodes.is_empty() {
                unplaced.push(d.name.as_str());
            }
            for n in &d.numa_nodes {
                per_node.entry(*n).or_default().insert(gpu.clone());
            }
        }
        (
            per_node.into_iter().map(|(n, g)| (n, g.len())).collect(),
            unplaced,
        )
    }

    /// What the pool's topology and partition attributes say, for messages:
    /// `resource.kubernetes.io/numaNode 0 ×4, 1 ×4 (list form)` and the
    /// partition types the slices' `partitionTypeAttribute` names.
    pub fn describe_topology(&self) -> Option<String> {
        let mut parts = Vec::new();
        let (per_node, _) = self.gpus_per_numa_node();
        if !per_node.is_empty() {
            let listed = self.devices.iter().any(|d| d.numa_listed);
            parts.push(format!(
                "{} {}{}",
                dra::ATTR_NUMA_NODE,
                per_node
                    .iter()
                    .map(|(n, g)| format!("{n} ×{g} GPU(s)"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if listed {
                    " (read from ints lists)"
                } else {
                    ""
                }
            ));
        }
        let mut partitions: BTreeMap<&str, usize> = BTreeMap::new();
        for d in &self.devices {
            if let Some(p) = &d.partition_type {
                *partitions.entry(p.as_str()).or_default() += 1;
            }
        }
        if !partitions.is_empty() {
            parts.push(format!(
                "partition types (partitionTypeAttribute): {}",
                partitions
                    .iter()
                    .map(|(p, n)| format!("{p} ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The distinct products (GFD spelling) of GPU and MIG devices.
    pub fn products(&self) -> BTreeSet<String> {
        self.gpu_like()
            .filter_map(|d| d.product.as_deref())
            .map(crate::product::from_nvml_name)
            .collect()
    }

    fn gpu_like(&self) -> impl Iterator<Item = &DraDevice> {
        self.devices
            .iter()
            .filter(|d| matches!(d.kind, DeviceKind::Gpu | DeviceKind::Mig))
    }

    /// The pool's attributes in the shape GFD labels take, so the Driver,
    /// Profile and Compatibility layers judge both sources with one set of
    /// rules. Where devices differ the weakest value stands (smallest memory,
    /// lowest compute capability and driver): a profile minimum must hold for
    /// every GPU a pod may get.
    pub fn as_gfd(&self) -> GfdFacts {
        let gpus: Vec<&DraDevice> = self.gpu_like().collect();
        let min = |f: fn(&DraDevice) -> Option<MajorMinor>| gpus.iter().filter_map(|d| f(d)).min();
        let compute = min(|d| d.compute);
        let family = gpus
            .iter()
            .filter_map(|d| d.architecture.as_deref())
            .next()
            .map(architecture_family);
        // Full GPUs only: a MIG device's memory is its slice, not the card's.
        let memory = self
            .devices
            .iter()
            .filter(|d| d.kind == DeviceKind::Gpu)
            .filter_map(|d| d.memory_mib)
            .min();
        let present = |o: Option<MajorMinor>| o.map_or(Field::Absent, Field::Present);
        GfdFacts {
            from_pool: Some(self.pools.join(", ")),
            seen: true,
            product: self.products().into_iter().next(),
            memory_mib: memory.map_or(Field::Absent, Field::Present),
            compute: present(compute),
            family: family.map_or(Field::Absent, Field::Present),
            count: Field::Present(u32::try_from(self.physical_gpus(false)).unwrap_or(u32::MAX)),
            driver: gpus
                .iter()
                .filter_map(|d| d.driver.clone())
                .min()
                .map_or(Field::Absent, Field::Present),
            cuda_runtime: present(min(|d| d.cuda_driver)),
            timestamp: Field::Absent,
            mig_strategy: None,
            mig_single: None,
            vfio_mode: false,
            vgpu: None,
        }
    }
}

/// NVML's architecture name (`Hopper`, `Ada Lovelace`) as a family label.
fn architecture_family(arch: &str) -> FamilyLabel {
    let gfd_spelling = arch.trim().to_ascii_lowercase().replace(' ', "-");
    match Family::parse(&gfd_spelling) {
        Some(f) => FamilyLabel::Known(f),
        None if gfd_spelling == "unknown" => FamilyLabel::Undefined,
        None => FamilyLabel::Unrecognized(gfd_spelling),
    }
}

/// The DRA driver writes versions as semver (`9.0.0`, `13.0.0`).
fn semver_major_minor(v: &str) -> Option<MajorMinor> {
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().unwrap_or("0").parse().ok()?;
    Some(MajorMinor::new(major, minor))
}

/// A Kubernetes quantity in MiB, rounded down. Only the forms a memory capacity
/// takes are accepted (plain bytes, binary and decimal suffixes); written here
/// rather than taken from a crate because these few lines are the whole need.
pub fn quantity_mib(q: &str) -> Option<u64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let num: f64 = num.parse().ok()?;
    let factor: f64 = match suffix {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0_f64.powi(4),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => return None,
    };
    let mib = num * factor / (1024.0 * 1024.0);
    // Truncation is the intent: a card has at least the whole MiB it reports.
    Some(mib.floor() as u64)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(quantity_mib("143771Mi"), Some(143_771));
        assert_eq!(quantity_mib("80Gi"), Some(81_920));
        assert_eq!(quantity_mib("1048576"), Some(1));
        assert_eq!(quantity_mib("12x"), None);
    }

    #[test]
    fn architectures() {
        assert_eq!(
            architecture_family("Ada Lovelace"),
            FamilyLabel::Known(Family::AdaLovelace)
        );
        assert_eq!(
            architecture_family("Hopper"),
            FamilyLabel::Known(Family::Hopper)
        );
        assert_eq!(architecture_family("Unknown"), FamilyLabel::Undefined);
    }

    #[test]
    fn semver_forms() {
        assert_eq!(semver_major_minor("9.0.0"), Some(MajorMinor::new(9, 0)));
        assert_eq!(semver_major_minor("13.0.0"), Some(MajorMinor::new(13, 0)));
    }
}
