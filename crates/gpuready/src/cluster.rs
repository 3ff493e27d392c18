//! Which cluster a command talks to (`--kubeconfig`, `--context`, shared by
//! `check`, `run` and `nfd-crds`), and errors that name the API server's address
//! and what to check when it cannot be reached.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// The User-Agent of every request gpuready sends (`gpuready/<version>`), so
/// audit logs and API Priority and Fairness can tell it from other clients
/// (a FlowSchema can match the ServiceAccount; the audit log shows this too).
pub const USER_AGENT: &str = concat!("gpuready/", env!("CARGO_PKG_VERSION"));

/// Sets gpuready's [`USER_AGENT`] on a client configuration (once).
pub fn identify(config: &mut kube::Config) {
    let name = http::header::USER_AGENT;
    if !config.headers.iter().any(|(n, _)| *n == name) {
        config
            .headers
            .push((name, http::HeaderValue::from_static(USER_AGENT)));
    }
}

/// The cluster flags every command that talks to a cluster takes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterArgs {
    /// Kubeconfig file; defaults to $KUBECONFIG, then ~/.kube/config, then the
    /// in-cluster service account.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use instead of the current one.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// Why no usable cluster configuration was found.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("reading kubeconfig {}: {source}", path.display())]
    ReadKubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("kubeconfig {what}: {source}")]
    Kubeconfig {
        what: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no Kubernetes configuration: set KUBECONFIG, pass --kubeconfig FILE, or run in a cluster ({0})"
    )]
    Infer(#[source] kube::config::InferConfigError),
    #[error("building the Kubernetes client for {server}: {source}")]
    Client {
        server: String,
        #[source]
        source: kube::Error,
    },
}

impl ClusterArgs {
    /// The client configuration these flags select: the file and context given,
    /// else kube's usual inference (KUBECONFIG, ~/.kube/config, in-cluster).
    pub async fn config(&self) -> Result<kube::Config, ClusterError> {
        let mut config = self.config_as_found().await?;
        identify(&mut config);
        Ok(config)
    }

    async fn config_as_found(&self) -> Result<kube::Config, ClusterError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        };
        match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let file =
                    Kubeconfig::read_from(path).map_err(|source| ClusterError::ReadKubeconfig {
                        path: path.clone(),
                        source,
                    })?;
                kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(|source| ClusterError::Kubeconfig {
                        what: path.display().to_string(),
                        source,
                    })
            }
            (None, Some(context)) => {
                kube::Config::from_kubeconfig(&options)
                    .await
                    .map_err(|source| ClusterError::Kubeconfig {
                        what: format!("context {context}"),
                        source,
                    })
            }
            (None, None) => kube::Config::infer().await.map_err(ClusterError::Infer),
        }
    }

    /// A client for [`Self::config`], and the API server address it talks to
    /// (for messages).
    pub async fn client(&self) -> Result<(kube::Client, String), ClusterError> {
        let config = self.config().await?;
        let server = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).map_err(|source| ClusterError::Client {
            server: server.clone(),
            source,
        })?;
        Ok((client, server))
    }
}

/// A request error in words a person can act on. An error the API server sent
/// is shown as it is; anything else means the server was never reached, so the
/// message names the address and what to check.
pub fn describe_request_error(server: &str, action: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{action}: {status}"),
        other => format!(
            "{action}: cannot reach the Kubernetes API server at {server} ({other}). \
             Check that the cluster is running and reachable from here, and that the \
             kubeconfig and context are the ones you mean (--kubeconfig, --context, KUBECONFIG)"
        ),
    }
}

#[cfg(test)]
mod tests;
