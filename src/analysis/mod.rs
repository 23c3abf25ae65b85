//! The analyses as the pipeline sees them: one [`Analysis`] per op (its settings section, its CPU
//! path, a factory for its per-slot GPU stage, and an in-order `finish` step for state that spans
//! frames, such as the tracker), and the [`OpOutput`] every analysis produces per frame: summary
//! numbers for `frames.jsonl`, an overlay [`Layer`] (a raster and/or vector shapes in image
//! coordinates) and typed [`OpData`] for the viewer's panels.
//!
//! Adding an analysis: its op in `src/ops/<name>/`, its kernels in `kernels/<name>.cu` (a line
//! in `crate::kernels`), a file here with its settings struct, its `impl Analysis` and its
//! [`Descriptor`], a field in [`OpSettings`] with its section in `config/default.toml`, and a
//! line in [`ANALYSES`]. The pipeline, sinks, viewer, service and element need no change: they
//! iterate the descriptors and the outputs.

pub mod cca;
pub mod descriptor;
pub mod maxtree;
pub mod orientation;
pub mod overlay;
pub mod preprocess;
pub mod segmentation;
pub(crate) mod types;

use std::sync::Arc;

use cudarc::driver::CudaStream;
use serde::{Deserialize, Serialize};

pub use descriptor::{Descriptor, LayerLook, Property, PropertyKind};
pub use types::{AnalysedFrame, FrameTimings, Layer, OpData, OpOutput, Payload, TrackInfo};

use crate::compose::DeviceRaster;

use crate::gpu::{DeviceImage, GpuContext, KernelTimer};
use crate::image::Image;
use crate::ops::OpError;

/// Settings sections of the analyses (flattened into the top level of the config).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpSettings {
    /// `[preprocess]`
    pub preprocess: preprocess::PreprocessSettings,
    /// `[maxtree]`
    pub maxtree: maxtree::MaxTreeSettings,
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
    /// Whether analysis `name` (its settings section) is enabled.
    #[must_use]
    pub fn is_enabled(&self, name: &str) -> bool {
        descriptor(name).is_some_and(|d| (d.enabled)(self))
    }

    /// Range checks of every analysis' sections; `Err((key, message))`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        ANALYSES.iter().try_for_each(|d| (d.validate)(self))
    }
}

/// Every analysis, in the order they run on a frame.
///
/// ```
/// use morphoscope::analysis::ANALYSES;
///
/// let names: Vec<&str> = ANALYSES.iter().map(|d| d.name).collect();
/// assert!(names.iter().all(|n| morphoscope::analysis::descriptor(n).is_some()));
/// // Each names the settings section that switches it on.
/// let s = morphoscope::config::Settings::defaults()?;
/// assert!(ANALYSES.iter().all(|d| (d.enabled)(&s.ops)));
/// # Ok::<(), morphoscope::config::ConfigError>(())
/// ```
pub const ANALYSES: &[&Descriptor] = &[
    &preprocess::DESCRIPTOR,
    &maxtree::DESCRIPTOR,
    &cca::DESCRIPTOR,
    &orientation::DESCRIPTOR,
    &segmentation::DESCRIPTOR,
];

/// The analysis named `name`.
#[must_use]
pub fn descriptor(name: &str) -> Option<&'static Descriptor> {
    ANALYSES.iter().copied().find(|d| d.name == name)
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

/// What every GPU stage sees of a frame: device buffers filled by the ring before the stages
/// run, on the slot's stream (`gray.stream`).
pub struct DeviceFrame<'a> {
    /// Packed grey frame.
    pub gray: DeviceImage<'a, u8>,
    /// Packed RGB frame (3 samples a pixel), when the source is colour.
    pub rgb: Option<DeviceImage<'a, u8>>,
    /// Index of the frame in its source (as [`FrameInput::index`]).
    pub index: u64,
}

impl DeviceFrame<'_> {
    /// The slot's stream, which every stage enqueues on.
    #[must_use]
    pub fn stream(&self) -> &Arc<CudaStream> {
        self.gray.stream
    }
    /// Width in pixels.
    #[must_use]
    pub fn width(&self) -> usize {
        self.gray.width
    }
    /// Height in pixels.
    #[must_use]
    pub fn height(&self) -> usize {
        self.gray.height
    }
}

/// What the completion side knows of a frame (no pixels: on the GPU they stay on the device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMeta {
    /// Frame index from the source.
    pub index: u64,
    /// Presentation timestamp from the source, ns, when it gives one.
    pub pts_nanos: Option<u64>,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// The first frame after a live source came back ([`crate::source::Frame::after_gap`]).
    pub after_gap: bool,
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
    fn run_cpu(
        &mut self,
        input: &FrameInput,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<OpOutput, OpError>;
    /// A per-slot GPU stage, or `None` when this analysis has no CUDA path (the ring then runs
    /// `run_cpu` for it after the slot completes).
    fn gpu_stage(&self, gpu: &GpuContext) -> Result<Option<Box<dyn GpuStage>>, OpError>;
    /// In-order host step after the CPU or GPU result (cross-frame state such as tracks).
    fn finish(&mut self, output: OpOutput, _frame: &FrameMeta) -> OpOutput {
        output
    }
    /// In-order step on the GPU path, after [`Analysis::finish`]: the frame's overlay on the
    /// device for the compose step. The default is the stage's own layer; an analysis that
    /// shows an earlier frame's result (segmentation's `every`) keeps its own device copy.
    fn device_layer<'a>(
        &'a mut self,
        stage: &'a mut dyn GpuStage,
        _stream: &Arc<CudaStream>,
        _frame: &FrameMeta,
    ) -> Result<Option<DeviceRaster<'a>>, OpError> {
        Ok(stage.device_layer())
    }
}

/// The part of an analysis that lives in one ring slot: device buffers and resolved kernels.
pub trait GpuStage: Send {
    /// Enqueues this frame's work on the frame's stream (no host synchronisation).
    fn enqueue(
        &mut self,
        frame: &DeviceFrame<'_>,
        timer: &mut KernelTimer,
        settings: &OpSettings,
    ) -> Result<(), OpError>;
    /// After the slot's work completed: reads back this frame's small results (tables, counts,
    /// spectra — never a picture) and builds the output.
    fn collect(&mut self, stream: &Arc<CudaStream>, frame: &FrameMeta)
    -> Result<OpOutput, OpError>;
    /// This frame's overlay layer on the device (valid until the next `enqueue`), or `None`.
    fn device_layer(&self) -> Option<DeviceRaster<'_>> {
        None
    }
    /// True when the stage carries device state from one frame to the next (it then runs after
    /// the previous frame's ordered stages; others run without waiting for other frames).
    fn ordered(&self) -> bool {
        false
    }
}

/// Every analysis, built from `settings`, in the order they run on a frame.
pub(crate) fn build_analyses(settings: &OpSettings) -> Result<Vec<Box<dyn Analysis>>, OpError> {
    let mut v = ANALYSES
        .iter()
        .map(|d| (d.build)(settings))
        .collect::<Result<Vec<_>, _>>()?;
    for a in &mut v {
        a.update(settings)?;
    }
    Ok(v)
}
