//! What the controller writes: the node reconciler (the only writer of
//! Nodes), the DeviceTaintRules, the Events and the NFD CRD reconciler. The
//! state they decide with and others share — the node book (`ledger.rs`),
//! the CRD guard — sits beside `context.rs`, one owner each.

pub mod device_rules;
pub mod events;
pub mod nfd;
pub mod node;
pub mod written;
