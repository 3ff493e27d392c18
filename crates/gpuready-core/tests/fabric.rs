//! The Fabric layer on multi-node NVLink nodes, from documented formats (no
//! such machine was lent here: `fixtures/fabric/README.md`): GFD's
//! `nvidia.com/gpu.clique` label, the probe's NVML fabric state of every GPU,
//! the driver IMEX needs; nothing judged unless the profile asks.

mod common;

use common::*;
use gpuready_api::Layer;
use gpuready_api::keys::fabric as r;
use gpuready_api::probe::{FabricPhase, ProbeReport};
use gpuready_core::evaluate::Status;
use gpuready_core::evidence::Source;
use gpuready_core::health::ProbeEvidence;

const CLIQUE: &str = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766";

fn tray_report() -> ProbeReport {
    let path = format!(
        "{}/tests/fixtures/fabric/gb200-tray-report.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut r: ProbeReport =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("report");
    r.generated_at = at(-30).to_string();
    r.node = None;
    r
}

fn tray() -> NodeBuilder {
    NodeBuilder::gpu("gb200-1")
        .label("nvidia.com/gpu.product", "NVIDIA-GB200")
        .label("nvidia.com/gpu.count", "4")
        .label("nvidia.com/gpu.clique", CLIQUE)
        .driver("580.159.04")
        .compute(10, 0)
        .label("nvidia.com/gpu.family", "blackwell")
        .gpus(4, 4)
}

fn judge_tray(
    profile: &str,
    node: &NodeBuilder,
    report: Option<ProbeReport>,
) -> gpuready_core::LayerReport {
    let facts = node
        .facts()
        .with_probe(report.map(|r| ProbeEvidence::Report(Box::new(r))));
    gpuready_core::evaluate(&spec(profile), &facts, now())
}

const PROFILE: &str = "fabric: {cliques: [\"9277d399-0674-44a9-b64e-d85bb19ce2b0.32766\"]}";

#[test]
fn a_tray_in_its_clique_with_every_gpu_registered_is_ready() {
    let rep = judge_tray(PROFILE, &tray(), Some(tray_report()));
    let l = rep.expect(Layer::Fabric, Status::Ready, r::FABRIC_READY);
    l.mentions(&[
        CLIQUE,
        "all 4 GPU(s) registered with the fabric in clique 32766",
        "minimum 570.158.01",
    ]);
    assert_eq!(l.evidence, Source::ProbeReport);
    assert!(rep.ready());
    // No fabric section: no Fabric layer.
    assert!(
        judge_tray("", &tray(), Some(tray_report()))
            .get(Layer::Fabric)
            .is_none()
    );
}

#[test]
fn the_clique_label_missing_malformed_or_unexpected() {
    judge_tray(
        PROFILE,
        &tray().unlabel("nvidia.com/gpu.clique"),
        Some(tray_report()),
    )
    .expect(Layer::Fabric, Status::NotReady, r::CLIQUE_LABEL_MISSING)
    .mentions(&["nvidia.com/gpu.clique", "nvidia-fabricmanager"]);
    judge_tray(
        PROFILE,
        &tray().label("nvidia.com/gpu.clique", "32766"),
        Some(tray_report()),
    )
    .expect(Layer::Fabric, Status::NotReady, r::CLIQUE_LABEL_MALFORMED);
    let other = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32767";
    judge_tray(
        PROFILE,
        &tray().label("nvidia.com/gpu.clique", other),
        Some(tray_report()),
    )
    .expect(Layer::Fabric, Status::NotReady, r::UNEXPECTED_CLIQUE)
    .mentions(&[other, CLIQUE]);
    // Without fabric.cliques any well-formed clique is accepted.
    judge_tray(
        "fabric: {}",
        &tray().label("nvidia.com/gpu.clique", other),
        None,
    )
    .expect(Layer::Fabric, Status::Unknown, r::FABRIC_STATE_UNREAD);
}

#[test]
fn every_gpu_must_have_registered_in_the_labelled_clique() {
    let mut pending = tray_report();
    pending.gpus[2].fabric.as_mut().expect("fabric").state = FabricPhase::InProgress;
    pending.gpus[2].fabric.as_mut().expect("fabric").status = None;
    judge_tray(PROFILE, &tray(), Some(pending))
        .expect(
            Layer::Fabric,
            Status::NotReady,
            r::FABRIC_REGISTRATION_INCOMPLETE,
        )
        .mentions(&["GPU 2", "InProgress"]);
    let mut failed = tray_report();
    failed.gpus[1].fabric.as_mut().expect("fabric").status = Some("NVML_ERROR_UNKNOWN".into());
    judge_tray(PROFILE, &tray(), Some(failed))
        .expect(
            Layer::Fabric,
            Status::NotReady,
            r::FABRIC_REGISTRATION_INCOMPLETE,
        )
        .mentions(&["GPU 1", "NVML_ERROR_UNKNOWN"]);
    let mut moved = tray_report();
    moved.gpus[3].fabric.as_mut().expect("fabric").clique_id = Some(1);
    judge_tray(PROFILE, &tray(), Some(moved))
        .expect(Layer::Fabric, Status::NotReady, r::CLIQUE_MISMATCH)
        .mentions(&["GPU 3", "clique 1", "clique 32766"]);
    let mut off = tray_report();
    off.gpus[0].fabric = None;
    judge_tray(PROFILE, &tray(), Some(off)).expect(
        Layer::Fabric,
        Status::NotReady,
        r::GPU_NOT_ON_FABRIC,
    );
}

#[test]
fn driver_minimum_and_a_missing_probe_report() {
    judge_tray(PROFILE, &tray().driver("570.148.08"), Some(tray_report()))
        .expect(Layer::Fabric, Status::NotReady, r::DRIVER_TOO_OLD_FOR_IMEX)
        .mentions(&["570.148.08 < 570.158.01"]);
    judge_tray(
        "fabric: {minDriverVersion: \"580.65.06\"}",
        &tray().driver("575.57.08"),
        Some(tray_report()),
    )
    .expect(Layer::Fabric, Status::NotReady, r::DRIVER_TOO_OLD_FOR_IMEX);
    judge_tray(PROFILE, &tray(), None).expect(
        Layer::Fabric,
        Status::Unknown,
        r::FABRIC_STATE_UNREAD,
    );
    judge_tray("fabric: {whenProbeMissing: Blocking}", &tray(), None).expect(
        Layer::Fabric,
        Status::NotReady,
        r::FABRIC_STATE_UNREAD,
    );
    judge_tray("fabric: {whenProbeMissing: Ignore}", &tray(), None)
        .expect(Layer::Fabric, Status::Ready, r::FABRIC_READY)
        .mentions(&["per-GPU fabric state not read"]);
}
