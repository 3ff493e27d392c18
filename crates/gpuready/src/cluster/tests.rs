//! Tests of `cluster`, in their own file beside it.

use super::*;

#[test]
fn a_transport_error_names_the_server_and_what_to_check() {
    let e = kube::Error::Service("client error (Connect)".into());
    let msg = describe_request_error("https://127.0.0.1:1/", "listing nodes", &e);
    assert!(msg.starts_with("listing nodes: cannot reach"), "{msg}");
    assert!(msg.contains("https://127.0.0.1:1/"), "{msg}");
    assert!(msg.contains("--kubeconfig"), "{msg}");
}
