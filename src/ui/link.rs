//! The viewer's connection to a pipeline worker: the newest-frame mailbox, the command channel,
//! the final `End`/`Error` event and the frame counters.
//!
//! Starting a pipeline opens GStreamer and may build CUDA state, and stopping one joins its
//! threads; both happen on short-lived helper threads, never on the UI thread. The UI polls
//! [`Link::poll`] once per repaint. Settings changes are coalesced: at most one
//! `Command::Settings` waits to be sent, the newest, retried on the next repaint when the bounded
//! command channel is full (a drag of a slider must never block the UI).
//!
//! A [`Link`] can also be *detached*: no pipeline, the channels' other ends held by a test
//! ([`super::TestLink`]), which feeds frames and events and observes the commands.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded};
use eframe::egui;

use crate::analysis::{AnalysedFrame, OpSettings};
use crate::backend::Backend;
use crate::config::Settings;
use crate::compose::{ComposeStyle, LayerStyle, PictureFormat};
use crate::pipeline::{Command, Counters, Delivery, FrameSource, Mailbox, PictureWant, Pipeline, PipelineEvent};
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
    stoppers: Vec<JoinHandle<()>>,
}

impl Link {
    /// A link that starts pipelines on `backend`.
    #[must_use]
    pub fn new(backend: Backend) -> Self {
        Self { worker: None, opening: None, backend: Some(backend), pending_settings: None, stoppers: Vec::new() }
    }

    /// A link without a pipeline: the returned ends let a caller play the worker.
    pub(crate) fn detached(backend_label: &str) -> (Self, Receiver<Command>, Sender<PipelineEvent>, Arc<Mailbox>, Arc<Counters>) {
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
        let link = Self { worker: Some(worker), opening: None, backend: None, pending_settings: None, stoppers: Vec::new() };
        (link, cmd_rx, ev_tx, mailbox, counters)
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
                let replaced = w.mailbox.replaced.load(std::sync::atomic::Ordering::Relaxed);
                (c.frames_in, c.frames_out, c.dropped, replaced)
            }
            None => (0, 0, 0, 0),
        }
    }

    /// Stops the current pipeline (on a helper thread) and opens `spec` on another; the result
    /// arrives through [`Self::poll`]. `ctx` is repainted when frames arrive.
    pub fn open(&mut self, spec: SourceSpec, settings: &Settings, ctx: &egui::Context) {
        let Some(backend) = self.backend.clone() else {
            return;
        };
        self.stop_async();
        let source = spec.to_string();
        let settings = settings.clone();
        let ctx = ctx.clone();
        let (tx, rx) = bounded(1);
        let spawned = std::thread::Builder::new().name("morphoscope-open".into()).spawn(move || {
            let mailbox = Arc::new(Mailbox::new());
            let waker_ctx = ctx.clone();
            mailbox.set_waker(move || waker_ctx.request_repaint());
            // On the GPU the analyses' layers stay on the device: the pipeline composes the
            // picture (rasters only; the viewer draws the shapes itself) at the display rate. The
            // CPU backend hands its host layers over and the viewer blends them.
            let want = match &backend {
                Backend::Cuda(_) => PictureWant::WhenTaken(PictureFormat::Rgba),
                Backend::Cpu => PictureWant::None,
            };
            let r = Pipeline::start(FrameSource::Spec(spec.clone()), &settings, &backend, Delivery::Latest(mailbox.clone()), want)
                .inspect(|p| {
                    let style = ComposeStyle::default().with("cca", LayerStyle::HIDDEN);
                    let _ = p.commands.try_send(Command::Style(Box::new(style)));
                })
                .map(|p| (p, mailbox))
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
        self.flush_settings();
    }

    fn flush_settings(&mut self) {
        let (Some(w), Some(s)) = (&self.worker, self.pending_settings.take()) else {
            return;
        };
        match w.commands.try_send(Command::Settings(Box::new(s))) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(Command::Settings(s))) => self.pending_settings = Some(*s),
            Err(TrySendError::Full(_)) => {}
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
        self.flush_settings();
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
            match std::thread::Builder::new().name("morphoscope-stop".into()).spawn(move || p.stop()) {
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

