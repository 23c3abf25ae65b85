//! Enqueueing a frame: the edge graph, then everything after it ([`Body`]) either captured once
//! as a CUDA graph and replayed, or launched directly (first frames, per-kernel timing): the
//! round counters' reset, merge round 1 in tiles, the two phases of rounds, the relabelling;
//! and (the `profiling` feature) the round profile's stamps.

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};

use super::history::{Produced, full_caps};
use super::layout::{
    C_FRONTIER, C_ROOTS, FUSED_BLUR_RADIUS, FUSED_THREADS, FUSED_TILE, MODE_MERGE, MODE_MIN_SIZE,
    NCOUNTS, NCTL, TILE_THREADS,
};
use super::rounds::Phase;
use super::setup::stride_within;
use super::{SegmentationGpu, SegmentationParams, TILE_H, TILE_W, eid_bits};
use crate::gpu::launch::ExLaunch;
#[cfg(feature = "profiling")]
use crate::gpu::launch::one_block;
use crate::gpu::{DeviceImage, GpuError, KernelTimer};
use crate::ops::OpError;
use crate::ops::blur::gpu::BlurWeightsF64;

/// What one frame's launch sequence after the edge graph depends on (the key of its captured
/// graph, and what a frame run again repeats).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Body {
    pub width: usize,
    pub height: usize,
    /// Device address of the first buffer (identifies this allocation of the buffers).
    pub comp: u64,
    pub caps: [u32; 2],
    /// `k = scale / 255` as bits (compared exactly).
    pub k_bits: u64,
    pub min_size: u32,
    pub max_rounds: u32,
    /// Programmatic dependent launches.
    pub pdl: bool,
    /// The round profile's stamps.
    #[cfg(feature = "profiling")]
    pub stamps: bool,
    /// The finisher after the launched rounds of each phase, up to `full` rounds.
    pub finish: bool,
    pub full: [u32; 2],
    /// Per phase, the rounds that launch `segmentation_cat_giant` (bit i: the phase's round i + 1;
    /// rounds past 64 always): those where recent frames had a giant tree, every round before
    /// there is a history. Either way exact: without it the large trees' kernel walks them.
    pub giant: [u64; 2],
}

/// A captured frame: its body and the stream it replays on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct GraphKey {
    pub stream: usize,
    pub body: Body,
}

/// Runs `f` inside a timer region when `timer` is given.
pub(super) fn timed(
    timer: &mut Option<&mut KernelTimer>,
    stream: &Arc<CudaStream>,
    name: &'static str,
    f: impl FnOnce() -> Result<(), GpuError>,
) -> Result<(), GpuError> {
    match timer {
        Some(t) => t.time(stream, name, f),
        None => f(),
    }
}

impl SegmentationGpu {
    /// Enqueues the segmentation of `input` (1 or 3 interleaved channels) on its stream.
    /// Nothing is read back: [`SegmentationGpu::download`] (or [`SegmentationGpu::download_summary`])
    /// waits for the frame and runs it again first if it needed more rounds than its adaptive
    /// caps.
    pub fn enqueue(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, u8>,
        params: &SegmentationParams,
    ) -> Result<(), OpError> {
        let DeviceImage {
            stream,
            width,
            height,
            channels,
            ..
        } = input;
        params.validate()?;
        if channels != 1 && channels != 3 {
            return Err(OpError::Unsupported(format!(
                "segmentation of {channels} channels (1 or 3)"
            )));
        }
        crate::gpu::launch::check_frame_size(width * channels, height)?;
        let n = width * height;
        if n >= (1 << 30) {
            return Err(OpError::Unsupported(format!(
                "{width}x{height}: edge ids need 4 * pixels < 2^32"
            )));
        }
        crate::ops::blur::gpu::check_input(input.data, width, height, channels)?;
        self.ensure_buffers(stream, width, height)?;
        self.enqueue_edge_graph(timer, input, params)?;
        let (caps, adaptive) = self.history.caps(params, &self.tuning);
        let full = full_caps(params);
        let history = &self.history;
        history.produced.set(Some(Produced {
            width,
            height,
            caps,
            finish: adaptive,
            full,
            max_rounds: params.max_rounds,
            level: None,
        }));
        history.last_body.set(None);
        let Some(b) = self.buffers.as_ref() else {
            return Ok(());
        };
        if n == 0 {
            return Ok(());
        }
        let body = Body {
            width,
            height,
            comp: b.p.comp,
            caps,
            k_bits: params.k().to_bits(),
            min_size: params.min_size as u32,
            max_rounds: params.max_rounds,
            pdl: self.launch.pdl,
            #[cfg(feature = "profiling")]
            stamps: self.profiling.round_stamps,
            finish: adaptive,
            full,
            giant: history.giant_rounds(adaptive, self.launch.giant_blocks > 0),
        };
        if adaptive {
            history.last_body.set(Some(Body { caps: full, ..body }));
        }
        let graphs = adaptive && self.tuning.graphs && !history.graphs_failed.get();
        // Per-kernel timing launches every kernel directly (its events between them).
        #[cfg(feature = "profiling")]
        let graphs = graphs && !self.profiling.per_kernel_timing;
        if graphs {
            let key = GraphKey {
                stream: stream.cu_stream() as usize,
                body,
            };
            let replayed = {
                let mut graphs = history.graphs.borrow_mut();
                timer.time(stream, "segmentation_rounds", || {
                    graphs.launch(stream, key, || self.enqueue_body(stream, &mut None, &body))
                })
            };
            match replayed {
                Ok(()) => return Ok(()),
                // Nothing of the frame ran (a failed capture is ended and dropped): launch it
                // directly, and from now on (a driver without graph support fails every time).
                Err(e) => {
                    log::warn!(
                        "segmentation: CUDA graph capture or launch failed ({e}); launching kernels directly"
                    );
                    history.graphs_failed.set(true);
                    history.graphs.borrow_mut().clear();
                }
            }
        }
        self.enqueue_body(stream, &mut Some(timer), &body)?;
        Ok(())
    }

    /// The frame's edge graph (weights `w4` and each pixel's edges sorted by key, `order`) from
    /// its bytes, launched before the rounds (so a frame run again starts from the same graph):
    /// `segmentation_blur_edges` (blur and edges in one tiled pass) when the blur's radius is at most
    /// [`FUSED_BLUR_RADIUS`], else the blur's two passes and `segmentation_edges` (timer regions
    /// `segment_blur` and `segment_graph`).
    fn enqueue_edge_graph(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, u8>,
        params: &SegmentationParams,
    ) -> Result<(), OpError> {
        let DeviceImage {
            stream,
            data,
            width,
            height,
            channels,
        } = input;
        let n = width * height;
        let Some(p) = self.buffers.as_ref().map(|b| b.p) else {
            return Ok(());
        };
        if n == 0 {
            return Ok(());
        }
        let weights = BlurWeightsF64::new(&params.blur())?;
        let (w, h, c, eb) = (width as u32, height as u32, channels as u32, eid_bits(n));
        if weights.radius as u32 <= FUSED_BLUR_RADIUS {
            let cfg = LaunchConfig {
                grid_dim: (w.div_ceil(FUSED_TILE.0), h.div_ceil(FUSED_TILE.1), 1),
                block_dim: (FUSED_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let inv255 = 1.0f64 / 255.0;
            timer.time(stream, "segmentation_graph", || {
                let mut l = stream.launch_builder(&self.kernels.blur_edges);
                l.arg(data)
                    .arg(&weights)
                    .arg(&p.w4)
                    .arg(&p.order)
                    .arg(&w)
                    .arg(&h)
                    .arg(&c)
                    .arg(&eb)
                    .arg(&inv255);
                // SAFETY: one block per 32x16 tile (grid above); the kernel reads input samples
                // of in-image pixels only (input holds n * channels bytes, checked by the
                // caller), radius <= SEG_GT_MAXR, and writes w4 (4n) and order (n) of its tile.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            return Ok(());
        }
        self.blur
            .enqueue_f64_named(timer, input, &params.blur(), "segment_blur")?;
        let Some(smooth) = self
            .blur
            .output_f64()
            .map(|s| super::buffers::raw(s, stream))
        else {
            return Ok(());
        };
        timer.time(stream, "segmentation_graph", || {
            let mut l = stream.launch_builder(&self.kernels.edges);
            l.arg(&smooth)
                .arg(&p.w4)
                .arg(&p.order)
                .arg(&w)
                .arg(&h)
                .arg(&c)
                .arg(&eb);
            // SAFETY: grid-stride over pixels < n; only in-image neighbours are read; smooth
            // holds n * channels doubles (this frame's blur), w4 holds 4n, order n.
            unsafe { l.launch(stride_within(n, self.launch.edges_grid)) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Everything after the edge graph: the counters' reset, the two phases of rounds (merge
    /// round 1 in tiles), relabelling. With `timer` `None` it only launches kernels (what a
    /// graph capture records).
    pub(super) fn enqueue_body(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        body: &Body,
    ) -> Result<(), GpuError> {
        let Some(b) = self.buffers.as_ref() else {
            return Ok(());
        };
        let p = b.p;
        let n = body.width * body.height;
        let nn = n as u32;
        let (nctl, ncounts) = (NCTL as u32, (NCOUNTS * NCTL) as u32);
        #[cfg(feature = "profiling")]
        if body.stamps {
            self.history.stamp_labels.borrow_mut().clear();
            self.stamp(stream, "start", None)?;
        }
        timed(timer, stream, "segmentation_init", || {
            let mut l = stream.launch_builder(&self.kernels.init);
            l.arg(&p.ctl)
                .arg(&p.mctl)
                .arg(&p.counts)
                .arg(&nctl)
                .arg(&ncounts);
            // SAFETY: grid-stride over NCOUNTS * NCTL; each array is written only below its own
            // length (NCTL or NCOUNTS * NCTL), checked in the kernel.
            unsafe { l.launch(self.launch.stride(NCOUNTS * NCTL)) }?;
            Ok(())
        })?;
        #[cfg(feature = "profiling")]
        if body.stamps {
            self.stamp(stream, "graph", None)?;
        }
        let k = f64::from_bits(body.k_bits);
        let phases = [
            (
                MODE_MERGE,
                1u32,
                body.caps[0],
                body.full[0],
                "segment_merge",
            ),
            (
                MODE_MIN_SIZE,
                body.max_rounds + 1,
                body.caps[1],
                body.full[1],
                "segment_minsize",
            ),
        ];
        for (slot, (mode, mut first, mut count, full, name)) in phases.into_iter().enumerate() {
            if count == 0 {
                continue;
            }
            let mut finish = if body.finish {
                full.saturating_sub(count)
            } else {
                0
            };
            if mode == MODE_MERGE {
                // Merge round 1 is segmentation_tiles; the launched merge rounds start at 2.
                timed(timer, stream, "segmentation_tiles", || {
                    self.enqueue_tiles(stream, body)
                })?;
                #[cfg(feature = "profiling")]
                if body.stamps {
                    self.stamp(stream, "merge", Some(1))?;
                }
                (first, count) = (2, count - 1);
                if count == 0 {
                    finish = 0; // the finisher continues from the lists of a launched round
                }
            }
            let ph = Phase {
                mode,
                first,
                count,
                k,
                min_size: body.min_size,
                pdl: body.pdl,
                #[cfg(feature = "profiling")]
                stamps: body.stamps,
                finish,
                giant: body.giant[slot],
                info_slot: 2 + slot as u32,
            };
            // Per-kernel timing: a timer region for every launch of the phase.
            #[cfg(feature = "profiling")]
            if self.profiling.per_kernel_timing
                && let Some(t) = timer
            {
                self.enqueue_phase(stream, &mut Some(&mut **t), &ph)?;
                continue;
            }
            timed(timer, stream, name, || {
                self.enqueue_phase(stream, &mut None, &ph)
            })?;
        }
        // The relabelling kernels wait for the kernel before them themselves (grid_dep_wait).
        let pdl = body.pdl && timer.is_none();
        timed(timer, stream, "segmentation_relabel", || {
            let mut l = ExLaunch::new(stream, &self.kernels.final_roots, pdl);
            l.arg(&p.comp).arg(&p.link).arg(&p.minpix).arg(&nn);
            // SAFETY: grid-stride over pixels < n; link chains end at roots < n.
            unsafe { l.launch(self.launch.stride(n)) }?;
            Ok(())
        })?;
        self.enqueue_numbering(stream, timer, pdl)?;
        #[cfg(feature = "profiling")]
        if body.stamps {
            self.stamp(stream, "relabel", None)?;
        }
        Ok(())
    }

    /// Round 1 of the merge phase: `segmentation_tiles`, blocks of a pixel a thread striding over
    /// the tiles; it sets up every pixel's words as it reads them and lists the roots it leaves
    /// for round 2.
    fn enqueue_tiles(&self, stream: &Arc<CudaStream>, body: &Body) -> Result<(), GpuError> {
        let Some(b) = self.buffers.as_ref() else {
            return Ok(());
        };
        let p = b.p;
        let (w, h) = (body.width as u32, body.height as u32);
        let eb = eid_bits(body.width * body.height);
        let k = f64::from_bits(body.k_bits);
        let tiles = (body.width.div_ceil(TILE_W) * body.height.div_ceil(TILE_H)) as u32;
        let (ctl, mctl) = (p.ctl, p.mctl);
        let frontier = p.counts + 4 * (C_FRONTIER * NCTL as u64 + 1);
        let mut l = stream.launch_builder(&self.kernels.tiles);
        l.arg(&p.comp)
            .arg(&p.link)
            .arg(&p.size)
            .arg(&p.cint)
            .arg(&p.done)
            .arg(&p.round)
            .arg(&p.w4)
            .arg(&p.order);
        l.arg(&w)
            .arg(&h)
            .arg(&eb)
            .arg(&k)
            .arg(&ctl)
            .arg(&mctl)
            .arg(&frontier);
        l.arg(&p.best).arg(&p.target).arg(&p.tree).arg(&p.tcnt);
        // The roots it leaves: round 2's input root list (rlist[1], count of round 1).
        let rcount = p.counts + 4 * (C_ROOTS * NCTL as u64 + 1);
        l.arg(&p.rlist[1]).arg(&rcount);
        // Blocks stride over the tiles (the kernel counts them from its own SEG_TILE_W / _H).
        let grid = tiles.min(self.launch.tiles_grid).max(1);
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (TILE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: blocks of SEG_TILE_PX threads stride over the SEG_TILE_W x SEG_TILE_H tiles,
        // each tile writing only its own pixels (< n; the per-pixel arrays and the root list
        // hold n entries, a root at most once) and reading order (n) and w4 (4n) at in-image
        // pixels and edges; ctl/mctl have NCTL > 1 entries, counts NCOUNTS * NCTL.
        unsafe { l.launch(cfg) }?;
        Ok(())
    }

    /// Launches `segmentation_stamp` (the next entry of the stamp buffer) after what `stream` holds;
    /// `round`: the global number of the round it follows.
    #[cfg(feature = "profiling")]
    pub(super) fn stamp(
        &self,
        stream: &Arc<CudaStream>,
        label: &'static str,
        round: Option<u32>,
    ) -> Result<(), GpuError> {
        let Some(b) = self.buffers.as_ref() else {
            return Ok(());
        };
        let mut labels = self.history.stamp_labels.borrow_mut();
        let i = labels.len() as u32;
        if i as usize >= NCTL + 4 {
            return Ok(());
        }
        let mut l = stream.launch_builder(&self.kernels.stamp);
        l.arg(&b.stamps_ptr).arg(&i);
        // SAFETY: one thread writes stamps[i], i < NCTL + 4 (the buffer's length).
        unsafe { l.launch(one_block(1)) }?;
        labels.push((label, round));
        Ok(())
    }

    /// With [`super::SegmentationProfiling::round_stamps`] (the `profiling` feature): each interval of the last frame (setup,
    /// every round, relabelling) in microseconds, with the round's list counts (frontier, active
    /// roots, trees, members, small, large, cursor, tiny, mid-size, giant; zeros elsewhere).
    /// Labels: `graph`, `merge N`, `min_size N` (N the global round number), `relabel`.
    #[cfg(feature = "profiling")]
    pub fn round_profile(
        &self,
        stream: &Arc<CudaStream>,
    ) -> Result<Vec<(String, f64, Vec<u32>)>, OpError> {
        let Some(b) = self.buffers.as_ref() else {
            return Ok(Vec::new());
        };
        let labels = self.history.stamp_labels.borrow().clone();
        let t = stream.clone_dtoh(&b.stamps)?;
        let counts = stream.clone_dtoh(&b.counts)?;
        stream.synchronize()?;
        let mut out = Vec::new();
        for i in 1..labels.len() {
            let us = t[i].wrapping_sub(t[i - 1]) as f64 / 1e3;
            let (label, round) = labels[i];
            let (name, c) = match round.map(|r| r as usize).filter(|&r| r < NCTL) {
                Some(r) => (
                    format!("{label} {r}"),
                    (0..NCOUNTS).map(|k| counts[k * NCTL + r]).collect(),
                ),
                None => (label.to_owned(), vec![0; NCOUNTS]),
            };
            out.push((name, us, c));
        }
        Ok(out)
    }
}
