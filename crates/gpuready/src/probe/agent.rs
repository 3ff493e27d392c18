//! The probe between two reports: the NVML session it holds while its node is
//! in service and none while the node is in maintenance, and what it keeps
//! across reports (the compute check's memory, the events since it started
//! reading). The CUDA compute check never runs in this process (a child does
//! it, and exits), so NVML is all there is to release.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use gpuready_api::probe::{EventLog, NvmlState, PROBE_REPORT_API_VERSION, ProbePause, ProbeReport};
use jiff::Timestamp;
use tokio::sync::watch;

use super::nvml::{self, Events, Session};
use super::report::{Checker, build_report};
use super::{compute, imex};

/// The long-running probe's state.
pub struct Agent {
    library: Option<OsString>,
    session: Option<Session>,
    last_state: NvmlState,
    events: Arc<Events>,
    /// When it started reading the GPUs: events count from here.
    started: Timestamp,
    checker: Checker,
    pause: Option<ProbePause>,
    /// Told of each new critical event, whichever `events` records it.
    critical: watch::Sender<u64>,
}

impl Agent {
    /// `library`: `--nvml-library`, or `None` to search the usual places.
    pub fn new(library: Option<OsString>, checker: Checker) -> Agent {
        let (critical, _) = watch::channel(0);
        Agent {
            library,
            session: None,
            last_state: NvmlState::default(),
            events: Arc::new(Events::signalling(critical.clone())),
            started: Timestamp::now(),
            checker,
            pause: None,
            critical,
        }
    }

    /// Changes on each new critical NVML event ([`super::urgent::is_critical`])
    /// while the agent lives: the loop publishes ahead of its heartbeat.
    pub fn critical_events(&self) -> watch::Receiver<u64> {
        self.critical.subscribe()
    }

    /// Whether the probe holds NVML now.
    pub fn holds_nvml(&self) -> bool {
        self.session.is_some()
    }

    /// The report for now. With `maintenance` (the node's labels that call
    /// for GPU clients to leave) NVML is released first and the report says
    /// the probe is paused; without, NVML is (re)opened and the GPUs read.
    pub fn report(
        &mut self,
        node: &str,
        host_root: Option<&Path>,
        request: Option<String>,
        maintenance: &[String],
    ) -> ProbeReport {
        if maintenance.is_empty() {
            self.resume();
            self.read(node, host_root, request)
        } else {
            self.step_aside(maintenance);
            self.paused_report(node, host_root)
        }
    }

    /// Releases NVML (stops the event thread, shuts NVML down). Idempotent.
    pub fn release(&mut self) {
        if let Some(session) = self.session.take() {
            match session.release() {
                Ok(()) => tracing::info!("NVML released"),
                Err(e) => tracing::warn!(error = %e, "NVML released with an error"),
            }
            self.last_state = NvmlState::default();
        }
    }

    fn step_aside(&mut self, maintenance: &[String]) {
        let first = self.pause.is_none();
        self.release();
        let since = match &self.pause {
            Some(p) => p.since.clone(),
            None => Timestamp::now().to_string(),
        };
        let open = nvml::open_device_files();
        if first {
            tracing::info!(?maintenance, open_device_files = ?open, "the node is in maintenance: the probe released the GPUs and reads nothing until it ends");
        }
        self.pause = Some(ProbePause {
            since,
            labels: maintenance.to_vec(),
            open_device_files: open,
        });
    }

    /// Back from maintenance: events and their start time begin afresh, as
    /// for a restarted probe (the driver was reloaded, its GPUs reset).
    fn resume(&mut self) {
        if self.pause.take().is_some() {
            tracing::info!("the node's maintenance ended: reading the GPUs again");
            self.events = Arc::new(Events::signalling(self.critical.clone()));
            self.started = Timestamp::now();
        }
    }

    fn read(
        &mut self,
        node: &str,
        host_root: Option<&Path>,
        request: Option<String>,
    ) -> ProbeReport {
        // The driver may come up after the probe (the GPU operator installs
        // it in a pod of its own): NVML is retried at every report until it
        // initialises.
        if self.session.is_none() {
            let (session, state) = Session::open(self.library.as_deref(), &self.events);
            if state != self.last_state {
                match &state.error {
                    None => {
                        tracing::info!(library = ?state.library, version = ?state.version, "NVML initialised")
                    }
                    Some(e) => tracing::warn!(error = %e, "NVML unusable; retrying every interval"),
                }
            }
            self.last_state = state;
            self.session = session;
        }
        build_report(
            Some(node),
            host_root,
            self.started,
            self.last_state.clone(),
            self.session.as_ref().and_then(Session::nvml),
            self.events.snapshot(),
            &mut self.checker,
            request,
        )
    }

    fn paused_report(&self, node: &str, host_root: Option<&Path>) -> ProbeReport {
        let since = self.pause.as_ref().map_or("", |p| p.since.as_str());
        ProbeReport {
            api_version: PROBE_REPORT_API_VERSION.to_owned(),
            node: Some(node.to_owned()),
            generated_at: Timestamp::now().to_string(),
            probe_started_at: self.started.to_string(),
            probe_version: env!("CARGO_PKG_VERSION").to_owned(),
            nvml: NvmlState {
                usable: false,
                error: Some(format!(
                    "not used: the probe released NVML at {since} while the node is in maintenance"
                )),
                ..NvmlState::default()
            },
            events: EventLog {
                monitored: false,
                error: Some("not monitored while the probe is paused for maintenance".into()),
                ..EventLog::default()
            },
            boot_id: compute::boot_id(),
            imex: host_root.map(imex::read),
            paused: self.pause.clone(),
            ..ProbeReport::default()
        }
    }
}
