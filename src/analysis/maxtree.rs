//! The `maxtree` analysis: attribute filtering on the max-tree (or min-tree) of the grey frame
//! (Blin et al. 2022 on the GPU, `ops::maxtree`). Output: the filtered frame is not kept; the
//! overlay raster is the residue `|frame − filtered|` (a top-hat: the small bright, or dark,
//! structures the filter removed). Summary: node count, changed pixels, mean residue.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::descriptor::{Descriptor, LayerLook, Property, PropertyKind, in_section};
use super::{
    Analysis, DeviceFrame, FrameInput, FrameMeta, GpuStage, Layer, OpData, OpOutput, OpSettings,
};
use crate::compose::{DeviceRaster, HostRaster, LayerKind};
use crate::gpu::{GpuContext, KernelTimer};
use crate::image::DynImage;
use crate::ops::OpError;
use crate::ops::maxtree::{MaxTree, MaxTreeGpu, MaxTreeOutput, MaxTreeParams};

/// The `maxtree` analysis, described (see [`super::Descriptor`]).
pub const DESCRIPTOR: Descriptor = Descriptor {
    name: "maxtree",
    title: "max-tree filter",
    legend: "Highlight: the residue of the attribute filter (|frame - filtered|, a top-hat): the \
              small bright (max-tree) or dark (min-tree) structures the filter removed glow yellow, \
              the more the stronger the residue; nothing where nothing was removed.",
    layer: Some(LayerLook {
        additive: true,
        hue_wheel: false,
    }),
    properties: &[
        Property {
            name: "maxtree",
            key: "maxtree.enabled",
            blurb: "Max-tree attribute filtering (overlay: the residue |frame - filtered|)",
            kind: PropertyKind::Bool(true),
        },
        Property {
            name: "maxtree-attribute",
            key: "maxtree.attribute",
            blurb: "Attribute of the max-tree filter: area, height, volume, bbox_width, bbox_height, diameter (longest bounding-box side) or diagonal",
            kind: PropertyKind::Text("area"),
        },
        Property {
            name: "maxtree-threshold",
            key: "maxtree.threshold",
            blurb: "Nodes whose attribute is at least this are kept",
            kind: PropertyKind::Double {
                min: 0.0,
                max: 1e12,
                default: 64.0,
            },
        },
    ],
    enabled: |s| s.maxtree.enabled,
    validate: |s| in_section(DESCRIPTOR.name, s.maxtree.validate()),
    build: |s| Ok(Box::new(MaxTreeFilter::new(s)?)),
};

/// `[maxtree]` is the op's own parameter struct.
pub(crate) type MaxTreeSettings = MaxTreeParams;

fn output(out: &MaxTreeOutput) -> OpOutput {
    let raster = match &out.residue {
        DynImage::Gray8(r) => Some(HostRaster::Residue(Arc::new(r.clone()))),
        DynImage::Gray16(r) => Some(HostRaster::Residue(Arc::new(r.map(|v| (v >> 8) as u8)))),
        _ => None,
    };
    OpOutput {
        op: DESCRIPTOR.name,
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
pub(crate) struct MaxTreeFilter {
    settings: MaxTreeParams,
}

impl MaxTreeFilter {
    /// From settings.
    pub fn new(settings: &OpSettings) -> Result<Self, OpError> {
        settings.maxtree.validate()?;
        Ok(Self {
            settings: settings.maxtree.clone(),
        })
    }
}

impl Analysis for MaxTreeFilter {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
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
        let out = MaxTreeOutput {
            filtered: DynImage::Gray8(f.filtered),
            residue: DynImage::Gray8(f.residue),
            node_count,
        };
        timings.push(("maxtree_cpu".into(), t.elapsed().as_secs_f64() * 1e3));
        Ok(output(&out))
    }
    fn gpu_stage(&self, gpu: &GpuContext) -> Result<Option<Box<dyn GpuStage>>, OpError> {
        Ok(Some(Box::new(MaxTreeStage {
            gpu: MaxTreeGpu::new(gpu)?,
        })))
    }
}

struct MaxTreeStage {
    gpu: MaxTreeGpu,
}

impl GpuStage for MaxTreeStage {
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
            op: DESCRIPTOR.name,
            summary,
            layer,
            ..Default::default()
        })
    }
    fn device_layer(&self) -> Option<DeviceRaster<'_>> {
        self.gpu.residue().map(DeviceRaster::Residue)
    }
}
