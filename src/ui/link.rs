//! The viewer's connection to a stream: the newest-frame mailbox, the command channel, the final
//! `End`/`Error` event and the frame counters.
//!
//! Each source the viewer opens is a [`crate::lifecycle`] stream on a thread of its own, whose
//! results go to a mailbox ([`StreamOutput::Mailbox`]): the same opening, reconnecting and
//! finishing as a headless run's, without files. Opening a source opens GStreamer and may build
//! CUDA state, and stopping a stream joins its pipeline's threads; both happen on that thread,
//! never on the UI thread. The pipeline composes an RGBA picture only when the viewer has taken
//! the previous frame, so composing follows the display rate. The UI polls
//! `Link::poll` once per repaint. Settings and layer-style changes are coalesced: at most one
//! `Command::Settings` and one `Command::Style` wait to be sent, the newest, retried on the next
//! repaint when the bounded command channel is full (a drag of a slider must never block the
//! UI).
//!
//! A `Link` can also be *detached*: no pipeline, the channels' other ends held by a test
//! ([`TestLink`]), which feeds frames and events and observes the commands.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded};
use eframe::egui;

use crate::analysis::{AnalysedFrame, OpSettings};
use crate::backend::Backend;
use crate::compose::{ComposeStyle, PictureFormat, compose_cpu};
use crate::config::Settings;
use crate::lifecycle::{
    self, LiveSettings, State, StopRequest, StreamJob, StreamObserver, StreamOutput,
};
use crate::pipeline::{Command, Mailbox, PipelineEvent};
use crate::source::SourceSpec;
use crate::stats::Counters;

/// What [`Link::poll`] found since the last poll.
#[derive(Debug, Default)]
pub(crate) struct Polled {
    /// The newest analysed frame, if one arrived.
    pub frame: Option<AnalysedFrame>,
    /// The stream ended normally.
    pub ended: bool,
    /// The source or an analysis failed (once per pipeline), or a pipeline failed to start.
    pub error: Option<String>,
    /// A pipeline that was being opened is now running.
    pub started: bool,
}

/// The channels of one running (or simulated) worker.
struct Worker {
    commands: Sender<Command>,
    events: Receiver<PipelineEvent>,
    mailbox: Arc<Mailbox>,
    counters: Arc<Counters>,
    backend: String,
    /// The live source is lost and being reopened.
    reconnecting: Arc<AtomicBool>,
    /// `None` when detached (a test holds the other ends).
    stream: Option<Stream>,
}

/// A stream's thread and the request that stops it.
struct Stream {
    stop: StopRequest,
    thread: JoinHandle<()>,
}

impl Stream {
    /// Asks the stream to stop (it finishes on its own thread) and hands back its thread.
    fn stop(self) -> JoinHandle<()> {
        self.stop.ask(lifecycle::REMOVED);
        self.thread
    }
}

/// What a stream hands the viewer once its pipeline runs.
struct Started {
    commands: Sender<Command>,
    counters: Arc<Counters>,
    backend: String,
}

/// A stream whose source is being opened on its thread.
struct Opening {
    source: String,
    result: Receiver<Result<Started, String>>,
    events: Receiver<PipelineEvent>,
    mailbox: Arc<Mailbox>,
    reconnecting: Arc<AtomicBool>,
    stream: Option<Stream>,
}

/// Connection to the worker (see the module docs).
pub(crate) struct Link {
    worker: Option<Worker>,
    opening: Option<Opening>,
    backend: Option<Backend>,
    pending_settings: Option<OpSettings>,
    pending_style: Option<ComposeStyle>,
    stoppers: Vec<JoinHandle<()>>,
}

impl Link {
    /// A link that starts pipelines on `backend`.
    #[must_use]
    pub fn new(backend: Backend) -> Self {
        Self {
            worker: None,
            opening: None,
            backend: Some(backend),
            pending_settings: None,
            pending_style: None,
            stoppers: Vec::new(),
        }
    }

    /// A link without a pipeline: the returned [`TestLink`] lets a caller play the worker.
    pub(crate) fn detached(backend_label: &str) -> (Self, TestLink) {
        let (cmd_tx, cmd_rx) = bounded(256);
        let (ev_tx, ev_rx) = bounded(256);
        let mailbox = Arc::new(Mailbox::new());
        let counters = Arc::new(Counters::default());
        let reconnecting = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            commands: cmd_tx,
            events: ev_rx,
            mailbox: mailbox.clone(),
            counters: counters.clone(),
            backend: backend_label.to_owned(),
            reconnecting: Arc::clone(&reconnecting),
            stream: None,
        };
        let link = Self {
            worker: Some(worker),
            opening: None,
            backend: None,
            pending_settings: None,
            pending_style: None,
            stoppers: Vec::new(),
        };
        let test = TestLink {
            commands: cmd_rx,
            events: ev_tx,
            mailbox,
            counters,
            reconnecting,
            seen: Mutex::new(Vec::new()),
            style: Mutex::new(ComposeStyle::default()),
        };
        (link, test)
    }

    /// Whether pipelines can be started (false when detached).
    #[must_use]
    pub(crate) fn can_open(&self) -> bool {
        self.backend.is_some()
    }

    /// The backend line of the running pipeline (e.g. `cuda: NVIDIA H100 (sm_90, 79.1 GiB)`), else
    /// the backend that new pipelines will use.
    #[must_use]
    pub(crate) fn backend_label(&self) -> String {
        match (&self.worker, &self.backend) {
            (Some(w), _) => w.backend.clone(),
            (None, Some(b)) => b.describe(),
            (None, None) => "none".to_owned(),
        }
    }

    /// The SOURCE being opened, while a helper thread opens it.
    #[must_use]
    pub fn opening(&self) -> Option<&str> {
        self.opening.as_ref().map(|o| o.source.as_str())
    }

    /// Whether the running stream's live source is lost and being reopened.
    #[must_use]
    pub fn reconnecting(&self) -> bool {
        self.worker
            .as_ref()
            .is_some_and(|w| w.reconnecting.load(Ordering::Relaxed))
    }

    /// Frames delivered by the source, analysed, and dropped (source drops + frames the mailbox
    /// replaced before the UI took them).
    #[must_use]
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        match &self.worker {
            Some(w) => {
                let c = w.counters.snapshot();
                let replaced = w
                    .mailbox
                    .replaced
                    .load(std::sync::atomic::Ordering::Relaxed);
                (c.frames_in, c.frames_out, c.dropped, replaced)
            }
            None => (0, 0, 0, 0),
        }
    }

    /// Stops the current stream (on its thread) and opens `spec` as a new one, its pictures
    /// composed with `style`; the result arrives through [`Self::poll`]. `ctx` is repainted when
    /// frames arrive.
    pub fn open(
        &mut self,
        spec: SourceSpec,
        settings: &Settings,
        style: &ComposeStyle,
        ctx: &egui::Context,
    ) {
        let Some(backend) = self.backend.clone() else {
            return;
        };
        self.stop_async();
        let source = spec.to_string();
        let settings = settings.clone();
        self.pending_style = None;
        let mailbox = Arc::new(Mailbox::new());
        let waker_ctx = ctx.clone();
        mailbox.set_waker(move || waker_ctx.request_repaint());
        let (started, result) = bounded(1);
        let (ended, events) = bounded(1);
        let stop = StopRequest::new();
        let reconnecting = Arc::new(AtomicBool::new(false));
        let mut observer = ViewerObserver {
            started: Some(started),
            style: Some(Box::new(style.clone())),
            reconnecting: Arc::clone(&reconnecting),
            ctx: ctx.clone(),
        };
        let job_mailbox = Arc::clone(&mailbox);
        let job_stop = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("morphoscope-view".into())
            .spawn(move || {
                let job = StreamJob {
                    index: 0,
                    spec,
                    output: StreamOutput::Mailbox(job_mailbox),
                    settings: &settings,
                    backend: &backend,
                    max_frames: None,
                    live: LiveSettings::new(),
                };
                let outcome = lifecycle::run(job, &job_stop, &mut observer);
                match observer.started.take() {
                    // It never ran: why, in place of the start.
                    Some(started) => {
                        let why = outcome.error.unwrap_or(outcome.ended);
                        let _ = started.send(Err(why));
                    }
                    None => {
                        let _ = ended.send(match outcome.error {
                            Some(e) => PipelineEvent::Error(e),
                            None => PipelineEvent::End,
                        });
                    }
                }
                observer.ctx.request_repaint();
            });
        let stream = match spawned {
            Ok(thread) => Some(Stream { stop, thread }),
            Err(e) => {
                let (tx, rx) = bounded(1);
                let _ = tx.send(Err(format!("cannot start a thread: {e}")));
                self.opening = Some(Opening {
                    source,
                    result: rx,
                    events,
                    mailbox,
                    reconnecting,
                    stream: None,
                });
                return;
            }
        };
        self.opening = Some(Opening {
            source,
            result,
            events,
            mailbox,
            reconnecting,
            stream,
        });
    }

    /// Sends a command now (pause, step). Settings go through [`Self::send_settings`].
    pub fn send(&mut self, cmd: Command) {
        if let Some(w) = &self.worker
            && let Err(TrySendError::Full(_)) = w.commands.try_send(cmd)
        {
            log::warn!("viewer: command channel full; command dropped");
        }
    }

    /// Queues new analysis settings; the newest queued settings are sent on this or a later poll.
    pub(crate) fn send_settings(&mut self, ops: &OpSettings) {
        self.pending_settings = Some(ops.clone());
        self.flush_pending();
    }

    /// Queues new layer styles for the composed picture; the newest queued styles are sent on
    /// this or a later poll.
    pub(crate) fn send_style(&mut self, style: &ComposeStyle) {
        self.pending_style = Some(style.clone());
        self.flush_pending();
    }

    /// Sends the queued settings and styles; what does not fit in the command channel waits for
    /// the next call. Without a worker (a pipeline still opening) they wait too.
    fn flush_pending(&mut self) {
        let Some(w) = &self.worker else { return };
        if let Some(s) = self.pending_settings.take()
            && let Err(TrySendError::Full(Command::Settings(s))) =
                w.commands.try_send(Command::Settings(Box::new(s)))
        {
            self.pending_settings = Some(*s);
        }
        if let Some(s) = self.pending_style.take()
            && let Err(TrySendError::Full(Command::Style(s))) =
                w.commands.try_send(Command::Style(Box::new(s)))
        {
            self.pending_style = Some(*s);
        }
    }

    /// Collects what happened since the last call: a newly started pipeline, the newest frame,
    /// the end or an error.
    pub(crate) fn poll(&mut self) -> Polled {
        let mut out = Polled::default();
        if let Some(o) = &self.opening {
            let opened = match o.result.try_recv() {
                Err(TryRecvError::Empty) => None,
                Ok(r) => Some(r),
                Err(TryRecvError::Disconnected) => Some(Err(
                    "opening the source failed (its thread ended)".to_owned(),
                )),
            };
            if let Some(opened) = opened
                && let Some(o) = self.opening.take()
            {
                match opened {
                    Ok(started) => {
                        self.worker = Some(Worker {
                            commands: started.commands,
                            events: o.events,
                            mailbox: o.mailbox,
                            counters: started.counters,
                            backend: started.backend,
                            reconnecting: o.reconnecting,
                            stream: o.stream,
                        });
                        out.started = true;
                    }
                    Err(e) => {
                        out.error = Some(e);
                        if let Some(s) = o.stream {
                            self.stoppers.push(s.stop());
                        }
                    }
                }
            }
        }
        self.flush_pending();
        if let Some(w) = &self.worker {
            out.frame = w.mailbox.take();
            loop {
                match w.events.try_recv() {
                    // Only with `Delivery::All`; the viewer asks for `Latest`, but take it anyway.
                    Ok(PipelineEvent::Frame(f)) => out.frame = Some(*f),
                    Ok(PipelineEvent::End) => out.ended = true,
                    Ok(PipelineEvent::Error(e)) => out.error = Some(e),
                    Err(_) => break,
                }
            }
            if out.frame.is_none() && (out.ended || out.error.is_some()) {
                // The worker puts its last frames before the final event: take them.
                out.frame = w.mailbox.take();
            }
        }
        self.stoppers.retain(|h| !h.is_finished());
        out
    }

    /// Asks the running or opening stream to stop; it finishes on its own thread.
    fn stop_async(&mut self) {
        if let Some(s) = self.worker.take().and_then(|w| w.stream) {
            self.stoppers.push(s.stop());
        }
        if let Some(s) = self.opening.take().and_then(|o| o.stream) {
            // A stop interrupts a source still opening (a server that accepts and never answers).
            self.stoppers.push(s.stop());
        }
    }

    /// Stops everything and waits (at exit).
    pub(crate) fn shutdown(&mut self) {
        self.stop_async();
        for h in self.stoppers.drain(..) {
            let _ = h.join();
        }
    }
}

/// Hands the viewer its stream's pipeline once it runs, its look set first.
struct ViewerObserver {
    started: Option<Sender<Result<Started, String>>>,
    style: Option<Box<ComposeStyle>>,
    /// Set while the live source is lost and being reopened.
    reconnecting: Arc<AtomicBool>,
    ctx: egui::Context,
}

impl StreamObserver for ViewerObserver {
    fn state(&mut self, state: State) {
        self.reconnecting
            .store(state == State::Reconnecting, Ordering::Relaxed);
        self.ctx.request_repaint();
    }

    fn started(&mut self, commands: &Sender<Command>, counters: &Arc<Counters>, backend: &str) {
        // The worker reads commands before each frame: the first pictures (nearly always) have
        // the viewer's look already.
        if let Some(style) = self.style.take() {
            let _ = commands.try_send(Command::Style(style));
        }
        if let Some(started) = self.started.take() {
            let _ = started.send(Ok(Started {
                commands: commands.clone(),
                counters: Arc::clone(counters),
                backend: backend.to_owned(),
            }));
        }
        self.ctx.request_repaint();
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The other ends of a detached app's link: a test plays the worker with them.
pub struct TestLink {
    /// Commands the app sent (settings, styles, pause, step); read them with [`TestLink::drain`].
    pub commands: Receiver<Command>,
    /// Send `End` or `Error` as the worker would.
    pub events: Sender<PipelineEvent>,
    /// Put frames here as the worker does (newest wins).
    pub mailbox: Arc<Mailbox>,
    /// The worker's counters (frames in/out, dropped).
    pub counters: Arc<Counters>,
    /// Set it as a stream whose live source is lost and being reopened would.
    pub reconnecting: Arc<AtomicBool>,
    /// Commands read by [`TestLink::deliver`] and not drained yet.
    seen: Mutex<Vec<Command>>,
    /// The newest style the app sent (the worker's default before any).
    style: Mutex<ComposeStyle>,
}

impl TestLink {
    /// Delivers a frame as the worker would on the CPU backend: composes its picture from its
    /// host layers with the newest style the app sent, counts it and puts it in the mailbox.
    pub fn deliver(&self, mut f: AnalysedFrame) {
        self.read_commands();
        let picture = self.style.lock().ok().map(|style| {
            compose_cpu(
                &crate::analysis::overlay::layers_of(&f),
                &style,
                PictureFormat::Rgba,
            )
        });
        match picture {
            Some(Ok(p)) => f.picture = Some(Arc::new(p)),
            Some(Err(e)) => log::warn!("test link: frame {} not composed: {e}", f.index),
            None => {}
        }
        self.deliver_as_is(f);
    }

    /// Delivers a frame unchanged (with or without a picture), counts it and puts it in the
    /// mailbox.
    pub fn deliver_as_is(&self, f: AnalysedFrame) {
        self.counters.frames_in.fetch_add(1, Ordering::Relaxed);
        self.counters.frames_out.fetch_add(1, Ordering::Relaxed);
        self.mailbox.put(f);
    }

    /// The newest style the app sent (the pipeline's default before any).
    #[must_use]
    pub fn style(&self) -> ComposeStyle {
        self.read_commands();
        self.style.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Takes every command sent so far.
    pub fn drain(&self) -> Vec<Command> {
        self.read_commands();
        self.seen
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }

    /// Moves the commands waiting in the channel to `seen`, noting the newest style.
    fn read_commands(&self) {
        let (Ok(mut seen), Ok(mut style)) = (self.seen.lock(), self.style.lock()) else {
            return;
        };
        for c in self.commands.try_iter() {
            if let Command::Style(s) = &c {
                style.clone_from(s);
            }
            seen.push(c);
        }
    }
}
