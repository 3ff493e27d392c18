//! A node's DRA pool: whether the driver published it whole ([`DraEvidence`]),
//! and what its devices add up to ([`DraPool`]: GPUs, taints, NUMA topology,
//! the GFD-shaped attributes the layers judge).

use std::collections::{BTreeMap, BTreeSet};

use gpuready_api::Family;
use gpuready_api::dra::ResourceSlice;
use gpuready_api::keys::dra;

use crate::field::Field;
use crate::gfd::{FamilyLabel, GfdFacts};
use crate::version::MajorMinor;

use super::device::{DeviceKind, DraDevice};

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

#[cfg(test)]
mod tests;
