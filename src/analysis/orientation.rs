//! The `orientation` analysis: supremum of linear openings over K angles (Karas et al. 2015,
//! `ops::orientation`), per pixel the strength and the argmax angle, and the angular spectrum.
//! Overlay: the HSV orientation picture (hue = angle, value = strength). Panel data: the
//! spectrum. `frames.jsonl` gets the spectrum and the dominant angle.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::descriptor::{Descriptor, LayerLook, Property, PropertyKind, in_section};
use super::{
    Analysis, DeviceFrame, FrameInput, FrameMeta, GpuStage, Layer, OpData, OpOutput, OpSettings,
};
use crate::compose::{DeviceRaster, HostRaster, LayerKind};
use crate::gpu::{GpuContext, KernelTimer};
use crate::image::Image;
use crate::ops::OpError;
use crate::ops::orientation::{OrientationGpu, OrientationParams, orientation, spectrum_summary};

/// The `orientation` analysis, described (see [`super::Descriptor`]).
pub const DESCRIPTOR: Descriptor = Descriptor {
    name: "orientation",
    title: "orientation map",
    legend: "Colour = orientation of the strongest linear opening at each pixel (hue, see the wheel), \
              brightness = its strength (dark = no linear structure).",
    layer: Some(LayerLook {
        additive: true,
        hue_wheel: true,
    }),
    properties: &[
        Property {
            name: "orientation",
            key: "orientation.enabled",
            blurb: "Orientation maps: supremum of linear openings over evenly spaced angles",
            kind: PropertyKind::Bool(true),
        },
        Property {
            name: "orientation-length",
            key: "orientation.length",
            blurb: "Length of the linear structuring element, pixels (odd)",
            kind: PropertyKind::UInt {
                min: 1,
                max: 1023,
                default: 31,
            },
        },
        Property {
            name: "orientation-angles",
            key: "orientation.angles",
            blurb: "Number of directions in [0, 180) degrees",
            kind: PropertyKind::UInt {
                min: 1,
                max: 360,
                default: 36,
            },
        },
    ],
    enabled: |s| s.orientation.enabled,
    validate: |s| in_section(DESCRIPTOR.name, s.orientation.validate()),
    build: |s| Ok(Box::new(Orientation::new(s)?)),
};

/// `[orientation]` is the op's own parameter struct.
pub(crate) type OrientationSettings = OrientationParams;

fn output(
    angles_deg: &[f64],
    spectrum: &[f64],
    closing: bool,
    colour: Option<Image<[u8; 3]>>,
) -> OpOutput {
    let panel = angles_deg
        .iter()
        .zip(spectrum)
        .map(|(&a, &s)| (a as f32, s))
        .collect();
    OpOutput {
        op: DESCRIPTOR.name,
        summary: spectrum_summary(angles_deg, spectrum, closing),
        layer: Layer {
            raster: colour.map(|c| HostRaster::Colour(Arc::new(c))),
            ..Default::default()
        },
        data: OpData::Spectrum(panel),
        ..Default::default()
    }
}

/// Orientation maps of the grey frame.
pub struct Orientation {
    settings: OrientationParams,
}

impl Orientation {
    /// From settings.
    pub fn new(settings: &OpSettings) -> Result<Self, OpError> {
        settings.orientation.validate()?;
        Ok(Self {
            settings: settings.orientation.clone(),
        })
    }
}

impl Analysis for Orientation {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }
    fn enabled(&self) -> bool {
        self.settings.enabled
    }
    fn update(&mut self, settings: &OpSettings) -> Result<(), OpError> {
        settings.orientation.validate()?;
        self.settings = settings.orientation.clone();
        Ok(())
    }
    fn run_cpu(
        &mut self,
        input: &FrameInput,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<OpOutput, OpError> {
        let t = std::time::Instant::now();
        let out = orientation(input.gray.view(), &self.settings)?;
        let colour = out.colour();
        timings.push(("orientation_cpu".into(), t.elapsed().as_secs_f64() * 1e3));
        Ok(output(
            &out.angles_deg,
            &out.spectrum,
            out.closing,
            Some(colour),
        ))
    }
    fn gpu_stage(&self, gpu: &GpuContext) -> Result<Option<Box<dyn GpuStage>>, OpError> {
        Ok(Some(Box::new(OrientationStage {
            gpu: OrientationGpu::new(gpu)?,
        })))
    }
}

struct OrientationStage {
    gpu: OrientationGpu<u8>,
}

impl GpuStage for OrientationStage {
    fn enqueue(
        &mut self,
        frame: &DeviceFrame<'_>,
        timer: &mut KernelTimer,
        settings: &OpSettings,
    ) -> Result<(), OpError> {
        self.gpu.enqueue(timer, frame.gray, &settings.orientation)
    }
    /// The spectrum only: the colour picture stays on the device for the compose step, and the
    /// strength and angle maps are read back only by `image --op orientation`.
    fn collect(
        &mut self,
        stream: &Arc<CudaStream>,
        _frame: &FrameMeta,
    ) -> Result<OpOutput, OpError> {
        let spectrum = self.gpu.download_spectrum(stream)?;
        let mut out = output(self.gpu.angles_deg(), &spectrum, self.gpu.closing(), None);
        out.layer.device_raster = Some(LayerKind::Colour);
        Ok(out)
    }
    fn device_layer(&self) -> Option<DeviceRaster<'_>> {
        self.gpu.colour().map(DeviceRaster::Colour)
    }
}
