//! The committed CRD YAML must be exactly what the Rust types generate.
//! Regenerate with `cargo run -- crd --write` (or UPDATE_CRDS=1 cargo test).

use std::path::PathBuf;

use gpuready_api::crd;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn committed_gpuready_crd_matches_types() {
    let generated = crd::to_yaml(&[crd::gpu_node_profile_crd()]).expect("render CRD");
    for rel in crd::COMMITTED_GPUREADY_CRD_PATHS {
        let path = repo_root().join(rel);
        if std::env::var_os("UPDATE_CRDS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{rel}: {e}; run `cargo run -- crd --write`"));
        if committed != generated {
            let diff = similar::TextDiff::from_lines(&committed, &generated)
                .unified_diff()
                .header(rel, "generated")
                .to_string();
            panic!("{rel} differs from the Rust types; run `cargo run -- crd --write`.\n{diff}");
        }
    }
}

#[test]
fn committed_nfd_crds_match_types() {
    let generated = crd::to_yaml(&crd::nfd_crds()).expect("render NFD CRDs");
    let rel = crd::COMMITTED_NFD_CRDS_PATH;
    let path = repo_root().join(rel);
    if std::env::var_os("UPDATE_CRDS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{rel}: {e}; run `UPDATE_CRDS=1 cargo test -p gpuready-api --test schemas crd_drift::`"
        )
    });
    if committed != generated {
        let diff = similar::TextDiff::from_lines(&committed, &generated)
            .unified_diff()
            .header(rel, "generated")
            .to_string();
        panic!(
            "{rel} differs from the Rust types in gpuready-api/src/nfd; run \
             `UPDATE_CRDS=1 cargo test -p gpuready-api --test schemas crd_drift::`.\n{diff}"
        );
    }
}
