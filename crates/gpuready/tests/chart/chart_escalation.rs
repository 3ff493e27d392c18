//! The chart's ceiling policy admits `NoExecute` only under the keys it
//! renders: those of chart profiles that declare it or escalate (issue 30's
//! `escalation`, whose taint turns `NoExecute`), and
//! `admissionPolicy.noExecuteTaintKeys`. Rendered by the real helm.

use crate::support;

use support::*;

/// The `noExecuteTaintKeys` variable of the rendered ceiling policy.
fn no_execute_keys(rendered: &str) -> String {
    let at = rendered
        .find("- name: noExecuteTaintKeys")
        .expect("the ceiling policy has a noExecuteTaintKeys variable");
    rendered[at..]
        .lines()
        .nth(1)
        .expect("its expression")
        .trim()
        .to_owned()
}

#[tokio::test]
async fn escalating_and_no_execute_chart_profiles_and_listed_keys_may_be_no_execute() {
    let env = gpuready_testenv::TestEnv::shared()
        .await
        .expect("test control plane");
    let values = tempfile::NamedTempFile::new().expect("values file");
    std::fs::write(
        values.path(),
        r#"
profiles:
  quiet:
    nodeSelector: {matchLabels: {gpu-pool: quiet}}
    taint: {key: example.org/quiet, effect: NoSchedule}
  escalating:
    nodeSelector: {matchLabels: {gpu-pool: esc}}
    taint: {key: example.org/esc, effect: NoSchedule}
    escalation: {reasons: [FatalXid], dryRunSeconds: 600}
  escalating-default-key:
    nodeSelector: {matchLabels: {gpu-pool: esc2}}
    escalation: {reasons: [FatalXid]}
  evicting:
    nodeSelector: {matchLabels: {gpu-pool: evict}}
    taint: {key: example.org/evict, effect: NoExecute}
admissionPolicy:
  noExecuteTaintKeys: [example.org/listed]
"#,
    )
    .expect("write values");
    let path = values.path().to_str().expect("utf-8 path");
    let rendered = render(env, "gpuready", "gpuready-system", &["-f", path]).await;
    assert_eq!(
        no_execute_keys(&rendered),
        r#"expression: "['example.org/esc', 'example.org/evict', 'example.org/listed', 'readiness.k8s.io/gpuready-not-ready']""#,
        "the keys of the escalating and NoExecute profiles and the listed one, not the quiet profile's"
    );
    let defaults = render(env, "gpuready", "gpuready-system", &[]).await;
    assert_eq!(
        no_execute_keys(&defaults),
        r#"expression: "[]""#,
        "by default no key may be NoExecute"
    );
}
