//! What the controller reports: the status task (profile status, metrics and
//! profile Events from the tally) and the HTTP endpoints serving metrics and
//! health. The registry, the health flags and the task's message type are
//! shared by every room, so they sit beside `context.rs`.

pub mod http;
pub mod task;
