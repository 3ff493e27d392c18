//! Every layer's Ready / NotReady / Unknown verdict and reason, the malformed-label
//! cases, and gating, judged on nodes described with `NodeBuilder`.

use crate::common;

use common::*;
use gpuready_api::Layer;
use gpuready_api::keys::nvidia;
use gpuready_core::Status::{NotReady, Ready, Unknown};

// ---- Node ----

#[test]
fn node_is_ready_when_kubelet_reports_ready() {
    let r = judge("", &NodeBuilder::gpu("n"));
    r.expect(Layer::Node, Ready, "KubeletReady");
    assert!(r.ready());
}

#[test]
fn node_down_is_not_ready_and_every_layer_above_is_unknown() {
    let node = NodeBuilder::gpu("n").kubelet_not_ready("container runtime network not ready");
    let r = judge("", &node);
    r.expect(Layer::Node, NotReady, "KubeletNotReady")
        .mentions(&["container runtime network not ready"]);
    for layer in &Layer::ALL[1..] {
        r.expect(*layer, Unknown, "NodeNotReady");
    }
    assert_eq!(r.first_failure().map(|l| l.layer), Some(Layer::Node));
    assert!(!r.ready());
}

#[test]
fn node_whose_kubelet_stopped_posting_is_unknown() {
    let node = NodeBuilder::gpu("n").kubelet(
        "Unknown",
        "NodeStatusUnknown",
        "Kubelet stopped posting node status.",
    );
    judge("", &node)
        .expect(Layer::Node, Unknown, "KubeletStatusUnknown")
        .mentions(&["stopped posting"]);
}

#[test]
fn node_without_a_ready_condition_is_unknown() {
    let node = NodeBuilder::gpu("n").no_kubelet_condition();
    let r = judge("", &node);
    r.expect(Layer::Node, Unknown, "KubeletStatusUnknown")
        .mentions(&["no Ready condition"]);
    r.expect(Layer::Driver, Unknown, "NodeNotReady");
}

// ---- Hardware ----

#[test]
fn hardware_is_ready_for_every_nvidia_pci_label_form() {
    for label in [
        // NFD defaults: class + vendor (VGA and 3D controller).
        "feature.node.kubernetes.io/pci-0300_10de.present",
        "feature.node.kubernetes.io/pci-0302_10de.present",
        // GPU operator / device plugin chart NFD values: vendor only.
        "feature.node.kubernetes.io/pci-10de.present",
        // Extra fields configured: class, vendor, device.
        "feature.node.kubernetes.io/pci-0302_10de_2335.present",
    ] {
        let node = NodeBuilder::gpu("n")
            .unlabel("feature.node.kubernetes.io/pci-0300_10de.present")
            .unlabel(nvidia::GPU_PRODUCT)
            .label(label, "true");
        judge("", &node)
            .expect(Layer::Hardware, Ready, "NvidiaPciDevice")
            .mentions(&[label]);
    }
}

#[test]
fn hardware_is_not_ready_when_nfd_sees_only_other_vendors() {
    let node = NodeBuilder::gpu("n")
        .no_gfd()
        .unlabel("feature.node.kubernetes.io/pci-0300_10de.present")
        .label("feature.node.kubernetes.io/pci-0300_1002.present", "true")
        .label("feature.node.kubernetes.io/pci-10de.sriov.capable", "true");
    judge("", &node)
        .expect(Layer::Hardware, NotReady, "NoNvidiaPciDevice")
        .mentions(&["10de", "deviceClassWhitelist"]);
}

#[test]
fn hardware_is_ready_from_the_operators_gpu_present_label() {
    let node = NodeBuilder::gpu("n")
        .no_gfd()
        .no_nfd()
        .label(nvidia::GPU_PRESENT, "true");
    judge("", &node).expect(Layer::Hardware, Ready, "GpuPresent");
}

#[test]
fn hardware_is_not_ready_when_the_operator_says_gpu_present_false() {
    // The operator flips gpu.present to false when the PCI labels go away; it
    // wins over a PCI label that is still there.
    let node = NodeBuilder::gpu("n").label(nvidia::GPU_PRESENT, "false");
    judge("", &node)
        .expect(Layer::Hardware, NotReady, "GpuNotPresent")
        .mentions(&[nvidia::GPU_PRESENT]);
}

#[test]
fn hardware_with_a_garbled_gpu_present_is_malformed() {
    let node = NodeBuilder::gpu("n").label(nvidia::GPU_PRESENT, "yes");
    judge("", &node)
        .expect(Layer::Hardware, NotReady, "MalformedLabel")
        .mentions(&[nvidia::GPU_PRESENT, "yes"]);
}

#[test]
fn hardware_is_ready_when_only_gfd_labels_the_gpu() {
    let node = NodeBuilder::gpu("n").no_nfd();
    judge("", &node).expect(Layer::Hardware, Ready, "SeenByGfd");
}

#[test]
fn hardware_without_nfd_is_not_ready_when_gating() {
    let node = NodeBuilder::gpu("n").no_nfd().unlabel(nvidia::GPU_PRODUCT);
    let r = judge("", &node);
    r.expect(Layer::Hardware, NotReady, "NfdLabelsAbsent")
        .mentions(&["nfd-worker"]);
    assert!(!r.ready());
}

#[test]
fn hardware_without_nfd_is_unknown_and_harmless_when_not_gating() {
    let node = NodeBuilder::gpu("n").no_nfd().unlabel(nvidia::GPU_PRODUCT);
    let r = judge(
        "gatingLayers: [Node, Driver, DevicePlugin, FeatureDiscovery, Profile, Compatibility]",
        &node,
    );
    let hw = r.expect(Layer::Hardware, Unknown, "NfdLabelsAbsent");
    assert!(!hw.gating);
    assert!(r.ready(), "a non-gating layer must not hold the node back");
    assert!(r.first_failure().is_none());
}

// ---- Driver ----

#[test]
fn driver_at_or_above_the_minimum_is_ready() {
    let node = NodeBuilder::gpu("n").driver("580.178.04");
    judge("minDriverVersion: 580.65.06", &node)
        .expect(Layer::Driver, Ready, "DriverVersionOk")
        .mentions(&["580.178.04", "minimum 580.65.06"]);
    judge("minDriverVersion: 580.178.04", &node).expect(Layer::Driver, Ready, "DriverVersionOk");
    judge("", &node).expect(Layer::Driver, Ready, "DriverVersionOk");
}

#[test]
fn driver_below_the_minimum_is_too_old() {
    let node = NodeBuilder::gtx1070("n").driver("535.183.01");
    judge("minDriverVersion: 570.124.06", &node)
        .expect(Layer::Driver, NotReady, "DriverTooOld")
        .mentions(&["535.183.01", "570.124.06"]);
}

#[test]
fn driver_versions_compare_numerically_not_as_text() {
    // 570.26 < 570.124.06 although "26" > "124" as text.
    let node = NodeBuilder::gpu("n").driver("570.26");
    judge("minDriverVersion: 570.124.06", &node).expect(Layer::Driver, NotReady, "DriverTooOld");
    // Zero-padded revisions compare by value: 550.90.07 == 550.90.7.
    let node = NodeBuilder::gpu("n").driver("550.90.07");
    judge("minDriverVersion: 550.90.7", &node).expect(Layer::Driver, Ready, "DriverVersionOk");
}

#[test]
fn driver_with_a_two_part_version_is_valid() {
    // GFD writes rev="" for real 2-part releases such as 570.26 (CUDA 12.8 GA).
    let node = NodeBuilder::gpu("n").driver("570.26");
    assert_eq!(
        node.facts()
            .gfd
            .driver
            .present()
            .map(|v| v.as_str().to_owned()),
        Some("570.26".into())
    );
    let r = judge(
        "minDriverVersion: '570.26'\ncudaVersion: '12.8'",
        &node.cuda_runtime("12.8"),
    );
    r.expect(Layer::Driver, Ready, "DriverVersionOk");
    r.expect(Layer::FeatureDiscovery, Ready, "GfdLabelsFresh");
    r.expect(Layer::Compatibility, Ready, "Compatible");
}

#[test]
fn driver_from_the_deprecated_spelling_of_old_gfd() {
    let node = NodeBuilder::gpu("n").old_gfd_driver("550", "90", "07");
    judge("minDriverVersion: 550.54.14", &node)
        .expect(Layer::Driver, Ready, "DriverVersionOk")
        .mentions(&["550.90.07"]);
    let two_part = NodeBuilder::gpu("n").old_gfd_driver("570", "26", "");
    judge("minDriverVersion: 570.124.06", &two_part)
        .expect(Layer::Driver, NotReady, "DriverTooOld")
        .mentions(&["570.26"]);
}

#[test]
fn driver_from_the_new_split_keys_without_full() {
    let node = NodeBuilder::gpu("n")
        .no_driver()
        .label(nvidia::DRIVER_MAJOR, "580")
        .label(nvidia::DRIVER_MINOR, "65")
        .label(nvidia::DRIVER_REVISION, "06");
    judge("minDriverVersion: 580.65.06", &node)
        .expect(Layer::Driver, Ready, "DriverVersionOk")
        .mentions(&["580.65.06"]);
}

#[test]
fn driver_version_missing_while_gfd_runs_is_not_ready() {
    let node = NodeBuilder::gpu("n").no_driver();
    judge("", &node)
        .expect(Layer::Driver, NotReady, "DriverVersionMissing")
        .mentions(&["NVML"]);
}

#[test]
fn driver_without_any_gfd_label_is_unknown() {
    let node = NodeBuilder::gpu("n").no_gfd();
    judge("", &node).expect(Layer::Driver, Unknown, "NoGfdLabels");
}

#[test]
fn driver_rule_the_schema_refuses_is_unknown_not_a_crash() {
    let mut s = spec("");
    s.min_driver_version = Some("latest".into());
    let r = gpuready_core::evaluate(&s, &NodeBuilder::gpu("n").facts(), now());
    r.expect(Layer::Driver, Unknown, "InvalidProfile")
        .mentions(&["spec.minDriverVersion"]);
}

// ---- DevicePlugin ----

#[test]
fn device_plugin_is_ready_when_enough_gpus_are_allocatable() {
    judge("", &NodeBuilder::gpu("n"))
        .expect(Layer::DevicePlugin, Ready, "Allocatable")
        .mentions(&["nvidia.com/gpu: 1 allocatable"]);
}

#[test]
fn device_plugin_with_capacity_but_nothing_allocatable_reports_unhealthy_devices() {
    let node = NodeBuilder::rtx4070tis("n").gpus(1, 0);
    judge("", &node)
        .expect(Layer::DevicePlugin, NotReady, "DevicesUnhealthy")
        .mentions(&["allocatable 0", "capacity is 1"]);
}

#[test]
fn device_plugin_not_registered_means_the_resource_is_not_advertised() {
    let node = NodeBuilder::gpu("n").no_resource(nvidia::GPU_RESOURCE);
    judge("", &node)
        .expect(Layer::DevicePlugin, NotReady, "ResourceNotAdvertised")
        .mentions(&[nvidia::GPU_RESOURCE]);
}

#[test]
fn device_plugin_with_fewer_gpus_than_the_profile_counts() {
    let node = NodeBuilder::gpu("n").gpus(1, 1);
    judge("gpu: {count: 2}", &node)
        .expect(Layer::DevicePlugin, NotReady, "TooFewDevices")
        .mentions(&["allocatable 1", "< 2"]);
    let node = NodeBuilder::gpu("n")
        .gpus(2, 2)
        .label(nvidia::GPU_COUNT, "2");
    judge("gpu: {count: 2}", &node).expect(Layer::DevicePlugin, Ready, "Allocatable");
}

#[test]
fn device_plugin_checks_explicit_resources_instead_of_the_default() {
    // Time-slicing with renameByDefault: 4 replicas advertised as nvidia.com/gpu.shared.
    let shared = NodeBuilder::gpu("n")
        .no_resource(nvidia::GPU_RESOURCE)
        .resource("nvidia.com/gpu.shared", "4", "4");
    let yaml = "resources: {nvidia.com/gpu.shared: 4}";
    judge(yaml, &shared)
        .expect(Layer::DevicePlugin, Ready, "Allocatable")
        .mentions(&["nvidia.com/gpu.shared: 4 allocatable"]);
    // Without the explicit rule, the renamed resource is not what the default looks for.
    judge("", &shared).expect(Layer::DevicePlugin, NotReady, "ResourceNotAdvertised");
    let plain = NodeBuilder::gpu("n");
    judge(yaml, &plain)
        .expect(Layer::DevicePlugin, NotReady, "ResourceNotAdvertised")
        .mentions(&["nvidia.com/gpu.shared"]);
    let short = NodeBuilder::gpu("n").resource("nvidia.com/gpu.shared", "4", "3");
    judge(yaml, &short).expect(Layer::DevicePlugin, NotReady, "DevicesUnhealthy");
}

#[test]
fn device_plugin_under_mig_mixed_accepts_any_mig_resource() {
    let node = NodeBuilder::a100_mig_mixed("n");
    judge("", &node)
        .expect(Layer::DevicePlugin, Ready, "Allocatable")
        .mentions(&["3 MIG devices"]);
    let none = NodeBuilder::a100_mig_mixed("n")
        .resource("nvidia.com/mig-1g.5gb", "1", "0")
        .resource("nvidia.com/mig-2g.10gb", "1", "0")
        .resource("nvidia.com/mig-3g.20gb", "1", "0");
    judge("", &none).expect(Layer::DevicePlugin, NotReady, "MigResourcesMissing");
    // An explicit resource list wins over the MIG default.
    judge("resources: {nvidia.com/mig-1g.5gb: 2}", &node)
        .expect(Layer::DevicePlugin, NotReady, "TooFewDevices")
        .mentions(&["nvidia.com/mig-1g.5gb"]);
}

#[test]
fn device_plugin_with_a_garbled_quantity_is_not_ready() {
    let node = NodeBuilder::gpu("n").resource(nvidia::GPU_RESOURCE, "1", "500m");
    judge("", &node)
        .expect(Layer::DevicePlugin, NotReady, "MalformedQuantity")
        .mentions(&["500m"]);
}

// ---- FeatureDiscovery ----

#[test]
fn feature_discovery_fresh_labels_are_ready_with_a_recheck_time() {
    let r = judge("maxLabelAgeSeconds: 3600", &NodeBuilder::gpu("n"));
    r.expect(Layer::FeatureDiscovery, Ready, "GfdLabelsFresh")
        .mentions(&["within the 1h limit"]);
    // 45 s old, stale once older than 3600 s: 3556 s from now.
    assert_eq!(r.recheck_after_seconds, Some(3600 - 45 + 1));
}

#[test]
fn feature_discovery_goes_stale_exactly_after_the_limit() {
    let at_limit = NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, &seconds_ago(600));
    let r = judge("maxLabelAgeSeconds: 600", &at_limit);
    r.expect(Layer::FeatureDiscovery, Ready, "GfdLabelsFresh");
    assert_eq!(r.recheck_after_seconds, Some(1));
    let over = NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, &seconds_ago(601));
    judge("maxLabelAgeSeconds: 600", &over).expect(
        Layer::FeatureDiscovery,
        NotReady,
        "GfdLabelsStale",
    );
}

#[test]
fn feature_discovery_future_timestamp_is_fresh_only_within_the_clock_skew() {
    let ahead = |s: i64| NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, &seconds_ago(-s));
    judge("maxLabelAgeSeconds: 3600", &ahead(60)).expect(
        Layer::FeatureDiscovery,
        Ready,
        "GfdLabelsFresh",
    );
    let r = judge("maxLabelAgeSeconds: 3600", &ahead(3 * 86_400));
    r.expect(Layer::FeatureDiscovery, NotReady, "GfdTimestampInFuture")
        .mentions(&[nvidia::GFD_TIMESTAMP, "in the future", "clock"]);
    // Re-judged once the clock is within the skew again.
    assert_eq!(r.recheck_after_seconds, Some(3 * 86_400 - 60));
}

#[test]
fn feature_discovery_stale_timestamp_is_not_ready() {
    let node = NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, &seconds_ago(3 * 86_400));
    let r = judge("maxLabelAgeSeconds: 3600", &node);
    r.expect(Layer::FeatureDiscovery, NotReady, "GfdLabelsStale")
        .mentions(&[
            nvidia::GFD_TIMESTAMP,
            "2026-11-26T12:00:00Z",
            "older than the 1h limit",
        ]);
    assert_eq!(
        r.recheck_after_seconds, None,
        "stale stays stale without a node change"
    );
}

#[test]
fn feature_discovery_age_check_can_be_disabled() {
    let node = NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, &seconds_ago(3 * 86_400));
    let r = judge("maxLabelAgeSeconds: 0", &node);
    r.expect(Layer::FeatureDiscovery, Ready, "GfdLabelsPresent");
    assert_eq!(r.recheck_after_seconds, None);
}

#[test]
fn feature_discovery_without_a_timestamp_is_ready_but_says_so() {
    let node = NodeBuilder::gpu("n").unlabel(nvidia::GFD_TIMESTAMP);
    let r = judge("", &node);
    r.expect(Layer::FeatureDiscovery, Ready, "GfdLabelsPresent")
        .mentions(&["no gfd.timestamp"]);
    assert_eq!(r.recheck_after_seconds, None);
}

#[test]
fn feature_discovery_tolerates_a_timestamp_from_a_clock_ahead() {
    let node = NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, &seconds_ago(-30));
    let r = judge("maxLabelAgeSeconds: 600", &node);
    r.expect(Layer::FeatureDiscovery, Ready, "GfdLabelsFresh");
    assert!(
        r.recheck_after_seconds
            .is_some_and(|s| (1..=601).contains(&s))
    );
}

#[test]
fn feature_discovery_without_gfd_labels_is_not_ready() {
    // The operator's own labels are not GFD's.
    let node = NodeBuilder::gpu("n")
        .no_gfd()
        .label(nvidia::GPU_PRESENT, "true")
        .label("nvidia.com/gpu.deploy.gpu-feature-discovery", "true")
        // Set by the admin to pick the operator's operand set; not GFD's.
        .label("nvidia.com/gpu.workload.config", "container");
    let r = judge("", &node);
    r.expect(Layer::FeatureDiscovery, NotReady, "GfdLabelsMissing")
        .mentions(&["gpu-feature-discovery"]);
    r.expect(Layer::Driver, Unknown, "NoGfdLabels");
    r.expect(Layer::Hardware, Ready, "NvidiaPciDevice");
}

#[test]
fn feature_discovery_names_the_labels_the_profile_needs_but_lacks() {
    let node = NodeBuilder::gpu("n")
        .unlabel(nvidia::GPU_MEMORY)
        .unlabel(nvidia::GPU_COUNT);
    let r = judge("gpu: {minMemoryMib: 16000, count: 1}", &node);
    r.expect(Layer::FeatureDiscovery, NotReady, "GfdLabelsMissing")
        .mentions(&[nvidia::GPU_MEMORY, nvidia::GPU_COUNT]);
    r.expect(Layer::Profile, Unknown, "GfdLabelMissing")
        .mentions(&[nvidia::GPU_MEMORY]);
    // A profile that does not look at memory does not need the label.
    judge("", &node).expect(Layer::FeatureDiscovery, Ready, "GfdLabelsFresh");
}

// ---- Profile ----

#[test]
fn profile_matches_product_memory_compute_family_and_count() {
    let r = judge(
        "gpu: {products: [NVIDIA-GeForce-RTX-3090], minMemoryMib: 24576, minComputeCapability: '8.6', families: [ampere], count: 1}",
        &NodeBuilder::gpu("n"),
    );
    r.expect(Layer::Profile, Ready, "ProfileMatches")
        .mentions(&[
            "NVIDIA-GeForce-RTX-3090",
            "24576 MiB",
            "compute 8.6",
            "ampere",
            "1 GPU(s)",
        ]);
}

#[test]
fn profile_without_expectations_is_ready() {
    judge("", &NodeBuilder::gpu("n")).expect(Layer::Profile, Ready, "NoExpectations");
}

#[test]
fn profile_products_tolerate_the_nvidia_prefix_both_ways() {
    // Older drivers name the card without "NVIDIA ".
    let old_driver = NodeBuilder::gtx1070("n").label(nvidia::GPU_PRODUCT, "GeForce-GTX-1070");
    judge("gpu: {products: [NVIDIA-GeForce-GTX-1070]}", &old_driver).expect(
        Layer::Profile,
        Ready,
        "ProfileMatches",
    );
    judge(
        "gpu: {products: [GeForce-GTX-1070]}",
        &NodeBuilder::gtx1070("n"),
    )
    .expect(Layer::Profile, Ready, "ProfileMatches");
    // Quadro M5000 never had the prefix.
    judge(
        "gpu: {products: [Quadro-M5000]}",
        &NodeBuilder::quadro_m5000("n"),
    )
    .expect(Layer::Profile, Ready, "ProfileMatches");
}

#[test]
fn profile_products_tolerate_the_shared_suffix_of_time_slicing() {
    let node = NodeBuilder::gpu("n")
        .label(nvidia::GPU_PRODUCT, "NVIDIA-GeForce-RTX-3090-SHARED")
        .label(nvidia::GPU_REPLICAS, "4");
    judge("gpu: {products: [NVIDIA-GeForce-RTX-3090]}", &node).expect(
        Layer::Profile,
        Ready,
        "ProfileMatches",
    );
    judge("gpu: {products: ['*RTX-30*']}", &node).expect(Layer::Profile, Ready, "ProfileMatches");
}

#[test]
fn profile_products_accept_globs_case_insensitively() {
    let node = NodeBuilder::rtx4070tis("n");
    judge(
        "gpu: {products: [NVIDIA-GeForce-RTX-3090, NVIDIA-GeForce-RTX-4070-Ti*]}",
        &node,
    )
    .expect(Layer::Profile, Ready, "ProfileMatches");
    judge("gpu: {products: [nvidia-geforce-rtx-4070-ti-super]}", &node).expect(
        Layer::Profile,
        Ready,
        "ProfileMatches",
    );
    judge("gpu: {products: ['*GTX-1070']}", &NodeBuilder::gtx1070("n")).expect(
        Layer::Profile,
        Ready,
        "ProfileMatches",
    );
}

#[test]
fn profile_product_mismatch_is_not_ready() {
    judge(
        "gpu: {products: [NVIDIA-GeForce-RTX-3090]}",
        &NodeBuilder::rtx4070tis("n"),
    )
    .expect(Layer::Profile, NotReady, "ProductMismatch")
    .mentions(&[
        "NVIDIA-GeForce-RTX-4070-Ti-SUPER",
        "NVIDIA-GeForce-RTX-3090",
    ]);
    // A name is not a prefix: the 3090 Ti is another card.
    let ti = NodeBuilder::gpu("n").label(nvidia::GPU_PRODUCT, "NVIDIA-GeForce-RTX-3090-Ti");
    judge("gpu: {products: [NVIDIA-GeForce-RTX-3090]}", &ti).expect(
        Layer::Profile,
        NotReady,
        "ProductMismatch",
    );
}

#[test]
fn profile_with_products_but_no_product_label_is_unknown() {
    let node = NodeBuilder::gpu("n").unlabel(nvidia::GPU_PRODUCT);
    let r = judge("gpu: {products: [NVIDIA-GeForce-RTX-3090]}", &node);
    r.expect(Layer::Profile, Unknown, "GfdLabelMissing")
        .mentions(&[nvidia::GPU_PRODUCT]);
    r.expect(Layer::FeatureDiscovery, NotReady, "GfdLabelsMissing");
}

#[test]
fn profile_memory_below_the_minimum() {
    // The 4070 Ti SUPER reports 16376 MiB, not 16384.
    judge("gpu: {minMemoryMib: 16384}", &NodeBuilder::rtx4070tis("n"))
        .expect(Layer::Profile, NotReady, "MemoryTooSmall")
        .mentions(&["16376 MiB < 16384 MiB"]);
    judge("gpu: {minMemoryMib: 16000}", &NodeBuilder::rtx4070tis("n")).expect(
        Layer::Profile,
        Ready,
        "ProfileMatches",
    );
}

#[test]
fn profile_compute_capability_below_the_minimum() {
    judge(
        "gpu: {minComputeCapability: '7.5'}",
        &NodeBuilder::gtx1070("n"),
    )
    .expect(Layer::Profile, NotReady, "ComputeCapabilityTooLow")
    .mentions(&["6.1 < 7.5"]);
    judge(
        "gpu: {minComputeCapability: '8.6'}",
        &NodeBuilder::rtx4070tis("n"),
    )
    .expect(Layer::Profile, Ready, "ProfileMatches");
    // 10.0 > 8.9 numerically, not as text.
    let blackwell = NodeBuilder::gpu("n")
        .compute(10, 0)
        .label(nvidia::GPU_FAMILY, "blackwell");
    judge("gpu: {minComputeCapability: '8.9'}", &blackwell).expect(
        Layer::Profile,
        Ready,
        "ProfileMatches",
    );
}

#[test]
fn profile_families_allowed_and_not_allowed() {
    let yaml = "gpu: {families: [ampere, ada-lovelace]}";
    judge(yaml, &NodeBuilder::gpu("n")).expect(Layer::Profile, Ready, "ProfileMatches");
    judge(yaml, &NodeBuilder::rtx4070tis("n"))
        .expect(Layer::Profile, Ready, "ProfileMatches")
        .mentions(&["ada-lovelace"]);
    judge(yaml, &NodeBuilder::gtx1070("n"))
        .expect(Layer::Profile, NotReady, "FamilyNotAllowed")
        .mentions(&["pascal", "ampere, ada-lovelace"]);
}

#[test]
fn profile_family_ada_lovelace_comes_from_compute_capability_on_old_gfd() {
    // GFD before v0.17.1 labels 8.9 as ampere.
    let old_gfd = NodeBuilder::rtx4070tis("n").label(nvidia::GPU_FAMILY, "ampere");
    judge("gpu: {families: [ada-lovelace]}", &old_gfd)
        .expect(Layer::Profile, Ready, "ProfileMatches")
        .mentions(&["ada-lovelace"]);
    judge("gpu: {families: [ampere]}", &old_gfd)
        .expect(Layer::Profile, NotReady, "FamilyNotAllowed")
        .mentions(&["ada-lovelace"]);
}

#[test]
fn profile_family_blackwell_comes_from_compute_capability_when_gfd_says_undefined() {
    // GPU operator v25.3.x ships GFD v0.17.1, which labels CC 10/12 `undefined`.
    for (major, minor) in [(10, 0), (12, 0)] {
        let node = NodeBuilder::gpu("n")
            .label(nvidia::GPU_PRODUCT, "NVIDIA-RTX-PRO-6000-Blackwell")
            .compute(major, minor)
            .label(nvidia::GPU_FAMILY, "undefined");
        judge("gpu: {families: [blackwell]}", &node)
            .expect(Layer::Profile, Ready, "ProfileMatches")
            .mentions(&["blackwell"]);
    }
}

#[test]
fn profile_excluded_family() {
    judge(
        "gpu: {excludedFamilies: [maxwell]}",
        &NodeBuilder::quadro_m5000("n"),
    )
    .expect(Layer::Profile, NotReady, "FamilyExcluded")
    .mentions(&["maxwell"]);
    judge(
        "gpu: {excludedFamilies: [maxwell]}",
        &NodeBuilder::gtx1070("n"),
    )
    .expect(Layer::Profile, Ready, "ProfileMatches");
    // Excluded wins over allowed. Such a profile is refused at admission and
    // offline now (issue 24); one stored before the rule is judged this way.
    let mut both = spec("gpu: {families: [pascal], excludedFamilies: [maxwell]}");
    both.gpu
        .families
        .push(gpuready_api::profile::Family::Maxwell);
    assert!(!both.validate().is_empty(), "refused offline");
    gpuready_core::evaluate(&both, &NodeBuilder::quadro_m5000("n").facts(), now()).expect(
        Layer::Profile,
        NotReady,
        "FamilyExcluded",
    );
}

#[test]
fn profile_count_above_what_gfd_reports() {
    judge("gpu: {count: 2}", &NodeBuilder::gpu("n").gpus(2, 2))
        .expect(Layer::Profile, NotReady, "TooFewGpus")
        .mentions(&[nvidia::GPU_COUNT, "1 GPU(s) < 2"]);
}

// ---- Compatibility ----

#[test]
fn compatibility_is_ready_when_cuda_fits_card_and_driver() {
    judge("cudaVersion: '13.0'", &NodeBuilder::gpu("n"))
        .expect(Layer::Compatibility, Ready, "Compatible")
        .mentions(&["CUDA 13.0", "compute 8.6", "580.178.04"]);
    judge("cudaVersion: '12.8'", &NodeBuilder::gtx1070("n")).expect(
        Layer::Compatibility,
        Ready,
        "Compatible",
    );
}

#[test]
fn compatibility_without_a_declared_cuda_checks_only_driver_and_card() {
    judge("", &NodeBuilder::gpu("n"))
        .expect(Layer::Compatibility, Ready, "Compatible")
        .mentions(&["no CUDA version declared"]);
    judge(
        "",
        &NodeBuilder::gpu("n").unlabel_prefix("nvidia.com/gpu.compute"),
    )
    .expect(Layer::Compatibility, Unknown, "GfdLabelMissing");
}

#[test]
fn compatibility_cuda_13_cannot_target_pascal_maxwell_or_volta() {
    for (node, family) in [
        (NodeBuilder::gtx1070("n"), "pascal"),
        (NodeBuilder::quadro_m5000("n"), "maxwell"),
        (
            NodeBuilder::gpu("n")
                .compute(7, 0)
                .label(nvidia::GPU_FAMILY, "volta"),
            "volta",
        ),
    ] {
        judge("cudaVersion: '13.0'", &node)
            .expect(Layer::Compatibility, NotReady, "CudaDropsArchitecture")
            .mentions(&["CUDA 13.0", family, "7.5"]);
    }
    // Turing is the oldest CUDA 13 target.
    let turing = NodeBuilder::gpu("n")
        .compute(7, 5)
        .label(nvidia::GPU_FAMILY, "turing");
    judge("cudaVersion: '13.0'", &turing).expect(Layer::Compatibility, Ready, "Compatible");
}

#[test]
fn compatibility_driver_below_the_cuda_minimum() {
    let node = NodeBuilder::gtx1070("n")
        .driver("535.183.01")
        .cuda_runtime("12.2");
    judge("cudaVersion: '12.8'", &node)
        .expect(Layer::Compatibility, NotReady, "DriverTooOldForCuda")
        .mentions(&["CUDA 12.8", "570.26", "535.183.01"]);
    let node = NodeBuilder::gpu("n").driver("580.65.05");
    judge("cudaVersion: '13.0'", &node)
        .expect(Layer::Compatibility, NotReady, "DriverTooOldForCuda")
        .mentions(&["580.65.06"]);
}

#[test]
fn compatibility_runtime_version_below_the_declared_cuda() {
    let node = NodeBuilder::gpu("n")
        .driver("580.65.06")
        .cuda_runtime("12.9");
    judge("cudaVersion: '13.0'", &node)
        .expect(Layer::Compatibility, NotReady, "CudaRuntimeTooOld")
        .mentions(&["up to 12.9", "need 13.0"]);
    let missing = NodeBuilder::gpu("n").no_cuda_runtime();
    judge("cudaVersion: '13.0'", &missing)
        .expect(Layer::Compatibility, Unknown, "GfdLabelMissing")
        .mentions(&[nvidia::RUNTIME_FULL]);
}

#[test]
fn compatibility_runtime_from_the_deprecated_spelling() {
    let node = NodeBuilder::gpu("n")
        .no_cuda_runtime()
        .label(nvidia::RUNTIME_MAJOR_OLD, "12")
        .label(nvidia::RUNTIME_MINOR_OLD, "4")
        .driver("550.90.07");
    judge("cudaVersion: '12.4'", &node).expect(Layer::Compatibility, Ready, "Compatible");
    judge("cudaVersion: '12.8'", &node).expect(
        Layer::Compatibility,
        NotReady,
        "DriverTooOldForCuda",
    );
}

#[test]
fn compatibility_driver_after_r580_drops_volta_and_pascal() {
    for cc in [(6, 1), (7, 0), (5, 2)] {
        let node = NodeBuilder::gtx1070("n")
            .compute(cc.0, cc.1)
            .driver("590.44.01")
            .cuda_runtime("13.1");
        judge("", &node)
            .expect(Layer::Compatibility, NotReady, "DriverDropsArchitecture")
            .mentions(&["590.44.01", "R580"]);
    }
    // R580 itself still drives them; Turing and newer take any branch.
    judge("", &NodeBuilder::gtx1070("n").driver("580.159.04")).expect(
        Layer::Compatibility,
        Ready,
        "Compatible",
    );
    judge("", &NodeBuilder::gpu("n").compute(7, 5).driver("595.71.05")).expect(
        Layer::Compatibility,
        Ready,
        "Compatible",
    );
}

#[test]
fn compatibility_unknown_cuda_release_is_unknown() {
    for cuda in ["12.7", "14.0"] {
        judge(
            &format!("cudaVersion: '{cuda}'"),
            &NodeBuilder::gpu("n").driver("999.1.1"),
        )
        .expect(Layer::Compatibility, Unknown, "UnknownCudaRelease")
        .mentions(&[cuda]);
    }
}

// ---- Malformed labels ----

#[test]
fn malformed_memory_with_a_unit() {
    let node = NodeBuilder::gpu("n").label(nvidia::GPU_MEMORY, "24GB");
    let r = judge("gpu: {minMemoryMib: 16000}", &node);
    r.expect(Layer::FeatureDiscovery, NotReady, "MalformedLabel")
        .mentions(&[nvidia::GPU_MEMORY, "24GB"]);
    r.expect(Layer::Profile, NotReady, "MalformedLabel")
        .mentions(&[nvidia::GPU_MEMORY]);
}

#[test]
fn malformed_compute_major() {
    let node = NodeBuilder::gpu("n").label(nvidia::GPU_COMPUTE_MAJOR, "x");
    let r = judge(
        "gpu: {minComputeCapability: '8.0'}\ncudaVersion: '13.0'",
        &node,
    );
    for layer in [
        Layer::FeatureDiscovery,
        Layer::Profile,
        Layer::Compatibility,
    ] {
        r.expect(layer, NotReady, "MalformedLabel")
            .mentions(&[nvidia::GPU_COMPUTE_MAJOR, "\"x\""]);
    }
    // Half a compute capability is malformed too, naming the missing half.
    let half = NodeBuilder::gpu("n").unlabel(nvidia::GPU_COMPUTE_MINOR);
    judge("gpu: {minComputeCapability: '8.0'}", &half)
        .expect(Layer::Profile, NotReady, "MalformedLabel")
        .mentions(&[nvidia::GPU_COMPUTE_MINOR]);
}

#[test]
fn malformed_driver_rev_empty_is_valid_for_a_consistent_two_part_version() {
    // Every spelling agrees on 570.26: rev="" is not malformed.
    let node = NodeBuilder::gpu("n").driver("570.26");
    assert_eq!(
        node.facts().gfd.malformed(),
        Vec::<&gpuready_core::facts::Malformed>::new()
    );
    assert_eq!(
        common::labels_of(&node.clone().build())
            .get(nvidia::DRIVER_REV_OLD)
            .map(String::as_str),
        Some("")
    );
    judge("", &node).expect(Layer::Driver, Ready, "DriverVersionOk");
}

#[test]
fn malformed_driver_with_one_or_four_parts() {
    for bad in ["580", "580.65.06.1"] {
        let node = NodeBuilder::gpu("n")
            .no_driver()
            .label(nvidia::DRIVER_FULL, bad);
        let r = judge("", &node);
        r.expect(Layer::Driver, NotReady, "MalformedLabel")
            .mentions(&[nvidia::DRIVER_FULL, bad]);
        r.expect(Layer::FeatureDiscovery, NotReady, "MalformedLabel");
    }
    // The split keys of a 4-part string: rev carries the extra dot.
    let node = NodeBuilder::gpu("n").old_gfd_driver("580", "65", "06.1");
    judge("", &node)
        .expect(Layer::Driver, NotReady, "MalformedLabel")
        .mentions(&[nvidia::DRIVER_MAJOR_OLD]);
    // A 1-part string split by GFD: minor and rev empty.
    let node = NodeBuilder::gpu("n").old_gfd_driver("580", "", "");
    judge("", &node)
        .expect(Layer::Driver, NotReady, "MalformedLabel")
        .mentions(&[nvidia::DRIVER_MAJOR_OLD]);
}

#[test]
fn malformed_driver_with_the_minor_missing() {
    let node = NodeBuilder::gpu("n")
        .no_driver()
        .label(nvidia::DRIVER_MAJOR_OLD, "570")
        .label(nvidia::DRIVER_REV_OLD, "");
    judge("", &node)
        .expect(Layer::Driver, NotReady, "MalformedLabel")
        .mentions(&[nvidia::DRIVER_MINOR_OLD]);
    let node = NodeBuilder::gpu("n")
        .no_driver()
        .label(nvidia::DRIVER_MAJOR, "570")
        .label(nvidia::DRIVER_REVISION, "");
    judge("", &node)
        .expect(Layer::Driver, NotReady, "MalformedLabel")
        .mentions(&[nvidia::DRIVER_MINOR]);
}

#[test]
fn malformed_undefined_family_when_the_profile_constrains_families() {
    // CC 11 (Jetson Thor under CUDA 13): GFD has no family name for it.
    let node = NodeBuilder::gpu("n")
        .compute(11, 0)
        .label(nvidia::GPU_FAMILY, "undefined");
    judge("gpu: {families: [blackwell]}", &node)
        .expect(Layer::Profile, NotReady, "MalformedLabel")
        .mentions(&[nvidia::GPU_FAMILY, "undefined", "compute 11.0"]);
    judge("gpu: {excludedFamilies: [maxwell]}", &node)
        .expect(Layer::Profile, NotReady, "MalformedLabel")
        .mentions(&[nvidia::GPU_FAMILY]);
    // No compute labels at all: the family label is all there is.
    let no_cc = NodeBuilder::gpu("n")
        .unlabel_prefix("nvidia.com/gpu.compute")
        .label(nvidia::GPU_FAMILY, "undefined");
    judge("gpu: {families: [ampere]}", &no_cc)
        .expect(Layer::Profile, NotReady, "MalformedLabel")
        .mentions(&[nvidia::GPU_FAMILY]);
    // A profile that does not look at families does not care.
    judge("", &node).expect(Layer::Profile, Ready, "NoExpectations");
}

#[test]
fn malformed_count_and_timestamp() {
    let node = NodeBuilder::gpu("n").label(nvidia::GPU_COUNT, "two");
    let r = judge("gpu: {count: 1}", &node);
    r.expect(Layer::FeatureDiscovery, NotReady, "MalformedLabel")
        .mentions(&[nvidia::GPU_COUNT]);
    r.expect(Layer::Profile, NotReady, "MalformedLabel");
    let node = NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, "yesterday");
    judge("", &node)
        .expect(Layer::FeatureDiscovery, NotReady, "MalformedLabel")
        .mentions(&[nvidia::GFD_TIMESTAMP, "Unix seconds"]);
}

// ---- Gating ----

#[test]
fn gating_a_failing_non_gating_layer_does_not_block_readiness() {
    let stale = NodeBuilder::gpu("n").label(nvidia::GFD_TIMESTAMP, &seconds_ago(86_400));
    let r = judge(
        "gatingLayers: [Node, Hardware, Driver, DevicePlugin]\ncudaVersion: '13.0'\ngpu: {products: [NVIDIA-GeForce-RTX-4090]}",
        &stale,
    );
    let fd = r.expect(Layer::FeatureDiscovery, NotReady, "GfdLabelsStale");
    assert!(!fd.gating);
    r.expect(Layer::Profile, NotReady, "ProductMismatch");
    assert!(r.ready());
    assert_eq!(r.failures().count(), 0);
    // The same node under the default (every layer gates) is held back, by the
    // lowest failing layer first.
    let r = judge("gpu: {products: [NVIDIA-GeForce-RTX-4090]}", &stale);
    assert!(!r.ready());
    assert_eq!(
        r.first_failure().map(|l| l.layer),
        Some(Layer::FeatureDiscovery)
    );
    assert_eq!(r.failures().count(), 2);
}

#[test]
fn gating_layers_are_reported_in_bottom_up_order_whatever_the_profile_lists() {
    let r = judge(
        "gatingLayers: [Compatibility, Node]",
        &NodeBuilder::gpu("n"),
    );
    let layers: Vec<Layer> = r.layers.iter().map(|l| l.layer).collect();
    assert_eq!(layers, Layer::ALL);
    let gating: Vec<Layer> = r
        .layers
        .iter()
        .filter(|l| l.gating)
        .map(|l| l.layer)
        .collect();
    assert_eq!(gating, [Layer::Node, Layer::Compatibility]);
}
