//! The crate's one error type. Messages are written for the person reading a
//! failed test: they say what to run or where to look.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting, using or stopping a [`crate::TestEnv`].
#[derive(thiserror::Error)]
pub enum Error {
    /// A required binary is not where the lookup rules say it should be.
    #[error(
        "{name} not found at {} (looked there because {origin}).\n\
         Build the pinned control plane with `tests/control-plane/build.sh` (a no-op once built), \
         or point KUBEBUILDER_ASSETS at existing envtest assets.",
        path.display()
    )]
    MissingBinary {
        name: &'static str,
        path: PathBuf,
        origin: String,
    },

    /// The default asset folder could not be computed (no HOME, unreadable go.mod).
    #[error("cannot compute the control-plane asset folder: {0}")]
    AssetDir(String),

    /// Linux only: without setpriv the children would outlive a killed test.
    #[error(
        "setpriv (util-linux) not found on PATH; it is needed so etcd and kube-apiserver die with \
         the test process (apt-get install util-linux)"
    )]
    MissingSetpriv,

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("generating test certificates: {0}")]
    Certs(#[from] rcgen::Error),

    #[error("writing the kubeconfig: {0}")]
    KubeconfigYaml(#[from] serde_yaml_ng::Error),

    #[error("loading the generated kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),

    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),

    /// The process died while we waited for it.
    #[error("{process} exited before it was ready ({status}); last lines of {}:\n{tail}", log.display())]
    ExitedEarly {
        process: &'static str,
        status: String,
        log: PathBuf,
        tail: String,
    },

    /// The process is alive but never answered its readiness probe.
    #[error(
        "{process} not ready after {timeout:?} (last probe: {last_probe}); raise \
         GPUREADY_TESTENV_TIMEOUT_SECS on a slow machine. Last lines of {}:\n{tail}",
        log.display()
    )]
    Timeout {
        process: &'static str,
        timeout: Duration,
        last_probe: String,
        log: PathBuf,
        tail: String,
    },

    /// An upstream NFD CRD manifest could not be found, fetched or parsed.
    #[error("upstream NFD CRDs: {0}")]
    UpstreamNfd(String),

    /// A CRD did not become usable in time.
    #[error("{0}")]
    Crd(String),

    /// The shared environment failed once; every later caller gets the same story
    /// instead of paying for another failed start.
    #[error("the shared test environment failed to start: {0}")]
    Shared(String),
}

/// Debug prints the Display text: tests report errors through `expect`, which uses
/// Debug, and the multi-line log tail is unreadable as an escaped struct.
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}
