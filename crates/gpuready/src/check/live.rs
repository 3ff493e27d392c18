//! A live `gpuready check`: what `gpuready run` lists from a cluster, read
//! with GET/LIST requests only, each source that is not served read as "not
//! read" rather than failing the check.

use gpuready_api::compute_domain::ComputeDomainClique;
use gpuready_api::device_taint_rule::DeviceTaintRule;
use gpuready_api::dra::ResourceSlice;
use gpuready_api::nfd::NodeFeature;
use gpuready_api::resource_claim::ResourceClaim;
use gpuready_core::probe::Carriers;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams};

use super::args::CheckArgs;
use super::engine::{CheckReport, run_engine};
use super::extra::read_evidence_files;
use crate::cluster::{ClusterError, describe_request_error};
use crate::input::{self, InputError};

/// Why a live check could not run. Maps to exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A request failed; the text names the server when it was not reached.
    #[error("{0}")]
    Request(String),
    #[error(transparent)]
    Input(#[from] InputError),
}

/// Live check: nodes (and, unless files are given, profiles) from the cluster.
/// Only GET/LIST requests are sent.
pub async fn check_live(args: &CheckArgs) -> Result<CheckReport, LiveError> {
    let (client, server) = args.cluster.client().await?;
    check_cluster(&client, &server, args).await
}

/// The live check over an existing client; `server` names the API server in
/// errors. The tests judge the clusters they build through this, so "what
/// `check` prints" and "what the tests compare against" cannot drift apart.
pub async fn check_cluster(
    client: &kube::Client,
    server: &str,
    args: &CheckArgs,
) -> Result<CheckReport, LiveError> {
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| LiveError::Request(describe_request_error(server, "listing nodes", &e)))?
        .items;
    let profiles = if args.profiles.is_empty() {
        // Untyped, then typed one by one, as `gpuready run` reads them: one
        // profile the types cannot hold (admitted by an older CRD) is named
        // and skipped, not taken for an unreachable server.
        match crate::readers::dynamic_api(client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list
                .items
                .iter()
                .filter_map(|o| {
                    let name = o.metadata.name.as_deref().unwrap_or_default();
                    let typed = crate::readers::to_profile(o).and_then(|p| {
                        gpuready_core::select::profile_selector(&p)
                            .map(|_| p)
                            .map_err(|e| format!("spec.nodeSelector: {}", e.message))
                    });
                    typed
                        .map_err(|why| {
                            eprintln!(
                                "warning: GpuNodeProfile {name} cannot be read and is skipped, as gpuready run skips it: {why}"
                            )
                        })
                        .ok()
                })
                .collect(),
            Err(kube::Error::Api(s)) if s.code == 404 => {
                eprintln!(
                    "warning: the GpuNodeProfile CRD is not installed: every node is ungoverned (pass --profiles FILE for a what-if)"
                );
                Vec::new()
            }
            Err(e) => {
                return Err(LiveError::Request(describe_request_error(
                    server,
                    "listing gpunodeprofiles",
                    &e,
                )));
            }
        }
    } else {
        input::read_all_profiles(&args.profiles)?
    };
    let mut extra = read_evidence_files(args)?;
    if args.resource_slices.is_empty() {
        extra.resource_slices = list_resource_slices(client).await?;
    }
    if args.node_features.is_empty() {
        extra.node_features = list_node_features(client).await?;
    }
    if args.device_taint_rules.is_empty() {
        let all = list_device_rules(client).await?;
        extra.set_device_taint_rules(all);
    }
    if args.resource_claims.is_empty() {
        extra.resource_claims = list_resource_claims(client).await?;
    }
    if args.compute_domain_cliques.is_empty() {
        extra.compute_domain_cliques = list_compute_domain_cliques(client).await?;
    }
    if args.probe_reports.is_empty() {
        extra.carriers = list_probe_reports(client, &args.probe_namespace).await?;
    }
    Ok(run_engine(
        &nodes,
        &profiles,
        &mut extra,
        args.now.unwrap_or_else(Timestamp::now),
    )?)
}

/// Every object `api` lists with `params`, or `None` where the API is not
/// served or not readable (404, 403): `unread` is then told the status code
/// (to warn what is lost), and the source counts as not read.
async fn list_or_none<K>(
    api: Api<K>,
    params: &ListParams,
    what: &str,
    unread: impl FnOnce(u16),
) -> Result<Option<Vec<K>>, LiveError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.list(params).await {
        Ok(list) => Ok(Some(list.items)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
            unread(s.code);
            Ok(None)
        }
        Err(e) => Err(LiveError::Request(format!("listing {what}: {e}"))),
    }
}

/// Every `K` in the cluster, through [`list_or_none`]: the sources read
/// cluster-wide and unfiltered differ only in the kind and what is lost.
async fn list_all<K>(
    client: &kube::Client,
    what: &str,
    unread: impl FnOnce(u16),
) -> Result<Option<Vec<K>>, LiveError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    list_or_none(
        Api::all(client.clone()),
        &ListParams::default(),
        what,
        unread,
    )
    .await
}

/// `resource.k8s.io/v1` ResourceSlices, or `None` where the API is not served
/// (clusters before 1.34, or DRA turned off): the evidence is then Unknown.
async fn list_resource_slices(
    client: &kube::Client,
) -> Result<Option<Vec<ResourceSlice>>, LiveError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &crate::readers::slice_resource());
    let all = list_or_none(api, &ListParams::default(), "resourceslices", |code| {
        eprintln!(
            "warning: resource.k8s.io/v1 ResourceSlices are not served or not readable ({code}): DRA evidence is unavailable"
        )
    })
    .await?;
    Ok(all.map(|items| {
        items
            .into_iter()
            .filter_map(crate::readers::slice_from_dynamic)
            .collect()
    }))
}

/// NFD's NodeFeatures, or `None` where the CRD is not installed.
async fn list_node_features(client: &kube::Client) -> Result<Option<Vec<NodeFeature>>, LiveError> {
    list_all(client, "nodefeatures", |code| {
        eprintln!(
            "warning: NodeFeatures are not served or not readable ({code}): GPU counts on the PCI bus are unavailable"
        )
    })
    .await
}

/// The DRA driver's ComputeDomainCliques in every namespace, or `None` where
/// `resource.nvidia.com/v1beta1` is not served or not readable (no DRA driver,
/// its ComputeDomainCliques gate off): profiles that read them are then Unknown.
async fn list_compute_domain_cliques(
    client: &kube::Client,
) -> Result<Option<Vec<ComputeDomainClique>>, LiveError> {
    list_all(client, "computedomaincliques", |_| {}).await
}

/// The probe report ConfigMaps in `namespace`, selected by label as the
/// controller's watch selects them. None where ConfigMaps there cannot be
/// listed: the Health layer then judges every node as one without a report.
async fn list_probe_reports(client: &kube::Client, namespace: &str) -> Result<Carriers, LiveError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(&gpuready_core::probe::carrier_selector());
    let what = format!("configmaps in {namespace}");
    let all = list_or_none(api, &params, &what, |code| {
        eprintln!(
            "warning: probe report ConfigMaps in namespace {namespace} are not readable ({code}): the Health layer sees no report (pass --probe-reports FILE...)"
        )
    })
    .await?;
    Ok(all.map(Carriers::new).unwrap_or_default())
}

/// Every DeviceTaintRule (anyone's: they are few), or `None` where
/// `resource.k8s.io/v1` DeviceTaintRules are not served or not readable:
/// device gating then plans no rule and gates whole nodes.
async fn list_device_rules(
    client: &kube::Client,
) -> Result<Option<Vec<DeviceTaintRule>>, LiveError> {
    list_all(client, "devicetaintrules", |_| {}).await
}

/// ResourceClaims in every namespace, or `None` where they are not served or
/// not readable: the pods a `NoExecute` device taint leaves running are then
/// not counted.
async fn list_resource_claims(
    client: &kube::Client,
) -> Result<Option<Vec<ResourceClaim>>, LiveError> {
    list_all(client, "resourceclaims", |code| {
        eprintln!(
            "warning: resource.k8s.io/v1 ResourceClaims are not served or not readable ({code}): pods holding a GPU as a DRA extended resource are not counted"
        )
    })
    .await
}
