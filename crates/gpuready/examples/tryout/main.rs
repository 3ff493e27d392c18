//! `bash tests/tryout.sh`: watch gpuready act on a local control plane. Starts
//! the real etcd + kube-apiserver the tests use, loads the example clusters,
//! runs the `gpuready` binary against them and narrates a broken node being
//! tainted, repaired and released; then stops everything it started.

mod story;

use std::path::PathBuf;

/// The `gpuready` binary: `GPUREADY_BIN`, else the one cargo built beside this
/// example (`target/<profile>/examples/tryout` → `target/<profile>/gpuready`).
fn gpuready_bin() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("GPUREADY_BIN").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(bin));
    }
    let exe = std::env::current_exe().map_err(|e| format!("locating this program: {e}"))?;
    let bin = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("gpuready"))
        .ok_or("cannot locate the target folder")?;
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "{} not found: build it with `cargo build -p gpuready --bin gpuready` \
             (tests/tryout.sh does), or set GPUREADY_BIN",
            bin.display()
        ))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let result = async {
        let bin = gpuready_bin()?;
        println!(
            "starting a local control plane (etcd + kube-apiserver from tests/control-plane)…"
        );
        // Owned, not shared: dropping it at the end stops etcd and the API
        // server and removes their folder.
        let env = gpuready_testenv::TestEnv::start()
            .await
            .map_err(|e| e.to_string())?;
        let result = story::run(&env, &bin, &mut |line| println!("{line}")).await;
        drop(env);
        println!("stopped the control plane; nothing this try-out started is left running");
        result
    }
    .await;
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
