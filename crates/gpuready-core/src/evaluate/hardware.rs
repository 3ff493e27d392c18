//! The Hardware layer: an NVIDIA PCI device, seen by NFD (labels or its PCI
//! scan), the GPU operator, GFD or the DRA driver, bound for the profile's workload.

use gpuready_api::keys::{nvidia, reasons};
use gpuready_api::{GpuNodeProfileSpec, Layer};

use super::verdict::{Verdict, malformed, not_ready, ready, unknown};
use crate::evidence::Source;
use crate::facts::NodeFacts;

pub(super) fn hardware_layer(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> Verdict {
    // How the GPUs are bound (nvidia driver or vfio-pci) decides what every
    // layer above can read, so a node serving another workload fails here.
    if let Some(label) = facts.labels.get(nvidia::WORKLOAD_CONFIG)
        && label != spec.workload.label_value()
    {
        return not_ready(
            reasons::WORKLOAD_MISMATCH,
            format!(
                "{}={label} but the profile serves {} nodes: relabel the node or select it with a profile for {label}",
                nvidia::WORKLOAD_CONFIG,
                spec.workload.label_value()
            ),
        )
        .via(Source::Profile);
    }
    let hw = &facts.hardware;
    if let Some(m) = hw.gpu_present.malformed() {
        return malformed(m);
    }
    if hw.gpu_present.present() == Some(&false) {
        return not_ready(
            "GpuNotPresent",
            format!(
                "{}=false: the GPU operator no longer sees an NVIDIA PCI device",
                nvidia::GPU_PRESENT
            ),
        );
    }
    if let Some(bus) = &facts.evidence.bus
        && bus.gpus > 0
    {
        let mixed = if bus.models.len() > 1 {
            format!(
                "; {} GPU models on one node: GFD labels only one of them, so product rules judge a random one",
                bus.models.len()
            )
        } else {
            String::new()
        };
        return ready(
            reasons::NVIDIA_GPUS_ON_BUS,
            format!(
                "NFD's PCI scan ({}) shows {} NVIDIA GPU(s): {}{mixed}",
                bus.objects.join(", "),
                bus.gpus,
                bus.describe()
            ),
        )
        .via(Source::NodeFeature);
    }
    if let Some(label) = hw.nvidia_pci_labels.first() {
        return ready(
            "NvidiaPciDevice",
            format!("NFD sees an NVIDIA PCI device ({label})"),
        );
    }
    if hw.gpu_present.present() == Some(&true) {
        return ready("GpuPresent", format!("{}=true", nvidia::GPU_PRESENT));
    }
    if facts.gfd.product.is_some() {
        return ready(
            "SeenByGfd",
            "GFD labels the node's GPU, so the device is present",
        )
        .via(Source::GfdLabels);
    }
    if let Some(p) = facts.evidence.dra.complete()
        && p.physical_gpus(false) > 0
    {
        return ready(
            reasons::SEEN_BY_DRA_DRIVER,
            format!(
                "the DRA driver publishes {} GPU(s) for the node",
                p.physical_gpus(false)
            ),
        )
        .via(Source::ResourceSlices);
    }
    if !hw.nfd_seen {
        let msg =
            "no NFD labels on the node (feature.node.kubernetes.io/*): is nfd-worker running here?";
        return if spec.is_gating(Layer::Hardware) {
            not_ready("NfdLabelsAbsent", msg)
        } else {
            unknown("NfdLabelsAbsent", msg)
        };
    }
    not_ready(
        "NoNvidiaPciDevice",
        "NFD labels the node but shows no NVIDIA PCI device (vendor 10de): check PCI passthrough from the hypervisor, and NFD's pci deviceClassWhitelist (03 or 0300/0302)",
    )
}
