//! What the controller writes: the node reconciler (the only writer of
//! Nodes) with the node book behind one lock, the DeviceTaintRules, the
//! Events, the CRD guard that holds releases, and the NFD CRD reconciler.

pub mod crd_guard;
pub mod device_rules;
pub mod events;
pub mod ledger;
pub mod nfd;
pub mod node;
