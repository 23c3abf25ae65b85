//! `morphoscope run` (headless), `view`, and the default job of a bare `morphoscope`.
//!
//! A headless run checks its output folder first, installs the stop signals, starts the
//! pipeline, takes over the folder (an earlier run's files are removed, and it says so), then
//! writes every frame as it arrives. However it ends — end of stream, `--max-frames`, Ctrl+C or
//! SIGTERM, a source error, a write error — it finishes every file it can, prints the summary
//! (frames in = out + dropped + in flight) and exits: 0, 1 on an error (one line naming the
//! cause), 128 + the signal after a stop.
//!
//! With `--publish URL` (or `[publish].url`) every frame's `frames.jsonl` record and a status a
//! second go to the broker as stream 0. The broker never holds the run up: an unreachable one
//! costs dropped messages (counted in the summary, exit 0); a refused login is logged as an
//! error when it happens, the run goes on writing its files, and it exits 1 at the end when the
//! broker never accepted the login (nothing was delivered).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use morphoscope::config::Settings;
use morphoscope::compose::PictureFormat;
use morphoscope::output::{Finished, RunEnd, RunSink, SinkOptions};
use morphoscope::pipeline::{CounterSnapshot, Delivery, FrameSource, PictureWant, Pipeline, PipelineEvent};
use morphoscope::publish::{PublishReport, Publisher, StatusClock};
use morphoscope::source::{SourceSpec, StreamInfo};

use super::CommonArgs;
use super::progress::Progress;
use super::signals::{self, StopSignals};

/// Arguments of `run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// File, URI, camera[:N], test[:PATTERN], or a pipeline ending in `appsink name=sink`.
    pub source: String,
    /// Output folder. Files an earlier run wrote there are replaced; other files are kept.
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Stop after analysing this many frames (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_frames: Option<u64>,
    /// Do not write overlay.mkv.
    #[arg(long)]
    pub no_video: bool,
    /// No progress (bar in a terminal, status lines otherwise).
    #[arg(long)]
    pub quiet: bool,
    /// Publish each frame's record and a status a second to an MQTT broker:
    /// mqtt://HOST[:PORT][/PREFIX] or mqtts://… (overrides publish.url; the login comes from
    /// the config file or MORPHOSCOPE_MQTT_USERNAME/PASSWORD).
    #[arg(long, value_name = "URL")]
    pub publish: Option<String>,
}

/// Arguments of `view`.
#[derive(clap::Args, Debug)]
pub struct ViewArgs {
    /// Source (default: the sample clip, else `test`).
    pub source: Option<String>,
}

/// The sample clip shipped by `scripts/setup.sh`, if present.
pub fn sample_clip() -> Option<PathBuf> {
    let candidates = [
        PathBuf::from("assets/samples/vtest.avi"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/samples/vtest.avi"),
    ];
    candidates.into_iter().find(|p| p.is_file())
}

/// SOURCE when none is given: `source.default`, else the sample clip, else `test`.
pub fn default_source(settings: &Settings) -> String {
    if !settings.source.default.is_empty() {
        return settings.source.default.clone();
    }
    match sample_clip() {
        Some(p) => p.display().to_string(),
        None => {
            log::warn!("sample clip not found (run scripts/setup.sh); using the test pattern");
            "test:ball".to_owned()
        }
    }
}

/// `morphoscope run`.
pub fn run(common: &CommonArgs, a: &RunArgs) -> anyhow::Result<ExitCode> {
    let mut settings = common.settings()?;
    if let Some(url) = &a.publish {
        settings.publish.url.clone_from(url);
    }
    headless(
        common,
        &settings,
        &a.source,
        &a.out,
        a.max_frames,
        None,
        !a.no_video && settings.output.video,
        a.quiet,
    )
}

/// `morphoscope view`: the viewer on SOURCE; without a display (or when no window can be
/// created), a headless run into `out/` with a warning.
pub fn view(common: &CommonArgs, a: &ViewArgs) -> anyhow::Result<ExitCode> {
    let settings = common.settings()?;
    let source = a
        .source
        .clone()
        .unwrap_or_else(|| default_source(&settings));
    if let Some(code) = try_viewer(common, &settings, &source)? {
        return Ok(code);
    }
    headless(
        common,
        &settings,
        &source,
        Path::new("out"),
        None,
        Some(DEFAULT_JOB_CPU_FRAMES),
        settings.output.video,
        false,
    )
}

/// A bare `morphoscope`: the viewer when a display exists and a window opens, else a headless
/// run into `out/`.
pub fn default_job(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let settings = common.settings()?;
    let source = default_source(&settings);
    if let Some(code) = try_viewer(common, &settings, &source)? {
        return Ok(code);
    }
    log::info!("headless run of {source} into out/ (see `morphoscope --help`)");
    headless(
        common,
        &settings,
        &source,
        Path::new("out"),
        None,
        Some(DEFAULT_JOB_CPU_FRAMES),
        settings.output.video,
        false,
    )
}

/// Frames the default job (and a `view` without a display) analyses when it falls back to the CPU backend (the CPU references
/// run at 1–4 fps on the sample clip; `morphoscope run` has no cap).
const DEFAULT_JOB_CPU_FRAMES: u64 = 150;

/// Runs the viewer when a display exists; `None` when the caller should run headless instead.
#[cfg(feature = "viewer")]
fn try_viewer(
    common: &CommonArgs,
    settings: &Settings,
    source: &str,
) -> anyhow::Result<Option<ExitCode>> {
    use morphoscope::ui::{UiError, ViewerOptions, display_available, run_viewer};
    if !display_available() {
        log::warn!(
            "no display (DISPLAY/WAYLAND_DISPLAY unset): running headless into out/ instead of the viewer"
        );
        return Ok(None);
    }
    let explicit = common.config.is_some() || !common.sets.is_empty();
    let opts = ViewerOptions::new(
        settings.clone(),
        explicit,
        source.to_owned(),
        common.backend(settings)?,
    );
    match run_viewer(opts) {
        Ok(()) => Ok(Some(ExitCode::SUCCESS)),
        Err(UiError::NoWindow(e)) => {
            log::warn!("cannot open the viewer window ({e}); running headless into out/ instead");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Built without the `viewer` feature: always headless.
#[cfg(not(feature = "viewer"))]
fn try_viewer(
    _common: &CommonArgs,
    _settings: &Settings,
    _source: &str,
) -> anyhow::Result<Option<ExitCode>> {
    log::warn!("built without the viewer (feature `viewer`): running headless into out/");
    Ok(None)
}

/// How a run's frame loop ended.
#[derive(Debug)]
enum Ending {
    /// The source ended (or the frame limit was reached).
    Stream,
    /// The source or an analysis failed.
    SourceError(String),
    /// A file could not be written.
    WriteError(morphoscope::output::OutputError),
}

#[allow(clippy::too_many_arguments)]
fn headless(
    common: &CommonArgs,
    settings: &Settings,
    source: &str,
    out: &Path,
    max_frames: Option<u64>,
    cpu_cap: Option<u64>,
    video: bool,
    quiet: bool,
) -> anyhow::Result<ExitCode> {
    let spec = SourceSpec::parse(source)?;
    RunSink::prepare(out)?;
    let publisher = if settings.publish.url.is_empty() {
        None
    } else {
        Some(Publisher::start(&settings.publish)?)
    };
    let stop_signals = StopSignals::install()?;
    let backend = common.backend(settings)?;
    let max_frames = match (max_frames, cpu_cap, &backend) {
        (None, Some(cap), morphoscope::backend::Backend::Cpu) => {
            log::warn!(
                "no GPU: the CPU backend analyses the first {cap} frames (`morphoscope run SOURCE` for all)"
            );
            Some(cap)
        }
        _ => max_frames,
    };
    let want = if video { PictureWant::Every(PictureFormat::I420) } else { PictureWant::None };
    let pipeline = Pipeline::start_limited(FrameSource::Spec(spec.clone()), settings, &backend, Delivery::All, want, max_frames)
        .map_err(|e| {
            let named = e.to_string().contains(&spec.to_string());
            let e = anyhow::Error::new(e);
            if named {
                e
            } else {
                e.context(format!("cannot open {spec}"))
            }
        })?;
    let opts = SinkOptions {
        video,
        video_kbps: settings.output.video_kbps,
        encoder: settings.output.encoder,
        source: spec.to_string(),
        backend: pipeline.backend.clone(),
    };
    let (mut sink, removed) = RunSink::create(out, opts)?;
    let mut status_clock = publisher.as_ref().map(|p| {
        let stream = p.stream(0);
        let frames = stream.clone();
        sink.on_frame_line(move |line| frames.frame(line.to_owned()));
        StatusClock::new(stream)
    });
    if !removed.is_empty() {
        log::warn!(
            "{}: replacing {} from an earlier run",
            out.display(),
            removed.join(", ")
        );
    }
    let total = match (max_frames, pipeline.estimated_frames) {
        (Some(m), Some(n)) => Some(m.min(n)),
        (m, n) => m.or(n),
    };
    let mut progress = Progress::new(total, quiet);
    let started = Instant::now();
    let counters = pipeline.counters.clone();
    let mut stopped_by = None;
    let mut written = 0u64;
    let ending = loop {
        if stopped_by.is_none()
            && let Some(sig) = stop_signals.received()
        {
            stopped_by = Some(sig);
            pipeline.end_input();
            log::warn!(
                "{}: stopping — finishing the frames already taken and every output (again to quit at once)",
                signals::name(sig)
            );
        }
        let now = CounterSnapshot {
            frames_out: written,
            ..counters.snapshot()
        };
        let event = match pipeline.events.recv_timeout(Duration::from_millis(100)) {
            Ok(ev) => ev,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                progress.update(written, &now);
                if let Some(clock) = &mut status_clock {
                    clock.tick(&now, 0, false);
                }
                if let Err(e) = sink.checkpoint(now) {
                    break Ending::WriteError(e);
                }
                continue;
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break Ending::Stream,
        };
        match event {
            PipelineEvent::Frame(f) => {
                if written == 0 {
                    sink.set_stream(pipeline.stream_info());
                }
                let result = sink.write(&f);
                // A frame counts as out once its line is in frames.jsonl (even when a later file
                // of the same frame failed).
                written = sink.frames_written();
                if let Err(e) = result {
                    break Ending::WriteError(e);
                }
                let now = CounterSnapshot {
                    frames_out: written,
                    ..now
                };
                progress.update(written, &now);
                if let Some(clock) = &mut status_clock {
                    clock.tick(&now, 0, false);
                }
                if let Err(e) = sink.checkpoint(now) {
                    break Ending::WriteError(e);
                }
            }
            PipelineEvent::Error(e) => break Ending::SourceError(e),
            PipelineEvent::End => break Ending::Stream,
        }
    };
    progress.finish(written);
    let stream = pipeline.stream_info();
    let estimate = pipeline.estimated_frames;
    let backend_name = pipeline.backend.clone();
    if matches!(ending, Ending::WriteError(_)) {
        pipeline.stop();
    } else {
        pipeline.join();
    }
    let wall = started.elapsed().as_secs_f64();
    let counters = CounterSnapshot {
        frames_out: written,
        ..counters.snapshot()
    };
    let limit_reached = max_frames.is_some_and(|m| written >= m);
    let ended = match (&ending, stopped_by) {
        (Ending::WriteError(e), _) => format!("error: {e}"),
        (Ending::SourceError(e), _) => format!("error: {e}"),
        (Ending::Stream, Some(sig)) => signals::name(sig).to_owned(),
        (Ending::Stream, None) if limit_reached => "--max-frames".to_owned(),
        (Ending::Stream, None) => "end of stream".to_owned(),
    };
    let publish_report = publisher.map(|p| {
        if let Some(clock) = &mut status_clock {
            let errors = u64::from(!matches!(ending, Ending::Stream));
            clock.tick(&counters, errors, true);
        }
        let flush = Duration::from_secs(u64::from(settings.publish.flush_seconds));
        let report = p.finish(flush);
        sink.set_publish_report(report.clone());
        report
    });
    let finished = sink.finish(&RunEnd {
        counters,
        wall_seconds: wall,
        ended,
    });
    print_summary(&spec, &backend_name, &counters, wall, out, &finished);
    if let Some(report) = &publish_report {
        print_publish_summary(report);
    }
    let error = match ending {
        Ending::WriteError(e) => Some(format!(
            "{e} (after {written} frames; the files hold the frames before it)"
        )),
        Ending::SourceError(e) if written == 0 => Some(e),
        Ending::SourceError(e) => Some(format!(
            "{e} (after {written} frames; outputs hold the frames analysed before it)"
        )),
        Ending::Stream => finished.error.as_ref().map(|e| e.to_string()).or_else(|| {
            publish_report.as_ref().and_then(|r| match &r.refused {
                Some(reason) if !r.connected_ever => Some(format!(
                    "the broker {} refused the login: {reason}; nothing was published (the files are written)",
                    r.broker
                )),
                _ => None,
            })
        }),
    };
    if let Some(e) = error {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(1));
    }
    if let Some(sig) = stopped_by {
        return Ok(signals::exit_code(sig));
    }
    end_of_stream_verdict(
        &spec,
        &stream,
        written,
        estimate,
        limit_reached,
        max_frames.is_some(),
    )
}

/// Exit code of a run whose stream ended by itself: a live source that ends, a file that ends
/// far short of its length, or a source that gave nothing are errors.
fn end_of_stream_verdict(
    spec: &SourceSpec,
    stream: &StreamInfo,
    written: u64,
    estimate: Option<u64>,
    limit_reached: bool,
    limited: bool,
) -> anyhow::Result<ExitCode> {
    if stream.live && !limit_reached {
        eprintln!(
            "error: live source {spec} ended after {written} frames (camera unplugged, server gone or stream closed?); outputs hold the frames analysed"
        );
        return Ok(ExitCode::from(1));
    }
    let file_like =
        matches!(spec, SourceSpec::File(_) | SourceSpec::Uri(_)) && !stream.live && !limited;
    if let Some(n) = estimate.filter(|&n| file_like && n > 0 && written * 100 < n * 95) {
        eprintln!(
            "error: stream ended early: {written} of ~{n} frames (truncated or damaged file?); outputs hold the frames decoded"
        );
        return Ok(ExitCode::from(1));
    }
    if written == 0 {
        eprintln!("error: the source produced no frames");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The publisher's line of the summary: `publish URL: sent N | acknowledged N | dropped N`, and
/// why nothing arrived when the broker was never reached or refused the login.
fn print_publish_summary(r: &PublishReport) {
    let why = match (&r.refused, r.connected_ever) {
        (Some(reason), false) => format!(" | login refused: {reason}"),
        (None, false) => format!(
            " | broker never reached ({} failed attempt{})",
            r.errors,
            if r.errors == 1 { "" } else { "s" }
        ),
        (Some(reason), true) => format!(" | login refused at times: {reason}"),
        (None, true) => String::new(),
    };
    println!(
        "publish {}: sent {} | acknowledged {} | dropped {}{why}",
        r.broker, r.sent, r.acked, r.dropped
    );
}

fn print_summary(
    spec: &SourceSpec,
    backend: &str,
    c: &CounterSnapshot,
    wall: f64,
    out: &Path,
    finished: &Finished,
) {
    println!("morphoscope run: {spec}");
    println!("backend: {backend}");
    let in_flight = match c.in_flight() {
        0 => String::new(),
        n => format!(" | in flight {n}"),
    };
    println!(
        "frames: in {} | out {} | dropped {}{in_flight} | {:.1} s wall | {:.1} fps",
        c.frames_in,
        c.frames_out,
        c.dropped,
        wall,
        if wall > 0.0 {
            c.frames_out as f64 / wall
        } else {
            0.0
        }
    );
    print!("{}", finished.timings.table());
    println!(
        "outputs in {}: {}",
        out.display(),
        finished.files.join(", ")
    );
}
