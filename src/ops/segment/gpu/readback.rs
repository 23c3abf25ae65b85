//! After the rounds: raster-order numbering, hierarchy levels, and the readback of labels and
//! counters (which set the next frame's round caps, or run the frame again with larger caps).

use super::*;

impl SegmentGpu {
    /// Raster-order numbering of `comp` (minpix must hold `SEG_NONE`); `pdl`: as programmatic
    /// dependent launches (each kernel waits for the one before it itself).
    pub(super) fn enqueue_numbering(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        pdl: bool,
    ) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let n = b.width * b.height;
        let (w, nn) = (b.width as u32, n as u32);
        let nblocks = blocks_for(n, SCAN_BLOCK);
        let cfg = self.stride(n);
        timed(timer, stream, "segment_relabel", || {
            let mut l = ExLaunch::new(stream, &self.f_minpix, pdl);
            l.arg(&p.comp).arg(&p.minpix).arg(&w).arg(&nn);
            // SAFETY: grid-stride over pixels < n; comp values are roots < n.
            unsafe { l.launch(cfg) }?;
            let mut l = ExLaunch::new(stream, &self.f_scan_count, pdl);
            l.arg(&p.comp).arg(&p.minpix).arg(&p.blocksum).arg(&nn);
            // SAFETY: SCAN_BLOCK threads per block, one block sum each (blocksum has nblocks).
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = ExLaunch::new(stream, &self.f_scan_blocks, pdl);
            l.arg(&p.blocksum).arg(&nblocks).arg(&p.info);
            // SAFETY: a single block scanning nblocks entries.
            unsafe {
                l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 })
            }?;
            let mut l = ExLaunch::new(stream, &self.f_scan_label, pdl);
            l.arg(&p.comp).arg(&p.minpix).arg(&p.blocksum).arg(&p.rootlabel).arg(&nn);
            // SAFETY: as scan_count; rootlabel is indexed by roots < n.
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = ExLaunch::new(stream, &self.f_labels, pdl);
            l.arg(&p.comp).arg(&p.rootlabel).arg(&p.labels).arg(&nn);
            // SAFETY: grid-stride over pixels < n.
            unsafe { l.launch(cfg) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues the labels of hierarchy `level` (0: one segment per pixel; `levels() - 1` or
    /// more: the final segmentation) of the last segmented frame, without recomputing it.
    /// [`SegmentGpu::download`] then returns that level.
    pub fn enqueue_level(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        level: u32,
    ) -> Result<(), OpError> {
        let Some(mut prod) = self.produced.get() else {
            return Err(OpError::InvalidParam("enqueue_level needs a segmented frame (call enqueue)".into()));
        };
        prod.level = Some(level);
        self.produced.set(Some(prod));
        let n = prod.width * prod.height;
        let total = NCTL as u32 - 1;
        let Some(b) = self.bufs.as_ref().filter(|_| n > 0) else { return Ok(()) };
        let p = b.p;
        let nn = n as u32;
        timer.time(stream, "segment_relabel", || {
            let mut l = stream.launch_builder(&self.f_level_threshold);
            l.arg(&p.mctl).arg(&total).arg(&level).arg(&p.info);
            // SAFETY: one thread reads mctl[1..=total] (total < NCTL) and writes info[1].
            unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }?;
            let mut l = stream.launch_builder(&self.f_level_comp);
            l.arg(&p.comp).arg(&p.link).arg(&p.round).arg(&p.minpix).arg(&p.info).arg(&nn);
            // SAFETY: grid-stride over pixels < n; link chains end at never-absorbed roots.
            unsafe { l.launch(self.stride(n)) }?;
            Ok(())
        })?;
        Ok(self.enqueue_numbering(stream, &mut Some(timer), false)?)
    }

    /// Levels (rounds that merged) and per-phase use from the counters.
    /// `frontier`: each round's frontier count; `info`: the op's info words (`segment_finish`
    /// reports a phase it left undone in `info[2 + phase]`); `hand`: `FINISH_FRONTIER`.
    pub(super) fn read_rounds(ctl: &[u32], mctl: &[u32], frontier: &[u32], info: &[u32], prod: &Produced, hand: u32) -> (Vec<u16>, RoundsUsed) {
        let firsts = [1, prod.max_rounds + 1];
        let mut used = RoundsUsed::default();
        let mut levels = Vec::new();
        for (ph, &first) in firsts.iter().enumerate() {
            // With segment_finish the phase ran on past its launched rounds.
            let cap = if prod.finish { prod.full[ph] } else { prod.caps[ph] };
            for i in 0..cap {
                let r = (first + i) as usize;
                if ctl.get(r).is_some_and(|&c| c > 0) {
                    used.used[ph] = i + 1;
                }
                if mctl.get(r).is_some_and(|&c| c > 0) {
                    levels.push(r as u16);
                }
            }
            let left = prod.finish && prod.caps[ph] < cap && info.get(2 + ph).is_some_and(|&f| f != 0);
            used.capped[ph] = left || (cap > 0 && ctl.get((first + cap - 1) as usize).is_some_and(|&c| c > 0));
            // The first round after which at most `hand` frontier pixels were left.
            let last = used.used[ph] + 1;
            used.handoff[ph] = (1..last)
                .find(|&i| frontier.get((first + i - 1) as usize).is_some_and(|&f| f <= hand))
                .unwrap_or(last)
                .min(cap.max(1));
        }
        (levels, used)
    }

    /// Blocking readback of the last enqueued frame (or level).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<SegmentOutput, OpError> {
        self.download_with(stream, None)
    }

    pub(super) fn download_with(
        &self,
        stream: &Arc<CudaStream>,
        hier: Option<&mut Option<SegmentHierarchy>>,
    ) -> Result<SegmentOutput, OpError> {
        let Some(mut p) = self.produced.get() else {
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
                has_rounds: true,
            });
        };
        // Round counters, each round's frontier (C_FRONTIER is the counts' first row), the
        // rounds with a giant tree ([`Body::giant`]) and the info words (the segment count).
        let read = |p: &Produced| -> Result<FrameCounts, OpError> {
            let ctl = stream.clone_dtoh(&b.ctl)?;
            let mctl = stream.clone_dtoh(&b.mctl)?;
            let frontier = stream.clone_dtoh(&b.counts.slice(0..NCTL))?;
            let giants = stream.clone_dtoh(&b.counts.slice(C_GIANT as usize * NCTL..(C_GIANT as usize + 1) * NCTL))?;
            let info = stream.clone_dtoh(&b.info)?;
            stream.synchronize()?;
            let (levels, used) = Self::read_rounds(&ctl, &mctl, &frontier, &info, p, self.finish_frontier);
            Ok(FrameCounts { levels, used, giant: giant_masks(&giants, p.max_rounds), info })
        };
        let max_rounds = p.max_rounds;
        let FrameCounts { mut levels, mut used, giant: mut giants, mut info } = read(&p)?;
        // A frame that hit its adaptive caps (video that changed) is run again with larger caps
        // (doubled, up to the parameters'), so every frame is the exact result.
        let mut rerun = false;
        while p.level.is_none() && (used.capped[0] || used.capped[1]) {
            let Some(full) = self.last_body.get() else { break };
            let mut caps = p.caps;
            for ((c, &capped), &most) in caps.iter_mut().zip(&used.capped).zip(&full.caps) {
                if capped {
                    *c = c.saturating_mul(2).max(self.round_step).min(most);
                }
            }
            if caps == p.caps {
                break;
            }
            if !rerun {
                self.reruns.set(self.reruns.get() + 1);
                rerun = true;
            }
            log::debug!("segmentation: frame needed more rounds than {:?}, running it again with {caps:?}", p.caps);
            self.enqueue_body(stream, &mut None, &Body { caps, ..full })?;
            p.caps = caps;
            self.produced.set(Some(p));
            FrameCounts { levels, used, giant: giants, info } = read(&p)?;
        }
        let labels = self.labels_readback.borrow_mut().fetch(stream, &b.labels, n)?;
        self.hint.set(Some(used));
        if p.level.is_none() {
            let mut recent = self.recent.borrow_mut();
            if recent.len() == ADAPTIVE_HISTORY {
                recent.pop_front();
            }
            // What this frame wants launched: the rounds before the hand-off to segment_finish,
            // or the rounds it used plus a margin; the rounds that walked a giant tree.
            recent.push_back(Recent {
                rounds: std::array::from_fn(|i| {
                    if p.finish { used.handoff[i].max(1) } else { used.used[i] + ADAPTIVE_MARGIN }
                }),
                giant: giants,
            });
        }
        let ms_first = max_rounds + 1;
        let ms = levels.iter().filter(|&&r| u32::from(r) >= ms_first).count() as u32;
        let top = levels.len() as u32;
        if let Some(hs) = hier {
            let parent = stream.clone_dtoh(&b.link.slice(0..n))?;
            let round = stream.clone_dtoh(&b.round.slice(0..n))?;
            stream.synchronize()?;
            *hs = Some(SegmentHierarchy {
                width: p.width,
                height: p.height,
                parent,
                round,
                level_rounds: levels.clone(),
            });
        }
        Ok(SegmentOutput {
            labels: Image::from_vec(p.width, p.height, labels)?,
            segment_count: info[0] as usize,
            rounds: top - ms,
            min_size_rounds: ms,
            capped: used.capped[0] || used.capped[1],
            level: p.level.map_or(top, |l| l.min(top)),
            has_rounds: true,
        })
    }

    /// Blocking readback of the labels and the whole hierarchy of the last segmented frame.
    pub fn download_hierarchy(&self, stream: &Arc<CudaStream>) -> Result<(SegmentOutput, SegmentHierarchy), OpError> {
        let mut h = None;
        let out = self.download_with(stream, Some(&mut h))?;
        let p = self.produced.get().map_or((0, 0), |p| (p.width, p.height));
        let hier = h.unwrap_or(SegmentHierarchy {
            width: p.0,
            height: p.1,
            parent: Vec::new(),
            round: Vec::new(),
            level_rounds: Vec::new(),
        });
        Ok((out, hier))
    }

    /// The edge weights of the last enqueue, `4 * pixels` (right, down, down-right, down-left of
    /// each pixel; +inf outside the image), for parity tests of the blur and edge graph.
    pub fn download_weights(&self, stream: &Arc<CudaStream>) -> Result<Vec<f64>, OpError> {
        let n = self.produced.get().map_or(0, |p| p.width * p.height);
        match self.bufs.as_ref() {
            Some(b) if n > 0 => Ok(stream.clone_dtoh(&b.w4.slice(0..4 * n))?),
            _ => Ok(Vec::new()),
        }
    }
}

/// Uploads `data` (packed, `channels` samples a pixel), segments it on the GPU and downloads
/// the labels.
fn run_packed(
    gpu: &GpuContext,
    data: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    params: &SegmentParams,
) -> Result<SegmentOutput, OpError> {
    let mut op = SegmentGpu::new(gpu)?;
    let stream = gpu.new_stream()?;
    let mut timer = KernelTimer::new();
    let input = upload_packed(&stream, data, width, height)?;
    op.enqueue_channels(&stream, &mut timer, &input, width, height, channels, params)?;
    op.download(&stream)
}

/// Uploads a grey image, segments it on the GPU and downloads the labels (CLI and tests).
pub fn segment_gpu(gpu: &GpuContext, img: ImageView<'_, u8>, params: &SegmentParams) -> Result<SegmentOutput, OpError> {
    run_packed(gpu, &pack_gray(img), img.width(), img.height(), 1, params)
}

/// Uploads an RGB image, segments it on the GPU and downloads the labels.
pub fn segment_gpu_rgb(
    gpu: &GpuContext,
    img: ImageView<'_, [u8; 3]>,
    params: &SegmentParams,
) -> Result<SegmentOutput, OpError> {
    run_packed(gpu, &pack_rgb(img), img.width(), img.height(), 3, params)
}
