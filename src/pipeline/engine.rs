//! The engine turns source frames into analysed frames on the chosen backend. The CPU engine
//! runs each analysis in turn on the worker thread; the CUDA engine is the ring
//! ([`super::ring::CudaRing`]), which keeps several frames in flight and completes them in order.
//! Both answer `submit` with the frames that completed (in frame order) and `flush` at the end.

use std::sync::Arc;
use std::time::Instant;

use super::ring::CudaRing;
use crate::analysis::{AnalysedFrame, Analysis, FrameInput, FrameTimings, OpSettings, build_analyses};
use crate::backend::Backend;
use crate::image::DynImage;
use crate::ops::{OpError, preprocess};
use crate::source::Frame;

/// A frame handed to the engine, with the instant the source delivered it.
#[derive(Debug)]
pub struct Submitted {
    /// The frame.
    pub frame: Frame,
    /// When the source thread received it.
    pub received: Instant,
    /// How long it waited in the queue before the worker took it.
    pub queue_wait_ms: f64,
}

/// Grey (and colour) views of a frame for the CPU analyses.
pub fn frame_input(index: u64, image: DynImage) -> FrameInput {
    let (gray, rgb, gray16) = match image {
        DynImage::Rgb8(rgb) => (preprocess::rgb_to_gray(rgb.view()), Some(Arc::new(rgb.into_packed())), None),
        DynImage::Gray8(g) => (g.into_packed(), None, None),
        DynImage::Gray16(g) => (preprocess::gray16_to_gray8(g.view()), None, Some(Arc::new(g.into_packed()))),
        DynImage::F32(f) => (f.map(|v| (v.clamp(0.0, 1.0) * 255.0).round() as u8), None, None),
    };
    FrameInput { index, gray: Arc::new(gray), rgb, gray16 }
}

/// Runs the analyses of one frame on the CPU (also used by the ring for analyses that have no
/// GPU stage).
pub fn run_cpu_analyses(
    analyses: &mut [Box<dyn Analysis>],
    input: &FrameInput,
    regions: &mut Vec<(String, f64)>,
) -> Result<Vec<crate::analysis::OpOutput>, OpError> {
    let mut outputs = Vec::new();
    for a in analyses.iter_mut().filter(|a| a.enabled()) {
        let out = a.run_cpu(input, regions)?;
        outputs.push(a.finish(out, input));
    }
    Ok(outputs)
}

/// CPU or CUDA engine.
pub enum Engine {
    /// Analyses on the worker thread, one frame at a time.
    Cpu {
        /// The analyses.
        analyses: Vec<Box<dyn Analysis>>,
    },
    /// The ring of CUDA streams.
    Cuda(Box<CudaRing>),
}

impl Engine {
    /// Builds the engine for `backend` with the analyses of `settings`.
    pub fn new(backend: &Backend, settings: &OpSettings, ring_size: usize) -> Result<Self, OpError> {
        let analyses = build_analyses(settings)?;
        Ok(match backend {
            Backend::Cpu => Self::Cpu { analyses },
            Backend::Cuda(gpu) => Self::Cuda(Box::new(CudaRing::new(gpu.clone(), analyses, settings.clone(), ring_size)?)),
        })
    }

    /// New settings for every analysis, from the next frame on.
    pub fn update(&mut self, settings: &OpSettings) -> Result<(), OpError> {
        match self {
            Self::Cpu { analyses } => analyses.iter_mut().try_for_each(|a| a.update(settings)),
            Self::Cuda(ring) => ring.update(settings),
        }
    }

    /// Processes a frame; returns the frames that completed, in order.
    pub fn submit(&mut self, s: Submitted) -> Result<Vec<AnalysedFrame>, OpError> {
        match self {
            Self::Cpu { analyses } => {
                let t0 = Instant::now();
                let (index, pts_nanos) = (s.frame.index, s.frame.pts_nanos);
                let input = frame_input(index, s.frame.image);
                let mut regions = vec![("preprocess_gray".to_owned(), t0.elapsed().as_secs_f64() * 1e3)];
                let outputs = run_cpu_analyses(analyses, &input, &mut regions)?;
                let compute_ms = regions.iter().map(|r| r.1).sum();
                let timings = FrameTimings {
                    backend: "cpu",
                    regions,
                    queue_wait_ms: s.queue_wait_ms,
                    latency_ms: s.received.elapsed().as_secs_f64() * 1e3,
                    compute_ms,
                    ..Default::default()
                };
                Ok(vec![AnalysedFrame {
                    index,
                    pts_nanos,
                    gray: input.gray,
                    rgb: input.rgb,
                    outputs,
                    timings,
                }])
            }
            Self::Cuda(ring) => ring.submit(s),
        }
    }

    /// Completes every frame still in flight.
    pub fn flush(&mut self) -> Result<Vec<AnalysedFrame>, OpError> {
        match self {
            Self::Cpu { .. } => Ok(Vec::new()),
            Self::Cuda(ring) => ring.flush(),
        }
    }
}
