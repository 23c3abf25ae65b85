//! The frame pipeline: a source thread, a worker that only uploads and enqueues (and owns the
//! ring of CUDA streams), a collector that completes frames in order, and the consumers.
//!
//! ```text
//! source --frames (bounded)--> worker --frames in flight (in order)--> collector --results--> sinks
//!                                ^---------------- free ring slots -------------'   \--> viewer mailbox
//! viewer --commands (settings, styles, pause, step)--> worker
//! ```
//!
//! On the GPU the worker copies a frame into a free slot's pinned buffer and enqueues every
//! analysis; it never waits for the device except when all slots are in flight. The collector
//! waits for the oldest frame, reads back its small results (component table, spectrum, counts,
//! histogram), runs the in-order host steps (the tracker), composes the picture on the device
//! when a sink wants pixels this frame (one readback), hands the frame on and returns the slot.
//! On the CPU the worker runs the analyses (multi-threaded inside each op) and the collector
//! composes the picture with the CPU twin of the compose kernel, each through the
//! `cpu_gate` that keeps many streams from nesting on one pool thread's stack. See
//! [`PictureWant`].
//!
//! Live sources (as their GStreamer pipeline reports: cameras, RTSP) drop frames when the channel
//! is full and count them; files (local or HTTP) and test patterns block instead, so frames in ==
//! frames out. In the viewer a file plays in real time and frames the analyses cannot keep up
//! with are dropped before analysis (counted), so the picture stays current. A live source that
//! errors, stalls or ends is reopened with backoff in the source thread
//! ([`crate::source::reconnect`], `source.reconnect`): the worker, the ring and the tracker stay,
//! and each loss and return is sent on [`Pipeline::source_changes`]. Any other source error ends
//! the stream after the frames already decoded have been analysed; it is reported once as
//! [`PipelineEvent::Error`]. [`Pipeline::end_input`] (a stop request, e.g. Ctrl+C) and an input
//! limit (`--max-frames`) end it the same way: the source stops taking frames, the frames
//! already taken are analysed and delivered, then `End`.

mod collector;
pub(crate) mod cpu_gate;
pub mod mailbox;
pub mod ring;
mod worker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded, unbounded};

use crate::stats::Counters;
pub use mailbox::Mailbox;

use crate::analysis::{AnalysedFrame, OpSettings};
use crate::backend::Backend;
use crate::compose::{ComposeStyle, PictureFormat};
use crate::config::Settings;
use crate::source::reconnect::{Reconnecting, SourceChange};
use crate::source::{Frame, Pacing, Source, SourceError, SourceOptions, SourceSpec, StreamInfo};

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
    /// New layer styles for the composed picture, from the next frame on.
    Style(Box<ComposeStyle>),
    /// Stop taking frames (the source keeps running; a live source then drops).
    Pause(bool),
    /// While paused, analyse exactly one more frame.
    Step,
    /// Stop the pipeline.
    Stop,
}

/// Which frames get a composed picture, and in which format, or their layers themselves.
/// Composing costs a kernel (or a CPU pass) and a readback, so only a sink that shows or stores
/// pixels asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PictureWant {
    /// No pixels: tables only (`run --no-video`, `bench --sink none`).
    None,
    /// Every frame (the overlay video, `bench --sink picture`).
    Every(PictureFormat),
    /// Only when the viewer has taken the previous picture: composing follows its display rate.
    WhenTaken(PictureFormat),
    /// No picture, but every frame's layers on the host: the grey frame and each analysis'
    /// raster as the CPU backend leaves them (on CUDA, read back from the device), for a
    /// program that takes the layers as arrays (Python's `morphoscope.open(..., layers=True)`).
    Layers,
}

/// Where results go.
pub enum Delivery {
    /// Every frame, in order, through a bounded channel (headless sinks; blocks when full).
    All,
    /// Only the newest frame, into a mailbox that wakes the viewer.
    Latest(Arc<Mailbox>),
}

/// Where frames come from.
pub enum FrameSource {
    /// A SOURCE (file, URI, camera, test pattern, pipeline).
    Spec(SourceSpec),
    /// Frames held in memory, replayed in turn `count` times in all (benchmarks): no decoding.
    Memory {
        /// The frames.
        frames: Arc<Vec<Frame>>,
        /// Frames to deliver.
        count: u64,
    },
    /// Frames held in memory, replayed in turn like a live camera: one every `1 / fps` seconds
    /// on a fixed schedule (a late frame does not shift the next), dropped and counted when the
    /// pipeline is not ready for it (the real-time benchmark of many streams: no decoding).
    Paced {
        /// The frames.
        frames: Arc<Vec<Frame>>,
        /// Which of them comes first (streams started on the same frames differ).
        first: usize,
        /// Frames per second.
        fps: f64,
        /// Frames to deliver (on time or dropped).
        count: u64,
    },
    /// Frames pushed by the caller (a GStreamer element's chain function), with their own index
    /// and pts; the stream ends when every sender is dropped. The caller blocks on a full
    /// channel or uses `try_send` to drop, so the source thread never drops frames itself.
    Channel(Receiver<Frame>),
}

/// A running pipeline.
pub struct Pipeline {
    /// Results (with [`Delivery::All`]) and the final `End`/`Error` event (always).
    pub events: Receiver<PipelineEvent>,
    /// A live source lost and back (see [`crate::source::reconnect`]), as it happens.
    pub source_changes: Receiver<SourceChange>,
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

/// A frame from the source thread, with the instant it arrived.
type Arrived = Result<(Frame, Instant), SourceError>;

impl Pipeline {
    /// Opens the source and starts the source, worker and collector threads.
    pub fn start(
        source: FrameSource,
        settings: &Settings,
        backend: &Backend,
        delivery: Delivery,
        want: PictureWant,
    ) -> Result<Self, PipelineError> {
        Self::start_limited(source, settings, backend, delivery, want, None)
    }

    /// [`Pipeline::start`], taking at most `max_frames` frames into the analyses (frames a live
    /// source drops do not count), then ending as at end of stream.
    pub fn start_limited(
        source: FrameSource,
        settings: &Settings,
        backend: &Backend,
        delivery: Delivery,
        want: PictureWant,
        max_frames: Option<u64>,
    ) -> Result<Self, PipelineError> {
        let stop_input = Arc::new(AtomicBool::new(false));
        Self::start_stoppable(
            source, settings, backend, delivery, want, max_frames, stop_input,
        )
    }

    /// [`Pipeline::start_limited`] with the caller's stop flag: setting it (from any thread)
    /// interrupts a source that is still opening (the start fails with
    /// [`SourceError::Interrupted`]) and, once running, acts as [`Pipeline::end_input`].
    pub(crate) fn start_stoppable(
        source: FrameSource,
        settings: &Settings,
        backend: &Backend,
        delivery: Delivery,
        want: PictureWant,
        max_frames: Option<u64>,
        stop_input: Arc<AtomicBool>,
    ) -> Result<Self, PipelineError> {
        let viewer = matches!(delivery, Delivery::Latest(_));
        let stream = Arc::new(Mutex::new(StreamInfo::default()));
        // Only a SOURCE's live source reports changes; for the others the sender just goes.
        let (changes_tx, source_changes) = unbounded::<SourceChange>();
        let Reader {
            mut next,
            estimated_frames,
            live,
        } = match source {
            FrameSource::Spec(spec) => {
                let device = match backend {
                    Backend::Cuda(gpu) => Some(gpu.clone()),
                    Backend::Cpu => None,
                };
                spec_reader(
                    spec,
                    settings,
                    viewer,
                    device,
                    &stream,
                    changes_tx,
                    &stop_input,
                )?
            }
            FrameSource::Memory { frames, count } => memory_reader(frames, count),
            FrameSource::Paced {
                frames,
                first,
                fps,
                count,
            } => paced_reader(frames, first, fps, count),
            FrameSource::Channel(frames) => channel_reader(frames, stop_input.clone()),
        };
        log::debug!("estimated frames: {estimated_frames:?}");
        let counters = Arc::new(Counters::default());
        let queue = if viewer { 1 } else { settings.pipeline.queue };
        let (frame_tx, frame_rx) = bounded::<Arrived>(queue);
        let (event_tx, event_rx) = bounded::<PipelineEvent>(settings.pipeline.queue.max(2) * 2);
        let (cmd_tx, cmd_rx) = bounded::<Command>(64);

        let (c, stop) = (counters.clone(), stop_input.clone());
        let src_thread = crate::stream_label::spawn("morphoscope-source".into(), move || {
            source_loop(&mut next, &frame_tx, live, max_frames, &stop, &c);
        })
        .map_err(PipelineError::Thread)?;

        let started = worker::start(
            backend,
            settings,
            frame_rx,
            cmd_rx,
            event_tx,
            delivery,
            want,
            counters.clone(),
        );
        let (worker, collector) = match started {
            Ok(threads) => threads,
            Err(e) => {
                // The analyses could not start (a stage's setup failed on the device, bad
                // settings): end the source thread before answering, so that no thread is left
                // decoding (or waiting on a channel) while the caller reports and exits.
                stop_input.store(true, Ordering::Relaxed);
                let _ = src_thread.join();
                return Err(e);
            }
        };
        Ok(Self {
            events: event_rx,
            source_changes,
            commands: cmd_tx,
            counters,
            estimated_frames,
            backend: backend.describe(),
            stop_input,
            stream,
            threads: vec![src_thread, worker, collector],
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
    pub(crate) fn stream_info(&self) -> StreamInfo {
        self.stream.lock().map(|i| i.clone()).unwrap_or_default()
    }

    /// Asks the worker to stop and waits for every thread.
    pub fn stop(mut self) {
        self.stop_input.store(true, Ordering::Relaxed);
        let _ = self.commands.send(Command::Stop);
        // Unblock a collector waiting to deliver: drain events until the channel closes.
        while self
            .events
            .recv_timeout(std::time::Duration::from_millis(200))
            .is_ok()
        {}
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Waits for every thread (after `End` or `Error` was received).
    pub fn join(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The source thread: frames into the bounded channel until the source ends, `stop` is set or
/// `max_frames` were taken; a live source drops (and counts) what does not fit, any other
/// source blocks.
fn source_loop(
    next: &mut dyn FnMut() -> Result<Option<Frame>, SourceError>,
    tx: &Sender<Arrived>,
    live: bool,
    max_frames: Option<u64>,
    stop: &AtomicBool,
    c: &Counters,
) {
    let mut accepted = 0u64;
    while !stop.load(Ordering::Relaxed) && max_frames.is_none_or(|m| accepted < m) {
        let msg = match next() {
            Ok(Some(f)) => {
                c.frames_in.fetch_add(1, Ordering::Relaxed);
                Ok((f, Instant::now()))
            }
            Ok(None) => break,
            Err(e) => Err(e),
        };
        let is_err = msg.is_err();
        if live && !is_err {
            match tx.try_send(msg) {
                Ok(()) => accepted += 1,
                Err(TrySendError::Full(_)) => {
                    c.dropped.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => break,
            }
        } else if tx.send(msg).is_err() || is_err {
            break;
        } else {
            accepted += 1;
        }
    }
}

/// The worker's frame supply: the next frame, `None` at the end of input.
type NextFrame = Box<dyn FnMut() -> Result<Option<Frame>, SourceError> + Send>;

/// How the source thread reads a [`FrameSource`]: the next frame (`None` at its end), the frames
/// it expects when known, and whether it is live (frames the analyses cannot keep up with are
/// dropped before analysis instead of queueing up latency).
struct Reader {
    next: NextFrame,
    estimated_frames: Option<u64>,
    live: bool,
}

/// Opens source `spec` (paced in real time where the settings or the viewer ask for it; a
/// stream server that is down at the start is waited for, as after a loss) behind its
/// reconnection policy; `stream` gets what the source reports, completed at its first frame,
/// and `changes_tx` its losses and reopenings. With `device` (a CUDA backend's GPU) a hardware
/// decoder's frames stay in that GPU's memory.
fn spec_reader(
    spec: SourceSpec,
    settings: &Settings,
    viewer: bool,
    device: Option<Arc<crate::gpu::GpuContext>>,
    stream: &Arc<Mutex<StreamInfo>>,
    changes_tx: Sender<SourceChange>,
    stop_input: &Arc<AtomicBool>,
) -> Result<Reader, PipelineError> {
    let realtime = match settings.source.pacing {
        Pacing::Auto => viewer,
        Pacing::Realtime => true,
        Pacing::Fast => false,
    };
    let opts = SourceOptions {
        format: settings.source.format,
        test: settings.source.test.clone(),
        realtime,
        timeout: std::time::Duration::from_secs(u64::from(settings.source.timeout_seconds)),
        interrupt: Some(stop_input.clone()),
        device,
    };
    let policy = settings.source.reconnect.policy();
    let (mut src, estimated, live) = match Source::open_with(&spec, &opts) {
        Ok(src) => {
            let estimated = match &spec {
                SourceSpec::Test(_) if settings.source.test.frames > 0 => {
                    Some(u64::from(settings.source.test.frames))
                }
                _ => src.estimated_frames(),
            };
            if let Ok(mut i) = stream.lock() {
                *i = src.stream_info();
            }
            let live = src.stream_info().live;
            (
                Reconnecting::new(src, opts, policy, changes_tx),
                estimated,
                live,
            )
        }
        // A stream server that is down at the start is waited for, as after a loss.
        Err(e) => match policy {
            Some(p) if e.may_pass() && spec.awaited_at_start() => (
                Reconnecting::unopened(spec, opts, p, changes_tx, &e),
                None,
                true,
            ),
            _ => return Err(e.into()),
        },
    };
    // In the viewer every source is treated as live: frames the analyses cannot keep
    // up with are dropped before analysis instead of queueing up latency.
    let live = live || viewer;
    let info = stream.clone();
    let next = move || {
        let f = src.next_frame();
        // What the stream reports is complete once the first frame was decoded.
        if let Ok(Some(f)) = &f
            && f.index == 0
            && let Ok(mut i) = info.lock()
        {
            *i = src.stream_info();
        }
        f
    };
    Ok(Reader {
        next: Box::new(next),
        estimated_frames: estimated,
        live,
    })
}

/// `count` frames from memory as fast as they are taken, cycling through `frames`.
fn memory_reader(frames: Arc<Vec<Frame>>, count: u64) -> Reader {
    let mut k = 0u64;
    let next = move || {
        if k >= count || frames.is_empty() {
            return Ok(None);
        }
        let mut f = frames[(k % frames.len() as u64) as usize].clone();
        f.index = k;
        k += 1;
        Ok(Some(f))
    };
    Reader {
        next: Box::new(next),
        estimated_frames: Some(count),
        live: false,
    }
}

/// `count` frames from memory at `fps` in real time (a live source), cycling through `frames`
/// from `first`, with timestamps of that rate.
fn paced_reader(frames: Arc<Vec<Frame>>, first: usize, fps: f64, count: u64) -> Reader {
    let period_nanos = 1e9 / fps.max(1e-3);
    let mut k = 0u64;
    let mut started: Option<Instant> = None;
    let next = move || {
        if k >= count || frames.is_empty() {
            return Ok(None);
        }
        let t0 = *started.get_or_insert_with(Instant::now);
        let due = t0 + std::time::Duration::from_nanos((k as f64 * period_nanos) as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        // A copy of the held frame, as a decoder would hand over a new buffer.
        let mut f = frames[(first + k as usize) % frames.len()].clone();
        f.index = k;
        f.pts_nanos = Some((k as f64 * period_nanos) as u64);
        k += 1;
        Ok(Some(f))
    };
    Reader {
        next: Box::new(next),
        estimated_frames: Some(count),
        live: true,
    }
}

/// Frames sent on a channel, until it closes or `stop` is set (checked every 50 ms while none
/// arrives).
fn channel_reader(frames: Receiver<Frame>, stop: Arc<AtomicBool>) -> Reader {
    let next = move || {
        loop {
            match frames.recv_timeout(std::time::Duration::from_millis(50)) {
                Ok(f) => return Ok(Some(f)),
                Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => {}
                Err(_) => return Ok(None),
            }
        }
    };
    Reader {
        next: Box::new(next),
        estimated_frames: None,
        live: false,
    }
}

/// Runs `frames` (indices as given) through a whole pipeline on `backend` with `ops` and a ring
/// of `ring_size` slots, and returns every analysed frame in order (tests and tools).
pub fn run_frames(
    backend: &Backend,
    ops: &OpSettings,
    ring_size: usize,
    frames: Vec<Frame>,
    want: PictureWant,
) -> Result<Vec<AnalysedFrame>, String> {
    let mut settings = Settings {
        ops: ops.clone(),
        ..Settings::default()
    };
    settings.pipeline.ring_size = ring_size;
    run_frames_with(backend, &settings, frames, want)
}

/// [`run_frames`] with whole settings (the pipeline's ring size, upload mode, ...).
pub fn run_frames_with(
    backend: &Backend,
    settings: &Settings,
    frames: Vec<Frame>,
    want: PictureWant,
) -> Result<Vec<AnalysedFrame>, String> {
    let count = frames.len() as u64;
    let indices: Vec<u64> = frames.iter().map(|f| f.index).collect();
    let source = FrameSource::Memory {
        frames: Arc::new(frames),
        count,
    };
    let pipeline = Pipeline::start(source, settings, backend, Delivery::All, want)
        .map_err(|e| e.to_string())?;
    let mut out = collect_all(&pipeline)?;
    // Memory sources number frames 0.. in delivery order: give back the caller's.
    for (f, &i) in out.iter_mut().zip(&indices) {
        f.index = i;
    }
    pipeline.join();
    Ok(out)
}

/// What [`run_source`] gives back.
#[derive(Debug)]
pub struct SourceRun {
    /// Every analysed frame, in order.
    pub frames: Vec<AnalysedFrame>,
    /// The video decoder the source plugged, if any.
    pub decoder: Option<String>,
    /// The frames arrived in the analyses' CUDA memory (a hardware decoder's output, read in
    /// place), not in system memory.
    pub frames_on_device: bool,
}

/// Runs every frame of `spec` through a whole pipeline on `backend` with `settings`, as
/// `morphoscope run` reads it (tests and tools).
pub fn run_source(
    backend: &Backend,
    settings: &Settings,
    spec: SourceSpec,
    want: PictureWant,
) -> Result<SourceRun, String> {
    let pipeline = Pipeline::start(
        FrameSource::Spec(spec),
        settings,
        backend,
        Delivery::All,
        want,
    )
    .map_err(|e| e.to_string())?;
    let frames = collect_all(&pipeline)?;
    let info = pipeline.stream_info();
    pipeline.join();
    Ok(SourceRun {
        frames,
        decoder: info.decoder,
        frames_on_device: info.frames_on_device,
    })
}

/// Every frame `pipeline` delivers until its end; its error, if it reports one.
fn collect_all(pipeline: &Pipeline) -> Result<Vec<AnalysedFrame>, String> {
    let mut out = Vec::new();
    let mut error = None;
    while let Ok(ev) = pipeline.events.recv() {
        match ev {
            PipelineEvent::Frame(f) => out.push(*f),
            PipelineEvent::Error(e) => error = Some(e),
            PipelineEvent::End => break,
        }
    }
    error.map_or(Ok(out), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{DynImage, Image};

    fn frames(n: u64) -> Vec<Frame> {
        (0..n)
            .map(|i| Frame {
                index: i,
                pts_nanos: Some(i * 40_000_000),
                image: DynImage::Rgb8(Image::from_fn(48, 32, |x, y| {
                    [
                        (x * 5 + i as usize) as u8,
                        (y * 7) as u8,
                        ((x + y) * 3) as u8,
                    ]
                }))
                .into(),
                after_gap: false,
            })
            .collect()
    }

    fn small_ops() -> OpSettings {
        let mut ops = OpSettings::default();
        ops.orientation.length = 5;
        ops.orientation.angles = 4;
        ops
    }

    #[test]
    fn a_pipeline_that_fails_to_start_leaves_no_source_thread_behind() {
        // Bad analysis settings get past no validation here: the worker's setup fails.
        let mut settings = Settings::default();
        settings.ops.orientation.length = 4;
        let (tx, rx) = bounded::<Frame>(2);
        let started = Pipeline::start(
            FrameSource::Channel(rx),
            &settings,
            &Backend::Cpu,
            Delivery::All,
            PictureWant::None,
        );
        assert!(started.is_err(), "an even orientation length is refused");
        // The source thread took the channel's receiving end; it has ended and dropped it.
        let frame = frames(1).remove(0);
        assert!(
            tx.send(frame).is_err(),
            "the source thread still holds the channel after a failed start"
        );
    }

    #[test]
    fn cpu_pipeline_delivers_every_frame_in_order_with_pictures_only_when_asked() {
        let ops = small_ops();
        let none = run_frames(&Backend::Cpu, &ops, 2, frames(7), PictureWant::None).unwrap();
        assert_eq!(
            none.iter().map(|f| f.index).collect::<Vec<_>>(),
            (0..7).collect::<Vec<_>>()
        );
        assert!(
            none.iter().all(|f| f.picture.is_none()),
            "no pixels asked for"
        );
        assert!(
            none.iter().all(|f| f.outputs.len() == 5),
            "every analysis ran"
        );
        let with = run_frames(
            &Backend::Cpu,
            &ops,
            2,
            frames(7),
            PictureWant::Every(PictureFormat::Rgba),
        )
        .unwrap();
        assert_eq!(with.len(), 7);
        for (a, b) in none.iter().zip(&with) {
            let p = b.picture.as_deref().expect("a picture every frame");
            assert_eq!(
                (p.format, p.width, p.height, p.data.len()),
                (PictureFormat::Rgba, 48, 32, 48 * 32 * 4)
            );
            assert_eq!(
                a.outputs.iter().map(|o| &o.summary).collect::<Vec<_>>(),
                b.outputs.iter().map(|o| &o.summary).collect::<Vec<_>>()
            );
            assert!(b.timings.regions.iter().any(|r| r.0 == "compose"));
        }
    }

    #[test]
    fn a_channel_source_delivers_the_callers_frames_in_order_and_ends_when_the_sender_goes() {
        let settings = Settings {
            ops: small_ops(),
            ..Settings::default()
        };
        let (tx, rx) = bounded::<Frame>(2);
        let p = Pipeline::start(
            FrameSource::Channel(rx),
            &settings,
            &Backend::Cpu,
            Delivery::All,
            PictureWant::None,
        )
        .unwrap();
        let feeder = std::thread::spawn(move || {
            for mut f in frames(5) {
                f.index += 10;
                tx.send(f).unwrap();
            }
        });
        let mut got = Vec::new();
        loop {
            match p
                .events
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap()
            {
                PipelineEvent::Frame(f) => got.push((f.index, f.pts_nanos)),
                PipelineEvent::End => break,
                PipelineEvent::Error(e) => panic!("{e}"),
            }
        }
        feeder.join().unwrap();
        p.join();
        assert_eq!(
            got,
            (0..5)
                .map(|i| (i + 10, Some(i * 40_000_000)))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_viewer_gets_a_picture_only_after_taking_the_last_one() {
        let settings = Settings {
            ops: small_ops(),
            ..Settings::default()
        };
        let mailbox = Arc::new(Mailbox::new());
        let source = FrameSource::Memory {
            frames: Arc::new(frames(1)),
            count: 40,
        };
        let p = Pipeline::start(
            source,
            &settings,
            &Backend::Cpu,
            Delivery::Latest(mailbox.clone()),
            PictureWant::WhenTaken(PictureFormat::Rgba),
        )
        .unwrap();
        let ev = p
            .events
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap();
        assert!(matches!(ev, PipelineEvent::End), "{ev:?}");
        let p_counters = p.counters.clone();
        p.join();
        // Nobody took frames: the first got a picture and stays for the viewer; the ones after
        // it got none (the viewer had not taken the first) and did not replace it.
        let waiting = mailbox.take().expect("the composed frame");
        assert_eq!(waiting.index, 0);
        assert!(waiting.picture.is_some());
        assert_eq!(mailbox.replaced.load(Ordering::Relaxed), 0);
        assert_eq!(
            p_counters.snapshot().frames_out,
            40,
            "every frame counted as analysed"
        );
    }
}
