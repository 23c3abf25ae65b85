//! CUDA Felzenszwalb segmentation (`kernels/segment.cu`; the CPU model of every kernel is
//! [`super::boruvka`]): blur ([`BlurGpu`]), edge weights, then three phases of rounds enqueued
//! as a device loop — zero-weight chains, exact merge rounds, `min_size` chains — where every
//! kernel returns at once after the round that changed nothing, so nothing is read back until
//! [`SegmentGpu::download`]; finally raster-order labels by a block scan.
//!
//! Timer regions: `segment_blur`, `segment_graph` (init + weights), `segment_relabel`, and for
//! the rounds either (default) one region per phase, `segment_zero`, `segment_merge`,
//! `segment_minsize`, or with [`SegmentGpu::detailed_timing`] one region per kernel and round:
//! `segment_minedge` (least edges), `segment_merge` (targets, limits, pairs), `segment_flatten`
//! (group absorption / chain flattening), `segment_minsize` (all `min_size` kernels).
//!
//! Rounds: a phase stops by itself; `max_rounds` only bounds the launches. With
//! `adaptive_rounds` the next frame enqueues the rounds this frame used plus a margin (video
//! frames are alike), doubling after a capped frame.

use std::cell::Cell;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::boruvka::{ZERO_ROUNDS, zero_phase};
use super::{MAX_ROUNDS_LIMIT, SegmentHierarchy, SegmentOutput, SegmentParams};
use crate::gpu::launch::{alloc_zeroed, blocks_for, check_frame_size, grid2d};
use crate::gpu::{GpuContext, GpuError, KernelTimer};
use crate::image::{Image, ImageView};
use crate::ops::OpError;
use crate::ops::blur::BlurGpu;
use crate::ops::blur::cpu::{pack_gray, pack_rgb};

/// Entries of the per-round counters (`ctl[0]` is the always-on gate).
const NCTL: usize = ZERO_ROUNDS as usize + 2 * MAX_ROUNDS_LIMIT as usize + 2;
/// Pixels per block of the relabel scan.
const SCAN_BLOCK: u32 = 1024;
/// Threads per block of the grid-stride kernels.
const BLOCK: u32 = 256;
/// Kernel modes (keep in sync with SEG_MODE_* in segment.cu).
const MODE_MERGE: u32 = 0;
const MODE_MIN_SIZE: u32 = 1;
const MODE_ZERO: u32 = 2;

struct Buffers {
    width: usize,
    height: usize,
    w4: CudaSlice<f32>,
    comp: CudaSlice<u32>,
    link: CudaSlice<u32>,
    size: CudaSlice<u32>,
    cint: CudaSlice<u32>,
    done: CudaSlice<u32>,
    best: CudaSlice<u64>,
    tkey: CudaSlice<u64>,
    target: CudaSlice<u32>,
    lim: CudaSlice<u64>,
    limj: CudaSlice<u64>,
    gok: CudaSlice<u32>,
    gsize: CudaSlice<u32>,
    gint: CudaSlice<u32>,
    pflag: CudaSlice<u32>,
    head: CudaSlice<u32>,
    next: CudaSlice<u32>,
    parent: CudaSlice<u32>,
    round: CudaSlice<u16>,
    minpix: CudaSlice<u32>,
    rootlabel: CudaSlice<u32>,
    labels: CudaSlice<u32>,
    blocksum: CudaSlice<u32>,
    ctl: CudaSlice<u32>,
    mctl: CudaSlice<u32>,
    info: CudaSlice<u32>,
}

/// What the last enqueue produced.
#[derive(Clone, Copy, Debug)]
struct Produced {
    width: usize,
    height: usize,
    /// Rounds enqueued per phase: zero, merge, min_size.
    caps: [u32; 3],
    /// `max_rounds` of the parameters (the `min_size` rounds are numbered after it).
    max_rounds: u32,
    /// `Some(level)` after [`SegmentGpu::enqueue_level`].
    level: Option<u32>,
}

/// Rounds that changed something, per phase, read from the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RoundsUsed {
    used: [u32; 3],
    capped: [bool; 3],
}

/// GPU Felzenszwalb segmentation with buffers for one frame size.
pub struct SegmentGpu {
    blur: BlurGpu,
    f_weights: CudaFunction,
    f_init: CudaFunction,
    f_least: CudaFunction,
    f_targets: CudaFunction,
    f_limits_pairs: CudaFunction,
    f_groups: CudaFunction,
    f_chain_link: CudaFunction,
    f_chain_flatten: CudaFunction,
    f_final: CudaFunction,
    f_minpix: CudaFunction,
    f_scan_count: CudaFunction,
    f_scan_blocks: CudaFunction,
    f_scan_label: CudaFunction,
    f_labels: CudaFunction,
    f_level_threshold: CudaFunction,
    f_level_comp: CudaFunction,
    max_blocks: u32,
    bufs: Option<Buffers>,
    produced: Option<Produced>,
    /// Rounds used by the last downloaded frame (for `adaptive_rounds`).
    hint: Cell<Option<RoundsUsed>>,
    /// Time every kernel of every round separately (many event pairs per frame).
    pub detailed_timing: bool,
}

impl std::fmt::Debug for SegmentGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentGpu").field("produced", &self.produced).finish_non_exhaustive()
    }
}

fn cfg_scan(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks_for(n, SCAN_BLOCK), 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// Region names of one round's four launches.
fn round_regions(detailed: bool, phase: u32) -> [&'static str; 4] {
    match (detailed, phase) {
        (_, MODE_MIN_SIZE) => ["segment_minsize"; 4],
        (true, _) => ["segment_minedge", "segment_merge", "segment_merge", "segment_flatten"],
        (false, MODE_ZERO) => ["segment_zero"; 4],
        (false, _) => ["segment_merge"; 4],
    }
}

impl SegmentGpu {
    /// Resolves the kernels (buffers are allocated on the first frame).
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        let f = |name: &str| gpu.function("segment", name);
        let sms = u32::try_from(gpu.info().multiprocessors.max(1)).unwrap_or(1);
        Ok(Self {
            blur: BlurGpu::new(gpu)?,
            f_weights: f("segment_weights")?,
            f_init: f("segment_init")?,
            f_least: f("segment_least")?,
            f_targets: f("segment_targets")?,
            f_limits_pairs: f("segment_limits_pairs")?,
            f_groups: f("segment_groups")?,
            f_chain_link: f("segment_chain_link")?,
            f_chain_flatten: f("segment_chain_flatten")?,
            f_final: f("segment_final")?,
            f_minpix: f("segment_minpix")?,
            f_scan_count: f("segment_scan_count")?,
            f_scan_blocks: f("segment_scan_blocks")?,
            f_scan_label: f("segment_scan_label")?,
            f_labels: f("segment_labels")?,
            f_level_threshold: f("segment_level_threshold")?,
            f_level_comp: f("segment_level_comp")?,
            max_blocks: sms * 8,
            bufs: None,
            produced: None,
            hint: Cell::new(None),
            detailed_timing: false,
        })
    }

    /// A grid-stride launch over `items` items.
    fn stride(&self, items: usize) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (blocks_for(items, BLOCK).min(self.max_blocks), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    fn ensure_buffers(&mut self, stream: &Arc<CudaStream>, width: usize, height: usize) -> Result<(), GpuError> {
        if self.bufs.as_ref().is_some_and(|b| b.width == width && b.height == height) {
            return Ok(());
        }
        self.bufs = None;
        let n = width * height;
        let a = |len: usize, what: &str| alloc_zeroed::<u32>(stream, len, what, width, height);
        let a64 = |len: usize, what: &str| alloc_zeroed::<u64>(stream, len, what, width, height);
        self.bufs = Some(Buffers {
            width,
            height,
            w4: alloc_zeroed::<f32>(stream, 4 * n, "segment edge weights", width, height)?,
            comp: a(n, "segment components")?,
            link: a(n, "segment links")?,
            size: a(n, "segment sizes")?,
            cint: a(n, "segment internal differences")?,
            done: a(n, "segment done flags")?,
            best: a64(n, "segment least edges")?,
            tkey: a64(n, "segment target keys")?,
            target: a(n, "segment targets")?,
            lim: a64(n, "segment limits")?,
            limj: a64(n, "segment joiner limits")?,
            gok: a(n, "segment group flags")?,
            gsize: a(n, "segment group sizes")?,
            gint: a(n, "segment group Int")?,
            pflag: a(n, "segment pair flags")?,
            head: a(n, "segment joiner heads")?,
            next: a(n, "segment joiner links")?,
            parent: a(n, "segment hierarchy parents")?,
            round: alloc_zeroed::<u16>(stream, n, "segment hierarchy rounds", width, height)?,
            minpix: a(n, "segment first pixels")?,
            rootlabel: a(n, "segment root labels")?,
            labels: a(n, "segment labels")?,
            blocksum: a(blocks_for(n, SCAN_BLOCK) as usize, "segment scan blocks")?,
            ctl: a(NCTL, "segment round events")?,
            mctl: a(NCTL, "segment round merges")?,
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

    /// Round caps for this frame: the parameters, or the last frame's use plus a margin.
    fn caps(&self, params: &SegmentParams, n: usize) -> [u32; 3] {
        let zero = if zero_phase(params, n) { ZERO_ROUNDS } else { 0 };
        let ms = if params.min_size > 1 { params.max_min_size_rounds } else { 0 };
        let full = [zero, params.max_rounds, ms];
        match self.hint.get().filter(|_| params.adaptive_rounds) {
            None => full,
            Some(h) => {
                let mut c = [0; 3];
                for i in 0..3 {
                    let want = if h.capped[i] { h.used[i].saturating_mul(2) } else { h.used[i] + h.used[i] / 4 + 4 };
                    c[i] = want.min(full[i]);
                }
                c
            }
        }
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
        let caps = self.caps(params, n);
        self.produced = Some(Produced { width, height, caps, max_rounds: params.max_rounds, level: None });
        if n == 0 {
            return Ok(());
        }
        let (w, h, c, nn) = (width as u32, height as u32, channels as u32, n as u32);
        let nctl = NCTL as u32;
        let k = params.k_f32();
        let min_size = params.min_size as u32;
        let init_cfg = self.stride(n.max(NCTL));
        let pix = self.stride(n);
        let detailed = self.detailed_timing;
        {
            let (Some(b), Some(smooth)) = (self.bufs.as_mut(), self.blur.output()) else { return Ok(()) };
            let (f_init, f_weights) = (&self.f_init, &self.f_weights);
            timer.time(stream, "segment_graph", || {
                let mut l = stream.launch_builder(f_init);
                l.arg(&mut b.comp).arg(&mut b.link).arg(&mut b.size).arg(&mut b.cint).arg(&mut b.done);
                l.arg(&mut b.best).arg(&mut b.target).arg(&mut b.gok).arg(&mut b.pflag).arg(&mut b.head);
                l.arg(&mut b.parent).arg(&mut b.round).arg(&mut b.ctl).arg(&mut b.mctl).arg(&nn).arg(&nctl);
                // SAFETY: grid-stride over max(n, NCTL); each array is written only below its
                // own length (n or NCTL), checked in the kernel.
                unsafe { l.launch(init_cfg) }?;
                let mut l = stream.launch_builder(f_weights);
                l.arg(smooth).arg(&mut b.w4).arg(&w).arg(&h).arg(&c);
                // SAFETY: one thread per pixel (bounded in the kernel); smooth holds n * channels
                // floats (this frame's blur), w4 holds 4n.
                unsafe { l.launch(grid2d(width, height, 32, 8)) }?;
                Ok(())
            })?;
        }
        let z = ZERO_ROUNDS;
        let phases = [(MODE_ZERO, 1u32, caps[0]), (MODE_MERGE, z + 1, caps[1]), (MODE_MIN_SIZE, z + params.max_rounds + 1, caps[2])];
        for (mode, first, count) in phases {
            for i in 0..count {
                let r = first + i;
                let gate = if i == 0 { 0 } else { r - 1 };
                self.enqueue_round(stream, timer, mode, r, gate, k, min_size, pix, detailed)?;
            }
        }
        let Some(b) = self.bufs.as_mut() else { return Ok(()) };
        let f_final = &self.f_final;
        timer.time(stream, "segment_relabel", || {
            let mut l = stream.launch_builder(f_final);
            l.arg(&mut b.comp).arg(&b.link).arg(&mut b.minpix).arg(&nn);
            // SAFETY: grid-stride over pixels < n; link is indexed by roots < n.
            unsafe { l.launch(pix) }?;
            Ok(())
        })?;
        self.enqueue_numbering(stream, timer)
    }

    /// One round of `mode` with global number `r`, gated on `ctl[gate]`.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_round(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        mode: u32,
        r: u32,
        gate: u32,
        k: f32,
        min_size: u32,
        pix: LaunchConfig,
        detailed: bool,
    ) -> Result<(), OpError> {
        let Some(b) = self.bufs.as_mut() else { return Ok(()) };
        let (w, h) = (b.width as u32, b.height as u32);
        let nn = w * h;
        let names = round_regions(detailed, mode);
        // 1. Least edges.
        let f_least = &self.f_least;
        timer.time(stream, names[0], || {
            let mut l = stream.launch_builder(f_least);
            l.arg(&mut b.comp).arg(&b.link).arg(&b.w4).arg(&mut b.best).arg(&b.size).arg(&b.done);
            l.arg(&w).arg(&h).arg(&mode).arg(&min_size).arg(&b.ctl).arg(&gate);
            // SAFETY: grid-stride over pixels < n; neighbours are bounds-checked; comp/link hold
            // roots < n; best/size/done are indexed by roots.
            unsafe { l.launch(pix) }?;
            Ok(())
        })?;
        // 2. Targets.
        let f_targets = &self.f_targets;
        timer.time(stream, names[1], || {
            let mut l = stream.launch_builder(f_targets);
            l.arg(&b.comp).arg(&mut b.best).arg(&mut b.tkey).arg(&mut b.target).arg(&mut b.link).arg(&mut b.gok);
            l.arg(&mut b.lim).arg(&mut b.limj).arg(&mut b.head).arg(&b.size).arg(&mut b.done).arg(&w).arg(&nn);
            l.arg(&mode).arg(&min_size).arg(&mut b.ctl).arg(&mut b.mctl).arg(&gate).arg(&r);
            // SAFETY: grid-stride over indices < n; edge ids in best decode to pixels < n;
            // r < NCTL (validated round caps).
            unsafe { l.launch(pix) }?;
            Ok(())
        })?;
        if mode == MODE_MERGE {
            let f_lp = &self.f_limits_pairs;
            timer.time(stream, names[2], || {
                let mut l = stream.launch_builder(f_lp);
                l.arg(&b.comp).arg(&b.w4).arg(&b.done).arg(&b.target).arg(&b.tkey).arg(&mut b.lim).arg(&mut b.limj);
                l.arg(&mut b.link).arg(&mut b.gok).arg(&mut b.gsize).arg(&mut b.gint).arg(&mut b.pflag);
                l.arg(&mut b.head).arg(&mut b.next).arg(&b.size).arg(&b.cint).arg(&mut b.parent).arg(&mut b.round);
                l.arg(&w).arg(&h).arg(&k).arg(&mut b.ctl).arg(&mut b.mctl).arg(&gate).arg(&r);
                // SAFETY: grid-stride over pixels < n; targets are roots < n; joiner lists are
                // threaded through `next` (one entry per root).
                unsafe { l.launch(pix) }?;
                Ok(())
            })?;
            let f_groups = &self.f_groups;
            timer.time(stream, names[3], || {
                let mut l = stream.launch_builder(f_groups);
                l.arg(&b.comp).arg(&mut b.link).arg(&mut b.done).arg(&mut b.pflag).arg(&b.gok).arg(&b.target);
                l.arg(&b.tkey).arg(&b.lim).arg(&b.limj).arg(&b.head).arg(&b.next).arg(&b.gsize).arg(&b.gint);
                l.arg(&mut b.size).arg(&mut b.cint).arg(&mut b.parent).arg(&mut b.round).arg(&nn).arg(&k);
                l.arg(&mut b.ctl).arg(&mut b.mctl).arg(&gate).arg(&r);
                // SAFETY: grid-stride over roots < n; each joiner belongs to one list, so each
                // root's link/done/size is written by one thread.
                unsafe { l.launch(pix) }?;
                Ok(())
            })?;
        } else {
            let f_cl = &self.f_chain_link;
            timer.time(stream, names[2], || {
                let mut l = stream.launch_builder(f_cl);
                l.arg(&b.comp).arg(&b.target).arg(&mut b.link).arg(&nn).arg(&mut b.ctl).arg(&mut b.mctl);
                l.arg(&gate).arg(&r);
                // SAFETY: grid-stride over roots < n.
                unsafe { l.launch(pix) }?;
                Ok(())
            })?;
            let f_cf = &self.f_chain_flatten;
            timer.time(stream, names[3], || {
                let mut l = stream.launch_builder(f_cf);
                l.arg(&b.comp).arg(&mut b.link).arg(&mut b.size).arg(&mut b.parent).arg(&mut b.round).arg(&nn);
                l.arg(&b.ctl).arg(&gate).arg(&r);
                // SAFETY: grid-stride over roots < n; links form a forest over roots.
                unsafe { l.launch(pix) }?;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Raster-order numbering of `comp` (minpix must hold `SEG_NONE`).
    fn enqueue_numbering(&mut self, stream: &Arc<CudaStream>, timer: &mut KernelTimer) -> Result<(), OpError> {
        let Some(b) = self.bufs.as_mut() else { return Ok(()) };
        let n = b.width * b.height;
        let (w, nn) = (b.width as u32, n as u32);
        let nblocks = blocks_for(n, SCAN_BLOCK);
        let pix = LaunchConfig {
            grid_dim: (blocks_for(n, BLOCK).min(self.max_blocks), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let (f_minpix, f_sc, f_sb, f_sl, f_labels) =
            (&self.f_minpix, &self.f_scan_count, &self.f_scan_blocks, &self.f_scan_label, &self.f_labels);
        timer.time(stream, "segment_relabel", || {
            let mut l = stream.launch_builder(f_minpix);
            l.arg(&b.comp).arg(&mut b.minpix).arg(&w).arg(&nn);
            // SAFETY: grid-stride over pixels < n; comp values are roots < n.
            unsafe { l.launch(pix) }?;
            let mut l = stream.launch_builder(f_sc);
            l.arg(&b.comp).arg(&b.minpix).arg(&mut b.blocksum).arg(&nn);
            // SAFETY: SCAN_BLOCK threads per block, one block sum each (blocksum has nblocks).
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = stream.launch_builder(f_sb);
            l.arg(&mut b.blocksum).arg(&nblocks).arg(&mut b.info);
            // SAFETY: a single block scanning nblocks entries.
            unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 }) }?;
            let mut l = stream.launch_builder(f_sl);
            l.arg(&b.comp).arg(&b.minpix).arg(&b.blocksum).arg(&mut b.rootlabel).arg(&nn);
            // SAFETY: as scan_count; rootlabel is indexed by roots < n.
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = stream.launch_builder(f_labels);
            l.arg(&b.comp).arg(&b.rootlabel).arg(&mut b.labels).arg(&nn);
            // SAFETY: grid-stride over pixels < n.
            unsafe { l.launch(pix) }?;
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
        let total = NCTL as u32 - 1;
        let pix = self.stride(n);
        let Some(b) = self.bufs.as_mut().filter(|_| n > 0) else { return Ok(()) };
        let nn = n as u32;
        let (f_lt, f_lc) = (&self.f_level_threshold, &self.f_level_comp);
        timer.time(stream, "segment_relabel", || {
            let mut l = stream.launch_builder(f_lt);
            l.arg(&b.mctl).arg(&total).arg(&level).arg(&mut b.info);
            // SAFETY: one thread reads mctl[1..=total] (total < NCTL) and writes info[1].
            unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }?;
            let mut l = stream.launch_builder(f_lc);
            l.arg(&mut b.comp).arg(&b.parent).arg(&b.round).arg(&mut b.minpix).arg(&b.info).arg(&nn);
            // SAFETY: grid-stride over pixels < n; parent chains end at never-absorbed roots.
            unsafe { l.launch(pix) }?;
            Ok(())
        })?;
        self.enqueue_numbering(stream, timer)
    }

    /// Levels (rounds that merged) and per-phase use from the counters.
    fn read_rounds(ctl: &[u32], mctl: &[u32], prod: &Produced, max_rounds: u32) -> (Vec<u16>, RoundsUsed) {
        let z = ZERO_ROUNDS;
        let firsts = [1, z + 1, z + max_rounds + 1];
        let mut used = RoundsUsed::default();
        let mut levels = Vec::new();
        for (ph, &first) in firsts.iter().enumerate() {
            let cap = prod.caps[ph];
            for i in 0..cap {
                let r = (first + i) as usize;
                if ctl.get(r).is_some_and(|&c| c > 0) {
                    used.used[ph] = i + 1;
                }
                if mctl.get(r).is_some_and(|&c| c > 0) {
                    levels.push(r as u16);
                }
            }
            used.capped[ph] = cap > 0 && ctl.get((first + cap - 1) as usize).is_some_and(|&c| c > 0);
        }
        (levels, used)
    }

    /// Blocking readback of the last enqueued frame (or level).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<SegmentOutput, OpError> {
        self.download_with(stream, None)
    }

    fn download_with(&self, stream: &Arc<CudaStream>, hier: Option<&mut Option<SegmentHierarchy>>) -> Result<SegmentOutput, OpError> {
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
        let mctl = stream.clone_dtoh(&b.mctl)?;
        let info = stream.clone_dtoh(&b.info)?;
        let labels = stream.clone_dtoh(&b.labels.slice(0..n))?;
        stream.synchronize()?;
        let max_rounds = p.max_rounds;
        let (levels, used) = Self::read_rounds(&ctl, &mctl, &p, max_rounds);
        self.hint.set(Some(used));
        let ms_first = ZERO_ROUNDS + max_rounds + 1;
        let ms = levels.iter().filter(|&&r| u32::from(r) >= ms_first).count() as u32;
        let top = levels.len() as u32;
        if let Some(hs) = hier {
            let parent = stream.clone_dtoh(&b.parent.slice(0..n))?;
            let round = stream.clone_dtoh(&b.round.slice(0..n))?;
            stream.synchronize()?;
            *hs = Some(SegmentHierarchy { width: p.width, height: p.height, parent, round, level_rounds: levels.clone() });
        }
        Ok(SegmentOutput {
            labels: Image::from_vec(p.width, p.height, labels)?,
            segment_count: info[0] as usize,
            rounds: top - ms,
            min_size_rounds: ms,
            capped: used.capped[1] || used.capped[2],
            level: p.level.map_or(top, |l| l.min(top)),
        })
    }

    /// Blocking readback of the labels and the whole hierarchy of the last segmented frame.
    pub fn download_hierarchy(&self, stream: &Arc<CudaStream>) -> Result<(SegmentOutput, SegmentHierarchy), OpError> {
        let mut h = None;
        let out = self.download_with(stream, Some(&mut h))?;
        let p = self.produced.map_or((0, 0), |p| (p.width, p.height));
        let hier = h.unwrap_or(SegmentHierarchy { width: p.0, height: p.1, parent: Vec::new(), round: Vec::new(), level_rounds: Vec::new() });
        Ok((out, hier))
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
    fn rounds_from_counters() {
        let prod = Produced { width: 1, height: 1, caps: [32, 4, 3], max_rounds: 4, level: None };
        let mut ctl = vec![0u32; NCTL];
        let mut mctl = vec![0u32; NCTL];
        ctl[0] = 1;
        for (r, e, m) in [(1, 5, 5), (2, 1, 1), (33, 9, 3), (34, 2, 0), (37, 1, 1)] {
            ctl[r] = e;
            mctl[r] = m;
        }
        let (lv, used) = SegmentGpu::read_rounds(&ctl, &mctl, &prod, 4);
        assert_eq!(lv, vec![1, 2, 33, 37]);
        assert_eq!(used.used, [2, 2, 1]);
        assert_eq!(used.capped, [false, false, false]);
        ctl[36] = 1;
        assert!(SegmentGpu::read_rounds(&ctl, &mctl, &prod, 4).1.capped[1]);
    }
}
