//! One device of the DRA driver's ResourceSlices read into [`DraDevice`]: its
//! kind, attributes, capacity and taints, and whether it is usable.

use gpuready_api::dra::Device;
use gpuready_api::keys::dra;

use crate::version::{DriverVersion, MajorMinor};

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
    pub(super) fn parse(pool: &str, d: &Device, partition_attribute: Option<&str>) -> DraDevice {
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

#[cfg(test)]
mod tests;
