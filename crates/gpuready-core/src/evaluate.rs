//! The verdict: node facts judged against a profile, layer by layer, bottom-up.
//! A pure function of (profile, facts, now). This file chooses which judge
//! speaks for each layer (device plugin or DRA, container or VM workload, node
//! down) and assembles the report; each layer's rules live in a file of its own
//! below it, sharing only the verdict words of `verdict`.

use std::borrow::Cow;

use gpuready_api::keys::reasons;
use gpuready_api::probe::ProbeReport;
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
mod judged;
mod node;
mod profile;
mod verdict;

use verdict::{Verdict, ready, unknown};

// The report's types live below the judges, so a judge needs no import of this
// file; they are re-exported here where callers have always found them.
pub use crate::report::{DeadlinePassed, LayerReport, LayerResult, Status};
pub use feature_discovery::MAX_GFD_CLOCK_SKEW_SECONDS;

use crate::devices::DeviceGatingReport;
use crate::evidence::{DraEvidence, DraPool, Source};
use crate::facts::NodeFacts;
use crate::probe::ProbeEvidence;
use crate::repair::RepairOutcome;

/// Judges a node against a profile at time `now`.
pub fn evaluate(spec: &GpuNodeProfileSpec, facts: &NodeFacts, now: Timestamp) -> LayerReport {
    // The operator's repair mark takes the faults recorded before it out of
    // the report before anything judges it (the Health layer and the devices).
    let (repair, facts) = with_repair(facts, now);
    let facts: &NodeFacts = &facts;
    let node = node::node_layer(facts);
    let inputs = Inputs::of(spec, facts, node.status == Status::Ready, now);
    let mut recheck = None;
    let mut layers = Vec::with_capacity(Layer::ALL.len() + Layer::OPTIONAL.len());
    layers.push(LayerResult {
        layer: Layer::Node,
        status: node.status,
        reason: node.reason.to_owned(),
        message: node.message,
        gating: spec.is_gating(Layer::Node),
        evidence: Source::Kubelet,
    });
    for layer in Layer::every() {
        let Some(v) = inputs.judge(layer, &mut recheck) else {
            continue;
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
    let devices = inputs.devices;
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
    let judged = judged::Judged { spec, facts, now };
    deadline::apply_deadline(&judged, &mut report);
    escalation::apply_node_escalation(&judged, &mut report);
    report
}

/// The probe report of the facts, when there is a readable one.
fn probe_report(facts: &NodeFacts) -> Option<&ProbeReport> {
    match &facts.probe {
        Some(ProbeEvidence::Report(r)) => Some(r.as_ref()),
        _ => None,
    }
}

/// The repair mark's outcome, and the facts with the faults it clears taken
/// out of the probe report (the facts as they are when it clears nothing).
fn with_repair(facts: &NodeFacts, now: Timestamp) -> (Option<RepairOutcome>, Cow<'_, NodeFacts>) {
    let (repair, repaired) = crate::repair::apply(
        facts.repaired_at.as_deref(),
        facts.created,
        now,
        probe_report(facts),
    );
    let facts = match repaired {
        Some(r) => Cow::Owned(
            facts
                .clone()
                .with_probe(Some(ProbeEvidence::Report(Box::new(r)))),
        ),
        None => Cow::Borrowed(facts),
    };
    (repair, facts)
}

/// The earlier of two re-check times, either of which may be absent.
fn earlier(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What the layer judges read: the node's facts as each of them sees them
/// (the whole pool, the devices in service, the GPUs in service), and which
/// judge speaks (DRA or device plugin, container or VM workload, node down).
struct Inputs<'a> {
    spec: &'a GpuNodeProfileSpec,
    facts: &'a NodeFacts,
    now: Timestamp,
    node_ok: bool,
    dra: bool,
    vm: bool,
    /// The complete DRA pool, when its attributes stand in for GFD labels.
    pool: Option<&'a DraPool>,
    /// The devices judged one by one, when they are gated one by one.
    devices: Option<DeviceGatingReport>,
    /// The facts with GPU attributes from the devices that stay in service.
    judged: Cow<'a, NodeFacts>,
    /// The facts with the probe report of the GPUs that stay in service.
    health_facts: Cow<'a, NodeFacts>,
    /// Where the GPU attributes come from.
    attributes: Source,
}

impl<'a> Inputs<'a> {
    fn of(
        spec: &'a GpuNodeProfileSpec,
        facts: &'a NodeFacts,
        node_ok: bool,
        now: Timestamp,
    ) -> Inputs<'a> {
        let dra = uses_dra(spec, facts);
        let vm = spec.workload != Workload::Container;
        // Under DRA the pool's device attributes stand in for GFD labels: the same
        // rules judge them, and only a DRA node pays for the copy.
        let pool = if dra && !vm {
            facts.evidence.dra.complete()
        } else {
            None
        };
        let devices = pool.and_then(|p| gate_devices(spec, facts, p, now));
        let judged = judged_facts(facts, pool, devices.as_ref());
        let health_facts = health_facts(facts, pool, devices.as_ref());
        Inputs {
            spec,
            facts,
            now,
            node_ok,
            dra,
            vm,
            pool,
            devices,
            judged,
            health_facts,
            attributes: if pool.is_some() {
                Source::ResourceSlices
            } else {
                Source::GfdLabels
            },
        }
    }

    /// The verdict of `layer`, `None` when it is left out of the report; a
    /// judge that names a re-check time brings `recheck` forward to it.
    fn judge(&self, layer: Layer, recheck: &mut Option<u64>) -> Option<Verdict> {
        let (spec, facts, now) = (self.spec, self.facts, self.now);
        let judged: &NodeFacts = &self.judged;
        Some(match layer {
            Layer::Node => return None,
            // Left out entirely when there is no report and the profile ignores
            // that: profiles written before the probe existed judge as before.
            Layer::Health if !health::applies(spec, facts) => return None,
            // Only where the profile names outside judges, or asks for a fabric.
            Layer::External if !external::applies(spec) => return None,
            Layer::Fabric if !fabric::applies(spec) => return None,
            // A node that is down tells us nothing current about its GPU stack.
            _ if !self.node_ok => unknown(
                reasons::NODE_NOT_READY,
                "kubelet is not Ready: the GPU stack cannot be judged until the node is back",
            )
            .via(Source::Kubelet),
            Layer::Hardware => hardware::hardware_layer(spec, facts),
            Layer::DevicePlugin => {
                device_plugin::device_plugin_evidence(spec, facts, self.dra, self.devices.as_ref())
            }
            Layer::Driver | Layer::FeatureDiscovery | Layer::Profile | Layer::Compatibility
                if self.vm =>
            {
                not_applicable_to_vm(spec, layer)
            }
            // DRA without a complete pool and without GFD labels to fall back
            // on: these layers wait for the pool, under the pool's reason.
            Layer::Driver | Layer::Profile | Layer::Compatibility
                if self.dra && self.pool.is_none() && !facts.gfd.seen =>
            {
                dra_pending(facts)
            }
            Layer::Driver => driver::driver_layer(spec, judged).or_via(self.attributes),
            Layer::FeatureDiscovery if self.dra => feature_discovery::dra_feature_layer(facts),
            Layer::FeatureDiscovery => {
                let (v, r) = feature_discovery::feature_discovery_layer(spec, facts, now);
                *recheck = r;
                v
            }
            Layer::Profile => {
                profile::profile_with_bus(spec, judged, self.dra).or_via(self.attributes)
            }
            Layer::Compatibility => {
                compatibility::compatibility_layer(spec, judged).or_via(self.attributes)
            }
            Layer::Fabric => fabric::fabric_layer(spec, facts),
            Layer::External => {
                let (v, r) = external::external_layer(spec, facts, now);
                *recheck = earlier(*recheck, r);
                v
            }
            Layer::Health => {
                let h = health::judge(spec, &self.health_facts, now)?;
                *recheck = earlier(*recheck, h.recheck_after_seconds);
                Verdict {
                    status: h.status,
                    reason: h.reason,
                    message: h.message,
                    source: Some(Source::ProbeReport),
                }
            }
        })
    }
}

/// Device gating: bad devices get their own DeviceTaintRule, so the node's
/// layers judge the devices that stay in service. Only when the rules can be
/// written (read at all): otherwise (`None`) the whole node is gated, as before.
fn gate_devices(
    spec: &GpuNodeProfileSpec,
    facts: &NodeFacts,
    pool: &DraPool,
    now: Timestamp,
) -> Option<DeviceGatingReport> {
    spec.device_gating.as_ref()?;
    let owned = facts.evidence.device_rules.as_ref()?;
    Some(crate::devices::judge_devices(
        spec,
        pool,
        probe_report(facts),
        owned,
        facts.evidence.extended_resource_holds.as_deref(),
        now,
    ))
}

/// The facts whose GPU attributes are the pool's devices in service (the
/// facts as they are without a pool).
fn judged_facts<'a>(
    facts: &'a NodeFacts,
    pool: Option<&DraPool>,
    devices: Option<&DeviceGatingReport>,
) -> Cow<'a, NodeFacts> {
    let Some(p) = pool else {
        return Cow::Borrowed(facts);
    };
    let good_pool = match devices {
        Some(g) if !g.bad.is_empty() => {
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
    let mut f = facts.clone();
    f.gfd = good_pool.as_ref().unwrap_or(p).as_gfd();
    // The count is what the pool publishes: a bad device is still there.
    f.gfd.count = p.as_gfd().count;
    Cow::Owned(f)
}

/// The Health layer judges the GPUs that stay in service: a bad GPU's own
/// state is its DeviceTaintRule's business.
fn health_facts<'a>(
    facts: &'a NodeFacts,
    pool: Option<&DraPool>,
    devices: Option<&DeviceGatingReport>,
) -> Cow<'a, NodeFacts> {
    match (pool, devices, &facts.probe) {
        (Some(p), Some(g), Some(ProbeEvidence::Report(r))) if !g.bad.is_empty() => {
            let mut f = facts.clone();
            f.probe = Some(ProbeEvidence::Report(Box::new(
                crate::devices::report_without(r, g, p),
            )));
            Cow::Owned(f)
        }
        _ => Cow::Borrowed(facts),
    }
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
