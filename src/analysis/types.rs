//! Per-frame results shared by the pipeline, the file sinks and the viewer.

use std::sync::Arc;

use crate::compose::{HostRaster, LayerKind, Picture, Shape};
use crate::image::Image;

/// One overlay layer of an analysis.
#[derive(Clone, Debug, Default)]
pub struct Layer {
    /// Picture blended over the frame.
    pub raster: Option<HostRaster>,
    /// Shapes drawn over it.
    pub shapes: Vec<Shape>,
    /// The kind of raster the analysis left on the device for the compose step (GPU backend,
    /// where `raster` is `None`): tells the viewer the layer exists without reading it back.
    pub device_raster: Option<LayerKind>,
}

/// A track as the viewer's tracks panel lists it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TrackInfo {
    /// Stable id.
    pub id: u64,
    /// Frames since the track was created.
    pub age: u64,
    /// Area of the last matched component.
    pub area: u64,
    /// Centroid (x, y).
    pub position: [f32; 2],
    /// Velocity in pixels per second.
    pub velocity: [f32; 2],
    /// Bounding box (left, top, width, height).
    pub bbox: [f32; 4],
}

/// Typed results for the viewer's panels.
#[derive(Clone, Debug, Default)]
pub enum OpData {
    /// Nothing beyond the layer and summary.
    #[default]
    None,
    /// Angular spectrum: (angle in degrees, sum of the opening).
    Spectrum(Vec<(f32, f64)>),
    /// Current tracks.
    Tracks(Vec<TrackInfo>),
}

/// One analysis' result for one frame.
#[derive(Clone, Debug, Default)]
pub struct OpOutput {
    /// Analysis name.
    pub op: &'static str,
    /// Summary numbers (written to `frames.jsonl`).
    pub summary: serde_json::Value,
    /// Overlay.
    pub layer: Layer,
    /// Panel data.
    pub data: OpData,
    /// Lines for per-analysis files of a headless run: (file name in the output folder, line
    /// without newline), e.g. `("tracks.csv", "1,3,…")`.
    pub records: Vec<(&'static str, String)>,
    /// Analysis-private data handed from `run_cpu`/`GpuStage::collect` to `Analysis::finish`.
    pub payload: Option<Payload>,
}

/// Opaque analysis-private data (see [`OpOutput::payload`]).
#[derive(Clone)]
pub struct Payload(pub Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Payload")
    }
}

impl Payload {
    /// Wraps a value.
    pub fn new<T: std::any::Any + Send + Sync>(v: T) -> Self {
        Self(Arc::new(v))
    }
    /// The value, if it is a `T`.
    #[must_use]
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }
}

/// Times of one frame, in milliseconds.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FrameTimings {
    /// "cpu" or "cuda".
    pub backend: &'static str,
    /// Named regions: kernels (CUDA events) or CPU functions (wall clock), in order.
    pub regions: Vec<(String, f64)>,
    /// Host to device copy (CUDA events), 0 on the CPU.
    pub upload_ms: f64,
    /// Device to host copies of the results, wall clock.
    pub download_ms: f64,
    /// Time the frame waited between the source and the worker.
    pub queue_wait_ms: f64,
    /// Source delivery to result, wall clock.
    pub latency_ms: f64,
    /// Sum of the analysis regions.
    pub compute_ms: f64,
}

/// A frame with every analysis' output: what sinks and the viewer consume.
#[derive(Clone, Debug)]
pub struct AnalysedFrame {
    /// Frame index from the source.
    pub index: u64,
    /// Presentation timestamp, ns.
    pub pts_nanos: Option<u64>,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Grey frame in host memory, where the host has it (CPU backend).
    pub gray: Option<Arc<Image<u8>>>,
    /// Colour frame in host memory, when the source is colour.
    pub rgb: Option<Arc<Image<[u8; 3]>>>,
    /// One output per enabled analysis, in run order.
    pub outputs: Vec<OpOutput>,
    /// The frame with every layer composed, when a sink asked for pixels this frame.
    pub picture: Option<Arc<Picture>>,
    /// Timings.
    pub timings: FrameTimings,
}

impl AnalysedFrame {
    /// Width and height.
    #[must_use]
    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }
    /// The output of analysis `op`, if it ran.
    #[must_use]
    pub fn output(&self, op: &str) -> Option<&OpOutput> {
        self.outputs.iter().find(|o| o.op == op)
    }
}
