//! The `maxtree` analysis: attribute filtering on the max-tree (or min-tree) of the grey frame
//! (Blin et al. 2022 on the GPU, `ops::maxtree`). Output: the filtered frame is not kept; the
//! overlay raster is the residue `|frame − filtered|` (a top-hat: the small bright, or dark,
//! structures the filter removed). Summary: node count, changed pixels, mean residue.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::{
    Analysis, DeviceFrame, FrameInput, FrameMeta, GpuStage, Layer, OpData, OpOutput, OpSettings,
    Raster,
};
use crate::compose::{DeviceRaster, LayerKind};
use crate::gpu::{GpuContext, KernelTimer};
use crate::image::DynImage;
use crate::ops::OpError;
use crate::ops::maxtree::{MaxTree, MaxtreeGpu, MaxtreeOutput, MaxtreeParams};

/// `[maxtree]` is the op's own parameter struct.
pub type MaxtreeSettings = MaxtreeParams;

fn output(out: &MaxtreeOutput) -> OpOutput {
    let raster = match &out.residue {
        DynImage::Gray8(r) => Some(Raster::Residue(Arc::new(r.clone()))),
        DynImage::Gray16(r) => Some(Raster::Residue(Arc::new(r.map(|v| (v >> 8) as u8)))),
        _ => None,
    };
    OpOutput {
        op: "maxtree",
        summary: out.summary(),
        layer: Layer {
            raster,
            ..Default::default()
        },
        data: OpData::None,
        ..Default::default()
    }
}

/// Max-tree attribute filter of each frame.
pub struct Maxtree {
    settings: MaxtreeParams,
}

impl Maxtree {
    /// From settings.
    pub fn new(settings: &OpSettings) -> Result<Self, OpError> {
        settings.maxtree.validate()?;
        Ok(Self {
            settings: settings.maxtree.clone(),
        })
    }
}

impl Analysis for Maxtree {
    fn name(&self) -> &'static str {
        "maxtree"
    }
    fn enabled(&self) -> bool {
        self.settings.enabled
    }
    fn update(&mut self, settings: &OpSettings) -> Result<(), OpError> {
        settings.maxtree.validate()?;
        self.settings = settings.maxtree.clone();
        Ok(())
    }
    fn run_cpu(
        &mut self,
        input: &FrameInput,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<OpOutput, OpError> {
        let t = std::time::Instant::now();
        let p = &self.settings;
        let tree = MaxTree::build(input.gray.view(), p.tree, p.connectivity()?)?;
        let f = tree.filter(p.attribute, p.threshold, p.rule);
        let node_count = u32::try_from(tree.node_count()).unwrap_or(u32::MAX);
        let out = MaxtreeOutput {
            filtered: DynImage::Gray8(f.filtered),
            residue: DynImage::Gray8(f.residue),
            node_count,
        };
        timings.push(("maxtree_cpu".into(), t.elapsed().as_secs_f64() * 1e3));
        Ok(output(&out))
    }
    fn gpu_stage(&self, gpu: &GpuContext) -> Result<Option<Box<dyn GpuStage>>, OpError> {
        Ok(Some(Box::new(MaxtreeStage {
            gpu: MaxtreeGpu::new(gpu)?,
        })))
    }
}

struct MaxtreeStage {
    gpu: MaxtreeGpu,
}

impl GpuStage for MaxtreeStage {
    fn enqueue(
        &mut self,
        frame: &DeviceFrame<'_>,
        timer: &mut KernelTimer,
        settings: &OpSettings,
    ) -> Result<(), OpError> {
        self.gpu.enqueue(timer, frame.gray, &settings.maxtree)
    }
    /// The node count and the residue's statistics (reduced on the device); the residue itself
    /// stays there for the compose step.
    fn collect(
        &mut self,
        stream: &Arc<CudaStream>,
        _frame: &FrameMeta,
    ) -> Result<OpOutput, OpError> {
        let summary = self.gpu.download_summary(stream)?.summary();
        let layer = Layer {
            device_raster: Some(LayerKind::Residue),
            ..Default::default()
        };
        Ok(OpOutput {
            op: "maxtree",
            summary,
            layer,
            ..Default::default()
        })
    }
    fn device_layer(&self) -> Option<DeviceRaster<'_>> {
        self.gpu.residue().map(DeviceRaster::Residue)
    }
}
