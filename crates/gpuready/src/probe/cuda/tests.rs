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
