//! The fleet under test: N GPU nodes created the way kubelet creates them (the
//! object, then its status through the status subresource), with the bulk of a
//! real node (images, addresses, node info, kubelet conditions, NFD labels) so
//! memory per node means something, and one profile that governs them all;
//! for the DRA rows, one ResourceSlice per node as the NVIDIA DRA driver
//! publishes it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use gpuready_api::GpuNodeProfile;
use gpuready_testenv::rtx3090;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::error::Error;

/// Not under gpuready.io/: the CRD refuses a selector or ready label in
/// gpuready's own domain (subdomains included).
pub const POOL_LABEL: &str = "bench.example.com/pool";
pub const PROFILE: &str = "bench";
/// The profile's `readyLabels` key (gpuready sets it on ready nodes).
pub const READY_LABEL: &str = "bench.example.com/gpu";
pub fn node_name(i: usize) -> String {
    format!("gpu-{i:05}")
}

/// Installs the GpuNodeProfile CRD from the repository and waits for it.
pub async fn install_crd(client: &Client, repo: &Path) -> Result<(), Error> {
    let text = std::fs::read_to_string(repo.join("deploy/crds/gpunodeprofiles.gpuready.io.yaml"))?;
    let doc = text
        .split("---\n")
        .find(|d| d.contains("kind: CustomResourceDefinition"))
        .ok_or_else(|| Error::Other("no CRD in deploy/crds".into()))?;
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(doc)?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &crd.name_any(),
        &PatchParams::apply("gpuready-bench").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api, &crd.name_any(), conditions::is_crd_established()),
    )
    .await
    .map_err(|_| Error::Timeout("CRD established".into()))?
    .map_err(|e| Error::Other(e.to_string()))?;
    Ok(())
}

/// The profile: an RTX 3090 pool. `min_driver` decides whether every node is
/// broken ("999.0": driver too old) or ready ("570.0").
pub async fn apply_profile(client: &Client, min_driver: &str) -> Result<(), Error> {
    let p: GpuNodeProfile = serde_json::from_value(json!({
        "apiVersion": "gpuready.io/v1alpha1",
        "kind": "GpuNodeProfile",
        "metadata": { "name": PROFILE },
        "spec": {
            "nodeSelector": { "matchLabels": { POOL_LABEL: "a" } },
            "gpu": { "products": [rtx3090::PRODUCT], "minMemoryMib": 24000 },
            "minDriverVersion": min_driver,
            // The run is long; GFD labels must not go stale during it.
            "maxLabelAgeSeconds": 86400,
            "readyLabels": { READY_LABEL: "rtx3090" },
        }
    }))?;
    Api::<GpuNodeProfile>::all(client.clone())
        .patch(
            PROFILE,
            &PatchParams::apply("gpuready-bench").force(),
            &Patch::Apply(&p),
        )
        .await?;
    Ok(())
}

/// GFD, NFD and kubelet labels of a healthy RTX 3090 node.
pub fn labels(i: usize) -> BTreeMap<String, String> {
    let now = jiff::Timestamp::now().as_second();
    let mut l: BTreeMap<String, String> = [
        (POOL_LABEL, "a".to_owned()),
        ("kubernetes.io/hostname", node_name(i)),
        ("kubernetes.io/os", "linux".into()),
        ("kubernetes.io/arch", "amd64".into()),
        ("node.kubernetes.io/instance-type", "g5.2xlarge".into()),
        ("topology.kubernetes.io/region", "eu-west-1".into()),
        (
            "topology.kubernetes.io/zone",
            format!("eu-west-1{}", ["a", "b", "c"][i % 3]),
        ),
        ("nvidia.com/gpu.present", "true".into()),
        ("nvidia.com/gpu.machine", "g5.2xlarge".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    l.extend(rtx3090::labels_at(now));
    for f in [
        "cpu-cpuid.AVX2",
        "cpu-cpuid.AVX512F",
        "cpu-cpuid.FMA3",
        "cpu-hardware_multithreading",
        "cpu-model.family",
        "kernel-version.major",
        "kernel-version.minor",
        "memory-numa",
        "pci-0200_1d0f.present",
        "storage-nonrotationaldisk",
        "system-os_release.ID",
        "system-os_release.VERSION_ID",
    ] {
        l.insert(format!("feature.node.kubernetes.io/{f}"), "true".into());
    }
    l
}

/// The status a kubelet writes: capacity, conditions, addresses, node info and
/// a list of images (the bulk gpuready drops from its cache).
pub fn status(i: usize) -> Value {
    let now = jiff::Timestamp::now().to_string();
    let cond = |t: &str, s: &str, r: &str| {
        json!({ "type": t, "status": s, "reason": r, "message": format!("kubelet: {r}"),
                "lastHeartbeatTime": now, "lastTransitionTime": now })
    };
    let images: Vec<Value> = (0..12)
        .map(|k| {
            json!({
                "names": [
                    format!("registry.example/team-{k}/image@sha256:{:064x}", i * 31 + k),
                    format!("registry.example/team-{k}/image:v1.{k}.{}", i % 7),
                ],
                "sizeBytes": 100_000_000 + k * 1000,
            })
        })
        .collect();
    let res = json!({ "cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "200Gi",
                      "hugepages-2Mi": "0", "hugepages-1Gi": "0", "nvidia.com/gpu": "1" });
    json!({
        "status": {
            "capacity": res, "allocatable": res,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID"),
                cond("Ready", "True", "KubeletReady"),
            ],
            "addresses": [
                { "type": "InternalIP", "address": format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256) },
                { "type": "Hostname", "address": node_name(i) },
                { "type": "InternalDNS", "address": format!("{}.eu-west-1.compute.internal", node_name(i)) },
            ],
            "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
            "nodeInfo": {
                "machineID": format!("{:032x}", i), "systemUUID": format!("ec2{:029x}", i),
                "bootID": format!("{:032x}", i * 7), "kernelVersion": "6.8.0-1019-aws",
                "osImage": "Ubuntu 24.04.1 LTS", "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": "v1.37.2", "kubeProxyVersion": "", "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        }
    })
}

/// Node `i` as kubelet registers it: one object that carries its status too
/// (the API server keeps a Node's status on create; kubelet's later
/// heartbeats go through the status subresource), with `taint` on it as
/// kubelet's `--register-with-taints` puts it.
fn node(i: usize, taint: Option<&str>) -> Result<Node, Error> {
    let mut doc = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": node_name(i), "labels": labels(i) },
        "spec": { "providerID": format!("aws:///eu-west-1a/i-{i:017x}") },
    });
    if let Some(key) = taint {
        doc["spec"]["taints"] = json!([{ "key": key, "value": "true", "effect": "NoSchedule" }]);
    }
    if let (Some(obj), Value::Object(mut st)) = (doc.as_object_mut(), status(i))
        && let Some(s) = st.remove("status")
    {
        obj.insert("status".into(), s);
    }
    Ok(serde_json::from_value(doc)?)
}

/// Creates nodes `0..n`, one POST each, with `taint` on each when given.
/// Prints progress every ten seconds: at 100,000 nodes this takes minutes.
pub async fn create_nodes(
    client: &Client,
    n: usize,
    concurrency: usize,
    taint: Option<&str>,
) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    let done = std::sync::atomic::AtomicUsize::new(0);
    let began = std::time::Instant::now();
    let work = futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let done = &done;
            async move {
                api.create(&PostParams::default(), &node(i, taint)?).await?;
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok::<(), Error>(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>();
    let mut work = std::pin::pin!(work);
    loop {
        match tokio::time::timeout(Duration::from_secs(10), &mut work).await {
            Ok(result) => {
                result?;
                return Ok(());
            }
            Err(_) => {
                let k = done.load(std::sync::atomic::Ordering::Relaxed);
                let rate = k as f64 / began.elapsed().as_secs_f64().max(0.001);
                eprintln!(
                    "  … {k} of {n} nodes created ({rate:.0}/s, about {:.0} s left)",
                    (n - k.min(n)) as f64 / rate.max(0.001)
                );
            }
        }
    }
}

/// Creates nodes `range` at once (`concurrency` POSTs in flight), each
/// registered with the taint `taint_key`, as an autoscaler's new nodes join.
/// Returns each node's name and when its POST returned (the node existed).
pub async fn create_joiners(
    client: &Client,
    range: std::ops::Range<usize>,
    taint_key: &str,
    concurrency: usize,
) -> Result<Vec<(String, std::time::Instant)>, Error> {
    let api: Api<Node> = Api::all(client.clone());
    futures::stream::iter(range)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &node(i, Some(taint_key))?)
                    .await?;
                Ok::<_, Error>((node_name(i), std::time::Instant::now()))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await
}

/// Deletes nodes `range` (`concurrency` in flight).
pub async fn delete_nodes(
    client: &Client,
    range: std::ops::Range<usize>,
    concurrency: usize,
) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    futures::stream::iter(range)
        .map(|i| {
            let api = api.clone();
            async move {
                api.delete(&node_name(i), &Default::default()).await?;
                Ok::<(), Error>(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The ResourceSlice of node `i`: one RTX 3090 as the NVIDIA DRA driver
/// publishes it (the attributes the node's GFD labels give, so the node stays
/// ready when it is judged from the slice), `broken`: the device carries a
/// blocking taint, which makes the node not ready (`DevicesTainted`).
pub fn slice(i: usize, broken: bool) -> Value {
    let node = node_name(i);
    let mut device = json!({
        "name": "gpu-0",
        "attributes": {
            "type": { "string": "gpu" },
            "uuid": { "string": format!("GPU-{:08x}-0000-4000-8000-{:012x}", i, i) },
            "productName": { "string": rtx3090::NVML_NAME },
            "architecture": { "string": "Ampere" },
            "brand": { "string": "Nvidia" },
            "cudaComputeCapability": { "version": "8.6.0" },
            "cudaDriverVersion": { "version": "13.0.0" },
            "driverVersion": { "version": "580.178.4" },
        },
        "capacity": { "memory": { "value": format!("{}Mi", rtx3090::MEMORY_MIB) } },
    });
    // Absent when healthy: the driver's apply then drops the taint it owned.
    if broken {
        device["taints"] = json!([
            { "key": "bench.example.com/broken", "value": "bench", "effect": "NoSchedule" }
        ]);
    }
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": { "name": slice_name(i) },
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": { "name": node, "generation": 1, "resourceSliceCount": 1 },
            "devices": [device],
        }
    })
}

pub fn slice_name(i: usize) -> String {
    format!("{}-gpu.nvidia.com", node_name(i))
}

/// The ResourceSlice API (dynamic: gpuready's own typed view is read-only).
pub fn slice_api(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &gpuready::readers::slice_resource())
}

/// Publishes (or replaces) node `i`'s slice as the driver would, one
/// server-side apply.
pub async fn put_slice(api: &Api<DynamicObject>, i: usize, broken: bool) -> Result<(), Error> {
    let obj: DynamicObject = serde_json::from_value(slice(i, broken))?;
    api.patch(
        &slice_name(i),
        &PatchParams::apply("gpuready-bench-driver").force(),
        &Patch::Apply(&obj),
    )
    .await?;
    Ok(())
}

/// Publishes the slices of nodes `nodes`, `concurrency` in flight.
pub async fn put_slices(
    client: &Client,
    nodes: std::ops::Range<usize>,
    broken: bool,
    concurrency: usize,
) -> Result<(), Error> {
    let api = slice_api(client);
    futures::stream::iter(nodes)
        .map(|i| {
            let api = api.clone();
            async move { put_slice(&api, i, broken).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}
