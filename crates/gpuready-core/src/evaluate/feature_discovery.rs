//! The FeatureDiscovery layer: GFD's labels present, well-formed and fresh (or,
//! under DRA, the attributes of a complete pool in their place).

use gpuready_api::GpuNodeProfileSpec;
use gpuready_api::keys::{nvidia, reasons};
use jiff::Timestamp;

use super::verdict::{Verdict, malformed, not_ready, ready, unknown, vfio_mode_verdict};
use crate::evidence::{DraEvidence, Source};
use crate::facts::NodeFacts;
use crate::report::human_seconds;

/// The GFD labels this profile needs to judge the node.
fn needed_gfd_keys(spec: &GpuNodeProfileSpec) -> Vec<&'static str> {
    let mut keys = Vec::new();
    let g = &spec.gpu;
    if !g.products.is_empty() {
        keys.push(nvidia::GPU_PRODUCT);
    }
    if g.min_memory_mib.is_some() {
        keys.push(nvidia::GPU_MEMORY);
    }
    if g.min_compute_capability.is_some() || spec.cuda_version.is_some() {
        keys.push(nvidia::GPU_COMPUTE_MAJOR);
    }
    if (!g.families.is_empty() || !g.excluded_families.is_empty())
        && !keys.contains(&nvidia::GPU_COMPUTE_MAJOR)
    {
        keys.push(nvidia::GPU_FAMILY);
    }
    if g.count.is_some() {
        keys.push(nvidia::GPU_COUNT);
    }
    if spec.min_driver_version.is_some() || spec.cuda_version.is_some() {
        keys.push(nvidia::DRIVER_FULL);
    }
    if spec.cuda_version.is_some() {
        keys.push(nvidia::RUNTIME_FULL);
    }
    keys
}

fn is_present(facts: &NodeFacts, key: &str) -> bool {
    let g = &facts.gfd;
    match key {
        nvidia::GPU_PRODUCT => g.product.is_some(),
        nvidia::GPU_MEMORY => !g.memory_mib.is_absent(),
        nvidia::GPU_COMPUTE_MAJOR => !g.compute.is_absent(),
        nvidia::GPU_FAMILY => !g.family.is_absent() || !g.compute.is_absent(),
        nvidia::GPU_COUNT => !g.count.is_absent(),
        nvidia::DRIVER_FULL => !g.driver.is_absent(),
        nvidia::RUNTIME_FULL => !g.cuda_runtime.is_absent(),
        _ => facts.labels.contains_key(key),
    }
}

/// How far ahead of gpuready's clock a GFD timestamp may be and still count as
/// fresh: node clocks drift by seconds under NTP, never by minutes.
pub const MAX_GFD_CLOCK_SKEW_SECONDS: i64 = 60;

pub(super) fn feature_discovery_layer(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    now: Timestamp,
) -> (Verdict, Option<u64>) {
    let gfd = &facts.gfd;
    if gfd.vfio_mode {
        return (vfio_mode_verdict(), None);
    }
    if !gfd.seen {
        return (
            not_ready(
                "GfdLabelsMissing",
                "no GPU Feature Discovery labels (nvidia.com/gpu.*, nvidia.com/cuda.*): is gpu-feature-discovery running on this node, and nfd-master in the cluster?",
            ),
            None,
        );
    }
    if let Some(m) = gfd.malformed().first() {
        return (malformed(m), None);
    }
    let missing: Vec<&str> = needed_gfd_keys(spec)
        .into_iter()
        .filter(|k| !is_present(facts, k))
        .collect();
    if !missing.is_empty() {
        return (
            not_ready(
                "GfdLabelsMissing",
                format!(
                    "GFD labels the profile needs are missing: {}",
                    missing.join(", ")
                ),
            ),
            None,
        );
    }
    let max_age = i64::from(spec.max_label_age_seconds);
    match gfd.timestamp.present() {
        None => (
            ready(
                "GfdLabelsPresent",
                "GFD labels present; no gfd.timestamp (GFD runs with --no-timestamp?), so freshness is not checked",
            ),
            None,
        ),
        Some(_) if max_age == 0 => (ready("GfdLabelsPresent", "GFD labels present"), None),
        // The messages name the timestamp, never the time elapsed since it: they
        // end up in node conditions, and a message that changes with the clock
        // turns every reconcile into a status write.
        Some(&ts) => {
            let age = now.as_second().saturating_sub(ts);
            if age < -MAX_GFD_CLOCK_SKEW_SECONDS {
                // A timestamp from the future would otherwise stay "fresh" for as
                // long as it is ahead: a wrong node clock, or a hand-written label,
                // must not hide a GFD that stopped. It turns fresh by itself once
                // the clock catches up to within the allowed skew.
                let when = Timestamp::from_second(ts)
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                let wait = u64::try_from(age.saturating_neg() - MAX_GFD_CLOCK_SKEW_SECONDS)
                    .unwrap_or(u64::MAX);
                return (
                    not_ready(
                        "GfdTimestampInFuture",
                        format!(
                            "{}={ts}{when} is more than {MAX_GFD_CLOCK_SKEW_SECONDS}s in the future: check the node's clock (NTP)",
                            nvidia::GFD_TIMESTAMP,
                        ),
                    ),
                    Some(wait),
                );
            }
            if age > max_age {
                let when = Timestamp::from_second(ts)
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                (
                    not_ready(
                        "GfdLabelsStale",
                        format!(
                            "{}={ts}{when} is older than the {} limit: GFD stopped refreshing its labels",
                            nvidia::GFD_TIMESTAMP,
                            human_seconds(max_age)
                        ),
                    ),
                    None,
                )
            } else {
                let left = u64::try_from(max_age - age.max(0) + 1).unwrap_or(1);
                (
                    ready(
                        "GfdLabelsFresh",
                        format!(
                            "GFD labels present and refreshed within the {} limit",
                            human_seconds(max_age)
                        ),
                    ),
                    Some(left),
                )
            }
        }
    }
}

/// FeatureDiscovery under DRA: the attributes come from the pool itself.
pub(super) fn dra_feature_layer(facts: &NodeFacts) -> Verdict {
    match &facts.evidence.dra {
        DraEvidence::Complete(p) => ready(
            reasons::DRA_ATTRIBUTES,
            format!(
                "GPU attributes come from the DRA driver's ResourceSlices (pool {}); GFD labels are not needed{}",
                p.pools.join(", "),
                p.describe_topology()
                    .map(|t| format!("; {t}"))
                    .unwrap_or_default()
            ),
        ),
        _ => unknown(
            reasons::DRA_ATTRIBUTES,
            "no complete gpu.nvidia.com pool to read GPU attributes from (see DevicePlugin)",
        ),
    }
    .via(Source::ResourceSlices)
}
