//! The controller's error type: what failed, and a short kind for metrics.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the GpuNodeProfile CRD is not installed or not established: {0}")]
    CrdMissing(String),
    #[error("waiting for the profile cache: {0}")]
    CacheNotReady(String),
    #[error("node {0}: gave up after {1} resourceVersion conflicts")]
    TooManyConflicts(String, usize),
    #[error("serializing a patch: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("leader election: {0}")]
    Lease(#[from] kube_lease_manager::LeaseManagerError),
    #[error("lost the leader lease")]
    LostLeadership,
    #[error("write refused: this replica no longer holds a fresh leader lease ({0})")]
    Fenced(String),
    #[error("node {node}: {}: {why}", what.sentence())]
    Refused {
        node: String,
        why: String,
        what: RefusedWrite,
    },
    #[error("HTTP server: {0}")]
    Http(#[from] std::io::Error),
}

impl Error {
    /// Every label [`Error::kind`] gives: `gpuready_reconcile_errors_total` starts
    /// at 0 for each, because a series that first appears at its first error
    /// hides that error from `rate()` and `increase()`, and so from the alerts.
    pub const KINDS: [&'static str; 12] = [
        "conflict",
        "forbidden",
        "api",
        "client",
        "crd_missing",
        "cache",
        "conflict_retries",
        "serialize",
        "lease",
        "fenced",
        "refused",
        "http",
    ];

    /// A stable label for the `gpuready_reconcile_errors_total` metric.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.code == 409 => "conflict",
            Error::Kube(kube::Error::Api(s)) if s.code == 403 => "forbidden",
            Error::Kube(kube::Error::Api(_)) => "api",
            Error::Kube(_) => "client",
            Error::CrdMissing(_) => "crd_missing",
            Error::CacheNotReady(_) => "cache",
            Error::TooManyConflicts(..) => "conflict_retries",
            Error::Serialize(_) => "serialize",
            Error::Lease(_) | Error::LostLeadership => "lease",
            Error::Fenced(_) => "fenced",
            Error::Refused { .. } => "refused",
            Error::Http(_) => "http",
        }
    }
}

/// What part of a node write the API server refused (the node book keeps it).
pub use gpuready_core::node_book::RefusedWrite;

/// True for a resourceVersion precondition failure.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}
