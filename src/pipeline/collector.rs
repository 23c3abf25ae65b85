//! The collector: completes frames in the order the worker started them. On the GPU it waits for
//! the frame's slot, reads back each analysis' small results, runs the in-order host steps (the
//! tracker) with the settings the frame was enqueued with, composes the picture on the device
//! when a sink wants pixels this frame, reads the kernel timers, and returns the slot to the
//! worker. On the CPU it composes with the CPU twin. Then it delivers the frame.
//!
//! All host work per frame that is not enqueueing happens here, beside the worker, so the worker
//! keeps the ring full.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::ring::Slot;
use super::worker::{InFlight, ToCollector, Work};
use super::{Delivery, PictureWant, PipelineEvent};
use crate::analysis::{AnalysedFrame, Analysis, FrameMeta, FrameTimings, OpOutput, OpSettings};
use crate::compose::{
    ComposeError, ComposeGpu, ComposeStyle, DeviceRasterLayer, LayerReadback, Picture,
    PictureFormat, ShapeLayer, compose_cpu,
};
use crate::gpu::GpuContext;
use crate::image::Image;
use crate::ops::OpError;
use crate::stats::Counters;

/// The collector's state.
pub(super) struct Collector {
    /// GPU: the context and the channel that returns slots to the worker.
    gpu: Option<(Arc<GpuContext>, Sender<Box<Slot>>)>,
    /// GPU: the analyses' in-order side (on the CPU the worker owns them).
    analyses: Vec<Box<dyn Analysis>>,
    /// GPU: the compose kernels and the picture buffer.
    compose: Option<ComposeGpu>,
    /// GPU with [`PictureWant::Layers`]: the buffers the layers are read back through.
    layer_readback: Option<LayerReadback>,
    /// The settings the analyses were last updated with.
    settings: Option<Arc<OpSettings>>,
    want: PictureWant,
    delivery: Delivery,
    events: Sender<PipelineEvent>,
    counters: Arc<Counters>,
}

impl Collector {
    pub(super) fn new(
        gpu: Option<(Arc<GpuContext>, Sender<Box<Slot>>)>,
        analyses: Vec<Box<dyn Analysis>>,
        want: PictureWant,
        delivery: Delivery,
        events: Sender<PipelineEvent>,
        counters: Arc<Counters>,
    ) -> Result<Self, OpError> {
        let compose = match &gpu {
            Some((g, _)) => Some(
                ComposeGpu::new(g).map_err(|e| OpError::Unsupported(format!("compose: {e}")))?,
            ),
            None => None,
        };
        let layer_readback = match (&gpu, want) {
            (Some((g, _)), PictureWant::Layers) => Some(LayerReadback::new(g.cuda())),
            _ => None,
        };
        Ok(Self {
            gpu,
            analyses,
            compose,
            layer_readback,
            settings: None,
            want,
            delivery,
            events,
            counters,
        })
    }

    /// The picture format wanted for the next frame, if any.
    fn picture_wanted(&self) -> Option<PictureFormat> {
        match (self.want, &self.delivery) {
            (PictureWant::None | PictureWant::Layers, _) => None,
            (PictureWant::Every(f), _) => Some(f),
            (PictureWant::WhenTaken(f), Delivery::Latest(mb)) => mb.is_empty().then_some(f),
            (PictureWant::WhenTaken(f), Delivery::All) => Some(f),
        }
    }

    fn complete(&mut self, f: InFlight) -> Result<AnalysedFrame, OpError> {
        let want = self.picture_wanted();
        match f.work {
            Work::Cpu {
                input,
                outputs,
                regions,
            } => {
                let t = Instant::now();
                let mut frame = AnalysedFrame {
                    index: f.meta.index,
                    pts_nanos: f.meta.pts_nanos,
                    width: f.meta.width,
                    height: f.meta.height,
                    gray: Some(input.gray),
                    rgb: input.rgb,
                    outputs,
                    picture: None,
                    timings: FrameTimings {
                        backend: "cpu",
                        queue_wait_ms: f.queue_wait_ms,
                        ..Default::default()
                    },
                };
                let mut regions = regions;
                if let Some(format) = want {
                    let _permit = super::cpu_gate::CpuGate::global().enter();
                    frame.picture = Some(Arc::new(compose_host(&frame, &f.style, format)?));
                    regions.push(("compose".to_owned(), t.elapsed().as_secs_f64() * 1e3));
                }
                frame.timings.compute_ms = regions.iter().map(|r| r.1).sum();
                frame.timings.regions = regions;
                frame.timings.latency_ms = f.received.elapsed().as_secs_f64() * 1e3;
                Ok(frame)
            }
            Work::Cuda {
                mut slot,
                rgb,
                device_input,
            } => {
                let r = self.complete_gpu(&f.meta, &f.settings, &mut slot, rgb, want, &f.style);
                // The slot's stream is done with the device frame's planes.
                drop(device_input);
                if let Some((_, free)) = &self.gpu {
                    let _ = free.send(slot); // the worker may have stopped: the slot is dropped
                }
                let mut frame = r?;
                frame.timings.queue_wait_ms = f.queue_wait_ms;
                frame.timings.latency_ms = f.received.elapsed().as_secs_f64() * 1e3;
                Ok(frame)
            }
        }
    }

    fn complete_gpu(
        &mut self,
        meta: &FrameMeta,
        settings: &Arc<OpSettings>,
        slot: &mut Slot,
        rgb: Option<Arc<Image<[u8; 3]>>>,
        want: Option<PictureFormat>,
        style: &ComposeStyle,
    ) -> Result<AnalysedFrame, OpError> {
        if self
            .settings
            .as_ref()
            .is_none_or(|s| !Arc::ptr_eq(s, settings))
        {
            for a in &mut self.analyses {
                a.update(settings)?;
            }
            self.settings = Some(settings.clone());
        }
        slot.stream.synchronize()?;
        // No graph capture may start on this device while the readbacks, the in-order steps
        // (a segmentation rerun enqueues) and the compose enqueue (see gpu::capture_lock);
        // the other streams' workers and collectors go on beside.
        let _no_capture = self
            .gpu
            .as_ref()
            .map(|(g, _)| crate::gpu::capture_exclusion(g.info().ordinal));
        let t_down = Instant::now();
        let stream = slot.stream.clone();
        let mut outputs = Vec::new();
        for (a, stage) in self.analyses.iter_mut().zip(slot.stages.iter_mut()) {
            if !settings.is_enabled(a.name()) {
                continue;
            }
            if let Some(stage) = stage.as_mut() {
                let out = stage.collect(&stream, meta)?;
                outputs.push(a.finish(out, meta));
            }
        }
        let download_ms = t_down.elapsed().as_secs_f64() * 1e3;
        let mut frame = AnalysedFrame {
            index: meta.index,
            pts_nanos: meta.pts_nanos,
            width: meta.width,
            height: meta.height,
            gray: None,
            rgb,
            outputs,
            picture: None,
            timings: FrameTimings {
                backend: "cuda",
                download_ms,
                ..Default::default()
            },
        };
        if self.layer_readback.is_some() {
            let t = Instant::now();
            self.read_layers(meta, settings, slot, &mut frame)?;
            frame.timings.download_ms += t.elapsed().as_secs_f64() * 1e3;
        }
        if let Some(format) = want {
            let t = Instant::now();
            frame.picture = Some(Arc::new(self.compose_gpu(
                meta,
                settings,
                slot,
                &frame.outputs,
                style,
                format,
            )?));
            frame.timings.download_ms += t.elapsed().as_secs_f64() * 1e3;
        }
        let mut regions: Vec<(String, f64)> = slot
            .timer
            .read()?
            .into_iter()
            .map(|(n, ms)| (n.to_owned(), ms))
            .collect();
        let upload_ms = regions
            .iter()
            .find(|r| r.0 == "upload")
            .map_or(0.0, |r| r.1);
        regions.retain(|r| r.0 != "upload");
        frame.timings.compute_ms = regions.iter().map(|r| r.1).sum();
        regions.append(&mut frame.timings.regions);
        frame.timings.regions = regions;
        frame.timings.upload_ms = upload_ms;
        Ok(frame)
    }

    /// Reads the frame's grey picture and each enabled analysis' device layer back into
    /// `frame` (its `gray` and each output's `layer.raster`), as the CPU backend leaves them.
    fn read_layers(
        &mut self,
        meta: &FrameMeta,
        settings: &OpSettings,
        slot: &mut Slot,
        frame: &mut AnalysedFrame,
    ) -> Result<(), OpError> {
        let Some(readback) = self.layer_readback.as_mut() else {
            return Ok(());
        };
        let stream = slot.stream.clone();
        let parts = slot.parts();
        if let Some(gray) = &parts.gray {
            frame.gray = Some(Arc::new(readback.gray(&stream, gray)?));
        }
        for (a, stage) in self.analyses.iter_mut().zip(parts.stages.iter_mut()) {
            let (true, Some(stage)) = (settings.is_enabled(a.name()), stage.as_mut()) else {
                continue;
            };
            let name = a.name();
            if let Some(raster) = a.device_layer(stage.as_mut(), &stream, meta)? {
                let host = readback.raster(&stream, &raster, meta.width, meta.height)?;
                if let Some(o) = frame.outputs.iter_mut().find(|o| o.op == name) {
                    o.layer.raster = Some(host);
                }
            }
        }
        Ok(())
    }

    /// Composes the frame on the device from the analyses' device layers and the outputs'
    /// shapes, and reads the picture back (the one readback of pixels).
    fn compose_gpu(
        &mut self,
        meta: &FrameMeta,
        settings: &OpSettings,
        slot: &mut Slot,
        outputs: &[OpOutput],
        style: &ComposeStyle,
        format: PictureFormat,
    ) -> Result<Picture, OpError> {
        let err = |e: ComposeError| OpError::Unsupported(format!("compose: {e}"));
        let stream = slot.stream.clone();
        let parts = slot.parts();
        let Some(base) = parts.base else {
            return Err(OpError::Unsupported("compose before any frame".into()));
        };
        let mut rasters = Vec::new();
        for (a, stage) in self.analyses.iter_mut().zip(parts.stages.iter_mut()) {
            if let (true, Some(stage)) = (settings.is_enabled(a.name()), stage.as_mut()) {
                let name = a.name();
                if let Some(raster) = a.device_layer(stage.as_mut(), &stream, meta)? {
                    rasters.push(DeviceRasterLayer { name, raster });
                }
            }
        }
        let shapes: Vec<ShapeLayer> = outputs
            .iter()
            .filter(|o| !o.layer.shapes.is_empty())
            .map(|o| ShapeLayer {
                name: o.op,
                shapes: Arc::new(o.layer.shapes.clone()),
            })
            .collect();
        let Some(compose) = self.compose.as_mut() else {
            return Err(OpError::Unsupported("no compose kernels".into()));
        };
        compose
            .enqueue(base, &rasters, &shapes, style, format, parts.timer)
            .map_err(err)?;
        drop(rasters);
        compose.read_back(&stream).map_err(err)
    }

    fn deliver(&self, f: AnalysedFrame) -> bool {
        self.counters.frames_out.fetch_add(1, Ordering::Relaxed);
        match &self.delivery {
            Delivery::All => self.events.send(PipelineEvent::Frame(Box::new(f))).is_ok(),
            Delivery::Latest(mb) => {
                // A composed frame the viewer has not taken yet stays: a newer one without a
                // picture would leave the viewer nothing to show.
                let keep_waiting = matches!(self.want, PictureWant::WhenTaken(_))
                    && f.picture.is_none()
                    && !mb.is_empty();
                if !keep_waiting {
                    mb.put(f);
                }
                true
            }
        }
    }
}

/// The collector thread: completes frames until the worker's channel closes, then sends the
/// final event.
pub(super) fn run(mut c: Collector, from_worker: &Receiver<ToCollector>) {
    let mut final_event = PipelineEvent::End;
    for msg in from_worker {
        match msg.and_then(|f| c.complete(f).map_err(|e| format!("analysis failed: {e}"))) {
            Ok(frame) => {
                if !c.deliver(frame) {
                    return;
                }
            }
            Err(e) => {
                final_event = PipelineEvent::Error(e);
                break;
            }
        }
    }
    if let Delivery::Latest(mb) = &c.delivery {
        mb.wake();
    }
    let _ = c.events.send(final_event);
}

/// The composed picture from the frame's host layers (the CPU twin of the compose kernel).
fn compose_host(
    frame: &AnalysedFrame,
    style: &ComposeStyle,
    format: PictureFormat,
) -> Result<Picture, OpError> {
    compose_cpu(&crate::analysis::overlay::layers_of(frame), style, format)
        .map_err(|e| OpError::Unsupported(format!("compose: {e}")))
}
