//! Tests of `validate`, in their own file beside it.

use super::*;

/// The CEL rules spell the reserved domains and autoscaler prefixes by hand
/// (attribute strings cannot be built from constants): keep them equal.
#[test]
fn crd_rules_name_every_reserved_domain_and_prefix() {
    let crd = serde_json::to_string(&crate::crd::gpu_node_profile_crd()).unwrap_or_default();
    for d in crate::keys::RESERVED_KEY_DOMAINS {
        let escaped = d.replace('.', "\\\\\\\\.");
        assert_eq!(
            [
                format!("({escaped}|"),
                format!("|{escaped}|"),
                format!("|{escaped})"),
            ]
            .iter()
            .map(|alt| crd.matches(alt.as_str()).count())
            .sum::<usize>(),
            2 + usize::from(crate::keys::RESERVED_RESOURCE_DOMAINS.contains(d)),
            "{d} in both the taint and the readyLabels rule (and the resources rule)"
        );
    }
    for p in crate::keys::AUTOSCALER_TAINT_PREFIXES {
        assert!(crd.contains(&format!("startsWith('{p}')")), "{p}");
    }
}

/// The CEL rules spell the owned-key test by hand: keep it equal to
/// [`OWNED_KEY_CEL_REGEX`], and the regex equal to [`is_owned_key`].
#[test]
fn crd_rules_refuse_owned_keys_in_selector_and_ready_labels() {
    fn rules(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(serde_json::Value::String(r)) = m.get("rule") {
                    out.push(r.clone());
                }
                m.values().for_each(|c| rules(c, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|c| rules(c, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    rules(
        &serde_json::to_value(crate::crd::gpu_node_profile_crd()).unwrap_or_default(),
        &mut all,
    );
    assert_eq!(
        all.iter()
            .filter(|r| r.contains(OWNED_KEY_CEL_REGEX))
            .count(),
        3,
        "matchLabels, matchExpressions[].key and readyLabels"
    );
    for k in [
        "gpuready.io/ready",
        "gpuready.io/profile",
        "gpuready.io/ready-x",
        "a.gpuready.io/x",
    ] {
        assert!(is_owned_key(k), "{k}");
    }
    for k in ["gpuready.io", "notgpuready.io/x", "example.com/gpuready.io"] {
        assert!(!is_owned_key(k), "{k}");
    }
}

#[test]
fn mig_profile_names() {
    for ok in ["1g.18gb", "1g.18gb+me", "1g.18gb.me", "7g.141gb", "3g.71gb"] {
        assert!(is_mig_profile(ok), "{ok}");
    }
    for bad in [
        "",
        "1g",
        "g.18gb",
        "1g.gb",
        "1g.18GB",
        "1g.18gb-me",
        "1g.18gb+",
        "x1g.18gb",
    ] {
        assert!(!is_mig_profile(bad), "{bad}");
    }
}

#[test]
fn reserved_keys_and_patterns() {
    assert!(is_reserved_taint_key("nvidia.com/gpu"));
    assert!(is_reserved_taint_key("node.kubernetes.io/unschedulable"));
    assert!(is_reserved_taint_key("x.readiness.k8s.io/gpu"));
    assert!(is_reserved_taint_key("node.cluster.x-k8s.io/uninitialized"));
    assert!(!is_reserved_taint_key("readiness.k8s.io/gpu"));
    assert!(!is_reserved_taint_key("gpuready.io/not-ready"));
    assert!(!is_reserved_taint_key("notnvidia.com/x"));
    for ok in ["NVIDIA-*", "A?", "RTX-[34]0[0-9]0", "[!a]x", "*"] {
        assert!(is_product_pattern(ok), "{ok}");
    }
    for bad in [
        "[RTX",
        "NVIDIA-**",
        "a]",
        "[]",
        "[!]",
        "[[a]",
        "[z-a]",
        "RTX-[9-0]0",
        "[!Z-A]",
    ] {
        assert!(!is_product_pattern(bad), "{bad}");
    }
}

/// The shared bound rules (`within`, `at_most`, `count_at_most`) keep each
/// field's message as it was written before they were one.
#[test]
fn bound_messages_name_the_value_and_the_bounds() {
    let spec: GpuNodeProfileSpec = serde_yaml_ng::from_str(
        "nodeSelector: {}
maxLabelAgeSeconds: 604801
sandboxResources: [a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x, a.io/x]
gpu: {minMemoryMib: 0, count: 1025, families: [tesla, fermi, kepler, maxwell, pascal, volta, turing, ampere, hopper, blackwell, rubin, tesla, fermi]}
notReadyDeadline: {seconds: 59}
escalation: {reasons: [FatalXid], maxNoExecutePercent: 101, dryRunSeconds: 9}
maintenance: {deadlineSeconds: 2592001}
deviceGating: {minReadyGpus: 0}
external: {conditions: [{type: Foo}], maxHeartbeatAgeSeconds: 29}",
    )
    .expect("parses");
    let errors: Vec<String> = spec
        .validate()
        .into_iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .filter(|e| e.contains("must be") || e.contains("entries: at most"))
        .collect();
    for want in [
        "spec.maxLabelAgeSeconds: 604801 must be at most 604800 (7 days)",
        "spec.sandboxResources: 17 entries: at most 16",
        "spec.gpu.minMemoryMib: 0 must be between 1 and 16777216 (16 TiB)",
        "spec.gpu.count: 1025 must be between 1 and 1024",
        "spec.gpu.families: 13 entries: at most 12",
        "spec.notReadyDeadline.seconds: 59 must be between 60 and 2592000 (30 days)",
        "spec.escalation.maxNoExecutePercent: 101 must be between 0 and 100",
        "spec.escalation.dryRunSeconds: 9 must be between 10 and 604800 (7 days)",
        "spec.maintenance.deadlineSeconds: 2592001 must be between 60 and 2592000 (30 days)",
        "spec.deviceGating.minReadyGpus: 0 must be between 1 and 1024",
        "spec.external.maxHeartbeatAgeSeconds: 29 must be between 30 and 604800 (7 days)",
    ] {
        assert!(
            errors.iter().any(|e| e == want),
            "{want} not in {errors:#?}"
        );
    }
}
