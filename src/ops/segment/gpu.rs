//! CUDA Felzenszwalb segmentation (`kernels/segment.cu`): blur ([`BlurGpu`]), edge weights,
//! `max_rounds` Borůvka rounds and `max_min_size_rounds` `min_size` rounds enqueued as a device
//! loop (each kernel returns at once after the round that merged nothing, so nothing is read
//! back until [`SegmentGpu::download`]), then raster-order labels by a block scan.
//!
//! Timer regions: `segment_blur`, `segment_graph` (init + weights), `segment_minedge`,
//! `segment_merge`, `segment_flatten` (one of each per merge round), `segment_minsize` (the
//! three kernels of each `min_size` round), `segment_relabel`.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::{MAX_ROUNDS_LIMIT, SegmentHierarchy, SegmentOutput, SegmentParams};
use crate::gpu::launch::{alloc_zeroed, blocks_for, check_frame_size, grid2d, linear};
use crate::gpu::{GpuContext, GpuError, KernelTimer};
use crate::image::{Image, ImageView};
use crate::ops::OpError;
use crate::ops::blur::BlurGpu;
use crate::ops::blur::cpu::{pack_gray, pack_rgb};

/// Entries of the per-round link counts (`ctl[0]` is the always-on gate).
const NCTL: usize = 2 * MAX_ROUNDS_LIMIT as usize + 2;
/// Pixels per block of the relabel scan.
const SCAN_BLOCK: u32 = 1024;
/// Threads per block of the 1-D kernels.
const BLOCK: u32 = 256;

struct Buffers {
    width: usize,
    height: usize,
    w4: CudaSlice<f32>,
    comp: CudaSlice<u32>,
    fin: CudaSlice<u32>,
    size: CudaSlice<u32>,
    cint: CudaSlice<u32>,
    best: CudaSlice<u64>,
    link: CudaSlice<u32>,
    mw: CudaSlice<f32>,
    parent: CudaSlice<u32>,
    round: CudaSlice<u16>,
    minpix: CudaSlice<u32>,
    rootlabel: CudaSlice<u32>,
    labels: CudaSlice<u32>,
    blocksum: CudaSlice<u32>,
    ctl: CudaSlice<u32>,
    info: CudaSlice<u32>,
}

/// What the last enqueue produced.
#[derive(Clone, Copy, Debug)]
struct Produced {
    width: usize,
    height: usize,
    max_rounds: u32,
    /// `min_size` rounds enqueued (0 when `min_size <= 1`).
    ms_rounds: u32,
    /// `Some(level)` after [`SegmentGpu::enqueue_level`].
    level: Option<u32>,
}

/// GPU Felzenszwalb segmentation with buffers for one frame size.
pub struct SegmentGpu {
    blur: BlurGpu,
    f_weights: CudaFunction,
    f_init: CudaFunction,
    f_minedge: CudaFunction,
    f_decide: CudaFunction,
    f_flatten: CudaFunction,
    f_final: CudaFunction,
    f_minpix: CudaFunction,
    f_scan_count: CudaFunction,
    f_scan_blocks: CudaFunction,
    f_scan_label: CudaFunction,
    f_labels: CudaFunction,
    f_level_threshold: CudaFunction,
    f_level_comp: CudaFunction,
    bufs: Option<Buffers>,
    produced: Option<Produced>,
}

impl std::fmt::Debug for SegmentGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentGpu").field("produced", &self.produced).finish_non_exhaustive()
    }
}

fn cfg_scan(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks_for(n, SCAN_BLOCK), 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 }
}

impl SegmentGpu {
    /// Resolves the kernels (buffers are allocated on the first frame).
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        let f = |name: &str| gpu.function("segment", name);
        Ok(Self {
            blur: BlurGpu::new(gpu)?,
            f_weights: f("segment_weights")?,
            f_init: f("segment_init")?,
            f_minedge: f("segment_minedge")?,
            f_decide: f("segment_decide")?,
            f_flatten: f("segment_flatten")?,
            f_final: f("segment_final")?,
            f_minpix: f("segment_minpix")?,
            f_scan_count: f("segment_scan_count")?,
            f_scan_blocks: f("segment_scan_blocks")?,
            f_scan_label: f("segment_scan_label")?,
            f_labels: f("segment_labels")?,
            f_level_threshold: f("segment_level_threshold")?,
            f_level_comp: f("segment_level_comp")?,
            bufs: None,
            produced: None,
        })
    }

    fn ensure_buffers(&mut self, stream: &Arc<CudaStream>, width: usize, height: usize) -> Result<(), GpuError> {
        if self.bufs.as_ref().is_some_and(|b| b.width == width && b.height == height) {
            return Ok(());
        }
        self.bufs = None;
        let n = width * height;
        let a = |len: usize, what: &str| alloc_zeroed::<u32>(stream, len, what, width, height);
        self.bufs = Some(Buffers {
            width,
            height,
            w4: alloc_zeroed::<f32>(stream, 4 * n, "segment edge weights", width, height)?,
            comp: a(n, "segment components")?,
            fin: a(n, "segment final roots")?,
            size: a(n, "segment sizes")?,
            cint: a(n, "segment internal differences")?,
            best: alloc_zeroed::<u64>(stream, n, "segment least edges", width, height)?,
            link: a(n, "segment links")?,
            mw: alloc_zeroed::<f32>(stream, n, "segment link weights", width, height)?,
            parent: a(n, "segment hierarchy parents")?,
            round: alloc_zeroed::<u16>(stream, n, "segment hierarchy rounds", width, height)?,
            minpix: a(n, "segment first pixels")?,
            rootlabel: a(n, "segment root labels")?,
            labels: a(n, "segment labels")?,
            blocksum: a(blocks_for(n, SCAN_BLOCK) as usize, "segment scan blocks")?,
            ctl: a(NCTL, "segment round counts")?,
            info: a(4, "segment info")?,
        });
        Ok(())
    }

    /// Enqueues the segmentation of a packed grey frame.
    pub fn enqueue(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        self.enqueue_channels(stream, timer, input, width, height, 1, params)
    }

    /// Enqueues the segmentation of a packed interleaved RGB frame (`3 * width` bytes a row).
    pub fn enqueue_rgb(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        self.enqueue_channels(stream, timer, input, width, height, 3, params)
    }

    /// Enqueues the segmentation of `channels` (1 or 3) interleaved samples per pixel.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_channels(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        channels: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        params.validate()?;
        check_frame_size(width * channels, height)?;
        let n = width * height;
        if n >= (1 << 30) {
            return Err(OpError::Unsupported(format!("{width}x{height}: edge ids need 4 * pixels < 2^32")));
        }
        self.blur.enqueue_named(stream, timer, input, width, height, channels, &params.blur(), ["segment_blur"; 2])?;
        self.ensure_buffers(stream, width, height)?;
        let ms_rounds = if params.min_size > 1 { params.max_min_size_rounds } else { 0 };
        self.produced = Some(Produced { width, height, max_rounds: params.max_rounds, ms_rounds, level: None });
        if n == 0 {
            return Ok(());
        }
        let (Some(b), Some(smooth)) = (self.bufs.as_mut(), self.blur.output()) else { return Ok(()) };
        let (w, h, c, nn) = (width as u32, height as u32, channels as u32, n as u32);
        let nctl = NCTL as u32;
        let pix = grid2d(width, height, 32, 8);
        let lin = linear(n, BLOCK);
        timer.time(stream, "segment_graph", || {
            let mut l = stream.launch_builder(&self.f_init);
            l.arg(&mut b.comp).arg(&mut b.fin).arg(&mut b.size).arg(&mut b.cint).arg(&mut b.best);
            l.arg(&mut b.link).arg(&mut b.parent).arg(&mut b.round).arg(&mut b.ctl).arg(&nn).arg(&nctl);
            // SAFETY: one thread per index below max(n, NCTL); each array is written only
            // below its own length (n or NCTL), checked in the kernel.
            unsafe { l.launch(linear(n.max(NCTL), BLOCK)) }?;
            let mut l = stream.launch_builder(&self.f_weights);
            l.arg(smooth).arg(&mut b.w4).arg(&w).arg(&h).arg(&c);
            // SAFETY: one thread per pixel (bounded in the kernel); smooth holds n * channels
            // floats (the blur of this frame), w4 holds 4n.
            unsafe { l.launch(pix) }?;
            Ok(())
        })?;
        let k = params.k_f32();
        let min_size = params.min_size as u32;
        let total = params.max_rounds + ms_rounds;
        for r in 1..=total {
            let mode = u32::from(r > params.max_rounds);
            // The first min_size round always runs (ctl[0] = 1); others wait on the last round.
            let gate = if r == params.max_rounds + 1 { 0 } else { r - 1 };
            let names = if mode == 0 {
                ["segment_minedge", "segment_merge", "segment_flatten"]
            } else {
                ["segment_minsize"; 3]
            };
            timer.time(stream, names[0], || {
                let mut l = stream.launch_builder(&self.f_minedge);
                l.arg(&mut b.comp).arg(&b.fin).arg(&b.w4).arg(&mut b.best).arg(&b.size);
                l.arg(&w).arg(&h).arg(&mode).arg(&min_size).arg(&b.ctl).arg(&gate);
                // SAFETY: one thread per pixel; neighbours are bounds-checked; comp/fin hold
                // component roots < n, best/size are indexed by roots.
                unsafe { l.launch(pix) }?;
                Ok(())
            })?;
            timer.time(stream, names[1], || {
                let mut l = stream.launch_builder(&self.f_decide);
                l.arg(&b.comp).arg(&b.best).arg(&mut b.link).arg(&mut b.mw).arg(&b.size).arg(&b.cint);
                l.arg(&w).arg(&nn).arg(&k).arg(&mode).arg(&min_size).arg(&mut b.ctl).arg(&gate).arg(&r);
                // SAFETY: one thread per index < n; edge ids in best decode to pixels < n;
                // r < NCTL (r <= 2 * MAX_ROUNDS_LIMIT by validation).
                unsafe { l.launch(lin) }?;
                Ok(())
            })?;
            timer.time(stream, names[2], || {
                let mut l = stream.launch_builder(&self.f_flatten);
                l.arg(&b.comp).arg(&mut b.link).arg(&mut b.fin).arg(&mut b.size).arg(&mut b.cint).arg(&b.mw);
                l.arg(&mut b.best).arg(&mut b.parent).arg(&mut b.round).arg(&b.ctl).arg(&gate).arg(&r).arg(&nn);
                // SAFETY: one thread per index < n; links point at roots < n and form a forest.
                unsafe { l.launch(lin) }?;
                Ok(())
            })?;
        }
        timer.time(stream, "segment_relabel", || {
            let mut l = stream.launch_builder(&self.f_final);
            l.arg(&mut b.comp).arg(&b.fin).arg(&mut b.minpix).arg(&nn);
            // SAFETY: one thread per pixel < n.
            unsafe { l.launch(lin) }?;
            Ok(())
        })?;
        Self::enqueue_numbering(&self.f_minpix, &self.f_scan_count, &self.f_scan_blocks, &self.f_scan_label, &self.f_labels, stream, timer, b)
    }

    /// Raster-order numbering of `comp` (minpix must hold `SEG_NO_PIXEL`).
    #[allow(clippy::too_many_arguments)]
    fn enqueue_numbering(
        f_minpix: &CudaFunction,
        f_scan_count: &CudaFunction,
        f_scan_blocks: &CudaFunction,
        f_scan_label: &CudaFunction,
        f_labels: &CudaFunction,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        b: &mut Buffers,
    ) -> Result<(), OpError> {
        let n = b.width * b.height;
        let (w, nn) = (b.width as u32, n as u32);
        let nblocks = blocks_for(n, SCAN_BLOCK);
        timer.time(stream, "segment_relabel", || {
            let mut l = stream.launch_builder(f_minpix);
            l.arg(&b.comp).arg(&mut b.minpix).arg(&w).arg(&nn);
            // SAFETY: one thread per pixel < n; comp values are roots < n.
            unsafe { l.launch(linear(n, BLOCK)) }?;
            let mut l = stream.launch_builder(f_scan_count);
            l.arg(&b.comp).arg(&b.minpix).arg(&mut b.blocksum).arg(&nn);
            // SAFETY: SCAN_BLOCK threads per block, one block sum each (blocksum has nblocks).
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = stream.launch_builder(f_scan_blocks);
            l.arg(&mut b.blocksum).arg(&nblocks).arg(&mut b.info);
            // SAFETY: a single block scanning nblocks entries.
            unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 }) }?;
            let mut l = stream.launch_builder(f_scan_label);
            l.arg(&b.comp).arg(&b.minpix).arg(&b.blocksum).arg(&mut b.rootlabel).arg(&nn);
            // SAFETY: as scan_count; rootlabel is indexed by roots < n.
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = stream.launch_builder(f_labels);
            l.arg(&b.comp).arg(&b.rootlabel).arg(&mut b.labels).arg(&nn);
            // SAFETY: one thread per pixel < n.
            unsafe { l.launch(linear(n, BLOCK)) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues the labels of hierarchy `level` (0: one segment per pixel; `levels() - 1` or
    /// more: the final segmentation) of the last segmented frame, without recomputing it.
    /// [`SegmentGpu::download`] then returns that level.
    pub fn enqueue_level(&mut self, stream: &Arc<CudaStream>, timer: &mut KernelTimer, level: u32) -> Result<(), OpError> {
        let Some(prod) = self.produced.as_mut() else {
            return Err(OpError::InvalidParam("enqueue_level needs a segmented frame (call enqueue)".into()));
        };
        prod.level = Some(level);
        let n = prod.width * prod.height;
        let total = prod.max_rounds + prod.ms_rounds;
        let Some(b) = self.bufs.as_mut().filter(|_| n > 0) else { return Ok(()) };
        let nn = n as u32;
        timer.time(stream, "segment_relabel", || {
            let mut l = stream.launch_builder(&self.f_level_threshold);
            l.arg(&b.ctl).arg(&total).arg(&level).arg(&mut b.info);
            // SAFETY: one thread reads ctl[1..=total] (total < NCTL) and writes info[1].
            unsafe { l.launch(linear(1, 32)) }?;
            let mut l = stream.launch_builder(&self.f_level_comp);
            l.arg(&mut b.comp).arg(&b.parent).arg(&b.round).arg(&mut b.minpix).arg(&b.info).arg(&nn);
            // SAFETY: one thread per pixel < n; parent chains end at never-absorbed roots.
            unsafe { l.launch(linear(n, BLOCK)) }?;
            Ok(())
        })?;
        Self::enqueue_numbering(&self.f_minpix, &self.f_scan_count, &self.f_scan_blocks, &self.f_scan_label, &self.f_labels, stream, timer, b)
    }

    /// Global round numbers of the levels `1..` from the per-round link counts.
    fn level_rounds(ctl: &[u32], prod: &Produced) -> (Vec<u16>, u32, u32, bool) {
        let mr = prod.max_rounds as usize;
        let total = mr + prod.ms_rounds as usize;
        let levels: Vec<u16> = (1..=total).filter(|&r| ctl.get(r).is_some_and(|&c| c > 0)).map(|r| r as u16).collect();
        let rounds = levels.iter().filter(|&&r| (r as usize) <= mr).count() as u32;
        let ms = levels.len() as u32 - rounds;
        let capped = ctl.get(mr).is_some_and(|&c| c > 0) || (prod.ms_rounds > 0 && ctl.get(total).is_some_and(|&c| c > 0));
        (levels, rounds, ms, capped)
    }

    /// Blocking readback of the last enqueued frame (or level).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<SegmentOutput, OpError> {
        let Some(p) = self.produced else {
            return Err(OpError::InvalidParam("download before any enqueue".into()));
        };
        let n = p.width * p.height;
        let Some(b) = self.bufs.as_ref().filter(|_| n > 0) else {
            return Ok(SegmentOutput {
                labels: Image::new(p.width, p.height, 0),
                segment_count: 0,
                rounds: 0,
                min_size_rounds: 0,
                capped: false,
                level: 0,
            });
        };
        let ctl = stream.clone_dtoh(&b.ctl)?;
        let info = stream.clone_dtoh(&b.info)?;
        let labels = stream.clone_dtoh(&b.labels.slice(0..n))?;
        stream.synchronize()?;
        let (levels, rounds, ms, capped) = Self::level_rounds(&ctl, &p);
        let top = levels.len() as u32;
        Ok(SegmentOutput {
            labels: Image::from_vec(p.width, p.height, labels)?,
            segment_count: info[0] as usize,
            rounds,
            min_size_rounds: ms,
            capped,
            level: p.level.map_or(top, |l| l.min(top)),
        })
    }

    /// Blocking readback of the hierarchy of the last segmented frame.
    pub fn download_hierarchy(&self, stream: &Arc<CudaStream>) -> Result<SegmentHierarchy, OpError> {
        let Some(p) = self.produced else {
            return Err(OpError::InvalidParam("download before any enqueue".into()));
        };
        let n = p.width * p.height;
        let Some(b) = self.bufs.as_ref().filter(|_| n > 0) else {
            return Ok(SegmentHierarchy {
                width: p.width,
                height: p.height,
                parent: Vec::new(),
                round: Vec::new(),
                level_rounds: Vec::new(),
            });
        };
        let ctl = stream.clone_dtoh(&b.ctl)?;
        let parent = stream.clone_dtoh(&b.parent.slice(0..n))?;
        let round = stream.clone_dtoh(&b.round.slice(0..n))?;
        stream.synchronize()?;
        let (level_rounds, ..) = Self::level_rounds(&ctl, &p);
        Ok(SegmentHierarchy { width: p.width, height: p.height, parent, round, level_rounds })
    }

    /// The blurred frame of the last enqueue (for parity tests of the smoothing step).
    pub fn download_blur(&self, stream: &Arc<CudaStream>) -> Result<Vec<f32>, OpError> {
        Ok(self.blur.download(stream)?.data)
    }
}

/// Uploads `data` (packed, `channels` samples a pixel), segments it on the GPU and downloads
/// the labels.
fn run_packed(gpu: &GpuContext, data: &[u8], width: usize, height: usize, channels: usize, params: &SegmentParams) -> Result<SegmentOutput, OpError> {
    let mut op = SegmentGpu::new(gpu)?;
    let stream = gpu.new_stream()?;
    let mut timer = KernelTimer::new();
    let input = if data.is_empty() { stream.alloc_zeros::<u8>(1)? } else { stream.clone_htod(data)? };
    op.enqueue_channels(&stream, &mut timer, &input, width, height, channels, params)?;
    op.download(&stream)
}

/// Uploads a grey image, segments it on the GPU and downloads the labels (CLI and tests).
pub fn segment_gpu(gpu: &GpuContext, img: ImageView<'_, u8>, params: &SegmentParams) -> Result<SegmentOutput, OpError> {
    run_packed(gpu, &pack_gray(img), img.width(), img.height(), 1, params)
}

/// Uploads an RGB image, segments it on the GPU and downloads the labels.
pub fn segment_gpu_rgb(gpu: &GpuContext, img: ImageView<'_, [u8; 3]>, params: &SegmentParams) -> Result<SegmentOutput, OpError> {
    run_packed(gpu, &pack_rgb(img), img.width(), img.height(), 3, params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_rounds_from_counts() {
        let prod = Produced { width: 1, height: 1, max_rounds: 4, ms_rounds: 3, level: None };
        let mut ctl = vec![0u32; NCTL];
        ctl[0] = 1;
        ctl[1] = 10;
        ctl[2] = 3;
        ctl[5] = 2;
        let (lv, r, ms, capped) = SegmentGpu::level_rounds(&ctl, &prod);
        assert_eq!((lv, r, ms, capped), (vec![1, 2, 5], 2, 1, false));
        ctl[3] = 1;
        ctl[4] = 1;
        assert!(SegmentGpu::level_rounds(&ctl, &prod).3);
    }
}
