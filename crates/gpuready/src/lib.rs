//! gpuready as a library: the `check` engine front end and the controller, so
//! tests can run them in-process against a real API server.

pub mod check;
pub mod cluster;
pub mod controller;
pub mod input;
pub mod nfd_cli;
pub mod probe;
