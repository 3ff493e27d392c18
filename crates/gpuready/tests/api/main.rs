//! Tests against a real kube-apiserver (issue 51: one test binary, where each
//! file was one). Each module was a test file of its own; run one with
//! `cargo test -p gpuready --test api <module>::`.
//!
//! Most modules start a control plane per test (`env_with_crd`,
//! `TestEnv::start`: controllers are cluster-wide), which a shared process does
//! not change. The binary's one shared control plane (`TestEnv::shared`) is
//! used by `crd_admission` (with the committed CRD), `probe` (nodes and
//! namespaces of unique names, no CRD) and `nfd_crds_apiserver` (NFD's CRDs,
//! which the other two never touch); none of them runs a controller on it.
//! Tests that run one on their shared environment (`monitoring_rules`, `flux`:
//! profiles of fixed names, and the chart's CRD alone; `cli_cluster`, in the
//! `cli` binary) or apply the chart's admission policy to it (`admission_policy`)
//! are kept away from this one.

#[path = "../support/mod.rs"]
mod support;

mod check_live;
mod check_matches_run;
mod controller;
mod controller_bad_profiles;
mod controller_faults;
mod controller_injected_errors;
mod controller_refused_writes;
mod controller_requests;
mod controller_resilience;
mod controller_scenarios;
mod controller_self_selection;
mod controller_writes;
mod crd_admission;
mod device_rules_controller;
mod device_taint_hazards_controller;
mod evidence_controller;
mod field_evidence_controller;
mod initial_list;
mod lifecycle_controller;
mod nfd_crds_apiserver;
mod nfd_reconciler;
mod probe;
mod profile_differential;
mod repair_controller;
mod run_binary;
mod taint_key_change;
mod tryout;
