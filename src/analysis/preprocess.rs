//! The `preprocess` analysis: grey-level statistics of every frame (the grey conversion itself
//! is done by the engine before any analysis runs: on the GPU by `preprocess_rgb_to_gray` in the
//! ring, on the CPU by `ops::preprocess`). Summary: mean, min, max grey level, from the frame's
//! 256-bin histogram (on the GPU a histogram kernel; only the bins are read back).

use std::sync::Arc;

use cudarc::driver::CudaStream;
use serde::{Deserialize, Serialize};

use super::descriptor::{Descriptor, Property, PropertyKind, in_section};
use super::{
    Analysis, DeviceFrame, FrameInput, FrameMeta, GpuStage, Layer, OpData, OpOutput, OpSettings,
};
use crate::gpu::GpuContext;
use crate::gpu::KernelTimer;
use crate::ops::OpError;
use crate::ops::preprocess::{GrayHistogramGpu, GrayStats, gray_histogram};

/// The `preprocess` analysis, described (see [`super::Descriptor`]).
pub const DESCRIPTOR: Descriptor = Descriptor {
    name: "preprocess",
    title: "grey statistics",
    legend: "",
    layer: None,
    properties: &[Property {
        name: "preprocess",
        key: "preprocess.enabled",
        blurb: "Grey-level statistics of each frame (in the frame summary)",
        kind: PropertyKind::Bool(true),
    }],
    enabled: |s| s.preprocess.enabled,
    validate: |s| in_section(DESCRIPTOR.name, s.preprocess.validate()),
    build: |s| Ok(Box::new(Preprocess::new(&s.preprocess))),
};

/// `[preprocess]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PreprocessSettings {
    /// Report grey statistics per frame.
    pub enabled: bool,
}

impl Default for PreprocessSettings {
    fn default() -> Self {
        Self { enabled: true }
    }
}

impl PreprocessSettings {
    /// Range checks.
    pub fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Grey statistics of each frame.
#[derive(Debug)]
pub struct Preprocess {
    settings: PreprocessSettings,
}

impl Preprocess {
    /// From settings.
    #[must_use]
    pub fn new(settings: &PreprocessSettings) -> Self {
        Self {
            settings: settings.clone(),
        }
    }
}

impl Analysis for Preprocess {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }
    fn enabled(&self) -> bool {
        self.settings.enabled
    }
    fn update(&mut self, settings: &OpSettings) -> Result<(), OpError> {
        self.settings = settings.preprocess.clone();
        Ok(())
    }
    fn run_cpu(
        &mut self,
        input: &FrameInput,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<OpOutput, OpError> {
        let t = std::time::Instant::now();
        let stats = GrayStats::from_histogram(&gray_histogram(input.gray.view()));
        timings.push(("preprocess_stats".into(), t.elapsed().as_secs_f64() * 1e3));
        Ok(output(&stats))
    }
    fn gpu_stage(&self, gpu: &GpuContext) -> Result<Option<Box<dyn GpuStage>>, OpError> {
        Ok(Some(Box::new(PreprocessStage {
            histogram: GrayHistogramGpu::new(gpu)?,
        })))
    }
}

fn output(stats: &GrayStats) -> OpOutput {
    OpOutput {
        op: DESCRIPTOR.name,
        summary: stats.summary(),
        layer: Layer::default(),
        data: OpData::None,
        ..Default::default()
    }
}

/// The grey histogram on the device; 256 bins read back.
struct PreprocessStage {
    histogram: GrayHistogramGpu,
}

impl GpuStage for PreprocessStage {
    fn enqueue(
        &mut self,
        frame: &DeviceFrame<'_>,
        timer: &mut KernelTimer,
        _settings: &OpSettings,
    ) -> Result<(), OpError> {
        self.histogram.enqueue(timer, frame.gray)
    }
    fn collect(
        &mut self,
        stream: &Arc<CudaStream>,
        _frame: &FrameMeta,
    ) -> Result<OpOutput, OpError> {
        Ok(output(&GrayStats::from_histogram(
            &self.histogram.download(stream)?,
        )))
    }
}
