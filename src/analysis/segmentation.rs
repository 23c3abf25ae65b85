//! The `segmentation` analysis: Felzenszwalb–Huttenlocher graph-based segmentation of each frame
//! (`ops::segmentation`: the exact Kruskal reference on the CPU, round-based atomics Borůvka after
//! Baranwal et al. on the GPU). It segments the colour frame when the source is colour and
//! `colour = true` (scikit-image's RGB graph), else the grey frame. Overlay: every segment
//! filled with its mean colour (or a random colour per label) with 1-pixel boundaries.
//! Summary: the segment count and, on the GPU, the merge rounds used (and `"rerun": true` on a
//! frame that needed more rounds than the previous frame's adaptive caps and was run again, and
//! `"graph_capture": true` on a frame whose caps were new, so its launches were captured).
//!
//! `every = N` segments only frames whose index is a multiple of N (segmentation is by far the
//! most expensive analysis); the frames in between show the last segmentation's labels over
//! their own pixels (mean colours recomputed), with `"skipped": true` and `"from_frame"` in
//! their summary. The in-order [`Analysis::finish`] step keeps that last segmentation, so it
//! works the same with the ring's overlapping slots and on the CPU.
//!
//! `downscale = F` segments the frame box-averaged over F x F blocks
//! ([`crate::ops::preprocess::downscale_box`], the same integer arithmetic on both backends)
//! and brings the labels back to the frame's size ([`crate::ops::segmentation::upsample_labels`], nearest); the overlay's
//! mean colours come from the full-resolution frame. F² fewer pixels, and on smooth (e.g.
//! upscaled) video far fewer dependent rounds; `min_size` counts downscaled pixels.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream};
use serde::{Deserialize, Serialize};

use super::descriptor::{Descriptor, LayerLook, Property, PropertyKind, in_section};
use super::{
    Analysis, DeviceFrame, FrameInput, FrameMeta, GpuStage, Layer, OpData, OpOutput, OpSettings,
    Payload,
};
use crate::compose::{DeviceRaster, HostRaster, LayerKind, SegmentCount, Segments};
use crate::gpu::launch::alloc_zeroed;
use crate::gpu::{DeviceImage, GpuContext, KernelTimer};
use crate::image::Image;
use crate::ops::OpError;
use crate::ops::blur::cpu::{pack_gray, pack_rgb};
use crate::ops::preprocess::{
    downscale_box, downscale_function, downscaled_size, enqueue_downscale,
};
use crate::ops::segmentation::boruvka::felzenszwalb_boruvka;
use crate::ops::segmentation::cpu::felzenszwalb_interleaved;
use crate::ops::segmentation::{
    OverlayMode, SegmentationGpu, SegmentationOutput, SegmentationParams,
};

/// The `segmentation` analysis, described (see [`super::Descriptor`]).
pub const DESCRIPTOR: Descriptor = Descriptor {
    name: "segmentation",
    title: "segmentation",
    legend: "Each segment of the graph-based (Felzenszwalb) segmentation filled with its mean colour \
              or a random colour, with its boundary drawn.",
    layer: Some(LayerLook {
        additive: false,
        hue_wheel: false,
    }),
    properties: &[
        Property {
            name: "segmentation",
            key: "segmentation.enabled",
            blurb: "Felzenszwalb graph segmentation",
            kind: PropertyKind::Bool(true),
        },
        Property {
            name: "segmentation-scale",
            key: "segmentation.scale",
            blurb: "Observation scale k: higher gives fewer, larger segments",
            kind: PropertyKind::Double {
                min: 0.0,
                max: 1e9,
                default: 100.0,
            },
        },
        Property {
            name: "segmentation-min-size",
            key: "segmentation.min_size",
            blurb: "Segments smaller than this (pixels) are merged into a neighbour",
            kind: PropertyKind::UInt {
                min: 0,
                max: u32::MAX,
                default: 20,
            },
        },
    ],
    enabled: |s| s.segmentation.enabled,
    validate: |s| in_section(DESCRIPTOR.name, s.segmentation.validate()),
    build: |s| Ok(Box::new(Segmentation::new(s)?)),
};

/// Colour of the segment boundaries in the overlay.
const BOUNDARY: [u8; 3] = [255, 255, 0];

/// `[segmentation]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SegmentationSettings {
    /// Run the analysis.
    pub enabled: bool,
    /// Observation scale `k` (scikit-image's `scale`): higher gives fewer, larger segments.
    pub scale: f64,
    /// Gaussian smoothing before the graph is built (0: none).
    pub sigma: f64,
    /// Segments smaller than this are merged into a neighbour.
    pub min_size: usize,
    /// Hierarchy level to show: -1 the final segmentation; 0 one segment per pixel, 1, 2, …
    /// the segmentation after each merging round (levels above the frame's last are the final
    /// one). On the GPU a level costs one relabelling pass, not a new segmentation; on the CPU it
    /// runs the rounds' sequential model instead of Kruskal.
    pub level: i32,
    /// Segment the colour frame when the source is colour (else the grey frame).
    pub colour: bool,
    /// Overlay fill: `"mean"` colour of the segment or a `"random"` colour per label.
    pub fill: OverlayMode,
    /// Draw segment boundaries in the overlay.
    pub boundaries: bool,
    /// GPU: cap on the merge rounds per frame (see `SegmentationParams::max_rounds`).
    pub max_rounds: u32,
    /// GPU: cap on the `min_size` rounds per frame.
    pub max_min_size_rounds: u32,
    /// GPU: enqueue the previous frame's round count plus a margin instead of the caps.
    pub adaptive_rounds: bool,
    /// Segment every N-th frame (frame index a multiple of N); the frames between show the
    /// last segmentation. 1: every frame.
    pub every: u32,
    /// Segment the frame box-averaged over F x F blocks (1: full resolution; at most 8); the
    /// labels are scaled back to the frame. `min_size` counts downscaled pixels.
    pub downscale: u32,
}

impl Default for SegmentationSettings {
    fn default() -> Self {
        let p = SegmentationParams::default();
        Self {
            enabled: true,
            scale: p.scale,
            sigma: p.sigma,
            min_size: p.min_size,
            level: -1,
            colour: true,
            fill: OverlayMode::Mean,
            boundaries: true,
            max_rounds: p.max_rounds,
            max_min_size_rounds: p.max_min_size_rounds,
            adaptive_rounds: p.adaptive_rounds,
            every: 1,
            downscale: 1,
        }
    }
}

impl SegmentationSettings {
    /// The op parameters.
    #[must_use]
    pub fn params(&self) -> SegmentationParams {
        SegmentationParams {
            scale: self.scale,
            sigma: self.sigma,
            min_size: self.min_size,
            max_rounds: self.max_rounds,
            max_min_size_rounds: self.max_min_size_rounds,
            adaptive_rounds: self.adaptive_rounds,
        }
    }

    /// Checks every field and names the bad one.
    pub fn validate(&self) -> Result<(), OpError> {
        if !(1..=8).contains(&self.downscale) {
            return Err(OpError::InvalidParam(format!(
                "downscale must be in 1..=8, got {}",
                self.downscale
            )));
        }
        if self.every == 0 {
            return Err(OpError::InvalidParam(
                "every must be at least 1 (1: segment every frame)".into(),
            ));
        }
        if self.level < -1 {
            return Err(OpError::InvalidParam(format!(
                "level must be -1 (final) or a level >= 0, got {}",
                self.level
            )));
        }
        self.params().validate()
    }

    /// Whether frame `index` is segmented (the others reuse the last segmentation).
    fn segments(&self, index: u64) -> bool {
        index.is_multiple_of(u64::from(self.every.max(1)))
    }

    /// The hierarchy level asked for, `None` for the final segmentation.
    fn level(&self) -> Option<u32> {
        u32::try_from(self.level).ok()
    }

    fn boundary(&self) -> Option<[u8; 3]> {
        self.boundaries.then_some(BOUNDARY)
    }
}

/// The overlay raster of a segmentation of a `width` x `height` frame: its labels (possibly
/// downscaled: the compose step upsamples them and fills each segment from the frame's pixels).
fn raster(
    out: &SegmentationOutput,
    labels: Arc<Image<u32>>,
    width: usize,
    settings: &SegmentationSettings,
) -> HostRaster {
    let factor = if labels.width() == width {
        1
    } else {
        settings.downscale as usize
    };
    let (label_width, label_height) = (labels.width(), labels.height());
    let segments = Segments {
        labels,
        label_width,
        label_height,
        factor,
        fill: settings.fill,
        boundary: settings.boundary(),
    };
    HostRaster::Segments {
        segments,
        count: out.segment_count,
    }
}

/// The summary of a segmentation (with its `downscale`).
fn summary(out: &SegmentationOutput, settings: &SegmentationSettings) -> serde_json::Value {
    let mut summary = out.summary();
    if settings.downscale > 1
        && let Some(m) = summary.as_object_mut()
    {
        m.insert("downscale".into(), settings.downscale.into());
    }
    summary
}

/// A segmented frame's overlay and summary, handed to `finish` (which keeps them for the frames
/// `every` skips).
#[derive(Debug)]
struct Segmented {
    index: u64,
    width: usize,
    height: usize,
    raster: Option<HostRaster>,
    summary: serde_json::Value,
}

/// The output of a segmented frame: the summary, the labels as the layer's raster (when they
/// were read back: the CPU path), and the same as payload for `finish`.
fn output(seg: Segmented) -> OpOutput {
    let raster = seg.raster.clone();
    OpOutput {
        op: DESCRIPTOR.name,
        summary: seg.summary.clone(),
        layer: Layer {
            raster,
            ..Default::default()
        },
        data: OpData::None,
        payload: Some(Payload::new(seg)),
        ..Default::default()
    }
}

/// The output of a frame that `every` skips (filled in by `finish`).
fn skipped() -> OpOutput {
    OpOutput {
        op: DESCRIPTOR.name,
        summary: serde_json::json!({ "skipped": true }),
        ..Default::default()
    }
}

/// Graph-based segmentation of each frame (or every N-th, see the module doc).
#[derive(Debug)]
pub struct Segmentation {
    settings: SegmentationSettings,
    /// The last segmented frame's labels (a [`Segmented`]), for the frames `every` skips.
    last: Option<Payload>,
    /// GPU with `every > 1`: a device copy of the last segmented frame's labels (the ring slot
    /// that computed them is reused), with their size and segment count.
    last_labels: Option<DeviceLabels>,
}

/// A segmentation's labels kept on the device (see [`Segmentation::device_layer`]).
#[derive(Debug)]
struct DeviceLabels {
    labels: CudaSlice<u32>,
    width: usize,
    height: usize,
    count: usize,
}

impl Segmentation {
    /// From settings.
    pub fn new(settings: &OpSettings) -> Result<Self, OpError> {
        settings.segmentation.validate()?;
        Ok(Self {
            settings: settings.segmentation.clone(),
            last: None,
            last_labels: None,
        })
    }

    /// The CPU segmentation of a frame: pack it, box-downscale it when `downscale > 1`, segment
    /// it (Kruskal, or the rounds' model when a level is asked for). The labels stay at the
    /// downscaled size (the compose step scales them back).
    fn segment_cpu(
        &self,
        input: &FrameInput,
        colour: Option<&Image<[u8; 3]>>,
        params: &SegmentationParams,
    ) -> Result<SegmentationOutput, OpError> {
        let (w, h) = (input.gray.width(), input.gray.height());
        let (data, channels) = match colour {
            Some(rgb) => (pack_rgb(rgb.view()), 3),
            None => (pack_gray(input.gray.view()), 1),
        };
        let f = self.settings.downscale as usize;
        let (sw, sh) = downscaled_size(w, h, f);
        let small = if (sw, sh) == (w, h) {
            data
        } else {
            downscale_box(&data, w, h, channels, f)
        };
        let out = match self.settings.level() {
            None => felzenszwalb_interleaved(&small, sw, sh, channels, params)?,
            Some(level) => {
                let (out, hierarchy) = felzenszwalb_boruvka(&small, sw, sh, channels, params)?;
                let level = level.min(out.levels() - 1);
                let (labels, segment_count) = hierarchy.labels_at(level)?;
                SegmentationOutput {
                    labels,
                    segment_count,
                    level,
                    ..out
                }
            }
        };
        Ok(out)
    }
}

/// The colour frame to segment, when there is one and the settings ask for colour.
fn colour_input<'a>(
    input: &'a FrameInput,
    settings: &SegmentationSettings,
) -> Option<&'a Image<[u8; 3]>> {
    input.rgb.as_deref().filter(|_| settings.colour)
}

impl Analysis for Segmentation {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }
    fn enabled(&self) -> bool {
        self.settings.enabled
    }
    fn update(&mut self, settings: &OpSettings) -> Result<(), OpError> {
        settings.segmentation.validate()?;
        self.settings = settings.segmentation.clone();
        Ok(())
    }
    fn run_cpu(
        &mut self,
        input: &FrameInput,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<OpOutput, OpError> {
        if !self.settings.segments(input.index) {
            return Ok(skipped());
        }
        let t = std::time::Instant::now();
        let params = self.settings.params();
        let mut out = self.segment_cpu(input, colour_input(input, &self.settings), &params)?;
        timings.push(("segmentation_cpu".into(), t.elapsed().as_secs_f64() * 1e3));
        let (width, height) = (input.gray.width(), input.gray.height());
        let labels = Arc::new(std::mem::replace(&mut out.labels, Image::new(0, 0, 0)));
        let raster = raster(&out, labels, width, &self.settings);
        Ok(output(Segmented {
            index: input.index,
            width,
            height,
            raster: Some(raster),
            summary: summary(&out, &self.settings),
        }))
    }
    fn gpu_stage(&self, gpu: &GpuContext) -> Result<Option<Box<dyn GpuStage>>, OpError> {
        Ok(Some(Box::new(SegmentationStage {
            gpu: SegmentationGpu::new(gpu)?,
            f_downscale: downscale_function(gpu)?,
            captures: 0,
            settings: self.settings.clone(),
            skipped: false,
            small: None,
            count: 0,
        })))
    }
    /// The stage's labels for a segmented frame; with `every > 1` they are also copied into
    /// the analysis' own buffer (in frame order, on the frame's stream), which the skipped
    /// frames after it show.
    fn device_layer<'a>(
        &'a mut self,
        stage: &'a mut dyn GpuStage,
        stream: &Arc<CudaStream>,
        frame: &FrameMeta,
    ) -> Result<Option<DeviceRaster<'a>>, OpError> {
        let every = self.settings.every > 1;
        if let Some(DeviceRaster::Segments { segments, count }) = stage.device_layer() {
            if every {
                let (w, h) = (segments.label_width, segments.label_height);
                let count = match count {
                    SegmentCount::Host(n) => n,
                    SegmentCount::Device(_) => 0,
                };
                if self
                    .last_labels
                    .as_ref()
                    .is_none_or(|l| l.labels.len() != w * h)
                {
                    self.last_labels = None;
                    let labels =
                        alloc_zeroed::<u32>(stream, w * h, "kept segmentation labels", w, h)?;
                    self.last_labels = Some(DeviceLabels {
                        labels,
                        width: w,
                        height: h,
                        count,
                    });
                }
                if let Some(kept) = self.last_labels.as_mut() {
                    stream.memcpy_dtod(
                        &segments.labels.slice(0..w * h),
                        &mut kept.labels.slice_mut(0..w * h),
                    )?;
                    (kept.width, kept.height, kept.count) = (w, h, count);
                }
            }
            return Ok(stage.device_layer());
        }
        // A skipped frame: the kept labels, when they were computed at this frame's size.
        let Some(kept) = self.last_labels.as_ref().filter(|_| every) else {
            return Ok(None);
        };
        let factor = if kept.width == frame.width {
            1
        } else {
            self.settings.downscale as usize
        };
        if (kept.width * factor.max(1)).abs_diff(frame.width) >= factor.max(1) * 2 {
            return Ok(None);
        }
        let segments = Segments {
            labels: &kept.labels,
            label_width: kept.width,
            label_height: kept.height,
            factor,
            fill: self.settings.fill,
            boundary: self.settings.boundary(),
        };
        Ok(Some(DeviceRaster::Segments {
            segments,
            count: SegmentCount::Host(kept.count),
        }))
    }
    /// Keeps a segmented frame's result; gives a skipped frame the last one (drawn over its
    /// own pixels by the compose step).
    fn finish(&mut self, mut output: OpOutput, frame: &FrameMeta) -> OpOutput {
        if let Some(p) = output.payload.take() {
            if p.get::<Segmented>().is_some() {
                self.last = Some(p);
            }
            return output;
        }
        let Some(last) = self.last.as_ref().and_then(|p| p.get::<Segmented>()) else {
            return output;
        };
        if (last.width, last.height) != (frame.width, frame.height) {
            return output;
        }
        let mut summary = last.summary.clone();
        if let Some(m) = summary.as_object_mut() {
            m.insert("skipped".into(), true.into());
            m.insert("from_frame".into(), last.index.into());
        }
        OpOutput {
            op: DESCRIPTOR.name,
            summary,
            layer: Layer {
                raster: last.raster.clone(),
                device_raster: output.layer.device_raster,
                shapes: Vec::new(),
            },
            ..Default::default()
        }
    }
}

struct SegmentationStage {
    gpu: SegmentationGpu,
    /// The settings of the frame last enqueued (for the overlay in `collect`).
    settings: SegmentationSettings,
    /// The frame last enqueued is one `every` skips (nothing was enqueued).
    skipped: bool,
    /// The downscaled frame (`downscale > 1`), reallocated when its size changes.
    small: Option<CudaSlice<u8>>,
    f_downscale: CudaFunction,
    /// The op's graph captures before the frame last enqueued (a capture costs host time).
    captures: u64,
    /// The segment count of the frame last collected (for its device layer).
    count: usize,
}

impl GpuStage for SegmentationStage {
    fn enqueue(
        &mut self,
        frame: &DeviceFrame<'_>,
        timer: &mut KernelTimer,
        settings: &OpSettings,
    ) -> Result<(), OpError> {
        let stream = frame.stream();
        self.settings = settings.segmentation.clone();
        self.skipped = !self.settings.segments(frame.index);
        if self.skipped {
            return Ok(());
        }
        self.captures = self.gpu.graph_captures();
        let params = self.settings.params();
        let image = frame
            .rgb
            .filter(|_| self.settings.colour)
            .unwrap_or(frame.gray);
        let channels = image.channels;
        let (width, height) = (frame.width(), frame.height());
        let f = self.settings.downscale as usize;
        let (sw, sh) = downscaled_size(width, height, f);
        if (sw, sh) == (width, height) {
            self.gpu.enqueue(timer, image, &params)?;
        } else {
            let len = sw * sh * channels;
            if self.small.as_ref().is_none_or(|b| b.len() != len) {
                self.small = None;
                self.small = Some(alloc_zeroed::<u8>(stream, len, "downscaled frame", sw, sh)?);
            }
            let Some(small) = self.small.as_mut() else {
                return Ok(());
            };
            let func = &self.f_downscale;
            let mut failed = None;
            timer.time(stream, "segmentation_downscale", || {
                failed = enqueue_downscale(func, image, small, f).err();
                Ok(())
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
            self.gpu.enqueue(
                timer,
                DeviceImage::new(stream, small, sw, sh, channels)?,
                &params,
            )?;
        }
        match self.settings.level() {
            Some(level) => self.gpu.enqueue_level(stream, timer, level),
            None => Ok(()),
        }
    }
    /// The summary only (segment count, rounds, levels): the labels stay on the device for
    /// the compose step.
    fn collect(
        &mut self,
        stream: &Arc<CudaStream>,
        frame: &FrameMeta,
    ) -> Result<OpOutput, OpError> {
        if self.skipped {
            let mut out = skipped();
            out.layer.device_raster = Some(LayerKind::Segments);
            return Ok(out);
        }
        let reruns = self.gpu.reruns();
        let out = self.gpu.download_summary(stream)?;
        self.count = out.segment_count;
        let mut summary = summary(&out, &self.settings);
        if let Some(m) = summary.as_object_mut() {
            // A frame that needed more rounds than the last one's caps ran again (exact either way).
            if self.gpu.reruns() > reruns {
                m.insert("rerun".into(), true.into());
            }
            // The frame's round caps were new to the op: its launch sequence was captured as a graph.
            if self.gpu.graph_captures() > self.captures {
                m.insert("graph_capture".into(), true.into());
            }
        }
        let mut out = output(Segmented {
            index: frame.index,
            width: frame.width,
            height: frame.height,
            raster: None,
            summary,
        });
        out.layer.device_raster = Some(LayerKind::Segments);
        Ok(out)
    }
    fn device_layer(&self) -> Option<DeviceRaster<'_>> {
        if self.skipped {
            return None;
        }
        let (labels, label_width, label_height) = self.gpu.device_labels()?;
        let factor = if self.small.is_some() && label_width != 0 {
            self.settings.downscale as usize
        } else {
            1
        };
        let segments = Segments {
            labels,
            label_width,
            label_height,
            factor,
            fill: self.settings.fill,
            boundary: self.settings.boundary(),
        };
        Some(DeviceRaster::Segments {
            segments,
            count: SegmentCount::Host(self.count),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::segmentation::{overlay_segments_gray, overlay_segments_rgb, upsample_labels};

    /// The segmentation layer of `out` drawn over `input` as the compose step draws it: labels
    /// scaled back to the frame, segments filled from the frame's pixels, boundaries.
    fn draw(out: &OpOutput, input: &FrameInput) -> Option<Image<[u8; 3]>> {
        let Some(HostRaster::Segments { segments: r, count }) = &out.layer.raster else {
            return None;
        };
        let (w, h) = (input.gray.width(), input.gray.height());
        let seg = SegmentationOutput {
            labels: (*r.labels).clone(),
            segment_count: *count,
            rounds: 0,
            min_size_rounds: 0,
            capped: false,
            level: 0,
            has_rounds: false,
        };
        let seg = upsample_labels(seg, w, h, r.factor);
        Some(match input.rgb.as_deref() {
            Some(rgb) => overlay_segments_rgb(rgb.view(), &seg, r.fill, r.boundary).unwrap(),
            None => overlay_segments_gray(input.gray.view(), &seg, r.fill, r.boundary).unwrap(),
        })
    }

    fn frame(rgb: bool) -> FrameInput {
        // Two flat halves: left dark, right bright.
        let gray = Image::from_fn(16, 8, |x, _| if x < 8 { 20u8 } else { 220 });
        FrameInput {
            index: 0,
            rgb: rgb.then(|| Arc::new(gray.map(|v| [v, v / 2, 0]))),
            gray: Arc::new(gray),
            gray16: None,
        }
    }

    #[test]
    fn two_halves_are_two_segments_with_mean_fill_and_boundary() {
        for rgb in [false, true] {
            let settings = OpSettings::default();
            let mut a = Segmentation::new(&settings).unwrap();
            let mut t = Vec::new();
            let out = a.run_cpu(&frame(rgb), &mut t).unwrap();
            assert_eq!(out.summary["segments"], 2, "rgb={rgb}");
            assert_eq!(t[0].0, "segmentation_cpu");
            let pic = &draw(&out, &frame(rgb)).expect("no segmentation layer");
            assert_eq!(pic.get(0, 0), if rgb { [20, 10, 0] } else { [20, 20, 20] });
            // Column 7 is the last of the left segment: its right neighbour differs.
            assert_eq!(pic.get(7, 3), BOUNDARY);
            assert_eq!(
                pic.get(15, 3),
                if rgb { [220, 110, 0] } else { [220, 220, 220] }
            );
        }
    }

    #[test]
    fn downscaled_segmentation_is_scaled_back_to_the_frame() {
        for (rgb, level) in [(false, -1), (true, -1), (true, 2)] {
            let settings = OpSettings {
                segmentation: SegmentationSettings {
                    downscale: 2,
                    level,
                    min_size: 4,
                    ..Default::default()
                },
                ..Default::default()
            };
            let input = frame(rgb);
            let mut a = Segmentation::new(&settings).unwrap();
            let out = a.run_cpu(&input, &mut Vec::new()).unwrap();
            assert_eq!(out.summary["downscale"], 2);
            let Some(HostRaster::Segments { segments: r, .. }) = &out.layer.raster else {
                panic!("no segmentation layer")
            };
            assert_eq!(
                (r.labels.width(), r.labels.height(), r.factor),
                (8, 4, 2),
                "labels stay downscaled"
            );
            let pic = &draw(&out, &input).expect("no segmentation layer");
            assert_eq!((pic.width(), pic.height()), (16, 8));
            if level < 0 {
                // The definition: segment the 8x4 box average, scale the labels back, draw.
                let (data, ch) = match input.rgb.as_deref() {
                    Some(c) => (pack_rgb(c.view()), 3),
                    None => (pack_gray(input.gray.view()), 1),
                };
                let small = downscale_box(&data, 16, 8, ch, 2);
                let seg =
                    felzenszwalb_interleaved(&small, 8, 4, ch, &settings.segmentation.params())
                        .unwrap();
                let up = upsample_labels(seg.clone(), 16, 8, 2);
                let want = match input.rgb.as_deref() {
                    Some(c) => {
                        overlay_segments_rgb(c.view(), &up, OverlayMode::Mean, Some(BOUNDARY))
                            .unwrap()
                    }
                    None => overlay_segments_gray(
                        input.gray.view(),
                        &up,
                        OverlayMode::Mean,
                        Some(BOUNDARY),
                    )
                    .unwrap(),
                };
                assert_eq!(out.summary["segments"], seg.segment_count, "rgb={rgb}");
                assert_eq!(&want, pic, "rgb={rgb}");
            }
        }
        let bad = OpSettings {
            segmentation: SegmentationSettings {
                downscale: 9,
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(
            Segmentation::new(&bad)
                .unwrap_err()
                .to_string()
                .contains("downscale")
        );
    }

    #[test]
    fn every_n_frames_reuses_the_last_segmentation_in_between() {
        let settings = OpSettings {
            segmentation: SegmentationSettings {
                every: 2,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut a = Segmentation::new(&settings).unwrap();
        let at = |index: u64, bright: u8| {
            let gray = Image::from_fn(16, 8, |x, _| if x < 8 { 20u8 } else { bright });
            FrameInput {
                index,
                rgb: None,
                gray: Arc::new(gray),
                gray16: None,
            }
        };
        let mut run = |input: &FrameInput| {
            let out = a.run_cpu(input, &mut Vec::new()).unwrap();
            let meta = FrameMeta {
                index: input.index,
                pts_nanos: None,
                width: input.gray.width(),
                height: input.gray.height(),
                after_gap: false,
            };
            a.finish(out, &meta)
        };
        // Before any segmentation a skipped frame has no overlay.
        let none = run(&at(1, 220));
        assert_eq!(none.summary, serde_json::json!({ "skipped": true }));
        assert!(none.layer.raster.is_none());
        let first = run(&at(2, 220));
        assert_eq!(first.summary["segments"], 2);
        assert!(first.summary.get("skipped").is_none() && first.payload.is_none());
        // Frame 3 is skipped: frame 2's labels, filled with frame 3's own mean colours.
        let third_input = at(3, 120);
        let third = run(&third_input);
        assert_eq!(
            (
                third.summary["skipped"].clone(),
                third.summary["from_frame"].clone()
            ),
            (true.into(), 2.into())
        );
        assert_eq!(third.summary["segments"], 2);
        let pic = draw(&third, &third_input).expect("no overlay");
        assert_eq!(pic.get(15, 3), [120, 120, 120]);
        assert_eq!(pic.get(7, 3), BOUNDARY);
        // Frame 4 is segmented again; every = 0 is refused.
        assert!(run(&at(4, 120)).summary.get("skipped").is_none());
        let bad = OpSettings {
            segmentation: SegmentationSettings {
                every: 0,
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(Segmentation::new(&bad).is_err());
    }

    #[test]
    fn hierarchy_levels_go_from_pixels_to_the_final_segmentation() {
        let input = frame(true);
        let run = |level: i32| {
            let settings = OpSettings {
                segmentation: SegmentationSettings {
                    level,
                    ..Default::default()
                },
                ..Default::default()
            };
            let out = Segmentation::new(&settings)
                .unwrap()
                .run_cpu(&input, &mut Vec::new())
                .unwrap();
            let s = &out.summary;
            (
                s["segments"].as_u64().unwrap(),
                s["level"].as_u64(),
                s["levels"].as_u64(),
                s["method"].clone(),
            )
        };
        let (_, level, levels, method) = run(-1);
        assert_eq!(
            (level, levels, method),
            (None, None, serde_json::json!("kruskal")),
            "the reference has no levels"
        );
        let run = |level: i32| {
            let (n, l, ls, method) = run(level);
            assert_eq!(method, "rounds");
            (n, l.unwrap(), ls.unwrap())
        };
        assert_eq!(run(0).0, 16 * 8, "level 0 is one segment per pixel");
        let (top_segments, top, levels) = run(1000);
        assert_eq!(top, levels - 1, "levels past the last are the final one");
        let kruskal = Segmentation::new(&OpSettings::default())
            .unwrap()
            .run_cpu(&input, &mut Vec::new())
            .unwrap();
        assert_eq!(
            top_segments, kruskal.summary["segments"],
            "the last level equals the final (Kruskal) segmentation"
        );
        let mut previous = u64::MAX;
        for l in 0..levels as i32 {
            let (n, _, _) = run(l);
            assert!(n <= previous, "level {l}: {n} segments after {previous}");
            previous = n;
        }
    }

    #[test]
    fn bad_settings_are_refused_and_keep_the_old_ones() {
        let settings = OpSettings::default();
        let mut a = Segmentation::new(&settings).unwrap();
        let bad = OpSettings {
            segmentation: SegmentationSettings {
                scale: -1.0,
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(a.update(&bad).is_err());
        assert!(Segmentation::new(&bad).is_err());
        let bad_level = OpSettings {
            segmentation: SegmentationSettings {
                level: -2,
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(
            Segmentation::new(&bad_level)
                .unwrap_err()
                .to_string()
                .contains("level")
        );
        assert_eq!(a.settings, settings.segmentation);
    }
}
