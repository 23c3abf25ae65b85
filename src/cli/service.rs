//! `morphoscope run --listen ADDR:PORT [SOURCE…]`: a service ([`morphoscope::service`]).
//!
//! It serves the HTTP endpoint, starts the sources given (stream i with id `i`, folder
//! `OUT/<i>/`, as `run A B` does) and runs until SIGINT or SIGTERM, with or without streams:
//! streams come and go over HTTP. Then it stops the endpoint, finishes every stream's files,
//! waits for the broker (a second signal ends that wait), prints the summary, and exits with
//! 128 + the signal (1 when a stream that was still listed had failed).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use morphoscope::config::Settings;
use morphoscope::lifecycle::cause_name;
use morphoscope::service::{Origin, Service, StreamsConfig};

use super::CommonArgs;
use super::signals;
use super::streams::{Begun, SummaryRow, begin, finish_broker, report};

/// How often the service samples the devices' memory for its metrics.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// How often the main thread looks for a stop signal.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs the service until a stop signal; returns the exit code.
pub fn run_service(
    common: &CommonArgs,
    settings: &Settings,
    sources: &[String],
    out: &Path,
    max_frames: Option<u64>,
    video: bool,
) -> anyhow::Result<ExitCode> {
    let Begun {
        publisher,
        stop_signals,
        backends,
    } = begin(common, settings, out)?;
    let service = Service::start(StreamsConfig {
        settings: settings.clone(),
        backends: backends.clone(),
        out: out.to_owned(),
        video,
        max_frames,
        publisher,
    })?;
    println!(
        "morphoscope service: listening on http://{} (endpoints: docs/service.md)",
        service.address()
    );
    // The line above is what a supervisor or a test waits for.
    let _ = std::io::stdout().flush();
    let started = Instant::now();
    for (i, source) in sources.iter().enumerate() {
        if let Err(e) = service
            .streams()
            .add(source, Some(&i.to_string()), Origin::Operator)
        {
            // The streams already started stop as on SIGTERM; the broker is not waited for.
            drop(service.finish(signal_hook::consts::signal::SIGTERM));
            anyhow::bail!("stream {i} ({}): {e}", morphoscope::redact::url(source));
        }
    }
    let mut sampled = Instant::now();
    let cause = loop {
        if let Some(cause) = stop_signals.received() {
            break cause;
        }
        if sampled.elapsed() >= SAMPLE_EVERY {
            sampled = Instant::now();
            service.streams().sample_devices();
        }
        std::thread::sleep(SIGNAL_POLL);
    };
    log::warn!(
        "{}: stopping the service — finishing every stream's frames and files (again to quit at once)",
        cause_name(cause)
    );
    let (finished, publisher) = service.finish(cause);
    let wall_seconds = started.elapsed().as_secs_f64();
    let publish = finish_broker(publisher, settings, &stop_signals);
    let rows: Vec<SummaryRow<'_>> = finished
        .iter()
        .map(|f| SummaryRow {
            stream: f.id.clone(),
            device: f.device.clone(),
            outcome: &f.outcome,
        })
        .collect();
    let failed = report(&rows, &backends, wall_seconds, out, publish.as_ref());
    Ok(if failed {
        ExitCode::from(1)
    } else {
        signals::exit_code(cause)
    })
}
