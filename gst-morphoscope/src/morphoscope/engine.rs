//! The engine inside the element: morphoscope's frame pipeline (worker, ring, collector) fed
//! through a [`FrameSource::Channel`] from the chain function, whose analysed frames come back,
//! in order, to the element's output task ([`Engine::results`]).
//!
//! The element holds at most [`Engine::capacity`] frames: the chain function waits (or, with
//! `qos=drop`, drops) while that many are in flight. So each frame leaves at the latest
//! `capacity` frames after it came in (the latency the element reports), and the pipeline's
//! channels never all fill (no thread of it can block the others). A live stream holds
//! `ring_size` frames: frames come at the source's rate, and each frame held is a frame of
//! latency. A stream that is not live (a file) holds `ring_size + queue`, as deep as
//! `morphoscope run`'s pipeline: a frame spends longer in the pipeline than its turn on the GPU
//! (readback and collection run beside the worker), so with only `ring_size` frames held the
//! ring runs part-empty and throughput follows latency.

use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};
use gstreamer as gst;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use morphoscope::analysis::AnalysedFrame;
use morphoscope::backend::Backend;
use morphoscope::compose::PictureFormat;
use morphoscope::image::DynImage;
use morphoscope::pipeline::{Command, Delivery, FrameSource, PictureWant, Pipeline, PipelineEvent};
use morphoscope::source::convert::ToRgb;
use morphoscope::source::{Frame, Pixels, image_from_plane};

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

/// Something on its way downstream, held in arrival order until the element's output task
/// pushes it.
pub(super) enum Held {
    /// An input buffer waiting for its analysis.
    Buffer {
        /// The buffer.
        buffer: gst::Buffer,
        /// Its frame's index.
        index: u64,
        /// Its pixels went to the analyses in device memory (CUDA memory, no host copy).
        on_device: bool,
    },
    /// A serialized event that came after the buffers before it.
    Event(gst::Event),
}

/// A running engine for one stream format.
pub(super) struct Engine {
    pipeline: Option<Pipeline>,
    frames: Option<Sender<Frame>>,
    in_flight: usize,
    next_index: u64,
    /// Frames held at most: the ring's size for a live stream, the ring's size plus the
    /// pipeline's input queue otherwise.
    pub capacity: usize,
    /// The one-line backend description.
    pub backend: String,
    /// The analyses run on CUDA (they take frames in device memory).
    pub on_cuda: bool,
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
            on_cuda: matches!(backend, Backend::Cuda(_)),
            pipeline: Some(pipeline),
            frames: Some(tx),
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

    /// Whether every frame is sent ([`Engine::end_input`]).
    pub(super) fn input_ended(&self) -> bool {
        self.frames.is_none()
    }

    /// Sends `image` (the pixels of `buffer`: [`frame_image`], or its planes in CUDA memory)
    /// to the analyses and returns
    /// what to hold until its frame comes back.
    pub(super) fn send(&mut self, buffer: gst::Buffer, image: Pixels) -> Result<Held, EngineError> {
        let index = self.next_index;
        let on_device = matches!(image, Pixels::Device(_));
        let frame = Frame {
            index,
            pts_nanos: buffer.pts().map(gst::ClockTime::nseconds),
            image,
            after_gap: false,
        };
        let Some(tx) = &self.frames else {
            return Err(EngineError::Lost(self.in_flight));
        };
        if tx.send(frame).is_err() {
            return Err(EngineError::Lost(self.in_flight));
        }
        self.next_index += 1;
        self.in_flight += 1;
        Ok(Held::Buffer {
            buffer,
            index,
            on_device,
        })
    }

    /// New analysis settings from the next frame sent on (the frames in flight keep theirs).
    pub(super) fn update(&self, ops: morphoscope::analysis::OpSettings) {
        if let Some(p) = &self.pipeline {
            let _ = p.commands.send(Command::Settings(Box::new(ops)));
        }
    }

    /// Where the analysed frames come out, in order (to wait on without holding the engine).
    pub(super) fn results(&self) -> Option<Receiver<PipelineEvent>> {
        self.pipeline.as_ref().map(|p| p.events.clone())
    }

    /// Takes back the analysis `frame` of the buffer `index` that was held for it.
    pub(super) fn take_back(
        &mut self,
        index: u64,
        event: PipelineEvent,
    ) -> Result<Box<AnalysedFrame>, EngineError> {
        match event {
            PipelineEvent::Frame(frame) => {
                self.in_flight = self.in_flight.saturating_sub(1);
                if frame.index == index {
                    Ok(frame)
                } else {
                    Err(EngineError::Analysis(format!(
                        "frame {} came back for buffer {index}",
                        frame.index
                    )))
                }
            }
            PipelineEvent::Error(e) => Err(EngineError::Analysis(e)),
            PipelineEvent::End => Err(EngineError::Lost(self.in_flight)),
        }
    }

    /// Ends the input: the frames in flight are still analysed and come out of
    /// [`Engine::results`].
    pub(super) fn end_input(&mut self) {
        self.frames = None;
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

/// `buffer`'s pixels as a frame of the analyses: converted to RGB by `to_rgb` where the format
/// is not one the analyses take, else copied (the buffer goes downstream untouched, or drawn
/// into, when its frame is done).
pub(super) fn frame_image(
    buffer: &gst::Buffer,
    info: &gst_video::VideoInfo,
    to_rgb: Option<&ToRgb>,
) -> Result<DynImage, EngineError> {
    let vframe = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer.as_ref(), info)
        .map_err(|e| EngineError::Frame(e.to_string()))?;
    if let Some(to_rgb) = to_rgb {
        return to_rgb.convert(&vframe).map_err(EngineError::Frame);
    }
    let stride = usize::try_from(vframe.plane_stride()[0])
        .map_err(|_| EngineError::Frame("negative stride".into()))?;
    let data = vframe
        .plane_data(0)
        .map_err(|e| EngineError::Frame(e.to_string()))?;
    image_from_plane(
        info.format(),
        vframe.width() as usize,
        vframe.height() as usize,
        stride,
        data,
    )
    .map_err(|e| EngineError::Frame(e.to_string()))
}
