//! The `gpuready` binary's CLI and everything that needs no cluster, as one
//! test binary (issue 51: one binary links the dependency graph once, where a
//! binary per file linked it 47 times). Each module was a test file of its own;
//! run one with `cargo test -p gpuready --test cli <module>::`.
//!
//! Only `cli_cluster` starts a control plane (the binary's shared one, to hand
//! `check` and `run` a kubeconfig): its `run` is the controller, which acts
//! cluster-wide, so no other module here may use that shared environment.

#[path = "../support/mod.rs"]
mod support;

mod check_cli;
mod check_field_evidence;
mod check_hardening;
mod cli_cluster;
mod fuzz_check;
mod module_graph;
mod release;
