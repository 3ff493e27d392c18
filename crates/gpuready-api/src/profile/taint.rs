//! How a profile gates its nodes: `Enforce` or `Observe`, when the readiness
//! taint is applied, and the taint itself.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::keys;

/// Whether gpuready acts on nodes or only reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Mode {
    /// Taint, label and condition nodes.
    #[default]
    Enforce,
    /// Report only: status, events and metrics, zero node writes.
    Observe,
}

/// When the readiness taint is applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaintPolicy {
    /// Taint whenever the node is not ready.
    #[default]
    Continuous,
    /// Taint only until the node is first ready; never re-taint afterwards.
    UntilFirstReady,
}

/// The readiness taint.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!self.key.matches('^([^/]*\\\\.)?(kubernetes\\\\.io|k8s\\\\.io|x-k8s\\\\.io|nvidia\\\\.com|karpenter\\\\.sh|karpenter\\\\.k8s\\\\.aws|azure\\\\.com|cloud\\\\.google\\\\.com|gke\\\\.io|amazonaws\\\\.com|oraclecloud\\\\.com)/') || self.key.startsWith('readiness.k8s.io/') || self.key.startsWith('startup-taint.cluster-autoscaler.kubernetes.io/') || self.key.startsWith('ignore-taint.cluster-autoscaler.kubernetes.io/')").message("taint.key must not be in a namespace other systems own (kubernetes.io, k8s.io, x-k8s.io, nvidia.com, karpenter.sh, karpenter.k8s.aws, the cloud providers' azure.com, cloud.google.com, gke.io, amazonaws.com, oraclecloud.com): pick your own domain, or one of the autoscaler prefixes readiness.k8s.io/, startup-taint.cluster-autoscaler.kubernetes.io/, ignore-taint.cluster-autoscaler.kubernetes.io/"))]
pub struct TaintSpec {
    /// Taint key. Default `readiness.k8s.io/gpuready-not-ready` (a startup
    /// taint for Karpenter and, with `--startup-taint-prefix`, Cluster Autoscaler).
    #[serde(default = "default_taint_key")]
    #[schemars(length(min = 1, max = 317))]
    // The Kubernetes CEL format library: the same rule as a taint key on a
    // Node (prefix a DNS subdomain of at most 253, name at most 63).
    #[x_kube(validation = Rule::new("!format.qualifiedName().validate(self).hasValue()").message("taint.key must be a qualified name like gpuready.io/not-ready"))]
    pub key: String,

    /// Taint value. Default `true`.
    #[serde(default = "default_taint_value")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new("self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')").message("taint.value must be a valid label value (letters, digits, '-', '_', '.')"))]
    pub value: String,

    /// Taint effect: `NoSchedule` (default), `PreferNoSchedule` or `NoExecute`.
    #[serde(default)]
    pub effect: TaintEffect,
}

fn default_taint_key() -> String {
    keys::DEFAULT_TAINT_KEY.to_owned()
}

fn default_taint_value() -> String {
    keys::DEFAULT_TAINT_VALUE.to_owned()
}

impl Default for TaintSpec {
    fn default() -> Self {
        TaintSpec {
            key: default_taint_key(),
            value: default_taint_value(),
            effect: TaintEffect::default(),
        }
    }
}

/// Kubernetes taint effect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaintEffect {
    #[default]
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}
