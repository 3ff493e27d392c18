//! Tests of `cuda`, in their own file beside it.

use super::*;

#[test]
fn uuids_are_written_like_nvml() {
    let mut b = [0 as std::ffi::c_char; 16];
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u8 * 17) as std::ffi::c_char;
    }
    assert_eq!(format_uuid(&b), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

#[test]
fn mismatches_name_the_first_wrong_word() {
    let mut v: Vec<u32> = (0..8).map(pattern).collect();
    assert_eq!(first_difference(&v, pattern), None);
    v[5] ^= 1;
    let m = first_difference(&v, pattern).expect("a difference");
    assert!(m.starts_with("1 of 8 words wrong, first at word 5"), "{m}");
}

/// The child's JSON keeps the node-wide fields at the top beside `devices`
/// (the report's `ComputeCheck` is flattened into it), and the parent reads
/// back what the child printed.
#[test]
fn the_child_result_prints_the_node_fields_at_the_top_and_reads_back() {
    let out = ChildResult {
        check: ComputeCheck {
            outcome: ComputeOutcome::Failed,
            library: Some("libcuda.so".into()),
            cuda_version: Some("13.0".into()),
            init_millis: Some(2.5),
            error: Some(CudaError {
                name: "CUDA_ERROR_NO_DEVICE".into(),
                code: 100,
                step: "deviceCount".into(),
                detail: None,
            }),
            ..ComputeCheck::default()
        },
        devices: Vec::new(),
    };
    let json = serde_json::to_value(&out).expect("renders");
    assert_eq!(
        json,
        serde_json::json!({
            "outcome": "Failed",
            "library": "libcuda.so",
            "cudaVersion": "13.0",
            "initMillis": 2.5,
            "error": { "name": "CUDA_ERROR_NO_DEVICE", "code": 100, "step": "deviceCount" },
            "devices": [],
        })
    );
    let back: ChildResult = serde_json::from_value(json).expect("parses");
    assert_eq!(back, out);
    assert_eq!(outcome(false, &[]), ComputeOutcome::Passed);
    assert_eq!(outcome(true, &[]), ComputeOutcome::Failed);
}
