//! The state machine of one stream: [`run`] starts it, drives it while frames arrive and takes
//! every end through one finishing path.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::TrySendError;

use crate::backend::Backend;
use crate::compose::PictureFormat;
use crate::config::Settings;
use crate::output::events::StreamEvent;
use crate::output::{OutputError, RunEnd, RunSink, SinkOptions};
use crate::pipeline::{
    Command, CounterSnapshot, Counters, Delivery, FrameSource, PictureWant, Pipeline, PipelineEvent,
};
use crate::publish::{Publisher, StatusClock, StreamPublisher};
use crate::source::SourceSpec;
use crate::source::reconnect::SourceChange;

use super::outcome::{SelfEnded, end_of_stream_error};
use super::unstarted::record_not_started;
use super::{
    LiveSettings, State, StopRequest, StreamJob, StreamObserver, StreamOutcome, StreamProgress,
    StreamStatus, cause_name, login_refused,
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
pub fn run(
    job: StreamJob<'_>,
    stop: &StopRequest,
    observer: &mut dyn StreamObserver,
) -> StreamOutcome {
    observer.state(State::Starting);
    let StreamJob {
        index,
        spec,
        out,
        settings,
        backend,
        max_frames,
        video,
        publish,
        live,
    } = job;
    let (topics, connection) = match publish {
        Some(p) => (Some(p.stream), p.finish),
        None => (None, None),
    };
    let at = Place {
        index,
        spec: &spec,
        out: &out,
    };
    let end = match start(&at, settings, backend, max_frames, video, topics, stop) {
        Ok(mut running) => {
            observer.state(State::Running);
            let ending = drive(&mut running, &at, stop, &live, observer);
            End::Ran(Box::new(running), ending)
        }
        Err(error) => End::NotStarted(error),
    };
    observer.state(State::Finishing);
    let outcome = finish(index, spec, out, end, connection, stop, observer);
    observer.state(State::Finished);
    outcome
}

/// Which stream: its number, source and folder.
struct Place<'a> {
    index: usize,
    spec: &'a SourceSpec,
    out: &'a PathBuf,
}

/// A stream whose pipeline runs and whose folder is taken over.
struct Running {
    pipeline: Pipeline,
    sink: RunSink,
    counters: Arc<Counters>,
    max_frames: Option<u64>,
    status_clock: Option<StatusClock>,
    /// When the first frame was asked for.
    started: Instant,
    /// Frames whose line is in `frames.jsonl`.
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
    settings: &Settings,
    backend: &Backend,
    max_frames: Option<u64>,
    video: bool,
    topics: Option<StreamPublisher>,
    stop: &StopRequest,
) -> Result<Running, String> {
    let (spec, out) = (at.spec, at.out);
    let want = if video {
        PictureWant::Every(PictureFormat::I420)
    } else {
        PictureWant::None
    };
    let pipeline = Pipeline::start_stoppable(
        FrameSource::Spec(spec.clone()),
        settings,
        backend,
        Delivery::All,
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
    let live = pipeline.stream_info().live;
    let opts = SinkOptions {
        stream: at.index,
        video,
        video_kbps: settings.output.video_kbps,
        encoder: settings.output.encoder,
        source: spec.to_string(),
        backend: pipeline.backend.clone(),
        segments: settings.output.segment_policy(live),
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
        sink,
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
            if cause == super::REMOVED {
                log::info!(
                    "removed: stopping {spec} — finishing the frames already taken and every output"
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
            if let Err(e) = r.sink.event(&StreamEvent::Source(change)) {
                return Ending::WriteError(e);
            }
        }
        let now = CounterSnapshot {
            frames_out: r.written,
            ..r.counters.snapshot()
        };
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
                if r.written == 0 {
                    r.sink.set_stream(r.pipeline.stream_info());
                }
                let result = r.sink.write(&f);
                // A frame counts as out once its line is in frames.jsonl (even when a later file
                // of the same frame failed).
                r.written = r.sink.frames_written();
                if let Err(e) = result {
                    return Ending::WriteError(e);
                }
                observer.frame(&f);
                // Counted in before it came out: a fresh snapshot keeps in >= out.
                let now = CounterSnapshot {
                    frames_out: r.written,
                    ..r.counters.snapshot()
                };
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
        written: r.written,
        counters: now,
        total,
    });
    r.sink.checkpoint(now)
}

/// Finishing, the one path of every end: ends the pipeline, finishes the files, waits for the
/// broker when the stream owns the connection, and says how it went.
fn finish(
    index: usize,
    spec: SourceSpec,
    out: PathBuf,
    end: End,
    connection: Option<(Publisher, Duration)>,
    stop: &StopRequest,
    observer: &mut dyn StreamObserver,
) -> StreamOutcome {
    let (r, ending) = match end {
        End::Ran(r, ending) => (*r, ending),
        End::NotStarted(error) => {
            // Nothing was published: the connection is closed without waiting for the broker.
            let publish =
                connection.map(|(p, _)| p.finish(Duration::ZERO, &mut |_| ControlFlow::Break(())));
            let mut o = StreamOutcome::not_started(spec.to_string(), out, error);
            if let Some(cause) = stop.asked() {
                o.ended = cause_name(cause).to_owned();
                o.error = None;
                o.stopped_by = Some(cause);
            }
            o.publish = publish;
            if let Some(e) = record_not_started(index, &o.source, &o.out, &o.ended) {
                log::warn!("{e}");
            }
            return o;
        }
    };
    let Running {
        pipeline,
        mut sink,
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
    if matches!(ending, Ending::WriteError(_)) {
        pipeline.stop();
    } else {
        pipeline.join();
    }
    let stopped_by = stop.asked();
    let wall_seconds = started.elapsed().as_secs_f64();
    let counters = CounterSnapshot {
        frames_out: written,
        ..counters.snapshot()
    };
    let limit_reached = max_frames.is_some_and(|m| written >= m);
    // A stream that ended by itself too soon (a truncated file, a live source gone) is an
    // error, in timings.json as in the run's summary.
    let early_end = match (&ending, stopped_by) {
        (Ending::Stream, None) => end_of_stream_error(&SelfEnded {
            spec: &spec,
            stream: &stream,
            written,
            estimate,
            limit_reached,
            limited: max_frames.is_some(),
        }),
        _ => None,
    };
    let ended = match (&ending, stopped_by, &early_end) {
        (Ending::WriteError(e), _, _) => format!("error: {e}"),
        (Ending::SourceError(e), _, _) => format!("error: {e}"),
        (Ending::Stream, Some(cause), _) => cause_name(cause).to_owned(),
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
    // Changes the source reported up to its end (a give-up comes after its last attempts).
    let mut event_error = None;
    // (`finished` is the last event: RunSink::finish writes it after the last segment's.)
    for event in pipeline_changes.try_iter().map(StreamEvent::Source) {
        if let Err(e) = sink.event(&event) {
            event_error.get_or_insert(e);
        }
    }
    let mut finished = sink.finish(&RunEnd {
        counters,
        wall_seconds,
        ended: ended.clone(),
    });
    if let Some(e) = event_error {
        finished.error.get_or_insert(e);
    }
    observer.status(&StreamStatus {
        counters,
        fps: super::fps(&counters, wall_seconds),
    });
    // The files are complete; `timings.json` keeps being rewritten with the publisher's counts
    // while the broker is waited for (a stop that arrives during the wait ends it).
    let publish = connection.map(|(p, deadline)| {
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
            .map(ToString::to_string)
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
        // A stop asked while the broker was waited for also counts.
        stopped_by: stop.asked(),
        error,
        publish,
    }
}

#[cfg(test)]
mod tests {
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
            out: out.to_owned(),
            settings,
            backend: &Backend::Cpu,
            max_frames: None,
            video: false,
            publish: None,
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
