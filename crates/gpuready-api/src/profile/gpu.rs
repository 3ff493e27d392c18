//! The profile's `gpu` and `mig` blocks: the GPU and MIG geometry every governed
//! node must have, and the architecture families they name.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The MIG geometry a pool needs.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MigExpectation {
    /// The mig-manager configuration the node must be labelled with
    /// (`nvidia.com/mig.config`), e.g. `all-1g.18gb`; its
    /// `nvidia.com/mig.config.state` must be `success`.
    #[schemars(length(min = 1, max = 63))]
    pub config: Option<String>,

    /// MIG devices per profile the node must offer, at least, e.g.
    /// `{"1g.18gb": 7}`: counted from GFD's `nvidia.com/mig-<profile>.count`
    /// (mixed strategy), its single-strategy `nvidia.com/gpu.product`
    /// `…-MIG-<profile>` with `nvidia.com/gpu.count`, or the DRA driver's MIG devices.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16, "additionalProperties" = {"type": "integer", "format": "uint32", "minimum": 1, "maximum": 1024}))]
    #[x_kube(validation = Rule::new("self.all(k, k.matches('^[0-9]+g\\\\.[0-9]+gb([.+][a-z0-9+.]+)?$'))").message("mig.devices keys must be MIG profile names like 1g.18gb or 1g.18gb+me"))]
    pub devices: BTreeMap<String, u32>,
}

/// The GPU expected on every governed node. Every field is optional; an absent
/// field is not checked.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.families) || !has(self.excludedFamilies) || !self.families.exists(f, f in self.excludedFamilies)").message("gpu.families and gpu.excludedFamilies must not share a family: no card could be both allowed and excluded"))]
pub struct GpuExpectation {
    /// Accepted `nvidia.com/gpu.product` values: exact names or glob patterns
    /// (`*`, `?`, `[...]`), case-insensitive. The `NVIDIA-` prefix older drivers
    /// omit and the `-SHARED` suffix of time-slicing/MPS are tolerated on both sides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 128)))]
    #[x_kube(validation = Rule::new("self.all(p, p.size() >= 1 && p.size() <= 128)").message("each product must be 1 to 128 characters"))]
    #[x_kube(validation = Rule::new("self.all(p, !p.contains('**') && p.matches('^([^\\\\[\\\\]]|\\\\[(![^\\\\[\\\\]]+|[^!\\\\[\\\\]][^\\\\[\\\\]]*)\\\\])*$'))").message("products must be valid patterns: *, ? and [...] classes, each [ closed by ], no **"))]
    #[x_kube(validation = Rule::new("self.all(p, p == '*' || p.matches('[^*?]'))").message("products must name something: a pattern of only ? and * matches every short name (use * alone for any product)"))]
    // A class range between letters or digits that runs high to low (`z-a`)
    // matches nothing: every such pair, spelled out (CEL cannot compare
    // characters; validate.rs checks the same by code point).
    #[x_kube(validation = Rule::new("self.all(p, !p.matches('\\\\[[^\\\\]]*([a-z]-[0-9A-Z]|[A-Z]-[0-9]|1-0|2-[0-1]|3-[0-2]|4-[0-3]|5-[0-4]|6-[0-5]|7-[0-6]|8-[0-7]|9-[0-8]|B-A|C-[A-B]|D-[A-C]|E-[A-D]|F-[A-E]|G-[A-F]|H-[A-G]|I-[A-H]|J-[A-I]|K-[A-J]|L-[A-K]|M-[A-L]|N-[A-M]|O-[A-N]|P-[A-O]|Q-[A-P]|R-[A-Q]|S-[A-R]|T-[A-S]|U-[A-T]|V-[A-U]|W-[A-V]|X-[A-W]|Y-[A-X]|Z-[A-Y]|b-a|c-[a-b]|d-[a-c]|e-[a-d]|f-[a-e]|g-[a-f]|h-[a-g]|i-[a-h]|j-[a-i]|k-[a-j]|l-[a-k]|m-[a-l]|n-[a-m]|o-[a-n]|p-[a-o]|q-[a-p]|r-[a-q]|s-[a-r]|t-[a-s]|u-[a-t]|v-[a-u]|w-[a-v]|x-[a-w]|y-[a-x]|z-[a-y])'))").message("products must not hold a range that matches nothing: a range between letters or digits runs low to high ([a-z], not [z-a])"))]
    pub products: Vec<String>,

    /// Minimum `nvidia.com/gpu.memory`, in MiB (e.g. 24576 for a 24 GiB card).
    #[schemars(range(min = 1, max = 16777216))]
    pub min_memory_mib: Option<u32>,

    /// Minimum compute capability as `major.minor`, e.g. `8.6`.
    #[schemars(length(max = 8))]
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]?\\\\.[0-9]$')").message("minComputeCapability must look like 8.6 (major.minor, from 1.0, no leading zero)"))]
    pub min_compute_capability: Option<String>,

    /// Allowed architecture families. Empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 12))]
    #[x_kube(validation = Rule::new("self.all(f, self.exists_one(g, g == f))").message("gpu.families must list each family once"))]
    pub families: Vec<Family>,

    /// Families that must not be used (e.g. `maxwell` for a fleet moving to CUDA 13).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 12))]
    #[x_kube(validation = Rule::new("self.all(f, self.exists_one(g, g == f))").message("gpu.excludedFamilies must list each family once"))]
    pub excluded_families: Vec<Family>,

    /// GPUs per node: at least this many in `nvidia.com/gpu.count` and allocatable.
    #[schemars(range(min = 1, max = 1024))]
    pub count: Option<u32>,

    /// At most this many GPUs on one NUMA node, read from the DRA driver's
    /// standard `resource.kubernetes.io/numaNode` attribute (an `int`, or an
    /// `ints` list): on an 8-GPU board with two sockets, 4 catches a BIOS
    /// NUMA setting that put every GPU on one node. Judged on DRA nodes only.
    #[schemars(range(min = 1, max = 1024))]
    pub max_gpus_per_numa_node: Option<u32>,
}

/// GPU architecture family, as GFD spells it in `nvidia.com/gpu.family`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    Tesla,
    Fermi,
    Kepler,
    Maxwell,
    Pascal,
    Volta,
    Turing,
    Ampere,
    AdaLovelace,
    Hopper,
    Blackwell,
    Rubin,
}

impl Family {
    pub const ALL: [Family; 12] = [
        Family::Tesla,
        Family::Fermi,
        Family::Kepler,
        Family::Maxwell,
        Family::Pascal,
        Family::Volta,
        Family::Turing,
        Family::Ampere,
        Family::AdaLovelace,
        Family::Hopper,
        Family::Blackwell,
        Family::Rubin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Tesla => "tesla",
            Family::Fermi => "fermi",
            Family::Kepler => "kepler",
            Family::Maxwell => "maxwell",
            Family::Pascal => "pascal",
            Family::Volta => "volta",
            Family::Turing => "turing",
            Family::Ampere => "ampere",
            Family::AdaLovelace => "ada-lovelace",
            Family::Hopper => "hopper",
            Family::Blackwell => "blackwell",
            Family::Rubin => "rubin",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
