//! The element's implementation: a plain `GstElement` with one sink and one src pad, whose
//! output is pushed by a task of its own on the src pad.
//!
//! Why not `GstBaseTransform`: a transform hands each input buffer back as its output in the
//! same call, while the ring keeps frames in flight and pushes them later, in order;
//! serialized events must wait behind the frames in flight, EOS must drain them, a flush must
//! drop them. Why a task: upstream's streaming thread (a decoder's) then only decodes, converts
//! and sends frames to the analyses, while the task waits for the analysed frames, decorates
//! them and pushes them, the split of `morphoscope run` (a source thread beside the analyses);
//! pushed from the input's thread, decoding and waiting for results would take turns.
//!
//! Everything bound downstream and serialized — buffers in flight ([`super::engine`]) and the
//! events between them — waits in one queue ([`State::held`]) that only the task pops, so
//! order is kept. The chain function waits (or drops, with `qos=drop`) while the engine holds
//! its capacity of frames. Stream handling: a new format (CAPS) lets the frames of the old one
//! out and restarts the engine at the next buffer; EOS follows the last frame out; a flush
//! (seek) pauses the task and drops what is in flight; serialized queries (allocation, drain)
//! wait until everything before them is out; PAUSED -> READY stops the task and the engine. The
//! backend (a CUDA context with its kernels loaded) is kept across restarts. Latency:
//! upstream's plus one frame duration per frame held (`ring-size` behind a live source). QoS:
//! see [`super::QosPolicy`]. Formats: the analyses' own (RGB, GRAY8, GRAY16_LE) and those
//! [`super::convert`] turns into RGB.
//!
//! Properties are read when the engine starts (the first buffer of a format, after a flush);
//! analysis properties set while playing apply from the next buffer on (`ring-size`, `backend`,
//! `device`, `config` and `draw` at the next start).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;
use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer::subclass::prelude::*;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use morphoscope::analysis::AnalysedFrame;
use morphoscope::backend::Backend;
use morphoscope::ops::nv12::Nv12Conversion;
use morphoscope::pipeline::PipelineEvent;
use morphoscope::source::Pixels;
use morphoscope::source::convert::{self, ToRgb};
use morphoscope::source::cuda_memory::{self, SharedContext};

use super::engine::{Engine, EngineError, Held, frame_image};
use super::settings::{PropValue, Settings, key_property};
use super::{BackendChoice, QosPolicy};
use crate::metadata;

mod properties;

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "morphoscope",
        gst::DebugColorFlags::empty(),
        Some("morphoscope analyses"),
    )
});

/// How long a thread waits before looking again at the flushing flag (the task waiting for an
/// analysed frame, the chain function waiting for room): how long a flush or stop may wait.
const RECHECK: Duration = Duration::from_millis(50);

/// The negotiated stream, the running engine and what waits to go downstream.
#[derive(Default)]
struct State {
    /// Input format.
    in_info: Option<gst_video::VideoInfo>,
    /// The conversion to RGB of an input format the analyses do not take.
    to_rgb: Option<Arc<ToRgb>>,
    /// Output format (RGB of the same size when drawing).
    out_info: Option<gst_video::VideoInfo>,
    /// Draw into the outgoing frames (fixed while a format is negotiated).
    draw: bool,
    /// The engine, from the first buffer of a format to its end.
    engine: Option<Engine>,
    /// The backend and the (backend, device, SM budget) settings it was chosen for (kept
    /// across engine restarts).
    backend: Option<(Backend, (morphoscope::config::BackendChoice, usize, u32))>,
    /// The CUDA backend's context as GStreamer's, once a decoder asked for it.
    cuda: Option<SharedContext>,
    /// How NV12 of the negotiated caps converts on the device (CUDA memory caps whose
    /// colorimetry the device conversion reproduces; otherwise buffers map to host memory).
    device_conversion: Option<Nv12Conversion>,
    /// The current segment (running times for QoS).
    segment: gst::FormattedSegment<gst::ClockTime>,
    /// Buffers in flight and the serialized events between them, in arrival order: the task
    /// pushes them from the front.
    held: VecDeque<Held>,
    /// From flush-start to flush-stop, and while the src pad is inactive: nothing flows.
    flushing: bool,
    /// Why the task stopped pushing (downstream's flow, an analysis error): the chain function
    /// returns it upstream.
    stopped: Option<gst::FlowError>,
    /// First and last sight of each track (analytics tracking entries).
    #[cfg(feature = "analytics")]
    first_seen: crate::analytics::FirstSeen,
}

impl State {
    /// Why data cannot flow now, if it cannot.
    fn blocked(&self) -> Option<gst::FlowError> {
        if self.flushing {
            Some(gst::FlowError::Flushing)
        } else {
            self.stopped
        }
    }

    /// Whether the engine holds its capacity of frames.
    fn full(&self) -> bool {
        self.engine
            .as_ref()
            .is_some_and(|e| e.in_flight() >= e.capacity)
    }
}

/// The element.
pub struct Morphoscope {
    sinkpad: gst::Pad,
    srcpad: gst::Pad,
    settings: Mutex<Settings>,
    state: Mutex<State>,
    /// Signalled whenever [`State`] changes in a way a waiting thread looks for: something
    /// held, a frame taken back, the engine finished, flushing.
    changed: Condvar,
    /// Running time before which frames are late (downstream's last QoS event).
    earliest: Mutex<Option<gst::ClockTime>>,
    /// Frames in flight at most and the frame duration, for the latency query (which must not
    /// wait for the streaming thread's lock).
    latency_frames: AtomicU64,
    frame_nanos: AtomicU64,
    dropped: AtomicU64,
    /// An analysis property changed while the engine runs: applied at the next buffer.
    settings_changed: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Caps of `formats` in system memory.
fn formats_caps(formats: &[gst_video::VideoFormat]) -> gst::Caps {
    gst_video::VideoCapsBuilder::new()
        .format_list(formats.iter().copied())
        .build()
}

/// Every input the element takes, preferred first: NV12 in CUDA memory when `cuda` (the
/// analyses may run on CUDA and read it in place), then [`FORMATS`] in system memory.
fn input_caps(cuda: bool) -> gst::Caps {
    let mut caps = gst::Caps::new_empty();
    if let Some(c) = caps.get_mut() {
        if cuda {
            c.append(
                gst_video::VideoCapsBuilder::new()
                    .features([cuda_memory::CAPS_FEATURE])
                    .format(gst_video::VideoFormat::Nv12)
                    .build(),
            );
        }
        c.append(formats_caps(&FORMATS));
    }
    caps
}

/// Formats taken, preferred first: those the analyses take as they are, then those converted
/// to RGB on the way in ([`super::convert`]).
const FORMATS: [gst_video::VideoFormat; 6] = [
    gst_video::VideoFormat::Rgb,
    gst_video::VideoFormat::Gray8,
    gst_video::VideoFormat::Gray16Le,
    convert::CONVERTED[0],
    convert::CONVERTED[1],
    convert::CONVERTED[2],
];

impl Morphoscope {
    fn fail(&self, e: &EngineError) -> gst::FlowError {
        let message = morphoscope::redact::text(&e.to_string());
        gst::element_imp_error!(self, gst::StreamError::Failed, ["{}", message]);
        gst::FlowError::Error
    }

    /// Waits on [`Morphoscope::changed`] for at most [`RECHECK`].
    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        match self.changed.wait_timeout(state, RECHECK) {
            Ok((s, _)) => s,
            Err(poisoned) => poisoned.into_inner().0,
        }
    }

    /// The backend the settings ask for, chosen once and kept (a CUDA context with its kernels
    /// loaded).
    fn backend(
        &self,
        state: &mut State,
        cfg: &morphoscope::config::Settings,
    ) -> Result<Backend, EngineError> {
        let key = (
            cfg.pipeline.backend,
            cfg.pipeline.device,
            cfg.pipeline.sm_limit,
        );
        Ok(match &state.backend {
            Some((b, k)) if *k == key => b.clone(),
            _ => {
                let (b, why) = morphoscope::backend::select(key.0, key.1, key.2)?;
                gst::info!(CAT, imp = self, "{why}");
                state.backend = Some((b.clone(), key));
                state.cuda = None;
                b
            }
        })
    }

    /// Answers a decoder's `gst.cuda.context` query with the CUDA backend's context, so that
    /// it decodes into memory the analyses read in place ([`cuda_memory`]).
    fn answer_cuda_context(&self, query: &mut gst::QueryRef) -> bool {
        let mut state = lock(&self.state);
        if state.cuda.is_none() {
            let cfg = match lock(&self.settings).engine_settings() {
                Ok(cfg) => cfg,
                Err(e) => {
                    gst::debug!(CAT, imp = self, "no CUDA context to share: {e}");
                    return false;
                }
            };
            let Ok(Backend::Cuda(gpu)) = self.backend(&mut state, &cfg) else {
                return false;
            };
            match SharedContext::new(&gpu) {
                Ok(shared) => state.cuda = Some(shared),
                Err(e) => {
                    gst::info!(CAT, imp = self, "CUDA memory not taken: {e}");
                    return false;
                }
            }
        }
        state
            .cuda
            .as_ref()
            .is_some_and(|c| c.answer(self.obj().upcast_ref(), query))
    }

    /// Starts the engine for the negotiated format.
    fn start_engine(&self, state: &mut State) -> Result<(), EngineError> {
        let cfg = lock(&self.settings).engine_settings()?;
        let backend = self.backend(state, &cfg)?;
        // Upstream's liveness decides how many frames the element holds (see `Engine`).
        let mut upstream = gst::query::Latency::new();
        let live = self.sinkpad.peer_query(&mut upstream) && upstream.result().0;
        let engine = Engine::start(&cfg, &backend, state.draw, live)?;
        // A new engine numbers tracks from 1 again.
        #[cfg(feature = "analytics")]
        {
            let lost = gst::ClockTime::try_from_seconds_f64(cfg.ops.tracker.lost_seconds);
            state.first_seen =
                crate::analytics::FirstSeen::new(lost.unwrap_or(gst::ClockTime::MAX));
        }
        self.latency_frames
            .store(engine.capacity as u64, Ordering::Relaxed);
        gst::debug!(
            CAT,
            imp = self,
            "engine started: {}, {} frames held at most ({})",
            engine.backend,
            engine.capacity,
            if live { "live" } else { "not live" }
        );
        state.engine = Some(engine);
        Ok(())
    }

    /// Puts a serialized event in line behind what is held (the task pushes it).
    fn hold_event(&self, state: &mut State, event: gst::Event) -> bool {
        if state.flushing {
            return false;
        }
        state.held.push_back(Held::Event(event));
        self.changed.notify_all();
        true
    }

    /// Waits until the task has pushed everything held (`false`: flushing or stopped first).
    fn wait_out<'a>(&self, mut state: MutexGuard<'a, State>) -> (MutexGuard<'a, State>, bool) {
        while !state.held.is_empty() {
            if state.blocked().is_some() {
                return (state, false);
            }
            state = self.wait(state);
        }
        (state, true)
    }

    /// Ends the engine's input and waits until the task has pushed its every frame and
    /// finished it (a new format). Flushing or stopped first: the engine is dropped.
    fn drain<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        if let Some(engine) = state.engine.as_mut() {
            engine.end_input();
            self.changed.notify_all();
        }
        while state.engine.is_some() {
            if state.blocked().is_some() {
                if let Some(engine) = state.engine.take() {
                    engine.discard();
                }
                break;
            }
            state = self.wait(state);
        }
        state
    }

    fn sink_chain(&self, buffer: gst::Buffer) -> Result<gst::FlowSuccess, gst::FlowError> {
        let qos = lock(&self.settings).qos;
        let mut state = lock(&self.state);
        if let Some(flow) = state.blocked() {
            return Err(flow);
        }
        let Some(in_info) = state.in_info.clone() else {
            gst::element_imp_error!(
                self,
                gst::CoreError::Negotiation,
                ["a buffer before the caps"]
            );
            return Err(gst::FlowError::NotNegotiated);
        };
        if state.engine.is_none() {
            self.settings_changed.store(false, Ordering::Relaxed);
            if let Err(e) = self.start_engine(&mut state) {
                return Err(self.fail(&e));
            }
        } else if self.settings_changed.swap(false, Ordering::Relaxed) {
            // Analysis properties set while playing: the analyses change from this frame on.
            match lock(&self.settings).engine_settings() {
                Ok(cfg) => {
                    if let Some(engine) = &state.engine {
                        engine.update(cfg.ops);
                    }
                }
                Err(e) => gst::element_imp_warning!(
                    self,
                    gst::LibraryError::Settings,
                    [
                        "new settings rejected: {}",
                        morphoscope::redact::text(&e.to_string())
                    ]
                ),
            }
        }
        if qos == QosPolicy::Drop {
            let running = buffer.pts().and_then(|t| state.segment.to_running_time(t));
            let late = matches!((running, *lock(&self.earliest)), (Some(r), Some(e)) if r < e);
            let full = state.full();
            if late || full {
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                gst::debug!(
                    CAT,
                    imp = self,
                    "dropped a {} frame ({n} in all)",
                    if late { "late" } else { "busy-ring" }
                );
                return Ok(gst::FlowSuccess::Ok);
            }
        }
        // Back-pressure: at most `capacity` frames in flight.
        while state.full() {
            if let Some(flow) = state.blocked() {
                return Err(flow);
            }
            state = self.wait(state);
        }
        // Frames in CUDA memory of the analyses' context go as they are (see `cuda_memory`).
        let on_device = match (&state.device_conversion, &state.cuda, state.engine.as_ref()) {
            (Some(conversion), Some(cuda), Some(engine))
                if engine.on_cuda && buffer.n_memory() == 1 && cuda.owns(buffer.peek_memory(0)) =>
            {
                Some(*conversion)
            }
            _ => None,
        };
        // Convert or copy the pixels without holding the state: the task keeps pushing.
        let to_rgb = state.to_rgb.clone();
        drop(state);
        let image = match on_device {
            Some(conversion) => {
                match cuda_memory::device_frame(buffer.clone(), &in_info, conversion) {
                    Ok(frame) => Pixels::Device(frame),
                    Err(e) => return Err(self.fail(&EngineError::Frame(e.to_string()))),
                }
            }
            None => frame_image(&buffer, &in_info, to_rgb.as_deref())
                .map_err(|e| self.fail(&e))?
                .into(),
        };
        let mut state = lock(&self.state);
        if let Some(flow) = state.blocked() {
            return Err(flow);
        }
        let Some(engine) = state.engine.as_mut() else {
            return Err(gst::FlowError::Flushing);
        };
        match engine.send(buffer, image) {
            Ok(held) => {
                state.held.push_back(held);
                self.changed.notify_all();
                Ok(gst::FlowSuccess::Ok)
            }
            Err(e) => {
                state.engine = None;
                Err(self.fail(&e))
            }
        }
    }

    fn set_caps(&self, state: MutexGuard<'_, State>, caps: &gst::CapsRef) -> bool {
        let Ok(in_info) = gst_video::VideoInfo::from_caps(caps) else {
            return false;
        };
        let device_conversion = if cuda_memory::is_cuda_caps(caps) {
            match Nv12Conversion::from_video_info(&in_info, convert::converter_threads()) {
                Ok(c) => Some(c),
                Err(e) => {
                    gst::info!(CAT, imp = self, "CUDA memory mapped to the host: {e}");
                    None
                }
            }
        } else {
            None
        };
        if state.in_info.as_ref() == Some(&in_info) && state.device_conversion == device_conversion
        {
            return true;
        }
        // A new format: the frames of the old one leave first, then the engine restarts.
        let mut state = self.drain(state);
        let draw = lock(&self.settings).draw;
        let out_info = if draw {
            match convert::rgb_like(&in_info, false) {
                Ok(i) => i,
                Err(_) => return false,
            }
        } else {
            in_info.clone()
        };
        // Untouched frames keep their caps (their memory among them); drawn ones are RGB.
        let out_caps = if draw {
            match out_info.to_caps() {
                Ok(c) => c,
                Err(_) => return false,
            }
        } else {
            caps.to_owned()
        };
        let to_rgb = if convert::is_converted(in_info.format()) {
            match ToRgb::new(&in_info) {
                Ok(c) => Some(Arc::new(c)),
                Err(e) => {
                    gst::warning!(CAT, imp = self, "no conversion of {in_info:?} to RGB: {e}");
                    return false;
                }
            }
        } else {
            None
        };
        let fps = in_info.fps();
        let frame_nanos = if fps.numer() > 0 {
            gst::ClockTime::SECOND.nseconds() * fps.denom() as u64 / fps.numer() as u64
        } else {
            0
        };
        self.frame_nanos.store(frame_nanos, Ordering::Relaxed);
        state.in_info = Some(in_info);
        state.to_rgb = to_rgb;
        state.device_conversion = device_conversion;
        state.out_info = Some(out_info);
        state.draw = draw;
        self.hold_event(&mut state, gst::event::Caps::new(&out_caps))
    }

    fn sink_event(&self, pad: &gst::Pad, event: gst::Event) -> bool {
        use gst::EventView;
        match event.view() {
            EventView::Caps(c) => {
                let caps = c.caps_owned();
                self.set_caps(lock(&self.state), &caps)
            }
            EventView::Eos(_) => {
                let mut state = lock(&self.state);
                // The engine ends once its last frame is out; EOS follows it.
                if let Some(engine) = state.engine.as_mut() {
                    engine.end_input();
                }
                self.hold_event(&mut state, event)
            }
            EventView::FlushStart(_) => {
                {
                    let mut state = lock(&self.state);
                    state.flushing = true;
                    self.changed.notify_all();
                }
                // Downstream lets go of a push in progress; then the task stops.
                let forwarded = self.srcpad.push_event(event);
                if let Err(e) = self.srcpad.pause_task() {
                    gst::warning!(CAT, imp = self, "cannot pause the output task: {e}");
                }
                forwarded
            }
            EventView::FlushStop(_) => {
                {
                    let mut state = lock(&self.state);
                    if let Some(engine) = state.engine.take() {
                        gst::debug!(
                            CAT,
                            imp = self,
                            "flush: {} frames in flight dropped",
                            engine.in_flight()
                        );
                        engine.discard();
                    }
                    state.held.clear();
                    state.flushing = false;
                    state.stopped = None;
                    *lock(&self.earliest) = None;
                }
                let forwarded = self.srcpad.push_event(event);
                if let Err(e) = self.start_task() {
                    e.log_with_imp(self);
                    return false;
                }
                forwarded
            }
            EventView::Segment(s) => {
                let mut state = lock(&self.state);
                if let Ok(seg) = s.segment().clone().downcast::<gst::ClockTime>() {
                    state.segment = seg;
                }
                self.hold_event(&mut state, event)
            }
            _ if event.is_serialized() => {
                let mut state = lock(&self.state);
                self.hold_event(&mut state, event)
            }
            _ => gst::Pad::event_default(pad, Some(&*self.obj()), event),
        }
    }

    /// One turn of the output task: pushes the event at the front of the line, or waits for
    /// the analysis of the buffer there and pushes it, or finishes an engine whose every frame
    /// is out, or waits for something to do.
    fn output_turn(&self) {
        let mut state = lock(&self.state);
        if state.blocked().is_some() {
            drop(state);
            let _ = self.srcpad.pause_task();
            return;
        }
        match state.held.front() {
            Some(Held::Event(_)) => {
                let Some(Held::Event(event)) = state.held.pop_front() else {
                    return;
                };
                self.changed.notify_all();
                drop(state);
                self.srcpad.push_event(event);
            }
            Some(Held::Buffer { index, .. }) => {
                let index = *index;
                let Some(results) = state.engine.as_ref().and_then(Engine::results) else {
                    drop(state);
                    let flow = self.fail(&EngineError::Lost(1));
                    self.stop_output(flow);
                    return;
                };
                drop(state);
                let event = match results.recv_timeout(RECHECK) {
                    Ok(event) => event,
                    Err(RecvTimeoutError::Timeout) => return,
                    Err(RecvTimeoutError::Disconnected) => PipelineEvent::End,
                };
                let mut state = lock(&self.state);
                // A flush came meanwhile: what was held is dropped.
                if state.flushing {
                    return;
                }
                let Some(Held::Buffer {
                    buffer, on_device, ..
                }) = state.held.pop_front()
                else {
                    return;
                };
                let taken = match state.engine.as_mut() {
                    Some(engine) => engine.take_back(index, event),
                    None => Err(EngineError::Lost(1)),
                };
                self.changed.notify_all();
                match taken {
                    Ok(frame) => {
                        drop(state);
                        if let Err(flow) = self.push_frame(buffer, frame, on_device) {
                            self.stop_output(flow);
                        }
                    }
                    Err(e) => {
                        state.engine = None;
                        drop(state);
                        let flow = self.fail(&e);
                        self.stop_output(flow);
                    }
                }
            }
            None => {
                let done = state
                    .engine
                    .as_ref()
                    .is_some_and(|e| e.input_ended() && e.in_flight() == 0);
                if done && let Some(engine) = state.engine.take() {
                    self.changed.notify_all();
                    drop(state);
                    engine.finish();
                } else {
                    drop(self.wait(state));
                }
            }
        }
    }

    /// The task stops pushing: `flow` goes upstream at the next buffer. A fatal flow is also
    /// posted as an error, as `queue` does (upstream may not push again for a while; an
    /// `Error` was posted by whoever returned it).
    fn stop_output(&self, flow: gst::FlowError) {
        if matches!(
            flow,
            gst::FlowError::NotLinked | gst::FlowError::NotNegotiated
        ) {
            gst::element_imp_error!(
                self,
                gst::StreamError::Failed,
                ("Internal data stream error."),
                ["streaming stopped, reason {:?}", flow]
            );
        }
        gst::debug!(CAT, imp = self, "output stopped: {flow:?}");
        let mut state = lock(&self.state);
        state.stopped = Some(flow);
        self.changed.notify_all();
        drop(state);
        let _ = self.srcpad.pause_task();
    }

    fn start_task(&self) -> Result<(), gst::LoggableError> {
        let element = self.obj().downgrade();
        self.srcpad
            .start_task(move || {
                if let Some(element) = element.upgrade() {
                    element.imp().output_turn();
                }
            })
            .map_err(|e| gst::loggable_error!(CAT, "cannot start the output task: {e}"))
    }

    /// The src pad's activation: the task runs while the pad is active (push mode only).
    fn src_activate(
        &self,
        pad: &gst::Pad,
        mode: gst::PadMode,
        active: bool,
    ) -> Result<(), gst::LoggableError> {
        if mode != gst::PadMode::Push {
            return Err(gst::loggable_error!(CAT, "only push mode is supported"));
        }
        {
            let mut state = lock(&self.state);
            state.flushing = !active;
            state.stopped = None;
            self.changed.notify_all();
        }
        if active {
            self.start_task()
        } else {
            pad.stop_task()
                .map_err(|e| gst::loggable_error!(CAT, "cannot stop the output task: {e}"))
        }
    }

    /// Decorates an analysed frame's buffer (metadata, drawing), posts its summary and pushes it.
    fn push_frame(
        &self,
        buffer: gst::Buffer,
        frame: Box<AnalysedFrame>,
        on_device: bool,
    ) -> Result<gst::FlowSuccess, gst::FlowError> {
        let (out_info, draw, in_is_rgb) = {
            let state = lock(&self.state);
            let in_is_rgb = state
                .in_info
                .as_ref()
                .is_some_and(|i| i.format() == gst_video::VideoFormat::Rgb);
            (state.out_info.clone(), state.draw, in_is_rgb)
        };
        let mut summary = metadata::frame_summary(&frame, self.dropped.load(Ordering::Relaxed));
        summary.set(
            "input-memory",
            if on_device {
                metadata::INPUT_MEMORY_CUDA
            } else {
                metadata::INPUT_MEMORY_SYSTEM
            },
        );
        let mut out = match (&frame.picture, &out_info, draw) {
            (Some(picture), Some(out_info), true) => {
                self.drawn(buffer, in_is_rgb, picture, out_info)?
            }
            _ => buffer,
        };
        {
            let out = out.make_mut();
            metadata::add_component_metas(out, &frame);
            if let Err(e) = metadata::add_frame_meta(out, &summary) {
                gst::warning!(CAT, imp = self, "frame summary meta not added: {e}");
            }
            #[cfg(feature = "analytics")]
            {
                let components = metadata::tracked_components(out);
                let mut state = lock(&self.state);
                let now = out
                    .pts()
                    .and_then(|t| state.segment.to_running_time(t))
                    .unwrap_or(gst::ClockTime::ZERO);
                if let Err(e) = crate::analytics::add_relation_meta(
                    out,
                    &components,
                    now,
                    &mut state.first_seen,
                ) {
                    gst::warning!(CAT, imp = self, "analytics relation meta not added: {e}");
                }
            }
        }
        let msg = gst::message::Element::builder(summary)
            .src(&*self.obj())
            .build();
        let _ = self.obj().post_message(msg);
        self.srcpad.push(out)
    }

    /// The outgoing buffer with the composed picture (RGB of `out_info`): the input buffer
    /// itself when it is RGB, else a new one with its timestamps and metas. Copy: the
    /// picture's rows into the buffer's (strided) rows.
    fn drawn(
        &self,
        input: gst::Buffer,
        in_is_rgb: bool,
        picture: &morphoscope::compose::Picture,
        out_info: &gst_video::VideoInfo,
    ) -> Result<gst::Buffer, gst::FlowError> {
        let mut out = if in_is_rgb && input.size() == out_info.size() {
            input
        } else {
            let mut b =
                gst::Buffer::with_size(out_info.size()).map_err(|_| gst::FlowError::Error)?;
            {
                let b = b.get_mut().ok_or(gst::FlowError::Error)?;
                let _ = input.copy_into(
                    b,
                    gst::BufferCopyFlags::FLAGS
                        | gst::BufferCopyFlags::TIMESTAMPS
                        | gst::BufferCopyFlags::META,
                    ..,
                );
            }
            b
        };
        let w3 = picture.width * 3;
        let mut vframe =
            gst_video::VideoFrameRef::from_buffer_ref_writable(out.make_mut(), out_info)
                .map_err(|_| gst::FlowError::Error)?;
        let stride =
            usize::try_from(vframe.plane_stride()[0]).map_err(|_| gst::FlowError::Error)?;
        let data = vframe
            .plane_data_mut(0)
            .map_err(|_| gst::FlowError::Error)?;
        // Each row's padding (rows are padded to 4 bytes) is zeroed: a new buffer's memory is
        // not, and what goes downstream is the same for the same picture.
        for (dst, row) in data
            .chunks_mut(stride.max(1))
            .zip(picture.data.chunks_exact(w3))
            .take(out_info.height() as usize)
        {
            if let Some((pixels, padding)) = dst.split_at_mut_checked(w3) {
                pixels.copy_from_slice(row);
                padding.fill(0);
            }
        }
        drop(vframe);
        Ok(out)
    }

    fn src_event(&self, pad: &gst::Pad, event: gst::Event) -> bool {
        if let gst::EventView::Qos(q) = event.view() {
            let (_, _, diff, timestamp) = q.get();
            // Late by `diff` at `timestamp`: frames before timestamp + diff will be late too.
            *lock(&self.earliest) = match timestamp {
                Some(t) if diff > 0 => Some(t + gst::ClockTime::from_nseconds(diff.unsigned_abs())),
                _ => None,
            };
        }
        gst::Pad::event_default(pad, Some(&*self.obj()), event)
    }

    /// Caps on `pad`: the formats, narrowed by the peer of the other pad (the format passes
    /// through unless drawing, which gives RGB whatever comes in).
    fn query_caps(&self, pad: &gst::Pad, filter: Option<&gst::Caps>) -> gst::Caps {
        let (draw, cuda) = {
            let settings = lock(&self.settings);
            let cuda = settings
                .engine_settings()
                .is_ok_and(|c| c.pipeline.backend != morphoscope::config::BackendChoice::Cpu);
            (settings.draw, cuda)
        };
        let all = input_caps(cuda);
        let caps = if draw {
            if pad == &self.srcpad {
                formats_caps(&[gst_video::VideoFormat::Rgb])
            } else {
                all
            }
        } else {
            let other = if pad == &self.srcpad {
                &self.sinkpad
            } else {
                &self.srcpad
            };
            other.peer_query_caps(Some(&all)).intersect(&all)
        };
        match filter {
            Some(f) => f.intersect_with_mode(&caps, gst::CapsIntersectMode::First),
            None => caps,
        }
    }

    fn sink_query(&self, pad: &gst::Pad, query: &mut gst::QueryRef) -> bool {
        if let gst::QueryViewMut::Caps(q) = query.view_mut() {
            let caps = self.query_caps(pad, q.filter_owned().as_ref());
            q.set_result(&caps);
            return true;
        }
        let cuda_context = matches!(
            query.view(),
            gst::QueryView::Context(q) if q.context_type() == cuda_memory::CONTEXT_TYPE
        );
        if cuda_context && self.answer_cuda_context(query) {
            return true;
        }
        if query.is_serialized() {
            // Allocation, drain: they concern what comes after everything held.
            let (state, out) = self.wait_out(lock(&self.state));
            let draw = state.draw;
            drop(state);
            if !out {
                return false;
            }
            // Drawing gives RGB frames of its own: downstream's pool is not for the input.
            if draw && matches!(query.view(), gst::QueryView::Allocation(_)) {
                return false;
            }
        }
        gst::Pad::query_default(pad, Some(&*self.obj()), query)
    }

    fn src_query(&self, pad: &gst::Pad, query: &mut gst::QueryRef) -> bool {
        match query.view_mut() {
            gst::QueryViewMut::Caps(q) => {
                let caps = self.query_caps(pad, q.filter_owned().as_ref());
                q.set_result(&caps);
                true
            }
            gst::QueryViewMut::Latency(q) => {
                let mut upstream = gst::query::Latency::new();
                if !self.sinkpad.peer_query(&mut upstream) {
                    return false;
                }
                let (live, min, max) = upstream.result();
                let added = gst::ClockTime::from_nseconds(
                    self.latency_frames.load(Ordering::Relaxed)
                        * self.frame_nanos.load(Ordering::Relaxed),
                );
                q.set(live, min + added, max.map(|m| m + added));
                true
            }
            _ => gst::Pad::query_default(pad, Some(&*self.obj()), query),
        }
    }
}

#[glib::object_subclass]
impl ObjectSubclass for Morphoscope {
    const NAME: &'static str = "GstMorphoscope";
    type Type = super::Morphoscope;
    type ParentType = gst::Element;

    fn with_class(klass: &Self::Class) -> Self {
        let pad = |name: &str, direction| match klass.pad_template(name) {
            Some(t) => gst::Pad::builder_from_template(&t),
            None => gst::Pad::builder(direction).name(name),
        };
        let sinkpad = pad("sink", gst::PadDirection::Sink)
            .chain_function(|_, parent, buffer| {
                Morphoscope::catch_panic_pad_function(
                    parent,
                    || Err(gst::FlowError::Error),
                    |this| this.sink_chain(buffer),
                )
            })
            .event_function(|pad, parent, event| {
                Morphoscope::catch_panic_pad_function(
                    parent,
                    || false,
                    |this| this.sink_event(pad, event),
                )
            })
            .query_function(|pad, parent, query| {
                Morphoscope::catch_panic_pad_function(
                    parent,
                    || false,
                    |this| this.sink_query(pad, query),
                )
            })
            .build();
        let srcpad = pad("src", gst::PadDirection::Src)
            .activatemode_function(|pad, parent, mode, active| {
                Morphoscope::catch_panic_pad_function(
                    parent,
                    || Err(gst::loggable_error!(CAT, "panic activating the src pad")),
                    |this| this.src_activate(pad, mode, active),
                )
            })
            .event_function(|pad, parent, event| {
                Morphoscope::catch_panic_pad_function(
                    parent,
                    || false,
                    |this| this.src_event(pad, event),
                )
            })
            .query_function(|pad, parent, query| {
                Morphoscope::catch_panic_pad_function(
                    parent,
                    || false,
                    |this| this.src_query(pad, query),
                )
            })
            .build();
        Self {
            sinkpad,
            srcpad,
            settings: Mutex::new(Settings::default()),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            earliest: Mutex::new(None),
            latency_frames: AtomicU64::new(3),
            frame_nanos: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            settings_changed: AtomicBool::new(false),
        }
    }
}

impl GstObjectImpl for Morphoscope {}

impl ElementImpl for Morphoscope {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static META: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            gst::subclass::ElementMetadata::new(
                "Morphology analyses",
                "Filter/Analyzer/Video",
                "Mathematical morphology on the GPU or CPU: max-tree filtering, tracked connected components (region-of-interest metas), orientation maps, graph segmentation; optional overlays",
                "morphoscope developers",
            )
        });
        Some(&*META)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
            let caps = input_caps(true);
            [
                ("sink", gst::PadDirection::Sink),
                ("src", gst::PadDirection::Src),
            ]
            .into_iter()
            .filter_map(|(name, dir)| {
                gst::PadTemplate::new(name, dir, gst::PadPresence::Always, &caps).ok()
            })
            .collect()
        });
        TEMPLATES.as_ref()
    }

    fn change_state(
        &self,
        transition: gst::StateChange,
    ) -> Result<gst::StateChangeSuccess, gst::StateChangeError> {
        let ret = self.parent_change_state(transition)?;
        if transition == gst::StateChange::PausedToReady {
            let mut state = lock(&self.state);
            if let Some(engine) = state.engine.take() {
                engine.discard();
            }
            // The backend and the context a decoder took from it outlive a stop: the decoder
            // keeps that context and does not ask again.
            let (backend, cuda) = (state.backend.take(), state.cuda.take());
            *state = State {
                backend,
                cuda,
                // Until the src pad is active again.
                flushing: true,
                ..State::default()
            };
            *lock(&self.earliest) = None;
            self.dropped.store(0, Ordering::Relaxed);
        }
        Ok(ret)
    }
}
