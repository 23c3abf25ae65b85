//! Ctrl+C and SIGTERM during a headless run. The first stops the run gracefully: the caller sees
//! the signal in [`StopSignals::received`], stops taking frames, lets the frames already taken
//! through, finishes every file and exits with the conventional code (128 + the signal: 130 for
//! SIGINT, 143 for SIGTERM). A second signal exits at once with that code, from the handler, for
//! a run that is stuck or that the user no longer wants to wait for; files are still readable
//! then (see `morphoscope::output`), only the last frames and the video's index are missing.
//!
//! Installed only by headless runs: elsewhere (the viewer, `image`, `bench`) the default
//! disposition stays and Ctrl+C ends the process as usual.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::Context;
use morphoscope::lifecycle::{StopRequest, cause_name};
use signal_hook::consts::signal::{SIGINT, SIGTERM};
use signal_hook::flag;

/// The stop signals a headless run handles.
const HANDLED: [i32; 2] = [SIGINT, SIGTERM];

/// Handlers of SIGINT and SIGTERM for one run.
#[derive(Debug)]
pub struct StopSignals {
    /// The last signal received (0: none).
    received: Arc<AtomicUsize>,
}

impl StopSignals {
    /// Installs the handlers. For each signal, in this order: exit at once when one was already
    /// received, then mark it received (so the first only marks, the second exits).
    pub fn install() -> anyhow::Result<Self> {
        let armed = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicUsize::new(0));
        for sig in HANDLED {
            flag::register_conditional_shutdown(sig, 128 + sig, armed.clone())
                .with_context(|| format!("cannot handle {}", cause_name(sig)))?;
            flag::register(sig, armed.clone())
                .with_context(|| format!("cannot handle {}", cause_name(sig)))?;
            flag::register_usize(sig, received.clone(), sig as usize)
                .with_context(|| format!("cannot handle {}", cause_name(sig)))?;
        }
        Ok(Self { received })
    }

    /// Makes SIGINT and SIGTERM ask `stop` at once (from the handler): a stream that is still
    /// opening its source, or waiting for the broker, sees the request without polling.
    pub fn watch(&self, stop: &StopRequest) -> anyhow::Result<()> {
        let (cause, flag) = stop.handler_targets();
        for sig in HANDLED {
            // The cause first: whoever sees the flag finds the cause already set.
            flag::register_usize(sig, cause.clone(), sig as usize)
                .with_context(|| format!("cannot handle {}", cause_name(sig)))?;
            flag::register(sig, flag.clone())
                .with_context(|| format!("cannot handle {}", cause_name(sig)))?;
        }
        Ok(())
    }

    /// The signal received, if any.
    #[must_use]
    pub fn received(&self) -> Option<i32> {
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            s => i32::try_from(s).ok(),
        }
    }
}

/// The conventional exit code after a stop by `sig`: 128 + its number.
#[must_use]
pub fn exit_code(sig: i32) -> ExitCode {
    ExitCode::from(u8::try_from(128 + sig).unwrap_or(1))
}
