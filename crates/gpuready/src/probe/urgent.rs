//! When the probe publishes ahead of its heartbeat: a critical NVML event
//! would otherwise wait up to an interval (60 s) for the next report, while
//! the scheduler keeps placing pods on the GPU. Debounced, so a burst (an XID
//! on every GPU of the node) is one report, and bounded per minute, so a
//! flapping GPU cannot turn the probe into a stream of writes. Pure: time is
//! an argument; `agent_loop` (in `probe/mod.rs`) sleeps and publishes.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use gpuready_api::probe::EventKind;
use gpuready_api::profile::APPLICATION_XIDS;

/// How long the first critical event of a burst waits for the rest of it.
pub const DEBOUNCE: Duration = Duration::from_millis(500);
/// The window of the budget below.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Early reports per [`WINDOW`]; past them, an event waits for the heartbeat
/// or for the oldest early report to leave the window, whichever comes first.
pub const MAX_EARLY_PER_WINDOW: usize = 6;

/// Whether an event may gate the node, and so is worth a report at once: a
/// double-bit ECC error (`UncorrectableEccErrors` in every profile), or an
/// XID a profile can list as fatal (`probe.fatalXids`: any XID but the
/// application ones, which the API server refuses there). The probe does not
/// read the profiles, so every such XID counts, the default fatal list's
/// included. A changed recovery action arrives as XID 154, which the driver
/// raises with it; the report then carries the action read from NVML.
pub fn is_critical(kind: EventKind, xid: Option<u64>) -> bool {
    match kind {
        EventKind::DoubleBitEcc => true,
        // An XID without its number is not judged by the Health layer.
        EventKind::Xid => {
            xid.is_some_and(|x| !u32::try_from(x).is_ok_and(|x| APPLICATION_XIDS.contains(&x)))
        }
    }
}

/// The schedule of early reports.
#[derive(Debug)]
pub struct EarlyReports {
    debounce: Duration,
    window: Duration,
    max: usize,
    /// When the early reports still in the window went out, oldest first.
    sent: VecDeque<Instant>,
    /// When the next early report goes, once an event asked for one.
    due: Option<Instant>,
}

impl Default for EarlyReports {
    fn default() -> Self {
        EarlyReports::new(DEBOUNCE, WINDOW, MAX_EARLY_PER_WINDOW)
    }
}

impl EarlyReports {
    pub fn new(debounce: Duration, window: Duration, max: usize) -> EarlyReports {
        EarlyReports {
            debounce,
            window,
            max: max.max(1),
            sent: VecDeque::new(),
            due: None,
        }
    }

    /// When the next early report goes (`None`: none asked for).
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// A critical event at `now`; returns when its report goes. The first
    /// event of a burst sets it `debounce` later and the rest of the burst
    /// joins it; with the budget spent, it goes when the oldest early report
    /// leaves the window (a heartbeat before then carries the event instead).
    pub fn event(&mut self, now: Instant) -> Instant {
        if let Some(due) = self.due {
            return due;
        }
        while self
            .sent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.window)
        {
            self.sent.pop_front();
        }
        let mut due = now + self.debounce;
        if self.sent.len() >= self.max {
            // The report that frees a slot when it leaves the window.
            if let Some(t) = self.sent.get(self.sent.len() - self.max) {
                due = due.max(*t + self.window);
            }
        }
        self.due = Some(due);
        due
    }

    /// A report went out at `now`, `early` when it was the one [`event`]
    /// scheduled. Every report carries every event recorded before it, so
    /// none is due after it; only early ones count against the budget.
    ///
    /// [`event`]: EarlyReports::event
    pub fn published(&mut self, now: Instant, early: bool) {
        self.due = None;
        if early {
            self.sent.push_back(now);
        }
    }
}

#[cfg(test)]
mod tests;
