//! Tests of `mod`, in their own file beside it.

use super::*;
use kube::core::response::{Status, StatusDetails};

fn not_found(kind: &str, name: &str) -> Error {
    let details = StatusDetails {
        name: name.to_owned(),
        group: String::new(),
        kind: kind.to_owned(),
        uid: String::new(),
        causes: vec![],
        retry_after_seconds: 0,
    };
    let status = Status::failure("not found", "NotFound")
        .with_code(404)
        .with_details(details);
    Error::Kube(kube::Error::Api(status.boxed()))
}

#[test]
fn only_this_nodes_404_means_it_was_deleted() {
    assert!(deleted_meanwhile(&not_found("nodes", "gpu-1"), "gpu-1"));
    assert!(!deleted_meanwhile(&not_found("nodes", "gpu-2"), "gpu-1"));
    // A resource the API server does not serve (DeviceTaintRules on a
    // cluster without DRA) is a 404 too, and worth every retry.
    assert!(!deleted_meanwhile(
        &not_found("devicetaintrules", "gpu-1"),
        "gpu-1"
    ));
}
