//! The verdict: node facts judged against a profile, layer by layer, bottom-up.
//! A pure function of (profile, facts, now). This file chooses which judge
//! speaks for each layer (device plugin or DRA, container or VM workload, node
//! down) and assembles the report; each layer's rules live in a file of its own
//! below it, sharing only the verdict words of `verdict`.

use std::borrow::Cow;

use gpuready_api::keys::reasons;
use gpuready_api::{EvidenceMode, GpuNodeProfileSpec, Layer, Workload};
use jiff::Timestamp;

mod compatibility;
mod deadline;
mod device_plugin;
mod driver;
mod escalation;
mod external;
mod fabric;
mod feature_discovery;
mod hardware;
pub mod health;
mod node;
mod profile;
mod verdict;

use verdict::{Verdict, ready, unknown};

// The report's types live below the judges, so a judge needs no import of this
// file; they are re-exported here where callers have always found them.
pub use crate::report::{DeadlinePassed, LayerReport, LayerResult, Status};
pub use feature_discovery::MAX_GFD_CLOCK_SKEW_SECONDS;

use crate::evidence::{DraEvidence, Source};
use crate::facts::NodeFacts;
use crate::probe::ProbeEvidence;

/// Judges a node against a profile at time `now`.
pub fn evaluate(spec: &GpuNodeProfileSpec, facts: &NodeFacts, now: Timestamp) -> LayerReport {
    // The operator's repair mark takes the faults recorded before it out of
    // the report before anything judges it (the Health layer and the devices).
    let report = match &facts.probe {
        Some(ProbeEvidence::Report(r)) => Some(r.as_ref()),
        _ => None,
    };
    let (repair, repaired) =
        crate::repair::apply(facts.repaired_at.as_deref(), facts.created, now, report);
    let repaired_facts;
    let facts: &NodeFacts = match repaired {
        Some(r) => {
            repaired_facts = facts
                .clone()
                .with_probe(Some(ProbeEvidence::Report(Box::new(r))));
            &repaired_facts
        }
        None => facts,
    };
    let node = node::node_layer(facts);
    let node_ok = node.status == Status::Ready;
    let dra = uses_dra(spec, facts);
    let vm = spec.workload != Workload::Container;
    // Under DRA the pool's device attributes stand in for GFD labels: the same
    // rules judge them, and only a DRA node pays for the copy.
    let pool = if dra && !vm {
        facts.evidence.dra.complete()
    } else {
        None
    };
    // Device gating: bad devices get their own DeviceTaintRule, so the node's
    // layers judge the devices that stay in service. Only when the rules can
    // be written (read at all): otherwise the whole node is gated, as before.
    let devices = match (pool, &spec.device_gating, &facts.evidence.device_rules) {
        (Some(p), Some(_), Some(owned)) => {
            let probe = match &facts.probe {
                Some(ProbeEvidence::Report(r)) => Some(r.as_ref()),
                _ => None,
            };
            Some(crate::devices::judge_devices(
                spec,
                p,
                probe,
                owned,
                facts.evidence.extended_resource_holds.as_deref(),
                now,
            ))
        }
        _ => None,
    };
    let good_pool = match (pool, &devices) {
        (Some(p), Some(g)) if !g.bad.is_empty() => {
            let names = g.bad.iter().map(|b| b.device.as_str()).collect();
            let good = p.without(&names);
            // Every device bad: the attributes of the whole pool still describe
            // the node (and its layers fail on the device plugin count).
            Some(if good.devices.is_empty() {
                p.clone()
            } else {
                good
            })
        }
        _ => None,
    };
    let judged: Cow<NodeFacts> = match pool {
        Some(p) => {
            let mut f = facts.clone();
            f.gfd = good_pool.as_ref().unwrap_or(p).as_gfd();
            // The count is what the pool publishes: a bad device is still there.
            f.gfd.count = p.as_gfd().count;
            Cow::Owned(f)
        }
        None => Cow::Borrowed(facts),
    };
    // The Health layer judges the GPUs that stay in service: a bad GPU's own
    // state is its DeviceTaintRule's business.
    let health_facts: Cow<NodeFacts> = match (pool, &devices, &facts.probe) {
        (Some(p), Some(g), Some(ProbeEvidence::Report(r))) if !g.bad.is_empty() => {
            let mut f = facts.clone();
            f.probe = Some(ProbeEvidence::Report(Box::new(
                crate::devices::report_without(r, g, p),
            )));
            Cow::Owned(f)
        }
        _ => Cow::Borrowed(facts),
    };
    let attributes = if pool.is_some() {
        Source::ResourceSlices
    } else {
        Source::GfdLabels
    };
    let mut recheck = None;
    let mut layers = Vec::with_capacity(Layer::ALL.len() + Layer::OPTIONAL.len());
    for layer in Layer::every() {
        let v = match layer {
            Layer::Node => continue,
            // Left out entirely when there is no report and the profile ignores
            // that: profiles written before the probe existed judge as before.
            Layer::Health if !health::applies(spec, facts) => continue,
            // Only where the profile names outside judges, or asks for a fabric.
            Layer::External if !external::applies(spec) => continue,
            Layer::Fabric if !fabric::applies(spec) => continue,
            // A node that is down tells us nothing current about its GPU stack.
            _ if !node_ok => unknown(
                reasons::NODE_NOT_READY,
                "kubelet is not Ready: the GPU stack cannot be judged until the node is back",
            )
            .via(Source::Kubelet),
            Layer::Hardware => hardware::hardware_layer(spec, facts),
            Layer::DevicePlugin => {
                device_plugin::device_plugin_evidence(spec, facts, dra, devices.as_ref())
            }
            Layer::Driver | Layer::FeatureDiscovery | Layer::Profile | Layer::Compatibility
                if vm =>
            {
                not_applicable_to_vm(spec, layer)
            }
            // DRA without a complete pool and without GFD labels to fall back
            // on: these layers wait for the pool, under the pool's reason.
            Layer::Driver | Layer::Profile | Layer::Compatibility
                if dra && pool.is_none() && !facts.gfd.seen =>
            {
                dra_pending(facts)
            }
            Layer::Driver => driver::driver_layer(spec, &judged).or_via(attributes),
            Layer::FeatureDiscovery if dra => feature_discovery::dra_feature_layer(facts),
            Layer::FeatureDiscovery => {
                let (v, r) = feature_discovery::feature_discovery_layer(spec, facts, now);
                recheck = r;
                v
            }
            Layer::Profile => profile::profile_with_bus(spec, &judged, dra).or_via(attributes),
            Layer::Compatibility => {
                compatibility::compatibility_layer(spec, &judged).or_via(attributes)
            }
            Layer::Fabric => fabric::fabric_layer(spec, facts),
            Layer::External => {
                let (v, r) = external::external_layer(spec, facts, now);
                recheck = match (recheck, r) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                v
            }
            Layer::Health => match health::judge(spec, &health_facts, now) {
                Some(h) => {
                    recheck = match (recheck, h.recheck_after_seconds) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    Verdict {
                        status: h.status,
                        reason: h.reason,
                        message: h.message,
                        source: Some(Source::ProbeReport),
                    }
                }
                None => continue,
            },
        };
        layers.push(LayerResult {
            layer,
            status: v.status,
            reason: v.reason.to_owned(),
            message: v.message,
            gating: spec.is_gating(layer),
            evidence: v.source.unwrap_or(default_source(layer)),
        });
    }
    layers.insert(
        0,
        LayerResult {
            layer: Layer::Node,
            status: node.status,
            reason: node.reason.to_owned(),
            message: node.message,
            gating: spec.is_gating(Layer::Node),
            evidence: Source::Kubelet,
        },
    );
    let mut lifecycle = crate::lifecycle::judge(spec, facts, now);
    lifecycle.repair = repair;
    let recheck = [
        recheck,
        lifecycle.recheck_after_seconds,
        devices.as_ref().and_then(|d| d.recheck_after_seconds),
    ]
    .into_iter()
    .flatten()
    .min();
    let mut report = LayerReport {
        layers,
        recheck_after_seconds: recheck,
        deadline: None,
        devices,
        lifecycle,
        node_escalation: None,
    };
    // First: it may fail the DevicePlugin layer, which the deadline counts.
    escalation::apply_extended_resource_escalation(spec, &mut report);
    deadline::apply_deadline(spec, facts, now, &mut report);
    escalation::apply_node_escalation(spec, facts, now, &mut report);
    report
}

fn default_source(layer: Layer) -> Source {
    match layer {
        Layer::Node => Source::Kubelet,
        Layer::Hardware => Source::NfdLabels,
        Layer::DevicePlugin => Source::Allocatable,
        Layer::Health => Source::ProbeReport,
        Layer::External => Source::NodeConditions,
        Layer::Fabric => Source::GfdLabels,
        _ => Source::GfdLabels,
    }
}

/// Whether the profile judges this node's advertisement by DRA ResourceSlices.
fn uses_dra(spec: &GpuNodeProfileSpec, facts: &NodeFacts) -> bool {
    match spec.evidence {
        EvidenceMode::DevicePlugin => false,
        EvidenceMode::Dra => true,
        EvidenceMode::Auto => facts.evidence.dra.has_slices(),
    }
}

/// Driver, FeatureDiscovery, Profile and Compatibility judge the container
/// driver stack, which a VM-workload node does not run: the guest does.
fn not_applicable_to_vm(spec: &GpuNodeProfileSpec, layer: Layer) -> Verdict {
    ready(
        reasons::NOT_APPLICABLE_TO_WORKLOAD,
        format!(
            "workload {}: the GPUs are handed to VMs, so the {layer} layer (host driver and GFD labels) is judged inside the guest, not here",
            spec.workload.label_value()
        ),
    )
    .via(Source::Profile)
}

/// A layer that reads GPU attributes while the DRA pool cannot give them.
fn dra_pending(facts: &NodeFacts) -> Verdict {
    let reason = match &facts.evidence.dra {
        DraEvidence::NotRead => reasons::DRA_EVIDENCE_UNAVAILABLE,
        DraEvidence::Incomplete { .. } => reasons::RESOURCE_POOL_INCOMPLETE,
        DraEvidence::NoSlices | DraEvidence::Complete(_) => reasons::NO_RESOURCE_SLICE,
    };
    unknown(
        reason,
        "the GPU attributes come from the node's gpu.nvidia.com ResourceSlices, and there is no complete pool to read (see DevicePlugin)",
    )
    .via(Source::ResourceSlices)
}
