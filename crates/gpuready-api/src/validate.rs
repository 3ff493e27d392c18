//! Offline validation of a GpuNodeProfile: the same rules the CRD schema enforces
//! at admission, so `gpuready check` rejects what the API server would.

use crate::profile::{ComputeDomainCliquePolicy, GpuNodeProfileSpec, ImexMode};

/// One rule a profile breaks: the field path and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// Dotted numbers of `min_parts..=max_parts` parts of 1 to 9 digits each: nine
/// digits always fit the engine's u32, so an admitted version always parses.
fn is_version(s: &str, min_parts: usize, max_parts: usize) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    (min_parts..=max_parts).contains(&parts.len())
        && parts
            .iter()
            .all(|p| (1..=9).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the first `first` parts of a dotted version have no leading zero
/// (`0` itself is allowed after the first part, and the first part must not be
/// 0): `08.6` and `0580.065.06` are refused, `580.65.06` is not — NVIDIA
/// writes the revision with two digits.
fn no_leading_zeros(s: &str, first: usize) -> bool {
    s.split('.').take(first).enumerate().all(|(i, p)| {
        if i == 0 {
            !p.starts_with('0')
        } else {
            p == "0" || !p.starts_with('0')
        }
    })
}

/// A Kubernetes object name as the API server requires it of cluster-scoped
/// custom resources: a DNS-1123 subdomain.
pub fn is_object_name(s: &str) -> bool {
    is_dns_subdomain(s)
}

/// Whether a key's prefix (before the first `/`) is one of `domains` or a
/// subdomain of one. Keys without a prefix are in no domain.
pub fn in_domains(key: &str, domains: &[&str]) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        domains.iter().any(|d| {
            prefix == *d
                || prefix
                    .strip_suffix(d)
                    .is_some_and(|rest| rest.ends_with('.'))
        })
    })
}

/// A label key gpuready writes itself: in [`crate::keys::OWNED_KEY_DOMAIN`] or
/// a subdomain of it (`gpuready.io/ready`, `gpuready.io/profile`, any future
/// one). The CRD's CEL rules spell the same test as [`OWNED_KEY_CEL_REGEX`].
pub fn is_owned_key(key: &str) -> bool {
    in_domains(key, &[crate::keys::OWNED_KEY_DOMAIN])
}

/// The regular expression the CRD's CEL rules match a key against for
/// [`is_owned_key`], as a CEL string literal spells it (a test keeps the two in
/// step).
pub const OWNED_KEY_CEL_REGEX: &str = "'^([^/]*\\\\.)?gpuready\\\\.io/'";

/// A taint key another system owns: in a reserved domain and not under one of
/// the autoscaler-recognised prefixes.
pub fn is_reserved_taint_key(key: &str) -> bool {
    in_domains(key, crate::keys::RESERVED_KEY_DOMAINS)
        && !crate::keys::AUTOSCALER_TAINT_PREFIXES
            .iter()
            .any(|p| key.starts_with(p))
}

/// A product pattern the engine can compile: exact text with `*`, `?` and
/// bracket classes, every `[` closed by a `]` around a non-empty class, no `**`.
/// The CRD's CEL rule is the same regular expression
/// `^([^\[\]]|\[(![^\[\]]+|[^!\[\]][^\[\]]*)\])*$` plus "no `**`".
pub fn is_product_pattern(p: &str) -> bool {
    if p.contains("**") {
        return false;
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        match c {
            ']' => return false,
            '[' => {
                let mut class = String::new();
                loop {
                    match chars.next() {
                        None | Some('[') => return false,
                        Some(']') => break,
                        Some(ch) => class.push(ch),
                    }
                }
                if class.is_empty() || class == "!" || has_descending_range(&class) {
                    return false;
                }
            }
            _ => {}
        }
    }
    glob::Pattern::new(p).is_ok()
}

/// The letters and digits in code-point order: a class range between two of
/// them runs low to high when the first comes first here.
const RANGE_ORDER: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Whether a class body (between `[` and `]`) holds a range between letters or
/// digits that runs high to low (`z-a`): it matches no character, so the
/// pattern could never match a product (issue 32 found `[z-a]` admitted). Any
/// letter or digit, `-`, then a lower one, at any place in the class — the
/// CRD's rule spells out the same pairs.
fn has_descending_range(class: &str) -> bool {
    let rank = |c: char| RANGE_ORDER.find(c);
    let chars: Vec<char> = class.chars().collect();
    chars
        .windows(3)
        .any(|w| w[1] == '-' && matches!((rank(w[0]), rank(w[2])), (Some(a), Some(b)) if a > b))
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

/// A MIG profile name as nvidia-smi and the DRA driver spell it (`1g.18gb`,
/// `1g.18gb+me`) or GFD does (`1g.18gb.me`): the CRD's pattern
/// `^[0-9]+g\.[0-9]+gb([.+][a-z0-9+.]+)?$`.
/// GFD's `nvidia.com/gpu.clique` value, `<cluster UUID>.<clique ID>`
/// (k8s-device-plugin `internal/lm/imex.go`: the UUID lower-case and
/// hyphenated, the clique ID a decimal `uint32`): the UUID's 32 hex digits
/// without hyphens and the ID, or `None` when it is not that shape.
pub fn parse_clique(value: &str) -> Option<(String, u32)> {
    let (uuid, id) = value.rsplit_once('.')?;
    let groups: Vec<&str> = uuid.split('-').collect();
    let shape_ok = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| {
            g.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
    let id_ok = (1..=10).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit());
    if !shape_ok || !id_ok {
        return None;
    }
    Some((groups.concat(), id.parse().ok()?))
}

/// A Node condition type an External layer may name: 1 to 316 characters of
/// letters, digits, `-`, `_`, `.` and `/`, alphanumeric at both ends (the CEL
/// rule on `external.conditions[].type` spells the same).
pub fn is_condition_type(t: &str) -> bool {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/');
    (1..=316).contains(&t.len())
        && t.bytes().all(ok)
        && t.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && t.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

pub fn is_mig_profile(name: &str) -> bool {
    let Some((g, rest)) = name.split_once("g.") else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(gb_at) = rest.find("gb") else {
        return false;
    };
    let (mem, tail) = (&rest[..gb_at], &rest[gb_at + 2..]);
    digits(g)
        && digits(mem)
        && (tail.is_empty()
            || (tail.len() >= 2
                && (tail.starts_with('.') || tail.starts_with('+'))
                && tail[1..].bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'+' || b == b'.'
                })))
}

/// Whether a GpuNodeProfile may name `key` as its taint key (the rules
/// admission applies to `taint.key`). The engine asks it too: a taint its
/// ownership annotation names is gpuready's only if a profile could have set
/// that key, so an edited annotation cannot make gpuready remove, say, a cordon
/// taint.
pub fn is_profile_taint_key(key: &str) -> bool {
    is_qualified_name(key) && !is_reserved_taint_key(key)
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
            && (v.len() > 32 || !is_version(v, 2, 3) || !no_leading_zeros(v, 2))
        {
            fail(
                "minDriverVersion",
                format!(
                    "{v:?} must look like 580.65.06 or 570.26 (at most 9 digits a part, no leading zero in the first two)"
                ),
            );
        }
        if let Some(v) = &self.cuda_version
            && (v.len() > 16
                || !is_version(v, 2, 2)
                || !no_leading_zeros(v, 2)
                || !v.split_once('.').is_some_and(|(maj, min)| {
                    maj.len() <= 2
                        && min.len() <= 2
                        && maj.parse::<u32>().is_ok_and(|m| (1..=20).contains(&m))
                }))
        {
            fail(
                "cudaVersion",
                format!(
                    "{v:?} must be a CUDA release like 12.4 or 13.0 (major 1 to 20, no leading zero)"
                ),
            );
        }
        if self.gating_layers.as_ref().is_some_and(Vec::is_empty) {
            fail(
                "gatingLayers",
                "must name at least one layer (omit it to gate on all)".into(),
            );
        }
        if let Some(layers) = &self.gating_layers
            && !layers.is_empty()
            && layers.iter().all(|l| *l == crate::layer::Layer::Health)
        {
            fail(
                "gatingLayers",
                "must name a layer besides Health: Health is judged only where a probe report exists, so alone it gates nothing".into(),
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
            if in_domains(name, crate::keys::RESERVED_RESOURCE_DOMAINS) {
                fail(
                    "resources",
                    format!(
                        "{name:?} is in kubernetes.io or k8s.io: Kubernetes reserves those domains, no device plugin advertises one"
                    ),
                );
            }
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
            if let Some(cc) = &probe.compute_check
                && cc.max_age_seconds > 31_536_000
            {
                fail(
                    "probe.computeCheck.maxAgeSeconds",
                    format!("{} must be at most 31536000 (1 year)", cc.max_age_seconds),
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
            } else if p != "*" && p.chars().all(|c| c == '*' || c == '?') {
                fail(
                    "gpu.products",
                    format!(
                        "{p:?} names nothing: a pattern of only ? and * matches every short name (use * alone for any product)"
                    ),
                );
            } else if !is_product_pattern(p) {
                fail(
                    "gpu.products",
                    format!(
                        "{p:?} is not a valid pattern: use *, ? and [...] classes (each [ closed by ], no **, a range between letters or digits low to high: [a-z], not [z-a])"
                    ),
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
        for (field, list) in [
            ("gpu.families", &gpu.families),
            ("gpu.excludedFamilies", &gpu.excluded_families),
        ] {
            if let Some((i, f)) = list
                .iter()
                .enumerate()
                .find(|(i, f)| list[..*i].contains(f))
            {
                fail(
                    field,
                    format!("{f} is listed twice (entry {i}): list each family once"),
                );
            }
        }
        if gpu.excluded_families.len() > 12 {
            fail(
                "gpu.excludedFamilies",
                format!("{} entries: at most 12", gpu.excluded_families.len()),
            );
        }
        if let Some(f) = gpu
            .families
            .iter()
            .find(|f| gpu.excluded_families.contains(f))
        {
            fail(
                "gpu.families",
                format!(
                    "{f} is in both families and excludedFamilies: no card could be both allowed and excluded"
                ),
            );
        }
        if let Some(cc) = &gpu.min_compute_capability {
            let ok = cc.split_once('.').is_some_and(|(maj, min)| {
                (1..=2).contains(&maj.len())
                    && !maj.starts_with('0')
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
        if let Some(n) = gpu.max_gpus_per_numa_node
            && !(1..=1024).contains(&n)
        {
            fail(
                "gpu.maxGpusPerNumaNode",
                format!("{n} must be between 1 and 1024"),
            );
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
        if is_reserved_taint_key(&t.key) {
            fail(
                "taint.key",
                format!(
                    "{:?} is in a namespace other systems own ({}): pick your own domain, or one of the autoscaler prefixes {}",
                    t.key,
                    crate::keys::RESERVED_KEY_DOMAINS.join(", "),
                    crate::keys::AUTOSCALER_TAINT_PREFIXES.join(", ")
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
            if is_owned_key(k) {
                fail(
                    "readyLabels",
                    format!(
                        "{k:?} is in gpuready's own key domain ({}/): gpuready writes those itself",
                        crate::keys::OWNED_KEY_DOMAIN
                    ),
                );
            } else if !is_qualified_name(k) {
                fail(
                    "readyLabels",
                    format!("{k:?} must be a valid label key, like example.com/gpu-pool"),
                );
            } else if in_domains(k, crate::keys::RESERVED_KEY_DOMAINS) {
                fail(
                    "readyLabels",
                    format!(
                        "{k:?} is in a namespace other systems own ({}): use your own domain, like example.com/gpu-pool",
                        crate::keys::RESERVED_KEY_DOMAINS.join(", ")
                    ),
                );
            } else if self.selector_keys().contains(&k.as_str()) {
                fail(
                    "readyLabels",
                    format!(
                        "{k:?} is a key of spec.nodeSelector: gpuready would remove the label that makes the node belong to this profile"
                    ),
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
        if let Some(e) = &self.escalation {
            if !(1..=16).contains(&e.reasons.len()) {
                fail("escalation.reasons", "must list 1 to 16 reasons".to_owned());
            }
            for (i, r) in e.reasons.iter().enumerate() {
                let mut chars = r.chars();
                let named = r.len() <= 64
                    && chars.next().is_some_and(|c| c.is_ascii_uppercase())
                    && chars.all(|c| c.is_ascii_alphanumeric());
                if !named {
                    fail(
                        "escalation.reasons",
                        format!(
                            "{r:?}: escalation.reasons must be reason names like FatalXid or GpuResetRequired"
                        ),
                    );
                }
                if e.reasons[..i].contains(r) {
                    fail(
                        "escalation.reasons",
                        format!("{r:?}: escalation.reasons must not repeat a reason"),
                    );
                }
            }
            if e.extended_resource_pods == crate::ExtendedResourcePods::TaintNode
                && self.device_gating.is_none()
            {
                fail(
                    "escalation.extendedResourcePods",
                    "TaintNode needs deviceGating: without it no device escalates, the node's own taint does".into(),
                );
            }
            if e.max_no_execute_percent > 100 {
                fail(
                    "escalation.maxNoExecutePercent",
                    format!("{} must be between 0 and 100", e.max_no_execute_percent),
                );
            }
            if !(10..=604_800).contains(&e.dry_run_seconds) {
                fail(
                    "escalation.dryRunSeconds",
                    format!(
                        "{} must be between 10 and 604800 (7 days)",
                        e.dry_run_seconds
                    ),
                );
            }
        }
        if let Some(d) = self.maintenance.as_ref().and_then(|m| m.deadline_seconds)
            && !(60..=2_592_000).contains(&d)
        {
            fail(
                "maintenance.deadlineSeconds",
                format!("{d} must be between 60 and 2592000 (30 days)"),
            );
        }
        if let Some(n) = self.device_gating.as_ref().and_then(|g| g.min_ready_gpus)
            && !(1..=1024).contains(&n)
        {
            fail(
                "deviceGating.minReadyGpus",
                format!("{n} must be between 1 and 1024"),
            );
        }
        if let Some(f) = &self.fabric {
            if f.cliques.len() > 64 {
                fail("fabric.cliques", "at most 64 entries".into());
            }
            for c in &f.cliques {
                if parse_clique(c).is_none() {
                    fail(
                        "fabric.cliques",
                        format!(
                            "{c:?} must be an NVLink clique as nvidia.com/gpu.clique spells it: <cluster UUID>.<clique ID>, e.g. 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"
                        ),
                    );
                }
            }
            if let Some(v) = &f.min_driver_version
                && (v.len() > 32 || !is_version(v, 2, 3) || !no_leading_zeros(v, 2))
            {
                fail(
                    "fabric.minDriverVersion",
                    format!(
                        "{v:?} must look like 570.158.01 (at most 9 digits a part, no leading zero in the first two)"
                    ),
                );
            }
            if let Some(k) = &f.group_by_label
                && !is_qualified_name(k)
            {
                fail(
                    "fabric.groupByLabel",
                    format!("{k:?} must be a valid label key, like example.com/nvl-rack"),
                );
            }
            if f.imex_mode == Some(ImexMode::HostManaged)
                && f.compute_domain_cliques != ComputeDomainCliquePolicy::Ignore
            {
                fail(
                    "fabric.computeDomainCliques",
                    "must be Ignore with fabric.imexMode HostManaged: the DRA driver writes no ComputeDomainCliques in host-managed IMEX mode, so every node would read Unknown".into(),
                );
            }
        }
        if let Some(x) = &self.external {
            if x.presets.is_empty() && x.conditions.is_empty() {
                fail(
                    "external",
                    "must name at least one preset or condition: an External layer that reads nothing would always be Ready".into(),
                );
            }
            if x.presets.len() > 8 {
                fail("external.presets", "at most 8 entries".into());
            }
            let mut presets = std::collections::BTreeSet::new();
            for p in &x.presets {
                if !presets.insert(p) {
                    fail(
                        "external.presets",
                        format!("preset {} is listed twice", p.as_str()),
                    );
                }
            }
            if x.conditions.len() > 32 {
                fail("external.conditions", "at most 32 entries".into());
            }
            let mut types = std::collections::BTreeSet::new();
            for c in &x.conditions {
                if !types.insert(c.type_.as_str()) {
                    fail(
                        "external.conditions",
                        format!("condition type {:?} is listed twice", c.type_),
                    );
                }
                if !is_condition_type(&c.type_) {
                    fail(
                        "external.conditions[].type",
                        format!(
                            "{:?} must be a condition type like GpuHealthy or example.com/GPUProblem (letters, digits, '-', '_', '.', '/')",
                            c.type_
                        ),
                    );
                }
                if c.type_.starts_with(crate::keys::CONDITION_GPU_READY) || c.type_ == "Ready" {
                    fail(
                        "external.conditions[].type",
                        format!(
                            "{:?}: gpuready's own GpuReady… conditions (gpuready would judge from what it writes) and kubelet's Ready (the Node layer reads it) cannot be named",
                            c.type_
                        ),
                    );
                }
            }
            if let Some(age) = x.max_heartbeat_age_seconds
                && !(30..=604_800).contains(&age)
            {
                fail(
                    "external.maxHeartbeatAgeSeconds",
                    format!("{age} must be between 30 and 604800 (7 days)"),
                );
            }
        }
        if let Some(m) = &self.mig {
            if let Some(c) = &m.config
                && !(1..=63).contains(&c.len())
            {
                fail("mig.config", format!("{c:?} must be 1 to 63 characters"));
            }
            if m.devices.len() > 16 {
                fail(
                    "mig.devices",
                    "must list at most 16 MIG profiles".to_owned(),
                );
            }
            for (k, v) in &m.devices {
                if !is_mig_profile(k) {
                    fail(
                        "mig.devices",
                        format!(
                            "{k:?}: mig.devices keys must be MIG profile names like 1g.18gb or 1g.18gb+me"
                        ),
                    );
                }
                if !(1..=1024).contains(v) {
                    fail(
                        "mig.devices",
                        format!("{k}: {v} must be between 1 and 1024"),
                    );
                }
            }
        }
        for e in node_selector_errors(&self.node_selector) {
            errors.push(FieldError {
                field: format!("spec.nodeSelector{}", e.field),
                message: e.message,
            });
        }
        errors
    }

    /// Label keys the node selector reads.
    pub fn selector_keys(&self) -> Vec<&str> {
        let s = &self.node_selector;
        s.match_labels
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .chain(s.match_expressions.iter().flatten().map(|e| e.key.as_str()))
            .collect()
    }
}

/// Most entries in `matchLabels` and in `matchExpressions`, and values per expression.
pub const MAX_SELECTOR_LABELS: usize = 32;
pub const MAX_SELECTOR_EXPRESSIONS: usize = 32;
pub const MAX_SELECTOR_VALUES: usize = 64;

/// The rules the CRD schema puts on `spec.nodeSelector` (fields relative to it):
/// what the API server checks for a Deployment's selector, plus size bounds so
/// the CEL cost stays within budget.
pub fn node_selector_errors(
    s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut fail = |field: String, message: String| errors.push(FieldError { field, message });
    let labels = s.match_labels.as_ref();
    if labels.is_some_and(|l| l.len() > MAX_SELECTOR_LABELS) {
        fail(
            ".matchLabels".into(),
            format!("at most {MAX_SELECTOR_LABELS} entries"),
        );
    }
    for (k, v) in labels.into_iter().flatten() {
        if !is_qualified_name(k) {
            fail(
                ".matchLabels".into(),
                format!("{k:?} must be a valid label key, like example.com/gpu-pool"),
            );
        } else if is_owned_key(k) {
            fail(".matchLabels".into(), owned_selector_key(k));
        }
        if v.len() > 63 || !is_label_value(v) {
            fail(
                ".matchLabels".into(),
                format!("{k}={v:?}: values must be valid label values"),
            );
        }
    }
    let exprs = s.match_expressions.as_deref().unwrap_or_default();
    if exprs.len() > MAX_SELECTOR_EXPRESSIONS {
        fail(
            ".matchExpressions".into(),
            format!("at most {MAX_SELECTOR_EXPRESSIONS} entries"),
        );
    }
    for (i, e) in exprs.iter().enumerate() {
        let at = |f: &str| format!(".matchExpressions[{i}]{f}");
        if !is_qualified_name(&e.key) {
            fail(
                at(".key"),
                format!("{:?} must be a valid label key", truncated(&e.key)),
            );
        } else if is_owned_key(&e.key) {
            fail(at(".key"), owned_selector_key(&e.key));
        }
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => fail(
                at(".values"),
                format!("operator {} needs at least one value", e.operator),
            ),
            "Exists" | "DoesNotExist" if !values.is_empty() => fail(
                at(".values"),
                format!("operator {} takes no values", e.operator),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => fail(
                at(".operator"),
                format!(
                    "{:?}: must be In, NotIn, Exists or DoesNotExist",
                    truncated(other)
                ),
            ),
        }
        if values.len() > MAX_SELECTOR_VALUES {
            fail(
                at(".values"),
                format!("at most {MAX_SELECTOR_VALUES} values"),
            );
        }
        if let Some(v) = values.iter().find(|v| v.len() > 63 || !is_label_value(v)) {
            fail(
                at(".values"),
                format!("{:?} must be a valid label value", truncated(v)),
            );
        }
    }
    errors
}

fn owned_selector_key(key: &str) -> String {
    format!(
        "{:?} is a key gpuready writes itself ({}/): a selector on it would change with gpuready's own writes",
        truncated(key),
        crate::keys::OWNED_KEY_DOMAIN
    )
}

/// At most 64 characters of a value for a message: a 1 MB key must not become
/// a 1 MB error.
fn truncated(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

impl crate::GpuNodeProfile {
    /// Every rule the whole object breaks: its name, then its spec.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let name = self.metadata.name.as_deref().unwrap_or_default();
        if !is_object_name(name) {
            errors.push(FieldError {
                field: "metadata.name".into(),
                message: format!(
                    "{:?} must be a DNS-1123 subdomain like ampere-ada: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
                    truncated(name)
                ),
            });
        } else if name.len() > 63 {
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

/// The profile's OpenAPI schema, as the CRD publishes it (computed once).
fn profile_schema() -> &'static serde_json::Value {
    static SCHEMA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let crd = crate::crd::gpu_node_profile_crd();
        crd.spec
            .versions
            .first()
            .and_then(|v| v.schema.as_ref())
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_default()
    })
}

/// Fields of a raw profile that the CRD schema does not know, as paths like
/// `spec.gpu.prodcts`. The API server refuses them under field validation
/// `Strict` (what kubectl asks for), whatever their value — an empty list too.
/// `metadata` and `status` are left to the server's own rules.
pub fn unknown_fields(raw: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(raw), Some(props)) = (
        raw.as_object(),
        profile_schema()
            .get("properties")
            .and_then(|p| p.as_object()),
    ) {
        for (key, value) in raw {
            match key.as_str() {
                "apiVersion" | "kind" | "metadata" | "status" => {}
                _ => match props.get(key) {
                    Some(schema) => unknown_in(value, schema, key, &mut out),
                    None => out.push(key.clone()),
                },
            }
        }
    }
    out
}

fn unknown_in(
    value: &serde_json::Value,
    schema: &serde_json::Value,
    path: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            if schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true)
            {
                return;
            }
            for (key, v) in map {
                let here = format!("{path}.{key}");
                match (props.and_then(|p| p.get(key)), extra) {
                    (Some(s), _) => unknown_in(v, s, &here, out),
                    (None, Some(s)) => unknown_in(v, s, &here, out),
                    (None, None) => out.push(here),
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    unknown_in(v, s, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Drops `null` values of fields the schema does not mark `nullable`, as the API
/// server does before defaulting (a `readyLabels` entry `key: null` is stored as
/// no entry, `matchLabels: {pool: null}` as an empty selector): offline must
/// judge the object the server would store.
pub fn prune_nulls(raw: &mut serde_json::Value) {
    if let Some(schema) = profile_schema().as_object() {
        prune_in(raw, &serde_json::Value::Object(schema.clone()));
    }
}

/// Turns integral floats (`1000.0`, `1.5e7`) of fields the schema types as
/// integers into integers, as the API server accepts them: the Rust types
/// would refuse a float where a `u32` is due, and offline would refuse what the
/// server stores.
pub fn integral_numbers(raw: &mut serde_json::Value) {
    if let Some(schema) = profile_schema().as_object() {
        integral_in(raw, &serde_json::Value::Object(schema.clone()));
    }
}

fn integral_in(value: &mut serde_json::Value, schema: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) if schema.get("type").and_then(Value::as_str) == Some("integer") => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0) {
                // Exact up to 2^53; larger floats are not integers JSON can carry.
                if f.abs() < 9_007_199_254_740_992.0 {
                    // Lossless: |f| < 2^53 and f has no fraction.
                    #[allow(clippy::cast_possible_truncation)]
                    let i = f as i64;
                    *value = Value::from(i);
                }
            }
        }
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, v) in map.iter_mut() {
                if let Some(sub) = props.and_then(|p| p.get(key)).or(extra) {
                    integral_in(v, sub);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                items.iter_mut().for_each(|v| integral_in(v, sub));
            }
        }
        _ => {}
    }
}

fn prune_in(value: &mut serde_json::Value, schema: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            map.retain(|key, v| {
                let sub = props.and_then(|p| p.get(key)).or(extra);
                let nullable =
                    sub.and_then(|s| s.get("nullable")).and_then(Value::as_bool) == Some(true);
                !(v.is_null() && sub.is_some() && !nullable)
            });
            for (key, v) in map.iter_mut() {
                if let Some(sub) = props.and_then(|p| p.get(key)).or(extra) {
                    prune_in(v, sub);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                items.iter_mut().for_each(|v| prune_in(v, sub));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
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
}
