//! The try-out's story, shared by `examples/tryout` (what a newcomer runs) and
//! `tests/api/tryout.rs` (which runs it so it cannot rot): on a real control plane,
//! load the example clusters, start the `gpuready` binary, and watch one broken
//! node be tainted, repaired and released.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use gpuready_api::GpuNodeProfile;
use gpuready_api::keys;
use gpuready_testenv::TestEnv;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// The instant the example dumps were taken at (the README's `--now`): GFD
/// timestamps are shifted by (now − this), so fresh labels stay fresh and the
/// one stale on purpose stays stale.
const DUMPED_AT: i64 = 1_795_953_600; // 2026-11-29T12:00:00Z

/// The node the story follows, the profile governing it, and its repair.
pub const BROKEN_NODE: &str = "gtx1070-old-driver";
pub const PROFILE: &str = "legacy-cuda12";
const REPAIRED_DRIVER: (&str, &str, &str) = ("580", "95", "05");

/// How long gpuready may take to act on one step; generous for a loaded machine.
const STEP_TIMEOUT: Duration = Duration::from_secs(90);

pub type Say<'a> = &'a mut dyn FnMut(String);

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn err(context: &str) -> impl FnOnce(kube::Error) -> String + '_ {
    move |e| format!("{context}: {e}")
}

/// Installs the GpuNodeProfile CRD (generated from the types; a test keeps the
/// committed copy in deploy/crds equal to it).
async fn install_crd(client: &Client) -> Result<(), String> {
    let crd = gpuready_api::crd::gpu_node_profile_crd();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &crd.name_any(),
        &PatchParams::apply("gpuready-tryout").force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(err("applying the GpuNodeProfile CRD"))?;
    gpuready_testenv::crds::wait_established(client, &[&crd.name_any()])
        .await
        .map_err(|e| e.to_string())
}

/// The example clusters under deploy/examples, each folder's name and files.
fn examples() -> Result<Vec<(String, PathBuf)>, String> {
    let dir = repo_root().join("deploy/examples");
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("nodes.json").is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    found.sort();
    Ok(found)
}

/// Creates a node from a dump the way kubelet does: the object, then its status
/// through the status subresource (a create ignores status).
async fn create_node(client: &Client, mut dump: Value, shift: i64) -> Result<String, String> {
    let name = dump["metadata"]["name"]
        .as_str()
        .ok_or("a node without a name")?
        .to_owned();
    if let Some(ts) = dump["metadata"]["labels"][keys::nvidia::GFD_TIMESTAMP]
        .as_str()
        .and_then(|s| s.parse::<i64>().ok())
    {
        dump["metadata"]["labels"][keys::nvidia::GFD_TIMESTAMP] = json!((ts + shift).to_string());
    }
    let status = dump["status"].take();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dump["metadata"]["labels"],
            "annotations": dump["metadata"]["annotations"],
        },
        "spec": dump["spec"],
    }))
    .map_err(|e| format!("{name}: {e}"))?;
    let api: Api<Node> = Api::all(client.clone());
    api.create(&PostParams::default(), &node)
        .await
        .map_err(err(&format!("creating node {name}")))?;
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": status })),
    )
    .await
    .map_err(err(&format!("setting the status of node {name}")))?;
    // The API server's admission adds node.kubernetes.io/not-ready to every new
    // node; in a cluster the node lifecycle controller (which this control plane
    // does not run) lifts it once kubelet reports Ready. Put back the dump's own
    // taints, as that controller would leave them.
    let taints = dump["spec"]["taints"].take();
    let taints = if taints.is_null() { json!([]) } else { taints };
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "spec": { "taints": taints } })),
    )
    .await
    .map_err(err(&format!("setting the taints of node {name}")))?;
    Ok(name)
}

async fn apply_profiles(client: &Client, path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let api: Api<GpuNodeProfile> = Api::all(client.clone());
    let mut names = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let profile: GpuNodeProfile =
            serde::Deserialize::deserialize(doc).map_err(|e| format!("{}: {e}", path.display()))?;
        api.patch(
            &profile.name_any(),
            &PatchParams::apply("gpuready-tryout").force(),
            &Patch::Apply(&profile),
        )
        .await
        .map_err(err(&format!("applying profile {}", profile.name_any())))?;
        names.push(profile.name_any());
    }
    Ok(names)
}

/// What a person would look at on a node: gpuready's taint, its profile label
/// and its condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub tainted: bool,
    /// Every taint key on the node, gpuready's and others' (which it never touches).
    pub taints: Vec<String>,
    pub profile: Option<String>,
    pub condition: Option<(String, String)>,
}

fn seen(node: &Node) -> Seen {
    let taints: Vec<String> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| t.iter().map(|t| t.key.clone()).collect())
        .unwrap_or_default();
    let tainted = taints.iter().any(|k| k == keys::DEFAULT_TAINT_KEY);
    let condition = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == keys::CONDITION_GPU_READY))
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()));
    Seen {
        tainted,
        taints,
        profile: node.labels().get(keys::LABEL_PROFILE).cloned(),
        condition,
    }
}

fn describe(name: &str, s: &Seen) -> String {
    let verdict = match &s.condition {
        Some((status, reason)) => format!("GpuReady={status} ({reason})"),
        None => "no GpuReady condition".to_owned(),
    };
    let taints = if s.taints.is_empty() {
        "no taints".to_owned()
    } else {
        format!("taints: {}", s.taints.join(", "))
    };
    format!(
        "  {name:<19} {:<21} {verdict:<37} {taints}",
        s.profile.as_deref().unwrap_or("-")
    )
}

/// Polls the node until `want` holds, then returns what was seen.
async fn wait_for(
    api: &Api<Node>,
    name: &str,
    what: &str,
    want: impl Fn(&Seen) -> bool,
) -> Result<Seen, String> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        let node = api
            .get(name)
            .await
            .map_err(err(&format!("reading node {name}")))?;
        let s = seen(&node);
        if want(&s) {
            return Ok(s);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{name}: {what} did not happen within {}s; last seen {s:?}",
                STEP_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Waits until the number of nodes carrying a verdict stops changing (three
/// equal looks a second apart): gpuready has then judged every node it governs.
async fn settle(api: &Api<Node>) -> Result<(), String> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    let (mut last, mut same) = (usize::MAX, 0);
    while same < 3 {
        if Instant::now() > deadline {
            return Err("gpuready's verdicts did not settle".to_owned());
        }
        let judged = api
            .list(&kube::api::ListParams::default())
            .await
            .map_err(err("listing nodes"))?
            .into_iter()
            .filter(|n| seen(n).condition.is_some())
            .count();
        same = if judged == last { same + 1 } else { 0 };
        last = judged;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

/// The story. `gpuready_bin` is the `gpuready` binary to run; `say` receives
/// every line of narration. Stops the gpuready process it started before
/// returning, whatever happens; the caller owns (and drops) the control plane.
pub async fn run(env: &TestEnv, gpuready_bin: &Path, say: Say<'_>) -> Result<(), String> {
    let client = env.client().map_err(|e| e.to_string())?;
    say(format!(
        "control plane: etcd + kube-apiserver started on this machine (kubeconfig {})",
        env.kubeconfig_path().display()
    ));
    install_crd(&client).await?;
    say("installed the GpuNodeProfile CRD (deploy/crds)".to_owned());

    let shift = jiff::Timestamp::now().as_second() - DUMPED_AT;
    let mut nodes = Vec::new();
    for (name, dir) in examples()? {
        let text = std::fs::read_to_string(dir.join("nodes.json"))
            .map_err(|e| format!("{name}/nodes.json: {e}"))?;
        let list: Value = serde_json::from_str(&text).map_err(|e| format!("{name}: {e}"))?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let mut created = Vec::new();
        for item in items {
            created.push(create_node(&client, item, shift).await?);
        }
        let profiles = apply_profiles(&client, &dir.join("profiles.yaml")).await?;
        say(format!(
            "loaded example {name}: nodes {} (object, then status; GFD timestamps moved to now), profiles {}",
            created.join(", "),
            profiles.join(", ")
        ));
        nodes.extend(created);
    }

    let mut child = tokio::process::Command::new(gpuready_bin)
        .args(["run", "--nfd-crds", "off", "--http-addr", "127.0.0.1:0"])
        .args(["--identity", "tryout", "--lease-namespace", "default"])
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", gpuready_bin.display()))?;
    say(format!(
        "started `gpuready run` (pid {}) against it",
        child.id().unwrap_or_default()
    ));

    let story = follow(&client, &nodes, say).await;

    // Stop what we started, whatever the story's outcome: SIGTERM, as a pod gets.
    if let Some(pid) = child.id() {
        let _ = tokio::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
    }
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    match exit {
        Ok(Ok(status)) => say(format!("stopped gpuready ({status})")),
        _ => {
            let _ = child.kill().await;
            say("gpuready did not stop on SIGTERM within 30 s; killed it".to_owned());
        }
    }
    story
}

async fn follow(client: &Client, nodes: &[String], say: Say<'_>) -> Result<(), String> {
    let api: Api<Node> = Api::all(client.clone());

    say("gpuready judges every node; waiting for its verdicts to settle…".to_owned());
    wait_for(&api, BROKEN_NODE, "the first verdict", |s| {
        s.condition.is_some()
    })
    .await?;
    settle(&api).await?;
    for name in nodes {
        let node = api.get(name).await.map_err(err(name))?;
        say(describe(name, &seen(&node)));
    }
    say(
        "  (a node no profile selects, or one an Observe profile governs, gets nothing)".to_owned(),
    );

    say(format!(
        "\n1. {BROKEN_NODE} runs driver 535.183.01; profile {PROFILE} wants 570.124.06 or newer"
    ));
    let s = wait_for(&api, BROKEN_NODE, "the taint", |s| s.tainted).await?;
    say(describe(BROKEN_NODE, &s));

    let (major, minor, rev) = REPAIRED_DRIVER;
    say(format!(
        "\n2. repair: the driver is upgraded to {major}.{minor}.{rev}, and GFD relabels the node"
    ));
    let mut labels = json!({
        "nvidia.com/cuda.driver-version.full": format!("{major}.{minor}.{rev}"),
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.runtime-version.full": "13.0",
        "nvidia.com/cuda.runtime-version.major": "13",
        "nvidia.com/cuda.runtime-version.minor": "0",
    });
    labels[keys::nvidia::GFD_TIMESTAMP] = json!(jiff::Timestamp::now().as_second().to_string());
    let patch = json!({ "metadata": { "labels": labels } });
    api.patch(BROKEN_NODE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(err("relabelling the node"))?;
    let s = wait_for(&api, BROKEN_NODE, "ready and untainted", |s| {
        !s.tainted && s.condition.as_ref().is_some_and(|(st, _)| st == "True")
    })
    .await?;
    say(describe(BROKEN_NODE, &s));

    say(format!(
        "\n3. release: profile {PROFILE} is deleted; gpuready takes back what it wrote"
    ));
    let profiles: Api<GpuNodeProfile> = Api::all(client.clone());
    let governed: Vec<String> = api
        .list(
            &kube::api::ListParams::default().labels(&format!("{}={PROFILE}", keys::LABEL_PROFILE)),
        )
        .await
        .map_err(err("listing the profile's nodes"))?
        .into_iter()
        .map(|n| n.name_any())
        .collect();
    profiles
        .delete(PROFILE, &DeleteParams::default())
        .await
        .map_err(err("deleting the profile"))?;
    for name in &governed {
        let s = wait_for(&api, name, "released", |s| {
            !s.tainted && s.profile.is_none() && s.condition.is_none()
        })
        .await?;
        say(describe(name, &s));
    }
    Ok(())
}
