//! The frame pipeline: a source thread, a worker thread that owns the engine (and all CUDA
//! state), and the consumers.
//!
//! ```text
//! source thread --bounded channel (frames)--> worker --bounded channel (results, in order)--> sinks
//!                                               \--latest-frame mailbox + waker--> viewer
//! viewer --commands (settings, pause, step)--> worker
//! ```
//!
//! Live sources (as their GStreamer pipeline reports: cameras, RTSP) drop frames when the channel
//! is full and count them; files (local or HTTP) and test patterns block instead, so frames in ==
//! frames out. A source error ends the stream after the frames already decoded have been
//! analysed; it is reported once as [`PipelineEvent::Error`]. [`Pipeline::end_input`] (a stop
//! request, e.g. Ctrl+C) and an input limit (`--max-frames`) end it the same way: the source
//! stops taking frames, the frames already taken are analysed and delivered, then `End`.

pub mod engine;
pub mod mailbox;
pub mod ring;
pub mod stats;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};

pub use engine::{Engine, Submitted};
pub use mailbox::Mailbox;
pub use stats::{CounterSnapshot, Counters, Series, Summary};

use crate::analysis::{AnalysedFrame, OpSettings};
use crate::backend::Backend;
use crate::config::Settings;
use crate::source::{Pacing, Source, SourceError, SourceOptions, SourceSpec, StreamInfo};

/// What the worker sends downstream.
#[derive(Debug)]
pub enum PipelineEvent {
    /// An analysed frame (in frame order).
    Frame(Box<AnalysedFrame>),
    /// The source or an analysis failed; the message is final. Frames before it were delivered.
    Error(String),
    /// End of stream: every frame has been delivered.
    End,
}

/// Commands from the viewer to the worker.
#[derive(Debug, Clone)]
pub enum Command {
    /// New analysis settings, from the next frame on.
    Settings(Box<OpSettings>),
    /// Stop taking frames (the source keeps running; a live source then drops).
    Pause(bool),
    /// While paused, analyse exactly one more frame.
    Step,
    /// Stop the pipeline.
    Stop,
}

/// Where results go.
pub enum Delivery {
    /// Every frame, in order, through a bounded channel (headless sinks; blocks when full).
    All,
    /// Only the newest frame, into a mailbox that wakes the viewer.
    Latest(Arc<Mailbox>),
}

/// A running pipeline.
pub struct Pipeline {
    /// Results (with [`Delivery::All`]) and the final `End`/`Error` event (always).
    pub events: Receiver<PipelineEvent>,
    /// Commands to the worker.
    pub commands: Sender<Command>,
    /// Frame counters.
    pub counters: Arc<Counters>,
    /// Estimated total frames (files), for progress bars.
    pub estimated_frames: Option<u64>,
    /// Backend description.
    pub backend: String,
    stop_input: Arc<AtomicBool>,
    stream: Arc<Mutex<StreamInfo>>,
    threads: Vec<JoinHandle<()>>,
}

/// Errors starting a pipeline.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// Opening the source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Building the analyses failed.
    #[error(transparent)]
    Op(#[from] crate::ops::OpError),
    /// A thread could not be started.
    #[error("cannot start thread: {0}")]
    Thread(std::io::Error),
}

impl Pipeline {
    /// Opens the source and starts the source and worker threads.
    pub fn start(spec: &SourceSpec, settings: &Settings, backend: &Backend, delivery: Delivery) -> Result<Self, PipelineError> {
        Self::start_limited(spec, settings, backend, delivery, None)
    }

    /// [`Pipeline::start`], taking at most `max_frames` frames into the analyses (frames a live
    /// source drops do not count), then ending as at end of stream.
    pub fn start_limited(spec: &SourceSpec, settings: &Settings, backend: &Backend, delivery: Delivery, max_frames: Option<u64>) -> Result<Self, PipelineError> {
        let realtime = match settings.source.pacing {
            Pacing::Auto => matches!(delivery, Delivery::Latest(_)),
            Pacing::Realtime => true,
            Pacing::Fast => false,
        };
        let stop_input = Arc::new(AtomicBool::new(false));
        let opts = SourceOptions {
            format: settings.source.format,
            test: settings.source.test.clone(),
            realtime,
            timeout: std::time::Duration::from_secs(u64::from(settings.source.timeout_seconds)),
            interrupt: Some(stop_input.clone()),
        };
        let mut source = Source::open_with(spec, &opts)?;
        let estimated_frames = match spec {
            SourceSpec::Test(_) if settings.source.test.frames > 0 => Some(u64::from(settings.source.test.frames)),
            _ => source.estimated_frames(),
        };
        log::debug!("estimated frames: {estimated_frames:?}");
        let stream = Arc::new(Mutex::new(source.stream_info()));
        let live = source.stream_info().live;
        let mut engine = Engine::new(backend, &settings.ops, settings.pipeline.ring_size)?;
        let counters = Arc::new(Counters::default());
        let (frame_tx, frame_rx) = bounded::<Result<(crate::source::Frame, Instant), SourceError>>(settings.pipeline.queue);
        let (event_tx, event_rx) = bounded::<PipelineEvent>(settings.pipeline.queue.max(2) * 2);
        let (cmd_tx, cmd_rx) = bounded::<Command>(64);

        let c = counters.clone();
        let (stop, info) = (stop_input.clone(), stream.clone());
        let src_thread = std::thread::Builder::new()
            .name("morphoscope-source".into())
            .spawn(move || {
                let mut accepted = 0u64;
                while !stop.load(Ordering::Relaxed) && max_frames.is_none_or(|m| accepted < m) {
                    let msg = match source.next_frame() {
                        Ok(Some(f)) => {
                            c.frames_in.fetch_add(1, Ordering::Relaxed);
                            if f.index == 0
                                && let Ok(mut i) = info.lock()
                            {
                                *i = source.stream_info();
                            }
                            Ok((f, Instant::now()))
                        }
                        Ok(None) => break,
                        Err(e) => Err(e),
                    };
                    let is_err = msg.is_err();
                    if live && !is_err {
                        match frame_tx.try_send(msg) {
                            Ok(()) => accepted += 1,
                            Err(TrySendError::Full(_)) => {
                                c.dropped.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(TrySendError::Disconnected(_)) => break,
                        }
                    } else if frame_tx.send(msg).is_err() || is_err {
                        break;
                    } else {
                        accepted += 1;
                    }
                }
            })
            .map_err(PipelineError::Thread)?;

        let c = counters.clone();
        let worker = std::thread::Builder::new()
            .name("morphoscope-worker".into())
            .spawn(move || worker_loop(&mut engine, &frame_rx, &cmd_rx, &event_tx, &delivery, &c))
            .map_err(PipelineError::Thread)?;

        Ok(Self {
            events: event_rx,
            commands: cmd_tx,
            counters,
            estimated_frames,
            backend: backend.describe(),
            stop_input,
            stream,
            threads: vec![src_thread, worker],
        })
    }

    /// Stops taking frames from the source; the frames already taken are still analysed and
    /// delivered, then `End` (a graceful stop: nothing taken is lost).
    pub fn end_input(&self) {
        self.stop_input.store(true, Ordering::Relaxed);
    }

    /// What the source reported about its stream (liveness, frame rate, decoder); complete once
    /// the first frame was delivered.
    #[must_use]
    pub fn stream_info(&self) -> StreamInfo {
        self.stream.lock().map(|i| i.clone()).unwrap_or_default()
    }

    /// Asks the worker to stop and waits for both threads.
    pub fn stop(mut self) {
        self.stop_input.store(true, Ordering::Relaxed);
        let _ = self.commands.send(Command::Stop);
        // Unblock a worker waiting to deliver: drain events until the channel closes.
        while self.events.recv_timeout(std::time::Duration::from_millis(200)).is_ok() {}
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Waits for both threads (after `End` or `Error` was received).
    pub fn join(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn deliver(frames: Vec<AnalysedFrame>, delivery: &Delivery, events: &Sender<PipelineEvent>, c: &Counters) -> bool {
    for f in frames {
        c.frames_out.fetch_add(1, Ordering::Relaxed);
        match delivery {
            Delivery::All => {
                if events.send(PipelineEvent::Frame(Box::new(f))).is_err() {
                    return false;
                }
            }
            Delivery::Latest(mb) => mb.put(f),
        }
    }
    true
}

fn worker_loop(
    engine: &mut Engine,
    frames: &Receiver<Result<(crate::source::Frame, Instant), SourceError>>,
    commands: &Receiver<Command>,
    events: &Sender<PipelineEvent>,
    delivery: &Delivery,
    c: &Counters,
) {
    let mut paused = false;
    let mut steps = 0u32;
    let mut final_event = PipelineEvent::End;
    'outer: loop {
        while let Ok(cmd) = commands.try_recv() {
            match cmd {
                Command::Settings(s) => {
                    if let Err(e) = engine.update(&s) {
                        log::warn!("settings rejected: {e}");
                    }
                }
                Command::Pause(p) => paused = p,
                Command::Step => steps += 1,
                Command::Stop => break 'outer,
            }
        }
        if paused && steps == 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        let msg = match frames.recv_timeout(std::time::Duration::from_millis(20)) {
            Ok(m) => m,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        };
        steps = steps.saturating_sub(1);
        match msg {
            Ok((frame, received)) => {
                let s = Submitted { frame, received, queue_wait_ms: received.elapsed().as_secs_f64() * 1e3 };
                match engine.submit(s) {
                    Ok(done) => {
                        if !deliver(done, delivery, events, c) {
                            return;
                        }
                    }
                    Err(e) => {
                        final_event = PipelineEvent::Error(format!("analysis failed: {e}"));
                        break;
                    }
                }
            }
            Err(e) => {
                final_event = PipelineEvent::Error(e.to_string());
                break;
            }
        }
    }
    match engine.flush() {
        Ok(done) => {
            deliver(done, delivery, events, c);
        }
        Err(e) => final_event = PipelineEvent::Error(format!("analysis failed: {e}")),
    }
    if let Delivery::Latest(mb) = delivery {
        mb.wake();
    }
    let _ = events.send(final_event);
}
