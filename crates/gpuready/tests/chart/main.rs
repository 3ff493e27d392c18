//! The Helm chart: rendered, linted, installed on a real kube-apiserver, as one
//! test binary (issue 51: one binary per suite, not per file). Each module was
//! a test file of its own; run one with `cargo test -p gpuready --test chart
//! <module>::`.
//!
//! The binary's shared control plane carries the chart's CRD and the monitoring
//! stand-ins (`chart_env`, one set of CRDs per binary); installs there use
//! unique release names or namespaces. `values_schema` and `chart_escalation`
//! only render. `chart_evidence`, `chart_upgrade` and part of `chart_rbac`
//! start a control plane of their own.

#[path = "../support/mod.rs"]
mod support;

mod chart;
mod chart_escalation;
mod chart_evidence;
mod chart_monitoring;
mod chart_probe;
mod chart_rbac;
mod chart_upgrade;
mod values_schema;
