//! The engine's tests (facts, layers, plans, properties) as one test binary
//! (issue 51: one per crate, where each file was one). Pure functions over
//! built inputs, no process-wide state. Each module was a test file of its
//! own; run one with `cargo test -p gpuready-core --test engine <module>::`.

#[path = "../common/mod.rs"]
mod common;

mod device_gating;
mod device_taint_hazards;
mod dra_attributes;
mod evidence;
mod external;
mod fabric;
mod governance;
mod health;
mod layers;
mod lifecycle;
mod mig_strategies;
mod plan;
mod profile_status;
mod properties;
mod repair;
