//! This replica's readiness, set by the start-up steps and the CRD guard and
//! served on /readyz.

use std::sync::atomic::{AtomicBool, Ordering};

/// Readiness of this replica, served on /readyz.
#[derive(Default)]
pub struct Health {
    pub crd_established: AtomicBool,
    pub caches_synced: AtomicBool,
    pub standby: AtomicBool,
}

impl Health {
    pub fn ready(&self) -> Result<(), &'static str> {
        if !self.crd_established.load(Ordering::Relaxed) {
            return Err("the GpuNodeProfile CRD is not established yet");
        }
        if self.standby.load(Ordering::Relaxed) || self.caches_synced.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("caches are not synced yet")
        }
    }
}
