//! The `preprocess` analysis: grey-level statistics of every frame (the grey conversion itself
//! is done by the engine before any analysis runs: on the GPU by `preprocess_rgb_to_gray` in the
//! ring, on the CPU by `ops::preprocess`). Summary: mean, min, max grey level.

use serde::{Deserialize, Serialize};

use super::{Analysis, FrameInput, GpuStage, Layer, OpData, OpOutput, OpSettings};
use crate::gpu::GpuContext;
use crate::ops::OpError;

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
        Self { settings: settings.clone() }
    }
}

impl Analysis for Preprocess {
    fn name(&self) -> &'static str {
        "preprocess"
    }
    fn enabled(&self) -> bool {
        self.settings.enabled
    }
    fn update(&mut self, settings: &OpSettings) -> Result<(), OpError> {
        self.settings = settings.preprocess.clone();
        Ok(())
    }
    fn run_cpu(&mut self, input: &FrameInput, timings: &mut Vec<(String, f64)>) -> Result<OpOutput, OpError> {
        let t = std::time::Instant::now();
        let (mut lo, mut hi, mut sum) = (u8::MAX, u8::MIN, 0u64);
        for row in input.gray.rows() {
            for &v in row {
                lo = lo.min(v);
                hi = hi.max(v);
                sum += u64::from(v);
            }
        }
        let n = input.gray.len().max(1) as f64;
        timings.push(("preprocess_stats".into(), t.elapsed().as_secs_f64() * 1e3));
        Ok(OpOutput {
            op: "preprocess",
            summary: serde_json::json!({ "mean_gray": sum as f64 / n, "min_gray": lo, "max_gray": hi }),
            layer: Layer::default(),
            data: OpData::None,
            ..Default::default()
        })
    }
    fn gpu_stage(&self, _gpu: &GpuContext) -> Result<Option<Box<dyn GpuStage>>, OpError> {
        Ok(None)
    }
}
