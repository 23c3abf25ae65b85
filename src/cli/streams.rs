//! Several sources in one headless run: `morphoscope run A B C --out DIR`.
//!
//! Stream i (in the order given, from 0) is a whole single-stream run
//! ([`morphoscope::lifecycle`]): its own pipeline (source thread, worker, collector, ring slots,
//! tracker, counters) and its own folder `DIR/<i>/` with the same files as a run of that source
//! alone. Streams are spread round-robin over the devices of `pipeline.devices` (`--device
//! 0,1`); the streams on one device share its one `GpuContext` (loaded kernels), each with its
//! own CUDA streams, so their kernels overlap on the device.
//!
//! Each stream runs on its own thread. One that cannot start, fails or ends leaves the others
//! running; its error is reported with its index and source. Ctrl+C or SIGTERM stops every
//! stream gracefully, one still opening its source too (each finishes the frames it took and
//! its files), and ends the wait for the broker at the end of a run with `--publish`. The
//! summary has a row per stream and the totals; the exit status is 1 when any stream failed,
//! else 128 + the signal after a stop, else 0.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use morphoscope::backend::Backend;
use morphoscope::config::Settings;
use morphoscope::lifecycle::{
    self, StopRequest, StreamJob, StreamObserver, StreamOutcome, StreamOutput, StreamPublishing,
    StreamStatus, fps, login_refused,
};
use morphoscope::output::RunSink;
use morphoscope::publish::{PublishReport, Publisher};
use morphoscope::source::SourceSpec;
use morphoscope::stats::CounterSnapshot;

use super::CommonArgs;
use super::signals::{self, StopSignals};
use super::stream;

/// The output folder of stream `index` under `out`.
#[must_use]
pub fn stream_folder(out: &Path, index: usize) -> PathBuf {
    out.join(index.to_string())
}

/// Runs every source side by side into `out/<i>/`, prints the summary and returns the exit code.
/// `cpu_cap` limits the frames of each stream when the backend is the CPU (the fallback of a
/// viewer without a display).
pub fn run_streams(
    common: &CommonArgs,
    settings: &Settings,
    sources: &[String],
    out: &Path,
    max_frames: Option<u64>,
    cpu_cap: Option<u64>,
    video: bool,
) -> anyhow::Result<ExitCode> {
    let Begun {
        publisher,
        stop_signals,
        backends,
    } = begin(common, settings, out)?;
    let max_frames = match backends.first() {
        Some(b) => super::run::cpu_capped(max_frames, cpu_cap, b),
        None => max_frames,
    };
    // One stop request per stream, asked by the signals (a stream's own end never stops another).
    let stops = sources
        .iter()
        .map(|_| {
            let stop = StopRequest::new();
            stop_signals.watch(&stop).map(|()| stop)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let started = Instant::now();
    let outcomes: Vec<StreamOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = sources
            .iter()
            .enumerate()
            .map(|(i, source)| {
                let backend = &backends[i % backends.len()];
                let stop = &stops[i];
                let folder = stream_folder(out, i);
                let publish = publisher.as_ref().map(|p| StreamPublishing {
                    stream: p.stream(i, &i.to_string()),
                    finish: None,
                });
                let spawned = std::thread::Builder::new()
                    .name(format!("morphoscope-stream-{i}"))
                    .spawn_scoped(scope, move || {
                        one_stream(
                            i, source, folder, settings, backend, max_frames, video, stop, publish,
                        )
                    });
                (source, spawned)
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(i, (source, spawned))| {
                let failed = |why: String| {
                    StreamOutcome::not_started(source.clone(), stream_folder(out, i), why)
                };
                match spawned {
                    Ok(h) => h
                        .join()
                        .unwrap_or_else(|_| failed("the stream's thread panicked".to_owned())),
                    Err(e) => failed(format!("cannot start the stream's thread: {e}")),
                }
            })
            .collect()
    });
    let wall_seconds = started.elapsed().as_secs_f64();
    let publish = finish_broker(publisher, settings, &stop_signals);
    let rows: Vec<SummaryRow<'_>> = outcomes
        .iter()
        .enumerate()
        .map(|(i, outcome)| SummaryRow {
            stream: i.to_string(),
            device: backends[i % backends.len()].device_label(),
            outcome,
        })
        .collect();
    let failed = report(&rows, &backends, wall_seconds, out, publish.as_ref());
    if failed {
        return Ok(ExitCode::from(1));
    }
    Ok(outcomes
        .iter()
        .find_map(|o| o.stopped_by)
        .or_else(|| stop_signals.received())
        .map_or(ExitCode::SUCCESS, signals::exit_code))
}

/// What a run of several streams (or a service) sets up before its first stream: the output
/// folder checked, the broker connection, the stop signals and one backend per device.
pub struct Begun {
    /// The run's broker connection (`run --publish`).
    pub publisher: Option<Publisher>,
    /// SIGINT and SIGTERM.
    pub stop_signals: StopSignals,
    /// One backend per device of `pipeline.devices`.
    pub backends: Vec<Backend>,
}

/// Checks `out`, starts the broker connection, installs the stop signals, picks the backends.
pub fn begin(common: &CommonArgs, settings: &Settings, out: &Path) -> anyhow::Result<Begun> {
    RunSink::prepare(out)?;
    let publisher = match settings.publish.url.as_str() {
        "" => None,
        _ => Some(Publisher::start(&settings.publish)?),
    };
    let stop_signals = StopSignals::install()?;
    let backends = common.backends(settings)?;
    Ok(Begun {
        publisher,
        stop_signals,
        backends,
    })
}

/// Every stream has sent its last status: what is queued gets `publish.flush_seconds` to
/// arrive, unless a stop signal comes while the broker is waited for.
pub fn finish_broker(
    publisher: Option<Publisher>,
    settings: &Settings,
    stop_signals: &StopSignals,
) -> Option<PublishReport> {
    publisher.map(|p| {
        let asked_before = stop_signals.received().is_some();
        p.finish(
            Duration::from_secs(u64::from(settings.publish.flush_seconds)),
            &mut |_| {
                if !asked_before && stop_signals.received().is_some() {
                    log::warn!("stopped while waiting for the broker: what it has not acknowledged counts as dropped");
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        )
    })
}

/// Prints the summary, the publisher's line and an `error:` line per failed stream (and for a
/// refused broker login); true when anything failed.
pub fn report(
    rows: &[SummaryRow<'_>],
    backends: &[Backend],
    wall_seconds: f64,
    out: &Path,
    publish: Option<&PublishReport>,
) -> bool {
    print_summary(rows, backends, wall_seconds, out);
    if let Some(report) = publish {
        stream::print_publish_summary(report);
    }
    let mut failed = false;
    for row in rows {
        let o = row.outcome;
        if let Some(e) = &o.error {
            let line = format!("error: stream {} ({}): {e}", row.stream, o.source);
            eprintln!("{}", morphoscope::redact::text(&line));
            failed = true;
        }
    }
    if let Some(e) = publish.and_then(login_refused) {
        eprintln!("error: {e}");
        failed = true;
    }
    failed
}

/// One stream from its SOURCE string to its outcome (errors become the outcome's error).
#[allow(clippy::too_many_arguments)]
fn one_stream(
    index: usize,
    source: &str,
    folder: PathBuf,
    settings: &Settings,
    backend: &Backend,
    max_frames: Option<u64>,
    video: bool,
    stop: &StopRequest,
    publish: Option<StreamPublishing>,
) -> StreamOutcome {
    morphoscope::stream_label::set(format!("stream {index}"));
    if let Err(e) = RunSink::prepare(&folder) {
        return StreamOutcome::not_started(source.to_owned(), folder, e.to_string());
    }
    let spec = match SourceSpec::parse(source) {
        Ok(s) => s,
        Err(e) => {
            let o = StreamOutcome::not_started(source.to_owned(), folder, e.to_string());
            if let Some(e) = lifecycle::record_not_started(index, &o.source, &o.out, &o.ended) {
                log::warn!("{e}");
            }
            return o;
        }
    };
    let job = StreamJob {
        index,
        spec,
        output: StreamOutput::Folder {
            out: folder,
            video,
            publish,
        },
        settings,
        backend,
        max_frames,
        live: lifecycle::LiveSettings::new(),
    };
    // The place a publisher of results hooks in: the stream's observer sees each frame (its
    // record: `output::frame_record`) and a status every second.
    lifecycle::run(job, stop, &mut StatusLog::new(index))
}

/// Logs a stream's progress now and then (several streams share the terminal: no bars).
struct StatusLog {
    index: usize,
    last: Instant,
}

/// How often each stream logs its progress.
const LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

impl StatusLog {
    fn new(index: usize) -> Self {
        Self {
            index,
            last: Instant::now(),
        }
    }
}

impl StreamObserver for StatusLog {
    fn status(&mut self, s: &StreamStatus) {
        if self.last.elapsed() >= LOG_EVERY {
            self.last = Instant::now();
            let c = &s.counters;
            log::info!(
                "stream {}: in {} | out {} | dropped {} | {:.1} fps",
                self.index,
                c.frames_in,
                c.frames_out,
                c.dropped,
                s.fps
            );
        }
    }
}

/// A stream's row in the summary: its id, its device and how it ended.
pub struct SummaryRow<'a> {
    /// The stream's id (its index on the command line).
    pub stream: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// How it ended.
    pub outcome: &'a StreamOutcome,
}

/// A row per stream, then the totals.
fn print_summary(rows: &[SummaryRow<'_>], backends: &[Backend], wall_seconds: f64, out: &Path) {
    println!("morphoscope run: {} streams", rows.len());
    for b in backends {
        println!("backend {}: {}", b.device_label(), b.describe());
    }
    println!(
        "{:>6} | {:<8} | {:>7} | {:>7} | {:>7} | {:>7} | {:<16} | source",
        "stream", "device", "in", "out", "dropped", "fps", "ended"
    );
    let mut total = CounterSnapshot::default();
    for row in rows {
        let o = row.outcome;
        let c = &o.counters;
        total.frames_in += c.frames_in;
        total.frames_out += c.frames_out;
        total.dropped += c.dropped;
        let ended = if o.error.is_some() { "error" } else { &o.ended };
        println!(
            "{:>6} | {:<8} | {:>7} | {:>7} | {:>7} | {:>7.1} | {:<16} | {}",
            row.stream,
            row.device,
            c.frames_in,
            c.frames_out,
            c.dropped,
            fps(c, o.wall_seconds),
            ended,
            o.source
        );
    }
    let in_flight = match total.in_flight() {
        0 => String::new(),
        n => format!(" | in flight {n}"),
    };
    println!(
        "total: in {} | out {} | dropped {}{in_flight} | {:.1} s wall | {:.1} fps",
        total.frames_in,
        total.frames_out,
        total.dropped,
        wall_seconds,
        fps(&total, wall_seconds)
    );
    let files = rows
        .iter()
        .find_map(|r| r.outcome.finished.as_ref())
        .map(|f| f.files.join(", "))
        .unwrap_or_default();
    println!("outputs in {}: {files}", out.join("<stream>").display());
}
