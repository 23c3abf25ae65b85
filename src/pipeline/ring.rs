//! The ring of CUDA streams. N slots, each owning a stream, a write-combined pinned upload
//! buffer, device buffers for the frame (input and grey) and for every analysis' GPU stage, and a
//! [`KernelTimer`]. A frame goes into the next slot in turn: host copy into the slot's pinned
//! buffer → async upload → RGB→grey kernel → every stage's kernels, all on the slot's stream;
//! then the worker moves on to the next frame while the GPU works. When a slot comes round again
//! (or at `flush`) its previous frame is completed: wait for the stream, collect every stage's
//! results, read the events. Slots are used strictly in turn, so frames complete in order.
//!
//! Ordering between slots: a stage may keep state across frames on the device (the running
//! background model of `cca`); such a stage says so ([`GpuStage::ordered`]). Each slot enqueues
//! its ordered stages first, after waiting for the previous slot's ordered stages
//! (`stages_done` event, recorded right after them), then the other stages. So the only chain
//! between frames is the short ordered work; the long analyses of frames k, k+1, … (a
//! segmentation's hundred dependent rounds) run concurrently on their slots' streams, and
//! uploads and grey conversion overlap everything.
//!
//! Buffers are allocated when a slot first sees a frame size/format and reallocated only when
//! the stream format changes; an allocation failure is `GpuError::OutOfMemory` naming the size.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PinnedHostSlice, sys::CUevent_flags};
use rayon::prelude::*;

use super::engine::Submitted;
use crate::analysis::{AnalysedFrame, Analysis, FrameInput, FrameTimings, GpuFrame, GpuStage, OpOutput, OpSettings};
use crate::gpu::{GpuContext, GpuError, KernelTimer, launch};
use crate::image::{DynImage, Image};
use crate::ops::{OpError, preprocess};

/// Format of the frames a slot's buffers are sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SlotFormat {
    width: usize,
    height: usize,
    rgb: bool,
}

struct Buffers {
    format: SlotFormat,
    upload: PinnedHostSlice<u8>,
    input: CudaSlice<u8>,
    gray: CudaSlice<u8>,
    readback: PinnedHostSlice<u8>,
}

struct InFlight {
    index: u64,
    pts_nanos: Option<u64>,
    received: Instant,
    queue_wait_ms: f64,
    rgb: Option<Arc<Image<[u8; 3]>>>,
    gray16: Option<Arc<Image<u16>>>,
}

struct Slot {
    stream: Arc<CudaStream>,
    buffers: Option<Buffers>,
    stages: Vec<Option<Box<dyn GpuStage>>>,
    timer: KernelTimer,
    in_flight: Option<InFlight>,
    stages_done: Option<CudaEvent>,
}

/// N frames in flight on N CUDA streams.
pub struct CudaRing {
    gpu: Arc<GpuContext>,
    analyses: Vec<Box<dyn Analysis>>,
    settings: OpSettings,
    slots: Vec<Slot>,
    next: usize,
}

/// A frame's pixels as the ring uploads them: the RGB frame, the 16-bit grey frame, or the grey
/// bytes of an 8-bit grey frame.
type SourcePixels = (Option<Arc<Image<[u8; 3]>>>, Option<Arc<Image<u16>>>, Option<Image<u8>>);

impl CudaRing {
    /// Creates `size` slots with their streams and each analysis' GPU stage.
    pub fn new(gpu: Arc<GpuContext>, analyses: Vec<Box<dyn Analysis>>, settings: OpSettings, size: usize) -> Result<Self, OpError> {
        let mut slots = Vec::with_capacity(size.max(1));
        for _ in 0..size.max(1) {
            let stages = analyses.iter().map(|a| a.gpu_stage(&gpu)).collect::<Result<Vec<_>, _>>()?;
            slots.push(Slot { stream: gpu.new_stream()?, buffers: None, stages, timer: KernelTimer::new(), in_flight: None, stages_done: None });
        }
        Ok(Self { gpu, analyses, settings, slots, next: 0 })
    }

    /// New settings, applied to frames submitted from now on.
    pub fn update(&mut self, settings: &OpSettings) -> Result<(), OpError> {
        self.analyses.iter_mut().try_for_each(|a| a.update(settings))?;
        self.settings = settings.clone();
        Ok(())
    }

    /// Enqueues a frame; returns the frame that previously occupied its slot, if any.
    pub fn submit(&mut self, s: Submitted) -> Result<Vec<AnalysedFrame>, OpError> {
        let i = self.next;
        self.next = (self.next + 1) % self.slots.len();
        let mut done = Vec::new();
        if self.slots[i].in_flight.is_some() {
            done.push(self.complete(i)?);
        }
        // Borrow the previous slot's `stages_done` event for the wait, then give it back.
        let prev = (i + self.slots.len() - 1) % self.slots.len();
        let wait_for = if prev == i { None } else { self.slots[prev].stages_done.take() };
        let r = self.enqueue(i, s, wait_for.as_ref());
        if prev != i {
            self.slots[prev].stages_done = wait_for;
        }
        r?;
        Ok(done)
    }

    /// Completes every frame in flight, in order.
    pub fn flush(&mut self) -> Result<Vec<AnalysedFrame>, OpError> {
        let n = self.slots.len();
        let mut out = Vec::new();
        for k in 0..n {
            let i = (self.next + k) % n;
            if self.slots[i].in_flight.is_some() {
                out.push(self.complete(i)?);
            }
        }
        Ok(out)
    }

    fn enqueue(&mut self, i: usize, s: Submitted, wait_for: Option<&CudaEvent>) -> Result<(), OpError> {
        let (w, h) = s.frame.image.size();
        launch::check_frame_size(w, h)?;
        let (index, pts_nanos) = (s.frame.index, s.frame.pts_nanos);
        // The grey bytes to upload for grey sources; RGB frames are uploaded as they are.
        let (rgb, gray16, gray_bytes): SourcePixels = match s.frame.image {
            DynImage::Rgb8(img) => (Some(Arc::new(img.into_packed())), None, None),
            DynImage::Gray8(img) => (None, None, Some(img.into_packed())),
            DynImage::Gray16(img) => {
                let packed = Arc::new(img.into_packed());
                let g = preprocess::gray16_to_gray8(packed.view());
                (None, Some(packed), Some(g))
            }
            DynImage::F32(img) => (None, None, Some(img.map(|v| (v.clamp(0.0, 1.0) * 255.0).round() as u8))),
        };
        let format = SlotFormat { width: w, height: h, rgb: rgb.is_some() };
        let gpu = self.gpu.clone();
        let slot = &mut self.slots[i];
        if slot.buffers.as_ref().map(|b| b.format) != Some(format) {
            slot.buffers = None; // free the old size first
            slot.buffers = Some(alloc_buffers(&gpu, &slot.stream, format)?);
        }
        let Some(bufs) = slot.buffers.as_mut() else { return Err(GpuError::Unsupported("slot buffers missing".into()).into()) };
        slot.timer.reset();
        // Copy into the write-combined pinned buffer (waits until its previous upload finished).
        let staging = bufs.upload.as_mut_slice()?;
        let n = match (&rgb, &gray_bytes) {
            (Some(img), _) => copy_into(staging, img.data().as_flattened()),
            (None, Some(g)) => copy_into(staging, g.data()),
            (None, None) => 0,
        };
        let stream = slot.stream.clone();
        slot.timer.time(&stream, "upload", || {
            stream.memcpy_htod(&bufs.upload, &mut bufs.input.slice_mut(0..n))?;
            Ok(())
        })?;
        if format.rgb {
            slot.timer.time(&stream, "preprocess_rgb_to_gray", || {
                preprocess::enqueue_rgb_to_gray(&gpu, &stream, &bufs.input, &mut bufs.gray, w, h).map_err(to_gpu)
            })?;
        } else {
            stream.memcpy_dtod(&bufs.input.slice(0..w * h), &mut bufs.gray.slice_mut(0..w * h))?;
        }
        if let Some(ev) = wait_for {
            stream.wait(ev)?;
        }
        let frame = GpuFrame { gray: &bufs.gray, rgb: format.rgb.then_some(&bufs.input), width: w, height: h, index };
        // Ordered stages (device state across frames) first, then the event the next slot waits
        // for, then the others: a long stage (segmentation) of frame k overlaps that of k+1.
        for ordered in [true, false] {
            for (a, stage) in self.analyses.iter().zip(slot.stages.iter_mut()) {
                if let (true, Some(stage)) = (a.enabled(), stage.as_mut())
                    && stage.ordered() == ordered
                {
                    stage.enqueue(&stream, &mut slot.timer, &frame, &self.settings)?;
                }
            }
            if ordered {
                slot.stages_done = Some(stream.record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))?);
            }
        }
        // Grey frame back into normal (not write-combined) pinned memory, read after completion.
        stream.memcpy_dtoh(&bufs.gray.slice(0..w * h), &mut bufs.readback)?;
        slot.in_flight = Some(InFlight { index, pts_nanos, received: s.received, queue_wait_ms: s.queue_wait_ms, rgb, gray16 });
        Ok(())
    }

    fn complete(&mut self, i: usize) -> Result<AnalysedFrame, OpError> {
        let slot = &mut self.slots[i];
        let Some(f) = slot.in_flight.take() else { return Err(GpuError::Unsupported("no frame in slot".into()).into()) };
        slot.stream.synchronize()?;
        let t_down = Instant::now();
        let Some(bufs) = slot.buffers.as_ref() else { return Err(GpuError::Unsupported("slot buffers missing".into()).into()) };
        let (w, h) = (bufs.format.width, bufs.format.height);
        let gray = bufs.readback.as_slice()?[..w * h].to_vec();
        let input = FrameInput { index: f.index, gray: Arc::new(Image::from_vec(w, h, gray)?), rgb: f.rgb, gray16: f.gray16 };
        // Every stage's readback and host post-processing (overlay pictures, tables), and the
        // analyses without a GPU stage on the CPU, at once (one rayon task each); then `finish`
        // in analysis order (cross-frame state such as tracks).
        let stream = &slot.stream;
        type Collected = Option<Result<(OpOutput, Vec<(String, f64)>), OpError>>;
        let mut collected: Vec<Collected> = self
            .analyses
            .par_iter_mut()
            .zip(slot.stages.par_iter_mut())
            .map(|(a, stage)| {
                if !a.enabled() {
                    return None;
                }
                let mut regions = Vec::new();
                let out = match stage.as_mut() {
                    Some(stage) => {
                        let t = Instant::now();
                        let out = stage.collect(stream, &input);
                        regions.push((format!("{}_collect", a.name()), t.elapsed().as_secs_f64() * 1e3));
                        out
                    }
                    None => a.run_cpu(&input, &mut regions),
                };
                Some(out.map(|o| (o, regions)))
            })
            .collect();
        let mut outputs = Vec::new();
        let mut cpu_regions = Vec::new();
        for (a, c) in self.analyses.iter_mut().zip(collected.iter_mut()) {
            if let Some(r) = c.take() {
                let (out, regions) = r?;
                cpu_regions.extend(regions);
                outputs.push(a.finish(out, &input));
            }
        }
        let download_ms = t_down.elapsed().as_secs_f64() * 1e3;
        let mut regions: Vec<(String, f64)> = slot.timer.read()?.into_iter().map(|(n, ms)| (n.to_owned(), ms)).collect();
        let upload_ms = regions.iter().find(|r| r.0 == "upload").map_or(0.0, |r| r.1);
        regions.retain(|r| r.0 != "upload");
        let compute_ms = regions.iter().map(|r| r.1).sum();
        regions.extend(cpu_regions.into_iter().map(|(n, ms)| (format!("{n} (cpu)"), ms)));
        Ok(AnalysedFrame {
            index: f.index,
            pts_nanos: f.pts_nanos,
            gray: input.gray,
            rgb: input.rgb,
            outputs,
            timings: FrameTimings {
                backend: "cuda",
                regions,
                upload_ms,
                download_ms,
                queue_wait_ms: f.queue_wait_ms,
                latency_ms: f.received.elapsed().as_secs_f64() * 1e3,
                compute_ms,
            },
        })
    }
}

/// Copies `src` to the front of `dst`; returns the bytes copied.
fn copy_into(dst: &mut [u8], src: &[u8]) -> usize {
    let n = src.len().min(dst.len());
    dst[..n].copy_from_slice(&src[..n]);
    n
}

fn to_gpu(e: OpError) -> GpuError {
    match e {
        OpError::Gpu(g) => g,
        other => GpuError::Unsupported(other.to_string()),
    }
}

fn alloc_buffers(gpu: &GpuContext, stream: &Arc<CudaStream>, f: SlotFormat) -> Result<Buffers, OpError> {
    let (w, h) = (f.width, f.height);
    let in_len = if f.rgb { 3 * w * h } else { w * h }.max(1);
    // SAFETY: the pinned buffer is fully written (the frame's bytes) before each upload reads it.
    let upload = unsafe { gpu.cuda().alloc_pinned::<u8>(in_len) }
        .map_err(|e| GpuError::from_alloc(e, "pinned upload buffer", w, h, in_len))?;
    let input = launch::alloc_zeroed::<u8>(stream, in_len, "input frame", w, h)?;
    let gray = launch::alloc_zeroed::<u8>(stream, (w * h).max(1), "grey frame", w, h)?;
    // SAFETY: the readback buffer is written by the device copy before the host reads it
    // (`complete` reads it only after the slot's stream has synchronised).
    let readback = unsafe { gpu.cuda().alloc_pinned_with_flags::<u8>((w * h).max(1), 0) }
        .map_err(|e| GpuError::from_alloc(e, "pinned readback buffer", w, h, w * h))?;
    Ok(Buffers { format: f, upload, input, gray, readback })
}
