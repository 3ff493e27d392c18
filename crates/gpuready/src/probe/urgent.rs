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
mod tests {
    use super::*;
    use gpuready_api::profile::DEFAULT_FATAL_XIDS;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn fatal_xids_and_double_bit_ecc_are_critical_application_xids_are_not() {
        for x in DEFAULT_FATAL_XIDS {
            assert!(is_critical(EventKind::Xid, Some(u64::from(*x))), "XID {x}");
        }
        // Not in the default list, but a profile may list it.
        assert!(is_critical(EventKind::Xid, Some(94)));
        for x in APPLICATION_XIDS {
            assert!(!is_critical(EventKind::Xid, Some(u64::from(*x))), "XID {x}");
        }
        assert!(!is_critical(EventKind::Xid, None));
        assert!(is_critical(EventKind::DoubleBitEcc, None));
    }

    #[test]
    fn a_burst_is_one_report_after_the_debounce() {
        let t0 = Instant::now();
        let mut e = EarlyReports::default();
        assert_eq!(e.due(), None);
        assert_eq!(e.event(t0), t0 + DEBOUNCE);
        // Seven more GPUs report the XID within the debounce: same report.
        for k in 1..8 {
            assert_eq!(e.event(t0 + ms(20 * k)), t0 + DEBOUNCE);
        }
        e.published(t0 + DEBOUNCE, true);
        assert_eq!(e.due(), None);
        // A later event asks for a report of its own.
        let t1 = t0 + ms(2000);
        assert_eq!(e.event(t1), t1 + DEBOUNCE);
    }

    #[test]
    fn past_the_budget_an_event_waits_for_the_oldest_to_leave_the_window() {
        let t0 = Instant::now();
        let mut e = EarlyReports::default();
        let mut sent = Vec::new();
        for k in 0..MAX_EARLY_PER_WINDOW as u64 {
            let due = e.event(t0 + ms(1000 * k));
            e.published(due, true);
            sent.push(due);
        }
        let now = t0 + ms(10_000);
        assert_eq!(e.event(now), sent[0] + WINDOW);
        // The heartbeat came first: it carried the event, nothing is due, and
        // the budget is still spent.
        e.published(now + ms(5000), false);
        assert_eq!(e.due(), None);
        let later = now + ms(6000);
        assert_eq!(e.event(later), sent[0] + WINDOW);
        // Once the oldest has left the window, the debounce alone applies.
        e.published(sent[0] + WINDOW, true);
        let free = sent[1] + WINDOW;
        assert_eq!(e.event(free), free + DEBOUNCE);
    }

    #[test]
    fn a_regular_report_clears_a_due_one_without_spending_the_budget() {
        let t0 = Instant::now();
        let mut e = EarlyReports::new(ms(500), Duration::from_secs(60), 1);
        e.event(t0);
        e.published(t0 + ms(100), false);
        assert_eq!(e.due(), None);
        let t1 = t0 + ms(200);
        assert_eq!(e.event(t1), t1 + ms(500));
        e.published(t1 + ms(500), true);
        // Budget of one spent: the next waits a minute from the early one.
        let t2 = t1 + ms(1000);
        assert_eq!(e.event(t2), t1 + ms(500) + Duration::from_secs(60));
    }
}
