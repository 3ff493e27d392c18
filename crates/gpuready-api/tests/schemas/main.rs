//! The API types against their committed and upstream schemas, as one test
//! binary (issue 51). Each module was a test file of its own; run one with
//! `cargo test -p gpuready-api --test schemas <module>::`.

mod crd_drift;
mod nfd_conformance;
