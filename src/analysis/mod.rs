//! The analyses as the pipeline sees them: one [`Analysis`] per op (its settings section, its CPU
//! path, a factory for its per-slot GPU stage, and an in-order `finish` step for state that spans
//! frames, such as the tracker), and the [`OpOutput`] every analysis produces per frame: summary
//! numbers for `frames.jsonl`, an overlay [`Layer`] (a raster and/or vector shapes in image
//! coordinates) and typed [`OpData`] for the viewer's panels.
//!
//! Adding an analysis: a settings struct in [`OpSettings`], an `impl Analysis`, one line in
//! [`build_analyses`]. The pipeline, sinks and viewer need no change: they iterate the outputs.

pub mod cca;
pub mod maxtree;
pub mod orientation;
pub mod preprocess;
pub mod segmentation;
pub mod types;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use serde::{Deserialize, Serialize};

pub use types::{AnalysedFrame, FrameTimings, Layer, OpData, OpOutput, Payload, Raster, Shape, TrackInfo};

use crate::gpu::{GpuContext, KernelTimer};
use crate::image::Image;
use crate::ops::OpError;

/// Settings sections of the analyses (flattened into the top level of the config).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpSettings {
    /// `[preprocess]`
    pub preprocess: preprocess::PreprocessSettings,
    /// `[maxtree]`
    pub maxtree: maxtree::MaxtreeSettings,
    /// `[cca]`
    pub cca: cca::CcaSettings,
    /// `[tracker]`
    pub tracker: crate::track::TrackerParams,
    /// `[orientation]`
    pub orientation: orientation::OrientationSettings,
    /// `[segmentation]`
    pub segmentation: segmentation::SegmentationSettings,
}

impl OpSettings {
    /// Range checks; `Err((key, message))`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        self.preprocess.validate().map_err(|m| ("preprocess".to_owned(), m))?;
        self.maxtree.validate().map_err(|e| ("maxtree".to_owned(), e.to_string()))?;
        self.cca.params().validate().map_err(|e| ("cca".to_owned(), e.to_string()))?;
        self.tracker.validate().map_err(|e| ("tracker".to_owned(), e.to_string()))?;
        self.orientation.validate().map_err(|e| ("orientation".to_owned(), e.to_string()))?;
        self.segmentation.validate().map_err(|e| ("segmentation".to_owned(), e.to_string()))?;
        Ok(())
    }
}

/// What every analysis sees of a frame on the CPU.
#[derive(Clone, Debug)]
pub struct FrameInput {
    /// Frame index.
    pub index: u64,
    /// Grey version of the frame (packed).
    pub gray: Arc<Image<u8>>,
    /// Colour frame when the source delivers colour (packed).
    pub rgb: Option<Arc<Image<[u8; 3]>>>,
    /// 16-bit grey when the source delivers 16 bits.
    pub gray16: Option<Arc<Image<u16>>>,
}

/// What every GPU stage sees of a frame: device buffers filled by the ring before the stages run.
pub struct GpuFrame<'a> {
    /// Packed grey frame on the device.
    pub gray: &'a CudaSlice<u8>,
    /// Packed RGB (3 bytes a pixel) on the device, when the source is colour.
    pub rgb: Option<&'a CudaSlice<u8>>,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Index of the frame in its source (as [`FrameInput::index`]).
    pub index: u64,
}

/// One analysis of the pipeline.
pub trait Analysis: Send {
    /// Short name, also the settings section and the prefix of its kernel timings.
    fn name(&self) -> &'static str;
    /// Whether it runs (from its settings).
    fn enabled(&self) -> bool;
    /// New settings (live changes from the viewer); applied from the next frame on.
    fn update(&mut self, settings: &OpSettings) -> Result<(), OpError>;
    /// Runs on the CPU; pushes (region name, ms) into `timings`.
    fn run_cpu(&mut self, input: &FrameInput, timings: &mut Vec<(String, f64)>) -> Result<OpOutput, OpError>;
    /// A per-slot GPU stage, or `None` when this analysis has no CUDA path (the ring then runs
    /// `run_cpu` for it after the slot completes).
    fn gpu_stage(&self, gpu: &GpuContext) -> Result<Option<Box<dyn GpuStage>>, OpError>;
    /// In-order host step after the CPU or GPU result (cross-frame state such as tracks).
    fn finish(&mut self, output: OpOutput, _input: &FrameInput) -> OpOutput {
        output
    }
}

/// The part of an analysis that lives in one ring slot: device buffers and resolved kernels.
pub trait GpuStage: Send {
    /// Enqueues this frame's work on the slot's stream (no host synchronisation).
    fn enqueue(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        frame: &GpuFrame<'_>,
        settings: &OpSettings,
    ) -> Result<(), OpError>;
    /// After the slot's work completed: copies results back and builds the output.
    fn collect(&mut self, stream: &Arc<CudaStream>, input: &FrameInput) -> Result<OpOutput, OpError>;
    /// True when the stage carries device state from one frame to the next (it then runs after
    /// the previous frame's ordered stages; others run without waiting for other frames).
    fn ordered(&self) -> bool {
        false
    }
}

/// Every analysis, in the order they run on a frame.
pub fn build_analyses(settings: &OpSettings) -> Result<Vec<Box<dyn Analysis>>, OpError> {
    let mut v: Vec<Box<dyn Analysis>> = vec![Box::new(preprocess::Preprocess::new(&settings.preprocess)),
        Box::new(maxtree::Maxtree::new(settings)?),
        Box::new(cca::Cca::new(settings)?),
        Box::new(orientation::Orientation::new(settings)?),
        Box::new(segmentation::Segmentation::new(settings)?),
    ];
    for a in &mut v {
        a.update(settings)?;
    }
    Ok(v)
}
