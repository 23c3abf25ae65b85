//! Enqueueing a frame: the edge graph, then the rounds either captured once as a CUDA graph and
//! replayed, or launched directly (first frames, detailed timing); merge round 1 in tiles; the
//! per-round profile stamps.

use super::*;

impl SegmentGpu {
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

    /// Frames that needed more rounds than their adaptive caps and were run again before their
    /// download (see [`SegmentParams::adaptive_rounds`]).
    #[must_use]
    pub fn reruns(&self) -> u64 {
        self.reruns.get()
    }

    /// Round caps for this frame: the parameters (`false`), or the most rounds recent frames
    /// wanted launched (the rounds they used plus [`ADAPTIVE_MARGIN`], or with
    /// [`SegmentGpu::finisher`] the rounds before the hand-off), the merge phase's rounded up to
    /// [`GRAPH_ROUND_STEP`] (`true`). A phase the last frame
    /// ran to its caps (only the parameters' caps stay capped after a rerun) keeps them.
    pub(super) fn caps(&self, params: &SegmentParams) -> ([u32; 2], bool) {
        let full = full_caps(params);
        match self.hint.get().filter(|_| params.adaptive_rounds) {
            None => (full, false),
            Some(h) => {
                let recent = self.recent.borrow();
                let c = std::array::from_fn(|i| {
                    let most = recent.iter().map(|u| u.rounds[i]).max().unwrap_or(h.used[i] + ADAPTIVE_MARGIN);
                    let want = if h.capped[i] { full[i] } else { most };
                    // min_size phases take 1-2 rounds (sinks): rounding them up to the step would
                    // launch 2-3 empty rounds (~20 us each at 1080p) on every frame.
                    let step = if i == 0 { self.round_step } else { 1 };
                    want.div_ceil(step).saturating_mul(step).min(full[i])
                });
                (c, true)
            }
        }
    }

    /// [`Body::giant`] for this frame: the rounds where any recent frame had a giant tree, or
    /// every round without adaptive caps or a history (a new size, parameters, the first frame).
    pub(super) fn giant_rounds(&self, adaptive: bool) -> [u64; 2] {
        let recent = self.recent.borrow();
        if !adaptive || recent.is_empty() || self.giant_blocks == 0 {
            return [u64::MAX; 2];
        }
        recent.iter().fold([0; 2], |acc, u| [acc[0] | u.giant[0], acc[1] | u.giant[1]])
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
        crate::ops::blur::gpu::check_input(input, width, height, channels)?;
        self.ensure_buffers(stream, width, height)?;
        self.enqueue_graph(stream, timer, input, width, height, channels, params)?;
        let (caps, adaptive) = self.caps(params);
        let full = full_caps(params);
        let finish = adaptive && self.finisher;
        self.produced.set(Some(Produced { width, height, caps, finish, full, max_rounds: params.max_rounds, level: None }));
        self.last_body.set(None);
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
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
            programmatic: self.programmatic_launch && self.has_pdl,
            tiles: self.tile_pass,
            stamps: self.round_stamps,
            finish,
            full,
            giant: self.giant_rounds(adaptive),
        };
        if adaptive {
            self.last_body.set(Some(Body { caps: full_caps(params), ..body }));
        }
        if adaptive && self.use_graphs && !self.detailed_timing {
            let key = GraphKey { stream: stream.cu_stream() as usize, body };
            let replayed = {
                let mut graphs = self.graphs.borrow_mut();
                timer.time(stream, "segment_rounds", || {
                    graphs.launch(stream, key, || self.enqueue_body(stream, &mut None, &body))
                })
            };
            match replayed {
                Ok(()) => return Ok(()),
                // Nothing of the frame ran (a failed capture is ended and dropped): launch it
                // directly, and from now on (a driver without graph support fails every time).
                Err(e) => {
                    log::warn!("segmentation: CUDA graph capture or launch failed ({e}); launching kernels directly");
                    self.use_graphs = false;
                    self.graphs.borrow_mut().clear();
                }
            }
        }
        self.enqueue_body(stream, &mut Some(timer), &body)?;
        Ok(())
    }

    /// Graphs captured so far (each a new round-count bucket, parameter set or stream).
    #[must_use]
    pub fn graph_captures(&self) -> u64 {
        self.graphs.borrow().captures()
    }

    /// The frame's edge graph (weights `w4` and each pixel's edges sorted by key, `order`) from
    /// its bytes, launched before the rounds (so a frame run again starts from the same graph):
    /// `segment_blur_edges` (blur and edges in one tiled pass) when the blur's radius is at most
    /// [`FUSED_BLUR_RADIUS`], else the blur's two passes and `segment_edges` (timer regions
    /// `segment_blur` and `segment_graph`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn enqueue_graph(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        channels: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        let n = width * height;
        let Some(p) = self.bufs.as_ref().map(|b| b.p) else { return Ok(()) };
        if n == 0 {
            return Ok(());
        }
        let weights = BlurWeightsF64::new(&params.blur())?;
        let (w, h, c, eb) = (width as u32, height as u32, channels as u32, eid_bits(n));
        if weights.radius as u32 <= FUSED_BLUR_RADIUS && !self.separate_blur {
            let cfg = LaunchConfig {
                grid_dim: (w.div_ceil(FUSED_TILE.0), h.div_ceil(FUSED_TILE.1), 1),
                block_dim: (FUSED_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let inv255 = 1.0f64 / 255.0;
            timer.time(stream, "segment_graph", || {
                let mut l = stream.launch_builder(&self.f_blur_edges);
                l.arg(input).arg(&weights).arg(&p.w4).arg(&p.order).arg(&w).arg(&h).arg(&c).arg(&eb).arg(&inv255);
                // SAFETY: one block per 32x16 tile (grid above); the kernel reads input samples
                // of in-image pixels only (input holds n * channels bytes, checked by the
                // caller), radius <= SEG_GT_MAXR, and writes w4 (4n) and order (n) of its tile.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            return Ok(());
        }
        let image = crate::gpu::DeviceImage::new(stream, input, width, height, channels)?;
        self.blur.enqueue_f64_named(timer, image, &params.blur(), "segment_blur")?;
        let Some(smooth) = self.blur.output_f64().map(|s| raw(s, stream)) else { return Ok(()) };
        timer.time(stream, "segment_graph", || {
            let mut l = stream.launch_builder(&self.f_edges);
            l.arg(&smooth).arg(&p.w4).arg(&p.order).arg(&w).arg(&h).arg(&c).arg(&eb);
            // SAFETY: grid-stride over pixels < n; only in-image neighbours are read; smooth
            // holds n * channels doubles (this frame's blur), w4 holds 4n, order n.
            unsafe { l.launch(Self::stride_within(n, self.edges_grid)) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Everything after the edge graph: init, the two phases of rounds, relabelling. With
    /// `timer` `None` it only launches kernels (what a graph capture records).
    pub(super) fn enqueue_body(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        body: &Body,
    ) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let n = body.width * body.height;
        let nn = n as u32;
        let (nctl, ncounts) = (NCTL as u32, (NCOUNTS * NCTL) as u32);
        if body.stamps {
            self.stamp_labels.borrow_mut().clear();
            self.stamp(stream, "start", None)?;
        }
        // Pixels segment_init sets up (none when segment_tiles does it).
        let init_px = if body.tiles && self.init_in_tiles { 0 } else { nn };
        timed(timer, stream, "segment_init", || {
            let mut l = stream.launch_builder(&self.f_init);
            l.arg(&p.comp).arg(&p.link).arg(&p.size).arg(&p.cint).arg(&p.done).arg(&p.best).arg(&p.target);
            l.arg(&p.tree).arg(&p.tcnt).arg(&p.round).arg(&p.order).arg(&p.ctl).arg(&p.mctl).arg(&p.counts);
            l.arg(&init_px).arg(&nctl).arg(&ncounts);
            // SAFETY: grid-stride over max(init_px, NCOUNTS * NCTL); each array is written only
            // below its own length (init_px <= n, NCTL or NCOUNTS * NCTL), checked in the kernel.
            unsafe { l.launch(self.stride((init_px as usize).max(NCOUNTS * NCTL))) }?;
            Ok(())
        })?;
        if body.stamps {
            self.stamp(stream, "graph", None)?;
        }
        let k = f64::from_bits(body.k_bits);
        let min_size = body.min_size;
        let phases = [
            (MODE_MERGE, 1u32, body.caps[0], body.full[0], "segment_merge"),
            (MODE_MIN_SIZE, body.max_rounds + 1, body.caps[1], body.full[1], "segment_minsize"),
        ];
        for (slot, (mode, mut first, mut count, full, name)) in phases.into_iter().enumerate() {
            if count == 0 {
                continue;
            }
            let mut finish = if body.finish { full.saturating_sub(count) } else { 0 };
            let mut first_iter = ALL_SINGLE;
            if mode == MODE_MERGE && body.tiles {
                timed(timer, stream, "segment_tiles", || self.enqueue_tiles(stream, body))?;
                if body.stamps {
                    self.stamp(stream, "merge", Some(1))?;
                }
                (first, count, first_iter) = (2, count - 1, ALL);
                if count == 0 {
                    finish = 0;  // segment_finish continues from the lists of a launched round
                }
            }
            let ph = Phase {
                mode,
                first,
                first_iter,
                count,
                k,
                min_size,
                programmatic: body.programmatic,
                stamps: body.stamps,
                finish,
                giant: body.giant[slot],
                info_slot: 2 + slot as u32,
            };
            match timer {
                Some(t) if self.detailed_timing => self.enqueue_phase(stream, &mut Some(&mut **t), &ph)?,
                _ => timed(timer, stream, name, || self.enqueue_phase(stream, &mut None, &ph))?,
            }
        }
        // The relabelling kernels wait for the kernel before them themselves (grid_dep_wait).
        let pdl = body.programmatic && timer.is_none();
        timed(timer, stream, "segment_relabel", || {
            let mut l = ExLaunch::new(stream, &self.f_final, pdl);
            l.arg(&p.comp).arg(&p.link).arg(&p.minpix).arg(&nn);
            // SAFETY: grid-stride over pixels < n; link chains end at roots < n.
            unsafe { l.launch(self.stride(n)) }?;
            Ok(())
        })?;
        self.enqueue_numbering(stream, timer, pdl)?;
        if body.stamps {
            self.stamp(stream, "relabel", None)?;
        }
        Ok(())
    }

    /// Round 1 of the merge phase: `segment_tiles`, blocks of a pixel a thread striding over
    /// the tiles.
    pub(super) fn enqueue_tiles(&self, stream: &Arc<CudaStream>, body: &Body) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let (w, h) = (body.width as u32, body.height as u32);
        let eb = eid_bits(body.width * body.height);
        let k = f64::from_bits(body.k_bits);
        let tiles = (body.width.div_ceil(TILE_W) * body.height.div_ceil(TILE_H)) as u32;
        let (ctl, mctl) = (p.ctl, p.mctl);
        let frontier = p.counts + 4 * (C_FRONTIER * NCTL as u64 + 1);
        let mut l = stream.launch_builder(&self.f_tiles);
        l.arg(&p.comp).arg(&p.link).arg(&p.size).arg(&p.cint).arg(&p.done).arg(&p.round).arg(&p.w4).arg(&p.order);
        l.arg(&w).arg(&h).arg(&eb).arg(&k).arg(&ctl).arg(&mctl).arg(&frontier);
        let init = u32::from(self.init_in_tiles);
        l.arg(&p.best).arg(&p.target).arg(&p.tree).arg(&p.tcnt).arg(&init);
        // The roots it leaves: round 2's input root list (rlist[1], count of round 1).
        let (roots, rcount) = (u32::from(self.tile_roots), p.counts + 4 * (C_ROOTS * NCTL as u64 + 1));
        l.arg(&p.rlist[1]).arg(&rcount).arg(&roots);
        // Blocks stride over the tiles (the kernel counts them from its own SEG_TILE_W / _H).
        let grid = tiles.min(self.tiles_grid).max(1);
        let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (TILE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: blocks of SEG_TILE_PX threads stride over the SEG_TILE_W x SEG_TILE_H tiles,
        // each tile writing only its own pixels (< n; the per-pixel arrays and the root list
        // hold n entries, a root at most once) and
        // reading order (n) and w4 (4n) at in-image pixels and edges; ctl/mctl have NCTL > 1
        // entries, counts NCOUNTS * NCTL.
        unsafe { l.launch(cfg) }?;
        Ok(())
    }

    /// Launches `segment_stamp` (the next entry of the stamp buffer) after what `stream` holds;
    /// `round`: the global number of the round it follows.
    pub(super) fn stamp(&self, stream: &Arc<CudaStream>, label: &'static str, round: Option<u32>) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let mut labels = self.stamp_labels.borrow_mut();
        let i = labels.len() as u32;
        if i as usize >= NCTL + 4 {
            return Ok(());
        }
        let mut l = stream.launch_builder(&self.f_stamp);
        l.arg(&b.p.stamps).arg(&i);
        // SAFETY: one thread writes stamps[i], i < NCTL + 4 (the buffer's length).
        unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 }) }?;
        labels.push((label, round));
        Ok(())
    }

    /// Development diagnostic ([`SegmentGpu::round_stamps`] on): each interval of the last frame
    /// (setup, every round, relabelling) in microseconds, with the round's list counts (frontier,
    /// active roots, trees, members, small, large, cursor, tiny, mid-size; zeros elsewhere).
    /// Labels: `graph`, `merge N`, `min_size N` (N the global round number), `relabel`.
    pub fn round_profile(&self, stream: &Arc<CudaStream>) -> Result<Vec<(String, f64, Vec<u32>)>, OpError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(Vec::new()) };
        let labels = self.stamp_labels.borrow().clone();
        let t = stream.clone_dtoh(&b.stamps)?;
        let counts = stream.clone_dtoh(&b.counts)?;
        stream.synchronize()?;
        let mut out = Vec::new();
        for i in 1..labels.len() {
            let us = t[i].wrapping_sub(t[i - 1]) as f64 / 1e3;
            let (label, round) = labels[i];
            let (name, c) = match round.map(|r| r as usize).filter(|&r| r < NCTL) {
                Some(r) => (format!("{label} {r}"), (0..NCOUNTS).map(|k| counts[k * NCTL + r]).collect()),
                None => (label.to_owned(), vec![0; NCOUNTS]),
            };
            out.push((name, us, c));
        }
        Ok(out)
    }
}
