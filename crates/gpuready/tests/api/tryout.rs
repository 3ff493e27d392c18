//! The try-out (`bash tests/tryout.sh`) against a real API server, so it cannot
//! rot: the same story the example narrates, with the shipped binary, asserting
//! that each step is seen.

#[path = "../../examples/tryout/story.rs"]
mod story;

use std::path::Path;

#[tokio::test]
async fn tryout_story_taints_repairs_and_releases() {
    let env = gpuready_testenv::TestEnv::start()
        .await
        .expect("test control plane");
    let mut lines = Vec::new();
    let result = story::run(
        &env,
        Path::new(env!("CARGO_BIN_EXE_gpuready")),
        &mut |line| lines.push(line),
    )
    .await;
    let transcript = lines.join("\n");
    println!("{transcript}");
    result.unwrap_or_else(|e| panic!("{e}\n{transcript}"));

    let broken = |needle: &str| {
        lines
            .iter()
            .any(|l| l.contains(story::BROKEN_NODE) && l.contains(needle))
    };
    assert!(broken("GpuReady=False (DriverTooOld)"), "{transcript}");
    assert!(broken("GpuReady=True (Ready)"), "{transcript}");
    assert!(broken("no GpuReady condition"), "{transcript}");
    // The Kubemoot example: gpuready's taint beside the guide's, never instead.
    let line = |node: &str| {
        lines
            .iter()
            .find(|l| l.trim_start().starts_with(&format!("{node} ")))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        line("gpu-worker-1").ends_with("taints: nvidia.com/gpu"),
        "{transcript}"
    );
    assert!(
        line("gpu-worker-3")
            .ends_with("taints: nvidia.com/gpu, readiness.k8s.io/gpuready-not-ready"),
        "{transcript}"
    );
    assert!(
        transcript.contains("stopped gpuready (exit status: 0)"),
        "{transcript}"
    );
}
