//! Reading node dumps and profile files, with errors that name the file, the
//! document and the field.
//!
//! Files are read the way kubectl reads them (UTF-8 or UTF-16 with a byte-order
//! mark; one JSON value, or a YAML stream read as YAML 1.1 like kubectl: see
//! [`yaml`]) and the items of a `List` are streamed, JSON and YAML alike: each is
//! parsed, checked and turned into its typed object on its own, so memory stays
//! near the size of the input instead of holding the whole file as a tree next
//! to the typed copy.
//!
//! This file holds the readers `check` calls, one per kind; the parts below
//! it are the error (`error`), a file's text (`text`), the stream of its
//! objects (`stream`, `yaml`) and the checks every object passes before it is
//! typed (`objects`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpuready_api::GpuNodeProfile;
use gpuready_api::dra::ResourceSlice;
use gpuready_api::nfd::NodeFeature;
use k8s_openapi::api::core::v1::Node;
use serde_json::Value;

mod error;
mod objects;
mod stream;
mod text;
mod yaml;

pub use error::InputError;
use objects::objects;
pub use text::MAX_FLOW_DEPTH;
pub use yaml::{MAX_DEPTH, MAX_OBJECT_CHARS};

/// Every object of one kind in a file, typed, with nothing checked beyond
/// what [`objects`] checks of every object.
fn every<T: serde::de::DeserializeOwned>(
    path: &Path,
    api_version: &str,
    kind: &'static str,
) -> Result<Vec<T>, InputError> {
    let mut out = Vec::new();
    objects(
        path,
        api_version,
        kind,
        |_: &mut Value| Vec::new(),
        |o: T, _| {
            out.push(o);
            Vec::new()
        },
    )?;
    Ok(out)
}

/// Nodes as `kubectl get nodes -o json` (or `-o yaml`) prints them, handed to
/// `each` one by one as they are read (and dropped after it).
pub fn for_each_node(path: &Path, each: &mut dyn FnMut(&Node)) -> Result<(), InputError> {
    objects(
        path,
        "v1",
        "Node",
        |_: &mut Value| Vec::new(),
        |n: Node, _| {
            each(&n);
            Vec::new()
        },
    )
    .map(|_| ())
}

/// ResourceSlices as `kubectl get resourceslices -o json` prints them.
pub fn read_resource_slices(path: &Path) -> Result<Vec<ResourceSlice>, InputError> {
    every(path, "resource.k8s.io/v1", "ResourceSlice")
}

/// The DRA driver's ComputeDomainCliques as `kubectl get computedomaincliques
/// -A -o json` prints them.
pub fn read_compute_domain_cliques(
    path: &Path,
) -> Result<Vec<gpuready_api::compute_domain::ComputeDomainClique>, InputError> {
    every(path, "resource.nvidia.com/v1beta1", "ComputeDomainClique")
}

/// DeviceTaintRules, anyone's, as `kubectl get devicetaintrules -o json`
/// prints them.
pub fn read_device_taint_rules(
    path: &Path,
) -> Result<Vec<gpuready_api::device_taint_rule::DeviceTaintRule>, InputError> {
    every(path, "resource.k8s.io/v1", "DeviceTaintRule")
}

/// ResourceClaims as `kubectl get resourceclaims -A -o json` prints them
/// (only the scheduler's extended-resource claims are read from them).
pub fn read_resource_claims(
    path: &Path,
) -> Result<Vec<gpuready_api::resource_claim::ResourceClaim>, InputError> {
    every(path, "resource.k8s.io/v1", "ResourceClaim")
}

/// ConfigMaps (probe report carriers, for `check --probe-reports`): a List,
/// single objects, multi-document YAML, as `kubectl get configmaps -o yaml`
/// prints them. Which of them carry reports is the core's business
/// (`gpuready_core::probe::Carriers`).
pub fn read_configmaps(
    path: &Path,
) -> Result<Vec<k8s_openapi::api::core::v1::ConfigMap>, InputError> {
    every(path, "v1", "ConfigMap")
}

/// NFD NodeFeatures as `kubectl get nodefeatures -A -o json` prints them.
pub fn read_node_features(path: &Path) -> Result<Vec<NodeFeature>, InputError> {
    let mut out = Vec::new();
    objects(
        path,
        "nfd.k8s-sigs.io/v1alpha1",
        "NodeFeature",
        |_: &mut Value| Vec::new(),
        |f: NodeFeature, _| match gpuready_core::evidence::node_feature_node(&f) {
            Some(_) => {
                out.push(f);
                Vec::new()
            }
            None => vec![(
                format!(
                    "metadata.labels[{}]",
                    gpuready_api::keys::nfd::NODE_NAME_LABEL
                ),
                "required: it names the node the features belong to".to_owned(),
            )],
        },
    )?;
    Ok(out)
}

/// Profiles of several files, checked with the same rules the API server applies
/// at admission, and refused when two share a name: the API server holds one
/// object per name, so the second would replace the first (kubectl apply) or be
/// refused (create), never sit beside it.
pub fn read_all_profiles(paths: &[PathBuf]) -> Result<Vec<GpuNodeProfile>, InputError> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut errors = Vec::new();
    for path in paths {
        let read = objects(
            path,
            "gpuready.io/v1alpha1",
            "GpuNodeProfile",
            |raw: &mut Value| {
                // What the server stores: nulls of non-nullable fields dropped,
                // integral floats (1000.0, 1.5e7) of integer fields as integers.
                gpuready_api::validate::prune_nulls(raw);
                gpuready_api::validate::integral_numbers(raw);
                // Strict like `kubectl apply` (server-side field validation
                // Strict): a misspelt field would otherwise be dropped silently
                // and the check would judge a different profile.
                gpuready_api::validate::unknown_fields(raw)
                    .into_iter()
                    .map(|field| (field, "unknown field (misspelt?)".to_owned()))
                    .collect()
            },
            |p: GpuNodeProfile, doc| {
                let mut problems: Vec<(String, String)> = p
                    .validate()
                    .into_iter()
                    .map(|e| (e.field, e.message))
                    .collect();
                if let Err(e) = gpuready_core::select::profile_selector(&p) {
                    problems.push(("spec.nodeSelector".into(), e.message));
                }
                let name = p.metadata.name.clone().unwrap_or_default();
                let here = format!("{} document {doc}", path.display());
                if let Some(first) = seen.insert(name.clone(), here) {
                    problems.push((
                        "metadata.name".into(),
                        format!(
                            "{name:?} is also the name of the profile in {first}: the API server keeps one object per name (give each profile its own name)"
                        ),
                    ));
                }
                if problems.is_empty() {
                    out.push(p);
                }
                problems
            },
        );
        if let Err(e) = read {
            errors.push(e);
        }
    }
    match InputError::from_all(errors) {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod empty_list_tests;
