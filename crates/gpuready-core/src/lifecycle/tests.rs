//! Tests of `lifecycle`, in their own file beside it.

use super::*;

/// What makes the probe step aside, and what does not.
#[test]
fn gpu_clients_leave_for_paused_labels_upgrade_steps_and_mig_changes() {
    /// The node's labels, and what `gpu_clients_paused` names of them.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (&[], &[]),
        (&[(lc::DEPLOY_CLIENT, "true")], &[]),
        (&[(lc::DEPLOY_CLIENT, "false")], &[]),
        (
            &[(lc::DEPLOY_CLIENT, "paused-for-driver-upgrade")],
            &["nvidia.com/gpu.deploy.client=paused-for-driver-upgrade"],
        ),
        (
            &[(lc::DEPLOY_CLIENT, "paused-for-mig-change")],
            &["nvidia.com/gpu.deploy.client=paused-for-mig-change"],
        ),
        // k8s-driver-manager v0.12.0's maybeSetPaused over another value.
        (
            &[(lc::DEPLOY_CLIENT, "custom_paused-for-driver-upgrade")],
            &["nvidia.com/gpu.deploy.client=custom_paused-for-driver-upgrade"],
        ),
        (&[(lc::DEPLOY_CLIENT, "not-paused-for-driver-upgrade")], &[]),
        // An operator before 26.7 pauses only its operands.
        (
            &[(
                "nvidia.com/gpu.deploy.device-plugin",
                "paused-for-driver-upgrade",
            )],
            &["nvidia.com/gpu.deploy.device-plugin=paused-for-driver-upgrade"],
        ),
        (&[(lc::DRIVER_UPGRADE_STATE, "upgrade-required")], &[]),
        (
            &[(lc::DRIVER_UPGRADE_STATE, "cordon-required")],
            &["nvidia.com/gpu-driver-upgrade-state=cordon-required"],
        ),
        (
            &[(lc::DRIVER_UPGRADE_STATE, "pod-restart-required")],
            &["nvidia.com/gpu-driver-upgrade-state=pod-restart-required"],
        ),
        (
            &[(lc::DRIVER_UPGRADE_STATE, "uncordon-required")],
            &["nvidia.com/gpu-driver-upgrade-state=uncordon-required"],
        ),
        (&[(lc::DRIVER_UPGRADE_STATE, "upgrade-done")], &[]),
        (&[(lc::DRIVER_UPGRADE_STATE, "upgrade-failed")], &[]),
        (
            &[(nvidia::MIG_CONFIG_STATE, "pending")],
            &["nvidia.com/mig.config.state=pending"],
        ),
        (
            &[(nvidia::MIG_CONFIG_STATE, "rebooting")],
            &["nvidia.com/mig.config.state=rebooting"],
        ),
        (&[(nvidia::MIG_CONFIG_STATE, "success")], &[]),
        (&[(nvidia::MIG_CONFIG_STATE, "failed")], &[]),
        (
            &[
                (lc::DRIVER_UPGRADE_STATE, "drain-required"),
                (lc::DEPLOY_CLIENT, "paused-for-driver-upgrade"),
            ],
            &[
                "nvidia.com/gpu-driver-upgrade-state=drain-required",
                "nvidia.com/gpu.deploy.client=paused-for-driver-upgrade",
            ],
        ),
    ];
    for (labels, want) in cases {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(gpu_clients_paused(&labels), *want, "{labels:?}");
    }
}

#[test]
fn the_steps_between_cordon_and_uncordon_are_maintenance() {
    let steps: Vec<&str> = lc::UPGRADE_STATES
        .iter()
        .copied()
        .filter(|s| upgrade_step(s).is_some())
        .collect();
    assert_eq!(steps.len(), 9);
    assert_eq!(steps.first(), Some(&"cordon-required"));
    assert_eq!(steps.last(), Some(&"uncordon-required"));
    for s in [
        lc::UPGRADE_REQUIRED,
        lc::UPGRADE_DONE,
        lc::UPGRADE_FAILED,
        "",
    ] {
        assert_eq!(upgrade_step(s), None, "{s}");
    }
}
