//! The engine inside the element: morphoscope's frame pipeline (worker, ring, collector) fed
//! through a [`FrameSource::Channel`] from the chain function, and the queue of what is in
//! flight. Buffers wait here, in order, with the serialized events that came between them,
//! until their analysed frame comes back; the element then decorates and pushes each.
//!
//! The element holds at most [`Engine::capacity`] frames: after sending a frame it takes back
//! every frame already completed without waiting, and waits for the oldest only when more than
//! that are in flight. So each frame leaves at the latest `capacity` frames after it came in
//! (the latency the element reports), and the pipeline's channels never all fill (no thread of
//! it can block the others). A live stream holds `ring_size` frames: frames come at the
//! source's rate, and each frame held is a frame of latency. A stream that is not live (a file)
//! holds `ring_size + queue`, as deep as `morphoscope run`'s pipeline: a frame spends longer in
//! the pipeline than its turn on the GPU (readback and collection run beside the worker), so
//! with only `ring_size` frames held the ring runs part-empty and throughput follows latency.

use std::collections::VecDeque;
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender, TryRecvError, bounded};
use gstreamer as gst;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use morphoscope::analysis::AnalysedFrame;
use morphoscope::backend::Backend;
use morphoscope::compose::PictureFormat;
use morphoscope::pipeline::{Command, Delivery, FrameSource, PictureWant, Pipeline, PipelineEvent};
use morphoscope::source::{Frame, image_from_plane};

use super::convert::ToRgb;

/// Errors of the engine (each becomes one element error).
#[derive(Debug, thiserror::Error)]
pub(super) enum EngineError {
    /// The settings file or a property value.
    #[error("settings: {0}")]
    Config(#[from] morphoscope::config::ConfigError),
    /// The backend (CUDA requested but unavailable).
    #[error("backend: {0}")]
    Backend(#[from] morphoscope::gpu::GpuError),
    /// Starting the pipeline.
    #[error(transparent)]
    Pipeline(#[from] morphoscope::pipeline::PipelineError),
    /// A buffer that cannot be read as a frame of the negotiated format.
    #[error("frame: {0}")]
    Frame(String),
    /// An analysis failed; frames before it were delivered.
    #[error("analysis: {0}")]
    Analysis(String),
    /// The pipeline ended while frames were in flight.
    #[error("the analyses stopped with {0} frames in flight")]
    Lost(usize),
}

/// Something held until the frames before it leave.
pub(super) enum Held {
    /// An input buffer waiting for its analysis (frame index).
    Buffer(gst::Buffer, u64),
    /// A serialized event that came after the buffers before it.
    Event(gst::Event),
}

/// A frame ready to go downstream, with the events to push before it.
pub(super) struct Ready {
    /// Serialized events that came before the buffer.
    pub events_before: Vec<gst::Event>,
    /// The input buffer.
    pub buffer: gst::Buffer,
    /// Its analysis.
    pub frame: Box<AnalysedFrame>,
}

/// A running engine for one stream format.
pub(super) struct Engine {
    pipeline: Option<Pipeline>,
    frames: Option<Sender<Frame>>,
    held: VecDeque<Held>,
    in_flight: usize,
    next_index: u64,
    /// Frames held at most: the ring's size for a live stream, the ring's size plus the
    /// pipeline's input queue otherwise.
    pub capacity: usize,
    /// The one-line backend description.
    pub backend: String,
}

impl Engine {
    /// Starts the pipeline with `settings` on `backend`; `draw` asks for the composed RGB
    /// picture of every frame; `live` (upstream is a live source) bounds the frames held to
    /// the ring's size.
    pub(super) fn start(
        settings: &morphoscope::config::Settings,
        backend: &Backend,
        draw: bool,
        live: bool,
    ) -> Result<Self, EngineError> {
        let ring = settings.pipeline.ring_size.max(1);
        // Room for every frame the element may hold: sending never waits.
        let (tx, rx) = bounded::<Frame>(ring + settings.pipeline.queue);
        let want = if draw {
            PictureWant::Every(PictureFormat::Rgb)
        } else {
            PictureWant::None
        };
        let pipeline = Pipeline::start(
            FrameSource::Channel(rx),
            settings,
            backend,
            Delivery::All,
            want,
        )?;
        Ok(Self {
            backend: pipeline.backend.clone(),
            pipeline: Some(pipeline),
            frames: Some(tx),
            held: VecDeque::new(),
            in_flight: 0,
            next_index: 0,
            capacity: if live {
                ring
            } else {
                ring + settings.pipeline.queue
            },
        })
    }

    /// Frames sent and not yet taken back.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether a buffer or event is held.
    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Copies `buffer`'s pixels into a frame (converted to RGB by `to_rgb` where the format is
    /// not one the analyses take) and sends it to the analyses; the buffer is held until its
    /// frame comes back.
    pub(super) fn send(
        &mut self,
        buffer: gst::Buffer,
        info: &gst_video::VideoInfo,
        to_rgb: Option<&ToRgb>,
    ) -> Result<(), EngineError> {
        let index = self.next_index;
        let image = {
            let vframe = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer.as_ref(), info)
                .map_err(|e| EngineError::Frame(e.to_string()))?;
            if let Some(to_rgb) = to_rgb {
                to_rgb.convert(&vframe).map_err(EngineError::Frame)?
            } else {
                let stride = usize::try_from(vframe.plane_stride()[0])
                    .map_err(|_| EngineError::Frame("negative stride".into()))?;
                let data = vframe
                    .plane_data(0)
                    .map_err(|e| EngineError::Frame(e.to_string()))?;
                // Copy: the buffer goes downstream untouched (or drawn into) when its frame is done.
                image_from_plane(
                    info.format(),
                    vframe.width() as usize,
                    vframe.height() as usize,
                    stride,
                    data,
                )
                .map_err(|e| EngineError::Frame(e.to_string()))?
            }
        };
        let frame = Frame {
            index,
            pts_nanos: buffer.pts().map(gst::ClockTime::nseconds),
            image,
        };
        let Some(tx) = &self.frames else {
            return Err(EngineError::Lost(self.in_flight));
        };
        if tx.send(frame).is_err() {
            return Err(EngineError::Lost(self.in_flight));
        }
        self.next_index += 1;
        self.held.push_back(Held::Buffer(buffer, index));
        self.in_flight += 1;
        Ok(())
    }

    /// New analysis settings from the next frame sent on (the frames in flight keep theirs).
    pub(super) fn update(&self, ops: morphoscope::analysis::OpSettings) {
        if let Some(p) = &self.pipeline {
            let _ = p.commands.send(Command::Settings(Box::new(ops)));
        }
    }

    /// Holds a serialized event behind the buffers in flight.
    pub(super) fn hold_event(&mut self, event: gst::Event) {
        self.held.push_back(Held::Event(event));
    }

    /// The next completed frame: waits for it when `wait` (until it comes or the pipeline
    /// ends), else only takes one already done. `Ok(None)`: none (yet, or any more).
    pub(super) fn next_ready(&mut self, wait: bool) -> Result<Option<Ready>, EngineError> {
        let Some(p) = &self.pipeline else {
            return Ok(None);
        };
        if self.in_flight == 0 {
            return Ok(None);
        }
        let event = if wait {
            loop {
                match p.events.recv_timeout(Duration::from_millis(100)) {
                    Ok(e) => break e,
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(EngineError::Lost(self.in_flight));
                    }
                }
            }
        } else {
            match p.events.try_recv() {
                Ok(e) => e,
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => return Err(EngineError::Lost(self.in_flight)),
            }
        };
        match event {
            PipelineEvent::Frame(frame) => {
                let mut events_before = Vec::new();
                while let Some(h) = self.held.pop_front() {
                    match h {
                        Held::Event(e) => events_before.push(e),
                        Held::Buffer(buffer, index) => {
                            self.in_flight -= 1;
                            if index != frame.index {
                                return Err(EngineError::Analysis(format!(
                                    "frame {} came back for buffer {index}",
                                    frame.index
                                )));
                            }
                            return Ok(Some(Ready {
                                events_before,
                                buffer,
                                frame,
                            }));
                        }
                    }
                }
                Err(EngineError::Analysis(format!(
                    "frame {} came back with no buffer held",
                    frame.index
                )))
            }
            PipelineEvent::Error(e) => Err(EngineError::Analysis(e)),
            PipelineEvent::End => Err(EngineError::Lost(self.in_flight)),
        }
    }

    /// Ends the input: the frames in flight are still analysed and come out of
    /// [`Engine::next_ready`] (with `wait`).
    pub(super) fn end_input(&mut self) {
        self.frames = None;
    }

    /// The events held after the last buffer (to push once every frame is out).
    pub(super) fn take_trailing_events(&mut self) -> Vec<gst::Event> {
        let mut out = Vec::new();
        while let Some(Held::Event(_)) = self.held.front() {
            if let Some(Held::Event(e)) = self.held.pop_front() {
                out.push(e);
            }
        }
        out
    }

    /// Stops the pipeline now, dropping every frame in flight (flush, state change).
    pub(super) fn discard(mut self) {
        self.frames = None;
        if let Some(p) = self.pipeline.take() {
            p.stop();
        }
    }

    /// Waits for the pipeline's threads once the last frame came out.
    pub(super) fn finish(mut self) {
        self.frames = None;
        if let Some(p) = self.pipeline.take() {
            // Every frame is out: the next event is `End`.
            let _ = p.events.recv_timeout(Duration::from_secs(10));
            p.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.frames = None;
        if let Some(p) = self.pipeline.take() {
            p.stop();
        }
    }
}
