//! The viewer's connection to a pipeline worker: the newest-frame mailbox, the command channel,
//! the final `End`/`Error` event and the frame counters.
//!
//! Starting a pipeline opens GStreamer and may build CUDA state, and stopping one joins its
//! threads; both happen on short-lived helper threads, never on the UI thread. The pipeline is
//! asked for an RGBA picture only when the viewer has taken the previous frame
//! ([`PictureWant::WhenTaken`]), so composing follows the display rate. The UI polls
//! [`Link::poll`] once per repaint. Settings and layer-style changes are coalesced: at most one
//! `Command::Settings` and one `Command::Style` wait to be sent, the newest, retried on the next
//! repaint when the bounded command channel is full (a drag of a slider must never block the
//! UI).
//!
//! A [`Link`] can also be *detached*: no pipeline, the channels' other ends held by a test
//! ([`TestLink`]), which feeds frames and events and observes the commands.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded};
use eframe::egui;

use crate::analysis::{AnalysedFrame, OpSettings};
use crate::backend::Backend;
use crate::compose::{ComposeStyle, PictureFormat, compose_cpu};
use crate::config::Settings;
use crate::pipeline::{
    Command, Counters, Delivery, FrameSource, Mailbox, PictureWant, Pipeline, PipelineEvent,
};
use crate::source::SourceSpec;

/// What [`Link::poll`] found since the last poll.
#[derive(Debug, Default)]
pub struct Polled {
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
    /// `None` when detached (a test holds the other ends).
    pipeline: Option<Pipeline>,
}

/// A pipeline being opened on a helper thread.
struct Opening {
    source: String,
    result: Receiver<Result<(Pipeline, Arc<Mailbox>), String>>,
}

/// Connection to the worker (see the module docs).
pub struct Link {
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
        let worker = Worker {
            commands: cmd_tx,
            events: ev_rx,
            mailbox: mailbox.clone(),
            counters: counters.clone(),
            backend: backend_label.to_owned(),
            pipeline: None,
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
            seen: Mutex::new(Vec::new()),
            style: Mutex::new(ComposeStyle::default()),
        };
        (link, test)
    }

    /// Whether pipelines can be started (false when detached).
    #[must_use]
    pub fn can_open(&self) -> bool {
        self.backend.is_some()
    }

    /// The backend line of the running pipeline (e.g. `cuda: NVIDIA H100 (sm_90, 79.1 GiB)`), else
    /// the backend that new pipelines will use.
    #[must_use]
    pub fn backend_label(&self) -> String {
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

    /// Stops the current pipeline (on a helper thread) and opens `spec` on another, its pictures
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
        let style = Box::new(style.clone());
        self.pending_style = None;
        let ctx = ctx.clone();
        let (tx, rx) = bounded(1);
        let spawned = std::thread::Builder::new()
            .name("morphoscope-open".into())
            .spawn(move || {
                let mailbox = Arc::new(Mailbox::new());
                let waker_ctx = ctx.clone();
                mailbox.set_waker(move || waker_ctx.request_repaint());
                let want = PictureWant::WhenTaken(PictureFormat::Rgba);
                let r = Pipeline::start(
                    FrameSource::Spec(spec.clone()),
                    &settings,
                    &backend,
                    Delivery::Latest(mailbox.clone()),
                    want,
                )
                .map(|p| {
                    // The worker reads commands before each frame: the first pictures (nearly
                    // always) have the viewer's look already.
                    let _ = p.commands.try_send(Command::Style(style));
                    (p, mailbox)
                })
                .map_err(|e| format!("cannot open {spec}: {e}"));
                let _ = tx.send(r);
                ctx.request_repaint();
            });
        match spawned {
            Ok(_) => self.opening = Some(Opening { source, result: rx }),
            Err(e) => {
                let (tx, rx) = bounded(1);
                let _ = tx.send(Err(format!("cannot start a thread: {e}")));
                self.opening = Some(Opening { source, result: rx });
            }
        }
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
    pub fn send_settings(&mut self, ops: &OpSettings) {
        self.pending_settings = Some(ops.clone());
        self.flush_pending();
    }

    /// Queues new layer styles for the composed picture; the newest queued styles are sent on
    /// this or a later poll.
    pub fn send_style(&mut self, style: &ComposeStyle) {
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
    pub fn poll(&mut self) -> Polled {
        let mut out = Polled::default();
        if let Some(o) = &self.opening {
            match o.result.try_recv() {
                Ok(Ok((pipeline, mailbox))) => {
                    self.worker = Some(Worker {
                        commands: pipeline.commands.clone(),
                        events: pipeline.events.clone(),
                        mailbox,
                        counters: pipeline.counters.clone(),
                        backend: pipeline.backend.clone(),
                        pipeline: Some(pipeline),
                    });
                    self.opening = None;
                    out.started = true;
                }
                Ok(Err(e)) => {
                    out.error = Some(e);
                    self.opening = None;
                }
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => {
                    out.error = Some("opening the source failed (helper thread ended)".to_owned());
                    self.opening = None;
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

    /// Stops the running pipeline on a helper thread (its threads are joined there).
    fn stop_async(&mut self) {
        if let Some(w) = self.worker.take()
            && let Some(p) = w.pipeline
        {
            drop(w.events);
            match std::thread::Builder::new()
                .name("morphoscope-stop".into())
                .spawn(move || p.stop())
            {
                Ok(h) => self.stoppers.push(h),
                Err(e) => log::warn!("viewer: cannot stop the pipeline on a thread: {e}"),
            }
        }
    }

    /// Stops everything and waits (at exit).
    pub fn shutdown(&mut self) {
        if let Some(o) = self.opening.take() {
            // A pipeline still opening: wait for it, then stop it.
            if let Ok(Ok((p, _))) = o.result.recv_timeout(std::time::Duration::from_secs(10)) {
                p.stop();
            }
        }
        if let Some(w) = self.worker.take()
            && let Some(p) = w.pipeline
        {
            drop(w.events);
            p.stop();
        }
        for h in self.stoppers.drain(..) {
            let _ = h.join();
        }
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
                &crate::output::compose::layers_of(&f),
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
