//! Offline validation of a GpuNodeProfile: the same rules the CRD schema enforces
//! at admission, so `gpuready check` rejects what the API server would.

use crate::profile::GpuNodeProfileSpec;

/// One rule a profile breaks: the field path and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

fn is_version(s: &str, min_parts: usize, max_parts: usize) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    (min_parts..=max_parts).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

fn is_label_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// A Kubernetes qualified name: `[prefix/]name`.
pub fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(key),
    }
}

/// A Kubernetes label value (may be empty).
pub fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_label_name(value)
}

fn in_kubernetes_namespace(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        ["kubernetes.io", "k8s.io"]
            .iter()
            .any(|d| prefix == *d || prefix.ends_with(&format!(".{d}")))
    })
}

impl GpuNodeProfileSpec {
    /// Every rule the profile breaks, in field order. Empty when valid.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let mut fail = |field: &str, message: String| {
            errors.push(FieldError {
                field: format!("spec.{field}"),
                message,
            })
        };

        if let Some(v) = &self.min_driver_version
            && (v.len() > 32 || !is_version(v, 2, 3))
        {
            fail(
                "minDriverVersion",
                format!("{v:?} must look like 580.65.06 or 570.26"),
            );
        }
        if let Some(v) = &self.cuda_version
            && (v.len() > 16 || !is_version(v, 2, 2))
        {
            fail("cudaVersion", format!("{v:?} must look like 12.4 or 13.0"));
        }
        if self.gating_layers.as_ref().is_some_and(Vec::is_empty) {
            fail(
                "gatingLayers",
                "must name at least one layer (omit it to gate on all)".into(),
            );
        }
        if let Some(layers) = &self.gating_layers {
            let mut seen = std::collections::BTreeSet::new();
            for l in layers {
                if !seen.insert(l) {
                    fail("gatingLayers", format!("layer {l} is listed twice"));
                }
            }
        }
        if self.resources.len() > 16 {
            fail(
                "resources",
                format!("{} entries: at most 16", self.resources.len()),
            );
        }
        if self.ready_labels.len() > 16 {
            fail(
                "readyLabels",
                format!("{} entries: at most 16", self.ready_labels.len()),
            );
        }
        for (name, qty) in &self.resources {
            if !name.contains('/') || !is_qualified_name(name) || *qty < 1 {
                fail(
                    "resources",
                    format!(
                        "{name:?}: {qty} must map a domain-qualified resource name (like nvidia.com/gpu) to a quantity of at least 1"
                    ),
                );
            }
        }
        if self.max_label_age_seconds > 604_800 {
            fail(
                "maxLabelAgeSeconds",
                format!(
                    "{} must be at most 604800 (7 days)",
                    self.max_label_age_seconds
                ),
            );
        }

        if let Some(probe) = &self.probe {
            if probe.max_report_age_seconds > 86_400 {
                fail(
                    "probe.maxReportAgeSeconds",
                    format!(
                        "{} must be at most 86400 (1 day)",
                        probe.max_report_age_seconds
                    ),
                );
            }
            let xids = probe.fatal_xids.as_deref().unwrap_or_default();
            if xids.len() > 64 {
                fail("probe.fatalXids", "at most 64 entries".into());
            }
            for x in xids {
                if !(1..=65_535).contains(x) {
                    fail(
                        "probe.fatalXids",
                        format!("{x} must be an XID number from 1 to 65535"),
                    );
                } else if crate::profile::APPLICATION_XIDS.contains(x) {
                    fail(
                        "probe.fatalXids",
                        format!(
                            "{x} is an application XID (13, 31, 43, 45, 68, 109): it follows a faulty workload, not a faulty GPU"
                        ),
                    );
                }
            }
        }

        let gpu = &self.gpu;
        if gpu.products.len() > 32 {
            fail("gpu.products", "at most 32 entries".into());
        }
        for p in &gpu.products {
            if p.is_empty() || p.len() > 128 {
                fail(
                    "gpu.products",
                    format!("{p:?}: each product must be 1 to 128 characters"),
                );
            } else if let Err(e) = glob::Pattern::new(p) {
                fail(
                    "gpu.products",
                    format!("{p:?} is not a valid glob pattern: {e}"),
                );
            }
        }
        if let Some(m) = gpu.min_memory_mib
            && !(1..=16_777_216).contains(&m)
        {
            fail(
                "gpu.minMemoryMib",
                format!("{m} must be between 1 and 16777216 (16 TiB)"),
            );
        }
        if gpu.families.len() > 12 {
            fail(
                "gpu.families",
                format!("{} entries: at most 12", gpu.families.len()),
            );
        }
        if gpu.excluded_families.len() > 12 {
            fail(
                "gpu.excludedFamilies",
                format!("{} entries: at most 12", gpu.excluded_families.len()),
            );
        }
        if let Some(cc) = &gpu.min_compute_capability {
            let ok = cc.split_once('.').is_some_and(|(maj, min)| {
                (1..=2).contains(&maj.len())
                    && maj.bytes().all(|b| b.is_ascii_digit())
                    && min.len() == 1
                    && min.bytes().all(|b| b.is_ascii_digit())
            });
            if !ok {
                fail(
                    "gpu.minComputeCapability",
                    format!("{cc:?} must look like 8.6 (major.minor)"),
                );
            }
        }
        if let Some(c) = gpu.count
            && !(1..=1024).contains(&c)
        {
            fail("gpu.count", format!("{c} must be between 1 and 1024"));
        }

        let t = &self.taint;
        if !is_qualified_name(&t.key) {
            fail(
                "taint.key",
                format!(
                    "{:?} must be a qualified name like gpuready.io/not-ready",
                    t.key
                ),
            );
        }
        if in_kubernetes_namespace(&t.key) {
            fail(
                "taint.key",
                format!(
                    "{:?} must not be in the kubernetes.io/ or k8s.io/ namespaces: those belong to Kubernetes",
                    t.key
                ),
            );
        }
        if !is_label_value(&t.value) {
            fail(
                "taint.value",
                format!(
                    "{:?} must be a valid label value (letters, digits, '-', '_', '.')",
                    t.value
                ),
            );
        }

        for (k, v) in &self.ready_labels {
            if k.starts_with(crate::keys::LABEL_READY) || k.starts_with(crate::keys::LABEL_PROFILE)
            {
                fail(
                    "readyLabels",
                    format!("{k:?} is written by gpuready itself and must not be set"),
                );
            } else if !is_qualified_name(k) {
                fail(
                    "readyLabels",
                    format!("{k:?} must be a valid label key, like example.com/gpu-pool"),
                );
            }
            if !is_label_value(v) {
                fail(
                    "readyLabels",
                    format!(
                        "{k}={v:?}: values must be valid label values (at most 63 characters of letters, digits, '-', '_' or '.')"
                    ),
                );
            }
        }
        // Evidence fields (docs/evidence.md).
        if self.sandbox_resources.len() > 16 {
            fail(
                "sandboxResources",
                format!("{} entries: at most 16", self.sandbox_resources.len()),
            );
        }
        for name in &self.sandbox_resources {
            if name.len() > 253 || !name.contains('/') || !is_qualified_name(name) {
                fail(
                    "sandboxResources",
                    format!(
                        "{name:?} must be a domain-qualified resource name like nvidia.com/GH100_H200_SXM_141GB"
                    ),
                );
            }
        }
        if let Some(d) = &self.not_ready_deadline
            && !(60..=2_592_000).contains(&d.seconds)
        {
            fail(
                "notReadyDeadline.seconds",
                format!("{} must be between 60 and 2592000 (30 days)", d.seconds),
            );
        }
        errors
    }
}

impl crate::GpuNodeProfile {
    /// Every rule the whole object breaks: its name, then its spec.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if let Some(name) = &self.metadata.name
            && name.len() > 63
        {
            errors.push(FieldError {
                field: "metadata.name".into(),
                message: format!(
                    "{name:?} is longer than 63 characters: gpuready writes it as the value of the gpuready.io/profile node label"
                ),
            });
        }
        errors.extend(self.spec.validate());
        errors
    }
}
