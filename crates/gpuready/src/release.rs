//! `gpuready release`: takes back everything gpuready put on the cluster's
//! nodes — its taint (exactly the key and effect its annotation records), the
//! labels its annotation lists, its annotations and its `GpuReady*` conditions —
//! as when a node leaves every profile (`plan_release`, the engine's own
//! function) — and deletes the DeviceTaintRules it wrote (its label and name
//! prefix, each by the uid seen), so no GPU stays tainted either. The Helm chart runs it as a pre-delete hook, so `helm uninstall`
//! never leaves a node tainted by an operator that no longer exists (such a node
//! would take no GPU work forever). With `--stop-deployment` it first scales the
//! controller's Deployment to zero and waits until its pods are gone, so no
//! replica re-taints a node after it was released.

use std::collections::BTreeMap;
use std::time::Duration;

use gpuready_api::device_taint_rule::{DeviceTaintRule, is_owned};
use gpuready_api::keys;
use gpuready_core::NodeFacts;
use gpuready_core::plan::plan_release;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::cluster::{ClusterArgs, ClusterError};
use crate::controller::write::node::{condition_patch, node_patch};

/// Attempts at a node's resourceVersion-locked write before giving up on it.
const MAX_CONFLICT_RETRIES: usize = 5;

#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Scale this Deployment (in --namespace) to zero and wait until its pods
    /// are gone before releasing: the controller must not re-taint the nodes.
    #[arg(long, value_name = "NAME")]
    pub stop_deployment: Option<String>,
    /// Namespace of --stop-deployment.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub namespace: String,
    /// How long to wait for the Deployment's pods to end.
    #[arg(long, value_parser = crate::cli::parse_duration, default_value = "120s")]
    pub timeout: Duration,
    /// Print what would be released and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Patch(#[from] crate::controller::Error),
    #[error("deployment {0} has no label selector")]
    NoSelector(String),
    #[error("the pods of deployment {0} did not end within {1:?}")]
    PodsRemain(String, Duration),
    #[error("node {0}: gave up after {1} resourceVersion conflicts")]
    TooManyConflicts(String, usize),
    #[error("{0} node(s) could not be released")]
    Failed(usize),
}

/// Runs `gpuready release`; the exit code: 0 released (or nothing to release),
/// 1 a node could not be released or the controller did not stop, 2 no cluster.
pub fn run(args: ReleaseArgs) -> std::process::ExitCode {
    let Some(runtime) = crate::one_shot_runtime() else {
        return std::process::ExitCode::from(2);
    };
    match runtime.block_on(release(&args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(ReleaseError::Cluster(e)) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

async fn release(args: &ReleaseArgs) -> Result<(), ReleaseError> {
    let config = args.cluster.config().await?;
    let server = config.cluster_url.to_string();
    let client =
        Client::try_from(config).map_err(|source| ClusterError::Client { server, source })?;
    if let Some(name) = &args.stop_deployment {
        stop_deployment(&client, &args.namespace, name, args.timeout, args.dry_run).await?;
    }
    let rules = release_device_rules(&client, args.dry_run).await?;
    let nodes: Api<Node> = Api::all(client);
    let mut failed = 0;
    let mut released = 0;
    for node in nodes.list(&ListParams::default()).await? {
        let name = node.name_any();
        match release_node(&nodes, node, args.dry_run).await {
            Ok(true) => released += 1,
            Ok(false) => {}
            Err(e) => {
                eprintln!("error: node {name}: {e}");
                failed += 1;
            }
        }
    }
    println!(
        "{released} node(s) and {rules} DeviceTaintRule(s) {}released{}",
        if args.dry_run { "would be " } else { "" },
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        }
    );
    if failed > 0 {
        return Err(ReleaseError::Failed(failed));
    }
    Ok(())
}

/// Deletes every DeviceTaintRule gpuready owns (exact ownership: its label
/// and name prefix, [`is_owned`]), each with the uid seen so a rule recreated
/// by someone else in between is left alone. Where DeviceTaintRules are not
/// served (an older cluster) there is nothing to release. Returns how many
/// were (or, with `dry_run`, would be) deleted.
async fn release_device_rules(client: &Client, dry_run: bool) -> Result<usize, ReleaseError> {
    let api: Api<DeviceTaintRule> = Api::all(client.clone());
    let selector = format!(
        "{}={}",
        keys::device_rules::LABEL_OWNED,
        keys::device_rules::LABEL_OWNED_VALUE
    );
    let list = match api.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let mut deleted = 0;
    for rule in list.iter().filter(|r| is_owned(r)) {
        let name = rule.name_any();
        if dry_run {
            println!("would delete DeviceTaintRule {name}");
            deleted += 1;
            continue;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: rule.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {
                println!("deleted DeviceTaintRule {name}");
                deleted += 1;
            }
            // Gone already, or replaced by another writer's (uid differs).
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(deleted)
}

/// Scales the controller to zero and waits until none of its pods is left.
async fn stop_deployment(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
    dry_run: bool,
) -> Result<(), ReleaseError> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let Some(deployment) = deployments.get_opt(name).await? else {
        println!("deployment {namespace}/{name} not found: nothing to stop");
        return Ok(());
    };
    let labels: BTreeMap<String, String> = deployment
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .ok_or_else(|| ReleaseError::NoSelector(name.to_owned()))?;
    if dry_run {
        println!("would scale deployment {namespace}/{name} to 0");
        return Ok(());
    }
    let params = PatchParams {
        field_manager: Some(keys::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    deployments
        .patch_scale(
            name,
            &params,
            &Patch::Merge(json!({ "spec": { "replicas": 0 } })),
        )
        .await?;
    println!("scaled deployment {namespace}/{name} to 0; waiting for its pods to end");
    let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = ListParams::default().labels(&selector.join(","));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left = pods.list(&list).await?.items.len();
        if left == 0 {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(ReleaseError::PodsRemain(name.to_owned(), timeout));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Releases one node as the controller releases a node no profile governs:
/// only what gpuready's annotations record as its own. `true` when something
/// was (or, with `dry_run`, would be) written.
async fn release_node(
    api: &Api<Node>,
    mut node: Node,
    dry_run: bool,
) -> Result<bool, ReleaseError> {
    let name = node.name_any();
    let params = PatchParams {
        field_manager: Some(keys::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    for _ in 0..MAX_CONFLICT_RETRIES {
        let changes = plan_release(&NodeFacts::from_node(&node));
        if changes.is_empty() {
            return Ok(false);
        }
        if dry_run {
            println!("would release node {name}");
            return Ok(true);
        }
        let mut version = node.resource_version();
        let written = async {
            if changes.patches_node() {
                let after = api
                    .patch(&name, &params, &Patch::Merge(&node_patch(&node, &changes)?))
                    .await?;
                version = after.resource_version();
            }
            if let Some(c) = &changes.conditions {
                api.patch_status(
                    &name,
                    &params,
                    &Patch::Strategic(condition_patch(version.clone(), c)?),
                )
                .await?;
            }
            Ok::<(), ReleaseError>(())
        }
        .await;
        match written {
            Ok(()) => {
                println!("released node {name}");
                return Ok(true);
            }
            Err(ReleaseError::Kube(kube::Error::Api(s))) if s.code == 409 => {
                node = api.get(&name).await?;
            }
            Err(e) => return Err(e),
        }
    }
    Err(ReleaseError::TooManyConflicts(name, MAX_CONFLICT_RETRIES))
}
