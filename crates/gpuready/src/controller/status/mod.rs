//! What the controller reports: the status task (profile status, metrics and
//! profile Events from the tally), the messages it is sent, the metrics
//! registry, this replica's health and the HTTP endpoints serving them.

pub mod health;
pub mod http;
pub mod input;
pub mod metrics;
pub mod task;
