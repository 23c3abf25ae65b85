//! CUDA backend of the compose step: launch code for `kernels/compose.cu`.
//!
//! [`ComposeGpu::enqueue`] draws one frame's picture into a device buffer it owns, on the base
//! image's stream and without a host synchronisation: per visible segment layer
//! `compose_segment_sums` (mean fill only) and `compose_segment_fill`, then `compose_shapes`
//! when there are primitives (uploaded from the host per frame), then one picture kernel for
//! the format. Nothing comes back until [`ComposeGpu::read_back`], so a frame no sink wants in
//! pixels costs no copy; [`ComposeGpu::picture`] hands the device buffer to a consumer that
//! reads device memory.
//!
//! Buffers are allocated on first use and reallocated only when a size changes (the picture,
//! the marks) or grows (the primitive list, the per-label tables). One `ComposeGpu` serves one
//! stream at a time (a ring slot): its buffers are reused by the next enqueue on that stream.

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig,
    PushKernelArg, SyncOnDrop,
};

use super::layer::{DeviceRaster, DeviceRasterLayer, SegmentCount, ShapeLayer};
use super::pixel::pack_rgb;
use super::shapes::{self, Primitive};
use super::style::{Blend, ComposeStyle};
use super::{ComposeError, Picture, PictureFormat};
use crate::gpu::launch::{alloc_zeroed, blocks_for, grid2d};
use crate::gpu::{DeviceImage, GpuContext, GpuError, KernelTimer, Readback};
use crate::ops::segmentation::OverlayMode;

/// Most visible raster layers one picture takes (keep in sync with `COMPOSE_MAX_RASTERS`).
pub(crate) const MAX_RASTERS: usize = 8;

/// Launch shapes of the compose kernels: speed only, the picture is the same for every value
/// (`bench_compose` measures them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ComposeTuning {
    /// Rows of the picture kernels' 32-wide blocks: a warp stays on one row (coalesced).
    pub block_rows: u32,
    /// Threads a block of the 1D kernels (sums, fill; shapes: one primitive a warp).
    pub block: u32,
    /// Pixels a thread sums before the warp step: few runs cross a segment edge.
    pub sum_run: u32,
    /// Most blocks of the grid-stride fill kernel (its count may be known only on the device).
    pub fill_blocks: u32,
}

impl ComposeTuning {
    /// The values for `device` (the same on every device: the kernels are memory-bound and one
    /// pass over the picture).
    #[must_use]
    pub fn for_device(_device: &crate::gpu::DeviceInfo) -> Self {
        Self::default()
    }
}

impl Default for ComposeTuning {
    fn default() -> Self {
        Self {
            // 8 rows of 32: 256 threads, a warp per row keeps reads and writes coalesced.
            block_rows: 8,
            // 256 threads: eight warps hide the latency of the tables' scattered reads.
            block: 256,
            // 8 pixels a thread: runs rarely cross a segment edge, so few atomics per pixel.
            sum_run: 8,
            // 512 blocks cover a 4K frame's segment count with a few strides a thread.
            fill_blocks: 512,
        }
    }
}

/// One raster layer as the kernel reads it. Keep in sync with `ComposeRaster` in compose.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct ComposeRaster {
    data: u64,
    fill: u64,
    count_ptr: u64,
    kind: u32,
    alpha: u32,
    additive: u32,
    count: u32,
    label_width: u32,
    label_height: u32,
    factor: u32,
    boundary: u32,
}

/// The picture kernels' parameters. Keep in sync with `ComposeParams` in compose.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct ComposeParams {
    base: u64,
    out: u64,
    marks: u64,
    prims: u64,
    width: u32,
    height: u32,
    out_width: u32,
    out_height: u32,
    channels: u32,
    base_alpha: u32,
    raster_count: u32,
    prim_count: u32,
    rasters: [ComposeRaster; MAX_RASTERS],
}

const _: () = assert!(std::mem::size_of::<ComposeRaster>() == 56);
const _: () = assert!(std::mem::size_of::<ComposeParams>() == 512);

// SAFETY: plain-old-data, `#[repr(C)]`, layouts asserted above and in compose.cu.
unsafe impl DeviceRepr for ComposeRaster {}
// SAFETY: as above.
unsafe impl DeviceRepr for ComposeParams {}

const RASTER_RESIDUE: u32 = 0;
const RASTER_COLOUR: u32 = 1;
const RASTER_SEGMENTS: u32 = 2;
const BOUNDARY_ON: u32 = 1 << 24;

/// A segment layer's per-label tables (`sums` zero at rest, see compose.cu).
struct SegmentTables {
    sums: CudaSlice<u64>,
    fill: CudaSlice<u32>,
    capacity: usize,
}

/// The last enqueued picture.
#[derive(Clone, Copy, Debug)]
struct Composed {
    format: PictureFormat,
    width: usize,
    height: usize,
}

/// The compose kernels and their buffers.
pub struct ComposeGpu {
    f_sums: CudaFunction,
    f_fill: CudaFunction,
    f_shapes: CudaFunction,
    f_rgb: CudaFunction,
    f_rgba: CudaFunction,
    f_i420: CudaFunction,
    tuning: ComposeTuning,
    out: Option<CudaSlice<u8>>,
    out_len: usize,
    marks: Option<CudaSlice<u32>>,
    marks_len: usize,
    prims: Option<CudaSlice<Primitive>>,
    tables: Vec<SegmentTables>,
    readback: Readback<u8>,
    composed: Option<Composed>,
}

impl std::fmt::Debug for ComposeGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComposeGpu")
            .field("tuning", &self.tuning)
            .field("composed", &self.composed)
            .finish_non_exhaustive()
    }
}

/// A device pointer of a buffer another stage wrote, with the guard that records this stream's
/// read when dropped (after the launches).
fn read_ptr<'a, T>(
    s: &'a CudaSlice<T>,
    stream: &'a CudaStream,
    guards: &mut Vec<SyncOnDrop<'a>>,
) -> u64 {
    let (p, guard) = s.device_ptr(stream);
    guards.push(guard);
    p
}

/// As [`read_ptr`] for a buffer the kernels write.
fn write_ptr<'a, T>(
    s: &'a mut CudaSlice<T>,
    stream: &'a CudaStream,
    guards: &mut Vec<SyncOnDrop<'a>>,
) -> u64 {
    let (p, guard) = s.device_ptr_mut(stream);
    guards.push(guard);
    p
}

fn u32_of(v: usize, what: &str) -> Result<u32, GpuError> {
    u32::try_from(v).map_err(|_| GpuError::Unsupported(format!("{what} {v} exceeds 32 bits")))
}

impl ComposeGpu {
    /// Resolves the kernels with the default tuning (buffers are allocated on the first frame).
    pub fn new(gpu: &GpuContext) -> Result<Self, ComposeError> {
        Self::with_tuning(gpu, ComposeTuning::for_device(gpu.info()))
    }

    /// Resolves the kernels with `tuning`.
    pub fn with_tuning(gpu: &GpuContext, tuning: ComposeTuning) -> Result<Self, ComposeError> {
        let f = |name: &str| gpu.function("compose", name);
        Ok(Self {
            f_sums: f("compose_segment_sums")?,
            f_fill: f("compose_segment_fill")?,
            f_shapes: f("compose_shapes")?,
            f_rgb: f("compose_rgb")?,
            f_rgba: f("compose_rgba")?,
            f_i420: f("compose_i420")?,
            tuning,
            out: None,
            out_len: 0,
            marks: None,
            marks_len: 0,
            prims: None,
            tables: Vec::new(),
            readback: Readback::new(gpu.cuda()),
            composed: None,
        })
    }

    /// Enqueues the picture of `base` with `rasters` and `shapes` drawn with `style`, in
    /// `format`, on `base.stream`, timed as the region `compose` of `timer`. Every raster
    /// buffer must be frame-sized (segments: `label_width * label_height` labels).
    pub fn enqueue(
        &mut self,
        base: DeviceImage<'_, u8>,
        rasters: &[DeviceRasterLayer<'_>],
        shapes: &[ShapeLayer],
        style: &ComposeStyle,
        format: PictureFormat,
        timer: &mut KernelTimer,
    ) -> Result<(), ComposeError> {
        let (width, height) = (base.width, base.height);
        if base.channels != 1 && base.channels != 3 {
            return Err(GpuError::Unsupported(format!(
                "compose of a {}-channel frame",
                base.channels
            ))
            .into());
        }
        let visible = check_rasters(rasters, style, width, height)?;
        let (pw, ph) = format.picture_size(width, height);
        let stream = base.stream;
        self.composed = Some(Composed {
            format,
            width: pw,
            height: ph,
        });
        let out_len = format.byte_len(pw, ph);
        if self.out.is_none() || self.out_len != out_len {
            self.out = None;
            self.out = Some(alloc_zeroed::<u8>(
                stream,
                out_len,
                "composed picture",
                width,
                height,
            )?);
            self.out_len = out_len;
        }
        let prims = shapes::primitives(shapes, style);
        if !prims.is_empty() {
            self.upload_primitives(stream, &prims, pw * ph, width, height)?;
        }
        for (j, (layer, _)) in visible
            .iter()
            .filter(|(l, _)| matches!(l.raster, DeviceRaster::Segments { .. }))
            .enumerate()
        {
            if let DeviceRaster::Segments { segments, count } = layer.raster {
                let capacity = match count {
                    SegmentCount::Host(n) => n.min(segments.label_width * segments.label_height),
                    SegmentCount::Device(_) => segments.label_width * segments.label_height,
                };
                self.ensure_tables(stream, j, capacity, width, height)?;
            }
        }
        if pw == 0 || ph == 0 {
            return Ok(());
        }
        timer.time(stream, "compose", || {
            self.launch(base, &visible, &prims, style, format, (pw, ph))
        })?;
        Ok(())
    }

    /// Uploads this frame's primitives (pageable copy: the host vector may go right after) and
    /// makes sure the marks cover a picture of `pixels`.
    fn upload_primitives(
        &mut self,
        stream: &Arc<CudaStream>,
        prims: &[Primitive],
        pixels: usize,
        width: usize,
        height: usize,
    ) -> Result<(), ComposeError> {
        if self.marks.is_none() || self.marks_len != pixels {
            self.marks = None;
            self.marks = Some(alloc_zeroed::<u32>(
                stream,
                pixels,
                "shape marks",
                width,
                height,
            )?);
            self.marks_len = pixels;
        }
        if self.prims.as_ref().is_none_or(|p| p.len() < prims.len()) {
            self.prims = None;
            self.prims = Some(alloc_zeroed::<Primitive>(
                stream,
                prims.len().next_power_of_two(),
                "shape primitives",
                width,
                height,
            )?);
        }
        if let Some(buf) = self.prims.as_mut() {
            stream.memcpy_htod(prims, &mut buf.slice_mut(0..prims.len()))?;
        }
        Ok(())
    }

    /// Makes sure segment layer `j` has tables of at least `capacity` labels (zeroed sums).
    fn ensure_tables(
        &mut self,
        stream: &Arc<CudaStream>,
        j: usize,
        capacity: usize,
        width: usize,
        height: usize,
    ) -> Result<(), ComposeError> {
        if self.tables.get(j).is_some_and(|t| t.capacity >= capacity) {
            return Ok(());
        }
        let tables = SegmentTables {
            sums: alloc_zeroed::<u64>(stream, 4 * capacity, "segment sums", width, height)?,
            fill: alloc_zeroed::<u32>(stream, capacity, "segment fill", width, height)?,
            capacity,
        };
        if j < self.tables.len() {
            self.tables[j] = tables;
        } else {
            self.tables.push(tables);
        }
        Ok(())
    }

    /// Enqueues the kernels (buffers are in place).
    fn launch(
        &mut self,
        base: DeviceImage<'_, u8>,
        visible: &[(DeviceRasterLayer<'_>, Blend)],
        prims: &[Primitive],
        style: &ComposeStyle,
        format: PictureFormat,
        (pw, ph): (usize, usize),
    ) -> Result<(), GpuError> {
        let stream: &CudaStream = base.stream;
        let t = self.tuning;
        let mut guards = Vec::new();
        let mut params = ComposeParams {
            base: read_ptr(base.data, stream, &mut guards),
            width: u32_of(base.width, "frame width")?,
            height: u32_of(base.height, "frame height")?,
            out_width: u32_of(pw, "picture width")?,
            out_height: u32_of(ph, "picture height")?,
            channels: u32_of(base.channels, "channels")?,
            base_alpha: u32::from(style.base_alpha()),
            raster_count: u32_of(visible.len(), "raster layers")?,
            prim_count: u32_of(prims.len(), "primitives")?,
            ..ComposeParams::default()
        };
        let Self {
            f_sums,
            f_fill,
            f_shapes,
            f_rgb,
            f_rgba,
            f_i420,
            out,
            marks,
            prims: prim_buf,
            tables,
            ..
        } = self;
        let Some(out) = out.as_mut() else {
            return Err(GpuError::Unsupported("picture buffer missing".into()));
        };
        params.out = write_ptr(out, stream, &mut guards);
        let mut tables = tables.iter_mut();
        let frame = FrameArgs {
            base: params.base,
            channels: params.channels,
            width: params.width,
            height: params.height,
        };
        for (desc, (layer, blend)) in params.rasters.iter_mut().zip(visible) {
            desc.alpha = u32::from(blend.alpha);
            desc.additive = u32::from(blend.additive);
            match layer.raster {
                DeviceRaster::Residue(data) => {
                    desc.kind = RASTER_RESIDUE;
                    desc.data = read_ptr(data, stream, &mut guards);
                }
                DeviceRaster::Colour(data) => {
                    desc.kind = RASTER_COLOUR;
                    desc.data = read_ptr(data, stream, &mut guards);
                }
                DeviceRaster::Segments { segments, count } => {
                    let Some(table) = tables.next() else {
                        return Err(GpuError::Unsupported("segment tables missing".into()));
                    };
                    let capacity = u32_of(segments.label_width * segments.label_height, "labels")?;
                    *desc = ComposeRaster {
                        kind: RASTER_SEGMENTS,
                        data: read_ptr(segments.labels, stream, &mut guards),
                        label_width: u32_of(segments.label_width, "label width")?,
                        label_height: u32_of(segments.label_height, "label height")?,
                        factor: u32_of(
                            segments.effective_factor(base.width, base.height),
                            "factor",
                        )?,
                        boundary: segments.boundary.map_or(0, |b| pack_rgb(b) | BOUNDARY_ON),
                        ..*desc
                    };
                    match count {
                        // At most one segment a label pixel, as on the CPU (the tables hold that many).
                        SegmentCount::Host(n) => {
                            desc.count = capacity.min(u32::try_from(n).unwrap_or(u32::MAX));
                        }
                        SegmentCount::Device(word) => {
                            desc.count_ptr = read_ptr(word, stream, &mut guards)
                        }
                    }
                    let sums = write_ptr(&mut table.sums, stream, &mut guards);
                    desc.fill = write_ptr(&mut table.fill, stream, &mut guards);
                    let mean = segments.fill == OverlayMode::Mean;
                    if mean {
                        launch_segment_sums(stream, f_sums, &t, frame, desc, sums)?;
                    }
                    let table_capacity = u32_of(table.capacity, "table capacity")?.min(capacity);
                    let blocks = blocks_for(table.capacity, t.block).min(t.fill_blocks);
                    launch_segment_fill(
                        stream,
                        f_fill,
                        (blocks, t.block),
                        (frame, desc),
                        (sums, table_capacity),
                        mean,
                    )?;
                }
            }
        }
        if !prims.is_empty() {
            let (Some(marks), Some(prim_buf)) = (marks.as_mut(), prim_buf.as_mut()) else {
                return Err(GpuError::Unsupported("shape buffers missing".into()));
            };
            params.marks = write_ptr(marks, stream, &mut guards);
            params.prims = write_ptr(prim_buf, stream, &mut guards);
            launch_shapes(stream, f_shapes, &t, &params, prims.len())?;
        }
        let (f, cfg) = match format {
            PictureFormat::Rgb => (&*f_rgb, grid2d(pw, ph, 32, t.block_rows)),
            PictureFormat::Rgba => (&*f_rgba, grid2d(pw, ph, 32, t.block_rows)),
            PictureFormat::I420 => (&*f_i420, grid2d(pw / 2, ph / 2, 32, t.block_rows)),
        };
        let mut b = stream.launch_builder(f);
        b.arg(&params);
        // SAFETY: the parameters match ComposeParams (layout asserted on both sides); every
        // buffer they name was checked against the frame size and is kept alive by `guards`.
        unsafe { b.launch(cfg) }?;
        drop(guards);
        Ok(())
    }

    /// The last enqueued picture on the device: the buffer (its first
    /// `format.byte_len(width, height)` bytes), the format and the picture's size.
    #[must_use]
    pub fn picture(&self) -> Option<(&CudaSlice<u8>, PictureFormat, usize, usize)> {
        let c = self.composed?;
        Some((self.out.as_ref()?, c.format, c.width, c.height))
    }

    /// Copies the last enqueued picture to the host through a reusable pinned buffer, waiting
    /// for `stream` (the one it was enqueued on).
    pub fn read_back(&mut self, stream: &Arc<CudaStream>) -> Result<Picture, ComposeError> {
        let Some(c) = self.composed else {
            return Err(GpuError::Unsupported("read_back before any enqueue".into()).into());
        };
        let n = c.format.byte_len(c.width, c.height);
        let data = match &self.out {
            Some(out) if n > 0 => self.readback.fetch(stream, out, n)?,
            _ => Vec::new(),
        };
        Ok(Picture {
            format: c.format,
            width: c.width,
            height: c.height,
            data,
        })
    }
}

/// The visible raster layers with their blends, after checking every layer's buffers against
/// a `width` x `height` frame.
fn check_rasters<'a>(
    rasters: &[DeviceRasterLayer<'a>],
    style: &ComposeStyle,
    width: usize,
    height: usize,
) -> Result<Vec<(DeviceRasterLayer<'a>, Blend)>, ComposeError> {
    let pixels = width * height;
    let mut visible = Vec::with_capacity(rasters.len());
    for layer in rasters {
        let short = |need: usize, have: usize| ComposeError::Layer {
            layer: layer.name.to_owned(),
            what: format!("buffer holds {have} bytes, a {width}x{height} frame needs {need}"),
        };
        match layer.raster {
            DeviceRaster::Residue(d) if d.len() < pixels => return Err(short(pixels, d.len())),
            DeviceRaster::Colour(d) if d.len() < 3 * pixels => {
                return Err(short(3 * pixels, d.len()));
            }
            DeviceRaster::Segments { segments, .. } => {
                segments.check(layer.name, segments.labels.len(), width, height)?
            }
            _ => {}
        }
        if let Some(blend) = style.blend(layer.name, layer.raster.kind()) {
            visible.push((*layer, blend));
        }
    }
    if visible.len() > MAX_RASTERS {
        return Err(ComposeError::TooManyLayers {
            count: visible.len(),
            max: MAX_RASTERS,
        });
    }
    Ok(visible)
}
/// The frame as the segment kernels read it.
#[derive(Clone, Copy)]
struct FrameArgs {
    /// Device pointer of the frame's samples.
    base: u64,
    /// Samples a pixel (1 grey, 3 RGB).
    channels: u32,
    /// Width in pixels.
    width: u32,
    /// Height in pixels.
    height: u32,
}

/// Enqueues `compose_segment_sums`: each segment's colour sums over the frame (the mean fill).
fn launch_segment_sums(
    stream: &CudaStream,
    f: &CudaFunction,
    t: &ComposeTuning,
    params: FrameArgs,
    desc: &ComposeRaster,
    sums: u64,
) -> Result<(), GpuError> {
    let runs = blocks_for(params.width as usize, t.sum_run) as usize * params.height as usize;
    let cfg = LaunchConfig {
        grid_dim: (blocks_for(runs, t.block), 1, 1),
        block_dim: (t.block, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = stream.launch_builder(f);
    b.arg(&params.base)
        .arg(&params.channels)
        .arg(&params.width)
        .arg(&params.height);
    b.arg(&desc.data)
        .arg(&desc.label_width)
        .arg(&desc.label_height)
        .arg(&desc.factor);
    b.arg(&desc.count_ptr)
        .arg(&desc.count)
        .arg(&t.sum_run)
        .arg(&sums);
    // SAFETY: arguments match compose_segment_sums; the frame holds width * height * channels
    // samples, the labels label_width * label_height (checked), the sums 4 per label below the
    // clamped count.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// Enqueues `compose_segment_fill`: each segment's fill colour (its mean from `sums`, or a
/// colour from its label), for the labels below the count clamped to the table's capacity.
fn launch_segment_fill(
    stream: &CudaStream,
    f: &CudaFunction,
    (blocks, threads): (u32, u32),
    (frame, desc): (FrameArgs, &ComposeRaster),
    (sums, table_capacity): (u64, u32),
    mean: bool,
) -> Result<(), GpuError> {
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let mean = u32::from(mean);
    let mut b = stream.launch_builder(f);
    b.arg(&sums)
        .arg(&desc.fill)
        .arg(&desc.count_ptr)
        .arg(&desc.count)
        .arg(&table_capacity);
    b.arg(&mean).arg(&frame.channels);
    // SAFETY: arguments match compose_segment_fill; it touches labels below the count clamped
    // to the tables' capacity.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// Enqueues `compose_shapes`: each primitive's pixels marked in the picture's marks (one warp a
/// primitive).
fn launch_shapes(
    stream: &CudaStream,
    f: &CudaFunction,
    t: &ComposeTuning,
    params: &ComposeParams,
    count: usize,
) -> Result<(), GpuError> {
    let warps_per_block = (t.block / 32).max(1);
    let cfg = LaunchConfig {
        grid_dim: (blocks_for(count, warps_per_block), 1, 1),
        block_dim: (warps_per_block * 32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = stream.launch_builder(f);
    b.arg(&params.prims)
        .arg(&params.prim_count)
        .arg(&params.marks)
        .arg(&params.out_width)
        .arg(&params.out_height);
    // SAFETY: arguments match compose_shapes; the marks hold out_width * out_height words and
    // every mark is clipped to the picture.
    unsafe { b.launch(cfg) }?;
    Ok(())
}
