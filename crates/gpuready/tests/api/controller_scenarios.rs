//! The controller against a real kube-apiserver, scenario by scenario, each the
//! promise a user relies on: every failing layer taints the node and recovery
//! releases it, a GFD timestamp going stale taints without any node change,
//! Observe reports and never writes a node, UntilFirstReady releases once and
//! never taints again, the safety brake holds new taints when most of a pool
//! fails at once, a node leaving its profile's selector is cleaned (and gated
//! again when it comes back), and a node two profiles select is left as it is
//! with reason Conflict. Foreign taints survive every one of them.

use crate::support;

use gpuready_api::keys;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::{Client, ResourceExt};
use serde_json::json;
use support::*;

/// Waits until the node is released: no gpuready taint, labelled ready with the
/// profile's ready label, `GpuReady=True`, and the admission's taint still there.
async fn expect_ready(client: &Client, name: &str, profile: &str) {
    eventually(30, &format!("{name} ready and untainted"), || async {
        let n = get_node(client, name).await;
        (!gated(&n)
            && label(&n, keys::LABEL_READY).as_deref() == Some("true")
            && label(&n, keys::LABEL_PROFILE).as_deref() == Some(profile)
            && label(&n, "example.org/gpu").as_deref() == Some("rtx3090")
            && gpu_ready(&n) == Some(("True".into(), "Ready".into())))
        .then_some(())
    })
    .await;
    let n = get_node(client, name).await;
    assert!(has_taint(&n, ADMISSION_TAINT), "{name}: foreign taint kept");
}

/// A node joins layer by layer: each layer's labels (or allocatable) come two
/// seconds after the last. gpuready times the wait: the record on the node
/// (`gpuready.io/timeline`, written with the ready label) has the layers in the
/// order they turned Ready, the histograms count one join and each layer,
/// the profile status says the window's join times and slowest layer, and
/// `check` prints the node's last wait naming the layer that held it longest.
#[tokio::test]
async fn a_joining_node_is_timed_layer_by_layer_from_its_registration() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    apply_profile(&client, &rtx3090_profile("joins", "j", "")).await;
    let run = start_controller(&env, test_args());
    let gfd = gfd_3090();
    let first: std::collections::BTreeMap<String, String> = [
        (POOL, "j"),
        ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    create_node(&client, "gpu-j", first, 0, json!([])).await;
    let pause = || tokio::time::sleep(std::time::Duration::from_secs(2));
    pause().await;
    let driver = "nvidia.com/cuda.driver-version.full";
    set_labels(&client, "gpu-j", json!({ driver: gfd[driver] })).await;
    pause().await;
    set_node_status(&client, "gpu-j", 1, 1, true).await;
    pause().await;
    set_labels(&client, "gpu-j", json!(gfd)).await;
    expect_ready(&client, "gpu-j", "joins").await;

    let n = get_node(&client, "gpu-j").await;
    let text = annotation(&n, keys::ANNOTATION_TIMELINE).expect("the timeline record");
    let r = gpuready_core::timeline::ReadyRecord::parse(&text).expect("a record gpuready reads");
    assert_eq!(r.kind, gpuready_core::timeline::EpisodeKind::Join, "{text}");
    let at = |l: gpuready_api::Layer| r.steps[&gpuready_core::timeline::Step::Layer(l)];
    use gpuready_api::Layer::{DevicePlugin, Driver, FeatureDiscovery, Hardware};
    assert!(at(Hardware) < at(Driver), "{text}");
    assert!(at(Driver) < at(DevicePlugin), "{text}");
    assert!(at(DevicePlugin) < at(FeatureDiscovery), "{text}");
    assert!(r.seconds >= 6 && r.seconds < 60, "{text}");
    assert!(
        text.len() < 200,
        "a few bytes per node: {} ({text})",
        text.len()
    );

    let count = |family: &str, label: &str| {
        run.sample(&format!(
            "gpuready_{family}_count{{profile=\"joins\",{label}}}"
        ))
    };
    // The clocks are read once the write has returned; the test may see the
    // node first.
    eventually(30, "the histograms count the join", || async {
        (count("time_to_ready_seconds", "kind=\"join\"") == 1.0
            && count("layer_ready_seconds", "layer=\"Driver\"") == 1.0)
            .then_some(())
    })
    .await;
    assert_eq!(count("time_to_ready_seconds", "kind=\"fault\""), 0.0);
    eventually(30, "the profile status has the join", || async {
        let s = get_profile(&client, "joins").await.status?;
        let t = s.time_to_ready?;
        (t.joins == 1 && t.slowest_layer.is_some()).then_some(t)
    })
    .await;

    let report = live_report(&client).await;
    let mut out = Vec::new();
    gpuready::check::render_to(&report, gpuready::check::Output::Table, &mut out).expect("render");
    let out = String::from_utf8(out).expect("utf-8");
    assert!(out.contains("last wait: join of"), "{out}");
    assert!(out.contains("held longest by"), "{out}");

    // A warm joiner: registered with gpuready's taint (kubelet's
    // --register-with-taints), every layer up by the first verdict. It waited
    // on the taint, so its wait is timed from registration too.
    let registered =
        json!([{ "key": keys::DEFAULT_TAINT_KEY, "value": "true", "effect": "NoSchedule" }]);
    create_node(&client, "gpu-w", rtx3090_in("j"), 1, registered).await;
    expect_ready(&client, "gpu-w", "joins").await;
    let n = get_node(&client, "gpu-w").await;
    let text = annotation(&n, keys::ANNOTATION_TIMELINE).expect("the warm joiner's record");
    let r = gpuready_core::timeline::ReadyRecord::parse(&text).expect("a record");
    assert_eq!(r.kind, gpuready_core::timeline::EpisodeKind::Join, "{text}");
    assert!(r.seconds < 30, "{text}");
    eventually(30, "the histogram counts both joins", || async {
        (count("time_to_ready_seconds", "kind=\"join\"") == 2.0).then_some(())
    })
    .await;
    run.stop().await.expect("controller stops");
}

/// Waits until the node is gated for `reason`: gpuready's taint, labelled not
/// ready, its ready label gone, `GpuReady` not True with that reason.
async fn expect_gated(client: &Client, name: &str, reason: &str) {
    eventually(30, &format!("{name} tainted for {reason}"), || async {
        let n = get_node(client, name).await;
        (gated(&n)
            && label(&n, keys::LABEL_READY).as_deref() == Some("false")
            && label(&n, "example.org/gpu").is_none()
            && gpu_ready(&n).is_some_and(|(s, r)| s != "True" && r == reason))
        .then_some(())
    })
    .await;
    let n = get_node(client, name).await;
    assert!(has_taint(&n, ADMISSION_TAINT), "{name}: foreign taint kept");
    let ours: Vec<_> = taints(&n)
        .into_iter()
        .filter(|t| t.key == keys::DEFAULT_TAINT_KEY)
        .collect();
    assert_eq!(ours.len(), 1, "exactly one readiness taint");
    assert_eq!(ours[0].effect, "NoSchedule");
}

#[tokio::test]
async fn each_failing_layer_taints_the_node_and_recovery_releases_it() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    single_node_pool(&client, true).await;
    let run = start_controller(&env, test_args());
    expect_ready(&client, "gpu-1", "rtx3090").await;

    // Device plugin: allocatable drops to 0 while capacity stays 1.
    set_node_status(&client, "gpu-1", 1, 0, true).await;
    expect_gated(&client, "gpu-1", "DevicesUnhealthy").await;
    set_node_status(&client, "gpu-1", 1, 1, true).await;
    expect_ready(&client, "gpu-1", "rtx3090").await;

    // Profile: GFD now reports another card.
    set_labels(
        &client,
        "gpu-1",
        json!({ "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3080" }),
    )
    .await;
    expect_gated(&client, "gpu-1", "ProductMismatch").await;
    set_labels(
        &client,
        "gpu-1",
        json!({ "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3090" }),
    )
    .await;
    expect_ready(&client, "gpu-1", "rtx3090").await;

    // Driver: older than the profile's minimum 570.0.
    set_labels(
        &client,
        "gpu-1",
        json!({ "nvidia.com/cuda.driver-version.full": "535.183.01" }),
    )
    .await;
    expect_gated(&client, "gpu-1", "DriverTooOld").await;
    set_labels(
        &client,
        "gpu-1",
        json!({ "nvidia.com/cuda.driver-version.full": "580.178.04" }),
    )
    .await;
    expect_ready(&client, "gpu-1", "rtx3090").await;

    // Node: kubelet reports NotReady.
    set_node_status(&client, "gpu-1", 1, 1, false).await;
    expect_gated(&client, "gpu-1", "KubeletNotReady").await;
    set_node_status(&client, "gpu-1", 1, 1, true).await;
    expect_ready(&client, "gpu-1", "rtx3090").await;

    assert!(pending_changes(&client).await.is_empty());
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_gfd_timestamp_going_stale_taints_the_node_without_any_node_change() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    apply_profile(
        &client,
        &rtx3090_profile("rtx3090", "a", "maxLabelAgeSeconds: 5"),
    )
    .await;
    let run = start_controller(&env, test_args());
    eventually(30, "caches synced", || async { run.health.ready().ok() }).await;

    // GFD labels the node now; then GFD dies and nobody touches the node again.
    create_node(&client, "gpu-1", rtx3090_in("a"), 1, json!([])).await;
    let history = record_node(&client, "gpu-1").await;
    expect_gated(&client, "gpu-1", "GfdLabelsStale").await;

    // The history shows the node released while fresh, then tainted once stale,
    // and every version after the test's last write (the status) is gpuready's:
    // no label, capacity or kubelet condition changed, so only the scheduled
    // requeue can have noticed the timestamp's age.
    let versions = history.snapshot();
    let ready_at = versions
        .iter()
        .position(|n| label(n, keys::LABEL_READY).as_deref() == Some("true") && !gated(n))
        .expect("the node was released while its labels were fresh");
    let stale_at = versions
        .iter()
        .position(|n| gated(n) && gpu_ready(n).is_some_and(|(_, r)| r == "GfdLabelsStale"))
        .expect("the node was tainted once its labels went stale");
    assert!(ready_at < stale_at);
    for n in &versions[ready_at..=stale_at] {
        assert_eq!(
            label(n, "nvidia.com/gfd.timestamp"),
            label(&versions[ready_at], "nvidia.com/gfd.timestamp"),
            "GFD never refreshed the timestamp"
        );
        let ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| (c.status.clone(), c.last_heartbeat_time.clone()));
        let first = versions[ready_at]
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| (c.status.clone(), c.last_heartbeat_time.clone()));
        assert_eq!(ready, first, "kubelet's condition never changed");
    }
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn observe_mode_reports_in_the_profile_status_and_never_writes_a_node() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    create_node(&client, "good", rtx3090_in("a"), 1, json!([])).await;
    create_node(&client, "broken", rtx3090_in("a"), 1, json!([])).await;
    set_node_status(&client, "broken", 1, 0, true).await;
    apply_profile(
        &client,
        &rtx3090_profile("watch-only", "a", "mode: Observe"),
    )
    .await;
    let run = start_controller(&env, test_args());

    eventually(30, "status: 2 matched, 1 ready, 1 not ready", || async {
        (profile_counts(&client, "watch-only").await == Some((2, 1, 1))).then_some(())
    })
    .await;
    // The verdict follows the node, still in status only.
    set_node_status(&client, "broken", 1, 1, true).await;
    eventually(30, "status: both ready", || async {
        (profile_counts(&client, "watch-only").await == Some((2, 2, 0))).then_some(())
    })
    .await;
    set_node_status(&client, "good", 1, 1, false).await;
    eventually(30, "status: good not ready", || async {
        (profile_counts(&client, "watch-only").await == Some((2, 1, 1))).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    assert_eq!(run.node_writes(), 0, "Observe writes no node");
    assert!(run.writes("profile_status") >= 3, "but reports in status");
    assert_eq!(
        run.writes_sent(),
        run.writes("profile_status") + run.writes("event"),
        "every write request was a profile status or an Event"
    );
    for name in ["good", "broken"] {
        let n = get_node(&client, name).await;
        assert_eq!(
            gpuready_traces(&n),
            Vec::<String>::new(),
            "{name} untouched"
        );
        assert_eq!(taint_keys(&n), vec![ADMISSION_TAINT.to_owned()]);
    }
    run.stop().await.expect("clean stop");
}

/// Whether the node carries the UntilFirstReady marker.
fn released(n: &Node) -> bool {
    annotation(n, keys::ANNOTATION_RELEASED).is_some()
}

#[tokio::test]
async fn until_first_ready_releases_once_in_one_write_and_never_taints_again() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    // One node gpuready must taint itself, one registered with the taint already
    // (kubelet --register-with-taints) that gpuready adopts.
    create_node(&client, "late", rtx3090_in("a"), 1, json!([])).await;
    set_node_status(&client, "late", 1, 0, true).await;
    let preset =
        json!([{ "key": keys::DEFAULT_TAINT_KEY, "value": "true", "effect": "NoSchedule" }]);
    create_node(&client, "registered", rtx3090_in("a"), 1, preset).await;
    set_node_status(&client, "registered", 1, 0, true).await;
    let late = record_node(&client, "late").await;
    let registered = record_node(&client, "registered").await;
    apply_profile(
        &client,
        &rtx3090_profile("first-ready", "a", "taintPolicy: UntilFirstReady"),
    )
    .await;
    let run = start_controller(&env, test_args());

    expect_gated(&client, "late", "DevicesUnhealthy").await;
    expect_gated(&client, "registered", "DevicesUnhealthy").await;
    for name in ["late", "registered"] {
        set_node_status(&client, name, 1, 1, true).await;
        expect_ready(&client, name, "first-ready").await;
        let n = get_node(&client, name).await;
        assert!(released(&n), "{name}: marker set on release");
    }

    // Broken again, twice over: the verdict follows, the taint does not return.
    for name in ["late", "registered"] {
        set_node_status(&client, name, 1, 0, true).await;
    }
    for name in ["late", "registered"] {
        eventually(30, "verdict follows the broken node", || async {
            let n = get_node(&client, name).await;
            (label(&n, keys::LABEL_READY).as_deref() == Some("false")
                && gpu_ready(&n) == Some(("False".into(), "DevicesUnhealthy".into())))
            .then_some(())
        })
        .await;
        set_node_status(&client, name, 1, 0, false).await;
        eventually(30, "verdict follows kubelet", || async {
            let n = get_node(&client, name).await;
            (gpu_ready(&n) == Some(("False".into(), "KubeletNotReady".into()))).then_some(())
        })
        .await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    // Every version of each node: once gpuready has acted, the taint and the
    // marker are never both present nor both absent — they changed together.
    for (name, history) in [("late", &late), ("registered", &registered)] {
        let versions = history.snapshot();
        let first = versions
            .iter()
            .position(gated)
            .expect("the node was tainted at some point");
        for n in &versions[first..] {
            assert!(
                gated(n) != released(n),
                "{name} rv {}: taint {} with marker {}",
                n.metadata.resource_version.as_deref().unwrap_or("?"),
                gated(n),
                released(n)
            );
        }
        assert_eq!(
            transitions(&versions[first..], gated),
            1,
            "{name}: released exactly once, never re-tainted"
        );
        assert!(released(versions.last().expect("versions")));
    }
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn the_safety_brake_holds_new_taints_when_most_nodes_fail_at_once_and_releases_on_recovery() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let names: Vec<String> = (1..=6).map(|i| format!("gpu-{i}")).collect();
    for name in &names {
        create_node(&client, name, rtx3090_in("a"), 1, json!([])).await;
    }
    apply_profile(&client, &rtx3090_profile("fleet", "a", "")).await;
    let args = run_args(&["--brake-threshold=0.5", "--brake-min-nodes=3"]);
    let run = start_controller(&env, args);
    // A turn is a node gpuready had labelled ready going not-ready.
    for name in &names {
        expect_ready(&client, name, "fleet").await;
    }
    eventually(30, "6 nodes ready in status", || async {
        (profile_counts(&client, "fleet").await == Some((6, 6, 0))).then_some(())
    })
    .await;
    let brake = "gpuready_safety_brake_engaged{profile=\"fleet\"}";
    assert_eq!(run.metric(brake), Some(0.0));

    // A shared cause breaks 5 of the 6 nodes at once.
    let failing = &names[..5];
    for name in failing {
        set_node_status(&client, name, 1, 0, true).await;
    }
    eventually(
        30,
        "SafetyBrake=True with every failure reported",
        || async {
            let engaged = profile_condition(&client, "fleet", keys::CONDITION_SAFETY_BRAKE).await
                == Some(("True".into(), "TooManyNodesTurnedNotReady".into()));
            let mut all_reported = true;
            for name in failing {
                let n = get_node(&client, name).await;
                all_reported &= label(&n, keys::LABEL_READY).as_deref() == Some("false")
                    && gpu_ready(&n).is_some_and(|(s, _)| s == "False");
            }
            (engaged && all_reported).then_some(())
        },
    )
    .await;
    assert_eq!(run.metric(brake), Some(1.0));
    eventually(30, "a SafetyBrakeEngaged Event on the profile", || async {
        event_reasons(&client, "fleet")
            .await
            .contains(&"SafetyBrakeEngaged".to_owned())
            .then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    // The bound. The brake engages on the first turn that takes the share of
    // nodes turned not-ready within the window above the threshold: with 6
    // nodes and 0.5 that is the 4th (4/6 > 0.5; 3/6 is not "more than half").
    // A node whose turn is counted before that can be tainted, and nothing
    // else writes these nodes, so exactly the first 3 turns are tainted; the
    // 4th and 5th (the one that trips the brake included) are held back. They
    // still get GpuReady=False and gpuready.io/ready=false, only not the taint.
    let mut tainted = Vec::new();
    for name in failing {
        if gated(&get_node(&client, name).await) {
            tainted.push(name.clone());
        }
    }
    println!("brake engaged: tainted {tainted:?} of {failing:?}");
    assert_eq!(
        tainted.len(),
        3,
        "floor(0.5 × 6) = 3 new taints get through, then the brake holds"
    );

    // Recovery: the brake releases once the not-ready share is back at or under
    // the threshold (level, not rate), and held nodes that are still failing get
    // their taint then. Recover two tainted nodes: 3/6 remain not ready.
    let held: Vec<&String> = failing.iter().filter(|n| !tainted.contains(n)).collect();
    for name in &tainted[..2] {
        set_node_status(&client, name, 1, 1, true).await;
    }
    eventually(30, "SafetyBrake=False", || async {
        (profile_condition(&client, "fleet", keys::CONDITION_SAFETY_BRAKE).await
            == Some(("False".into(), "Released".into())))
        .then_some(())
    })
    .await;
    assert_eq!(run.metric(brake), Some(0.0));
    for name in &held {
        expect_gated(&client, name, "DevicesUnhealthy").await;
    }
    eventually(30, "a SafetyBrakeReleased Event on the profile", || async {
        event_reasons(&client, "fleet")
            .await
            .contains(&"SafetyBrakeReleased".to_owned())
            .then_some(())
    })
    .await;

    // Everyone recovers: every taint goes.
    for name in failing {
        set_node_status(&client, name, 1, 1, true).await;
    }
    for name in &names {
        expect_ready(&client, name, "fleet").await;
    }
    run.stop().await.expect("clean stop");
}

/// Issue 33's sequence on a real API server: a burst engages the brake, its
/// turns leave the window while the share not ready stays above the
/// threshold, then one more node turns. A turn may only engage the brake: the
/// late turn must neither release it nor get its taint, and the release that
/// finally comes (from the counts) taints every node it held.
#[tokio::test]
async fn a_late_turn_never_releases_an_engaged_brake() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let names: Vec<String> = (1..=10).map(|i| format!("gpu-{i}")).collect();
    for name in &names {
        create_node(&client, name, rtx3090_in("a"), 1, json!([])).await;
    }
    apply_profile(&client, &rtx3090_profile("fleet", "a", "")).await;
    let args = run_args(&[
        "--brake-threshold=0.5",
        "--brake-min-nodes=3",
        "--brake-window=2s",
    ]);
    let run = start_controller(&env, args);
    for name in &names {
        expect_ready(&client, name, "fleet").await;
    }
    eventually(30, "10 nodes ready in status", || async {
        (profile_counts(&client, "fleet").await == Some((10, 10, 0))).then_some(())
    })
    .await;
    let engaged = || async {
        profile_condition(&client, "fleet", keys::CONDITION_SAFETY_BRAKE)
            .await
            .map(|(status, _)| status)
    };

    // Six of ten turn at once: engaged on the sixth turn at the latest.
    for name in &names[..6] {
        set_node_status(&client, name, 1, 0, true).await;
    }
    eventually(30, "SafetyBrake=True with 6 not ready", || async {
        (engaged().await.as_deref() == Some("True")
            && profile_counts(&client, "fleet").await == Some((10, 4, 6)))
        .then_some(())
    })
    .await;
    // The burst's turns leave the 2 s window; 6 of 10 are still not ready.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert_eq!(engaged().await.as_deref(), Some("True"));

    // One more node turns: 7 of 10 not ready, one turn inside the window.
    let late = &names[6];
    set_node_status(&client, late, 1, 0, true).await;
    eventually(30, "the late node reported not ready", || async {
        let n = get_node(&client, late).await;
        (label(&n, keys::LABEL_READY).as_deref() == Some("false")).then_some(())
    })
    .await;
    eventually(30, "status counts 7 not ready", || async {
        (profile_counts(&client, "fleet").await == Some((10, 3, 7))).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(
        engaged().await.as_deref(),
        Some("True"),
        "a turn released the brake while 7 of 10 are not ready"
    );
    assert!(
        !gated(&get_node(&client, late).await),
        "the late node was tainted while the brake is engaged"
    );

    // The level falls to 5 of 10: released, and every held node still
    // failing gets its taint.
    let (mut held, mut tainted) = (Vec::new(), Vec::new());
    for name in &names[..7] {
        if gated(&get_node(&client, name).await) {
            tainted.push(name.clone());
        } else {
            held.push(name.clone());
        }
    }
    println!("brake engaged: tainted {tainted:?}, held {held:?}");
    assert!(held.contains(late) && tainted.len() >= 2);
    for name in &tainted[..2] {
        set_node_status(&client, name, 1, 1, true).await;
    }
    eventually(30, "SafetyBrake=False", || async {
        (engaged().await.as_deref() == Some("False")).then_some(())
    })
    .await;
    for name in &held {
        expect_gated(&client, name, "DevicesUnhealthy").await;
    }
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_node_relabelled_out_of_the_selector_is_cleaned_and_back_in_is_gated_again() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let foreign =
        json!([{ "key": "example.org/maintenance", "value": "x", "effect": "PreferNoSchedule" }]);
    create_node(&client, "good", rtx3090_in("a"), 1, foreign.clone()).await;
    create_node(&client, "broken", rtx3090_in("a"), 1, foreign).await;
    set_node_status(&client, "broken", 1, 0, true).await;
    apply_profile(
        &client,
        &rtx3090_profile("pool-a", "a", "perLayerNodeConditions: true"),
    )
    .await;
    let run = start_controller(&env, test_args());
    expect_ready(&client, "good", "pool-a").await;
    expect_gated(&client, "broken", "DevicesUnhealthy").await;
    let foreign_before = foreign_taints(&get_node(&client, "broken").await);
    assert!(foreign_before.contains(&"example.org/maintenance".to_owned()));

    // Both leave the pool: everything gpuready wrote goes, nothing else does.
    for name in ["good", "broken"] {
        set_labels(&client, name, json!({ POOL: "b" })).await;
    }
    for name in ["good", "broken"] {
        eventually(30, &format!("{name} released"), || async {
            let n = get_node(&client, name).await;
            gpuready_traces(&n).is_empty().then_some(())
        })
        .await;
        let n = get_node(&client, name).await;
        assert_eq!(
            foreign_taints(&n),
            foreign_before,
            "{name}: foreign taints kept"
        );
        assert_eq!(label(&n, POOL).as_deref(), Some("b"));
    }
    eventually(30, "profile matches nothing", || async {
        (profile_counts(&client, "pool-a").await == Some((0, 0, 0))).then_some(())
    })
    .await;

    // Back in the pool: governed again.
    for name in ["good", "broken"] {
        set_labels(&client, name, json!({ POOL: "a" })).await;
    }
    expect_ready(&client, "good", "pool-a").await;
    expect_gated(&client, "broken", "DevicesUnhealthy").await;
    run.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_node_selected_by_two_profiles_is_left_as_it_is_with_reason_conflict() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    create_node(&client, "broken", rtx3090_in("a"), 1, json!([])).await;
    set_node_status(&client, "broken", 1, 0, true).await;
    apply_profile(&client, &rtx3090_profile("pool-a", "a", "")).await;
    let run = start_controller(&env, test_args());
    expect_gated(&client, "broken", "DevicesUnhealthy").await;
    let before = get_node(&client, "broken").await;

    // A second profile selects every node labelled by GFD as an RTX 3090.
    apply_profile(
        &client,
        r#"
apiVersion: gpuready.io/v1alpha1
kind: GpuNodeProfile
metadata:
  name: all-3090s
spec:
  nodeSelector:
    matchLabels:
      nvidia.com/gpu.product: NVIDIA-GeForce-RTX-3090
"#,
    )
    .await;
    eventually(30, "GpuReady=Unknown/Conflict", || async {
        let n = get_node(&client, "broken").await;
        (gpu_ready(&n) == Some(("Unknown".into(), "Conflict".into()))).then_some(())
    })
    .await;
    for profile in ["pool-a", "all-3090s"] {
        eventually(30, &format!("{profile}: Stalled=True/Conflict"), || async {
            (profile_condition(&client, profile, "Stalled").await
                == Some(("True".into(), "Conflict".into())))
            .then_some(())
        })
        .await;
    }
    // Even a repaired node keeps its taint and labels while the conflict lasts.
    set_node_status(&client, "broken", 1, 1, true).await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let during = get_node(&client, "broken").await;
    assert_eq!(taints(&during), taints(&before), "taint left as it was");
    let ours = |n: &Node| -> Vec<(String, String)> {
        n.labels()
            .iter()
            .filter(|(k, _)| k.starts_with("gpuready.io/") || *k == "example.org/gpu")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(ours(&during), ours(&before), "labels left as they were");
    assert_eq!(
        gpu_ready(&during),
        Some(("Unknown".into(), "Conflict".into()))
    );

    // The second profile goes: the first governs again and releases the node.
    delete_profile(&client, "all-3090s").await;
    expect_ready(&client, "broken", "pool-a").await;
    eventually(30, "pool-a: Stalled=False", || async {
        (profile_condition(&client, "pool-a", "Stalled")
            .await
            .is_some_and(|(s, _)| s == "False"))
        .then_some(())
    })
    .await;
    run.stop().await.expect("clean stop");
}

/// `(nodes gated NoSchedule, nodes gated NoExecute)` under gpuready's key.
async fn gated_by_effect(client: &Client, names: &[String]) -> (usize, usize) {
    let nodes: Api<Node> = Api::all(client.clone());
    let (mut no_schedule, mut no_execute) = (0, 0);
    for n in nodes.list(&Default::default()).await.expect("nodes").items {
        if !names.contains(&n.name_any()) {
            continue;
        }
        for t in taints(&n) {
            if t.key == keys::DEFAULT_TAINT_KEY {
                match t.effect.as_str() {
                    "NoExecute" => no_execute += 1,
                    _ => no_schedule += 1,
                }
            }
        }
    }
    (no_schedule, no_execute)
}

/// 20 nodes of a profile that escalates `DevicesUnhealthy` after a 10 s dry
/// run, all ready, under a controller run with `flags`.
async fn escalating_pool(
    env: &gpuready_testenv::TestEnv,
    pool: &str,
    percent: u8,
    flags: &[&str],
) -> (Vec<String>, Running) {
    let client = env.client().expect("client");
    let names: Vec<String> = (0..20).map(|i| format!("{pool}-{i}")).collect();
    for name in &names {
        create_node(&client, name, rtx3090_in(pool), 1, json!([])).await;
    }
    let extra = format!(
        "escalation: {{reasons: [DevicesUnhealthy], dryRunSeconds: 10, maxNoExecutePercent: {percent}}}"
    );
    apply_profile(&client, &rtx3090_profile(pool, pool, &extra)).await;
    let run = start_controller(env, run_args(flags));
    eventually(60, "20 nodes ready in status", || async {
        (profile_counts(&client, pool).await == Some((20, 20, 0))).then_some(())
    })
    .await;
    // A turn is a node gpuready labelled ready going not ready: wait for
    // every label, not just the verdicts.
    for name in &names {
        expect_ready(&client, name, pool).await;
    }
    (names, run)
}

/// Samples `(NoSchedule, NoExecute)` each second for `secs` seconds (or until
/// `done`), failing when NoExecute passes `cap`. Returns the timeline.
async fn watch_no_execute(
    client: &Client,
    names: &[String],
    secs: u64,
    cap: usize,
    done: impl Fn(usize, usize) -> bool,
) -> Vec<(u64, usize, usize)> {
    let mut timeline = vec![];
    for second in 0..secs {
        let (s, e) = gated_by_effect(client, names).await;
        timeline.push((second, s, e));
        assert!(e <= cap, "NoExecute on more than {cap} nodes: {timeline:?}");
        if done(s, e) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    timeline
}

/// Issue 49's burst: 12 of 20 nodes fail at once. The brake engages at the
/// 11th turn, and no node — neither one it holds nor one tainted before it
/// engaged — turns `NoExecute` while it is engaged (on `main`, all 10
/// tainted turned `NoExecute` 10 s later, `SafetyBrake=True`): all 12
/// escalations wait, the held ones counted in profile status and the
/// metric. Once 4 recover
/// and the brake releases, the 8 still failing escalate.
#[tokio::test]
async fn an_engaged_brake_holds_every_escalation_to_no_execute() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let (names, run) = escalating_pool(
        &env,
        "burst",
        50,
        &["--brake-threshold=0.5", "--brake-min-nodes=3"],
    )
    .await;
    for name in &names[..12] {
        set_node_status(&client, name, 1, 0, true).await;
    }
    eventually(30, "SafetyBrake=True", || async {
        (profile_condition(&client, "burst", keys::CONDITION_SAFETY_BRAKE).await
            == Some(("True".into(), "TooManyNodesTurnedNotReady".into())))
        .then_some(())
    })
    .await;
    let t = watch_no_execute(&client, &names, 25, 0, |_, _| false).await;
    say!("burst, brake engaged: (s, NoSchedule, NoExecute) {t:?}");
    let last = t.last().expect("samples");
    assert_eq!(last.1, 10, "the brake holds the 11th and 12th taint");
    let status = eventually(30, "held escalations in profile status", || async {
        profile_status(&client, "burst")
            .await?
            .no_execute
            .filter(|b| b.nodes_held == 12)
    })
    .await;
    say!("profile status noExecute: {status:?}");
    assert_eq!(
        run.metric("gpuready_no_execute{profile=\"burst\",kind=\"nodes\",state=\"held\"}"),
        Some(12.0)
    );
    for name in &names[..4] {
        set_node_status(&client, name, 1, 1, true).await;
    }
    let t = watch_no_execute(&client, &names, 40, 10, |s, e| s == 0 && e == 8).await;
    say!("burst, brake released: (s, NoSchedule, NoExecute) {t:?}");
    assert_eq!(t.last().map(|l| (l.1, l.2)), Some((0, 8)));
    for name in &names[4..12] {
        set_node_status(&client, name, 1, 1, true).await;
    }
    watch_no_execute(&client, &names, 60, 10, |s, e| s + e == 0).await;
    assert_eq!(gated_by_effect(&client, &names).await, (0, 0));
    run.stop().await.expect("clean stop");
}

/// Issue 49's slow waves: 8 of 20 nodes fail, then 8 more later — each wave
/// too small for the brake (8/20 within its window), which on `main` let 16
/// nodes go `NoExecute`. The budget is a level, 20 % of 20: 4 nodes, whatever
/// the timing; when those 4 recover, 4 of the waiting ones take their place.
#[tokio::test]
async fn slow_waves_never_put_more_than_the_budget_under_no_execute() {
    let env = env_with_crd().await;
    let client = env.client().expect("client");
    let (names, run) = escalating_pool(
        &env,
        "waves",
        20,
        &[
            "--brake-threshold=0.5",
            "--brake-min-nodes=3",
            "--brake-window=2s",
        ],
    )
    .await;
    for name in &names[..8] {
        set_node_status(&client, name, 1, 0, true).await;
    }
    let t1 = watch_no_execute(&client, &names, 30, 4, |_, e| e == 4).await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    for name in &names[8..16] {
        set_node_status(&client, name, 1, 0, true).await;
    }
    let t2 = watch_no_execute(&client, &names, 25, 4, |_, _| false).await;
    say!("wave 1: (s, NoSchedule, NoExecute) {t1:?}");
    say!("wave 2: {t2:?}");
    assert_eq!(t2.last().map(|l| (l.1, l.2)), Some((12, 4)));
    assert_eq!(
        profile_condition(&client, "waves", keys::CONDITION_SAFETY_BRAKE).await,
        Some(("False".into(), "Released".into())),
        "neither wave engages the brake"
    );
    let status = eventually(30, "the budget in profile status", || async {
        profile_status(&client, "waves")
            .await?
            .no_execute
            .filter(|b| b.nodes == 4 && b.nodes_held == 12)
    })
    .await;
    say!("profile status noExecute: {status:?}");
    assert_eq!(status.node_limit, 4);
    // The 4 escalated recover: 4 waiting ones take their place.
    let escalated: Vec<String> = {
        let nodes: Api<Node> = Api::all(client.clone());
        let mut out = vec![];
        for name in &names {
            let n = nodes.get(name).await.expect("node");
            if taints(&n)
                .iter()
                .any(|t| t.key == keys::DEFAULT_TAINT_KEY && t.effect == "NoExecute")
            {
                out.push(name.clone());
            }
        }
        out
    };
    for name in &escalated {
        set_node_status(&client, name, 1, 1, true).await;
    }
    let t3 = watch_no_execute(&client, &names, 40, 4, |s, e| s == 8 && e == 4).await;
    say!("4 escalated recover: {t3:?}");
    assert_eq!(t3.last().map(|l| (l.1, l.2)), Some((8, 4)));
    for name in &names[..16] {
        set_node_status(&client, name, 1, 1, true).await;
    }
    watch_no_execute(&client, &names, 60, 4, |s, e| s + e == 0).await;
    assert_eq!(gated_by_effect(&client, &names).await, (0, 0));
    run.stop().await.expect("clean stop");
}
