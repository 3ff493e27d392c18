//! gpuready as a library: the `check` engine front end and the controller, so
//! tests can run them in-process against a real API server.

pub mod check;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod input;
pub mod nfd_cli;
pub mod nfd_io;
pub mod probe;
pub mod readers;
pub mod release;

/// A single-threaded runtime for the one-shot commands (live `check`,
/// `nfd-crds`, `probe`). On failure the reason is printed and `None` returned,
/// so each command exits with its own code for a broken environment.
pub fn one_shot_runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            None
        }
    }
}
