//! One headless stream: a source, its own pipeline (ring slots, tracker, counters) and its
//! output folder. `morphoscope run SOURCE` runs one on the main thread; `run A B C` runs one per
//! source, each on its own thread ([`super::streams`]).
//!
//! [`open`] starts the pipeline and takes over the folder; [`drive`] writes every frame as it
//! arrives until the stream ends, fails, or a stop is asked for (`stop` returns the signal),
//! then finishes every file it can and returns a [`StreamOutcome`]: the counters, why it ended
//! and the one-line error, if any. Each frame's record and a status every second go to a
//! [`StreamObserver`] as they are produced (the place a publisher of results hooks in).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use morphoscope::analysis::AnalysedFrame;
use morphoscope::backend::Backend;
use morphoscope::compose::PictureFormat;
use morphoscope::config::Settings;
use morphoscope::output::{Finished, RunEnd, RunSink, SinkOptions};
use morphoscope::pipeline::{
    CounterSnapshot, Delivery, FrameSource, PictureWant, Pipeline, PipelineEvent,
};
use morphoscope::publish::{PublishReport, Publisher, StatusClock, StreamPublisher};
use morphoscope::source::{SourceSpec, StreamInfo};

use super::progress::Progress;
use super::signals;

/// What one stream is asked to do.
pub struct StreamJob<'a> {
    /// The source.
    pub spec: SourceSpec,
    /// Its output folder (checked with `RunSink::prepare` by the caller).
    pub out: PathBuf,
    /// Settings (shared by every stream of a run).
    pub settings: &'a Settings,
    /// The backend of the stream's device (shared by every stream on that device).
    pub backend: &'a Backend,
    /// Frames to analyse at most.
    pub max_frames: Option<u64>,
    /// Write the overlay video.
    pub video: bool,
    /// No progress bar or status lines.
    pub quiet: bool,
    /// Where the stream's frame records and status go besides its files (`run --publish`).
    pub publish: Option<StreamPublishing>,
}

/// A stream's part of `run --publish`: its handle on the run's broker connection and, for a
/// single-stream run, the connection itself (finished by the stream, so that `timings.json`
/// holds the publisher's counts; with several streams the run finishes it after the last one).
pub struct StreamPublishing {
    /// This stream's topics.
    pub stream: StreamPublisher,
    /// The connection to finish when the stream ends, with how long to wait for the broker.
    pub finish: Option<(Publisher, Duration)>,
}

/// A stream's state once a second, for a [`StreamObserver`].
#[derive(Clone, Debug)]
pub struct StreamStatus {
    /// Counters now (`frames_out`: frames written).
    pub counters: CounterSnapshot,
    /// Frames written per second over the last status period.
    pub fps: f64,
}

/// Sees what a stream produces as it is produced: each frame (its `frames.jsonl` object is
/// `morphoscope::output::frame_record(frame)`) and a status every second. Called on the
/// stream's own thread; it must not block (queue and return).
pub trait StreamObserver: Send {
    /// A frame was written to the stream's folder.
    fn frame(&mut self, frame: &AnalysedFrame);
    /// The stream's counters, every second while it runs.
    fn status(&mut self, status: &StreamStatus);
}

/// An observer that ignores everything.
pub struct NoObserver;

impl StreamObserver for NoObserver {
    fn frame(&mut self, _frame: &AnalysedFrame) {}
    fn status(&mut self, _status: &StreamStatus) {}
}

/// A stream whose pipeline runs and whose folder is taken over.
pub struct OpenStream {
    spec: SourceSpec,
    out: PathBuf,
    pipeline: Pipeline,
    sink: RunSink,
    max_frames: Option<u64>,
    quiet: bool,
    status_clock: Option<StatusClock>,
    publisher: Option<(Publisher, Duration)>,
}

/// How a stream ended, for the summary and the exit status.
pub struct StreamOutcome {
    /// The source, as it is shown (the parsed spec, or the string given when it did not parse).
    pub source: String,
    /// The output folder.
    pub out: PathBuf,
    /// The backend description (empty when the stream never started).
    pub backend: String,
    /// Final counters (`frames_out`: frames written).
    pub counters: CounterSnapshot,
    /// Seconds from the first frame asked to the end.
    pub wall_seconds: f64,
    /// Why it ended: "end of stream", "--max-frames", "SIGINT", "error: …".
    pub ended: String,
    /// The files written, with the timing table (`None`: the stream never started).
    pub finished: Option<Finished>,
    /// The signal that stopped it, if one did.
    pub stopped_by: Option<i32>,
    /// The stream's error on one line, if it failed.
    pub error: Option<String>,
    /// The publisher's counts, when this stream finished the run's broker connection.
    pub publish: Option<PublishReport>,
}

impl StreamOutcome {
    /// A stream that could not start.
    #[must_use]
    pub fn not_started(source: String, out: PathBuf, error: String) -> Self {
        let error = morphoscope::redact::text(&error);
        Self {
            source: morphoscope::redact::url(&source),
            out,
            backend: String::new(),
            counters: CounterSnapshot::default(),
            wall_seconds: 0.0,
            ended: format!("error: {error}"),
            finished: None,
            stopped_by: None,
            error: Some(error),
            publish: None,
        }
    }
}

/// Starts the stream's pipeline and takes over its folder (an earlier run's files are removed,
/// with a warning). A source that cannot be opened is an error naming it.
pub fn open(job: StreamJob<'_>) -> anyhow::Result<OpenStream> {
    let spec = job.spec.clone();
    let want = if job.video {
        PictureWant::Every(PictureFormat::I420)
    } else {
        PictureWant::None
    };
    let pipeline = Pipeline::start_limited(
        FrameSource::Spec(spec.clone()),
        job.settings,
        job.backend,
        Delivery::All,
        want,
        job.max_frames,
    )
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
        video: job.video,
        video_kbps: job.settings.output.video_kbps,
        encoder: job.settings.output.encoder,
        source: spec.to_string(),
        backend: pipeline.backend.clone(),
    };
    let (mut sink, removed) = match RunSink::create(&job.out, opts) {
        Ok(s) => s,
        Err(e) => {
            pipeline.stop();
            return Err(e.into());
        }
    };
    if !removed.is_empty() {
        log::warn!(
            "{}: replacing {} from an earlier run",
            job.out.display(),
            removed.join(", ")
        );
    }
    let (status_clock, publisher) = match job.publish {
        Some(p) => {
            // Each frame's frames.jsonl line goes to the broker as it is written.
            let frames = p.stream.clone();
            sink.on_frame_line(move |line| frames.frame(line.to_owned()));
            (Some(StatusClock::new(p.stream)), p.finish)
        }
        None => (None, None),
    };
    Ok(OpenStream {
        spec,
        out: job.out.clone(),
        pipeline,
        sink,
        max_frames: job.max_frames,
        quiet: job.quiet,
        status_clock,
        publisher,
    })
}

/// How the frame loop ended.
#[derive(Debug)]
enum Ending {
    /// The source ended (or the frame limit was reached).
    Stream,
    /// The source or an analysis failed.
    SourceError(String),
    /// A file could not be written.
    WriteError(morphoscope::output::OutputError),
}

/// How often the observer gets a status.
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// Writes every frame until the stream ends, fails or `stop` returns a signal (then the frames
/// already taken are finished), finishes the files and says how it went.
pub fn drive(
    s: OpenStream,
    stop: &dyn Fn() -> Option<i32>,
    observer: &mut dyn StreamObserver,
) -> StreamOutcome {
    let OpenStream {
        spec,
        out,
        pipeline,
        mut sink,
        max_frames,
        quiet,
        mut status_clock,
        publisher,
    } = s;
    let total = match (max_frames, pipeline.estimated_frames) {
        (Some(m), Some(n)) => Some(m.min(n)),
        (m, n) => m.or(n),
    };
    let mut progress = Progress::new(total, quiet);
    let started = Instant::now();
    let counters = pipeline.counters.clone();
    let mut stopped_by = None;
    let mut written = 0u64;
    let mut status_at = (Instant::now(), 0u64);
    let ending = loop {
        if stopped_by.is_none()
            && let Some(sig) = stop()
        {
            stopped_by = Some(sig);
            pipeline.end_input();
            log::warn!(
                "{}: stopping {spec} — finishing the frames already taken and every output (again to quit at once)",
                signals::name(sig)
            );
        }
        let now = CounterSnapshot {
            frames_out: written,
            ..counters.snapshot()
        };
        if let Some(clock) = &mut status_clock {
            clock.tick(&now, 0, false);
        }
        if status_at.0.elapsed() >= STATUS_EVERY {
            let secs = status_at.0.elapsed().as_secs_f64();
            observer.status(&StreamStatus {
                counters: now,
                fps: (written - status_at.1) as f64 / secs,
            });
            status_at = (Instant::now(), written);
        }
        let event = match pipeline.events.recv_timeout(Duration::from_millis(100)) {
            Ok(ev) => ev,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                progress.update(written, &now);
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
                observer.frame(&f);
                let now = CounterSnapshot {
                    frames_out: written,
                    ..now
                };
                progress.update(written, &now);
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
    let backend = pipeline.backend.clone();
    if matches!(ending, Ending::WriteError(_)) {
        pipeline.stop();
    } else {
        pipeline.join();
    }
    let wall_seconds = started.elapsed().as_secs_f64();
    let counters = CounterSnapshot {
        frames_out: written,
        ..counters.snapshot()
    };
    let limit_reached = max_frames.is_some_and(|m| written >= m);
    // A stream that ended by itself too soon (a truncated file, a live source gone) is an
    // error, in timings.json as in the run's summary.
    let early_end = match (&ending, stopped_by) {
        (Ending::Stream, None) => end_of_stream_error(
            &spec,
            &stream,
            written,
            estimate,
            limit_reached,
            max_frames.is_some(),
        ),
        _ => None,
    };
    let ended = match (&ending, stopped_by, &early_end) {
        (Ending::WriteError(e), _, _) => format!("error: {e}"),
        (Ending::SourceError(e), _, _) => format!("error: {e}"),
        (Ending::Stream, Some(sig), _) => signals::name(sig).to_owned(),
        (Ending::Stream, None, Some(e)) => format!("error: {e}"),
        (Ending::Stream, None, None) if limit_reached => "--max-frames".to_owned(),
        (Ending::Stream, None, None) => "end of stream".to_owned(),
    };
    if let Some(clock) = &mut status_clock {
        clock.tick(
            &counters,
            u64::from(!matches!(ending, Ending::Stream)),
            true,
        );
    }
    let publish = publisher.map(|(p, flush)| {
        let report = p.finish(flush);
        sink.set_publish_report(report.clone());
        report
    });
    let finished = sink.finish(&RunEnd {
        counters,
        wall_seconds,
        ended: ended.clone(),
    });
    observer.status(&StreamStatus {
        counters,
        fps: if wall_seconds > 0.0 {
            written as f64 / wall_seconds
        } else {
            0.0
        },
    });
    let error = match ending {
        Ending::WriteError(e) => Some(format!(
            "{e} (after {written} frames; the files hold the frames before it)"
        )),
        Ending::SourceError(e) if written == 0 => Some(e),
        Ending::SourceError(e) => Some(format!(
            "{e} (after {written} frames; outputs hold the frames analysed before it)"
        )),
        Ending::Stream => finished
            .error
            .as_ref()
            .map(|e| e.to_string())
            .or_else(|| publish.as_ref().and_then(login_refused)),
    };
    let error = error.or(early_end);
    StreamOutcome {
        source: spec.to_string(),
        out,
        backend,
        counters,
        wall_seconds,
        ended,
        finished: Some(finished),
        stopped_by,
        error,
        publish,
    }
}

/// The error of a run whose broker never accepted its login (the files are written all the same).
#[must_use]
pub fn login_refused(r: &PublishReport) -> Option<String> {
    match &r.refused {
        Some(reason) if !r.connected_ever => Some(format!(
            "the broker {} refused the login: {reason}; nothing was published (the files are written)",
            r.broker
        )),
        _ => None,
    }
}

/// The publisher's line of the summary: `publish URL: sent N | acknowledged N | dropped N`, and
/// why nothing arrived when the broker was never reached or refused the login.
pub fn print_publish_summary(r: &PublishReport) {
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

/// The error of a stream that ended by itself, if its end is one: a live source that ends, a
/// file that ends far short of its length, or a source that gave nothing.
fn end_of_stream_error(
    spec: &SourceSpec,
    stream: &StreamInfo,
    written: u64,
    estimate: Option<u64>,
    limit_reached: bool,
    limited: bool,
) -> Option<String> {
    if stream.live && !limit_reached {
        return Some(format!(
            "live source {spec} ended after {written} frames (camera unplugged, server gone or stream closed?); outputs hold the frames analysed"
        ));
    }
    let file_like =
        matches!(spec, SourceSpec::File(_) | SourceSpec::Uri(_)) && !stream.live && !limited;
    if let Some(n) = estimate.filter(|&n| file_like && n > 0 && written * 100 < n * 95) {
        return Some(format!(
            "stream ended early: {written} of ~{n} frames (truncated or damaged file?); outputs hold the frames decoded"
        ));
    }
    if written == 0 {
        return Some("the source produced no frames".to_owned());
    }
    None
}

/// Frames written per second of wall time.
#[must_use]
pub fn fps(c: &CounterSnapshot, wall_seconds: f64) -> f64 {
    if wall_seconds > 0.0 {
        c.frames_out as f64 / wall_seconds
    } else {
        0.0
    }
}

/// The summary of a single-stream run (unchanged since before several streams existed).
pub fn print_single_summary(o: &StreamOutcome) {
    let c = &o.counters;
    println!("morphoscope run: {}", o.source);
    println!("backend: {}", o.backend);
    let in_flight = match c.in_flight() {
        0 => String::new(),
        n => format!(" | in flight {n}"),
    };
    println!(
        "frames: in {} | out {} | dropped {}{in_flight} | {:.1} s wall | {:.1} fps",
        c.frames_in,
        c.frames_out,
        c.dropped,
        o.wall_seconds,
        fps(c, o.wall_seconds)
    );
    if let Some(finished) = &o.finished {
        print!("{}", finished.timings.table());
        println!(
            "outputs in {}: {}",
            o.out.display(),
            finished.files.join(", ")
        );
    }
    if let Some(report) = &o.publish {
        print_publish_summary(report);
    }
}
