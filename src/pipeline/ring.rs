//! The ring of CUDA streams: N `Slot`s, each owning a stream, a write-combined pinned upload
//! buffer, device buffers for the frame (input and grey), every analysis' GPU stage and a
//! [`KernelTimer`]. A slot is owned by one thread at a time and moves round the ring:
//!
//! ```text
//! free slots --> worker: upload, grey, every stage's kernels (enqueued, no waiting)
//!            --> collector: wait, read back small tables, compose (if pixels are wanted) --> free
//! ```
//!
//! The worker takes free slots in the order the collector returns them, and the collector
//! completes them in the order the worker sent them, so frames complete in order and up to N
//! frames are in flight: the upload of frame k+1 and the analyses of frames k, k+1, … overlap.
//!
//! Ordering between slots: a stage may keep state across frames on the device (the running
//! background of `cca`); such a stage says so ([`GpuStage::ordered`]). Each frame enqueues its
//! ordered stages first, after waiting for the previous frame's ordered stages (an event the
//! worker keeps), then the other stages. So the only chain between frames is the short ordered
//! work; a segmentation's hundred dependent rounds of frames k and k+1 run side by side.
//!
//! A frame already on the device ([`Pixels::Device`]: NV12 a hardware decoder left in CUDA
//! memory, handed over by a file or network source or by the GStreamer element) skips the upload: the slot converts its planes
//! to RGB into its input buffer on its stream (`ops::nv12`, the bytes of GStreamer's converter)
//! and keeps the decoder's buffer alive until the collector has synchronised that stream.
//!
//! Buffers are allocated when a slot first sees a frame size/format and reallocated only when
//! the stream format changes; an allocation failure is `GpuError::OutOfMemory` naming the size.
//!
//! On an integrated GPU (Jetson: the device reports `integrated`, host and device share DRAM),
//! or on any GPU with `pipeline.upload = "mapped"` (to test that path on a discrete one),
//! the upload buffer is mapped pinned memory (`cuMemHostAlloc` with `DEVICEMAP`) and the kernels
//! read the frame from it through its device pointer (`cuMemHostGetDevicePointer`): the frame's
//! one copy is the one into the pinned buffer, and there is no host-to-device copy.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PinnedHostSlice, sys, sys::CUevent_flags};

use crate::analysis::{Analysis, DeviceFrame, GpuStage, OpSettings};
use crate::config::UploadMode;
use crate::gpu::{DeviceImage, GpuContext, GpuError, KernelTimer, launch};
use crate::image::{DynImage, Image};
use crate::ops::{OpError, nv12, preprocess};
use crate::source::{DeviceNv12, Pixels};

/// Format of the frames a slot's buffers are sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotFormat {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// The input buffer holds packed RGB (else grey).
    pub rgb: bool,
}

struct Buffers {
    format: SlotFormat,
    upload: PinnedHostSlice<u8>,
    /// The frame on the device: its own allocation, or `upload` seen through its device
    /// pointer when `mapped` (never freed as device memory then: see `Drop`).
    input: ManuallyDrop<CudaSlice<u8>>,
    mapped: bool,
    gray: CudaSlice<u8>,
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: `input` is taken exactly once, here, and not used afterwards.
        let input = unsafe { ManuallyDrop::take(&mut self.input) };
        if self.mapped {
            // A view of `upload` (freed by its own drop, after this): not a device allocation.
            let _ = input.leak();
        }
    }
}

/// One frame's worth of device state (see the module docs).
pub(crate) struct Slot {
    /// The slot's stream: every kernel of its frame runs on it (or on streams forked from it).
    pub stream: Arc<CudaStream>,
    /// Frames are read from mapped pinned memory (no copy) rather than copied.
    mapped: bool,
    buffers: Option<Buffers>,
    /// One stage per analysis (in analysis order; `None` for analyses without a GPU path).
    pub stages: Vec<Option<Box<dyn GpuStage>>>,
    /// Event pairs around the frame's kernels.
    pub timer: KernelTimer,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("format", &self.buffers.as_ref().map(|b| b.format))
            .finish_non_exhaustive()
    }
}

/// Creates `size` slots with their streams and each analysis' GPU stage, uploading as `upload`
/// says (see the module docs).
pub(crate) fn new_slots(
    gpu: &GpuContext,
    analyses: &[Box<dyn Analysis>],
    size: usize,
    upload: UploadMode,
) -> Result<Vec<Slot>, OpError> {
    let mapped = match upload {
        UploadMode::Auto => gpu.info().integrated,
        UploadMode::Copy => false,
        UploadMode::Mapped => true,
    };
    (0..size.max(1))
        .map(|_| {
            let stages = analyses
                .iter()
                .map(|a| a.gpu_stage(gpu))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Slot {
                stream: gpu.new_stream()?,
                mapped,
                buffers: None,
                stages,
                timer: KernelTimer::new(),
            })
        })
        .collect()
}

/// The frame's pixels as the ring takes them: packed RGB or the grey bytes to upload, or NV12
/// planes already on the device to convert.
enum Upload {
    Rgb(Arc<Image<[u8; 3]>>),
    Gray(Image<u8>),
    Device(DeviceNv12),
}

/// A frame enqueued on a slot: what the host kept of it.
#[derive(Debug)]
pub(crate) struct Enqueued {
    /// The packed RGB frame, when the source is colour (the host has it anyway).
    pub rgb: Option<Arc<Image<[u8; 3]>>>,
    /// What keeps a device frame's planes allocated until the slot's work is done.
    pub device_input: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// The event the next frame's ordered stages wait for.
    pub ordered_done: CudaEvent,
}

impl Slot {
    /// Uploads `image` and enqueues every enabled stage. `after` is the previous frame's
    /// ordered-stages event. Nothing here waits for the device except the pinned buffer's
    /// previous upload (the slot's previous frame, long done).
    pub fn enqueue(
        &mut self,
        gpu: &GpuContext,
        analyses: &[&'static str],
        image: Pixels,
        index: u64,
        settings: &OpSettings,
        after: Option<&CudaEvent>,
    ) -> Result<Enqueued, OpError> {
        let (w, h) = image.size();
        launch::check_frame_size(w, h)?;
        let upload = Upload::of(image);
        let format = SlotFormat {
            width: w,
            height: h,
            rgb: !matches!(upload, Upload::Gray(_)),
        };
        if self.buffers.as_ref().map(|b| b.format) != Some(format) {
            self.buffers = None; // free the old size first
            self.buffers = Some(alloc_buffers(gpu, &self.stream, format, self.mapped)?);
        }
        let Some(bufs) = self.buffers.as_mut() else {
            return Err(GpuError::Unsupported("slot buffers missing".into()).into());
        };
        self.timer.reset();
        let stream = self.stream.clone();
        enqueue_input(gpu, &stream, &mut self.timer, bufs, &upload)?;
        if let Some(ev) = after {
            stream.wait(ev)?;
        }
        let frame = DeviceFrame {
            gray: DeviceImage::new(&stream, &bufs.gray, w, h, 1)?,
            rgb: if format.rgb {
                Some(DeviceImage::new(&stream, &bufs.input, w, h, 3)?)
            } else {
                None
            },
            index,
        };
        let ordered_done = enqueue_stages(
            &stream,
            &mut self.stages,
            &mut self.timer,
            analyses,
            &frame,
            settings,
        )?;
        Ok(Enqueued {
            device_input: match &upload {
                Upload::Device(frame) => Some(frame.keep_alive.clone()),
                Upload::Rgb(_) | Upload::Gray(_) => None,
            },
            rgb: match upload {
                Upload::Rgb(img) => Some(img),
                Upload::Gray(_) | Upload::Device(_) => None,
            },
            ordered_done,
        })
    }
}

impl Upload {
    /// What a frame's pixels are uploaded as: colour frames packed, grey levels of 16 bits or
    /// floats (0..1) brought to 8 bits on the host, device frames as they are.
    fn of(image: Pixels) -> Self {
        match image {
            Pixels::Host(DynImage::Rgb8(img)) => Upload::Rgb(Arc::new(img.into_packed())),
            Pixels::Host(DynImage::Gray8(img)) => Upload::Gray(img.into_packed()),
            Pixels::Host(DynImage::Gray16(img)) => {
                Upload::Gray(preprocess::gray16_to_gray8(img.view()))
            }
            Pixels::Host(DynImage::F32(img)) => {
                Upload::Gray(img.map(|v| (v.clamp(0.0, 1.0) * 255.0).round() as u8))
            }
            Pixels::Device(frame) => Upload::Device(frame),
        }
    }
}

/// The frame's input on the device (`bufs.input`) and its grey levels (`bufs.gray`): a host
/// frame copied through the pinned buffer (no copy when it is mapped), a decoder's NV12 frame
/// converted to RGB; colour converted to grey, a grey frame copied.
fn enqueue_input(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    timer: &mut KernelTimer,
    bufs: &mut Buffers,
    upload: &Upload,
) -> Result<(), OpError> {
    let (w, h) = (bufs.format.width, bufs.format.height);
    match upload {
        Upload::Rgb(_) | Upload::Gray(_) => {
            // Copy into the write-combined pinned buffer (its previous upload finished long
            // ago: the slot's previous frame was collected before the slot came back).
            let staging = bufs.upload.as_mut_slice()?;
            let n = match upload {
                Upload::Rgb(img) => copy_into(staging, img.data().as_flattened()),
                Upload::Gray(g) => copy_into(staging, g.data()),
                Upload::Device(_) => 0,
            };
            if !bufs.mapped {
                timer.time(stream, "upload", || {
                    stream.memcpy_htod(&bufs.upload, &mut bufs.input.slice_mut(0..n))?;
                    Ok(())
                })?;
            }
        }
        Upload::Device(frame) => {
            timer.time(stream, "preprocess_nv12_to_rgb", || {
                // SAFETY: the planes are device memory of this context holding the whole
                // frame (`DeviceNv12`'s contract: a decoder's buffer in the backend's
                // context, written before it was handed over), kept allocated by
                // `keep_alive` until the collector has synchronised this slot's stream.
                unsafe {
                    nv12::gpu::enqueue_nv12_to_rgb(
                        gpu,
                        stream,
                        &frame.planes,
                        &frame.conversion,
                        &mut bufs.input,
                        w,
                        h,
                    )
                }
                .map_err(to_gpu)
            })?;
        }
    }
    if bufs.format.rgb {
        let rgb = DeviceImage::new(stream, &bufs.input, w, h, 3)?;
        timer.time(stream, "preprocess_rgb_to_gray", || {
            preprocess::enqueue_rgb_to_gray(gpu, stream, rgb.data, &mut bufs.gray, w, h)
                .map_err(to_gpu)
        })?;
    } else {
        stream.memcpy_dtod(
            &bufs.input.slice(0..w * h),
            &mut bufs.gray.slice_mut(0..w * h),
        )?;
    }
    Ok(())
}

/// Enqueues the enabled stages on `frame`: the ordered ones (device state across frames)
/// first, then the event the next frame waits for (returned), then the others, so that a long
/// stage (segmentation) of frame k overlaps that of k+1.
fn enqueue_stages(
    stream: &Arc<CudaStream>,
    stages: &mut [Option<Box<dyn GpuStage>>],
    timer: &mut KernelTimer,
    analyses: &[&'static str],
    frame: &DeviceFrame<'_>,
    settings: &OpSettings,
) -> Result<CudaEvent, OpError> {
    let mut ordered_done = None;
    for ordered in [true, false] {
        for (name, stage) in analyses.iter().zip(stages.iter_mut()) {
            if let (true, Some(stage)) = (settings.is_enabled(name), stage.as_mut())
                && stage.ordered() == ordered
            {
                stage.enqueue(frame, timer, settings)?;
            }
        }
        if ordered {
            ordered_done = Some(stream.record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))?);
        }
    }
    Ok(ordered_done.ok_or_else(|| GpuError::Unsupported("ordered event missing".into()))?)
}

impl Slot {
    /// The slot's parts for the completion side: the frame as the compose step draws it (the
    /// colour frame, else the grey one), the stages and the timer.
    pub fn parts(&mut self) -> SlotParts<'_> {
        let base = self.buffers.as_ref().and_then(|b| {
            let (w, h) = (b.format.width, b.format.height);
            if b.format.rgb {
                DeviceImage::new(&self.stream, &b.input, w, h, 3).ok()
            } else {
                DeviceImage::new(&self.stream, &b.gray, w, h, 1).ok()
            }
        });
        let gray = self.buffers.as_ref().and_then(|b| {
            let (w, h) = (b.format.width, b.format.height);
            DeviceImage::new(&self.stream, &b.gray, w, h, 1).ok()
        });
        SlotParts {
            base,
            gray,
            stages: &mut self.stages,
            timer: &mut self.timer,
        }
    }
}

/// Disjoint borrows of a slot (see [`Slot::parts`]).
pub(crate) struct SlotParts<'a> {
    /// The frame on the device, `None` before the first enqueue.
    pub base: Option<DeviceImage<'a, u8>>,
    /// The grey frame the analyses ran on, `None` before the first enqueue.
    pub gray: Option<DeviceImage<'a, u8>>,
    /// One stage per analysis.
    pub stages: &'a mut [Option<Box<dyn GpuStage>>],
    /// The frame's timer.
    pub timer: &'a mut KernelTimer,
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

fn alloc_buffers(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    f: SlotFormat,
    mapped: bool,
) -> Result<Buffers, OpError> {
    let (w, h) = (f.width, f.height);
    let in_len = if f.rgb { 3 * w * h } else { w * h }.max(1);
    let flags = if mapped {
        sys::CU_MEMHOSTALLOC_WRITECOMBINED | sys::CU_MEMHOSTALLOC_DEVICEMAP
    } else {
        sys::CU_MEMHOSTALLOC_WRITECOMBINED
    };
    // SAFETY: the pinned buffer is fully written (the frame's bytes) before each upload reads it.
    let mut upload = unsafe { gpu.cuda().alloc_pinned_with_flags::<u8>(in_len, flags) }
        .map_err(|e| GpuError::from_alloc(e, "pinned upload buffer", w, h, in_len))?;
    let input = if mapped {
        let host = upload.as_mut_ptr()?;
        let mut device_ptr = 0;
        // SAFETY: `host` is a live DEVICEMAP allocation of this context (bound by the allocation
        // above); `device_ptr` is a valid out-pointer.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, host.cast(), 0) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(GpuError::from(cudarc::driver::DriverError(r)).into());
        }
        // SAFETY: `device_ptr` addresses the `in_len` bytes of `upload`, which outlives this view
        // (`Buffers` leaks the view before `upload` is freed).
        unsafe { stream.upgrade_device_ptr::<u8>(device_ptr, in_len) }
    } else {
        launch::alloc_zeroed::<u8>(stream, in_len, "input frame", w, h)?
    };
    let gray = launch::alloc_zeroed::<u8>(stream, (w * h).max(1), "grey frame", w, h)?;
    Ok(Buffers {
        format: f,
        upload,
        input: ManuallyDrop::new(input),
        mapped,
        gray,
    })
}
