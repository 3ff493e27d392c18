//! Tests of `compute`, in their own file beside it.

use super::*;

fn gpu(index: u32, procs: Option<u32>) -> GpuState {
    GpuState {
        index,
        uuid: Some(format!("GPU-{index}")),
        compute_processes: procs,
        compute_mode: Some("Default".into()),
        mig_enabled: Some(false),
        ..GpuState::default()
    }
}

fn t(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn memory_after(at: &str, stack: ComputeStack, request: Option<&str>) -> Memory {
    Memory {
        last: Some(LastRun {
            at: t(at),
            check: ComputeCheck {
                outcome: ComputeOutcome::Passed,
                stack: Some(stack),
                request: request.map(str::to_owned),
                ..ComputeCheck::default()
            },
            gpus: vec![],
        }),
        skipped: None,
    }
}

#[test]
fn due_on_first_report_stack_changes_requests_and_period() {
    let gpus = [gpu(0, Some(0)), gpu(1, Some(0))];
    let s = stack(Some("580.159.04"), Some("b1"), &gpus);
    let now = t("2026-12-01T10:00:00Z");
    let day = Duration::from_secs(86_400);
    assert_eq!(
        due(&Memory::default(), &s, None, now, day),
        Some(ComputeTrigger::FirstCheck)
    );
    let m = memory_after("2026-12-01T09:00:00Z", s.clone(), None);
    assert_eq!(due(&m, &s, None, now, day), None);
    let upgraded = stack(Some("580.178.04"), Some("b1"), &gpus);
    assert_eq!(
        due(&m, &upgraded, None, now, day),
        Some(ComputeTrigger::DriverChanged)
    );
    let rebooted = stack(Some("580.159.04"), Some("b2"), &gpus);
    assert_eq!(
        due(&m, &rebooted, None, now, day),
        Some(ComputeTrigger::BootChanged)
    );
    let lost = stack(Some("580.159.04"), Some("b1"), &gpus[..1]);
    assert_eq!(
        due(&m, &lost, None, now, day),
        Some(ComputeTrigger::GpuSetChanged)
    );
    assert_eq!(
        due(&m, &s, Some("1"), now, day),
        Some(ComputeTrigger::Requested)
    );
    let served = memory_after("2026-12-01T09:00:00Z", s.clone(), Some("1"));
    assert_eq!(due(&served, &s, Some("1"), now, day), None);
    assert_eq!(
        due(&m, &s, None, now, Duration::from_secs(3600)),
        Some(ComputeTrigger::Periodic)
    );
    assert_eq!(due(&m, &s, None, now, Duration::ZERO), None);
}

#[test]
fn never_while_a_gpu_is_busy_exclusive_mig_or_too_soon() {
    let now = t("2026-12-01T10:00:00Z");
    let ten = Duration::from_secs(600);
    let idle = [gpu(0, Some(0)), gpu(1, Some(0))];
    assert_eq!(blocker(true, &idle, &Memory::default(), now, ten), None);
    let (r, m) = blocker(
        true,
        &[gpu(0, Some(0)), gpu(1, Some(2))],
        &Memory::default(),
        now,
        ten,
    )
    .expect("busy");
    assert_eq!(r, ComputeSkipReason::GpusBusy);
    assert!(m.contains("gpus[].computeProcesses"), "{m}");
    let (r, _) = blocker(true, &[gpu(0, None)], &Memory::default(), now, ten).expect("unknown");
    assert_eq!(r, ComputeSkipReason::GpusBusy);
    let mut ex = gpu(0, Some(0));
    ex.compute_mode = Some("ExclusiveProcess".into());
    assert_eq!(
        blocker(true, &[ex], &Memory::default(), now, ten).map(|b| b.0),
        Some(ComputeSkipReason::ExclusiveComputeMode)
    );
    let mut mig = gpu(0, Some(0));
    mig.mig_enabled = Some(true);
    assert_eq!(
        blocker(true, &[mig], &Memory::default(), now, ten).map(|b| b.0),
        Some(ComputeSkipReason::MigEnabled)
    );
    assert_eq!(
        blocker(false, &idle, &Memory::default(), now, ten).map(|b| b.0),
        Some(ComputeSkipReason::NvmlUnusable)
    );
    let recent = memory_after("2026-12-01T09:55:00Z", ComputeStack::default(), None);
    assert_eq!(
        blocker(true, &idle, &recent, now, ten).map(|b| b.0),
        Some(ComputeSkipReason::MinInterval)
    );
}

#[test]
fn a_skip_keeps_its_first_time() {
    let mut m = Memory::default();
    let r = ComputeSkipReason::GpusBusy;
    note_skip(
        &mut m,
        ComputeTrigger::FirstCheck,
        r,
        "x".into(),
        t("2026-12-01T10:00:00Z"),
    );
    note_skip(
        &mut m,
        ComputeTrigger::FirstCheck,
        r,
        "x".into(),
        t("2026-12-01T10:01:00Z"),
    );
    assert_eq!(
        m.skipped.as_ref().map(|s| s.since.as_str()),
        Some("2026-12-01T10:00:00Z")
    );
}

#[test]
fn the_request_annotation_is_read_from_the_downward_api_file() {
    let dir = std::env::temp_dir().join(format!("gpuready-req-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let f = dir.join("annotations");
    std::fs::write(
        &f,
        "kubernetes.io/config.seen=\"x\"\ngpuready.io/compute-check-request=\"2026-12-01T10:00\"\n",
    )
    .expect("write");
    assert_eq!(read_request(&f).as_deref(), Some("2026-12-01T10:00"));
    assert_eq!(read_request(&dir.join("none")), None);
    let _ = std::fs::remove_dir_all(&dir);
}
