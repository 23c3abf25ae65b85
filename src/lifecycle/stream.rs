//! The state machine of one stream: [`run`] starts it, drives it while frames arrive and takes
//! every end through one finishing path.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError};

use crate::analysis::AnalysedFrame;
use crate::backend::Backend;
use crate::compose::PictureFormat;
use crate::config::Settings;
use crate::output::events::StreamEvent;
use crate::output::{Finished, OutputError, RunEnd, RunSink, SinkOptions};
use crate::pipeline::{
    Command, Delivery, FrameSource, Mailbox, PictureWant, Pipeline, PipelineEvent,
};
use crate::publish::{PublishReport, Publisher, StatusClock, StreamPublisher};
use crate::source::SourceSpec;
use crate::source::reconnect::SourceChange;
use crate::stats::{CounterSnapshot, Counters};

use super::outcome::{SelfEnded, end_of_stream_error};
use super::unstarted::record_not_started;
use super::{
    LiveSettings, State, StopRequest, StreamJob, StreamObserver, StreamOutcome, StreamOutput,
    StreamProgress, StreamStatus, cause_name, login_refused,
};

/// How often the observer gets a status.
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// How long a stream waits for a frame before it shows its progress and checkpoints its files.
const IDLE_TICK: Duration = Duration::from_millis(100);

/// How often `timings.json` is rewritten with the publisher's counts while the stream waits
/// for the broker.
const FLUSH_REWRITE_EVERY: Duration = Duration::from_secs(1);

/// Takes `job` from starting to finished on the caller's thread (see the module
/// [`crate::lifecycle`]); `stop` may be asked from any thread at any time.
///
/// ```no_run
/// use morphoscope::backend::select;
/// use morphoscope::config::{BackendChoice, Settings};
/// use morphoscope::lifecycle::{
///     LiveSettings, StopRequest, StreamJob, StreamObserver, StreamOutput, run,
/// };
/// use morphoscope::source::SourceSpec;
///
/// struct Quiet;
/// impl StreamObserver for Quiet {}
///
/// let settings = Settings::load(None, &["cca.threshold=otsu".into()])?;
/// let (backend, _) = select(BackendChoice::Auto, 0, 0)?;
/// let job = StreamJob {
///     index: 0,
///     spec: SourceSpec::parse("test:ball")?,
///     output: StreamOutput::Folder { out: "out".into(), video: false, publish: None },
///     settings: &settings,
///     backend: &backend,
///     max_frames: Some(100),
///     live: LiveSettings::new(),
/// };
/// let outcome = run(job, &StopRequest::new(), &mut Quiet);
/// println!("{}: {} frames, {}", outcome.source, outcome.counters.frames_out, outcome.ended);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run(
    job: StreamJob<'_>,
    stop: &StopRequest,
    observer: &mut dyn StreamObserver,
) -> StreamOutcome {
    observer.state(State::Starting);
    let StreamJob {
        index,
        spec,
        output,
        settings,
        backend,
        max_frames,
        live,
    } = job;
    let (target, topics, connection) = match output {
        StreamOutput::Folder {
            out,
            video,
            publish,
        } => {
            let (topics, connection) = match publish {
                Some(p) => (Some(p.stream), p.finish),
                None => (None, None),
            };
            (Target::Folder { out, video }, topics, connection)
        }
        StreamOutput::Mailbox(mailbox) => (Target::Mailbox(mailbox), None, None),
        StreamOutput::Channel { frames, layers } => {
            (Target::Channel { frames, layers }, None, None)
        }
    };
    let at = Place { index, spec: &spec };
    let end = match start(&at, &target, settings, backend, max_frames, topics, stop) {
        Ok(mut running) => {
            observer.state(State::Running);
            observer.started(
                &running.pipeline.commands,
                &running.counters,
                &running.pipeline.backend,
            );
            let ending = drive(&mut running, &at, stop, &live, observer);
            End::Ran(Box::new(running), ending)
        }
        Err(error) => End::NotStarted(error),
    };
    observer.state(State::Finishing);
    let out = target.folder().cloned();
    let outcome = finish(index, spec, out, end, connection, stop, observer);
    observer.state(State::Finished);
    // (A channel's sender goes with `target`: its reader sees the end once the outcome is ready.)
    drop(target);
    outcome
}

/// Which stream: its number and source.
struct Place<'a> {
    index: usize,
    spec: &'a SourceSpec,
}

/// Where the results go, as `start` needs it.
enum Target {
    Folder {
        out: PathBuf,
        video: bool,
    },
    Mailbox(Arc<Mailbox>),
    Channel {
        frames: Sender<AnalysedFrame>,
        layers: bool,
    },
}

impl Target {
    fn folder(&self) -> Option<&PathBuf> {
        match self {
            Self::Folder { out, .. } => Some(out),
            Self::Mailbox(_) | Self::Channel { .. } => None,
        }
    }
}

/// A stream whose pipeline runs and whose folder (if any) is taken over.
struct Running {
    pipeline: Pipeline,
    /// The folder's writer (`None`: results go to a mailbox or a channel).
    sink: Option<RunSink>,
    /// The channel every frame is handed to (`None`: results go to a folder or a mailbox).
    channel: Option<Sender<AnalysedFrame>>,
    counters: Arc<Counters>,
    max_frames: Option<u64>,
    status_clock: Option<StatusClock>,
    /// When the first frame was asked for.
    started: Instant,
    /// Frames whose line is in `frames.jsonl` (into a channel: frames handed to it).
    written: u64,
}

/// How the running state ended.
#[derive(Debug)]
enum Ending {
    /// The source ended (or the frame limit was reached, or a stop was asked for).
    Stream,
    /// The source or an analysis failed.
    SourceError(String),
    /// A file could not be written.
    WriteError(OutputError),
    /// The channel's receiver is gone: nobody reads the frames any more.
    Closed,
}

/// What finishing starts from.
enum End {
    /// The stream ran and ended this way.
    Ran(Box<Running>, Ending),
    /// The stream never ran: why.
    NotStarted(String),
}

/// Starting: opens the source and its pipeline (interrupted by `stop`) and takes over the
/// folder (an earlier run's files are removed, with a warning). The error names the source.
fn start(
    at: &Place<'_>,
    target: &Target,
    settings: &Settings,
    backend: &Backend,
    max_frames: Option<u64>,
    topics: Option<StreamPublisher>,
    stop: &StopRequest,
) -> Result<Running, String> {
    let spec = at.spec;
    let (delivery, want, out, video) = match target {
        Target::Channel { layers, .. } => {
            let want = if *layers {
                PictureWant::Layers
            } else {
                PictureWant::None
            };
            (Delivery::All, want, None, false)
        }
        Target::Folder { out, video: true } => (
            Delivery::All,
            PictureWant::Every(PictureFormat::I420),
            Some(out),
            true,
        ),
        Target::Folder { out, video: false } => {
            (Delivery::All, PictureWant::None, Some(out), false)
        }
        Target::Mailbox(m) => (
            Delivery::Latest(Arc::clone(m)),
            PictureWant::WhenTaken(PictureFormat::Rgba),
            None,
            false,
        ),
    };
    let pipeline = Pipeline::start_stoppable(
        FrameSource::Spec(spec.clone()),
        settings,
        backend,
        delivery,
        want,
        max_frames,
        stop.flag(),
    )
    .map_err(|e| {
        let message = e.to_string();
        if message.contains(&spec.to_string()) {
            message
        } else {
            format!("cannot open {spec}: {message}")
        }
    })?;
    let Some(out) = out else {
        let channel = match target {
            Target::Channel { frames, .. } => Some(frames.clone()),
            Target::Folder { .. } | Target::Mailbox(_) => None,
        };
        return Ok(Running {
            counters: pipeline.counters.clone(),
            pipeline,
            sink: None,
            channel,
            max_frames,
            status_clock: None,
            started: Instant::now(),
            written: 0,
        });
    };
    let live = pipeline.stream_info().live;
    let opts = SinkOptions {
        stream: at.index,
        video,
        video_kbps: settings.output.video_kbps,
        encoder: settings.output.encoder,
        source: spec.to_string(),
        backend: pipeline.backend.clone(),
        segments: crate::output::segments::SegmentPolicy::of(&settings.output, live),
    };
    let (mut sink, removed) = match RunSink::create(out, opts) {
        Ok(s) => s,
        Err(e) => {
            pipeline.stop();
            return Err(e.to_string());
        }
    };
    if let Err(e) = sink.event(&StreamEvent::Started { live }) {
        pipeline.stop();
        return Err(e.to_string());
    }
    if !removed.is_empty() {
        log::warn!(
            "{}: replacing {} from an earlier run",
            out.display(),
            removed.join(", ")
        );
    }
    let status_clock = topics.map(|topics| {
        // Each frame's frames.jsonl line goes to the broker as it is written.
        let frames = topics.clone();
        sink.on_frame_line(move |line| frames.frame(line.to_owned()));
        StatusClock::new(topics)
    });
    Ok(Running {
        counters: pipeline.counters.clone(),
        pipeline,
        sink: Some(sink),
        channel: None,
        max_frames,
        status_clock,
        started: Instant::now(),
        written: 0,
    })
}

/// Running: writes every frame until the stream ends, fails, or a stop is asked for (then the
/// frames already taken are still written).
fn drive(
    r: &mut Running,
    at: &Place<'_>,
    stop: &StopRequest,
    live: &LiveSettings,
    observer: &mut dyn StreamObserver,
) -> Ending {
    let spec = at.spec;
    let total = match (r.max_frames, r.pipeline.estimated_frames) {
        (Some(m), Some(n)) => Some(m.min(n)),
        (m, n) => m.or(n),
    };
    let mut stop_seen = false;
    let mut status_at = (Instant::now(), 0u64);
    loop {
        if !stop_seen && let Some(cause) = stop.asked() {
            stop_seen = true;
            if cause == super::REMOVED || cause == super::CLOSED {
                log::info!(
                    "{}: stopping {spec} — finishing the frames already taken and every output",
                    cause_name(cause)
                );
            } else {
                log::warn!(
                    "{}: stopping {spec} — finishing the frames already taken and every output (again to quit at once)",
                    cause_name(cause)
                );
            }
        }
        if let Some(ops) = live.take()
            && let Err(TrySendError::Full(Command::Settings(ops))) =
                r.pipeline.commands.try_send(Command::Settings(ops))
        {
            live.put_back(ops);
        }
        while let Ok(change) = r.pipeline.source_changes.try_recv() {
            let state = match &change {
                SourceChange::Lost { .. } => Some(State::Reconnecting),
                SourceChange::Back { .. } => Some(State::Running),
                SourceChange::AttemptFailed { .. } => None,
            };
            if let Some(state) = state {
                observer.state(state);
                if let Some(clock) = &mut r.status_clock {
                    clock.set_reconnecting(state == State::Reconnecting);
                }
            }
            if let Some(sink) = &mut r.sink
                && let Err(e) = sink.event(&StreamEvent::Source(change))
            {
                return Ending::WriteError(e);
            }
        }
        let now = r.snapshot();
        if let Some(clock) = &mut r.status_clock {
            clock.tick(&now, 0, false);
        }
        if status_at.0.elapsed() >= STATUS_EVERY {
            let secs = status_at.0.elapsed().as_secs_f64();
            observer.status(&StreamStatus {
                counters: now,
                fps: (r.written - status_at.1) as f64 / secs,
            });
            status_at = (Instant::now(), r.written);
        }
        let event = match r.pipeline.events.recv_timeout(IDLE_TICK) {
            Ok(ev) => ev,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if let Err(e) = show_and_checkpoint(r, observer, now, total) {
                    return Ending::WriteError(e);
                }
                continue;
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Ending::Stream,
        };
        match event {
            PipelineEvent::Frame(f) => {
                // (Only into a folder: a mailbox takes the frames itself.)
                if let Some(sink) = &mut r.sink {
                    if r.written == 0 {
                        sink.set_stream(r.pipeline.stream_info());
                    }
                    let result = sink.write(&f);
                    // A frame counts as out once its line is in frames.jsonl (even when a later
                    // file of the same frame failed).
                    r.written = sink.frames_written();
                    if let Err(e) = result {
                        return Ending::WriteError(e);
                    }
                }
                observer.frame(&f);
                if let Some(channel) = &r.channel {
                    // Waits while the reader is behind (the stream's backpressure).
                    if channel.send(*f).is_err() {
                        return Ending::Closed;
                    }
                    r.written += 1;
                }
                // Counted in before it came out: a fresh snapshot keeps in >= out.
                let now = r.snapshot();
                if let Err(e) = show_and_checkpoint(r, observer, now, total) {
                    return Ending::WriteError(e);
                }
            }
            PipelineEvent::Error(e) => return Ending::SourceError(e),
            PipelineEvent::End => return Ending::Stream,
        }
    }
}

/// Shows the progress to the observer and lets the sink rewrite `timings.json` when due.
fn show_and_checkpoint(
    r: &mut Running,
    observer: &mut dyn StreamObserver,
    now: CounterSnapshot,
    total: Option<u64>,
) -> Result<(), OutputError> {
    observer.progress(&StreamProgress {
        written: now.frames_out,
        counters: now,
        total,
    });
    match &mut r.sink {
        Some(sink) => sink.checkpoint(now),
        None => Ok(()),
    }
}

impl Running {
    /// The counters now; `frames_out` is the frames written to the folder or handed to the
    /// channel (for a mailbox: the frames the analyses delivered).
    fn snapshot(&self) -> CounterSnapshot {
        let now = self.counters.snapshot();
        if self.sink.is_some() || self.channel.is_some() {
            CounterSnapshot {
                frames_out: self.written,
                ..now
            }
        } else {
            now
        }
    }
}

/// Finishing, the one path of every end: ends the pipeline, finishes the files, waits for the
/// broker when the stream owns the connection, and says how it went.
fn finish(
    index: usize,
    spec: SourceSpec,
    out: Option<PathBuf>,
    end: End,
    connection: Option<(Publisher, Duration)>,
    stop: &StopRequest,
    observer: &mut dyn StreamObserver,
) -> StreamOutcome {
    let (r, ending) = match end {
        End::Ran(r, ending) => (*r, ending),
        End::NotStarted(error) => {
            return finish_not_started(index, spec, out, error, connection, stop);
        }
    };
    let Running {
        pipeline,
        sink,
        channel,
        counters,
        max_frames,
        mut status_clock,
        started,
        written,
    } = r;
    let stream = pipeline.stream_info();
    let pipeline_changes = pipeline.source_changes.clone();
    let estimate = pipeline.estimated_frames;
    let backend = pipeline.backend.clone();
    // (Nobody waits for the frames in flight after a write error or once the reader is gone.)
    if matches!(ending, Ending::WriteError(_) | Ending::Closed) {
        pipeline.stop();
    } else {
        pipeline.join();
    }
    let stopped_by = stop.asked();
    let wall_seconds = started.elapsed().as_secs_f64();
    // Taken now that the pipeline has ended; out: the frames written or handed to the channel
    // (into a mailbox: the frames the analyses delivered).
    let mailbox_only = sink.is_none() && channel.is_none();
    drop(channel);
    let counters = if mailbox_only {
        counters.snapshot()
    } else {
        CounterSnapshot {
            frames_out: written,
            ..counters.snapshot()
        }
    };
    let written = counters.frames_out;
    let limit_reached = max_frames.is_some_and(|m| written >= m);
    // A stream that ended by itself too soon (a truncated file, a live source gone) is an
    // error, in timings.json as in the run's summary.
    let early_end = match (&ending, stopped_by) {
        (Ending::Stream, None) => end_of_stream_error(&SelfEnded {
            spec: &spec,
            stream: &stream,
            // Into a mailbox frames are dropped before analysis by design: what the source
            // delivered says whether it ended early.
            written: if mailbox_only {
                counters.frames_in
            } else {
                written
            },
            estimate,
            limit_reached,
            limited: max_frames.is_some(),
        }),
        _ => None,
    };
    let ended = ended_text(&ending, stopped_by, early_end.as_deref(), limit_reached);
    if let Some(clock) = &mut status_clock {
        clock.tick(
            &counters,
            u64::from(!matches!(ending, Ending::Stream | Ending::Closed)),
            true,
        );
    }
    let mut finished = sink.map(|sink| {
        let end = RunEnd {
            counters,
            wall_seconds,
            ended: ended.clone(),
        };
        finish_files(sink, &pipeline_changes, &end)
    });
    observer.status(&StreamStatus {
        counters,
        fps: super::fps(&counters, wall_seconds),
    });
    // The files are complete; `timings.json` keeps being rewritten with the publisher's counts
    // while the broker is waited for (a stop that arrives during the wait ends it).
    let publish = match (connection, finished.as_mut()) {
        (Some((p, deadline)), Some(finished)) => Some(flush(p, deadline, finished, stop)),
        // (A connection comes with a folder only.)
        (Some((p, _)), None) => Some(p.finish(Duration::ZERO, &mut |_| ControlFlow::Break(()))),
        (None, _) => None,
    };
    let error = outcome_error(ending, written, finished.as_ref(), publish.as_ref());
    let error = error.or(early_end);
    StreamOutcome {
        source: spec.to_string(),
        out: out.unwrap_or_default(),
        backend,
        counters,
        wall_seconds,
        ended,
        finished,
        // A stop asked while the broker was waited for also counts.
        stopped_by: stop.asked(),
        error,
        publish,
    }
}

/// Finishing a stream that never ran: the connection is closed without waiting for the broker
/// (nothing was published), a stop asked meanwhile is the end rather than the error, and a
/// folder records why it holds no run.
fn finish_not_started(
    index: usize,
    spec: SourceSpec,
    out: Option<PathBuf>,
    error: String,
    connection: Option<(Publisher, Duration)>,
    stop: &StopRequest,
) -> StreamOutcome {
    let publish =
        connection.map(|(p, _)| p.finish(Duration::ZERO, &mut |_| ControlFlow::Break(())));
    let folder = out.is_some();
    let mut o = StreamOutcome::not_started(spec.to_string(), out.unwrap_or_default(), error);
    if let Some(cause) = stop.asked() {
        o.ended = cause_name(cause).to_owned();
        o.error = None;
        o.stopped_by = Some(cause);
    }
    o.publish = publish;
    if folder && let Some(e) = record_not_started(index, &o.source, &o.out, &o.ended) {
        log::warn!("{e}");
    }
    o
}

/// How a stream that ran ended, in words (`timings.json`'s `ended`): the error that ended it,
/// the stop's cause (a reader gone without one: `closed`), an early end's error, the frame
/// limit, or the end of the stream.
fn ended_text(
    ending: &Ending,
    stopped_by: Option<i32>,
    early_end: Option<&str>,
    limit_reached: bool,
) -> String {
    match (ending, stopped_by, early_end) {
        (Ending::WriteError(e), _, _) => format!("error: {e}"),
        (Ending::SourceError(e), _, _) => format!("error: {e}"),
        (Ending::Stream | Ending::Closed, Some(cause), _) => cause_name(cause).to_owned(),
        (Ending::Closed, None, _) => cause_name(super::CLOSED).to_owned(),
        (Ending::Stream, None, Some(e)) => format!("error: {e}"),
        (Ending::Stream, None, None) if limit_reached => "--max-frames".to_owned(),
        (Ending::Stream, None, None) => "end of stream".to_owned(),
    }
}

/// Finishes the folder's files: the changes the source reported up to its end go to the
/// events first (a give-up comes after its last attempts; `finished` is the last event,
/// written by [`RunSink::finish`]); the first event that could not be written is the
/// finish's error unless it has one.
fn finish_files(
    mut sink: RunSink,
    changes: &crossbeam_channel::Receiver<SourceChange>,
    end: &RunEnd,
) -> Finished {
    let mut event_error = None;
    for event in changes.try_iter().map(StreamEvent::Source) {
        if let Err(e) = sink.event(&event) {
            event_error.get_or_insert(e);
        }
    }
    let mut finished = sink.finish(end);
    if let Some(e) = event_error {
        finished.error.get_or_insert(e);
    }
    finished
}

/// The error of a stream that ran: a write error or a source error (with the frames written
/// before it), else the finished files' error or a broker's refusal of the login.
fn outcome_error(
    ending: Ending,
    written: u64,
    finished: Option<&Finished>,
    publish: Option<&PublishReport>,
) -> Option<String> {
    match ending {
        Ending::WriteError(e) => Some(format!(
            "{e} (after {written} frames; the files hold the frames before it)"
        )),
        Ending::SourceError(e) if written == 0 => Some(e),
        Ending::SourceError(e) => Some(format!(
            "{e} (after {written} frames; outputs hold the frames analysed before it)"
        )),
        Ending::Closed => None,
        Ending::Stream => finished
            .and_then(|f| f.error.as_ref())
            .map(ToString::to_string)
            .or_else(|| publish.and_then(login_refused)),
    }
}

/// Waits for the broker to acknowledge what is queued (at most `deadline`), rewriting
/// `timings.json` with the publisher's counts every second meanwhile; a stop asked during the
/// wait ends it (what is unacknowledged counts as dropped).
fn flush(
    p: Publisher,
    deadline: Duration,
    finished: &mut Finished,
    stop: &StopRequest,
) -> PublishReport {
    let asked_before = stop.asked().is_some();
    let mut rewritten = Instant::now();
    let mut rewrite_error = finished.set_publish_report(&p.report(), true).err();
    let report = p.finish(deadline, &mut |report| {
        if rewritten.elapsed() >= FLUSH_REWRITE_EVERY {
            rewritten = Instant::now();
            if let Err(e) = finished.set_publish_report(report, true) {
                rewrite_error.get_or_insert(e);
            }
        }
        if !asked_before && stop.asked().is_some() {
            log::warn!("stopped while waiting for the broker: what it has not acknowledged counts as dropped");
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if let Err(e) = finished.set_publish_report(&report, false) {
        rewrite_error.get_or_insert(e);
    }
    if let Some(e) = rewrite_error {
        finished.error.get_or_insert(e);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::super::CLOSED;
    use super::*;

    /// Settings of a quick CPU run on a small test pattern of `frames` frames.
    fn quick(frames: u32) -> Settings {
        let sets: Vec<String> = [
            "orientation.enabled=false",
            "segmentation.enabled=false",
            "source.test.width=64",
            "source.test.height=48",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([format!("source.test.frames={frames}")])
        .collect();
        Settings::load(None, &sets).unwrap()
    }

    /// Records the states and counts the frames it sees.
    #[derive(Default)]
    struct Seen {
        states: Vec<State>,
        frames: u64,
    }

    impl StreamObserver for Seen {
        fn frame(&mut self, _frame: &crate::analysis::AnalysedFrame) {
            self.frames += 1;
        }
        fn state(&mut self, state: State) {
            self.states.push(state);
        }
    }

    fn job<'a>(settings: &'a Settings, out: &std::path::Path) -> StreamJob<'a> {
        StreamJob {
            index: 3,
            spec: SourceSpec::parse("test:ball").unwrap(),
            output: StreamOutput::Folder {
                out: out.to_owned(),
                video: false,
                publish: None,
            },
            settings,
            backend: &Backend::Cpu,
            max_frames: None,
            live: LiveSettings::new(),
        }
    }

    #[test]
    fn a_stream_goes_through_every_state_and_its_events_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let settings = quick(5);
        let mut seen = Seen::default();
        let o = run(job(&settings, dir.path()), &StopRequest::new(), &mut seen);
        assert_eq!(o.error, None);
        assert_eq!((o.counters.frames_out, seen.frames), (5, 5));
        assert_eq!(
            seen.states,
            [
                State::Starting,
                State::Running,
                State::Finishing,
                State::Finished
            ]
        );
        let events: Vec<serde_json::Value> =
            std::fs::read_to_string(dir.path().join("events.jsonl"))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(
            (
                &events[0]["event"],
                &events[0]["live"],
                &events[0]["stream"]
            ),
            (&"started".into(), &false.into(), &3.into())
        );
        assert_eq!(
            (&events[1]["event"], &events[1]["ended"]),
            (&"finished".into(), &"end of stream".into())
        );
    }

    /// Counts what `started` hands over.
    #[derive(Default)]
    struct Steered {
        seen: Seen,
        started: Option<(Arc<Counters>, String)>,
    }

    impl StreamObserver for Steered {
        fn state(&mut self, state: State) {
            self.seen.state(state);
        }
        fn started(
            &mut self,
            _commands: &crossbeam_channel::Sender<Command>,
            counters: &Arc<Counters>,
            backend: &str,
        ) {
            self.started = Some((Arc::clone(counters), backend.to_owned()));
        }
    }

    #[test]
    fn a_stream_into_a_mailbox_goes_through_the_same_states_and_writes_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let settings = quick(5);
        let mailbox = Arc::new(Mailbox::new());
        let mut job = job(&settings, dir.path());
        job.output = StreamOutput::Mailbox(Arc::clone(&mailbox));
        let mut steered = Steered::default();
        let o = run(job, &StopRequest::new(), &mut steered);
        assert_eq!(
            (o.error.as_deref(), o.ended.as_str()),
            (None, "end of stream")
        );
        assert!(o.finished.is_none(), "no files");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(
            steered.seen.states,
            [
                State::Starting,
                State::Running,
                State::Finishing,
                State::Finished
            ]
        );
        let (counters, backend) = steered.started.unwrap();
        assert!(backend.starts_with("cpu"), "{backend}");
        // Frames the analyses could not keep up with are dropped, as for the viewer.
        assert_eq!(o.counters.frames_in, 5);
        assert_eq!(o.counters.frames_out + o.counters.dropped, 5);
        assert_eq!(counters.snapshot().frames_out, o.counters.frames_out);
        let last = mailbox
            .take()
            .expect("the newest frame waits in the mailbox");
        assert!(
            last.picture.is_some(),
            "its picture composed for the viewer"
        );
    }

    /// A job whose frames go into a channel of one place (no layers), and its receiver.
    fn channel_job<'a>(
        settings: &'a Settings,
        dir: &std::path::Path,
    ) -> (StreamJob<'a>, crossbeam_channel::Receiver<AnalysedFrame>) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut job = job(settings, dir);
        job.output = StreamOutput::Channel {
            frames: tx,
            layers: false,
        };
        (job, rx)
    }

    #[test]
    fn a_stream_into_a_channel_hands_over_every_frame_in_order_and_writes_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let settings = quick(6);
        let (job, rx) = channel_job(&settings, dir.path());
        // The reader is slower than the stream: a file-like source waits, nothing is dropped.
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for f in &rx {
                std::thread::sleep(Duration::from_millis(20));
                seen.push((f.index, f.outputs.iter().map(|o| o.op).collect::<Vec<_>>()));
            }
            seen
        });
        let mut seen = Seen::default();
        let o = run(job, &StopRequest::new(), &mut seen);
        let frames = reader.join().unwrap();
        assert_eq!(
            (o.error.as_deref(), o.ended.as_str()),
            (None, "end of stream")
        );
        assert!(o.finished.is_none(), "no files");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(
            (
                o.counters.frames_in,
                o.counters.frames_out,
                o.counters.dropped
            ),
            (6, 6, 0)
        );
        assert_eq!(
            frames.iter().map(|f| f.0).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4, 5]
        );
        assert!(frames.iter().all(|f| f.1.contains(&"cca")), "{frames:?}");
        assert_eq!(
            seen.states,
            [
                State::Starting,
                State::Running,
                State::Finishing,
                State::Finished
            ]
        );
    }

    #[test]
    fn a_channel_whose_reader_leaves_ends_the_stream_at_once_as_closed() {
        let dir = tempfile::tempdir().unwrap();
        // An endless pattern: only the reader's leaving ends it.
        let settings = quick(0);
        let (job, rx) = channel_job(&settings, dir.path());
        let reader = std::thread::spawn(move || {
            let first = rx.recv().map(|f| f.index);
            drop(rx);
            first
        });
        let started = Instant::now();
        let o = run(job, &StopRequest::new(), &mut Seen::default());
        assert_eq!(reader.join().unwrap(), Ok(0));
        assert_eq!((o.error.as_deref(), o.ended.as_str()), (None, "closed"));
        assert_eq!(o.stopped_by, None);
        assert_eq!(
            o.counters.frames_out, 1,
            "only the frame taken counts as out"
        );
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn a_channel_whose_reader_closes_it_ends_with_the_stop_s_cause() {
        let dir = tempfile::tempdir().unwrap();
        let settings = quick(0);
        let (job, rx) = channel_job(&settings, dir.path());
        let stop = StopRequest::new();
        let asker = stop.clone();
        let reader = std::thread::spawn(move || {
            let first = rx.recv().map(|f| f.index);
            asker.ask(CLOSED);
            drop(rx);
            first
        });
        let o = run(job, &stop, &mut Seen::default());
        assert_eq!(reader.join().unwrap(), Ok(0));
        assert_eq!((o.error.as_deref(), o.ended.as_str()), (None, "closed"));
        assert_eq!(o.stopped_by, Some(CLOSED));
    }

    #[test]
    fn a_stop_asked_while_opening_ends_the_stream_as_stopped_not_failed() {
        let dir = tempfile::tempdir().unwrap();
        let settings = quick(0);
        let stop = StopRequest::new();
        stop.ask(15);
        let mut seen = Seen::default();
        let o = run(job(&settings, dir.path()), &stop, &mut seen);
        assert_eq!((o.stopped_by, o.error.as_deref()), (Some(15), None));
        assert_eq!(o.ended, "SIGTERM");
        assert!(o.finished.is_none(), "it never ran");
        assert_eq!(
            seen.states,
            [State::Starting, State::Finishing, State::Finished]
        );
    }
}
