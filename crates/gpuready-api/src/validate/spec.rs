//! The rules on a GpuNodeProfile's spec, one function per spec type (as
//! `profile.rs` nests them), so each checks its own fields and fits a screen.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use super::{
    FieldError, in_domains, is_condition_type, is_label_value, is_mig_profile, is_owned_key,
    is_product_pattern, is_qualified_name, is_reserved_taint_key, is_version, no_leading_zeros,
    node_selector_errors, parse_clique,
};
use crate::keys;
use crate::profile::{
    APPLICATION_XIDS, ComputeDomainCliquePolicy, DeviceGating, Escalation, ExtendedResourcePods,
    ExternalSignals, FabricExpectation, GpuExpectation, GpuNodeProfileSpec, ImexMode,
    MaintenanceRules, MigExpectation, NotReadyDeadline, ProbeExpectation, TaintSpec,
};

/// The errors found so far and the path of the object being checked (`spec`,
/// `spec.gpu`): each type names its fields relative to itself, and the path
/// makes them whole.
struct Errors<'a> {
    path: String,
    list: &'a mut Vec<FieldError>,
}

impl Errors<'_> {
    /// The errors of the object at `field` below this one.
    fn at(&mut self, field: &str) -> Errors<'_> {
        Errors {
            path: format!("{}.{field}", self.path),
            list: self.list,
        }
    }

    fn fail(&mut self, field: &str, message: impl Into<String>) {
        self.list.push(FieldError {
            field: format!("{}.{field}", self.path),
            message: message.into(),
        });
    }

    /// A bounded number out of `range`. One rule so every bound reads the same
    /// way: `unit` names the top in words, like `" (7 days)"`, or is empty.
    /// `None` (an unset optional field) passes.
    fn within(
        &mut self,
        field: &str,
        value: impl Into<Option<u32>>,
        range: RangeInclusive<u32>,
        unit: &str,
    ) {
        if let Some(v) = value.into()
            && !range.contains(&v)
        {
            let (lo, hi) = range.into_inner();
            self.fail(field, format!("{v} must be between {lo} and {hi}{unit}"));
        }
    }

    /// A number above `max`, for numbers whose only bound is the top (a 0 is
    /// allowed); `unit` as in [`Errors::within`].
    fn at_most(&mut self, field: &str, value: u32, max: u32, unit: &str) {
        if value > max {
            self.fail(field, format!("{value} must be at most {max}{unit}"));
        }
    }

    /// A list longer than `max`, saying how long it is (for lists a user may
    /// have filled from elsewhere, where the count helps).
    fn count_at_most(&mut self, field: &str, len: usize, max: usize) {
        if len > max {
            self.fail(field, format!("{len} entries: at most {max}"));
        }
    }

    /// An error of the object itself, not of one of its fields.
    fn fail_here(&mut self, message: impl Into<String>) {
        self.list.push(FieldError {
            field: self.path.clone(),
            message: message.into(),
        });
    }
}

/// A driver version as `minDriverVersion` takes it: 580.65.06 or 570.26.
fn is_driver_version(v: &str) -> bool {
    v.len() <= 32 && is_version(v, 2, 3) && no_leading_zeros(v, 2)
}

impl GpuNodeProfileSpec {
    /// Every rule the profile breaks, in field order. Empty when valid.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut list = Vec::new();
        let errors = &mut Errors {
            path: "spec".into(),
            list: &mut list,
        };
        self.validate_versions(errors);
        self.validate_gating_layers(errors);
        self.validate_resources(errors);
        errors.at_most(
            "maxLabelAgeSeconds",
            self.max_label_age_seconds,
            604_800,
            " (7 days)",
        );
        if let Some(probe) = &self.probe {
            probe.validate_into(&mut errors.at("probe"));
        }
        self.gpu.validate_into(&mut errors.at("gpu"));
        self.taint.validate_into(&mut errors.at("taint"));
        self.validate_ready_labels(errors);
        // Evidence fields (docs/evidence.md).
        self.validate_sandbox_resources(errors);
        if let Some(d) = &self.not_ready_deadline {
            d.validate_into(&mut errors.at("notReadyDeadline"));
        }
        if let Some(e) = &self.escalation {
            let gated = self.device_gating.is_some();
            e.validate_into(&mut errors.at("escalation"), gated);
        }
        if let Some(m) = &self.maintenance {
            m.validate_into(&mut errors.at("maintenance"));
        }
        if let Some(g) = &self.device_gating {
            g.validate_into(&mut errors.at("deviceGating"));
        }
        if let Some(f) = &self.fabric {
            f.validate_into(&mut errors.at("fabric"));
        }
        if let Some(x) = &self.external {
            x.validate_into(&mut errors.at("external"));
        }
        if let Some(m) = &self.mig {
            m.validate_into(&mut errors.at("mig"));
        }
        for e in node_selector_errors(&self.node_selector) {
            errors.list.push(FieldError {
                field: format!("spec.nodeSelector{}", e.field),
                message: e.message,
            });
        }
        list
    }

    /// `minDriverVersion` and `cudaVersion`.
    fn validate_versions(&self, errors: &mut Errors) {
        if let Some(v) = &self.min_driver_version
            && !is_driver_version(v)
        {
            errors.fail(
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
            errors.fail(
                "cudaVersion",
                format!(
                    "{v:?} must be a CUDA release like 12.4 or 13.0 (major 1 to 20, no leading zero)"
                ),
            );
        }
    }

    fn validate_gating_layers(&self, errors: &mut Errors) {
        let Some(layers) = &self.gating_layers else {
            return;
        };
        if layers.is_empty() {
            errors.fail(
                "gatingLayers",
                "must name at least one layer (omit it to gate on all)",
            );
        }
        if !layers.is_empty() && layers.iter().all(|l| *l == crate::layer::Layer::Health) {
            errors.fail(
                "gatingLayers",
                "must name a layer besides Health: Health is judged only where a probe report exists, so alone it gates nothing",
            );
        }
        let mut seen = BTreeSet::new();
        for l in layers {
            if !seen.insert(l) {
                errors.fail("gatingLayers", format!("layer {l} is listed twice"));
            }
        }
    }

    /// The sizes of `resources` and `readyLabels`, then each resource.
    fn validate_resources(&self, errors: &mut Errors) {
        if self.resources.len() > 16 {
            errors.fail(
                "resources",
                format!("{} entries: at most 16", self.resources.len()),
            );
        }
        if self.ready_labels.len() > 16 {
            errors.fail(
                "readyLabels",
                format!("{} entries: at most 16", self.ready_labels.len()),
            );
        }
        for (name, qty) in &self.resources {
            if in_domains(name, keys::RESERVED_RESOURCE_DOMAINS) {
                errors.fail(
                    "resources",
                    format!(
                        "{name:?} is in kubernetes.io or k8s.io: Kubernetes reserves those domains, no device plugin advertises one"
                    ),
                );
            }
            if !name.contains('/') || !is_qualified_name(name) || *qty < 1 {
                errors.fail(
                    "resources",
                    format!(
                        "{name:?}: {qty} must map a domain-qualified resource name (like nvidia.com/gpu) to a quantity of at least 1"
                    ),
                );
            }
        }
    }

    /// Each ready label's key and value (their number is checked with the
    /// resources').
    fn validate_ready_labels(&self, errors: &mut Errors) {
        for (k, v) in &self.ready_labels {
            if is_owned_key(k) {
                errors.fail(
                    "readyLabels",
                    format!(
                        "{k:?} is in gpuready's own key domain ({}/): gpuready writes those itself",
                        keys::OWNED_KEY_DOMAIN
                    ),
                );
            } else if !is_qualified_name(k) {
                errors.fail(
                    "readyLabels",
                    format!("{k:?} must be a valid label key, like example.com/gpu-pool"),
                );
            } else if in_domains(k, keys::RESERVED_KEY_DOMAINS) {
                errors.fail(
                    "readyLabels",
                    format!(
                        "{k:?} is in a namespace other systems own ({}): use your own domain, like example.com/gpu-pool",
                        keys::RESERVED_KEY_DOMAINS.join(", ")
                    ),
                );
            } else if self.selector_keys().contains(&k.as_str()) {
                errors.fail(
                    "readyLabels",
                    format!(
                        "{k:?} is a key of spec.nodeSelector: gpuready would remove the label that makes the node belong to this profile"
                    ),
                );
            }
            if !is_label_value(v) {
                errors.fail(
                    "readyLabels",
                    format!(
                        "{k}={v:?}: values must be valid label values (at most 63 characters of letters, digits, '-', '_' or '.')"
                    ),
                );
            }
        }
    }

    fn validate_sandbox_resources(&self, errors: &mut Errors) {
        errors.count_at_most("sandboxResources", self.sandbox_resources.len(), 16);
        for name in &self.sandbox_resources {
            if name.len() > 253 || !name.contains('/') || !is_qualified_name(name) {
                errors.fail(
                    "sandboxResources",
                    format!(
                        "{name:?} must be a domain-qualified resource name like nvidia.com/GH100_H200_SXM_141GB"
                    ),
                );
            }
        }
    }
}

impl ProbeExpectation {
    fn validate_into(&self, errors: &mut Errors) {
        errors.at_most(
            "maxReportAgeSeconds",
            self.max_report_age_seconds,
            86_400,
            " (1 day)",
        );
        if let Some(cc) = &self.compute_check {
            errors.at_most(
                "computeCheck.maxAgeSeconds",
                cc.max_age_seconds,
                31_536_000,
                " (1 year)",
            );
        }
        let xids = self.fatal_xids.as_deref().unwrap_or_default();
        if xids.len() > 64 {
            errors.fail("fatalXids", "at most 64 entries");
        }
        for x in xids {
            if !(1..=65_535).contains(x) {
                errors.fail(
                    "fatalXids",
                    format!("{x} must be an XID number from 1 to 65535"),
                );
            } else if APPLICATION_XIDS.contains(x) {
                errors.fail(
                    "fatalXids",
                    format!(
                        "{x} is an application XID (13, 31, 43, 45, 68, 109): it follows a faulty workload, not a faulty GPU"
                    ),
                );
            }
        }
    }
}

impl GpuExpectation {
    fn validate_into(&self, errors: &mut Errors) {
        self.validate_products(errors);
        errors.within(
            "minMemoryMib",
            self.min_memory_mib,
            1..=16_777_216,
            " (16 TiB)",
        );
        self.validate_families(errors);
        if let Some(cc) = &self.min_compute_capability {
            let ok = cc.split_once('.').is_some_and(|(maj, min)| {
                (1..=2).contains(&maj.len())
                    && !maj.starts_with('0')
                    && maj.bytes().all(|b| b.is_ascii_digit())
                    && min.len() == 1
                    && min.bytes().all(|b| b.is_ascii_digit())
            });
            if !ok {
                errors.fail(
                    "minComputeCapability",
                    format!("{cc:?} must look like 8.6 (major.minor)"),
                );
            }
        }
        errors.within("count", self.count, 1..=1024, "");
        errors.within(
            "maxGpusPerNumaNode",
            self.max_gpus_per_numa_node,
            1..=1024,
            "",
        );
    }

    fn validate_products(&self, errors: &mut Errors) {
        if self.products.len() > 32 {
            errors.fail("products", "at most 32 entries");
        }
        for p in &self.products {
            if p.is_empty() || p.len() > 128 {
                errors.fail(
                    "products",
                    format!("{p:?}: each product must be 1 to 128 characters"),
                );
            } else if p != "*" && p.chars().all(|c| c == '*' || c == '?') {
                errors.fail(
                    "products",
                    format!(
                        "{p:?} names nothing: a pattern of only ? and * matches every short name (use * alone for any product)"
                    ),
                );
            } else if !is_product_pattern(p) {
                errors.fail(
                    "products",
                    format!(
                        "{p:?} is not a valid pattern: use *, ? and [...] classes (each [ closed by ], no **, a range between letters or digits low to high: [a-z], not [z-a])"
                    ),
                );
            }
        }
    }

    /// `families` and `excludedFamilies`: their sizes, repeats, and overlap.
    fn validate_families(&self, errors: &mut Errors) {
        errors.count_at_most("families", self.families.len(), 12);
        for (field, list) in [
            ("families", &self.families),
            ("excludedFamilies", &self.excluded_families),
        ] {
            if let Some((i, f)) = list
                .iter()
                .enumerate()
                .find(|(i, f)| list[..*i].contains(f))
            {
                errors.fail(
                    field,
                    format!("{f} is listed twice (entry {i}): list each family once"),
                );
            }
        }
        errors.count_at_most("excludedFamilies", self.excluded_families.len(), 12);
        if let Some(f) = self
            .families
            .iter()
            .find(|f| self.excluded_families.contains(f))
        {
            errors.fail(
                "families",
                format!(
                    "{f} is in both families and excludedFamilies: no card could be both allowed and excluded"
                ),
            );
        }
    }
}

impl TaintSpec {
    fn validate_into(&self, errors: &mut Errors) {
        if !is_qualified_name(&self.key) {
            errors.fail(
                "key",
                format!(
                    "{:?} must be a qualified name like gpuready.io/not-ready",
                    self.key
                ),
            );
        }
        if is_reserved_taint_key(&self.key) {
            errors.fail(
                "key",
                format!(
                    "{:?} is in a namespace other systems own ({}): pick your own domain, or one of the autoscaler prefixes {}",
                    self.key,
                    keys::RESERVED_KEY_DOMAINS.join(", "),
                    keys::AUTOSCALER_TAINT_PREFIXES.join(", ")
                ),
            );
        }
        if !is_label_value(&self.value) {
            errors.fail(
                "value",
                format!(
                    "{:?} must be a valid label value (letters, digits, '-', '_', '.')",
                    self.value
                ),
            );
        }
    }
}

impl NotReadyDeadline {
    fn validate_into(&self, errors: &mut Errors) {
        errors.within("seconds", self.seconds, 60..=2_592_000, " (30 days)");
    }
}

impl Escalation {
    /// `device_gating`: whether the profile has `deviceGating`, which
    /// `extendedResourcePods: TaintNode` needs.
    fn validate_into(&self, errors: &mut Errors, device_gating: bool) {
        self.validate_reasons(errors);
        if self.extended_resource_pods == ExtendedResourcePods::TaintNode && !device_gating {
            errors.fail(
                "extendedResourcePods",
                "TaintNode needs deviceGating: without it no device escalates, the node's own taint does",
            );
        }
        let percent = u32::from(self.max_no_execute_percent);
        errors.within("maxNoExecutePercent", percent, 0..=100, "");
        errors.within(
            "dryRunSeconds",
            self.dry_run_seconds,
            10..=604_800,
            " (7 days)",
        );
    }

    fn validate_reasons(&self, errors: &mut Errors) {
        if !(1..=16).contains(&self.reasons.len()) {
            errors.fail("reasons", "must list 1 to 16 reasons");
        }
        for (i, r) in self.reasons.iter().enumerate() {
            let mut chars = r.chars();
            let named = r.len() <= 64
                && chars.next().is_some_and(|c| c.is_ascii_uppercase())
                && chars.all(|c| c.is_ascii_alphanumeric());
            if !named {
                errors.fail(
                    "reasons",
                    format!(
                        "{r:?}: escalation.reasons must be reason names like FatalXid or GpuResetRequired"
                    ),
                );
            }
            if self.reasons[..i].contains(r) {
                errors.fail(
                    "reasons",
                    format!("{r:?}: escalation.reasons must not repeat a reason"),
                );
            }
        }
    }
}

impl MaintenanceRules {
    fn validate_into(&self, errors: &mut Errors) {
        errors.within(
            "deadlineSeconds",
            self.deadline_seconds,
            60..=2_592_000,
            " (30 days)",
        );
    }
}

impl DeviceGating {
    fn validate_into(&self, errors: &mut Errors) {
        errors.within("minReadyGpus", self.min_ready_gpus, 1..=1024, "");
    }
}

impl FabricExpectation {
    fn validate_into(&self, errors: &mut Errors) {
        if self.cliques.len() > 64 {
            errors.fail("cliques", "at most 64 entries");
        }
        for c in &self.cliques {
            if parse_clique(c).is_none() {
                errors.fail(
                    "cliques",
                    format!(
                        "{c:?} must be an NVLink clique as nvidia.com/gpu.clique spells it: <cluster UUID>.<clique ID>, e.g. 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"
                    ),
                );
            }
        }
        if let Some(v) = &self.min_driver_version
            && !is_driver_version(v)
        {
            errors.fail(
                "minDriverVersion",
                format!(
                    "{v:?} must look like 570.158.01 (at most 9 digits a part, no leading zero in the first two)"
                ),
            );
        }
        if let Some(k) = &self.group_by_label
            && !is_qualified_name(k)
        {
            errors.fail(
                "groupByLabel",
                format!("{k:?} must be a valid label key, like example.com/nvl-rack"),
            );
        }
        if self.imex_mode == Some(ImexMode::HostManaged)
            && self.compute_domain_cliques != ComputeDomainCliquePolicy::Ignore
        {
            errors.fail(
                "computeDomainCliques",
                "must be Ignore with fabric.imexMode HostManaged: the DRA driver writes no ComputeDomainCliques in host-managed IMEX mode, so every node would read Unknown",
            );
        }
    }
}

impl ExternalSignals {
    fn validate_into(&self, errors: &mut Errors) {
        if self.presets.is_empty() && self.conditions.is_empty() {
            errors.fail_here(
                "must name at least one preset or condition: an External layer that reads nothing would always be Ready",
            );
        }
        if self.presets.len() > 8 {
            errors.fail("presets", "at most 8 entries");
        }
        let mut presets = BTreeSet::new();
        for p in &self.presets {
            if !presets.insert(p) {
                errors.fail("presets", format!("preset {} is listed twice", p.as_str()));
            }
        }
        self.validate_conditions(errors);
        errors.within(
            "maxHeartbeatAgeSeconds",
            self.max_heartbeat_age_seconds,
            30..=604_800,
            " (7 days)",
        );
    }

    fn validate_conditions(&self, errors: &mut Errors) {
        if self.conditions.len() > 32 {
            errors.fail("conditions", "at most 32 entries");
        }
        let mut types = BTreeSet::new();
        for c in &self.conditions {
            if !types.insert(c.type_.as_str()) {
                errors.fail(
                    "conditions",
                    format!("condition type {:?} is listed twice", c.type_),
                );
            }
            if !is_condition_type(&c.type_) {
                errors.fail(
                    "conditions[].type",
                    format!(
                        "{:?} must be a condition type like GpuHealthy or example.com/GPUProblem (letters, digits, '-', '_', '.', '/')",
                        c.type_
                    ),
                );
            }
            if c.type_.starts_with(keys::CONDITION_GPU_READY) || c.type_ == "Ready" {
                errors.fail(
                    "conditions[].type",
                    format!(
                        "{:?}: gpuready's own GpuReady… conditions (gpuready would judge from what it writes) and kubelet's Ready (the Node layer reads it) cannot be named",
                        c.type_
                    ),
                );
            }
        }
    }
}

impl MigExpectation {
    fn validate_into(&self, errors: &mut Errors) {
        if let Some(c) = &self.config
            && !(1..=63).contains(&c.len())
        {
            errors.fail("config", format!("{c:?} must be 1 to 63 characters"));
        }
        if self.devices.len() > 16 {
            errors.fail("devices", "must list at most 16 MIG profiles");
        }
        for (k, v) in &self.devices {
            if !is_mig_profile(k) {
                errors.fail(
                    "devices",
                    format!(
                        "{k:?}: mig.devices keys must be MIG profile names like 1g.18gb or 1g.18gb+me"
                    ),
                );
            }
            if !(1..=1024).contains(v) {
                // Not `within`: the message names the MIG profile, one of many.
                errors.fail("devices", format!("{k}: {v} must be between 1 and 1024"));
            }
        }
    }
}
