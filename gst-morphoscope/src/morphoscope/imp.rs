//! The element's implementation: a plain `GstElement` with one sink and one src pad.
//!
//! Why not `GstBaseTransform`: a transform hands each input buffer back as its output in the
//! same call, while the ring keeps frames in flight and pushes them later, in
//! order; serialized events must wait behind the frames in flight, EOS must drain them, a
//! flush must drop them. A plain element with its own chain and event functions does that
//! directly ([`super::engine`] holds what is in flight); the output is pushed from the
//! streaming thread of the input, so there is no extra task to start, pause and flush (a
//! `queue` in front gives the element a thread of its own).
//!
//! Stream handling: a new format (CAPS) drains the frames of the old one and restarts the
//! engine at the next buffer; EOS drains, then is forwarded; FLUSH_STOP drops what is in
//! flight (a seek); PAUSED -> READY stops the engine. The backend (a CUDA context with its
//! kernels loaded) is kept across restarts. Latency: upstream's plus one frame duration per
//! frame held (`ring-size` behind a live source). QoS: see [`super::QosPolicy`]. Formats: the
//! analyses' own (RGB, GRAY8, GRAY16_LE) and those [`super::convert`] turns into RGB.
//!
//! Properties are read when the engine starts (the first buffer of a format, after a flush);
//! analysis properties set while playing apply from the next buffer on (`ring-size`, `backend`,
//! `device`, `config` and `draw` at the next start).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer::subclass::prelude::*;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use morphoscope::backend::Backend;

use super::convert::{self, ToRgb};
use super::engine::{Engine, EngineError, Ready};
use super::settings::{KEY_PROPERTIES, PropValue, Settings};
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

/// The negotiated stream and the running engine.
#[derive(Default)]
struct State {
    /// Input format.
    in_info: Option<gst_video::VideoInfo>,
    /// The conversion to RGB of an input format the analyses do not take.
    to_rgb: Option<ToRgb>,
    /// Output format (RGB of the same size when drawing).
    out_info: Option<gst_video::VideoInfo>,
    /// Draw into the outgoing frames (fixed while a format is negotiated).
    draw: bool,
    /// The engine, from the first buffer of a format to its end.
    engine: Option<Engine>,
    /// The backend and the choice it was made for (kept across engine restarts).
    backend: Option<(Backend, morphoscope::config::BackendChoice, usize)>,
    /// The current segment (running times for QoS).
    segment: gst::FormattedSegment<gst::ClockTime>,
    /// First sight of each track (analytics tracking entries).
    #[cfg(feature = "analytics")]
    first_seen: crate::analytics::FirstSeen,
}

/// The element.
pub struct Morphoscope {
    sinkpad: gst::Pad,
    srcpad: gst::Pad,
    settings: Mutex<Settings>,
    state: Mutex<State>,
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
        gst::element_imp_error!(self, gst::StreamError::Failed, ["{}", e]);
        gst::FlowError::Error
    }

    /// Starts the engine for the negotiated format.
    fn start_engine(&self, state: &mut State) -> Result<(), EngineError> {
        let settings = lock(&self.settings).clone();
        let cfg = settings.engine_settings()?;
        let (choice, device) = (cfg.pipeline.backend, cfg.pipeline.device);
        let backend = match &state.backend {
            Some((b, c, d)) if *c == choice && *d == device => b.clone(),
            _ => {
                let (b, why) = morphoscope::backend::select(choice, device)?;
                gst::info!(CAT, imp = self, "{why}");
                state.backend = Some((b.clone(), choice, device));
                b
            }
        };
        // Upstream's liveness decides how many frames the element holds (see `Engine`).
        let mut upstream = gst::query::Latency::new();
        let live = self.sinkpad.peer_query(&mut upstream) && upstream.result().0;
        let engine = Engine::start(&cfg, &backend, state.draw, live)?;
        // A new engine numbers tracks from 1 again.
        #[cfg(feature = "analytics")]
        state.first_seen.clear();
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

    /// Decorates a completed frame's buffer (metadata, drawing) and pushes it with the events
    /// held before it.
    fn push_ready(
        &self,
        state: &mut State,
        ready: Ready,
    ) -> Result<gst::FlowSuccess, gst::FlowError> {
        for e in ready.events_before {
            self.srcpad.push_event(e);
        }
        let Ready { buffer, frame, .. } = ready;
        let summary = metadata::frame_summary(&frame, self.dropped.load(Ordering::Relaxed));
        let mut out = match (&frame.picture, &state.out_info, state.draw) {
            (Some(picture), Some(out_info), true) => {
                let in_is_rgb = state
                    .in_info
                    .as_ref()
                    .is_some_and(|i| i.format() == gst_video::VideoFormat::Rgb);
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
        for (y, row) in picture
            .data
            .chunks_exact(w3)
            .enumerate()
            .take(out_info.height() as usize)
        {
            if let Some(dst) = data.get_mut(y * stride..y * stride + w3) {
                dst.copy_from_slice(row);
            }
        }
        drop(vframe);
        Ok(out)
    }

    /// Takes back and pushes completed frames: every frame already done, then (with `bound`)
    /// the oldest ones until at most `capacity` are in flight.
    fn push_completed(
        &self,
        state: &mut State,
        bound: bool,
    ) -> Result<gst::FlowSuccess, gst::FlowError> {
        loop {
            let Some(engine) = state.engine.as_mut() else {
                return Ok(gst::FlowSuccess::Ok);
            };
            let wait = bound && engine.in_flight() > engine.capacity;
            match engine.next_ready(wait) {
                Ok(Some(ready)) => {
                    self.push_ready(state, ready)?;
                }
                Ok(None) => return Ok(gst::FlowSuccess::Ok),
                Err(e) => {
                    state.engine = None;
                    return Err(self.fail(&e));
                }
            }
        }
    }

    /// Ends the engine's input, pushes every frame in flight and the events held after them,
    /// and stops it (EOS, a new format).
    fn drain(&self, state: &mut State) -> Result<gst::FlowSuccess, gst::FlowError> {
        let Some(engine) = state.engine.as_mut() else {
            return Ok(gst::FlowSuccess::Ok);
        };
        engine.end_input();
        let mut flow = Ok(gst::FlowSuccess::Ok);
        while state.engine.as_ref().is_some_and(|e| e.in_flight() > 0) {
            let Some(engine) = state.engine.as_mut() else {
                break;
            };
            match engine.next_ready(true) {
                Ok(Some(ready)) => {
                    if let Err(e) = self.push_ready(state, ready) {
                        flow = Err(e);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    state.engine = None;
                    return Err(self.fail(&e));
                }
            }
        }
        if let Some(mut engine) = state.engine.take() {
            for e in engine.take_trailing_events() {
                self.srcpad.push_event(e);
            }
            engine.finish();
        }
        flow
    }

    fn sink_chain(&self, buffer: gst::Buffer) -> Result<gst::FlowSuccess, gst::FlowError> {
        let qos = lock(&self.settings).qos;
        let mut state = lock(&self.state);
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
                    ["new settings rejected: {}", e]
                ),
            }
        }
        if qos == QosPolicy::Drop {
            let running = buffer.pts().and_then(|t| state.segment.to_running_time(t));
            let late = matches!((running, *lock(&self.earliest)), (Some(r), Some(e)) if r < e);
            let full = state
                .engine
                .as_ref()
                .is_some_and(|e| e.in_flight() >= e.capacity);
            if late || full {
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                gst::debug!(
                    CAT,
                    imp = self,
                    "dropped a {} frame ({n} in all)",
                    if late { "late" } else { "busy-ring" }
                );
                return self.push_completed(&mut state, false);
            }
        }
        let State { engine, to_rgb, .. } = &mut *state;
        let sent = match engine.as_mut() {
            Some(engine) => engine.send(buffer, &in_info, to_rgb.as_ref()),
            None => Err(EngineError::Lost(0)),
        };
        if let Err(e) = sent {
            state.engine = None;
            return Err(self.fail(&e));
        }
        self.push_completed(&mut state, true)
    }

    fn set_caps(&self, state: &mut State, caps: &gst::CapsRef) -> bool {
        let Ok(in_info) = gst_video::VideoInfo::from_caps(caps) else {
            return false;
        };
        if state.in_info.as_ref() == Some(&in_info) {
            return true;
        }
        // A new format: the frames of the old one leave first, then the engine restarts.
        let _ = self.drain(state);
        let draw = lock(&self.settings).draw;
        let out_info = if draw {
            match convert::rgb_like(&in_info, false) {
                Ok(i) => i,
                Err(_) => return false,
            }
        } else {
            in_info.clone()
        };
        let Ok(out_caps) = out_info.to_caps() else {
            return false;
        };
        let to_rgb = if convert::is_converted(in_info.format()) {
            match ToRgb::new(&in_info) {
                Ok(c) => Some(c),
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
        state.out_info = Some(out_info);
        state.draw = draw;
        self.srcpad.push_event(gst::event::Caps::new(&out_caps))
    }

    fn sink_event(&self, pad: &gst::Pad, event: gst::Event) -> bool {
        use gst::EventView;
        match event.view() {
            EventView::Caps(c) => {
                let caps = c.caps_owned();
                let mut state = lock(&self.state);
                self.set_caps(&mut state, &caps)
            }
            EventView::Eos(_) => {
                let mut state = lock(&self.state);
                let _ = self.drain(&mut state);
                drop(state);
                self.srcpad.push_event(event)
            }
            EventView::FlushStart(_) => self.srcpad.push_event(event),
            EventView::FlushStop(_) => {
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
                *lock(&self.earliest) = None;
                drop(state);
                self.srcpad.push_event(event)
            }
            EventView::Segment(s) => {
                let mut state = lock(&self.state);
                if let Ok(seg) = s.segment().clone().downcast::<gst::ClockTime>() {
                    state.segment = seg;
                }
                self.forward_serialized(state, event)
            }
            _ if event.is_serialized() => {
                let state = lock(&self.state);
                self.forward_serialized(state, event)
            }
            _ => gst::Pad::event_default(pad, Some(&*self.obj()), event),
        }
    }

    /// Forwards a serialized event, or holds it behind the frames in flight.
    fn forward_serialized(&self, mut state: MutexGuard<'_, State>, event: gst::Event) -> bool {
        match state.engine.as_mut() {
            Some(engine) if !engine.is_empty() => {
                engine.hold_event(event);
                true
            }
            _ => {
                drop(state);
                self.srcpad.push_event(event)
            }
        }
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
        let draw = lock(&self.settings).draw;
        let all = formats_caps(&FORMATS);
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
            let caps = formats_caps(&FORMATS);
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
            let backend = state.backend.take();
            *state = State {
                backend,
                ..State::default()
            };
            *lock(&self.earliest) = None;
            self.dropped.store(0, Ordering::Relaxed);
        }
        Ok(ret)
    }
}
